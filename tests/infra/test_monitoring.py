"""The guard watches itself: alarms on its functions and dead-letter queues, and a dashboard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.components import monitoring
from tests.infra.conftest import ConfigSynth, Synth, synthesized
from training_guard import contract

FUNCTIONS = {
    "JobEvents": "JobEventsHandler",
    "AlarmEvents": "AlarmEvents",
    "Sweeper": "Sweeper",
    "SlackNotifier": "ChatNotifier",
    "Digest": "DigestFunction",
    "LogEvents": "LogRulesHandler",
}
QUEUES = {
    "JobEvents": "JobEventsDeadLetters",
    "MetricGuards": "MetricGuardsDeadLetters",
    "Chat": "ChatDeadLetters",
    "Subscriptions": "AlertingDeadLetters",
    "Digest": "DigestDeadLetters",
    "LogRules": "LogRulesDeadLetters",
}


def self_alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in synth.resources("AWS::CloudWatch::Alarm").values()
        if "-self-" in a["Properties"]["AlarmName"]
    }


def test_every_function_alarms_on_errors_and_throttles_to_the_topic(synth: Synth) -> None:
    alarms = self_alarms(synth)
    topic_id, _ = synth.one("AWS::SNS::Topic")
    for name, path in FUNCTIONS.items():
        fn_id, _ = synth.one("AWS::Lambda::Function", path)
        for metric in ("Errors", "Throttles"):
            alarm = alarms[f"TrainingGuard-self-{name}{metric}"]
            assert (alarm["MetricName"], alarm["Namespace"]) == (metric, "AWS/Lambda")
            assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": fn_id}}]
            assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
            assert alarm["AlarmActions"] == [{"Ref": topic_id}]
            assert alarm["OKActions"] == [{"Ref": topic_id}]


def test_every_dead_letter_queue_alarms_when_it_holds_a_message(synth: Synth) -> None:
    alarms = self_alarms(synth)
    for name, path in QUEUES.items():
        queue_id, _ = synth.one("AWS::SQS::Queue", path)
        alarm = alarms[f"TrainingGuard-self-{name}DeadLetters"]
        assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
        assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
        assert alarm["Threshold"] == 1
        assert "redrive" in alarm["AlarmDescription"]
    assert (
        len(alarms) == 2 * len(FUNCTIONS) + len(QUEUES) + 4
    )  # + SlackSecretNotSet, FleetAlarmsOverCap (tests below), LogDeliveryErrors and LogDeliveryThrottling (test_log_rules)


def test_a_fleet_alarm_over_a_cloudwatch_cap_alarms_to_the_topic(synth: Synth) -> None:
    alarm = self_alarms(synth)["TrainingGuard-self-FleetAlarmsOverCap"]
    topic_id, _ = synth.one("AWS::SNS::Topic")
    assert (alarm["Namespace"], alarm["MetricName"]) == (contract.GUARD_METRICS_NAMESPACE, "FleetAlarmsOverCap")
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "training-guard"}]
    assert (alarm["Statistic"], alarm["Threshold"], alarm["ComparisonOperator"]) == (
        "Sum",
        1,
        "GreaterThanOrEqualToThreshold",
    )
    assert alarm["AlarmActions"] == [{"Ref": topic_id}]
    assert "doctor" in alarm["AlarmDescription"]


def test_the_cost_model_counts_the_shipped_templates_alarms(synth: Synth) -> None:
    from bench import run

    assert run.ASSUMPTIONS["self-monitoring alarms"] == len(synth.resources("AWS::CloudWatch::Alarm"))
    assert run.ASSUMPTIONS["dashboard (off unless `dashboard`)"] == len(synth.resources("AWS::CloudWatch::Dashboard"))


def test_self_alarms_are_not_routed_as_metric_guards(synth: Synth) -> None:
    assert not [n for n in self_alarms(synth) if n.startswith(contract.ALARM_NAME_PREFIX)]


@pytest.fixture(scope="module")
def with_dashboard(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    config = tmp_path_factory.mktemp("config") / "dashboard.json"
    config.write_text(json.dumps({"dashboard": True}))
    return Synth(tmp_path_factory.mktemp("dashboard"), {"config": str(config)})


def test_the_dashboard_is_made_only_when_asked_for(synth: Synth, with_dashboard: Synth) -> None:
    assert synth.resources("AWS::CloudWatch::Dashboard") == {}
    assert len(with_dashboard.resources("AWS::CloudWatch::Dashboard")) == 1


def test_the_dashboard_shows_the_guards_own_metrics(with_dashboard: Synth) -> None:
    _, dashboard = with_dashboard.one("AWS::CloudWatch::Dashboard")
    assert dashboard["Properties"]["DashboardName"] == "TrainingGuard-activity"
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))  # tokens: region, names
    shown = {
        tuple(m[:4])
        for w in body["widgets"]
        for m in w["properties"].get("metrics", [])
        if m[0] == contract.GUARD_METRICS_NAMESPACE
    }
    for metric in (
        "Outcome_stopped",
        "Outcome_would_stop",
        "NotificationsPublished",
        "NotificationsFolded",
        "SlackFailed",
        "StalledJobs",
    ):
        assert (contract.GUARD_METRICS_NAMESPACE, metric, "service", "training-guard") in shown


def test_the_dashboard_shows_spend_avoided_per_day_and_per_rule_from_the_one_metric(with_dashboard: Synth) -> None:
    """One metric, SpendAvoidedUSD {rule, service}; Metrics Insights sums it over all rules per day and groups it
    by rule (rules are only known at run time)."""
    _, dashboard = with_dashboard.one("AWS::CloudWatch::Dashboard")
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))
    queries = {
        w["properties"]["title"]: (m[0]["expression"], w["properties"])
        for w in body["widgets"]
        for m in w["properties"].get("metrics", [])
        if isinstance(m[0], dict) and "expression" in m[0]
    }
    per_day = queries["Spend avoided by stops per day (USD at list price, up to)"]
    assert per_day[0] == 'SELECT SUM(SpendAvoidedUSD) FROM SCHEMA("TrainingGuard", rule, service)'
    assert (per_day[1]["period"], per_day[1]["view"]) == (86400, "bar")
    per_rule = queries["Spend avoided by stops per rule (USD at list price, up to; the time range shown)"]
    assert per_rule[0] == (
        'SELECT SUM(SpendAvoidedUSD) FROM SCHEMA("TrainingGuard", rule, service) GROUP BY rule ORDER BY SUM() DESC'
    )
    assert (per_rule[1]["setPeriodToTimeRange"], per_rule[1]["view"]) == (True, "bar")
    # the names the function writes (handlers/receipts.SpendMeter) are the ones queried
    assert (contract.SPEND_AVOIDED_METRIC, contract.RULE_DIMENSION, contract.SERVICE_DIMENSION) == (
        "SpendAvoidedUSD",
        "rule",
        "service",
    )
    assert contract.SERVICE_DIMENSION in monitoring.SERVICE_DIMENSION


def test_a_refusal_for_want_of_a_slack_secret_alarms_to_the_topic(synth: Synth, tmp_path: Path) -> None:
    alarm = self_alarms(synth)[f"TrainingGuard-self-{monitoring.SECRET_NOT_SET_ALARM}"]
    topic_id, _ = synth.one("AWS::SNS::Topic")
    assert (alarm["Namespace"], alarm["MetricName"]) == (contract.GUARD_METRICS_NAMESPACE, "SecretNotSet")
    assert alarm["MetricName"] == contract.SECRET_NOT_SET_METRIC
    assert alarm["Dimensions"] == [{"Name": contract.SERVICE_DIMENSION, "Value": "training-guard"}]
    assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"]) == ("Sum", 300, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["AlarmActions"] == [{"Ref": topic_id}]
    assert "training-guard doctor" in alarm["AlarmDescription"]
    # Without Slack nothing reads a Slack secret: no alarm to pay for.
    plain = synthesized(ConfigSynth, {"slack": None}, tmp_path)
    assert f"TrainingGuard-self-{monitoring.SECRET_NOT_SET_ALARM}" not in self_alarms(plain)
