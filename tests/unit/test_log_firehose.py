"""A member account's log lines through the hub's destination: Firehose's transformation event folded exactly as a
direct delivery, every record answered Dropped (docs/design/log-subscription.md, "Members")."""

from __future__ import annotations

import base64
import gzip
import json
from dataclasses import replace
from datetime import timedelta
from typing import Any
from unittest.mock import ANY

import pytest

from tests.fakes import FakeJobs
from tests.helpers import NOW
from tests.unit.test_log_watch import (
    ARN,
    HEALTHY,
    JOB,
    REGION,
    STREAM,
    FakeMembers,
    FakeParker,
    World,
    batch,
    clock_of,
    diverging,
    subscription,
)
from training_guard.config.model import GuardConfig, OrganizationConfig
from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import EventError
from training_guard.handlers import log_events
from training_guard.services.log_watch import Delivery, DeliveryUnfinished, Invocation
from training_guard.services.responder import Responder

HUB, MEMBER, STRANGER = "111122223333", "444455556666", "999999999999"
HUB_INVOCATION = Invocation(HUB, REGION)
STREAM_ARN = f"arn:aws:firehose:{REGION}:{HUB}:deliverystream/training-guard-member-logs"


def member_world() -> tuple[World, FakeJobs, FakeMembers]:
    organization = OrganizationConfig(hub_account=HUB, region=REGION, members=(MEMBER,))
    world = World(config=GuardConfig(organization=organization))
    member_jobs = FakeJobs()
    member_jobs.jobs[JOB] = replace(world.jobs.jobs[JOB], arn=ARN.replace("123456789012", MEMBER))
    member_jobs.tags_by_arn[str(member_jobs.jobs[JOB].arn)] = {}
    return world, member_jobs, FakeMembers(member_jobs)


def firehose(*payloads: str) -> dict[str, Any]:
    """Firehose's transformation event: each record's data is CloudWatch Logs' payload (base64 of gzip of JSON)."""
    return {
        "invocationId": "inv-1",
        "deliveryStreamArn": STREAM_ARN,
        "region": REGION,
        "records": [
            {"recordId": f"r-{i}", "approximateArrivalTimestamp": 1764968400000, "data": data}
            for i, data in enumerate(payloads)
        ],
    }


def payload(delivery: Delivery, *, message_type: str = "DATA_MESSAGE") -> str:
    return str(subscription(delivery, message_type=message_type)["awslogs"]["data"])


def results(answer: dict[str, object]) -> list[str]:
    records = answer["records"]
    assert isinstance(records, list)
    return [str(r["result"]) for r in records]


def member(delivery: Delivery, owner: str = MEMBER) -> Delivery:
    return replace(delivery, owner=owner)


def test_a_members_nan_through_firehose_stops_its_job_once_and_every_record_is_dropped() -> None:
    world, member_jobs, members = member_world()
    event = firehose(payload(member(batch(HEALTHY[:20]))), payload(member(batch(diverging()[20:], first=20))))
    result = log_events.process(event, world.watch, invocation=HUB_INVOCATION, now=NOW, members=members)
    # recordId, result and data: all three, or Firehose counts the record a transformation failure
    dropped = [{"recordId": f"r-{i}", "result": "Dropped", "data": ""} for i in range(2)]
    assert result == {"records": dropped}
    assert (member_jobs.stop_calls, world.jobs.stop_calls) == ([JOB], [])
    assert list(world.ledger.stops) == [f"{MEMBER}/{JOB}"]
    again = log_events.process(event, world.watch, invocation=HUB_INVOCATION, now=NOW, members=members)
    assert again == result  # Firehose's retry: folded again...
    assert member_jobs.stop_calls == [JOB]  # ... and no second stop


def test_firehose_folds_exactly_as_the_direct_delivery() -> None:
    direct, direct_jobs, direct_members = member_world()
    log_events.process(
        subscription(member(batch(diverging()))),
        direct.watch,
        invocation=HUB_INVOCATION,
        now=NOW,
        members=direct_members,
    )
    piped, piped_jobs, piped_members = member_world()
    log_events.process(
        firehose(payload(member(batch(diverging())))),
        piped.watch,
        invocation=HUB_INVOCATION,
        now=NOW,
        members=piped_members,
    )
    (piped_state, piped_version), (direct_state, direct_version) = (
        w.states.get(STREAM, account=MEMBER) for w in (piped, direct)
    )
    assert piped_state is not None
    assert direct_state is not None
    assert (piped_state.to_json(), piped_version) == (direct_state.to_json(), direct_version)
    assert (piped_jobs.stop_calls, piped.log_notes()) == (direct_jobs.stop_calls, direct.log_notes())


def test_documents_one_after_another_in_a_record_are_each_folded() -> None:
    world, member_jobs, members = member_world()
    first = gzip.decompress(base64.b64decode(payload(member(batch(HEALTHY[:20])))))
    second = gzip.decompress(base64.b64decode(payload(member(batch(diverging()[20:], first=20)))))
    joined = base64.b64encode(gzip.compress(first + second)).decode()
    log_events.process(firehose(joined), world.watch, invocation=HUB_INVOCATION, now=NOW, members=members)
    assert member_jobs.stop_calls == [JOB]


def test_a_control_message_and_another_accounts_lines_are_dropped_and_touch_nothing() -> None:
    world, member_jobs, members = member_world()
    control = Delivery("CloudwatchLogs", "", "", ())
    event = firehose(payload(control, message_type="CONTROL_MESSAGE"), payload(member(batch(diverging()), STRANGER)))
    result = log_events.process(event, world.watch, invocation=HUB_INVOCATION, now=NOW, members=members)
    assert results(result) == ["Dropped", "Dropped"]
    assert (members.asked, member_jobs.stop_calls, world.jobs.describe_calls) == ([], [], [])


def test_an_unusable_record_is_parked_with_its_reason_and_the_others_are_read() -> None:
    world, member_jobs, members = member_world()
    parker = FakeParker()
    event = firehose("not base64!", payload(member(batch(diverging()))))
    result = log_events.process(
        event,
        world.watch,
        invocation=HUB_INVOCATION,
        now=NOW,
        members=members,
        dead_letters=parker,  # type: ignore[arg-type]
    )
    assert results(result) == ["Dropped", "Dropped"]
    [(body, reason)] = parker.parked
    assert json.loads(body) == {"recordId": "r-0", "data": "not base64!"}
    assert reason.startswith("unusable event: record r-0 is not base64 of gzip")
    assert member_jobs.stop_calls == [JOB]


def test_an_event_without_record_ids_is_parked_whole() -> None:
    world, _, members = member_world()
    parker = FakeParker()
    event = {"invocationId": "i", "deliveryStreamArn": STREAM_ARN, "records": [{"data": "x"}]}
    result = log_events.process(
        event,
        world.watch,
        invocation=HUB_INVOCATION,
        now=NOW,
        members=members,
        dead_letters=parker,  # type: ignore[arg-type]
    )
    assert str(result["rejected"]).startswith("records[0].recordId: missing")
    assert len(parker.parked) == 1


def test_an_unfinished_delivery_fails_the_invocation_so_that_firehose_invokes_again() -> None:
    world, member_jobs, members = member_world()
    draining = clock_of(iter([30.0, 30.0, 1.0]))
    draining = Invocation(HUB, REGION, draining.time_left)
    with pytest.raises(DeliveryUnfinished):
        log_events.process(
            firehose(payload(member(batch(diverging())))), world.watch, invocation=draining, now=NOW, members=members
        )
    assert member_jobs.stop_calls == []


def test_the_direct_path_still_refuses_two_documents_in_one_delivery() -> None:
    world = World()
    one = gzip.decompress(base64.b64decode(payload(batch(HEALTHY[:2]))))
    event = {"awslogs": {"data": base64.b64encode(gzip.compress(one + one)).decode()}}
    with pytest.raises(EventError, match=r"awslogs\.data does not hold JSON"):
        log_events.process(event, world.watch, invocation=Invocation("123456789012", REGION), now=NOW)


# --- the stall check in every member ------------------------------------------------------------------------------
SCHEDULED = {"source": "aws.events", "detail-type": "Scheduled Event", "id": "s-1", "time": "2026-12-06T03:00:00Z"}


def test_the_stall_check_asks_each_members_running_jobs_through_its_role() -> None:
    world, _, members = member_world()
    log_events.process(
        firehose(payload(member(batch(HEALTHY)))), world.watch, invocation=HUB_INVOCATION, now=NOW, members=members
    )
    world.jobs.jobs[JOB] = replace(world.jobs.jobs[JOB], status="Completed")  # the hub's job of that name: ended
    later = NOW + timedelta(days=1)
    result = log_events.process(SCHEDULED, world.watch, invocation=HUB_INVOCATION, now=later, members=members)
    assert result["stalled"] == []  # the hub's own jobs
    assert result["members"] == {MEMBER: ANY}
    member_report = result["members"][MEMBER]
    assert (member_report["checked"], member_report["stalled"]) == (1, [STREAM])
    [note] = world.publisher.published
    assert note.finding is not None
    assert note.finding.name == "StalledTrainingRule"
    assert "StalledTrainingRule" in json.dumps(world.states.get(STREAM, account=MEMBER)[0].to_json())  # type: ignore[union-attr]
    again = log_events.process(SCHEDULED, world.watch, invocation=HUB_INVOCATION, now=later, members=members)
    assert again["members"][MEMBER]["stalled"] == []  # type: ignore[index]
    assert len(world.publisher.published) == 1


def test_a_member_whose_role_is_refused_leaves_the_others_checked_then_fails_the_check() -> None:
    organization = OrganizationConfig(hub_account=HUB, region=REGION, members=(STRANGER, MEMBER))
    world = World(config=GuardConfig(organization=organization))
    _, member_jobs, _ = member_world()

    class Refusing(FakeMembers):
        def responder_for(self, base: Responder, account: str) -> Responder:
            if account == STRANGER:
                raise ActionFailed(f"AssumeRole in {account}", PermissionError("AccessDenied"))
            return super().responder_for(base, account)

    members = Refusing(member_jobs)
    with pytest.raises(log_events.MemberStallsUnchecked, match=STRANGER):
        log_events.process(SCHEDULED, world.watch, invocation=HUB_INVOCATION, now=NOW, members=members)
    assert members.asked == [MEMBER]
