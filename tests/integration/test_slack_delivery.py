"""Job event -> SNS -> chat queue -> the real Slack notifier -> a real HTTP listener on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tests.helpers import load_event, with_detail
from training_guard import contract
from training_guard.adapters.ledger import DynamoLedger
from training_guard.adapters.slack import ATTEMPT_SECONDS
from training_guard.config.model import GuardConfig
from training_guard.services.ports import Claim
from training_guard_local.emulator import Emulation, LambdaContext
from training_guard_local.slack_listener import Reply, SlackListener, render_text

ONE_CHANNEL: dict[str, object] = {"webhooks": {"default": {}}}
ROUTED: dict[str, object] = {
    "webhooks": {"default": {}, "oncall": {}, "vision": {"secret_name": "teams/vision/slack"}},
    "by_severity": {"critical": "oncall"},
    "team_tag": "team",
}


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlackListener]:
    # Retry *behaviour* is under test here, not the production back-off durations.
    monkeypatch.setattr("training_guard.adapters.slack.BACKOFF_FACTOR", 0.01)
    with SlackListener() as listener:
        yield listener


def emulate(slack: SlackListener, slack_config: dict[str, object] | None = None) -> Emulation:
    """An emulation whose webhooks point at the listener (one channel "default" unless told)."""
    config = GuardConfig.from_dict({"slack": slack_config or ONE_CHANNEL})
    return Emulation(config, webhook_urls={name: slack.url(name) for name in config.slack.webhooks})


def headers(slack: SlackListener, channel: str) -> list[str]:
    return [r.body["blocks"][0]["text"]["text"] for r in slack.received(channel)]


def test_a_notification_reaches_slack_once_as_block_kit(slack: SlackListener) -> None:
    with emulate(slack) as aws:
        event = load_event("rule_error")
        aws.deliver(event)
        aws.deliver(event)  # a duplicate event: no second notification
        assert aws.pump_chat() == [{"batchItemFailures": []}]
    [received] = slack.received("default")
    body = received.body
    assert body["unfurl_links"] is False
    assert body["text"].startswith("🟠 Rule ExplodingTensor failed on pytorch-mnist")
    assert [b["type"] for b in body["blocks"]] == [
        "header",
        "section",
        "section",
        "section",
        "actions",
        "divider",
        "context",
    ]
    assert "No debugging data was saved" in render_text(body)


def test_routing_by_team_tag_and_severity(slack: SlackListener) -> None:
    with emulate(slack, ROUTED) as aws:
        aws.deliver(load_event("vanishing_gradient_issues_found"))  # team=vision, stopped: critical
        aws.deliver(with_detail(load_event("rule_error"), Tags={}, TrainingJobName="other-job"))  # warning, no team
        aws.pump_chat()
    stopped = "🔴 Stopped pytorch-mnist-lr01-2026-11-30-02-10-00-123: rule VanishingGradient found issues"
    assert headers(slack, "vision") == [stopped]
    assert headers(slack, "oncall") == [stopped]
    assert headers(slack, "default") == ["🟠 Rule ExplodingTensor failed on other-job"]


def test_429_honours_retry_after_then_delivers(slack: SlackListener) -> None:
    slack.script("default", Reply(429, "rate_limited", {"Retry-After": "1"}))
    with emulate(slack) as aws:
        aws.deliver(load_event("rule_error"))
        started = time.monotonic()
        assert aws.pump_chat() == [{"batchItemFailures": []}]
        elapsed = time.monotonic() - started
    attempts = slack.received("default", delivered_only=False)
    assert [a.status for a in attempts] == [429, 200]
    assert attempts[1].at - attempts[0].at >= 1.0
    assert elapsed >= 1.0


def test_a_long_retry_after_returns_the_message_to_the_queue_instead_of_waiting(slack: SlackListener) -> None:
    slack.script("default", Reply(429, "rate_limited", {"Retry-After": "120"}))
    with emulate(slack) as aws:
        aws.deliver(load_event("rule_error"))
        started = time.monotonic()
        first = aws.pump_chat()
        assert time.monotonic() - started < 5
        assert len(first[0]["batchItemFailures"]) == 1
        assert aws.pump_chat() == [{"batchItemFailures": []}]  # the redelivery succeeds
    assert [a.status for a in slack.received("default", delivered_only=False)] == [429, 200]


def test_500_then_success_is_retried_within_the_invocation(slack: SlackListener) -> None:
    slack.script("default", Reply(500, "internal_error"), Reply(503, "service_unavailable"))
    with emulate(slack) as aws:
        aws.deliver(load_event("rule_error"))
        assert aws.pump_chat() == [{"batchItemFailures": []}]
    assert [a.status for a in slack.received("default", delivered_only=False)] == [500, 503, 200]


def test_a_timeout_is_retried(slack: SlackListener, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("training_guard.adapters.slack.SEND_TIMEOUT_SECONDS", 0.5)
    slack.script("default", Reply(200, "ok", delay=1.5))
    with emulate(slack) as aws:
        aws.deliver(load_event("rule_error"))
        assert aws.pump_chat() == [{"batchItemFailures": []}]
    assert len(slack.received("default")) == 2  # the slow one (client gave up) and the retry


def test_404_is_not_retried_and_the_message_is_parked_with_the_reason(slack: SlackListener) -> None:
    slack.script("default", Reply(404, "no_service"))
    with emulate(slack) as aws:
        aws.deliver(load_event("rule_error"))
        assert aws.pump_chat() == [{"batchItemFailures": []}]
        [parked] = aws.chat_dead_letters()
    assert [a.status for a in slack.received("default", delivered_only=False)] == [404]
    assert parked["reason"] == "webhook 'default': HTTP 404 no_service"
    assert '"kind":"rule_error"' in parked["body"]


def test_a_secret_still_holding_the_placeholder_parks_the_message_saying_what_to_do(slack: SlackListener) -> None:
    with Emulation(GuardConfig.from_dict({"slack": ONE_CHANNEL})) as aws:
        aws.deliver(load_event("rule_error"))
        aws.pump_chat()
        [parked] = aws.chat_dead_letters()
    assert "does not hold a webhook URL yet" in parked["reason"]
    assert "aws secretsmanager put-secret-value --secret-id arn:aws:secretsmanager:" in parked["reason"]
    assert slack.requests == []


def test_persistent_5xx_ends_in_the_dead_letter_queue_after_the_receive_limit(slack: SlackListener) -> None:
    slack.script("default", *[Reply(500, "internal_error")] * 40)
    with emulate(slack) as aws:
        aws.deliver(load_event("rule_error"))
        aws.pump_chat(rounds=6)
        [dead] = aws.chat_dead_letters()
    assert dead["reason"] is None  # moved by SQS's redrive policy, not parked
    assert '"kind":"rule_error"' in dead["body"]


def test_a_redelivered_message_reaches_only_the_channels_that_missed_it(slack: SlackListener) -> None:
    slack.script("oncall", Reply(500, "x"), Reply(500, "x"), Reply(500, "x"), Reply(500, "x"))
    with emulate(slack, ROUTED) as aws:
        aws.deliver(load_event("vanishing_gradient_issues_found"))  # vision + oncall
        first = aws.pump_chat()
        assert len(first[0]["batchItemFailures"]) == 1
        aws.pump_chat()
    assert len(slack.received("vision")) == 1
    assert len(slack.received("oncall")) == 1


def test_the_webhook_url_never_appears_in_logs(
    slack: SlackListener, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    # Everything the guard and the HTTP libraries log, at their most verbose. (botocore's own DEBUG wire log
    # prints every API response, secrets included; Lambda never runs it unless asked to.)
    caplog.set_level(logging.INFO)
    for name in ("training-guard", "training_guard", "slack_sdk", "urllib3"):
        caplog.set_level(logging.DEBUG, logger=name)
    slack.script("default", Reply(429, "rate_limited", {"Retry-After": "0"}), Reply(500, "x"), Reply(404, "gone"))
    with emulate(slack) as aws:
        aws.deliver(load_event("rule_error"))
        aws.pump_chat()
        dead = aws.chat_dead_letters()
    refused = "http://127.0.0.1:9/services/T0EMULATED/B0REFUSED/refused-secret-token"
    with Emulation(GuardConfig.from_dict({"slack": ONE_CHANNEL}), webhook_urls={"default": refused}) as aws:
        aws.deliver(load_event("rule_error"))
        aws.pump_chat()
    out, err = capsys.readouterr()
    logged = caplog.text + out + err + " ".join(str(d) for d in dead)
    assert "secret-token" not in logged
    assert "T0EMULATED" not in logged
    assert "HTTP 404 gone" in logged  # the failure itself is reported


def test_the_notifier_settings_name_a_missing_variable() -> None:
    from training_guard.config.settings import ChatSettings, SettingsError

    with pytest.raises(SettingsError, match=contract.ENV_WEBHOOK_SECRETS):
        ChatSettings.from_env({contract.ENV_CONFIG: GuardConfig().to_json(), contract.ENV_TABLE: "t"})


def test_a_self_monitoring_alarm_reaches_slack_once(slack: SlackListener) -> None:
    alarm = {
        "AlarmName": "TrainingGuard-JobEventsErrors",
        "AlarmDescription": "The job-events function failed; its events are retried, then dead-lettered.",
        "AWSAccountId": "123456789012",
        "NewStateValue": "ALARM",
        "NewStateReason": "Threshold Crossed: 1 datapoint [2.0 (30/11/26 03:00:00)] was greater than or equal to the threshold (1.0).",
        "StateChangeTime": "2026-11-30T03:01:00.000+0000",
        "Region": "US East (N. Virginia)",
        "OldStateValue": "OK",
    }
    with emulate(slack) as aws:
        sns = aws.client("sns")
        for _ in range(2):  # SNS may deliver twice
            sns.publish(TopicArn=aws.topic_arn, Message=json.dumps(alarm))
        aws.pump_chat()
        assert aws.chat_dead_letters() == []
    [received] = slack.received("default")
    assert headers(slack, "default") == ["🔴 Training Guard self-monitoring: TrainingGuard-JobEventsErrors is ALARM"]
    assert "The job-events function failed" in render_text(received.body)


def test_a_message_another_attempt_is_delivering_comes_back_later_instead_of_being_dropped(
    slack: SlackListener,
) -> None:
    with emulate(slack) as aws:
        aws.deliver(load_event("rule_error"))
        dynamodb = aws.client("dynamodb")
        [transition] = [
            item["pk"]["S"]
            for item in dynamodb.scan(TableName="training-guard-state")["Items"]
            if item["pk"]["S"].startswith("t#")
        ]
        # A notifier attempt holds a live lease on this message's delivery (it may yet time out).
        ledger = DynamoLedger(dynamodb, "training-guard-state")
        assert ledger.claim(f"c#{transition}#default", now=datetime.now(UTC), lease_seconds=300) is Claim.GRANTED
        [busy] = aws.pump_chat()
        assert len(busy["batchItemFailures"]) == 1  # back to the queue, not counted as delivered
        assert slack.received("default") == []
        ledger.release(f"c#{transition}#default")  # that attempt failed after all
        assert aws.pump_chat() == [{"batchItemFailures": []}]
    assert len(slack.received("default")) == 1


class ShortContext(LambdaContext):
    """An invocation with `seconds` left: too little for one more send."""

    def __init__(self, seconds: float) -> None:
        super().__init__(function_name="slack-notifier")
        self.seconds = seconds

    def get_remaining_time_in_millis(self) -> int:
        return int(self.seconds * 1000)


def test_a_send_that_could_outlast_the_invocation_is_not_started_and_the_message_comes_back(
    slack: SlackListener,
) -> None:
    from training_guard.handlers import slack_notifier

    with emulate(slack) as aws:
        aws.deliver(load_event("rule_error"))
        sqs = aws.client("sqs")
        [message] = sqs.receive_message(QueueUrl=aws.chat_queue_url, VisibilityTimeout=0)["Messages"]
        record = {"messageId": message["MessageId"], "receiptHandle": message["ReceiptHandle"], "body": message["Body"]}
        short = slack_notifier.handler({"Records": [record]}, ShortContext(ATTEMPT_SECONDS - 1))
        assert short == {"batchItemFailures": [{"itemIdentifier": message["MessageId"]}]}
        assert slack.received("default") == []
        assert aws.pump_chat() == [{"batchItemFailures": []}]  # a later invocation with time delivers it
    assert len(slack.received("default")) == 1
