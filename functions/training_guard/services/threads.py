"""One living thread per job and channel (Slack app mode): which message is the job's parent, made exactly once.

The first notification about a job in a channel posts the job's card as a parent message; every later one replies
in its thread and updates the parent in place. The thread's `ts` lives in the state table, one record per (job,
channel), `thread#<job>#<channel>` (a member's job carries its account, `<account>/<job>`, as its ledger keys do).

Creating the parent is exactly once, even when two notifications about a new job are delivered at once (two
messages, two notifier invocations): the record is claimed with a conditional put *before* anything is posted,
as the ledger claims a transition (adapters/ledger.py):

1. Claim: written only when there is no record, or the claim in it outlived its lease (its holder died).
   - granted: post the parent, then record its `ts` (conditional on still holding the claim), and the thread exists;
     a failed post releases the claim, so the retry of this message (or another one) claims it again;
   - the record holds a `ts` already: reply in that thread;
   - another attempt holds an unexpired claim: it is posting the parent now. Wait for its `ts` (reading the record
     every POLL_SECONDS) for as long as its lease and this invocation's time allow, at most PARENT_WAIT_SECONDS;
     then reply in the thread. Still not posted: `ParentBusy`, a `TransitionBusy`, so the message goes back to its
     queue and comes back after the queue's visibility timeout, by when the holder has posted or its lease ran out.
2. The lease is the holder's invocation time left plus a clock margin (`leases.lease_for`, as for the ledger's
   claims): a claim is taken over only once its holder can no longer be posting. Should a holder outlive its lease
   anyway (clocks further apart than the margin) and another attempt post a second parent, the first `ts`
   recorded wins; the loser's parent is reported as an orphan (`Thread.orphan_ts`) for the caller to log.

Updating the parent in place: every card carries a version (the caller's: the notification's time in
milliseconds); `advance_card` raises the record's version only for a newer card, and only the notification that
raised it edits the parent, so a late delivery of an older notification never turns the card back. (Two updates
within the same instant may still land in either order; the next notification sets the card right.)

Pure: no I/O of its own. The record's store is a port (`ThreadStorePort`; adapters/threads.py is DynamoDB's), and
posting the parent, the clock and the wait are the caller's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from training_guard.domain.accounts import scoped
from training_guard.domain.errors import TransitionBusy

KEY_PREFIX = "thread#"
# One attempt at a post, as the Slack sender times it (adapters/slack.py ATTEMPT_SECONDS: one second of pacing, the
# 10 s HTTP timeout, a second of margin): a holder alive and not rate-limited has posted within it.
PARENT_WAIT_SECONDS = 12.0
POLL_SECONDS = 0.25  # between two reads of the record while another attempt posts the parent


def thread_key(job: str, channel: str, account: str | None = None) -> str:
    """The record of one job's thread in one channel; `account` for a member's job (None: the guard's own)."""
    return f"{KEY_PREFIX}{scoped(account, job) if account else job}#{channel}"


@dataclass(frozen=True)
class ThreadRecord:
    """What the state table holds for one (job, channel)."""

    ts: str | None = None  # the parent's; None while a claim is being posted
    holder: str | None = None  # the attempt that claimed the parent, while it posts
    lease_until: int | None = None  # epoch seconds; the claim may be taken over after it
    card_version: int = 0  # the version of the card the parent shows


class ClaimOutcome(StrEnum):
    GRANTED = "granted"  # ours: post the parent
    POSTED = "posted"  # the parent exists: reply in its thread
    BUSY = "busy"  # another attempt is posting the parent


@dataclass(frozen=True)
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
        """Record the posted parent if `holder` still holds the claim; the record as it stands after (ours, or the
        one that took the claim over and posted first)."""
        ...

    def release(self, key: str, *, holder: str) -> None:
        """Give up a claim `holder` still holds (its post failed); nothing if it holds none."""
        ...

    def advance_card(self, key: str, version: int) -> bool:
        """Raise the parent's card version to `version` if it is newer than the recorded one: True when the caller
        should update the parent."""
        ...


@dataclass(frozen=True)
class Thread:
    ts: str  # the parent's: reply with it as thread_ts, update it in place
    created: bool  # this call posted the parent (its card is current: no update needed)
    waited: bool = False  # another attempt was posting the parent; this call waited for it
    orphan_ts: str | None = None  # a parent this call posted that lost to another (see the module's docstring)


class ParentBusy(TransitionBusy):
    """Another attempt is posting the job's parent and has not recorded it within the wait: come back later."""


@dataclass(frozen=True)
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
    """The job's thread in the channel: the recorded parent, or one this call posts (exactly once per job and
    channel), or the one another attempt is posting right now. `post_parent` posts the card and returns its ts; it
    raises on failure (the claim is released and the error propagates)."""
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
            # The holder's post failed and it let the claim go: this message is retried and claims it then.
            break
        elapsed = waiting.monotonic() - started
        if elapsed + waiting.poll > budget:
            break
        waiting.sleep(waiting.poll)
    raise ParentBusy(key)


def lease_expiry(now: datetime, lease_seconds: int) -> int:
    """The epoch second after which a claim made `now` may be taken over."""
    return int((now + timedelta(seconds=lease_seconds)).timestamp())
