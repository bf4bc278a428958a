"""The ledger's contract, run against the DynamoDB adapter on moto *and* the fake the unit tests use.

The fake decides most unit tests; if it drifted from the adapter (a takeover the table refuses, a TTL
in the past), those tests would prove nothing. Every behaviour here holds for both.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

import pytest
from botocore.exceptions import ClientError

from tests.fakes import FakeLedger
from tests.helpers import NOW
from training_guard import contract
from training_guard.adapters.ledger import DynamoLedger
from training_guard.domain.errors import ActionFailed
from training_guard.services.ports import Claim, LedgerPort, StopRecord, StopSpend
from training_guard_local.emulator import TABLE, Emulation

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


pytestmark = pytest.mark.integration

KEY = "t#mnist-1#debugger#VanishingGradient#IssuesFound"


class Tables:
    """Reads the stored items of whichever ledger is under test."""

    def __init__(self, ledger: LedgerPort, dynamodb: Any | None) -> None:
        self.ledger = ledger
        self.dynamodb = dynamodb

    def item(self, key: str) -> dict[str, Any]:
        assert self.dynamodb is not None
        stored: dict[str, Any] = self.dynamodb.get_item(
            TableName=TABLE, Key={contract.TABLE_PARTITION_KEY: {"S": key}}
        )["Item"]
        return stored

    def expires_at(self, key: str) -> float:
        if self.dynamodb is None:
            assert isinstance(self.ledger, FakeLedger)
            return float(str(self.ledger.items[key]["expires_at"]))
        item = self.dynamodb.get_item(TableName=TABLE, Key={contract.TABLE_PARTITION_KEY: {"S": key}})["Item"]
        return float(item[contract.TABLE_TTL_ATTRIBUTE]["N"])


@pytest.fixture(params=["dynamodb", "fake"])
def tables(request: pytest.FixtureRequest) -> Iterator[Tables]:
    if request.param == "fake":
        yield Tables(FakeLedger(), None)
        return
    with Emulation() as aws:
        dynamodb = aws.client("dynamodb")
        yield Tables(DynamoLedger(dynamodb, TABLE), dynamodb)


def test_a_claim_is_granted_then_busy_until_its_lease_runs_out_then_taken_over(tables: Tables) -> None:
    ledger = tables.ledger
    assert ledger.claim(KEY, now=NOW, lease_seconds=40) is Claim.GRANTED
    assert ledger.claim(KEY, now=NOW + timedelta(seconds=1), lease_seconds=40) is Claim.BUSY
    assert ledger.claim(KEY, now=NOW + timedelta(seconds=40), lease_seconds=40) is Claim.BUSY
    assert ledger.claim(KEY, now=NOW + timedelta(seconds=41), lease_seconds=40) is Claim.GRANTED  # the holder died


def test_a_completed_transition_is_done_for_ever_after_not_busy(tables: Tables) -> None:
    ledger = tables.ledger
    assert ledger.claim(KEY, now=NOW, lease_seconds=40) is Claim.GRANTED
    ledger.complete(KEY, now=NOW, ttl_seconds=35 * 86400, outcome="stopped")
    assert ledger.claim(KEY, now=NOW + timedelta(seconds=1), lease_seconds=40) is Claim.DONE
    assert ledger.claim(KEY, now=NOW + timedelta(days=30), lease_seconds=40) is Claim.DONE


def test_a_done_record_expires_its_ttl_after_now_not_before(tables: Tables) -> None:
    ledger = tables.ledger
    ledger.claim(KEY, now=NOW, lease_seconds=40)
    ledger.complete(KEY, now=NOW, ttl_seconds=35 * 86400, outcome="stopped")
    assert tables.expires_at(KEY) == NOW.timestamp() + 35 * 86400


def test_a_released_claim_can_be_claimed_again_at_once(tables: Tables) -> None:
    ledger = tables.ledger
    ledger.claim(KEY, now=NOW, lease_seconds=40)
    ledger.release(KEY)
    assert ledger.claim(KEY, now=NOW, lease_seconds=40) is Claim.GRANTED


def test_releasing_a_done_transition_keeps_it_done(tables: Tables) -> None:
    ledger = tables.ledger
    ledger.claim(KEY, now=NOW, lease_seconds=40)
    ledger.complete(KEY, now=NOW, ttl_seconds=3600, outcome="stopped")
    ledger.release(KEY)  # a late release (our own earlier attempt) is harmless
    assert ledger.claim(KEY, now=NOW, lease_seconds=40) is Claim.DONE


def record(rule: str, at_offset: int = 0) -> StopRecord:
    return StopRecord(job="mnist-1", rule=rule, reason="why", at=NOW + timedelta(seconds=at_offset), event_id="e1")


def first(ledger: LedgerPort, rule: str = "VanishingGradient", *, at: int = 0, lease: int = 120) -> bool:
    return ledger.claim_first_stop(
        record(rule, at), now=NOW + timedelta(seconds=at), lease_seconds=lease, ttl_seconds=3600, check_mutes=True
    )


def test_the_stops_one_write_records_it_with_a_lease_once(tables: Tables) -> None:
    ledger = tables.ledger
    assert first(ledger)
    assert ledger.get_stop("mnist-1") == replace(record("VanishingGradient"), lease_until=int(NOW.timestamp()) + 120)
    assert not first(ledger)  # a duplicate: the longer way
    assert not first(ledger, "LossNotDecreasing")  # another rule's: the longer way


def test_a_stop_record_within_its_lease_is_busy_for_the_same_rule_then_taken_over(tables: Tables) -> None:
    ledger = tables.ledger
    assert first(ledger, lease=120)
    busy = ledger.claim_stop(record("VanishingGradient", 60), ttl_seconds=3600)
    assert (busy.granted, busy.busy) == (False, True)  # the writer may still be stopping the job
    other = ledger.claim_stop(record("LossNotDecreasing", 60), ttl_seconds=3600)
    assert (other.granted, other.busy) == (False, False)  # another rule: already stopping
    taken = ledger.claim_stop(record("VanishingGradient", 121), ttl_seconds=3600)
    assert (taken.granted, taken.busy) == (True, False)  # the writer died: its record is taken over, kept whole
    assert taken.previous is not None
    assert taken.previous.event_id == "e1"


def test_a_stop_records_lease_ends_at_its_second(tables: Tables) -> None:
    ledger = tables.ledger
    assert first(ledger, lease=120)
    assert ledger.claim_stop(record("VanishingGradient", 119), ttl_seconds=3600).busy
    at_the_end = ledger.claim_stop(record("VanishingGradient", 120), ttl_seconds=3600)
    assert (at_the_end.granted, at_the_end.busy) == (True, False)  # lease_until is the first second it is over


def test_the_stops_one_write_asks_about_mutes_only_when_told() -> None:
    # DynamoDB refuses a value the expressions do not use ("unused in expressions"); moto does not check it.
    with Emulation() as aws:
        client = Recording(aws.client("dynamodb"))
        ledger = DynamoLedger(cast("DynamoDBClient", client), TABLE)
        ledger.claim_first_stop(
            record("VanishingGradient"), now=NOW, lease_seconds=60, ttl_seconds=60, check_mutes=False
        )
        [write] = [kwargs for name, kwargs in client.calls if name == "put_item"]
        assert "ExpressionAttributeValues" not in write
        assert "#until" not in write["ExpressionAttributeNames"]
        assert write["ConditionExpression"] == "attribute_not_exists(#rule)"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda ledger: ledger.claim_first_stop(
                record("VanishingGradient"), now=NOW, lease_seconds=60, ttl_seconds=60, check_mutes=True
            ),
            "record the stop of mnist-1 failed: .*ProvisionedThroughputExceededException",
        ),
        (
            lambda ledger: ledger.release_stop_lease("mnist-1"),
            "release the stop lease of mnist-1 failed: .*ProvisionedThroughputExceededException",
        ),
    ],
)
def test_the_stop_items_other_failures_are_reported_naming_the_job(call: Any, message: str) -> None:
    with pytest.raises(ActionFailed, match=message) as failed:
        call(DynamoLedger(cast("DynamoDBClient", Failing("ProvisionedThroughputExceededException")), TABLE))
    assert isinstance(failed.value.__cause__, ClientError)


def test_a_stop_record_with_a_spend_but_no_price_source_reads_back() -> None:
    with Emulation() as aws:
        dynamodb = aws.client("dynamodb")
        item = {
            contract.TABLE_PARTITION_KEY: {"S": "stop#mnist-1"},
            "job": {"S": "mnist-1"},
            "rule": {"S": "VanishingGradient"},
            "stopped_at": {"S": NOW.isoformat()},
            "spend_avoided_usd": {"N": "12.50"},
        }
        dynamodb.put_item(TableName=TABLE, Item=item)
        stop = DynamoLedger(dynamodb, TABLE).get_stop("mnist-1")
        assert stop is not None
        assert stop.spend == StopSpend(avoided_usd=12.5, so_far_usd=None, price_source=None, instance_types=())


def test_dropping_a_stop_record_keeps_the_jobs_mutes_marker() -> None:
    from training_guard.adapters.mutes import DynamoMutes
    from training_guard.domain import mutes

    with Emulation() as aws:
        dynamodb = aws.client("dynamodb")
        ledger = DynamoLedger(dynamodb, TABLE)
        DynamoMutes(dynamodb, TABLE).put("mnist-1", mutes.exempt(by="slack:U1", at=NOW), now=NOW)
        assert ledger.claim_stop(record("VanishingGradient"), ttl_seconds=3600).granted  # the longer way
        ledger.drop_stop("mnist-1")  # the job had ended: the record goes
        item = dynamodb.get_item(TableName=TABLE, Key={contract.TABLE_PARTITION_KEY: {"S": "stop#mnist-1"}})["Item"]
        assert set(item) == {contract.TABLE_PARTITION_KEY, contract.TABLE_TTL_ATTRIBUTE, "in_force_until"}
        assert not first(ledger)  # the exemption still refuses the stop's one write
        ledger.drop_stop("mnist-2")  # no item at all: nothing to drop, no error


def test_a_mute_an_earlier_version_wrote_is_marked_once_before_the_stops_one_write_ignores_it() -> None:
    from training_guard.adapters.mutes import MARKERS_FLAG, DynamoMutes
    from training_guard.domain import mutes

    with Emulation() as aws:
        dynamodb = aws.client("dynamodb")
        ledger, store = DynamoLedger(dynamodb, TABLE), DynamoMutes(dynamodb, TABLE)
        store.put("mnist-1", mutes.exempt(by="slack:U1", at=NOW), now=NOW)
        store.put("old-1", mutes.silence("R", by="cli:me", at=NOW, seconds=60), now=NOW)
        for key in ("stop#mnist-1", "stop#old-1"):  # as an earlier version left them: mutes without markers
            dynamodb.delete_item(TableName=TABLE, Key={contract.TABLE_PARTITION_KEY: {"S": key}})
        assert first(ledger)  # the exemption is not seen: the gap mark_once closes
        ledger.drop_stop("mnist-1")
        assert store.mark_once(NOW + timedelta(seconds=120)) == 1  # the exemption; the silence had ended
        assert not first(ledger, at=120)
        assert store.mark_once(NOW) is None  # once: the flag says it was done
        flag = dynamodb.get_item(TableName=TABLE, Key={contract.TABLE_PARTITION_KEY: {"S": MARKERS_FLAG}})
        assert "Item" in flag


def test_a_failed_writer_releases_its_lease_for_the_retry(tables: Tables) -> None:
    ledger = tables.ledger
    assert first(ledger, lease=120)
    ledger.release_stop_lease("mnist-1")
    assert ledger.claim_stop(record("VanishingGradient", 1), ttl_seconds=3600).granted
    ledger.release_stop_lease("nothing-here")  # no record: nothing to release, no error


def test_a_mute_in_force_refuses_the_stops_one_write_and_its_end_does_not() -> None:
    from training_guard.adapters.mutes import DynamoMutes
    from training_guard.domain import mutes

    with Emulation() as aws:
        dynamodb = aws.client("dynamodb")
        ledger, store = DynamoLedger(dynamodb, TABLE), DynamoMutes(dynamodb, TABLE)
        store.put("mnist-1", mutes.silence("VanishingGradient", by="slack:U1", at=NOW, seconds=600), now=NOW)
        assert not first(ledger, at=599)  # the snooze is in force: the responder reads the mutes instead
        assert ledger.get_stop("mnist-1") is None  # the marker alone is no stop record
        assert first(ledger, at=601)  # it ended: the one write goes through, on the item that holds the marker
        ledger.drop_stop("mnist-1")  # a stop that found the job ended: the record goes, the marker stays
        assert ledger.get_stop("mnist-1") is None
        store.put("mnist-1", mutes.exempt(by="slack:U1", at=NOW), now=NOW)  # until the job ends
        assert not first(ledger, at=10**6)
        assert ledger.claim_stop(record("VanishingGradient"), ttl_seconds=3600).granted  # the longer way still works
        member = "444455556666"
        store.put("mnist-2", mutes.exempt(by="slack:U1", at=NOW), account=member, now=NOW)
        from training_guard.adapters.accounts import AccountLedger

        scoped = AccountLedger(ledger, member)
        refused = scoped.claim_first_stop(
            replace(record("VanishingGradient"), job="mnist-2"),
            now=NOW,
            lease_seconds=60,
            ttl_seconds=60,
            check_mutes=True,
        )
        assert not refused  # a member's mute is honoured in the member's scope


def test_a_second_rules_stop_claim_is_refused_and_shows_the_first(tables: Tables) -> None:
    ledger = tables.ledger
    first = ledger.claim_stop(record("VanishingGradient"), ttl_seconds=3600)
    assert (first.granted, first.previous) == (True, None)
    second = ledger.claim_stop(record("LossNotDecreasing", 5), ttl_seconds=3600)
    assert second.granted is False
    assert second.previous == record("VanishingGradient")


def test_the_same_rules_retry_is_granted_and_sees_its_own_earlier_claim(tables: Tables) -> None:
    ledger = tables.ledger
    ledger.claim_stop(record("VanishingGradient"), ttl_seconds=3600)
    retry = ledger.claim_stop(record("VanishingGradient", 60), ttl_seconds=3600)
    assert retry.granted is True
    assert retry.previous == record("VanishingGradient")


def test_a_retry_keeps_the_record_whole_with_its_confirmation_and_what_was_folded_into_it(tables: Tables) -> None:
    # Rewriting the record on a retry lost both: the next finding was announced, the audit forgot the folded ones.
    ledger = tables.ledger
    ledger.claim_stop(record("VanishingGradient"), ttl_seconds=3600)
    ledger.confirm_stop("mnist-1")
    assert ledger.fold("mnist-1", KEY) is True
    retry = ledger.claim_stop(record("VanishingGradient", 60), ttl_seconds=3600)
    kept = replace(record("VanishingGradient"), confirmed=True, folded=(KEY,))
    assert (retry.granted, retry.previous) == (True, kept)
    assert ledger.get_stop("mnist-1") == kept


def test_only_a_confirmed_stop_takes_folded_transitions(tables: Tables) -> None:
    ledger = tables.ledger
    assert ledger.fold("mnist-1", KEY) is False  # nobody stopped it: announce
    assert ledger.get_stop("mnist-1") is None  # and no record was made up
    ledger.claim_stop(record("VanishingGradient"), ttl_seconds=3600)
    assert ledger.fold("mnist-1", KEY) is False  # written before StopTrainingJob, not confirmed yet
    ledger.confirm_stop("mnist-1")
    later = "t#mnist-1#job#status#Stopped"
    assert [ledger.fold("mnist-1", k) for k in (KEY, later, KEY)] == [True, True, True]  # a retry folds again
    assert ledger.get_stop("mnist-1") == replace(record("VanishingGradient"), confirmed=True, folded=(KEY, later))


SPEND = StopSpend(
    avoided_usd=83.49,
    so_far_usd=2.91,
    price_source="AWS Price List API (2026-11-01)",
    instance_types=("ml.p3.2xlarge",),
)


@pytest.mark.parametrize("spend", [SPEND, StopSpend(None, None, None, ()), StopSpend(0.0, None, "x", ("a", "b"))])
def test_a_stops_spend_is_kept_on_its_record_with_unknown_as_unknown(tables: Tables, spend: StopSpend) -> None:
    ledger = tables.ledger
    ledger.claim_stop(record("VanishingGradient"), ttl_seconds=3600)
    ledger.confirm_stop("mnist-1")
    assert ledger.fold("mnist-1", KEY) is True
    ledger.record_stop_spend("mnist-1", spend)
    assert ledger.get_stop("mnist-1") == replace(
        record("VanishingGradient"), confirmed=True, folded=(KEY,), spend=spend
    )


def test_the_stop_records_spend_attributes_are_named_for_the_report() -> None:
    """`training-guard report` reads these names; unknown amounts are NULL, never 0."""
    with Emulation() as aws:
        tables = Tables(DynamoLedger(aws.client("dynamodb"), TABLE), aws.client("dynamodb"))
        tables.ledger.claim_stop(record("VanishingGradient"), ttl_seconds=3600)
        tables.ledger.record_stop_spend("mnist-1", SPEND)
        item = tables.item("stop#mnist-1")
        assert {k: item[k] for k in ("spend_avoided_usd", "spend_so_far_usd", "price_source", "instance_types")} == {
            "spend_avoided_usd": {"N": "83.49"},
            "spend_so_far_usd": {"N": "2.91"},
            "price_source": {"S": "AWS Price List API (2026-11-01)"},
            "instance_types": {"L": [{"S": "ml.p3.2xlarge"}]},
        }
        tables.ledger.record_stop_spend("mnist-1", StopSpend(None, None, None, ()))
        item = tables.item("stop#mnist-1")
        assert [item[k] for k in ("spend_avoided_usd", "spend_so_far_usd", "price_source")] == [{"NULL": True}] * 3
        assert item["instance_types"] == {"L": []}
        assert item["rule"] == {"S": "VanishingGradient"}  # the record is updated, not replaced


def test_recording_spend_without_a_stop_record_fails_and_makes_none(tables: Tables) -> None:
    with pytest.raises(ActionFailed, match="record the spend of the stop of mnist-1"):
        tables.ledger.record_stop_spend("mnist-1", SPEND)
    assert tables.ledger.get_stop("mnist-1") is None


def test_confirming_a_stop_without_a_record_fails_and_makes_none(tables: Tables) -> None:
    with pytest.raises(ActionFailed, match="confirm stop of mnist-1"):
        tables.ledger.confirm_stop("mnist-1")
    assert tables.ledger.get_stop("mnist-1") is None


def test_a_job_nobody_stopped_has_no_stop_record(tables: Tables) -> None:
    assert tables.ledger.get_stop("stopped-by-a-person") is None


def test_a_dropped_stop_record_is_gone(tables: Tables) -> None:
    ledger = tables.ledger
    ledger.claim_stop(record("VanishingGradient"), ttl_seconds=3600)
    ledger.drop_stop("mnist-1")
    assert ledger.get_stop("mnist-1") is None


def stored(dynamodb: Any, key: str) -> dict[str, Any]:
    item: dict[str, Any] = dynamodb.get_item(TableName=TABLE, Key={contract.TABLE_PARTITION_KEY: {"S": key}})["Item"]
    return item


def test_the_stop_record_is_stored_whole_and_expires_after_its_retention() -> None:
    # The audit record is what an operator reads to learn who stopped a job and why: every field, by name.
    with Emulation() as aws:
        dynamodb = aws.client("dynamodb")
        DynamoLedger(dynamodb, TABLE).claim_stop(record("VanishingGradient"), ttl_seconds=400 * 86400)
        assert stored(dynamodb, "stop#mnist-1") == {
            contract.TABLE_PARTITION_KEY: {"S": "stop#mnist-1"},
            "job": {"S": "mnist-1"},
            "rule": {"S": "VanishingGradient"},
            "reason": {"S": "why"},
            "stopped_at": {"S": "2026-11-30T03:00:00+00:00"},
            "event_id": {"S": "e1"},
            "stopped_by": {"S": "training-guard"},
            contract.TABLE_TTL_ATTRIBUTE: {"N": str(int(NOW.timestamp()) + 400 * 86400)},
        }


def test_a_claim_is_stored_with_its_lease_and_a_day_to_live_and_completed_without_the_lease() -> None:
    with Emulation() as aws:
        dynamodb = aws.client("dynamodb")
        ledger = DynamoLedger(dynamodb, TABLE)
        ledger.claim(KEY, now=NOW, lease_seconds=40)
        epoch = int(NOW.timestamp())
        # An abandoned claim still expires, a day later.
        assert stored(dynamodb, KEY) == {
            contract.TABLE_PARTITION_KEY: {"S": KEY},
            "state": {"S": "in_progress"},
            "lease_until": {"N": str(epoch + 40)},
            contract.TABLE_TTL_ATTRIBUTE: {"N": str(epoch + 86400)},
        }
        ledger.complete(KEY, now=NOW + timedelta(seconds=3), ttl_seconds=3600, outcome="stopped")
        assert stored(dynamodb, KEY) == {
            contract.TABLE_PARTITION_KEY: {"S": KEY},
            "state": {"S": "done"},
            "outcome": {"S": "stopped"},
            contract.TABLE_TTL_ATTRIBUTE: {"N": str(epoch + 3 + 3600)},
        }


class Recording:
    """A DynamoDB client that records each call's arguments and passes it on."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)

        def call(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            return method(**kwargs)

        return call


def test_every_read_of_a_stop_record_is_strongly_consistent() -> None:
    # GetItem is eventually consistent unless ConsistentRead is true, and then "it always returns the last
    # updated value" (https://docs.aws.amazon.com/cli/v1/reference/dynamodb/get-item.html). The
    # record is read right after another invocation wrote it (a second rule's refused claim, a stop under
    # way): a stale read would call the guard's stop someone else's. moto is always consistent, so only the
    # request can show it.
    with Emulation() as aws:
        client = Recording(aws.client("dynamodb"))
        ledger = DynamoLedger(cast("DynamoDBClient", client), TABLE)
        ledger.claim_stop(record("VanishingGradient"), ttl_seconds=3600)
        assert ledger.claim_stop(record("LossNotDecreasing"), ttl_seconds=3600).previous == record("VanishingGradient")
        assert ledger.get_stop("mnist-1") == record("VanishingGradient")
        reads = [kwargs for name, kwargs in client.calls if name == "get_item"]
        assert [read.get("ConsistentRead") for read in reads] == [True]
        # the refused claim read the record that refused it in the same write, not in a second read
        [refused] = [kwargs for name, kwargs in client.calls if name == "update_item"][1:]
        assert refused["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"


def test_a_stop_record_missing_a_field_reads_back_with_it_empty() -> None:
    # A record written by hand or by an earlier version: a missing field is empty, never "None" or a crash.
    with Emulation() as aws:
        dynamodb = aws.client("dynamodb")
        item = {
            contract.TABLE_PARTITION_KEY: {"S": "stop#mnist-1"},
            "job": {"S": "mnist-1"},
            "rule": {"S": "VanishingGradient"},
            "reason": {"S": "why"},
            "stopped_at": {"S": NOW.isoformat()},
        }
        dynamodb.put_item(TableName=TABLE, Item=item)
        assert DynamoLedger(dynamodb, TABLE).get_stop("mnist-1") == StopRecord(
            job="mnist-1", rule="VanishingGradient", reason="why", at=NOW, event_id=""
        )


def test_a_stop_record_without_a_readable_time_fails_naming_the_record() -> None:
    with Emulation() as aws:
        dynamodb = aws.client("dynamodb")
        item = {
            contract.TABLE_PARTITION_KEY: {"S": "stop#mnist-1"},
            "job": {"S": "mnist-1"},
            "rule": {"S": "VanishingGradient"},
            "stopped_at": {"S": "x"},
        }
        dynamodb.put_item(TableName=TABLE, Item=item)
        with pytest.raises(ActionFailed) as failed:
            DynamoLedger(dynamodb, TABLE).get_stop("mnist-1")
        assert str(failed.value) == "read stop record stop#mnist-1 failed: stopped_at is not a timestamp"


class Failing:
    """A DynamoDB client whose every call fails with one error code."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __getattr__(self, name: str) -> Any:
        def fail(**_: Any) -> Any:
            raise ClientError({"Error": {"Code": self.code, "Message": "x"}}, name)

        return fail


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "AccessDeniedException"])
def test_real_failures_are_raised_by_every_operation_naming_what_failed(code: str) -> None:
    # The action names what failed in the dead-letter reason and the sweeper's report.
    ledger = DynamoLedger(cast("DynamoDBClient", Failing(code)), TABLE)
    for call, action in (
        (lambda: ledger.claim(KEY, now=NOW, lease_seconds=40), f"claim {KEY}"),
        (lambda: ledger.complete(KEY, now=NOW, ttl_seconds=60, outcome="x"), f"complete {KEY}"),
        (lambda: ledger.release(KEY), f"release {KEY}"),
        (lambda: ledger.claim_stop(record("r"), ttl_seconds=60), "record stop of mnist-1"),
        (lambda: ledger.get_stop("mnist-1"), "read stop record of mnist-1"),
        (lambda: ledger.drop_stop("mnist-1"), "drop stop record of mnist-1"),
        (lambda: ledger.confirm_stop("mnist-1"), "confirm stop of mnist-1"),
        (lambda: ledger.fold("mnist-1", KEY), f"fold {KEY} into the stop of mnist-1"),
        (lambda: ledger.record_stop_spend("mnist-1", SPEND), "record the spend of the stop of mnist-1"),
    ):
        with pytest.raises(ActionFailed, match=code) as failed:
            call()
        assert failed.value.action == action


def test_releasing_what_another_attempt_completed_is_not_an_error() -> None:
    DynamoLedger(cast("DynamoDBClient", Failing("ConditionalCheckFailedException")), TABLE).release(KEY)


def test_a_fold_refused_by_its_condition_is_an_announcement_not_an_error() -> None:
    assert (
        DynamoLedger(cast("DynamoDBClient", Failing("ConditionalCheckFailedException")), TABLE).fold("mnist-1", KEY)
        is False
    )
