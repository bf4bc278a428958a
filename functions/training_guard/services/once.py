"""Exactly once: claim a key, act, then complete it, or release it when the act failed (docs/design/exactly-once.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Protocol

from training_guard.domain.errors import GuardError
from training_guard.services.ports import Claim


class Marks(Protocol):
    """The ledger's part that `once` uses (adapters/ledger.DynamoLedger, adapters/accounts.AccountLedger, fakes)."""

    def claim(self, key: str, *, now: datetime, lease_seconds: int) -> Claim: ...

    def complete(self, key: str, *, now: datetime, ttl_seconds: int, outcome: str) -> None: ...

    def release(self, key: str) -> None: ...


@dataclass
class Held:
    state: Claim
    outcome: str
    released: bool = False
    unrecorded: GuardError | None = None  # the act is done but completing failed (only with keep_if_unrecorded)

    @property
    def granted(self) -> bool:
        return self.state is Claim.GRANTED

    def release(self) -> None:
        """The work was not done (a failure reported rather than raised): a later attempt may claim the key."""
        self.released = True


class once:
    """`with once(ledger, key, ...) as held:` acts only when `held.granted`; leaving the block completes the key, an
    exception or `held.release()` releases it (docs/design/exactly-once.md). A class, not a generator: mutation
    testing reaches its body (mutmut 3 leaves decorated functions alone)."""

    def __init__(
        self,
        ledger: Marks,
        key: str,
        *,
        now: datetime,
        lease_seconds: int,
        ttl_seconds: int,
        outcome: str,
        acquire: Callable[[], Claim] | None = None,
        keep_if_unrecorded: bool = False,
    ) -> None:
        self._ledger = ledger
        self._key = key
        self._now = now
        self._lease_seconds = lease_seconds
        self._ttl_seconds = ttl_seconds
        self._outcome = outcome
        self._acquire = acquire
        self._keep_if_unrecorded = keep_if_unrecorded
        self._held: Held | None = None

    def __enter__(self) -> Held:
        if self._acquire is not None:
            state = self._acquire()
        else:
            state = self._ledger.claim(self._key, now=self._now, lease_seconds=self._lease_seconds)
        self._held = Held(state, self._outcome)
        return self._held

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        held = self._held
        if held is None or not held.granted:
            return  # DONE or BUSY: not ours to complete or release
        if kind is not None or held.released:
            self._ledger.release(self._key)
            return  # an exception goes on as it was raised
        try:
            self._ledger.complete(self._key, now=self._now, ttl_seconds=self._ttl_seconds, outcome=held.outcome)
        except GuardError as exc:
            if not self._keep_if_unrecorded:
                raise
            held.unrecorded = exc
