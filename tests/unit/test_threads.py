"""One parent per job and channel: claimed before it is posted, waited for by whoever comes second."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from tests.fakes_slack_app import FakeThreads
from tests.helpers import NOW
from training_guard.adapters.slack import ATTEMPT_SECONDS
from training_guard.domain.errors import TransitionBusy
from training_guard.services.threads import (
    PARENT_WAIT_SECONDS,
    POLL_SECONDS,
    ParentBusy,
    Thread,
    ThreadRecord,
    Waiting,
    lease_expiry,
    open_thread,
    thread_key,
)

KEY = thread_key("mnist-1", "C0TRAINING")
LEASE = 40
TTL = 35 * 86400


class Clock:
    """A monotonic clock that only sleeps move; `on_sleep` runs at each sleep (another attempt acting meanwhile)."""

    def __init__(self, time_left: float = 900.0, on_sleep: Callable[[int], None] | None = None) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.left = time_left
        self.on_sleep = on_sleep

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep:
            self.on_sleep(len(self.sleeps))

    def waiting(self) -> Waiting:
        return Waiting(monotonic=lambda: self.now, sleep=self.sleep, time_left=lambda: self.left - self.now)


class Poster:
    def __init__(self, ts: str = "1780000001.000001", error: Exception | None = None) -> None:
        self.ts = ts
        self.error = error
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.ts


def open_(
    store: FakeThreads,
    poster: Callable[[], str],
    *,
    holder: str = "me",
    clock: Clock | None = None,
    now: datetime = NOW,
    card_version: int = 1,
) -> Thread:
    return open_thread(
        store,
        KEY,
        post_parent=poster,
        holder=holder,
        now=now,
        lease_seconds=LEASE,
        ttl_seconds=TTL,
        card_version=card_version,
        waiting=(clock or Clock()).waiting(),
    )


def held_by_other(store: FakeThreads, *, lease_seconds: int = LEASE, at: datetime = NOW) -> None:
    store.claim(KEY, holder="other", now=at, lease_seconds=lease_seconds, ttl_seconds=TTL)


def test_the_key_names_the_job_and_the_channel_and_a_members_account() -> None:
    assert thread_key("mnist-1", "C0TRAINING") == "thread#mnist-1#C0TRAINING"
    assert thread_key("mnist-1", "C0TRAINING", account="111122223333") == "thread#111122223333/mnist-1#C0TRAINING"


def test_the_first_notification_posts_the_parent_and_records_its_ts() -> None:
    store, poster = FakeThreads(), Poster()
    assert open_(store, poster) == Thread(ts=poster.ts, created=True)
    assert store.items[KEY] == ThreadRecord(ts=poster.ts, card_version=1)
    assert store.expires[KEY] == NOW.timestamp() + TTL


def test_every_later_notification_replies_in_the_recorded_thread_without_posting() -> None:
    store, poster = FakeThreads(), Poster()
    open_(store, poster)
    later = open_(store, Poster("other-ts"), holder="someone-else", now=NOW + timedelta(hours=3))
    assert later == Thread(ts=poster.ts, created=False)
    assert poster.calls == 1


def test_a_failed_post_lets_the_claim_go_so_the_retry_posts_the_parent() -> None:
    store = FakeThreads()
    with pytest.raises(ConnectionError):
        open_(store, Poster(error=ConnectionError("slack down")))
    assert KEY not in store.items
    retry = Poster("retry-ts")
    assert open_(store, retry, holder="retry") == Thread(ts="retry-ts", created=True)


def test_the_second_of_two_at_once_waits_for_the_firsts_parent_and_replies_in_it() -> None:
    store, poster = FakeThreads(), Poster()
    held_by_other(store)

    def the_other_posts(sleeps: int) -> None:
        if sleeps == 3:
            store.record_parent(KEY, holder="other", ts="first-ts", card_version=1, now=NOW, ttl_seconds=TTL)

    clock = Clock(on_sleep=the_other_posts)
    assert open_(store, poster, clock=clock) == Thread(ts="first-ts", created=False, waited=True)
    assert poster.calls == 0
    assert clock.sleeps == [POLL_SECONDS] * 3


def test_a_parent_never_posted_within_the_wait_sends_the_message_back_to_its_queue() -> None:
    store, poster, clock = FakeThreads(), Poster(), Clock()
    held_by_other(store)
    with pytest.raises(ParentBusy) as busy:
        open_(store, poster, clock=clock)
    assert isinstance(busy.value, TransitionBusy)  # the notifier's retry path: back to the queue, never dropped
    assert poster.calls == 0
    assert PARENT_WAIT_SECONDS - POLL_SECONDS <= clock.now <= PARENT_WAIT_SECONDS


def test_the_wait_ends_with_the_holders_lease() -> None:
    store, clock = FakeThreads(), Clock()
    held_by_other(store, lease_seconds=2)
    with pytest.raises(ParentBusy):
        open_(store, Poster(), clock=clock)
    assert clock.now <= 2.0


def test_the_wait_ends_before_the_invocations_time_does() -> None:
    store, clock = FakeThreads(), Clock(time_left=1.0)
    held_by_other(store)
    with pytest.raises(ParentBusy):
        open_(store, Poster(), clock=clock)
    assert clock.now <= 1.0


def test_a_holder_that_gave_up_ends_the_wait_at_once() -> None:
    store, clock = FakeThreads(), Clock()
    held_by_other(store)
    clock.on_sleep = lambda n: store.release(KEY, holder="other")
    with pytest.raises(ParentBusy):
        open_(store, Poster(), clock=clock)
    assert clock.sleeps == [POLL_SECONDS]


def test_a_claim_whose_holder_died_is_taken_over_after_its_lease() -> None:
    store, poster = FakeThreads(), Poster("taker-ts")
    held_by_other(store, at=NOW - timedelta(seconds=LEASE + 1))
    assert open_(store, poster) == Thread(ts="taker-ts", created=True)
    assert store.items[KEY].ts == "taker-ts"


def test_a_claim_still_within_its_lease_is_not_taken_over() -> None:
    store, poster = FakeThreads(), Poster()
    held_by_other(store, at=NOW - timedelta(seconds=LEASE - 1))
    with pytest.raises(ParentBusy):
        open_(store, poster, clock=Clock(time_left=0.0))
    assert poster.calls == 0


def test_a_holder_outrun_by_its_lease_keeps_the_first_recorded_parent_and_reports_its_own_as_orphan() -> None:
    store = FakeThreads()

    def slow_post() -> str:
        # While this attempt posts, its lease runs out; another takes the claim over, posts and records first.
        later = NOW + timedelta(seconds=LEASE + 1)
        store.claim(KEY, holder="taker", now=later, lease_seconds=LEASE, ttl_seconds=TTL)
        store.record_parent(KEY, holder="taker", ts="taker-ts", card_version=1, now=later, ttl_seconds=TTL)
        return "slow-ts"

    assert open_(store, slow_post) == Thread(ts="taker-ts", created=False, orphan_ts="slow-ts")
    assert store.items[KEY].ts == "taker-ts"


def test_two_notifications_at_once_make_one_parent() -> None:
    store = FakeThreads()
    start = threading.Barrier(2)
    posted: list[str] = []
    results: dict[str, Thread] = {}

    def notify(holder: str) -> None:
        def post() -> str:
            posted.append(holder)
            threading.Event().wait(0.05)  # a post takes a while: the other attempt claims meanwhile
            return f"{holder}-ts"

        start.wait()
        clock = Waiting(monotonic=time.monotonic, sleep=time.sleep, time_left=lambda: 5.0)
        results[holder] = open_thread(
            store,
            KEY,
            post_parent=post,
            holder=holder,
            now=NOW,
            lease_seconds=LEASE,
            ttl_seconds=TTL,
            card_version=1,
            waiting=clock,
        )

    workers = [threading.Thread(target=notify, args=(name,)) for name in ("a", "b")]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(posted) == 1
    assert {r.ts for r in results.values()} == {f"{posted[0]}-ts"}
    assert sorted(r.created for r in results.values()) == [False, True]


def test_the_card_moves_forward_only() -> None:
    store = FakeThreads()
    open_(store, Poster(), card_version=100)
    assert store.advance_card(KEY, 200) is True
    assert store.advance_card(KEY, 150) is False  # a late delivery of an older notification
    assert store.advance_card(KEY, 200) is False
    assert store.items[KEY].card_version == 200
    assert store.advance_card(thread_key("no-such-job", "C0TRAINING"), 300) is False


def test_the_wait_is_one_post_attempt_of_the_slack_sender() -> None:
    assert PARENT_WAIT_SECONDS == ATTEMPT_SECONDS


def test_a_claims_lease_runs_to_the_second() -> None:
    assert lease_expiry(NOW, 40) == int(NOW.timestamp()) + 40
