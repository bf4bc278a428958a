"""Slack app mode wired in, with the real adapters: the notifier's thread and card over HTTP to the local
Slack Web API, the records on moto's DynamoDB, the bot token from Secrets Manager; Stop now through the responder
and the DynamoDB ledger, two people at once."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from tests.fakes import FakeJobs, FakePublisher
from tests.helpers import NOW, running_job
from tests.integration.test_slack_app import Serialized
from tests.unit.test_slack_app_mode import FakeCharts, Parked, document
from training_guard import contract
from training_guard.adapters.ledger import DynamoLedger
from training_guard.adapters.secrets import Secrets
from training_guard.adapters.slack_app import BotFromSecret, SlackAppError
from training_guard.adapters.threads import DynamoThreads
from training_guard.config.model import GuardConfig
from training_guard.domain.policy import Kind
from training_guard.services.chat import ChatDelivery
from training_guard.services.responder import Responder
from training_guard.services.slack_app_delivery import AppMode
from training_guard.services.threads import Waiting, thread_key
from training_guard_local.emulator import TABLE, Emulation
from training_guard_local.slack_web_api import DEFAULT_CHANNEL, SlackWebApi

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def aws() -> Iterator[Emulation]:
    with Emulation() as emulation:
        yield emulation


@pytest.fixture
def slack(tmp_path: Path) -> Iterator[SlackWebApi]:
    with SlackWebApi(files_dir=tmp_path) as api:
        yield api


def config() -> GuardConfig:
    return GuardConfig.from_dict(
        {
            "slack": {"mode": "app", "app": {"channels": {"default": DEFAULT_CHANNEL}}},
            "metric_guards": [{"name": "loss-high", "metric": "train:loss", "threshold": 5}],
        }
    )


def notifier(aws: Emulation, slack: SlackWebApi, token: str, parked: Parked, charts: FakeCharts) -> ChatDelivery:
    secret = aws.client("secretsmanager").create_secret(Name=f"bot-{uuid.uuid4().hex[:8]}", SecretString=token)
    guard = config()
    bot = BotFromSecret(
        Secrets(aws.client("secretsmanager")).get, secret["ARN"], base_url=slack.base_url, min_interval=0
    )
    return ChatDelivery(
        guard.slack,
        urls=None,  # type: ignore[arg-type]  # app mode reads no webhook
        sender=None,  # type: ignore[arg-type]
        ledger=DynamoLedger(aws.client("dynamodb"), TABLE),
        parker=parked,
        ttl_seconds=86400,
        config=guard,
        app=AppMode(
            bot=bot,
            threads=DynamoThreads(aws.client("dynamodb"), TABLE),
            waiting=Waiting(monotonic=lambda: 0.0, sleep=lambda _: None, time_left=lambda: 0.0),
            failure=SlackAppError,
            charts=charts,
        ),
    )


def test_a_jobs_notifications_make_one_thread_its_card_updated_in_place_and_the_graph_uploaded(
    aws: Emulation, slack: SlackWebApi
) -> None:
    job = f"resnet-{uuid.uuid4().hex[:8]}"
    charts = FakeCharts()
    chat = notifier(aws, slack, slack.token, Parked(), charts)
    assert chat.deliver(document(job), now=NOW).delivered == ["default"]
    fired = document(job, kind=Kind.METRIC_ALARM, rule="loss-high", at=NOW + timedelta(minutes=3))
    assert chat.deliver(fired, now=NOW).delivered == ["default"]
    assert chat.deliver(fired, now=NOW).skipped == ["default"]  # SQS delivered it twice
    [parent] = [m for m in slack.history() if m.thread_ts is None]
    replies = slack.replies(DEFAULT_CHANNEL, parent.ts)
    assert [m.text.split(": why")[0] for m in replies if not m.files] == [
        f"🟠 Rule LossNotDecreasing found issues in {job}",
        f"🟠 {job}: metric guard loss-high fired",
    ]
    assert len(parent.edits) == 1  # the card, updated in place by the newer notification
    assert parent.text.startswith(f"🟠 {job}: metric guard loss-high fired")
    [upload] = [f for m in replies for f in m.files]
    assert upload.name == f"{job}-train-loss.png"
    item = aws.client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": thread_key(job, DEFAULT_CHANNEL)}})
    assert item["Item"]["ts"]["S"] == parent.ts


def test_a_bot_token_secret_still_holding_its_placeholder_parks_the_message_with_the_fix(
    aws: Emulation, slack: SlackWebApi
) -> None:
    for value in (contract.BOT_TOKEN_PLACEHOLDER, " ", "xoxb-"):
        parked = Parked()
        chat = notifier(aws, slack, value, parked, FakeCharts())
        result = chat.deliver(document(), now=NOW)
        assert result.permanent == result.not_configured == ["default"]
    [(_, reason)] = parked.bodies
    assert "does not hold a bot token (xoxb-...) yet" in reason
    assert slack.history() == []


def test_two_people_pressing_stop_now_at_once_make_one_stop_recorded_in_the_table(aws: Emulation) -> None:
    name = f"mnist-{uuid.uuid4().hex[:8]}"
    job = running_job(name, timedelta(hours=1))
    jobs = FakeJobs({name: job})
    # Each DynamoDB call whole, as DynamoDB applies a conditional write atomically (moto does not lock).
    ledger = DynamoLedger(cast("DynamoDBClient", Serialized(aws.client("dynamodb"))), TABLE)
    guard = Responder(GuardConfig(), jobs, ledger, FakePublisher())
    together = threading.Barrier(2)
    describe = jobs.describe

    def describe_together(name: str) -> Any:
        found = describe(name)
        together.wait(timeout=5)
        return found

    jobs.describe = describe_together  # type: ignore[method-assign]
    said: list[str] = []

    def press(user: str) -> None:
        said.append(guard.stop_requested(name, by=f"slack:{user}", rule=None, request_id=user, region=None, now=NOW))

    pressing = [threading.Thread(target=press, args=(u,)) for u in ("U0ALICE", "U0BOB")]
    for t in pressing:
        t.start()
    for t in pressing:
        t.join()
    assert jobs.stop_calls == [name]
    assert sorted(said) == sorted(
        [f"stopped {name}", f"{name} is already being stopped (another click or a rule was first)"]
    )
    item = aws.client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": f"stop#{name}"}})["Item"]
    assert item["stopped_by"]["S"] == item["rule"]["S"]
    assert item["stopped_by"]["S"] in {"slack:U0ALICE", "slack:U0BOB"}
    assert jobs.tags_by_arn[str(job.arn)][contract.TAG_STOPPED_BY] == item["stopped_by"]["S"]
    # A click on the job now that it is stopping says so and stops nothing.
    jobs.describe = describe  # type: ignore[method-assign]
    assert guard.stop_requested(name, by="slack:U0CAROL", rule=None, request_id="c", region=None, now=NOW) == (
        f"nothing to do: {name} is already being stopped"
    )
    jobs.jobs[name] = replace(jobs.jobs[name], status="Stopped")
    assert "had already ended (Stopped)" in guard.stop_requested(
        name, by="slack:U0CAROL", rule=None, request_id="d", region=None, now=NOW
    )
    assert jobs.stop_calls == [name]
