"""The weekly digest in the template: its schedule from the configuration, its role, dead-letter queue and alarms."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.components import digest, job_events
from infra.nag import ACKNOWLEDGED
from tests.infra.conftest import Synth, expected_rows, statement_rows
from tests.infra.test_stack import getatt
from tests.integration.test_digest_moto import DIGEST_ACTIONS
from training_guard import contract
from training_guard.config.model import GuardConfig

HANDLER = "training_guard.handlers.digest.handler"


@pytest.fixture(scope="module")
def friday(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    config = tmp_path_factory.mktemp("config") / "guard.json"
    config.write_text(json.dumps({"digest": {"weekday": "fri", "hour_utc": 8}}))
    return Synth(tmp_path_factory.mktemp("friday"), {"config": str(config)})


@pytest.fixture(scope="module")
def disabled(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    config = tmp_path_factory.mktemp("config") / "guard.json"
    config.write_text(json.dumps({"digest": {"enabled": False}}))
    return Synth(tmp_path_factory.mktemp("disabled"), {"config": str(config)})


def digest_function(synth: Synth) -> tuple[str, dict[str, Any]]:
    [(fn_id, fn)] = [
        (k, v) for k, v in synth.resources("AWS::Lambda::Function").items() if v["Properties"]["Handler"] == HANDLER
    ]
    return fn_id, fn


def schedule_of(synth: Synth) -> dict[str, Any]:
    _, rule = synth.one("AWS::Events::Rule", "DigestWeekly")
    return rule


@pytest.mark.parametrize(
    ("fixture", "expression"),
    [("synth", "cron(0 9 ? * MON *)"), ("friday", "cron(0 8 ? * FRI *)")],  # the defaults, then `fri` at 8
)
def test_the_schedule_is_the_configured_weekday_and_hour_utc(
    fixture: str, expression: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(fixture)
    rule = schedule_of(synth)
    assert rule["Properties"]["ScheduleExpression"] == expression
    assert rule["Properties"]["State"] == "ENABLED"
    fn_id, _ = digest_function(synth)
    dlq_id, _ = synth.one("AWS::SQS::Queue", "DigestDeadLetters")
    [target] = rule["Properties"]["Targets"]
    assert target["Arn"] == getatt(fn_id)
    assert target["DeadLetterConfig"] == {"Arn": getatt(dlq_id)}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 8, "MaximumEventAgeInSeconds": 7200}


def test_the_function_reads_the_configuration_it_is_scheduled_by(friday: Synth) -> None:
    fn_id, fn = digest_function(friday)
    props = fn["Properties"]
    assert props["Timeout"] == digest.DIGEST_TIMEOUT.to_seconds() == 300
    env = props["Environment"]["Variables"]
    table_id, _ = friday.one("AWS::DynamoDB::Table")
    topic_id, _ = friday.one("AWS::SNS::Topic")
    assert (env[contract.ENV_TABLE], env[contract.ENV_TOPIC_ARN]) == ({"Ref": table_id}, {"Ref": topic_id})
    shipped = friday.shipped_config(fn_id)
    assert (shipped.digest.enabled, shipped.digest.weekday, shipped.digest.hour_utc) == (True, "FRI", 8)


def test_failures_retry_twice_then_land_in_the_digests_own_dead_letter_queue(synth: Synth) -> None:
    _, config = synth.one("AWS::Lambda::EventInvokeConfig", "Digest")
    dlq_id, queue = synth.one("AWS::SQS::Queue", "DigestDeadLetters")
    assert config["Properties"]["MaximumRetryAttempts"] == job_events.FUNCTION_RETRY_ATTEMPTS == 2
    assert config["Properties"]["MaximumEventAgeInSeconds"] == 7200
    assert config["Properties"]["DestinationConfig"] == {"OnFailure": {"Destination": getatt(dlq_id)}}
    key_id, _ = synth.one("AWS::KMS::Key")
    assert queue["Properties"]["KmsMasterKeyId"] == getatt(key_id)
    assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 86400


def test_the_role_may_read_the_stop_records_mark_its_week_read_metrics_and_publish_nothing_more(synth: Synth) -> None:
    log_id, _ = synth.one("AWS::Logs::LogGroup", "DigestFunction")
    table_id, _ = synth.one("AWS::DynamoDB::Table")
    topic_id, _ = synth.one("AWS::SNS::Topic")
    key_id, _ = synth.one("AWS::KMS::Key")
    dlq_id, _ = synth.one("AWS::SQS::Queue", "DigestDeadLetters")
    _, policy = synth.one("AWS::IAM::Policy", "DigestFunction")
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert all(s["Effect"] == "Allow" for s in statements)
    assert statement_rows(statements) == expected_rows(
        [
            ("WriteOwnLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], getatt(log_id)),
            (None, ["xray:PutTraceSegments", "xray:PutTelemetryRecords"], "*"),
            ("ReadStopRecords", "dynamodb:Scan", getatt(table_id)),
            ("MarkTheWeek", ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"], getatt(table_id)),
            ("ReadGuardMetrics", "cloudwatch:GetMetricData", "*"),  # no resource type: list_amazoncloudwatch.html
            ("PublishNotifications", "sns:Publish", {"Ref": topic_id}),
            ("UseGuardKey", list(job_events.KEY_ACTIONS), getatt(key_id)),
            ("DeadLetterFailedEvents", "sqs:SendMessage", getatt(dlq_id)),
        ]
    )
    [marker] = [s for s in statements if s.get("Sid") == "MarkTheWeek"]
    assert marker["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["digest#*"]}}
    assert [s for s in statements if "Condition" in s] == [marker]


def test_every_call_the_digest_makes_on_moto_is_allowed_to_its_role(synth: Synth) -> None:
    """The calls recorded by tests/integration/test_digest_moto.py: a new call there without a grant fails here."""
    _, policy = synth.one("AWS::IAM::Policy", "DigestFunction")
    granted = {
        action
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        for action in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    }
    assert granted >= DIGEST_ACTIONS
    assert not any(a.endswith("*") for a in granted)
    assert "dynamodb:GetItem" not in granted  # it reads no item by key: the Scan finds the records


def test_its_errors_throttles_and_dead_letters_alarm_to_the_topic(synth: Synth) -> None:
    fn_id, _ = digest_function(synth)
    dlq_id, _ = synth.one("AWS::SQS::Queue", "DigestDeadLetters")
    topic_id, _ = synth.one("AWS::SNS::Topic")
    alarms = {a["Properties"]["AlarmName"]: a["Properties"] for a in synth.resources("AWS::CloudWatch::Alarm").values()}
    errors = alarms["TrainingGuard-self-DigestErrors"]
    assert (errors["MetricName"], errors["Dimensions"]) == (
        "Errors",
        [{"Name": "FunctionName", "Value": {"Ref": fn_id}}],
    )
    assert alarms["TrainingGuard-self-DigestThrottles"]["MetricName"] == "Throttles"
    letters = alarms["TrainingGuard-self-DigestDeadLetters"]
    assert letters["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq_id, "QueueName"]}}]
    for name in ("DigestErrors", "DigestThrottles", "DigestDeadLetters"):
        alarm = alarms[f"TrainingGuard-self-{name}"]
        assert (alarm["Threshold"], alarm["AlarmActions"]) == (1, [{"Ref": topic_id}])


def test_a_disabled_digest_has_neither_function_nor_schedule_nor_alarms(disabled: Synth) -> None:
    handlers = [fn["Properties"]["Handler"] for fn in disabled.resources("AWS::Lambda::Function").values()]
    assert HANDLER not in handlers
    assert len(handlers) == 6  # job events, alarm events, sweeper, Slack notifier, log events, log subscription
    assert not [k for k in disabled.resources("AWS::Events::Rule") if "Digest" in k]
    assert not [k for k in disabled.resources("AWS::SQS::Queue") if "Digest" in k]
    assert not [
        a for a in disabled.resources("AWS::CloudWatch::Alarm").values() if "Digest" in a["Properties"]["AlarmName"]
    ]
    assert GuardConfig.from_dict({"digest": {"enabled": False}}).digest.enabled is False


@pytest.mark.parametrize("fixture", ["synth", "friday", "disabled"])
def test_cdk_nag_finds_nothing_open(fixture: str, request: pytest.FixtureRequest) -> None:
    """Synthesis already raises on an open finding; the report says so, and names no digest resource."""
    synth: Synth = request.getfixturevalue(fixture)
    plugins = synth.report()["pluginReports"]
    assert {p["pluginName"] for p in plugins} == {"AwsSolutions", "Serverless"}
    assert all(p["violations"] == [] for p in plugins)
    # Resource * on the digest's role is GetMetricData only, covered by the acknowledgment of unscoped reads.
    assert "cloudwatch:GetMetricData" in ACKNOWLEDGED["AwsSolutions::AwsSolutions-IAM5[Resource::*]"]
