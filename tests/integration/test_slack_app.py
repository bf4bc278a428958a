"""Slack app mode against the local Slack Web API: the bot's real Web API calls over HTTP on 127.0.0.1.

The bot adapter (post, reply, update, upload), its errors as the guard classifies them, the thread record that
makes the parent exactly once (DynamoDB on moto, two notifications at once), the mute records, and signed
interaction payloads posted to the real handler.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode

import pytest

from tests.fakes_slack_app import FakeMutes, FakeThreads
from tests.helpers import NOW
from training_guard import contract
from training_guard.adapters.interactions import ClickQueue, ReplayMarkers, ResponseUrl, SigningSecret
from training_guard.adapters.mutes import DynamoMutes
from training_guard.adapters.slack import Deadline
from training_guard.adapters.slack_app import OUT_OF_TIME, SlackApp, SlackAppError, bot_token
from training_guard.adapters.threads import DynamoThreads
from training_guard.domain import mutes
from training_guard.domain.credentials import BOT_TOKEN_PREFIX
from training_guard.domain.errors import ActionFailed
from training_guard.handlers.interactions import process
from training_guard.render.slack_actions import Act, Click, button
from training_guard.services.clicks import NOT_ALLOWED, ClickWorker, Interactions
from training_guard.services.threads import (
    ClaimOutcome,
    Thread,
    ThreadRecord,
    ThreadStorePort,
    Waiting,
    open_thread,
    thread_key,
)
from training_guard_local.emulator import TABLE, Emulation
from training_guard_local.slack_web_api import DEFAULT_CHANNEL, Fault, SlackWebApi

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


pytestmark = pytest.mark.integration

BLOCKS = [{"type": "section", "text": {"type": "mrkdwn", "text": "*mnist-1* stopped"}}]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
TTL = 35 * 86400


@pytest.fixture
def slack(tmp_path: Path) -> Iterator[SlackWebApi]:
    with SlackWebApi(files_dir=tmp_path, channels=(DEFAULT_CHANNEL, "C0OTHER")) as api:
        yield api


def app(slack: SlackWebApi, **kwargs: object) -> SlackApp:
    options: dict[str, object] = {"min_interval": 0.0, "backoff_factor": 0.01}
    options.update(kwargs)
    return SlackApp(slack.token, base_url=slack.base_url, **options)  # type: ignore[arg-type]


def failure(call: object) -> SlackAppError:
    with pytest.raises(SlackAppError) as caught:
        call()  # type: ignore[operator]
    return caught.value


# --- the bot adapter ----------------------------------------------------------------------------------------


def test_a_parent_gets_a_ts_a_reply_lands_in_its_thread_and_the_parent_is_updated_in_place(slack: SlackWebApi) -> None:
    bot = app(slack)
    parent = bot.post_parent(DEFAULT_CHANNEL, "mnist-1: finding", BLOCKS)
    reply = bot.reply(DEFAULT_CHANNEL, parent.ts, "stopped at 04:12", [])
    bot.update(DEFAULT_CHANNEL, parent.ts, "mnist-1: stopped", BLOCKS)

    [shown] = slack.history(DEFAULT_CHANNEL)
    assert (shown.ts, shown.text, shown.blocks) == (parent.ts, "mnist-1: stopped", BLOCKS)
    assert shown.edits == [{"text": "mnist-1: finding", "blocks": BLOCKS}]
    assert [r.ts for r in slack.replies(DEFAULT_CHANNEL, parent.ts)] == [reply.ts]
    assert parent.channel == reply.channel == DEFAULT_CHANNEL
    assert reply.ts != parent.ts


def test_a_png_goes_into_the_thread_through_the_three_upload_calls_and_is_saved(
    slack: SlackWebApi, tmp_path: Path
) -> None:
    bot = app(slack)
    parent = bot.post_parent(DEFAULT_CHANNEL, "card", BLOCKS)
    file_id = bot.upload_png(
        DEFAULT_CHANNEL, parent.ts, PNG, filename="train-loss.png", title="train:loss, last 3 h", alt_text="loss"
    )

    [reply] = slack.replies(DEFAULT_CHANNEL, parent.ts)
    [shared] = reply.files
    assert shared.id == file_id
    assert (shared.name, shared.title, shared.alt_txt) == ("train-loss.png", "train:loss, last 3 h", "loss")
    assert shared.path is not None
    assert shared.path.parent == tmp_path
    assert shared.path.read_bytes() == PNG
    calls = [c.method for c in slack.calls if c.method != "chat.postMessage"]
    assert calls == ["files.getUploadURLExternal", "upload", "files.completeUploadExternal"]
    assert slack.called("files.getUploadURLExternal")[0].params["length"] == str(len(PNG))


def test_auth_test_names_the_workspace_and_the_bot(slack: SlackWebApi) -> None:
    identity = app(slack).identity()
    assert identity["team_id"] == "T0EMULATED"
    assert identity["bot_id"] == "B0TRAINGUARD"


def test_a_wrong_token_is_a_permanent_failure_and_is_not_shown(slack: SlackWebApi) -> None:
    token = f"{BOT_TOKEN_PREFIX}not-the-emulated-one"
    bot = SlackApp(token, base_url=slack.base_url, min_interval=0.0)
    error = failure(lambda: bot.post_parent(DEFAULT_CHANNEL, "x", BLOCKS))
    assert (error.error, error.permanent, error.status) == ("invalid_auth", True, 200)
    assert token not in str(error)
    assert len(slack.called("chat.postMessage")) == 1  # not retried


def test_an_unknown_channel_is_permanent_and_tried_once(slack: SlackWebApi) -> None:
    error = failure(lambda: app(slack).post_parent("C0NOSUCH", "x", BLOCKS))
    assert (error.error, error.permanent) == ("channel_not_found", True)
    assert len(slack.called("chat.postMessage")) == 1


def test_updating_a_message_that_does_not_exist_is_permanent(slack: SlackWebApi) -> None:
    error = failure(lambda: app(slack).update(DEFAULT_CHANNEL, "1700000000.000001", "x", BLOCKS))
    assert (error.error, error.permanent) == ("message_not_found", True)


def test_a_reply_to_a_thread_that_does_not_exist_is_refused(slack: SlackWebApi) -> None:
    error = failure(lambda: app(slack).reply(DEFAULT_CHANNEL, "1700000000.000001", "x", BLOCKS))
    assert (error.error, error.permanent) == ("thread_not_found", True)
    assert slack.history(DEFAULT_CHANNEL) == []


def test_a_rate_limit_is_waited_out_as_retry_after_says_then_the_post_goes_through(slack: SlackWebApi) -> None:
    slack.fail("chat.postMessage", Fault.ratelimited(retry_after=1))
    started = time.monotonic()
    posted = app(slack).post_parent(DEFAULT_CHANNEL, "x", BLOCKS)
    assert time.monotonic() - started >= 1.0
    assert [c.status for c in slack.called("chat.postMessage")] == [429, 200]
    assert [m.ts for m in slack.history(DEFAULT_CHANNEL)] == [posted.ts]


def test_a_rate_limit_longer_than_the_guard_waits_is_transient_at_once(slack: SlackWebApi) -> None:
    slack.fail("chat.postMessage", Fault.ratelimited(retry_after=30))
    started = time.monotonic()
    error = failure(lambda: app(slack).post_parent(DEFAULT_CHANNEL, "x", BLOCKS))
    assert time.monotonic() - started < 1.0
    assert (error.error, error.permanent, error.status) == ("ratelimited", False, 429)


def test_a_rate_limit_beyond_the_invocations_time_left_is_transient_at_once(slack: SlackWebApi) -> None:
    deadline = Deadline()
    deadline.time_left = lambda: 14.0  # one attempt fits, a 3 s wait and another does not
    slack.fail("chat.postMessage", Fault.ratelimited(retry_after=3))
    error = failure(lambda: app(slack, deadline=deadline).post_parent(DEFAULT_CHANNEL, "x", BLOCKS))
    assert (error.error, error.permanent) == ("ratelimited", False)
    assert len(slack.called("chat.postMessage")) == 1


def test_server_errors_are_retried_with_backoff_then_transient(slack: SlackWebApi) -> None:
    slack.fail("chat.update", *[Fault.server_error(503)] * 4)
    bot = app(slack)
    parent = bot.post_parent(DEFAULT_CHANNEL, "x", BLOCKS)
    error = failure(lambda: bot.update(DEFAULT_CHANNEL, parent.ts, "y", BLOCKS))
    assert (error.error, error.permanent, error.status) == ("service_unavailable", False, 503)
    assert len(slack.called("chat.update")) == 4  # the first try and its three retries


def test_a_server_error_then_success_updates_once(slack: SlackWebApi) -> None:
    slack.fail("chat.update", Fault.server_error(500))
    bot = app(slack)
    parent = bot.post_parent(DEFAULT_CHANNEL, "x", BLOCKS)
    bot.update(DEFAULT_CHANNEL, parent.ts, "y", BLOCKS)
    assert slack.history(DEFAULT_CHANNEL)[0].text == "y"


def test_an_error_slack_calls_transient_is_transient_even_with_http_200(slack: SlackWebApi) -> None:
    slack.fail("chat.postMessage", Fault("internal_error"))
    error = failure(lambda: app(slack).post_parent(DEFAULT_CHANNEL, "x", BLOCKS))
    assert (error.error, error.permanent, error.status) == ("internal_error", False, 200)


def test_a_failed_upload_post_is_transient_and_shares_nothing(slack: SlackWebApi) -> None:
    bot = app(slack)
    parent = bot.post_parent(DEFAULT_CHANNEL, "x", BLOCKS)
    slack.fail("upload", Fault("upload_refused", status=500))
    error = failure(lambda: bot.upload_png(DEFAULT_CHANNEL, parent.ts, PNG, filename="a.png", title="a", alt_text="a"))
    assert error.permanent is False
    assert "127.0.0.1" not in str(error)  # the upload URL is a ticket
    assert slack.replies(DEFAULT_CHANNEL, parent.ts) == []
    assert slack.called("files.completeUploadExternal") == []


def test_nothing_is_started_without_the_time_to_finish_it(slack: SlackWebApi) -> None:
    deadline = Deadline()
    deadline.time_left = lambda: 20.0  # one call (12 s) fits, an upload's three do not
    bot = app(slack, deadline=deadline)
    parent = bot.post_parent(DEFAULT_CHANNEL, "x", BLOCKS)
    error = failure(lambda: bot.upload_png(DEFAULT_CHANNEL, parent.ts, PNG, filename="a.png", title="a", alt_text="a"))
    assert (error.error, error.permanent) == (OUT_OF_TIME, False)
    deadline.time_left = lambda: 5.0
    assert failure(lambda: bot.reply(DEFAULT_CHANNEL, parent.ts, "x", BLOCKS)).error == OUT_OF_TIME
    assert [c.method for c in slack.calls] == ["chat.postMessage"]


def test_posts_to_one_channel_are_a_second_apart_and_other_channels_do_not_wait(slack: SlackWebApi) -> None:
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    bot = app(slack, min_interval=1.0, clock=lambda: now[0], sleep=sleep)
    parent = bot.post_parent(DEFAULT_CHANNEL, "a", BLOCKS)
    now[0] += 0.25
    bot.reply(DEFAULT_CHANNEL, parent.ts, "b", BLOCKS)
    bot.post_parent("C0OTHER", "c", BLOCKS)
    bot.update(DEFAULT_CHANNEL, parent.ts, "d", BLOCKS)  # an edit posts nothing: not paced
    assert slept == [0.75]


def test_a_secret_still_holding_the_placeholder_is_a_permanent_failure_naming_the_fix() -> None:
    token = f"{BOT_TOKEN_PREFIX}{secrets.token_hex(12)}"
    assert bot_token("tg/slack/bot-token", f" {token}\n") == token
    with pytest.raises(SlackAppError) as caught:
        bot_token("tg/slack/bot-token", "REPLACE-ME: put the bot token in this secret")
    assert caught.value.permanent is True
    assert "put-secret-value --secret-id tg/slack/bot-token" in str(caught.value)


# --- the thread record on DynamoDB: its contract, then two notifications at once ------------------------------


class Serialized:
    """A DynamoDB client whose calls run one at a time. DynamoDB applies each conditional write atomically; moto
    checks the condition and writes without a lock, so two threads could both pass it. Each call stays whole;
    the steps of the protocol (read, claim, post, record) still interleave freely between the two attempts."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return method(*args, **kwargs)

        return call


@pytest.fixture(scope="module")
def aws() -> Iterator[Emulation]:
    with Emulation() as emulation:
        yield emulation


@pytest.fixture(params=["dynamodb", "fake"])
def threads_store(request: pytest.FixtureRequest, aws: Emulation) -> ThreadStorePort:
    if request.param == "fake":
        return FakeThreads()
    return DynamoThreads(aws.client("dynamodb"), TABLE)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_a_parent_claim_is_granted_then_busy_then_posted(threads_store: ThreadStorePort) -> None:
    key = thread_key(unique("job"), DEFAULT_CHANNEL)
    claim = threads_store.claim(key, holder="a", now=NOW, lease_seconds=40, ttl_seconds=TTL)
    assert claim.outcome is ClaimOutcome.GRANTED
    busy = threads_store.claim(key, holder="b", now=NOW + timedelta(seconds=40), lease_seconds=40, ttl_seconds=TTL)
    assert busy.outcome is ClaimOutcome.BUSY
    assert busy.record is not None
    assert (busy.record.holder, busy.record.lease_until) == ("a", int(NOW.timestamp()) + 40)
    recorded = threads_store.record_parent(key, holder="a", ts="1.1", card_version=7, now=NOW, ttl_seconds=TTL)
    assert recorded == ThreadRecord(ts="1.1", card_version=7)
    after = threads_store.claim(key, holder="c", now=NOW + timedelta(days=30), lease_seconds=40, ttl_seconds=TTL)
    assert (after.outcome, after.record) == (ClaimOutcome.POSTED, ThreadRecord(ts="1.1", card_version=7))
    assert threads_store.read(key) == ThreadRecord(ts="1.1", card_version=7)


def test_an_expired_claim_is_taken_over_and_the_late_holder_finds_the_new_parent(
    threads_store: ThreadStorePort,
) -> None:
    key = thread_key(unique("job"), DEFAULT_CHANNEL)
    threads_store.claim(key, holder="late", now=NOW, lease_seconds=40, ttl_seconds=TTL)
    later = NOW + timedelta(seconds=41)
    taken = threads_store.claim(key, holder="taker", now=later, lease_seconds=40, ttl_seconds=TTL)
    assert taken.outcome is ClaimOutcome.GRANTED
    threads_store.record_parent(key, holder="taker", ts="2.2", card_version=1, now=later, ttl_seconds=TTL)
    late = threads_store.record_parent(key, holder="late", ts="9.9", card_version=1, now=later, ttl_seconds=TTL)
    assert late.ts == "2.2"
    assert threads_store.read(key) == ThreadRecord(ts="2.2", card_version=1)


def test_a_release_frees_only_the_holders_own_claim(threads_store: ThreadStorePort) -> None:
    key = thread_key(unique("job"), DEFAULT_CHANNEL)
    threads_store.claim(key, holder="a", now=NOW, lease_seconds=40, ttl_seconds=TTL)
    threads_store.release(key, holder="b")
    assert threads_store.read(key) is not None
    threads_store.release(key, holder="a")
    assert threads_store.read(key) is None
    threads_store.claim(key, holder="c", now=NOW, lease_seconds=40, ttl_seconds=TTL)
    threads_store.record_parent(key, holder="c", ts="3.3", card_version=1, now=NOW, ttl_seconds=TTL)
    threads_store.release(key, holder="c")  # a late release never drops a posted thread
    assert threads_store.read(key) == ThreadRecord(ts="3.3", card_version=1)


def test_the_card_version_only_moves_forward(threads_store: ThreadStorePort) -> None:
    key = thread_key(unique("job"), DEFAULT_CHANNEL)
    assert threads_store.advance_card(key, 5) is False  # no thread yet
    threads_store.claim(key, holder="a", now=NOW, lease_seconds=40, ttl_seconds=TTL)
    assert threads_store.advance_card(key, 5) is False  # not posted yet
    threads_store.record_parent(key, holder="a", ts="4.4", card_version=5, now=NOW, ttl_seconds=TTL)
    assert [threads_store.advance_card(key, v) for v in (4, 5, 6, 6)] == [False, False, True, False]


def test_the_thread_record_expires_with_the_ledgers_transitions(aws: Emulation) -> None:
    store, dynamodb = DynamoThreads(aws.client("dynamodb"), TABLE), aws.client("dynamodb")
    key = thread_key(unique("job"), DEFAULT_CHANNEL)
    store.claim(key, holder="a", now=NOW, lease_seconds=40, ttl_seconds=TTL)
    store.record_parent(key, holder="a", ts="5.5", card_version=1, now=NOW + timedelta(seconds=1), ttl_seconds=TTL)
    item = dynamodb.get_item(TableName=TABLE, Key={contract.TABLE_PARTITION_KEY: {"S": key}})["Item"]
    assert item[contract.TABLE_TTL_ATTRIBUTE] == {"N": str(int(NOW.timestamp()) + 1 + TTL)}
    assert "holder" not in item
    assert "lease_until" not in item


@pytest.mark.parametrize("round_", range(3))
def test_two_first_notifications_at_once_make_one_parent_and_both_reply_in_its_thread(
    slack: SlackWebApi, aws: Emulation, round_: int
) -> None:
    store = DynamoThreads(cast("DynamoDBClient", Serialized(aws.client("dynamodb"))), TABLE)
    job = unique("resnet")
    key = thread_key(job, DEFAULT_CHANNEL)
    start = threading.Barrier(2)
    results: dict[str, Thread] = {}
    errors: list[BaseException] = []

    def notify(name: str) -> None:
        bot = app(slack)

        def post_parent() -> str:
            time.sleep(0.1)  # rendering and a real round trip to Slack: the other attempt claims meanwhile
            return bot.post_parent(DEFAULT_CHANNEL, f"{job}: card", BLOCKS).ts

        try:
            start.wait()
            thread = open_thread(
                store,
                key,
                post_parent=post_parent,
                holder=name,
                now=NOW,
                lease_seconds=40,
                ttl_seconds=TTL,
                card_version=1,
                waiting=Waiting(monotonic=time.monotonic, sleep=time.sleep, time_left=lambda: 30.0),
            )
            bot.reply(DEFAULT_CHANNEL, thread.ts, f"{name}: what happened", [])
            results[name] = thread
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    workers = [threading.Thread(target=notify, args=(name,)) for name in ("first", "second")]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
    assert errors == []
    parents = [m for m in slack.history(DEFAULT_CHANNEL) if m.text == f"{job}: card"]
    assert len(parents) == 1
    [parent] = parents
    assert {r.ts for r in results.values()} == {parent.ts}
    assert sorted((r.created, r.waited) for r in results.values()) == [(False, True), (True, False)]
    assert sorted(m.text for m in slack.replies(DEFAULT_CHANNEL, parent.ts)) == [
        "first: what happened",
        "second: what happened",
    ]


# --- the mute records on DynamoDB ---------------------------------------------------------------------------


@pytest.fixture(params=["dynamodb", "fake"])
def mute_store(request: pytest.FixtureRequest, aws: Emulation) -> Any:
    if request.param == "fake":
        return FakeMutes()
    return DynamoMutes(aws.client("dynamodb"), TABLE)


def test_a_jobs_mutes_are_written_one_by_one_and_read_in_one_call(mute_store: Any) -> None:
    job = unique("mnist")
    snooze = mutes.silence("LossNotDecreasing", by="slack:U0ALICE", at=NOW, seconds=mutes.SNOOZE_SECONDS)
    until_end = mutes.silence("ExplodingTensor", by="cli:arn:aws:iam::111122223333:user/bob", at=NOW, seconds=None)
    exemption = mutes.exempt(by="slack:U0ALICE", at=NOW)
    for mute in (snooze, until_end, exemption):
        mute_store.put(job, mute, now=NOW)
    read = mute_store.read(job)
    assert set(read.entries) == {snooze, until_end, exemption}
    assert read.silencing("LossNotDecreasing", NOW + timedelta(minutes=30)) == snooze
    assert read.exemption(NOW) == exemption
    assert mute_store.remove(job, snooze.key) is True
    assert mute_store.remove(job, snooze.key) is False
    assert set(mute_store.read(job).entries) == {until_end, exemption}
    assert mute_store.read(unique("never-muted")).entries == ()


def test_mutes_of_a_members_job_are_kept_apart_and_listed_with_the_account(mute_store: Any) -> None:
    job = unique("bert")
    mute_store.put(job, mutes.exempt(by="slack:U0ALICE", at=NOW), account="111122223333", now=NOW)
    assert mute_store.read(job).entries == ()
    assert mute_store.read(job, "111122223333").exemption(NOW) is not None
    listed = dict(mute_store.jobs())
    assert f"111122223333/{job}" in listed
    assert job not in listed


def test_a_mute_records_ttl_is_pushed_on_every_write(aws: Emulation) -> None:
    store, dynamodb, job = DynamoMutes(aws.client("dynamodb"), TABLE), aws.client("dynamodb"), unique("xgb")
    store.put(job, mutes.exempt(by="slack:U0ALICE", at=NOW), now=NOW)
    later = NOW + timedelta(days=3)
    store.put(job, mutes.silence("A", by="slack:U0ALICE", at=later, seconds=60), now=later)
    item = dynamodb.get_item(TableName=TABLE, Key={contract.TABLE_PARTITION_KEY: {"S": mutes.mutes_key(job)}})["Item"]
    assert item[contract.TABLE_TTL_ATTRIBUTE] == {"N": str(int(later.timestamp()) + mutes.RECORD_TTL_SECONDS)}
    assert item["job"] == {"S": job}


# --- signed interaction payloads, through the real acknowledgement and the real asynchronous path ---------------

SIGNING_SECRET = secrets.token_hex(16)  # drawn per run: a published value is refused (credentials.py)
ALLOWED, STRANGER = "U0ALICE", "U0MALLORY"


class Interactivity:
    """The endpoint and the worker with their real adapters: the replay markers in the state table, the click
    queue and the signing secret on moto; answers to the local Slack Web API's response_url, the thread told
    through the bot adapter."""

    def __init__(self, aws: Emulation, slack: SlackWebApi, *, now: float) -> None:
        self.aws, self.slack, self.now = aws, slack, now
        sqs = aws.client("sqs")
        self.queue_url = sqs.create_queue(QueueName=unique("clicks"))["QueueUrl"]
        secret = aws.client("secretsmanager").create_secret(Name=unique("signing"), SecretString=SIGNING_SECRET)
        self.endpoint = Interactions(
            signing_secret=SigningSecret(aws.client("secretsmanager"), secret["ARN"]),
            replay=ReplayMarkers(aws.client("dynamodb"), TABLE),
            queue=ClickQueue(sqs, self.queue_url),
            allowed_users=[ALLOWED],
            clock=lambda: self.now,
        )
        self.mutes = DynamoMutes(aws.client("dynamodb"), TABLE)
        self.stops: list[tuple[str, str]] = []
        bot = app(slack)
        outer = self

        class Say:
            def say(self, click: Click, text: str) -> None:
                bot.reply(str(click.channel), str(click.thread), text, [])

        class Stop:
            def stop(self, click: Click, *, now: datetime) -> str:
                outer.stops.append((click.job, click.by))
                return "stopped"

        self.worker = ClickWorker(
            mutes=self.mutes,
            stopper=Stop(),
            say=Say(),
            respond=ResponseUrl(allowed_prefixes=(f"http://127.0.0.1:{slack.port}/",)),
        )

    def post(self, payload: dict[str, Any], *, signed_at: float | None = None, secret: str = SIGNING_SECRET) -> int:
        """POST the payload as Slack does, through a function URL (the form body base64-encoded)."""
        body = urlencode({"payload": json.dumps(payload)}).encode()
        timestamp = str(int(self.now if signed_at is None else signed_at))
        digest = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
        self.last = {
            "version": "2.0",
            "headers": {"x-slack-request-timestamp": timestamp, "x-slack-signature": f"v0={digest}"},
            "requestContext": {"http": {"method": "POST"}},
            "body": base64.b64encode(body).decode(),
            "isBase64Encoded": True,
        }
        return int(self.endpoint.acknowledge(self.last)["statusCode"])

    def again(self) -> int:
        return int(self.endpoint.acknowledge(self.last)["statusCode"])

    def drain(self) -> dict[str, Any]:
        """Run the worker on what the queue holds, as the event source mapping would."""
        sqs = self.aws.client("sqs")
        messages = sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get("Messages", [])
        records = [{"messageId": m["MessageId"], "body": m["Body"]} for m in messages]
        result = process({"Records": records}, self.worker, now=NOW)
        failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
        for m in messages:
            if m["MessageId"] not in failed:
                sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])
        self.handled = len(records)
        return result


@pytest.fixture
def clicks(aws: Emulation, slack: SlackWebApi) -> Interactivity:
    return Interactivity(aws, slack, now=1_780_000_000.0)


def card(slack: SlackWebApi, job: str) -> str:
    """The job's parent message, as the notifier posts it: the buttons are on it."""
    return app(slack).post_parent(DEFAULT_CHANNEL, f"{job}: LossNotDecreasing found issues", BLOCKS).ts


def clicked(element: dict[str, Any], *, user: str, parent_ts: str, response_url: str) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "team_id": "T0EMULATED"},
        "team": {"id": "T0EMULATED"},
        "container": {"type": "message", "message_ts": parent_ts, "channel_id": DEFAULT_CHANNEL},
        "channel": {"id": DEFAULT_CHANNEL},
        "message": {"type": "message", "ts": parent_ts},
        "response_url": response_url,
        "actions": [{"type": "button", "action_id": element["action_id"], "value": element["value"]}],
    }


def test_a_valid_signed_snooze_is_acknowledged_then_muted_and_the_thread_says_who(
    clicks: Interactivity, slack: SlackWebApi
) -> None:
    job = unique("mnist")
    parent = card(slack, job)
    element = button(Act.SNOOZE, label="Snooze 1 h", job=job, rule="LossNotDecreasing", seconds=3600)
    assert clicks.post(clicked(element, user=ALLOWED, parent_ts=parent, response_url=slack.response_url())) == 200
    assert clicks.drain() == {"batchItemFailures": []}
    [snooze] = clicks.mutes.read(job).entries
    assert (snooze.rule, snooze.by, snooze.until) == ("LossNotDecreasing", "slack:U0ALICE", NOW + timedelta(hours=1))
    [said] = slack.replies(DEFAULT_CHANNEL, parent)
    assert said.text == f"<@{ALLOWED}>: {snooze.describe()}."


def test_a_valid_signed_stop_goes_to_the_stop_path_once(clicks: Interactivity, slack: SlackWebApi) -> None:
    job = unique("resnet")
    parent = card(slack, job)
    element = button(Act.STOP, label="Stop now", job=job, style="danger")
    assert clicks.post(clicked(element, user=ALLOWED, parent_ts=parent, response_url=slack.response_url())) == 200
    clicks.drain()
    assert clicks.stops == [(job, "slack:U0ALICE")]
    assert [m.text for m in slack.replies(DEFAULT_CHANNEL, parent)] == [f"<@{ALLOWED}> asked to stop the job: stopped"]


def test_a_bad_signature_is_refused_and_nothing_reaches_the_queue(clicks: Interactivity, slack: SlackWebApi) -> None:
    job = unique("mnist")
    element = button(Act.EXEMPT, label="Exempt", job=job)
    payload = clicked(element, user=ALLOWED, parent_ts=card(slack, job), response_url=slack.response_url())
    assert clicks.post(payload, secret="a-forger-s-secret") == 401
    clicks.drain()
    assert (clicks.handled, clicks.mutes.read(job).entries) == (0, ())


def test_a_stale_timestamp_is_refused(clicks: Interactivity, slack: SlackWebApi) -> None:
    job = unique("mnist")
    element = button(Act.EXEMPT, label="Exempt", job=job)
    payload = clicked(element, user=ALLOWED, parent_ts=card(slack, job), response_url=slack.response_url())
    assert clicks.post(payload, signed_at=clicks.now - 301) == 401
    clicks.drain()
    assert clicks.handled == 0


def test_a_replayed_request_is_refused_by_its_marker_in_the_state_table(
    clicks: Interactivity, slack: SlackWebApi
) -> None:
    job = unique("mnist")
    element = button(Act.STOP, label="Stop now", job=job)
    payload = clicked(element, user=ALLOWED, parent_ts=card(slack, job), response_url=slack.response_url())
    assert clicks.post(payload) == 200
    assert clicks.again() == 409
    clicks.now += 200  # still inside the signature's window
    assert clicks.again() == 409
    clicks.drain()
    assert clicks.stops == [(job, "slack:U0ALICE")]


def test_a_user_not_allowed_gets_an_ephemeral_not_allowed_and_nothing_else(
    clicks: Interactivity, slack: SlackWebApi
) -> None:
    job = unique("mnist")
    parent = card(slack, job)
    response_url = slack.response_url()
    element = button(Act.STOP, label="Stop now", job=job)
    assert clicks.post(clicked(element, user=STRANGER, parent_ts=parent, response_url=response_url)) == 200
    clicks.drain()
    assert slack.posted_to(response_url) == [
        {"response_type": "ephemeral", "replace_original": False, "text": NOT_ALLOWED}
    ]
    assert clicks.stops == []
    assert slack.replies(DEFAULT_CHANNEL, parent) == []


def test_a_response_url_that_is_not_slacks_is_never_posted_to() -> None:
    with pytest.raises(ActionFailed, match="not Slack's"):
        ResponseUrl().ephemeral("http://169.254.169.254/latest/meta-data/", "x")
