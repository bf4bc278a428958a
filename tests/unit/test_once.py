"""The one exactly-once primitive (services/once.py): every site that claims, completes and releases uses it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime

import pytest

from tests.fakes import FakeLedger
from training_guard.domain.errors import ActionFailed
from training_guard.services.once import Held, once
from training_guard.services.ports import Claim

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
TTL = 3600


def held(
    ledger: FakeLedger, *, acquire: Callable[[], Claim] | None = None, keep_if_unrecorded: bool = False
) -> AbstractContextManager[Held]:
    return once(
        ledger,
        "k",
        now=NOW,
        lease_seconds=60,
        ttl_seconds=TTL,
        outcome="done",
        acquire=acquire,
        keep_if_unrecorded=keep_if_unrecorded,
    )


def test_a_granted_block_that_ends_completes_the_key_with_its_outcome_for_the_ttl() -> None:
    ledger = FakeLedger()
    with held(ledger) as claim:
        assert claim.granted
        claim.outcome = "delivered"
    assert ledger.items["k"] == {"state": "done", "outcome": "delivered", "expires_at": NOW.timestamp() + TTL}
    with held(ledger) as again:
        assert (again.state, again.granted) == (Claim.DONE, False)


def test_an_exception_in_the_block_releases_the_key_and_propagates() -> None:
    ledger = FakeLedger()
    with pytest.raises(RuntimeError, match="stop failed"), held(ledger):
        raise RuntimeError("stop failed")
    assert "k" not in ledger.items
    with held(ledger) as retry:
        assert retry.granted  # Lambda's retry may act


def test_a_failure_reported_rather_than_raised_releases_the_key_too() -> None:
    ledger = FakeLedger()
    with held(ledger) as claim:
        claim.release()
    assert "k" not in ledger.items


def test_a_busy_or_done_key_is_yielded_as_it_is_and_left_alone() -> None:
    ledger = FakeLedger()
    ledger.claim("k", now=NOW, lease_seconds=60)  # another attempt holds it
    with held(ledger) as busy:
        assert busy.state is Claim.BUSY
    assert ledger.items["k"]["state"] == "in_progress"  # not released: it is not ours
    with pytest.raises(RuntimeError), held(ledger):
        raise RuntimeError("the block fails")
    assert ledger.items["k"]["state"] == "in_progress"


def test_acquire_replaces_the_plain_claim() -> None:
    ledger = FakeLedger()
    with held(ledger, acquire=lambda: Claim.DONE) as claim:
        assert claim.state is Claim.DONE
    assert ledger.items == {}


class Unrecordable(FakeLedger):
    def complete(self, key: str, *, now: datetime, ttl_seconds: int, outcome: str) -> None:
        raise ActionFailed("complete", RuntimeError("ProvisionedThroughputExceededException"))


def test_a_failure_to_complete_raises_unless_the_act_must_not_be_repeated() -> None:
    with pytest.raises(ActionFailed), held(Unrecordable()):
        pass
    ledger = Unrecordable()
    with held(ledger, keep_if_unrecorded=True) as claim:
        pass
    assert isinstance(claim.unrecorded, ActionFailed)
    assert ledger.items["k"]["state"] == "in_progress"  # the lease is kept: a retry waits it out


def test_a_block_that_names_no_outcome_completes_with_the_one_once_was_given() -> None:
    ledger = FakeLedger()
    with once(ledger, "k", now=NOW, lease_seconds=60, ttl_seconds=TTL, outcome="sent"):
        pass
    assert ledger.items["k"]["outcome"] == "sent"


def test_by_default_a_failure_to_complete_is_raised() -> None:
    with (
        pytest.raises(ActionFailed),
        once(Unrecordable(), "k", now=NOW, lease_seconds=60, ttl_seconds=TTL, outcome="x"),
    ):
        pass
