"""Domain errors raised by adapters. They propagate: retries, the DLQ and alarms must see them."""

from __future__ import annotations


class GuardError(Exception):
    """Base class for failures the guard must not swallow."""


class ActionFailed(GuardError):
    """An action on AWS (stop, tag, record, publish) failed after the SDK's own retries."""

    def __init__(self, action: str, cause: BaseException) -> None:
        self.action = action
        super().__init__(f"{action} failed: {cause}")


class TransitionBusy(GuardError):
    """Another attempt holds the transition's lease: not a duplicate, so this delivery must come back later."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"transition {key} is being handled by another attempt; retry later")
