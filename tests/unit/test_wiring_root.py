"""The composition root: each invocation gets its own lease and deadline; the container keeps clients and pacing."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard.domain.leases import lease_for
from training_guard.handlers import wiring


@dataclass
class Context:
    remaining_ms: int
    invoked_function_arn: str = "arn:aws:lambda:eu-west-1:123456789012:function:training-guard-slack-notifier"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch) -> wiring.Root:
    config = GuardConfig.from_dict({"slack": {"webhooks": {"default": {}}}})
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv(contract.ENV_CONFIG, config.to_json())
    monkeypatch.delenv(contract.ENV_CONFIG_FILE, raising=False)
    monkeypatch.setenv(contract.ENV_TABLE, "training-guard-state")
    monkeypatch.setenv(contract.ENV_TOPIC_ARN, "arn:aws:sns:eu-west-1:123456789012:training-guard")
    monkeypatch.setenv(contract.ENV_WEBHOOK_SECRETS, json.dumps({"default": "training-guard/slack/default"}))
    monkeypatch.setenv(contract.ENV_DEAD_LETTER_QUEUE_URL, "https://sqs.eu-west-1.amazonaws.com/123456789012/dlq")
    made: list[str] = []

    def clients(service: str) -> object:
        made.append(service)
        return object()

    built = wiring.Root(clients)  # type: ignore[arg-type]
    built.made = made  # type: ignore[attr-defined]
    return built


def test_each_notifier_invocation_gets_its_own_lease_and_deadline(root: wiring.Root) -> None:
    short, long = root.delivery_for(Context(20_000)), root.delivery_for(Context(600_000))
    assert (short.lease_seconds, long.lease_seconds) == (lease_for(20_000), lease_for(600_000))
    assert short.budget is not long.budget
    assert short.sender.deadline.time_left() <= 20.0 < long.sender.deadline.time_left()  # type: ignore[attr-defined]


def test_the_container_keeps_one_client_per_service_and_the_slack_pacing(root: wiring.Root) -> None:
    first, second = root.delivery_for(Context(20_000)), root.delivery_for(Context(20_000))
    assert first.sender._last_sent is second.sender._last_sent  # type: ignore[attr-defined]
    assert root.made.count("dynamodb") == 1  # type: ignore[attr-defined]
    assert root.made.count("sqs") == 1  # type: ignore[attr-defined]


def test_each_invocation_gets_its_own_responder_over_the_containers_ports(root: wiring.Root) -> None:
    one, two = root.responder_for(Context(20_000)), root.responder_for(Context(900_000))
    assert (one.lease_seconds, two.lease_seconds) == (lease_for(20_000), lease_for(900_000))
    assert one.ledger is two.ledger is root.responder.ledger
    assert root.responder not in (one, two)  # the container's own is never the one an invocation changes


def test_the_log_watch_keeps_its_jobs_definitions_across_invocations(root: wiring.Root) -> None:
    # DescribeTrainingJob and ListTags once per job and container, not once per delivery
    first, second = root.log_watch_for(Context(20_000)), root.log_watch_for(Context(900_000))
    assert first._jobs is second._jobs
    assert (first.responder.lease_seconds, second.responder.lease_seconds) == (lease_for(20_000), lease_for(900_000))


def test_the_bot_keeps_the_configured_pacing_across_invocations(
    root: wiring.Root, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(contract.ENV_SLACK_BOT_TOKEN_SECRET, "training-guard/slack-bot")
    monkeypatch.setenv(contract.ENV_SLACK_MIN_INTERVAL, "0.25")
    one, two = (root.bot(wiring.deadline_of(Context(ms))) for ms in (20_000, 600_000))
    assert one._min_interval == two._min_interval == 0.25
    assert one._last_post is two._last_post
