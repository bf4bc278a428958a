"""Every key of infra/outputs.py is a stack output holding the value of the right resource.

The README's runbooks and `training-guard doctor` read these instead of looking names up in the
console; an output pointing at the wrong queue would send a redrive to the wrong place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App

from infra import outputs
from infra.app import build_app
from tests.infra.conftest import ConfigSynth, Synth, synthesized
from training_guard.config.model import ConfigError

CONDITIONAL = {  # only with Slack configured, or with a subscription that has a dead-letter queue
    outputs.SLACK_NOTIFIER_FUNCTION,
    outputs.CHAT_QUEUE,
    outputs.CHAT_DEAD_LETTERS,
    outputs.SUBSCRIPTIONS_DEAD_LETTERS,
    outputs.DASHBOARD_NAME,  # only with `dashboard` on
}
CONDITIONAL_DASHBOARD = {outputs.DASHBOARD_NAME}
APP_MODE = {  # only in Slack app mode
    outputs.SLACK_INTERACTIONS_FUNCTION,
    outputs.SLACK_CLICK_WORKER_FUNCTION,
    outputs.SLACK_CLICK_QUEUE,
    outputs.SLACK_CLICK_DEAD_LETTERS,
    outputs.SLACK_INTERACTIVITY_URL,
    outputs.SLACK_BOT_TOKEN_SECRET,
    outputs.SLACK_SIGNING_SECRET,
}


def declared_keys() -> set[str]:
    return {
        value
        for name, value in vars(outputs).items()
        if name.isupper() and isinstance(value, str) and name != "SLACK_SECRET_PREFIX"
    }


def ref(synth: Synth, kind: str, path_part: str) -> dict[str, str]:
    logical_id, _ = synth.one(kind, path_part)
    return {"Ref": logical_id}


def values(synth: Synth) -> dict[str, Any]:
    return {key: output["Value"] for key, output in synth.json["Outputs"].items()}


def test_the_module_declares_the_keys_the_runbooks_use() -> None:
    assert len(declared_keys()) == 26
    assert outputs.slack_secret("on-call") == "SlackWebhookSecretoncall"


def test_with_slack_every_output_is_the_reference_of_its_resource(synth: Synth) -> None:
    function, queue, rule = "AWS::Lambda::Function", "AWS::SQS::Queue", "AWS::Events::Rule"
    assert values(synth) == {
        outputs.TOPIC_ARN: ref(synth, "AWS::SNS::Topic", ""),
        outputs.STATE_TABLE_NAME: ref(synth, "AWS::DynamoDB::Table", ""),
        outputs.JOB_EVENTS_FUNCTION: ref(synth, function, "JobEventsHandler"),
        outputs.ALARM_EVENTS_FUNCTION: ref(synth, function, "MetricGuardsAlarmEvents"),
        outputs.SWEEPER_FUNCTION: ref(synth, function, "MetricGuardsSweeper"),
        outputs.SLACK_NOTIFIER_FUNCTION: ref(synth, function, "ChatNotifier"),
        outputs.JOB_EVENTS_RULE: ref(synth, rule, "JobEventsRule"),
        outputs.ALARM_EVENTS_RULE: ref(synth, rule, "MetricGuardsAlarmRule"),
        outputs.SWEEP_SCHEDULE_RULE: ref(synth, rule, "MetricGuardsSchedule"),
        outputs.JOB_EVENTS_DEAD_LETTERS: ref(synth, queue, "JobEventsDeadLetters"),
        outputs.METRIC_GUARDS_DEAD_LETTERS: ref(synth, queue, "MetricGuardsDeadLetters"),
        outputs.CHAT_QUEUE: ref(synth, queue, "ChatQueue"),
        outputs.CHAT_DEAD_LETTERS: ref(synth, queue, "ChatDeadLetters"),
        outputs.SUBSCRIPTIONS_DEAD_LETTERS: ref(synth, queue, "AlertingDeadLetters"),
        outputs.slack_secret("default"): "TrainingGuard/slack/default",
        # the log rules (tests/infra/test_log_rules.py)
        outputs.LOG_EVENTS_FUNCTION: ref(synth, function, "LogRulesHandler"),
        outputs.LOG_RULES_DEAD_LETTERS: ref(synth, queue, "LogRulesDeadLetters"),
        outputs.LOG_STALL_CHECK_RULE: ref(synth, rule, "LogRulesStallCheck"),
        outputs.LOG_SUBSCRIPTION_STATUS: {
            "Fn::GetAtt": [synth.one("Custom::TrainingGuardLogSubscription")[0], "Status"]
        },
    }
    # no dashboard unless asked for (`dashboard`: $3 a month)
    assert set(values(synth)) == declared_keys() - APP_MODE - {outputs.DASHBOARD_NAME} | {
        outputs.slack_secret("default")
    }
    assert synth.resources("AWS::CloudWatch::Dashboard") == {}


@pytest.fixture(scope="module")
def app_mode(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    config = tmp_path_factory.mktemp("config") / "app.json"
    slack = {"mode": "app", "webhooks": None, "app": {"channels": {"default": "C0ALERTS"}}}
    config.write_text(json.dumps({"slack": slack, "dashboard": True}))
    return Synth(tmp_path_factory.mktemp("app"), {"config": str(config)})


def test_in_app_mode_the_apps_outputs_are_there_and_no_webhook_secret(app_mode: Synth) -> None:
    function, queue = "AWS::Lambda::Function", "AWS::SQS::Queue"
    found = values(app_mode)
    assert set(found) == declared_keys()
    url_id, _ = app_mode.one("AWS::Lambda::Url")
    # the dashboard's Ref is its name, the one the stack gives it
    _, dashboard = app_mode.one("AWS::CloudWatch::Dashboard")
    assert dashboard["Properties"]["DashboardName"] == "TrainingGuard-activity"
    assert found[outputs.DASHBOARD_NAME] == ref(app_mode, "AWS::CloudWatch::Dashboard", "")
    assert {key: found[key] for key in APP_MODE} == {
        outputs.SLACK_INTERACTIONS_FUNCTION: ref(app_mode, function, "SlackAppInteractions"),
        outputs.SLACK_CLICK_WORKER_FUNCTION: ref(app_mode, function, "SlackAppClickWorker"),
        outputs.SLACK_CLICK_QUEUE: ref(app_mode, queue, "SlackAppClicks"),
        outputs.SLACK_CLICK_DEAD_LETTERS: ref(app_mode, queue, "SlackAppClickDeadLetters"),
        outputs.SLACK_INTERACTIVITY_URL: {"Fn::GetAtt": [url_id, "FunctionUrl"]},
        outputs.SLACK_BOT_TOKEN_SECRET: "TrainingGuard/slack/slack-app-bot-token",
        outputs.SLACK_SIGNING_SECRET: "TrainingGuard/slack/slack-app-signing-secret",
    }
    for key, output in app_mode.json["Outputs"].items():
        assert len(output.get("Description", "")) > 15, key


def test_every_output_says_what_it_is(synth: Synth) -> None:
    for key, output in synth.json["Outputs"].items():
        assert len(output.get("Description", "")) > 15, key


@pytest.fixture(scope="module")
def email_only(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    config = tmp_path_factory.mktemp("config") / "email.json"
    config.write_text(json.dumps({"slack": None, "emails": ["ml-oncall@example.com"]}))
    return Synth(tmp_path_factory.mktemp("email"), {"config": str(config)})


def test_without_slack_the_chat_outputs_are_absent_and_the_email_dead_letters_are_there(email_only: Synth) -> None:
    present = set(values(email_only))
    assert present == declared_keys() - CONDITIONAL - APP_MODE | {outputs.SUBSCRIPTIONS_DEAD_LETTERS}
    assert values(email_only)[outputs.SUBSCRIPTIONS_DEAD_LETTERS] == ref(
        email_only, "AWS::SQS::Queue", "AlertingDeadLetters"
    )


def test_the_email_subscriptions_dead_letters_are_watched_without_slack_too(email_only: Synth) -> None:
    # They were only watched when Slack was configured: a bounced e-mail then waited unseen.
    queue_id, _ = email_only.one("AWS::SQS::Queue", "AlertingDeadLetters")
    [alarm] = [
        a["Properties"]
        for a in email_only.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"]["AlarmName"] == "TrainingGuard-self-SubscriptionsDeadLetters"
    ]
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]


def test_without_any_subscription_dead_letters_there_is_no_output_for_them(tmp_path: Path) -> None:
    plain = synthesized(ConfigSynth, {"slack": None}, tmp_path)  # test_chat's
    assert set(values(plain)) == declared_keys() - CONDITIONAL - APP_MODE


def test_two_webhooks_that_would_share_an_output_key_are_named(tmp_path: Path) -> None:
    config = tmp_path / "clash.json"
    config.write_text(json.dumps({"slack": {"webhooks": {"on-call": {}, "oncall": {}}, "default": "oncall"}}))
    app = App(outdir=str(tmp_path / "out"), context={"config": str(config), "aws:cdk:bundling-stacks": []})
    with pytest.raises(ConfigError, match=r"'on-call' and 'oncall' differ only in '-'.*SlackWebhookSecretoncall"):
        build_app(app, checks=False)
