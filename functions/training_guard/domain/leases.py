"""How long a claim in the ledger is held: until the invocation that made it can no longer be acting.

Light on purpose: every function's wiring imports it, and the Slack notifier must not load the policy."""

from __future__ import annotations

# Without an invocation to measure (local runs), a claim's lease: longer than any function's timeout.
DEFAULT_LEASE_SECONDS = 120
# Added to the invocation's remaining time: clocks of two Lambda hosts may differ by this much. The
# retry of a timed-out asynchronous invocation comes about 60 s later, after a 30 s timeout's lease.
LEASE_MARGIN_SECONDS = 10


def lease_for(remaining_ms: int | None) -> int:
    """Seconds: the invocation's `remaining_ms`, rounded up, plus the clock margin (a default when unknown)."""
    if remaining_ms is None:
        return DEFAULT_LEASE_SECONDS
    return -(-max(remaining_ms, 0) // 1000) + LEASE_MARGIN_SECONDS
