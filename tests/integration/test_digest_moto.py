"""The weekly digest through the real handler on moto: stop records and guard metrics in, one SNS message out.

The stop records are written by the guard's own ledger (adapters/ledger.py) with the spend the stop path adds, the
metrics put as Powertools publishes them (namespace TrainingGuard, dimension service). The topic's messages are read
from an SQS queue subscribed to it (the emulation's capture queue, raw delivery: the `sqs` body). Every AWS call the
handler makes is recorded: tests/infra/test_digest.py checks the synthesized role allows each of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from training_guard import contract
from training_guard.adapters.ledger import DynamoLedger
from training_guard.config.model import GuardConfig
from training_guard.domain.errors import ActionFailed
from training_guard.handlers import wiring
from training_guard.services.ports import StopRecord
from training_guard.services.responder import AUDIT_RETENTION_SECONDS
from training_guard_local.emulator import ACCOUNT, REGION, TABLE, Emulation, handler_output_to_stderr

pytestmark = pytest.mark.integration

# Every AWS action the digest makes, as IAM names it: the Scan of the stop records, the week's marker (claimed,
# completed, or released when the publish fails), the guard's metrics and the publish.
DIGEST_ACTIONS = frozenset(
    {
        "dynamodb:Scan",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "cloudwatch:GetMetricData",
        "sns:Publish",
    }
)
SERVICES = ("dynamodb", "cloudwatch", "sns")

SCHEDULED = "2026-11-30T09:00:00Z"  # a Monday, ISO week 49: the default digest.weekday and hour_utc
MONDAY = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
SINCE = MONDAY - timedelta(days=7)
MNIST = "pytorch-mnist-lr01-2026-11-29-02-10-00-123"
RESNET = "resnet50-no-debugger-2026-11-28-01-00-00"


def scheduled_event(time: str = SCHEDULED) -> dict[str, Any]:
    """A scheduled rule's event, as EventBridge sends it
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/event-reference.html)."""
    return {
        "version": "0",
        "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT,
        "time": time,
        "region": REGION,
        "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/TrainingGuard-DigestWeekly"],
        "detail": {},
    }


class Calls(list[str]):
    """The IAM actions of every call the hooked clients make."""

    def hook(self, client: Any, prefix: str) -> None:
        def record(model: Any, **_: Any) -> None:
            self.append(f"{prefix}:{model.name}")

        client.meta.events.register("before-parameter-build", record)


@pytest.fixture
def aws() -> Iterator[Emulation]:
    with Emulation(GuardConfig()) as emulation:
        yield emulation


@pytest.fixture
def calls(aws: Emulation) -> Calls:
    made = Calls()
    for service in SERVICES:
        made.hook(wiring.root().client(service), service)
    return made


def handler() -> Any:
    with handler_output_to_stderr():  # Powertools' Logger binds stdout when first imported
        return importlib.import_module("training_guard.handlers.digest").handler


def run(aws: Emulation, *, event: dict[str, Any] | None = None, at: datetime | None = None) -> dict[str, Any]:
    return aws.invoke(handler(), event or scheduled_event(), aws.context("digest"), at=at or MONDAY)


def record_stop(aws: Emulation, job: str, at: datetime, *, rule: str, reason: str, spend: dict[str, Any]) -> None:
    """A stop as the responder records it: claimed, confirmed once SageMaker accepted it, its spend added."""
    ledger = DynamoLedger(aws.client("dynamodb"), TABLE)
    assert ledger.claim_stop(
        StopRecord(job=job, rule=rule, reason=reason, at=at, event_id=f"event-{job}"),
        ttl_seconds=AUDIT_RETENTION_SECONDS,
    ).granted
    ledger.confirm_stop(job)
    names = {f"#s{i}": k for i, k in enumerate(spend)}
    aws.client("dynamodb").update_item(
        TableName=TABLE,
        Key={contract.TABLE_PARTITION_KEY: {"S": f"stop#{job}"}},
        UpdateExpression="SET " + ", ".join(f"{n} = :v{n[2:]}" for n in names),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues={f":v{i}": v for i, v in enumerate(spend.values())},
    )


def put_metric(aws: Emulation, name: str, at: datetime, value: float) -> None:
    aws.client("cloudwatch").put_metric_data(
        Namespace=contract.GUARD_METRICS_NAMESPACE,
        MetricData=[
            {
                "MetricName": name,
                "Dimensions": [{"Name": contract.SERVICE_DIMENSION, "Value": "training-guard"}],
                "Timestamp": at,
                "Value": value,
                "Unit": "Count",
            }
        ],
    )


def seed(aws: Emulation) -> None:
    record_stop(
        aws,
        MNIST,
        datetime(2026, 11, 29, 2, 10, tzinfo=UTC),
        rule="VanishingGradient",
        reason="rules.debugger_default = stop (debugger rule VanishingGradient)",
        spend={"spend_avoided_usd": {"N": "120.50"}, "spend_so_far_usd": {"N": "10.25"}},
    )
    record_stop(
        aws,
        RESNET,
        datetime(2026, 11, 28, 1, 0, tzinfo=UTC),
        rule="loss-diverging",
        reason="metric_guards.loss-diverging: MAX(train:loss) > 5 for 3 of 3 min -> stop",
        spend={"spend_avoided_usd": {"NULL": True}, "spend_so_far_usd": {"NULL": True}},
    )
    # on the hour the week ends: the next digest's, not this one's
    record_stop(
        aws,
        "edge-run-2026-11-30-09-00-00",
        MONDAY,
        rule="VanishingGradient",
        reason="rules.debugger_default = stop (debugger rule VanishingGradient)",
        spend={"spend_avoided_usd": {"N": "999"}},
    )
    put_metric(aws, "Outcome_would_stop", datetime(2026, 11, 29, 3, 5, tzinfo=UTC), 2)
    put_metric(aws, "Outcome_would_stop", MONDAY + timedelta(minutes=5), 7)  # the next week's
    put_metric(aws, "Outcome_notified", datetime(2026, 11, 28, 1, 0, tzinfo=UTC), 5)


def test_one_message_with_the_weeks_totals_then_nothing_more_that_week(aws: Emulation, calls: Calls) -> None:
    seed(aws)
    receipt = run(aws, at=MONDAY + timedelta(seconds=4))
    assert receipt == {
        "week": "2026-W49",
        "sent": True,
        "skipped": None,
        "stops": 2,
        "would_stop": 2,
        "warnings": [],
    }
    [doc] = aws.notifications()
    assert (doc["kind"], doc["severity"], doc["title"]) == (
        "digest",
        "info",
        "Weekly digest 2026-W49: 2 jobs stopped, up to $120.50 avoided",
    )
    week = doc["digest"]
    assert (week["since"], week["until"]) == ("2026-11-23T09:00:00Z", "2026-11-30T09:00:00Z")
    assert week["spend_avoided"] == {"usd": 120.5, "known": 1, "unknown": 1}
    assert week["outcomes"] == {
        "already_ended": 0,
        "already_stopping": 0,
        "deferred": 0,
        "notified": 5,
        "stopped": 0,  # nothing put: the stop records count the stops
        "would_stop": 2,  # the next week's 7 left out
    }
    assert [(r["name"], r["kind"], r["stops"]) for r in week["rules"]] == [
        ("VanishingGradient", "rules", 1),
        ("loss-diverging", "metric_guards", 1),
    ]
    assert (doc["account"], doc["region"]) == (ACCOUNT, REGION)  # from the invoked function's ARN
    marker = aws.client("dynamodb").get_item(
        TableName=TABLE, Key={contract.TABLE_PARTITION_KEY: {"S": "digest#2026-W49"}}
    )
    assert (marker["Item"]["state"], marker["Item"]["outcome"]) == ({"S": "done"}, {"S": "sent"})

    # the schedule fires again (a duplicate delivery, a retry): nothing is read, nothing is published
    calls.clear()
    again = run(aws, at=MONDAY + timedelta(minutes=2))
    assert (again["sent"], again["skipped"]) == (False, "already sent this week")
    assert aws.notifications() == []
    assert calls == ["dynamodb:PutItem"]  # the claim, refused by its condition


def test_a_retry_after_midnight_still_counts_the_week_it_was_scheduled_for(aws: Emulation) -> None:
    seed(aws)
    late = run(aws, event=scheduled_event("2026-11-29T23:00:00Z"), at=datetime(2026, 11, 30, 0, 2, tzinfo=UTC))
    assert late["week"] == "2026-W48"  # Sunday 23:00's week, not the Monday the retry ran on
    [doc] = aws.notifications()
    assert doc["digest"]["until"] == "2026-11-29T23:00:00Z"


def test_a_refused_publish_fails_the_invocation_and_its_retry_sends_the_digest(aws: Emulation, calls: Calls) -> None:
    seed(aws)
    sns = wiring.root().client("sns")

    def denied(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        error = {"Code": "AuthorizationError", "Message": "not authorized to perform: SNS:Publish"}
        return AWSResponse("https://example.invalid/", 403, {}, None), {
            "Error": error,
            "ResponseMetadata": {"HTTPStatusCode": 403},
        }

    sns.meta.events.register_first("before-call.sns.Publish", denied)
    with pytest.raises(ActionFailed, match="sns:Publish"):
        run(aws)
    sns.meta.events.unregister("before-call.sns.Publish", denied)
    assert aws.notifications() == []
    assert "dynamodb:DeleteItem" in calls  # the week released for the retry
    retry = run(aws, at=MONDAY + timedelta(minutes=1))  # Lambda's first retry, about a minute later
    assert retry["sent"] is True
    assert len(aws.notifications()) == 1
    assert set(calls) == DIGEST_ACTIONS


def test_a_disabled_digest_reads_and_sends_nothing() -> None:
    with Emulation(GuardConfig.from_dict({"digest": {"enabled": False}})) as aws:
        made = Calls()
        for service in SERVICES:
            made.hook(wiring.root().client(service), service)
        assert run(aws) == {"sent": False, "skipped": "digest.enabled is false"}
        assert (aws.notifications(), made) == ([], [])
