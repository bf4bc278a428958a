"""One living thread per job and channel (Slack app mode): which message is the job's parent, made exactly once.

Pure: the record's store is a port. The claim, the wait and the card's version: docs/design/chat-delivery.md."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from training_guard.config.frozen import frozen
from training_guard.domain.accounts import scoped
from training_guard.domain.errors import TransitionBusy

KEY_PREFIX = "thread#"
# One post attempt as adapters/slack.py ATTEMPT_SECONDS times it: a live holder has posted within it.
PARENT_WAIT_SECONDS = 12.0
POLL_SECONDS = 0.25


def thread_key(job: str, channel: str, account: str | None = None) -> str:
    return f"{KEY_PREFIX}{scoped(account, job) if account else job}#{channel}"


@frozen
class ThreadRecord:
    ts: str | None = None  # the parent's; None while a claim is being posted
    holder: str | None = None
    lease_until: int | None = None  # epoch seconds; the claim may be taken over after it
    card_version: int = 0


class ClaimOutcome(StrEnum):
    GRANTED = "granted"
    POSTED = "posted"  # the parent exists: reply in its thread
    BUSY = "busy"  # another attempt is posting the parent


@frozen
class ParentClaim:
    outcome: ClaimOutcome
    record: ThreadRecord | None = None  # what was there (POSTED, BUSY)


class ThreadStorePort(Protocol):
    def read(self, key: str) -> ThreadRecord | None:
        """The record as it is now (a strongly consistent read)."""
        ...

    def claim(self, key: str, *, holder: str, now: datetime, lease_seconds: int, ttl_seconds: int) -> ParentClaim:
        """Claim the parent for `lease_seconds`: only when there is no record or its claim's lease ran out."""
        ...

    def record_parent(
        self, key: str, *, holder: str, ts: str, card_version: int, now: datetime, ttl_seconds: int
    ) -> ThreadRecord:
        """Record the posted parent if `holder` still holds the claim; returns the record as it stands after."""
        ...

    def release(self, key: str, *, holder: str) -> None:
        """Give up a claim `holder` still holds (its post failed); nothing if it holds none."""
        ...

    def advance_card(self, key: str, version: int) -> bool:
        """Raise the card version to `version` if newer: True when the caller should update the parent."""
        ...


@frozen
class Thread:
    ts: str  # the parent's: reply with it as thread_ts, update it in place
    created: bool  # this call posted the parent (its card is current: no update needed)
    waited: bool = False
    orphan_ts: str | None = None  # a parent this call posted that lost to another


class ParentBusy(TransitionBusy):
    """Another attempt is posting the job's parent and has not recorded it within the wait: come back later."""


@frozen
class Waiting:
    """How the caller waits: its clock (seconds, monotonic), its sleep, and its invocation's time left."""

    monotonic: Callable[[], float]
    sleep: Callable[[float], None]
    time_left: Callable[[], float]
    max_wait: float = PARENT_WAIT_SECONDS
    poll: float = POLL_SECONDS


def open_thread(
    store: ThreadStorePort,
    key: str,
    *,
    post_parent: Callable[[], str],
    holder: str,
    now: datetime,
    lease_seconds: int,
    ttl_seconds: int,
    card_version: int,
    waiting: Waiting,
) -> Thread:
    """The job's thread in the channel, its parent posted once. Raises `ParentBusy`, or what `post_parent` raised."""
    existing = store.read(key)
    if existing is not None and existing.ts:
        return Thread(ts=existing.ts, created=False)
    claim = store.claim(key, holder=holder, now=now, lease_seconds=lease_seconds, ttl_seconds=ttl_seconds)
    if claim.outcome is ClaimOutcome.POSTED and claim.record is not None and claim.record.ts:
        return Thread(ts=claim.record.ts, created=False)
    if claim.outcome is ClaimOutcome.GRANTED:
        return _post(store, key, post_parent, holder=holder, now=now, ttl=ttl_seconds, version=card_version)
    held = claim.record.lease_until if claim.record is not None else None
    return _wait_for_parent(store, key, now=now, lease_until=held, waiting=waiting)


def _post(
    store: ThreadStorePort,
    key: str,
    post_parent: Callable[[], str],
    *,
    holder: str,
    now: datetime,
    ttl: int,
    version: int,
) -> Thread:
    try:
        ts = post_parent()
    except BaseException:
        store.release(key, holder=holder)
        raise
    recorded = store.record_parent(key, holder=holder, ts=ts, card_version=version, now=now, ttl_seconds=ttl)
    if recorded.ts == ts or not recorded.ts:
        return Thread(ts=ts, created=True)
    return Thread(ts=recorded.ts, created=False, orphan_ts=ts)


def _wait_for_parent(
    store: ThreadStorePort, key: str, *, now: datetime, lease_until: int | None, waiting: Waiting
) -> Thread:
    """Wait for the holder's `ts`: no longer than the holder's lease, PARENT_WAIT_SECONDS, or this invocation's time."""
    lease_left = (lease_until - now.timestamp()) if lease_until is not None else 0.0
    budget = max(0.0, min(waiting.max_wait, lease_left, waiting.time_left()))
    started = waiting.monotonic()
    while True:
        record = store.read(key)
        if record is not None and record.ts:
            return Thread(ts=record.ts, created=False, waited=True)
        if record is None:
            # The holder's post failed and it released the claim: the retry claims it.
            break
        elapsed = waiting.monotonic() - started
        if elapsed + waiting.poll > budget:
            break
        waiting.sleep(waiting.poll)
    raise ParentBusy(key)


def lease_expiry(now: datetime, lease_seconds: int) -> int:
    return int((now + timedelta(seconds=lease_seconds)).timestamp())
