"""Exactly once: claim a key, act, then complete it, or release it when the act failed (docs/design/exactly-once.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
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
    """What `once` found, and what the block says of its work."""

    state: Claim
    outcome: str  # recorded when the block completes it
    released: bool = False
    unrecorded: GuardError | None = None  # the act is done but completing failed (only with keep_if_unrecorded)

    @property
    def granted(self) -> bool:
        return self.state is Claim.GRANTED

    def release(self) -> None:
        """The work was not done (a failure reported rather than raised): a later attempt may claim the key."""
        self.released = True


@contextmanager
def once(
    ledger: Marks,
    key: str,
    *,
    now: datetime,
    lease_seconds: int,
    ttl_seconds: int,
    outcome: str,
    acquire: Callable[[], Claim] | None = None,
    keep_if_unrecorded: bool = False,
) -> Iterator[Held]:
    """`with once(ledger, key, ...) as held:` acts only when `held.granted`. Leaving the block completes the key with
    `held.outcome`; an exception from the block, or `held.release()`, releases it; a DONE or BUSY claim is left as it
    is. `acquire` replaces the plain claim (the responder waits out a short BUSY). With `keep_if_unrecorded`, a
    failure to complete is kept on `held.unrecorded` instead of raised: the act is done, and the claim keeps its
    lease so that a retry does not act again before it runs out."""
    state = acquire() if acquire is not None else ledger.claim(key, now=now, lease_seconds=lease_seconds)
    held = Held(state, outcome)
    if not held.granted:
        yield held
        return
    try:
        yield held
    except BaseException:
        ledger.release(key)
        raise
    if held.released:
        ledger.release(key)
        return
    try:
        ledger.complete(key, now=now, ttl_seconds=ttl_seconds, outcome=held.outcome)
    except GuardError as exc:
        if not keep_if_unrecorded:
            raise
        held.unrecorded = exc
