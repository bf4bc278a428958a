"""Slack app mode wired in: configuration, the notifier's threads and cards, the buttons on each message, the mutes the
policy reads, Stop now through the one path to a stop, the graph of a metric guard, Q Developer's member threads."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import unquote

import pytest

from tests.fakes import FakeJobs, FakeLedger, FakePublisher
from tests.fakes_slack_app import FakeMutes, FakeThreads
from tests.helpers import NOW, running_job
from training_guard import contract
from training_guard.config.model import Action, ConfigError, GuardConfig
from training_guard.domain import mutes, policy
from training_guard.domain.events import Finding, JobEvent
from training_guard.domain.outcome import Outcome
from training_guard.domain.policy import Kind, Plan
from training_guard.render import slack_actions, slack_messages
from training_guard.render.charts import chart_for, console_url
from training_guard.render.messages import build, q_developer_notification
from training_guard.render.slack_actions import Act
from training_guard.services import chat as chat_module
from training_guard.services import slack_app_delivery
from training_guard.services.chat import ChatDelivery, MessageResult, delivery_key
from training_guard.services.responder import Responder
from training_guard.services.slack_app_delivery import AppMode, chart_key
from training_guard.services.threads import Waiting, thread_key

CHANNEL = "C0ALERTS"
OPS = "C0OPS"
ALICE, BOB = "U0ALICE", "U0BOB"
MEMBER = "111111111111"
HUB = "999999999999"


def app_config(**slack: Any) -> GuardConfig:
    section = {"mode": "app", "app": {"channels": {"default": CHANNEL, "ops": OPS}, "allowed_users": [ALICE]}}
    section.update(slack)
    return GuardConfig.from_dict(
        {"slack": section, "metric_guards": [{"name": "loss-high", "metric": "train:loss", "threshold": 5}]}
    )


# --- configuration -----------------------------------------------------------------------------------------------


def test_app_mode_routes_name_channels_and_the_default_is_the_channel_named_default() -> None:
    config = app_config(by_severity={"critical": "ops"})
    assert config.slack.default == "default"
    assert config.slack.route("critical", {}) == ["ops"]
    assert config.slack.route("info", {}) == ["default"]
    assert config.slack.channel_id("ops") == OPS


@pytest.mark.parametrize(
    ("slack", "problem"),
    [
        ({"mode": "app"}, "slack.app: mode is app: say which channels"),
        ({"mode": "app", "app": {"channels": {}}}, "slack.app.channels: mode is app: name at least one channel"),
        (
            {"mode": "app", "app": {"channels": {"default": "C1"}}, "webhooks": {"default": {}}},
            "slack.webhooks: mode is app: the app posts with its bot token",
        ),
        ({"app": {"channels": {"default": "C1"}}}, "slack.app: read only when mode is app"),
        ({"mode": "bot"}, 'slack.mode: must be one of webhook, app, got "bot"'),
        (
            {"mode": "app", "app": {"channels": {"default": "c1"}}},
            "slack.app.channels.default: must be a Slack channel",
        ),
        (
            {"mode": "app", "app": {"channels": {"default": "C1"}, "allowed_users": ["alice"]}},
            "slack.app.allowed_users[0]: must be a Slack user ID",
        ),
        (
            {"mode": "app", "app": {"channels": {"default": "C1"}, "allowed_users": ["U1", "U1"]}},
            "slack.app.allowed_users[1]: duplicate user U1",
        ),
        (
            {"mode": "app", "app": {"channels": {"default": "C1"}}, "by_severity": {"critical": "nope"}},
            "slack.by_severity.critical: names no channel in slack.app.channels: 'nope'",
        ),
        (
            {"mode": "app", "app": {"channels": {"a": "C1"}}, "default": "b"},
            "slack.default: names no channel in slack.app.channels (have: a)",
        ),
    ],
)
def test_bad_app_mode_settings_name_the_field(slack: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        GuardConfig.from_dict({"slack": slack})
    assert any(p.startswith(problem) for p in raised.value.problems), raised.value.problems


# --- the notifier in app mode ------------------------------------------------------------------------------------


@dataclass
class Posted:
    channel: str
    ts: str


class FakeBotError(Exception):
    def __init__(self, error: str, *, permanent: bool) -> None:
        super().__init__(error)
        self.error = error
        self.permanent = permanent


@dataclass
class FakeBot:
    """Slack's side as the notifier sees it: messages by channel and ts, replies under their parent."""

    messages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    uploads: list[tuple[str, str, bytes, str]] = field(default_factory=list)
    fail: dict[str, FakeBotError] = field(default_factory=dict)  # method -> error raised once
    counter: int = 0

    def _ts(self) -> str:
        self.counter += 1
        return f"1700000000.{self.counter:06d}"

    def _maybe_fail(self, method: str) -> None:
        self.calls.append(method)
        if method in self.fail:
            raise self.fail.pop(method)

    def post_parent(self, channel: str, text: str, blocks: Any) -> Posted:
        self._maybe_fail("post_parent")
        ts = self._ts()
        self.messages[(channel, ts)] = {"text": text, "blocks": blocks, "thread_ts": None}
        return Posted(channel, ts)

    def reply(self, channel: str, thread_ts: str, text: str, blocks: Any) -> Posted:
        self._maybe_fail("reply")
        assert (channel, thread_ts) in self.messages, "a reply names an existing parent"
        ts = self._ts()
        self.messages[(channel, ts)] = {"text": text, "blocks": blocks, "thread_ts": thread_ts}
        return Posted(channel, ts)

    def update(self, channel: str, ts: str, text: str, blocks: Any) -> None:
        self._maybe_fail("update")
        self.messages[(channel, ts)].update(text=text, blocks=blocks)

    def upload_png(self, channel: str, thread_ts: str, png: bytes, *, filename: str, title: str, alt_text: str) -> str:
        self._maybe_fail("upload_png")
        self.uploads.append((channel, thread_ts, png, filename))
        return "F1"

    def parents(self, channel: str) -> list[str]:
        return [ts for (c, ts), m in self.messages.items() if c == channel and m["thread_ts"] is None]

    def replies(self, channel: str, parent: str) -> list[dict[str, Any]]:
        return [m for (c, _), m in self.messages.items() if c == channel and m["thread_ts"] == parent]


@dataclass
class FakeCharts:
    widgets: list[dict[str, Any]] = field(default_factory=list)

    def png(self, widget: Any) -> bytes:
        self.widgets.append(dict(widget))
        return b"\x89PNG fake"


@dataclass
class Parked:
    bodies: list[tuple[str, str]] = field(default_factory=list)

    def park(self, body: str, reason: str) -> None:
        self.bodies.append((body, reason))


class NoUrls:
    def url(self, webhook: str) -> str:
        raise AssertionError("app mode reads no webhook URL")


class NoSender:
    def send(self, url: str, text: str, blocks: list[dict[str, Any]]) -> Any:
        raise AssertionError("app mode sends nothing to a webhook")


def no_wait() -> Waiting:
    return Waiting(monotonic=lambda: 0.0, sleep=lambda _: None, time_left=lambda: 0.0)


@dataclass
class AppRig:
    config: GuardConfig = field(default_factory=app_config)
    bot: FakeBot = field(default_factory=FakeBot)
    threads: FakeThreads = field(default_factory=FakeThreads)
    ledger: FakeLedger = field(default_factory=FakeLedger)
    parked: Parked = field(default_factory=Parked)
    charts: FakeCharts = field(default_factory=FakeCharts)

    def chat(self, *, organization: bool = False) -> ChatDelivery:
        config = self.config
        if organization:
            config = GuardConfig.from_dict(
                {
                    **json.loads(config.to_json()),
                    "organization": {"hub_account": HUB, "region": "eu-west-1", "members": [MEMBER]},
                }
            )
        return ChatDelivery(
            config.slack,
            urls=NoUrls(),
            sender=NoSender(),
            ledger=self.ledger,
            parker=self.parked,
            ttl_seconds=86400,
            organization=config.organization,
            config=config,
            app=AppMode(
                bot=lambda: self.bot,
                threads=self.threads,
                waiting=no_wait(),
                failure=FakeBotError,
                charts=self.charts,
            ),
        )


def document(
    job: str = "train-1",
    *,
    kind: Kind = Kind.ISSUES_FOUND,
    outcome: Outcome = Outcome.NOTIFIED,
    at: datetime = NOW,
    status: str = "InProgress",
    rule: str = "LossNotDecreasing",
    account: str | None = "123456789012",
    dry_run: bool = False,
) -> str:
    training = replace(running_job(job, timedelta(minutes=30)), status=status)
    finding = Finding(name=rule, source="metric" if kind is Kind.METRIC_ALARM else "debugger", status="IssuesFound")
    decision = policy.Decision(f"t#{job}#x#{rule}#{kind.value}#{outcome.value}", kind, Plan.NOTIFY, "why", finding)
    event = JobEvent(
        event_id="e1",
        account=account,
        region="eu-west-1",
        time=at,
        source="aws.sagemaker",
        detail_type="x",
        job=training,
    )
    note = build(event, training, decision, outcome, now=at, dry_run=dry_run)
    return json.dumps(note.document())


def test_the_first_notification_posts_the_jobs_card_then_replies_in_its_thread() -> None:
    rig = AppRig()
    result = rig.chat().deliver(document(), now=NOW)
    assert result.delivered == ["default"]
    [parent] = rig.bot.parents(CHANNEL)
    assert rig.bot.messages[(CHANNEL, parent)]["text"].startswith("🟠 Rule LossNotDecreasing found issues")
    [reply] = rig.bot.replies(CHANNEL, parent)
    assert "LossNotDecreasing" in reply["text"]
    assert rig.threads.items[thread_key("train-1", CHANNEL)].ts == parent
    assert "update" not in rig.bot.calls  # the card it posted is current


def test_later_notifications_reply_in_the_same_thread_and_update_the_card_only_when_newer() -> None:
    rig = AppRig()
    chat = rig.chat()
    chat.deliver(document(), now=NOW)
    later = document(kind=Kind.ISSUES_FOUND, outcome=Outcome.STOPPED, at=NOW + timedelta(minutes=5), rule="Overfit")
    chat.deliver(later, now=NOW)
    [parent] = rig.bot.parents(CHANNEL)
    assert len(rig.bot.replies(CHANNEL, parent)) == 2
    assert rig.bot.calls.count("update") == 1
    assert rig.bot.messages[(CHANNEL, parent)]["text"].startswith("🔴 Stopped by Training Guard: Overfit")
    # A late delivery of an older notification replies, and leaves the card as it is.
    older = document(rule="Vanishing", at=NOW + timedelta(minutes=1))
    chat.deliver(older, now=NOW)
    assert len(rig.bot.replies(CHANNEL, parent)) == 3
    assert rig.bot.calls.count("update") == 1
    assert rig.bot.messages[(CHANNEL, parent)]["text"].startswith("🔴 Stopped by Training Guard: Overfit")


def test_a_redelivered_message_posts_nothing_again() -> None:
    rig = AppRig()
    chat = rig.chat()
    body = document()
    chat.deliver(body, now=NOW)
    again = chat.deliver(body, now=NOW)
    assert again.skipped == ["default"]
    assert not again.delivered
    assert rig.bot.calls.count("reply") == 1
    assert rig.bot.calls.count("post_parent") == 1


def test_a_failed_reply_lets_the_claim_go_and_the_retry_replies_under_the_same_parent() -> None:
    rig = AppRig()
    chat = rig.chat()
    rig.bot.fail["reply"] = FakeBotError("internal_error", permanent=False)
    first = chat.deliver(document(), now=NOW)
    assert first.transient == ["default"]
    assert first.retry
    retry = chat.deliver(document(), now=NOW)
    assert retry.delivered == ["default"]
    [parent] = rig.bot.parents(CHANNEL)  # one parent, made by the first attempt
    assert len(rig.bot.replies(CHANNEL, parent)) == 1


def test_a_permanent_failure_parks_the_message_with_slacks_error() -> None:
    rig = AppRig()
    rig.bot.fail["post_parent"] = FakeBotError("channel_not_found", permanent=True)
    result = rig.chat().deliver(document(), now=NOW)
    assert result.permanent == ["default"]
    assert not result.retry
    [(_, reason)] = rig.parked.bodies
    assert "channel_not_found" in reason
    assert thread_key("train-1", CHANNEL) not in rig.threads.items  # the claim on the parent was let go


def test_a_parent_being_posted_by_another_delivery_sends_the_message_back_busy() -> None:
    rig = AppRig()
    rig.threads.claim(thread_key("train-1", CHANNEL), holder="other", now=NOW, lease_seconds=60, ttl_seconds=60)
    result = rig.chat().deliver(document(), now=NOW)
    assert result.busy == ["default"]
    assert result.retry
    assert rig.bot.calls == []
    assert delivery_key(json.loads(document())["transition"], "default") not in rig.ledger.items  # let go


def test_a_failed_card_update_is_reported_and_the_reply_is_not_posted_twice() -> None:
    rig = AppRig()
    chat = rig.chat()
    chat.deliver(document(), now=NOW)
    rig.bot.fail["update"] = FakeBotError("message_not_found", permanent=True)
    later = chat.deliver(document(rule="Overfit", at=NOW + timedelta(minutes=1)), now=NOW)
    assert later.delivered == ["default"]
    assert not later.retry
    assert "the card was not updated" in later.errors[0]


# --- the job's end, folded into the guard's stop: its card only --------------------------------------------------
def card_only(**kwargs: Any) -> str:
    """What responder.py hands the chat queue when the job's "stopped" change folds into the guard's stop."""
    kwargs.setdefault("at", NOW + timedelta(minutes=10))
    doc = json.loads(document(kind=Kind.JOB_STOPPED, status="Stopped", **kwargs))
    return json.dumps({**doc, contract.CARD_ONLY: True})


def stopped_by_the_guard(rig: AppRig) -> tuple[ChatDelivery, str]:
    chat = rig.chat()
    chat.deliver(document(outcome=Outcome.STOPPED, at=NOW + timedelta(minutes=5)), now=NOW)
    [parent] = rig.bot.parents(CHANNEL)
    rig.bot.calls.clear()
    return chat, parent


def test_a_card_only_update_edits_the_card_in_place_and_posts_nothing() -> None:
    rig = AppRig()
    chat, parent = stopped_by_the_guard(rig)
    result = chat.deliver(card_only(), now=END)
    assert (result.delivered, rig.bot.calls) == (["default"], ["update"])
    assert len(rig.bot.replies(CHANNEL, parent)) == 1  # no reply: the thread holds the stop, not its echo
    card = rig.bot.messages[(CHANNEL, parent)]
    assert card["text"].startswith("⏹️ Stopped, ended 03:10 UTC after 40 min 00 s of training · train-1")
    assert "*What the guard did:* Stopped the job." in json.dumps(card["blocks"], ensure_ascii=False)
    assert rig.threads.items[thread_key("train-1", CHANNEL)].card_version == slack_messages.card_version(
        json.loads(card_only())
    )
    assert chat.deliver(card_only(), now=END).delivered == []  # a redelivery: claimed once, done
    assert rig.bot.calls == ["update"]


END = NOW + timedelta(minutes=10)  # the job's end in card_only()


def test_a_card_only_update_waits_for_the_jobs_card_then_gives_up() -> None:
    rig = AppRig()
    chat = rig.chat()
    # the stop's own delivery may still be retried behind it: busy (retried), its claim let go
    waiting = chat.deliver(card_only(), now=END + timedelta(seconds=slack_app_delivery.CARD_WAIT_SECONDS - 1))
    assert (waiting.busy, waiting.retry, rig.ledger.items) == (["default"], True, {})
    late = chat.deliver(card_only(), now=END + timedelta(seconds=slack_app_delivery.CARD_WAIT_SECONDS))
    assert late.delivered == ["default"]  # no card in the channel by now: nothing to update, nothing posted
    assert (rig.bot.calls, rig.bot.messages) == ([], {})


def test_a_card_only_update_waits_while_the_parent_is_being_posted() -> None:
    rig = AppRig()
    rig.threads.claim(thread_key("train-1", CHANNEL), holder="other", now=NOW, lease_seconds=60, ttl_seconds=60)
    result = rig.chat().deliver(card_only(), now=END)
    assert result.busy == ["default"]
    assert rig.bot.calls == []


def test_a_card_only_update_goes_where_the_stop_went_whatever_its_own_severity() -> None:
    # The stop (critical) went to the on-call channel only; the job's end (info) follows it there.
    rig = AppRig(config=app_config(by_severity={"critical": "ops"}, min_severity="warning"))
    chat = rig.chat()
    chat.deliver(document(outcome=Outcome.STOPPED, at=NOW + timedelta(minutes=5)), now=NOW)
    [parent] = rig.bot.parents(OPS)
    result = chat.deliver(card_only(), now=END)
    assert result.delivered == ["ops"]
    assert rig.bot.messages[(OPS, parent)]["text"].startswith("⏹️ Stopped, ended ")
    assert rig.bot.parents(CHANNEL) == []


def test_the_card_only_severity_is_the_severity_of_a_stop() -> None:
    training = running_job("train-1", timedelta(minutes=30))
    decision = policy.Decision("t#k", Kind.ISSUES_FOUND, Plan.STOP, "why", None)
    event = JobEvent("e1", "123456789012", "eu-west-1", NOW, "aws.sagemaker", "x", training)
    stop = build(event, training, decision, Outcome.STOPPED, now=NOW, dry_run=False)
    assert stop.severity == chat_module.CARD_ONLY_SEVERITY


def test_a_card_only_update_older_than_the_card_leaves_it() -> None:
    rig = AppRig()
    chat, parent = stopped_by_the_guard(rig)
    chat.deliver(card_only(at=NOW + timedelta(minutes=1)), now=END)  # before the stop the card shows
    assert rig.bot.calls == []
    assert rig.bot.messages[(CHANNEL, parent)]["text"].startswith("🔴 Stopped by Training Guard")


def test_a_card_only_update_that_fails_is_retried_and_then_made() -> None:
    rig = AppRig()
    chat, parent = stopped_by_the_guard(rig)
    rig.bot.fail["update"] = FakeBotError("ratelimited", permanent=False)
    first = chat.deliver(card_only(), now=END)
    assert (first.transient, first.retry) == (["default"], True)
    retry = chat.deliver(card_only(), now=END)
    assert retry.delivered == ["default"]
    assert rig.bot.messages[(CHANNEL, parent)]["text"].startswith("⏹️ Stopped, ended ")
    assert rig.bot.calls.count("reply") == 0


def test_webhook_mode_sends_a_card_only_update_nowhere() -> None:
    config = GuardConfig.from_dict({"slack": {"webhooks": {"default": {}}}})
    ledger = FakeLedger()
    chat = ChatDelivery(config.slack, urls=NoUrls(), sender=NoSender(), ledger=ledger, parker=Parked(), ttl_seconds=1)
    result = chat.deliver(card_only(), now=END)
    assert result == MessageResult(account="123456789012")
    assert ledger.items == {}


def test_a_members_job_has_its_own_thread_apart_from_the_hubs_job_of_the_same_name() -> None:
    rig = AppRig()
    chat = rig.chat(organization=True)
    chat.deliver(document(account=HUB), now=NOW)
    chat.deliver(document(account=MEMBER), now=NOW)
    assert len(rig.bot.parents(CHANNEL)) == 2
    assert {thread_key("train-1", CHANNEL), thread_key("train-1", CHANNEL, MEMBER)} <= set(rig.threads.items)


def metric_document(**kwargs: Any) -> str:
    return document(kind=Kind.METRIC_ALARM, rule="loss-high", **kwargs)


def test_a_metric_guard_firing_uploads_its_graph_into_the_thread_once() -> None:
    rig = AppRig()
    chat = rig.chat()
    chat.deliver(metric_document(), now=NOW)
    [(channel, thread, png, filename)] = rig.bot.uploads
    assert (channel, thread, png) == (CHANNEL, rig.bot.parents(CHANNEL)[0], b"\x89PNG fake")
    assert filename == "train-1-train-loss.png"
    [widget] = rig.charts.widgets
    # the threshold says its value and its bad side, which is shaded; a legend names the line
    assert widget["annotations"] == {
        "horizontal": [
            {"label": "metric_guards.loss-high: > 5 is bad", "value": 5.0, "color": "#d62728", "fill": "above"}
        ]
    }
    assert widget["legend"] == {"position": "bottom"}
    assert widget["yAxis"] == {"left": {"label": "train:loss (Maximum)", "showUnits": False}}
    chat.deliver(metric_document(), now=NOW)
    assert len(rig.bot.uploads) == 1


def test_a_failed_upload_is_retried_alone_never_the_reply() -> None:
    rig = AppRig()
    chat = rig.chat()
    rig.bot.fail["upload_png"] = FakeBotError("upload_failed", permanent=False)
    first = chat.deliver(metric_document(), now=NOW)
    assert first.transient == ["default"]
    transition = json.loads(metric_document())["transition"]
    assert rig.ledger.items[delivery_key(transition, "default")]["state"] == "done"
    assert chart_key(transition, "default") not in rig.ledger.items
    chat.deliver(metric_document(), now=NOW)
    assert rig.bot.calls.count("reply") == 1
    assert len(rig.bot.uploads) == 1


def test_a_test_notification_is_a_message_of_its_own_in_every_channel() -> None:
    from training_guard.render.messages import make_test_notification

    rig = AppRig()
    note = make_test_notification(test_id="t1", stack="s", sent_by="me", account=None, region=None, now=NOW)
    result = rig.chat().deliver(json.dumps(note.document()), now=NOW)
    assert sorted(result.delivered) == ["default", "ops"]
    assert rig.threads.items == {}


def test_webhook_mode_links_the_same_graph_in_the_console() -> None:
    config = GuardConfig.from_dict(
        {
            "slack": {"webhooks": {"default": {}}},
            "metric_guards": [{"name": "loss-high", "metric": "train:loss", "threshold": 5}],
        }
    )
    chat = ChatDelivery(
        config.slack,
        urls=NoUrls(),
        sender=NoSender(),
        ledger=FakeLedger(),
        parker=Parked(),
        ttl_seconds=1,
        config=config,
    )
    message = chat._read(metric_document(), MessageResult())
    buttons = [e for b in message.blocks if b["type"] == "actions" for e in b["elements"]]
    graph = next(e for e in buttons if e["text"]["text"] == "Open Graph")
    assert graph["url"].startswith(
        "https://eu-west-1.console.aws.amazon.com/cloudwatch/home?region=eu-west-1#metricsV2:"
    )


# --- buttons -------------------------------------------------------------------------------------------------------


def acts(body: str) -> list[str]:
    """The actions one notification offers: Stop now on the job's card, the others on the reply."""
    doc = json.loads(body)
    return [e["action_id"] for e in slack_actions.stop_button(doc) + slack_actions.buttons(doc)]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            document(outcome=Outcome.WOULD_STOP),
            ["training-guard:stop", "training-guard:snooze:1h", "training-guard:snooze", "training-guard:exempt"],
        ),
        (
            document(outcome=Outcome.NOTIFIED),
            ["training-guard:stop", "training-guard:snooze:1h", "training-guard:snooze", "training-guard:exempt"],
        ),
        (
            metric_document(outcome=Outcome.NOTIFIED),
            ["training-guard:stop", "training-guard:snooze:1h", "training-guard:snooze", "training-guard:exempt"],
        ),
        (
            document(kind=Kind.METRIC_STALL, outcome=Outcome.DEFERRED),
            ["training-guard:stop", "training-guard:snooze:1h", "training-guard:snooze", "training-guard:exempt"],
        ),
        (
            document(kind=Kind.BUDGET_WARNING),
            ["training-guard:snooze:1h", "training-guard:snooze", "training-guard:exempt"],
        ),
        (document(kind=Kind.RULE_ERROR), ["training-guard:mute"]),
        (document(outcome=Outcome.STOPPED), []),
        (document(outcome=Outcome.WOULD_STOP, status="Completed"), []),
        (document(kind=Kind.JOB_FAILED, status="Failed"), []),
        (
            document(outcome=Outcome.WOULD_STOP, dry_run=True),
            ["training-guard:snooze:1h", "training-guard:snooze", "training-guard:exempt"],
        ),
    ],
)
def test_each_message_offers_the_buttons_issue_14_names(body: str, expected: list[str]) -> None:
    assert acts(body) == expected


def test_the_reply_carries_the_buttons_with_the_member_account() -> None:
    rig = AppRig()
    rig.chat(organization=True).deliver(document(account=MEMBER, outcome=Outcome.WOULD_STOP), now=NOW)
    [parent] = rig.bot.parents(CHANNEL)
    [reply] = rig.bot.replies(CHANNEL, parent)
    card = rig.bot.messages[(CHANNEL, parent)]
    elements = [e for m in (reply, card) for e in guard_actions(m)]
    assert {json.loads(e["value"]).get("account") for e in elements} == {MEMBER}
    assert [e["action_id"] for e in guard_actions(card)] == [f"training-guard:{Act.STOP.value}"]


def guard_actions(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The guard's buttons on a message (not its link buttons)."""
    return [
        e
        for b in message["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"].startswith("training-guard:")
    ]


def test_no_message_of_the_thread_offers_stop_now_once_the_job_stopped() -> None:
    # Stop now is on the card alone, and the card is redrawn by the stop: no old reply's button can outlive the job.
    rig = AppRig()
    chat = rig.chat()
    chat.deliver(document(outcome=Outcome.WOULD_STOP), now=NOW)
    chat.deliver(document(kind=Kind.METRIC_ALARM, rule="loss-high", at=NOW + timedelta(minutes=1)), now=NOW)
    [parent] = rig.bot.parents(CHANNEL)
    stop = f"training-guard:{Act.STOP.value}"
    assert [e["action_id"] for e in guard_actions(rig.bot.messages[(CHANNEL, parent)])] == [stop]
    chat.deliver(document(outcome=Outcome.STOPPED, status="Stopping", at=NOW + timedelta(minutes=2)), now=NOW)
    thread = [rig.bot.messages[(CHANNEL, parent)], *rig.bot.replies(CHANNEL, parent)]
    assert len(thread) == 4
    assert [e["action_id"] for m in thread for e in guard_actions(m) if e["action_id"] == stop] == []


# --- mutes in the policy -------------------------------------------------------------------------------------------


def rule_job(status: str = "IssuesFound") -> Any:
    rule = Finding(name="LossNotDecreasing", source="debugger", status=status)
    return running_job("train-1", timedelta(hours=1), rules=(rule,), tags_known=True)


def test_a_snoozed_rule_decides_nothing_until_the_snooze_lapses() -> None:
    config = GuardConfig()
    snooze = mutes.silence("LossNotDecreasing", by="slack:U1", at=NOW, seconds=3600)
    held = mutes.Mutes((snooze,))
    assert policy.decide(rule_job(), config, now=NOW + timedelta(minutes=59), mutes=held) == []
    [decision] = policy.decide(rule_job(), config, now=NOW + timedelta(minutes=61), mutes=held)
    assert decision.plan is Plan.STOP


def test_a_muted_rule_error_is_not_announced() -> None:
    held = mutes.Mutes((mutes.silence("LossNotDecreasing", by="slack:U1", at=NOW, seconds=None),))
    assert policy.decide(rule_job("Error"), GuardConfig(), now=NOW, mutes=held) == []


def test_an_exempted_job_would_have_stopped_with_the_mute_as_the_reason() -> None:
    exemption = mutes.exempt(by="slack:U1", at=NOW, seconds=None)
    [decision] = policy.decide(rule_job(), GuardConfig(), now=NOW, mutes=mutes.Mutes((exemption,)))
    assert decision.plan is Plan.WOULD_STOP
    assert decision.reason.endswith(f"but {exemption.describe()}")


def test_mutes_silence_metric_guards_budgets_and_idle_gpus_by_their_names() -> None:
    job = running_job("train-1", timedelta(hours=1), tags_known=True)
    config = GuardConfig.from_dict({"budgets": [{"max_usd": 10}], "idle_gpu": {}})
    held = mutes.Mutes(
        tuple(mutes.silence(n, by="cli:me", at=NOW, seconds=None) for n in ("loss-high", "budgets[0]", "idle-gpu"))
    )
    alarm = Finding(name="loss-high", source="metric", status="ALARM")
    assert policy.decide_metric(job, alarm, Action.STOP, "x", config, now=NOW, mutes=held) == []
    budget = config.budgets[0]
    assert (
        policy.decide_budget(
            job, name="budgets[0]", budget=budget, setting="x", spent_usd=20, config=config, now=NOW, mutes=held
        )
        == []
    )
    assert config.idle_gpu is not None
    assert policy.decide_idle_gpu(job, details="d", guard=config.idle_gpu, config=config, now=NOW, mutes=held) == []


def test_the_responder_reads_a_jobs_mutes_only_when_the_stops_one_write_finds_one_in_force() -> None:
    store = FakeMutes()
    jobs = FakeJobs()
    ledger = FakeLedger(mutes_in_force=store.in_force)
    guard = Responder(GuardConfig(), jobs, ledger, FakePublisher(), mutes=store)
    event = JobEvent("e1", "123456789012", "eu-west-1", NOW, "aws.sagemaker", "x", rule_job())
    guard.handle(event, now=NOW)
    assert (store.reads, ledger.first_stops, jobs.stop_calls) == (0, 1, [rule_job().name])  # no mute: one write
    quiet = JobEvent("e2", "123456789012", "eu-west-1", NOW, "aws.sagemaker", "x", replace(rule_job(), rules=()))
    guard.handle(quiet, now=NOW)
    assert store.reads == 0
    other = replace(rule_job(), name="exempted")
    store.put(other.name, mutes.exempt(by="slack:U1", at=NOW), now=NOW)
    receipt = guard.handle(JobEvent("e3", "123456789012", "eu-west-1", NOW, "aws.sagemaker", "x", other), now=NOW)
    assert (store.reads, receipt.outcomes, jobs.stop_calls) == (1, ["would_stop"], [rule_job().name])


# --- Stop now ------------------------------------------------------------------------------------------------------


def stop_rig(**config: Any) -> tuple[Responder, FakeJobs, FakeLedger, FakePublisher]:
    job = running_job("train-1", timedelta(hours=1))
    jobs = FakeJobs({job.name: job})
    ledger, published = FakeLedger(), FakePublisher()
    return Responder(GuardConfig.from_dict(config), jobs, ledger, published), jobs, ledger, published


def press(guard: Responder, user: str = ALICE) -> str:
    return guard.stop_requested(
        "train-1", by=f"slack:{user}", rule="LossNotDecreasing", request_id="r1", region="eu-west-1", now=NOW
    )


def test_stop_now_stops_the_job_in_the_clickers_name_with_an_audit_record_and_a_notification() -> None:
    guard, jobs, ledger, published = stop_rig()
    assert press(guard) == "stopped train-1"
    assert jobs.stop_calls == ["train-1"]
    arn = running_job("train-1", timedelta(hours=1)).arn
    assert arn is not None
    assert jobs.tags_by_arn[arn][contract.TAG_STOPPED_BY] == f"slack:{ALICE}"
    record = ledger.stops["train-1"]
    assert record.rule == f"slack:{ALICE}"
    assert record.confirmed
    [note] = published.published
    assert note.kind is Kind.STOP_REQUESTED
    assert note.outcome is Outcome.STOPPED
    assert note.title == f"Stopped train-1: Slack user {ALICE} pressed Stop now"


def test_stop_now_notes_the_request_its_region_time_and_the_finding_it_was_pressed_on() -> None:
    guard, *_, published = stop_rig()
    press(guard)
    [note] = published.published
    assert (note.event_id, note.region, note.time) == ("r1", "eu-west-1", NOW)
    assert note.finding is not None
    assert note.finding.details == f"Stop now pressed in Slack by slack:{ALICE} (on the finding of LossNotDecreasing)"


def test_stop_now_reads_the_opt_in_tag_from_the_jobs_tags_not_its_description() -> None:
    # DescribeTrainingJob carries no tags: the opt-in tag is only in ListTags (the job's ARN).
    guard, jobs, _, _ = stop_rig(stop_requires_tag="training-guard:guarded")
    arn = running_job("train-1", timedelta(hours=1)).arn
    assert arn is not None
    assert press(guard).startswith("not stopped: Stop now, pressed in Slack by slack:U0ALICE, but stop_requires_tag")
    assert jobs.stop_calls == []
    jobs.tags_by_arn[arn] = {"training-guard:guarded": "true"}
    assert press(guard, BOB) == "stopped train-1"
    assert jobs.stop_calls == ["train-1"]


def test_stop_now_in_dry_run_says_why_it_did_not_stop() -> None:
    guard, jobs, _, _ = stop_rig(dry_run=True)
    assert press(guard) == f"not stopped: Stop now, pressed in Slack by slack:{ALICE}, but dry_run is on"
    assert jobs.stop_calls == []


def test_stop_now_names_the_guards_own_account_in_a_single_account_and_the_members_through_its_scope() -> None:
    guard, *_, published = stop_rig()
    guard.stop_requested(
        "train-1", by=f"slack:{ALICE}", rule=None, request_id="r1", region="eu-west-1", now=NOW, account="123456789012"
    )
    assert [n.account for n in published.published] == ["123456789012"]  # the card said "Account: -" before
    member, jobs, _, member_published = stop_rig()
    member = member.acting(account_scope="444455556666")  # acting through a member's role: the member's, not the hub's
    member.stop_requested(
        "train-1", by=f"slack:{ALICE}", rule=None, request_id="r2", region="eu-west-1", now=NOW, account="123456789012"
    )
    assert [n.account for n in member_published.published] == ["444455556666"]
    assert jobs.stop_calls == ["train-1"]


def test_two_people_pressing_stop_now_at_once_make_one_stop() -> None:
    guard, jobs, ledger, _published = stop_rig()
    both_described = threading.Barrier(2)
    describe = jobs.describe

    def describe_together(name: str) -> Any:
        found = describe(name)
        both_described.wait(timeout=5)  # each sees the job running before either stops it
        return found

    jobs.describe = describe_together  # type: ignore[method-assign]
    said: dict[str, str] = {}
    pressing = [threading.Thread(target=lambda u=u: said.__setitem__(u, press(guard, u))) for u in (ALICE, BOB)]
    for t in pressing:
        t.start()
    for t in pressing:
        t.join()
    assert jobs.stop_calls == ["train-1"]
    assert sorted(said.values()) == sorted(
        ["stopped train-1", "train-1 is already being stopped (another click or a rule was first)"]
    )
    assert ledger.stops["train-1"].rule in {f"slack:{ALICE}", f"slack:{BOB}"}


def test_the_same_person_pressing_twice_is_a_duplicate() -> None:
    guard, jobs, *_ = stop_rig()
    guard.jobs = jobs
    press(guard)
    jobs.jobs["train-1"] = running_job("train-1", timedelta(hours=1))  # as if the second click read it running
    assert press(guard) == f"already asked: slack:{ALICE} pressed Stop now for train-1 before"
    assert jobs.stop_calls == ["train-1"]


@pytest.mark.parametrize(
    ("status", "said"),
    [
        ("Completed", "nothing to stop: train-1 had already ended (Completed)"),
        ("Stopping", "nothing to do: train-1 is already being stopped"),
    ],
)
def test_a_click_on_a_job_that_already_ended_says_so(status: str, said: str) -> None:
    guard, jobs, ledger, published = stop_rig()
    jobs.jobs["train-1"] = replace(jobs.jobs["train-1"], status=status)
    assert press(guard) == said
    assert jobs.stop_calls == []
    assert ledger.stops == {}
    assert published.published == []


def test_stop_now_stops_nothing_in_dry_run_nor_without_the_opt_in_tag() -> None:
    guard, jobs, _, _published = stop_rig(dry_run=True)
    assert press(guard).startswith("not stopped: Stop now, pressed in Slack by slack:U0ALICE, but dry_run is on")
    guard, jobs, _, _ = stop_rig(stop_requires_tag="guarded")
    assert "stop_requires_tag" in press(guard)
    assert jobs.stop_calls == []


def test_a_guard_stop_attributed_to_a_person_is_told_as_theirs() -> None:
    stop = policy.GuardStop(rule=f"slack:{ALICE}", reason="r", at=NOW)
    cause = policy.stop_cause(running_job("j", timedelta(0)), stop)
    assert cause == f"by Training Guard at 03:00 UTC: Slack user {ALICE} pressed Stop now"  # a time as titles show it
    ended = json.loads(document(kind=Kind.JOB_STOPPED, status="Stopped"))
    _, card = slack_messages.render_card({**ended, "reason": cause})
    assert f"by Training Guard at 03:00 UTC: <@{ALICE}> pressed Stop now" in json.dumps(card)  # Slack shows Alice
    failed = json.loads(document(kind=Kind.JOB_FAILED, status="Failed"))
    _, card = slack_messages.render_card({**failed, "reason": "Slack user U0MALLORY wrote this in a log"})
    assert "<@U0MALLORY>" not in json.dumps(card)  # a job's own words mention no one
    assert contract.stopped_by(f"slack:{ALICE}") == f"slack:{ALICE}"
    assert contract.stopped_by("LossNotDecreasing") == contract.STOPPED_BY_VALUE


# --- charts and Q Developer ----------------------------------------------------------------------------------------


def test_an_instance_metric_chart_draws_each_host_of_the_job() -> None:
    config = GuardConfig.from_dict(
        {"metric_guards": [{"name": "gpu-low", "metric": "GPUUtilization", "comparison": "<", "threshold": 5}]}
    )
    doc = json.loads(document(kind=Kind.METRIC_ALARM, rule="gpu-low"))
    doc["job"]["instance_count"] = 2
    chart = chart_for(doc, config)
    assert chart is not None
    assert chart.widget["metrics"] == [
        ["/aws/sagemaker/TrainingJobs", "GPUUtilization", "Host", "train-1/algo-1", {"label": "algo-1"}],
        ["/aws/sagemaker/TrainingJobs", "GPUUtilization", "Host", "train-1/algo-2", {"label": "algo-2"}],
    ]  # the legend names each host
    [line] = chart.widget["annotations"]["horizontal"]
    assert (line["label"], line["fill"]) == ("metric_guards.gpu-low: < 5 is bad", "below")
    url = console_url(chart)
    assert "~'*2faws*2fsagemaker*2fTrainingJobs~'GPUUtilization~'Host~'train-1*2falgo-1" in url
    assert unquote(url) == url  # nothing left for a browser to decode differently


def test_a_per_job_guard_tag_has_its_chart_and_other_kinds_have_none() -> None:
    doc = json.loads(document(kind=Kind.METRIC_ALARM, rule="val:acc"))
    doc["job"]["tags"] = {"training-guard:alarm:val:acc": "avg below 0.5"}
    chart = chart_for(doc, GuardConfig())
    assert chart is not None
    assert chart.threshold == 0.5
    assert chart_for(json.loads(document()), GuardConfig()) is None


def test_q_developer_threads_a_members_job_under_its_account_and_the_hubs_as_before() -> None:
    member = q_developer_notification(json.loads(document(account=MEMBER)), members=[MEMBER])
    hub = q_developer_notification(json.loads(document(account=HUB)), members=[MEMBER])
    assert member["metadata"]["threadId"] == f"training-guard/{MEMBER}/train-1"
    assert hub["metadata"]["threadId"] == "training-guard/train-1"
