"""`training-guard test-notification` end to end on the synthesized stack deployed on moto.

The notification goes through the deployed path: SNS (the guard's own adapter and renderers), the chat queue
(moto's raw SQS subscription), the real Slack notifier handler (run on the queue as its event source mapping
would) and a Slack-compatible listener on 127.0.0.1 for each webhook; Q Developer's HTTPS endpoint records what
SNS posts to it. The command learns what arrived from the state table and the chat dead-letter queue only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from infra import outputs
from tests.integration.deployed import (
    CONFIG,
    EMAIL,
    REGION,
    STACK,
    WEBHOOKS,
    Deployment,
    deployed,
    notifier,
    patch_https,
)
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard_local import cli, notify_test
from training_guard_local.preflight import FAIL, OK, WARN
from training_guard_local.slack_listener import Reply, SlackListener, render_text

pytestmark = pytest.mark.integration

TEST_ID = "0123456789ab"


class Clock:
    """Time as the command sees it: each of its waits lets the notifier run once."""

    def __init__(self, pump: Callable[[], int] | None) -> None:
        self.now = 0.0
        self.pump = pump
        self.sleeps = 0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        if self.pump is not None:
            self.pump()


@pytest.fixture
def slack() -> Iterator[SlackListener]:
    with SlackListener() as listener:
        yield listener


@pytest.fixture
def stack(slack: SlackListener) -> Iterator[Deployment]:
    with deployed(CONFIG) as deployment:
        for webhook in WEBHOOKS:
            deployment.client("secretsmanager").put_secret_value(
                SecretId=deployment.outputs[outputs.slack_secret(webhook)], SecretString=slack.url(webhook)
            )
        yield deployment


def send(stack: Deployment, clock: Clock, *, timeout: float = 60) -> tuple[notify_test.Report, list[str]]:
    progress: list[str] = []
    report = notify_test.send(
        stack.aws(),
        STACK,
        timeout=timeout,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
        progress=progress.append,
        test_id=TEST_ID,
    )
    return report, progress


def channels(report: notify_test.Report) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.message) for c in report.channels}


def test_one_marked_message_reaches_every_channel_and_the_report_says_so(
    stack: Deployment, slack: SlackListener, monkeypatch: pytest.MonkeyPatch
) -> None:
    q_developer = patch_https(monkeypatch)
    with notifier(stack, monkeypatch) as pump:
        report, progress = send(stack, Clock(pump))
    assert report.exit_code == 0, notify_test.render(report)
    assert {name: status for name, (status, _) in channels(report).items()} == {
        "slack:default": OK,
        "slack:on-call": OK,
        f"e-mail:{EMAIL}": OK,
        "q-developer": OK,
    }
    assert channels(report)["slack:default"][1] == "delivered (2 s after publishing: the notifier's record)"
    # every webhook got it once, although the routing sends an info notification to `default` only
    for webhook in WEBHOOKS:
        [message] = slack.received(webhook)
        text = render_text(message.body)
        assert text.startswith("🔵 Test notification from Training Guard (TrainingGuard): nothing happened to any job")
        assert "What the guard did: Nothing: this is a test of the notification path." in text
        assert "[Open" not in text  # no console links: a test is about no job
    # Q Developer got its custom-notification form, on a thread of its own
    [custom] = q_developer.messages()
    assert custom["content"]["title"].startswith(":information_source: Test notification from Training Guard")
    assert custom["metadata"]["threadId"] == f"training-guard/training-guard-test-{TEST_ID}"
    assert progress[0].startswith(f"published test notification {TEST_ID} to arn:aws:sns:{REGION}:")
    assert progress[-1] == "slack: default delivered, on-call delivered (2 s)"


def test_the_message_is_the_guards_own_document(stack: Deployment, monkeypatch: pytest.MonkeyPatch) -> None:
    patch_https(monkeypatch)
    report, _ = send(stack, Clock(None), timeout=2)  # nothing consumes the chat queue
    [raw] = stack.client("sqs").receive_message(QueueUrl=stack.outputs[outputs.CHAT_QUEUE])["Messages"]
    document = json.loads(raw["Body"])
    assert document["schema"] == contract.NOTIFICATION_SCHEMA
    assert (document["kind"], document["severity"], document["transition"]) == ("test", "info", f"test#{TEST_ID}")
    assert document["title"].startswith("Test notification")
    assert document["event_id"] == TEST_ID
    assert document["links"] == {}
    assert report.exit_code == 1


def test_a_webhook_still_holding_the_placeholder_is_reported_parked_with_its_fix(
    stack: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    patch_https(monkeypatch)
    secret = stack.outputs[outputs.slack_secret("on-call")]
    stack.client("secretsmanager").put_secret_value(SecretId=secret, SecretString=contract.WEBHOOK_PLACEHOLDER)
    with notifier(stack, monkeypatch) as pump:
        report, _ = send(stack, Clock(pump))
    assert report.exit_code == 1
    [parked] = [c for c in report.channels if c.name == "slack:on-call"]
    assert parked.status == FAIL
    assert parked.message == f"parked in the chat dead-letter queue: {secret} does not hold a webhook URL yet"
    assert parked.fix.startswith(f"aws secretsmanager put-secret-value --region {REGION} --secret-id {secret} ")
    assert parked.fix.endswith("then training-guard doctor --fix delivers what waited")
    assert channels(report)["slack:default"][0] == OK


def test_each_webhook_is_told_its_own_reason_when_one_message_failed_for_both(
    stack: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    patch_https(monkeypatch)
    for webhook in WEBHOOKS:
        stack.client("secretsmanager").put_secret_value(
            SecretId=stack.outputs[outputs.slack_secret(webhook)], SecretString=contract.WEBHOOK_PLACEHOLDER
        )
    with notifier(stack, monkeypatch) as pump:
        report, progress = send(stack, Clock(pump))
    for webhook in WEBHOOKS:
        secret = stack.outputs[outputs.slack_secret(webhook)]
        assert channels(report)[f"slack:{webhook}"] == (
            FAIL,
            f"parked in the chat dead-letter queue: {secret} does not hold a webhook URL yet",
        )
    assert progress[-1] == "slack: default parked, on-call parked (2 s)"


def test_a_revoked_webhook_is_reported_with_what_slack_answered(
    stack: Deployment, slack: SlackListener, monkeypatch: pytest.MonkeyPatch
) -> None:
    patch_https(monkeypatch)
    slack.script("default", Reply(404, "no_service"))
    with notifier(stack, monkeypatch) as pump:
        report, _ = send(stack, Clock(pump))
    status, message = channels(report)["slack:default"]
    assert status == FAIL
    assert "webhook 'default'" in message
    assert "404" in message
    assert channels(report)["slack:on-call"][0] == OK


def test_a_notifier_that_does_not_run_is_reported_after_the_timeout(
    stack: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    patch_https(monkeypatch)
    clock = Clock(None)
    report, progress = send(stack, clock, timeout=10)
    assert report.exit_code == 1
    for webhook in WEBHOOKS:
        check = next(c for c in report.channels if c.name == f"slack:{webhook}")
        assert check.status == FAIL
        assert check.message == "not delivered within 10 s, nor parked in the chat dead-letter queue"
        assert "aws logs tail /aws/lambda/TrainingGuard-ChatNotifier" in check.fix
    assert clock.now == 10
    assert progress[1:] == [
        "slack: default waiting, on-call waiting (0 s)",
        "slack: default waiting, on-call waiting (10 s)",
    ]


def test_an_unconfirmed_email_and_a_topic_without_q_developer(
    slack: SlackListener, monkeypatch: pytest.MonkeyPatch
) -> None:
    patch_https(monkeypatch)
    config = CONFIG.from_dict({**json.loads(CONFIG.to_json()), "q_developer": None})
    with deployed(config) as stack:
        for webhook in WEBHOOKS:
            stack.client("secretsmanager").put_secret_value(
                SecretId=stack.outputs[outputs.slack_secret(webhook)], SecretString=slack.url(webhook)
            )
        stack.pending(EMAIL)
        with notifier(stack, monkeypatch) as pump:
            report, _ = send(stack, Clock(pump))
    assert channels(report)[f"e-mail:{EMAIL}"] == (FAIL, "pending confirmation: SNS sends it nothing")
    assert channels(report)["q-developer"] == (
        WARN,
        "not configured: no Amazon Q Developer subscription on the topic",
    )
    assert report.exit_code == 1


def test_the_command_prints_the_report_and_progress_on_stderr(
    stack: Deployment, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from training_guard_local import doctor

    patch_https(monkeypatch)
    monkeypatch.setattr(doctor, "connect", lambda environ, region: stack.aws())
    with notifier(stack, monkeypatch) as pump:
        monkeypatch.setattr(notify_test, "pause", lambda _: pump())
        assert cli.main(["test-notification", "--region", REGION, "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["exit_code"] == 0
    assert [c["name"] for c in document["channels"]] == [
        "slack:default",
        "slack:on-call",
        f"e-mail:{EMAIL}",
        "q-developer",
    ]
    assert "published test notification" in captured.err


def test_a_missing_stack_is_a_failure_not_a_traceback(stack: Deployment) -> None:
    stack.exists = False
    report, _ = send(stack, Clock(None))
    assert channels(report) == {"stack": (FAIL, f"no stack {STACK} in {REGION}")}
    assert report.exit_code == 1


@pytest.mark.parametrize("timeout", ["0", "901"])
def test_a_timeout_out_of_range_is_a_usage_error(timeout: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["test-notification", "--timeout", timeout]) == 2
    assert capsys.readouterr().err == (
        "training-guard test-notification: --timeout must be more than 0 and at most 900 seconds\n"
    )


def test_a_topic_nobody_listens_to_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    with deployed(GuardConfig()) as stack:  # no Slack, no e-mail, no Q Developer
        report, _ = send(stack, Clock(None))
    assert channels(report) == {
        "q-developer": (WARN, "not configured: no Amazon Q Developer subscription on the topic"),
        "subscribers": (FAIL, "nothing is subscribed to the topic: nobody is notified"),
    }
    assert report.exit_code == 1
