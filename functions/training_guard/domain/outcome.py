"""What the guard did about a decision: the outcome of a reaction, which totals, digests and messages read."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    STOPPED = "stopped"
    WOULD_STOP = "would_stop"
    DEFERRED = "deferred"
    NOTIFIED = "notified"
    ALREADY_ENDED = "already_ended"  # asked to stop, but the job had left InProgress already
    ALREADY_STOPPING = "already_stopping"  # another rule's stop of this job is under way


# The outcomes whose notification says what a stop avoided ("up to"): one that stopped, one that would have.
STOP_OUTCOMES = frozenset({Outcome.STOPPED, Outcome.WOULD_STOP})
