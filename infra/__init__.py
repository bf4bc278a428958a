"""The Training Guard CDK app (synth runs offline: no lookups, no network calls)."""
