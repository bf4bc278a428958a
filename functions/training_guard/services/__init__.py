"""The responder, the sweeps, chat delivery, the digest and clicks, over ports.py."""
