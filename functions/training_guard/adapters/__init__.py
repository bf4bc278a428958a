"""Adapters: the only code that talks to AWS. Each takes an injectable client."""
