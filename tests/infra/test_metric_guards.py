"""Metric guards in the template: fleet alarms, alarm routing, the sweeper and their permissions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.components import job_events, metric_guards
from tests.infra.conftest import Synth, expected_rows, statement_rows
from tests.infra.test_stack import getatt, job_alarms_arn, training_jobs_arn
from training_guard import contract
from training_guard.config.model import ConfigError, GuardConfig

GUARDS = [
    {"name": "loss-diverging", "metric": "train:loss", "threshold": 5, "datapoints": 3, "periods": 5, "action": "stop"},
    {
        "name": "idle-gpu",
        "metric": "GPUUtilization",
        "statistic": "AVG",
        "comparison": "<",
        "threshold": 5,
        "periods": 30,
        "datapoints": 20,
    },
]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    config = tmp_path_factory.mktemp("config") / "guard.json"
    config.write_text(json.dumps({"metric_guards": GUARDS, "stall": {"minutes": 20}, "sweep_minutes": 10}))
    return Synth(tmp_path_factory.mktemp("guarded"), {"config": str(config)})


def test_each_guard_is_one_metrics_insights_alarm(guarded: Synth) -> None:
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in guarded.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"]["AlarmName"].startswith(contract.ALARM_NAME_PREFIX)
    }
    assert set(alarms) == {"training-guard-loss-diverging", "training-guard-idle-gpu"}
    loss = alarms["training-guard-loss-diverging"]
    assert loss["Metrics"] == [
        {
            "Id": "q",
            "Expression": (
                'SELECT MAX("train:loss") FROM "/aws/sagemaker/TrainingJobs" GROUP BY TrainingJobName ORDER BY MAX() DESC'
            ),
            "Period": 60,
            "ReturnData": True,
        }
    ]
    assert (loss["ComparisonOperator"], loss["Threshold"]) == ("GreaterThanThreshold", 5)
    assert (loss["EvaluationPeriods"], loss["DatapointsToAlarm"]) == (5, 3)
    assert "AlarmActions" not in loss  # contributors reach the guard through EventBridge
    gpu = alarms["training-guard-idle-gpu"]
    assert gpu["Metrics"][0]["Expression"].endswith("GROUP BY Host ORDER BY AVG() ASC")
    assert (gpu["ComparisonOperator"], gpu["EvaluationPeriods"], gpu["DatapointsToAlarm"]) == (
        "LessThanThreshold",
        30,
        20,
    )


def test_alarm_events_rule_matches_exactly_the_guards_alarms(guarded: Synth) -> None:
    _, rule = guarded.one("AWS::Events::Rule", "AlarmRule")
    fn_id, _ = guarded.one("AWS::Lambda::Function", "AlarmEvents")
    dlq_id, _ = guarded.one("AWS::SQS::Queue", "MetricGuardsDeadLetters")
    assert rule["Properties"]["EventPattern"] == contract.ALARM_EVENTS_PATTERN
    [target] = rule["Properties"]["Targets"]
    assert target["Arn"] == getatt(fn_id)
    assert target["DeadLetterConfig"] == {"Arn": getatt(dlq_id)}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 8, "MaximumEventAgeInSeconds": 7200}


def test_alarm_events_and_sweeper_park_unusable_events_in_their_own_dead_letter_queue(guarded: Synth) -> None:
    dlq_id, _ = guarded.one("AWS::SQS::Queue", "MetricGuardsDeadLetters")
    for path in ("AlarmEvents", "Sweeper"):
        _, fn = guarded.one("AWS::Lambda::Function", path)
        assert fn["Properties"]["Environment"]["Variables"][contract.ENV_REJECTED_EVENTS_QUEUE_URL] == {"Ref": dlq_id}


def test_sweeper_runs_on_the_configured_schedule_and_ends_before_the_next_sweep(guarded: Synth) -> None:
    _, schedule = guarded.one("AWS::Events::Rule", "Schedule")
    fn_id, fn = guarded.one("AWS::Lambda::Function", "Sweeper")
    assert schedule["Properties"]["ScheduleExpression"] == "rate(10 minutes)"
    [target] = schedule["Properties"]["Targets"]
    assert target["Arn"] == getatt(fn_id)
    assert "DeadLetterConfig" in target
    assert fn["Properties"]["Timeout"] == 240  # 4 minutes, well inside the 10-minute interval


def test_no_function_reserves_concurrency(synth: Synth, guarded: Synth) -> None:
    # A reservation must leave 100 unreserved executions: with an account concurrency quota of 10
    # (many new accounts) the stack would fail to create.
    for template in (synth, guarded):
        for fn in template.resources("AWS::Lambda::Function").values():
            assert "ReservedConcurrentExecutions" not in fn["Properties"]


@pytest.mark.parametrize("minutes", range(1, 61))
def test_a_sweep_times_out_before_the_next_one_is_scheduled(minutes: int) -> None:
    timeout = metric_guards.sweeper_timeout(minutes).to_seconds()
    assert metric_guards.SWEEPER_MIN_TIMEOUT.to_seconds() <= timeout < minutes * 60
    assert timeout <= metric_guards.SWEEPER_MAX_TIMEOUT.to_seconds()


def test_the_sweep_interval_is_bounded_by_the_configuration_to_the_range_tested_above() -> None:
    assert GuardConfig.from_dict({"sweep_minutes": 1}).sweep_minutes == 1
    assert GuardConfig.from_dict({"sweep_minutes": 60}).sweep_minutes == 60
    for outside in (0, 61):
        with pytest.raises(ConfigError, match="sweep_minutes"):
            GuardConfig.from_dict({"sweep_minutes": outside})


def test_a_one_minute_sweep_gets_a_timeout_under_a_minute(tmp_path: Path) -> None:
    config = tmp_path / "guard.json"
    config.write_text(json.dumps({"sweep_minutes": 1}))
    fast = Synth(tmp_path / "out", {"config": str(config)})
    _, schedule = fast.one("AWS::Events::Rule", "Schedule")
    _, fn = fast.one("AWS::Lambda::Function", "Sweeper")
    assert schedule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    assert fn["Properties"]["Timeout"] == 30


def _statements(synth: Synth, part: str) -> list[tuple[Any, Any, Any]]:
    _, policy = synth.one("AWS::IAM::Policy", part)
    return statement_rows(policy["Properties"]["PolicyDocument"]["Statement"])


def _responder_statements(synth: Synth) -> list[tuple[Any, Any, Any]]:
    table_id, _ = synth.one("AWS::DynamoDB::Table")
    topic_id, _ = synth.one("AWS::SNS::Topic")
    key_id, _ = synth.one("AWS::KMS::Key")
    dlq_id, _ = synth.one("AWS::SQS::Queue", "MetricGuardsDeadLetters")
    return [
        (
            "ObserveStopAndAttributeTrainingJobs",
            [*job_events.JOB_EVENTS_ACTIONS, "sagemaker:ListTags"],
            training_jobs_arn(),
        ),
        ("TransitionLedger", list(job_events.LEDGER_ACTIONS), getatt(table_id)),
        ("DeadLetterFailedEvents", "sqs:SendMessage", getatt(dlq_id)),
        ("PublishNotifications", "sns:Publish", {"Ref": topic_id}),
        ("UseGuardKey", list(job_events.KEY_ACTIONS), getatt(key_id)),
        ("ReadListPrices", "pricing:GetProducts", "*"),  # the sweeper's stops (stalls, alarms) are priced too
    ]


def test_alarm_events_role_has_exactly_the_responders_permissions(guarded: Synth) -> None:
    log_id, _ = guarded.one("AWS::Logs::LogGroup", "AlarmEvents")
    assert _statements(guarded, "AlarmEvents") == expected_rows(
        [
            ("WriteOwnLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], getatt(log_id)),
            (None, ["xray:PutTraceSegments", "xray:PutTelemetryRecords"], "*"),
            *_responder_statements(guarded),
        ]
    )


def test_sweeper_role_adds_only_alarm_upkeep_and_unscoped_reads(guarded: Synth) -> None:
    log_id, _ = guarded.one("AWS::Logs::LogGroup", "Sweeper")
    assert _statements(guarded, "Sweeper") == expected_rows(
        [
            ("WriteOwnLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], getatt(log_id)),
            (None, ["xray:PutTraceSegments", "xray:PutTelemetryRecords"], "*"),
            *_responder_statements(guarded),
            ("KeepPerJobAlarms", list(job_events.JOB_ALARM_ACTIONS), job_alarms_arn()),
            ("ReadAlarms", list(metric_guards.ALARM_READ_ACTIONS), "*"),
            ("ListRunningJobsAndMetrics", ["sagemaker:ListTrainingJobs", "cloudwatch:GetMetricData"], "*"),
            # once per table: the mutes an earlier version wrote get their markers (adapters/mutes.mark_once)
            ("MarkMutesOnce", "dynamodb:Scan", getatt(guarded.one("AWS::DynamoDB::Table")[0])),
        ]
    )
    assert job_events.JOB_ALARM_ACTIONS == (
        "cloudwatch:PutMetricAlarm",
        "cloudwatch:DeleteAlarms",
        "cloudwatch:TagResource",
    )
    # the sweeper lists the per-job alarms by prefix and reads the fleet alarms' contributors in ALARM
    assert metric_guards.ALARM_READ_ACTIONS == ("cloudwatch:DescribeAlarms", "cloudwatch:DescribeAlarmContributors")


def test_the_shipped_stack_has_no_fleet_alarm_but_keeps_alarm_routing_and_the_sweeper(synth: Synth) -> None:
    names = [a["Properties"]["AlarmName"] for a in synth.resources("AWS::CloudWatch::Alarm").values()]
    assert not [n for n in names if n.startswith(contract.ALARM_NAME_PREFIX)]  # cdk.json configures no fleet guard
    assert synth.one("AWS::Lambda::Function", "AlarmEvents")
    assert synth.one("AWS::Lambda::Function", "Sweeper")
