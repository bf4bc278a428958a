"""Chat delivery message by message: what is sent where, the ledger keys it records, what is parked or retried, and
what each result list holds, in webhook and Slack app mode (services/chat.py)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from tests.fakes import FakeLedger
from tests.fakes_slack_app import FakeThreads
from tests.helpers import NOW
from tests.unit.test_chat_routing import HUB as ORG_HUB
from tests.unit.test_chat_routing import MEMBER_A, MEMBER_B, document_about, hub
from tests.unit.test_digest import WEEKS_STOPS, note, week_totals
from tests.unit.test_slack_app_mode import (
    CHANNEL,
    MEMBER,
    AppRig,
    FakeBot,
    FakeBotError,
    card_only,
    document,
    guard_actions,
    metric_document,
)
from training_guard.adapters.sns import sns_message
from training_guard.config.model import GuardConfig
from training_guard.domain import credentials
from training_guard.domain.accounts import scoped
from training_guard.domain.outcome import Outcome
from training_guard.domain.policy import Kind
from training_guard.render import slack_messages
from training_guard.render.charts import chart_for
from training_guard.render.messages import make_test_notification
from training_guard.services.chat import (
    DELIVERED,
    ChatDelivery,
    NotConfigured,
    account_of,
    delivery_key,
)
from training_guard.services.slack_app_delivery import AppMode, chart_key
from training_guard.services.threads import ThreadRecord, thread_key

WEBHOOKS = ("a", "b", "c")


@dataclass(frozen=True)
class Delivery:
    ok: bool = True
    permanent: bool = False
    detail: str = ""


@dataclass
class Sender:
    """Records (webhook, text, blocks) and answers each webhook as told (ok when not told)."""

    answers: dict[str, Delivery] = field(default_factory=dict)
    sent: list[tuple[str, str, list[dict[str, Any]]]] = field(default_factory=list)

    def send(self, url: str, text: str, blocks: list[dict[str, Any]]) -> Any:
        webhook = url.rsplit("/", 1)[-1]
        self.sent.append((webhook, text, blocks))
        return self.answers.get(webhook, Delivery())


@dataclass
class Urls:
    unset: set[str] = field(default_factory=set)

    def url(self, webhook: str) -> str:
        if webhook in self.unset:
            raise NotConfigured(webhook, f"Guard/slack/{webhook}")
        return f"https://hooks.slack.example/{webhook}"


@dataclass
class Parker:
    parked: list[tuple[str, str]] = field(default_factory=list)

    def park(self, body: str, reason: str) -> None:
        self.parked.append((body, reason))


@dataclass
class Budget:
    """Allows `sends` more sends, recording each wait it is asked about."""

    sends: int
    waits: list[float] = field(default_factory=list)

    def allows(self, wait: float) -> bool:
        self.waits.append(wait)
        self.sends -= 1
        return self.sends >= 0


@dataclass
class Rig:
    config: GuardConfig = field(
        default_factory=lambda: GuardConfig.from_dict(
            {"slack": {"webhooks": {w: {} for w in WEBHOOKS}, "default": "a"}}
        )
    )
    sender: Sender = field(default_factory=Sender)
    urls: Urls = field(default_factory=Urls)
    ledger: FakeLedger = field(default_factory=FakeLedger)
    parker: Parker = field(default_factory=Parker)

    def chat(self, budget: Budget | None = None) -> ChatDelivery:
        return ChatDelivery(
            self.config.slack,
            self.urls,
            self.sender,
            self.ledger,
            self.parker,
            ttl_seconds=60,
            budget=budget,
            organization=self.config.organization,
        )


def a_test_notification(account: str | None = None) -> str:
    doc = make_test_notification(
        test_id="t1", stack="TrainingGuard", sent_by="ops", account=account, region="eu-west-1", now=NOW
    ).document()
    return json.dumps(doc)


TEST_TRANSITION = "test#t1"


# --- webhook mode ------------------------------------------------------------------------------------------------


def test_a_webhook_is_sent_the_rendered_message_and_the_ledger_records_it_delivered() -> None:
    rig = Rig()
    body = document()
    result = rig.chat().deliver(body, now=NOW)
    doc = json.loads(body)
    assert (result.delivered, result.skipped, result.account) == (["a"], [], "123456789012")
    assert rig.sender.sent == [("a", *slack_messages.render(doc))]
    assert rig.ledger.items[delivery_key(doc["transition"], "a")]["outcome"] == DELIVERED


def test_a_document_without_a_transition_is_keyed_by_its_body() -> None:
    rig = Rig()
    doc = json.loads(document())
    del doc["transition"]
    body = json.dumps(doc)
    assert rig.chat().deliver(body, now=NOW).delivered == ["a"]
    assert set(rig.ledger.items) == {delivery_key(hashlib.sha256(body.encode()).hexdigest()[:32], "a")}


def test_each_webhook_is_skipped_when_done_sent_back_when_busy_and_the_next_still_sent() -> None:
    rig = Rig()
    rig.ledger.complete(delivery_key(TEST_TRANSITION, "a"), now=NOW, ttl_seconds=60, outcome=DELIVERED)
    rig.ledger.claim(delivery_key(TEST_TRANSITION, "b"), now=NOW, lease_seconds=60)
    result = rig.chat().deliver(a_test_notification(), now=NOW)
    assert (result.skipped, result.busy, result.delivered) == (["a"], ["b"], ["c"])
    assert result.retry
    assert [w for w, _, _ in rig.sender.sent] == ["c"]


def test_failed_sends_are_released_sorted_transient_or_permanent_and_not_parked_while_one_is_retried() -> None:
    rig = Rig()
    rig.sender.answers = {"a": Delivery(False, False, "HTTP 500"), "b": Delivery(False, True, "HTTP 404 no_service")}
    result = rig.chat().deliver(a_test_notification(), now=NOW)
    assert (result.transient, result.permanent, result.delivered) == (["a"], ["b"], ["c"])
    assert result.errors == ["webhook 'a': HTTP 500", "webhook 'b': HTTP 404 no_service"]
    assert rig.parker.parked == []  # the retry of "a" carries the message; redrive skips "c"
    assert set(rig.ledger.items) == {delivery_key(TEST_TRANSITION, "c")}  # "a" and "b" let go


def test_a_message_refused_everywhere_is_parked_with_each_webhooks_reason() -> None:
    rig = Rig()
    rig.sender.answers = {w: Delivery(False, True, f"gone {w}") for w in WEBHOOKS}
    body = a_test_notification()
    result = rig.chat().deliver(body, now=NOW)
    assert (result.permanent, result.retry) == (list(WEBHOOKS), False)
    assert rig.parker.parked == [(body, "webhook 'a': gone a; webhook 'b': gone b; webhook 'c': gone c")]
    assert rig.ledger.items == {}


def test_a_webhook_without_a_url_is_permanent_not_configured_and_named_with_its_remedy() -> None:
    rig = Rig(urls=Urls(unset={"a"}))
    body = a_test_notification()
    result = rig.chat().deliver(body, now=NOW)
    remedy = (
        "set it with aws secretsmanager put-secret-value --secret-id Guard/slack/a "
        "--secret-string 'https://hooks.slack.com/...'"
    )
    reason = "webhook 'a': secret Guard/slack/a does not hold a webhook URL yet"
    assert (result.permanent, result.not_configured, result.delivered) == (["a"], ["a"], ["b", "c"])
    assert result.errors == [f"{reason}; {remedy}"]
    assert rig.parker.parked == [(body, f"{reason}; {remedy}")]
    assert delivery_key(TEST_TRANSITION, "a") not in rig.ledger.items


@pytest.mark.parametrize("body", ["{}", "not json", "[]"])
def test_an_unusable_message_is_parked_as_it_came_with_why(body: str) -> None:
    rig = Rig()
    result = rig.chat().deliver(body, now=NOW)
    [error] = result.errors
    assert error.startswith("unusable message: ")
    assert rig.parker.parked == [(body, error)]
    assert (rig.sender.sent, rig.ledger.items) == ([], {})


def test_a_send_is_started_only_while_the_budget_allows_the_rest_are_deferred_unclaimed() -> None:
    rig = Rig()
    budget = Budget(sends=1)
    result = rig.chat(budget).deliver(a_test_notification(), now=NOW)
    assert (result.delivered, result.deferred, result.retry) == (["a"], ["b", "c"], True)
    assert budget.waits == [0, 0, 0]
    assert set(rig.ledger.items) == {delivery_key(TEST_TRANSITION, "a")}
    assert rig.chat(Budget(sends=3)).deliver(a_test_notification(), now=NOW).delivered == ["b", "c"]


ALARM = {
    "AlarmName": "TrainingGuard-JobEventsErrors",
    "AlarmDescription": "events fail",
    "NewStateValue": "ALARM",
    "NewStateReason": "Threshold Crossed",
    "StateChangeTime": "2026-11-30T03:00:00.000+0000",
    "AWSAccountId": ORG_HUB,
}


def test_a_self_monitoring_alarm_is_sent_as_rendered_routed_by_its_state_and_account() -> None:
    rig = Rig(config=hub(team_tag="team"))
    result = rig.chat().deliver(json.dumps(ALARM), now=NOW)
    assert (result.account, result.delivered) == (ORG_HUB, ["platform", "on-call"])
    text, blocks = slack_messages.render_alarm(ALARM)
    assert rig.sender.sent == [("platform", text, blocks), ("on-call", text, blocks)]
    key = slack_messages.alarm_key(ALARM)
    assert set(rig.ledger.items) == {delivery_key(key, "platform"), delivery_key(key, "on-call")}
    ok = {**ALARM, "NewStateValue": "OK", "AWSAccountId": ""}
    result = rig.chat().deliver(json.dumps(ok), now=NOW)
    assert (result.account, result.delivered) == (None, ["default"])  # info, no account


def test_a_jobs_team_tag_routes_it_and_tags_that_are_no_mapping_are_none() -> None:
    rig = Rig(config=hub(team_tag="team"))
    doc = json.loads(document_about(None))
    doc["job"]["tags"] = {"team": "vision"}
    assert rig.chat().deliver(json.dumps(doc), now=NOW).delivered == ["vision"]
    doc["job"]["tags"] = ["team", "vision"]
    doc["transition"] = "other"
    assert rig.chat().deliver(json.dumps(doc), now=NOW).delivered == ["default"]


@pytest.mark.parametrize(("account", "expected"), [(MEMBER_A, ["research"]), (MEMBER_B, ["team-b"])])
def test_a_members_message_goes_to_its_accounts_or_units_webhook_under_a_key_scoped_to_it(
    account: str, expected: list[str]
) -> None:
    rig = Rig(config=hub())
    body = document_about(account)
    assert rig.chat().deliver(body, now=NOW).delivered == expected
    transition = json.loads(body)["transition"]
    assert set(rig.ledger.items) == {delivery_key(scoped(account, transition), expected[0])}


def test_account_of_takes_a_non_empty_text_only() -> None:
    assert [account_of(v) for v in ("1", "", 12, None)] == ["1", None, None, None]


def test_app_mode_without_the_app_is_refused_saying_what_it_needs() -> None:
    config = GuardConfig.from_dict({"slack": {"mode": "app", "app": {"channels": {"default": CHANNEL}}}})
    with pytest.raises(ValueError, match=r"^slack\.mode is app: the delivery needs the app's bot and thread records$"):
        ChatDelivery(config.slack, Urls(), Sender(), FakeLedger(), Parker(), ttl_seconds=1)


def test_webhook_mode_with_an_app_is_refused_so_that_a_message_is_never_half_app() -> None:
    app = AppRig().chat().app
    with pytest.raises(ValueError, match=r"^slack\.mode is webhook: the delivery takes no app$"):
        ChatDelivery(GuardConfig().slack, Urls(), Sender(), FakeLedger(), Parker(), ttl_seconds=1, app=app)


# --- Slack app mode ------------------------------------------------------------------------------------------------


def test_a_test_notification_is_posted_as_rendered_without_buttons() -> None:
    rig = AppRig()
    body = a_test_notification()
    result = rig.chat().deliver(body, now=NOW)
    assert (result.delivered, result.skipped) == (["default", "ops"], [])
    [parent] = rig.bot.parents(CHANNEL)
    text, blocks = slack_messages.render(json.loads(body))
    assert rig.bot.messages[(CHANNEL, parent)] == {"text": text, "blocks": blocks, "thread_ts": None}


def test_a_weekly_digest_is_a_message_of_its_own_with_no_thread_and_no_buttons() -> None:
    rig = AppRig()
    body = json.loads(sns_message(note(week_totals(WEEKS_STOPS))))["sqs"]
    result = rig.chat().deliver(body, now=NOW)
    assert (result.delivered, result.errors) == (["default"], [])
    [parent] = rig.bot.parents(CHANNEL)
    message = rig.bot.messages[(CHANNEL, parent)]
    assert message["text"].startswith("📊 Weekly digest")
    assert guard_actions(message) == []
    assert rig.threads.items == {}


def test_a_self_monitoring_alarm_in_app_mode_is_a_message_of_its_own() -> None:
    rig = AppRig()
    result = rig.chat().deliver(json.dumps(ALARM), now=NOW)
    assert (result.delivered, result.skipped, result.errors) == (["default"], [], [])
    [parent] = rig.bot.parents(CHANNEL)
    assert rig.bot.messages[(CHANNEL, parent)]["text"] == slack_messages.render_alarm(ALARM)[0]
    assert rig.threads.items == {}
    assert rig.charts.widgets == []


def test_the_reply_offers_the_snooze_and_exempt_buttons_and_the_card_stop_now() -> None:
    rig = AppRig()
    result = rig.chat().deliver(document(outcome=Outcome.WOULD_STOP), now=NOW)
    assert (result.delivered, result.skipped) == (["default"], [])
    [parent] = rig.bot.parents(CHANNEL)
    [reply] = rig.bot.replies(CHANNEL, parent)
    assert [e["action_id"] for e in guard_actions(reply)] == [
        "training-guard:snooze:1h",
        "training-guard:snooze",
        "training-guard:exempt",
    ]


@pytest.mark.parametrize("where", ["reply", "ledger", "parent"])
def test_a_message_not_posted_draws_no_graph(where: str) -> None:
    rig = AppRig()
    body = metric_document()
    transition = json.loads(body)["transition"]
    if where == "reply":
        rig.bot.fail["reply"] = FakeBotError("internal_error", permanent=False)
    elif where == "ledger":
        rig.ledger.claim(delivery_key(transition, "default"), now=NOW, lease_seconds=60)
    else:
        rig.threads.claim(thread_key("train-1", CHANNEL), holder="other", now=NOW, lease_seconds=60, ttl_seconds=60)
    result = rig.chat().deliver(body, now=NOW)
    assert (result.transient if where == "reply" else result.busy) == ["default"]
    assert result.delivered == []
    assert (rig.charts.widgets, rig.bot.uploads) == ([], [])
    assert chart_key(transition, "default") not in rig.ledger.items


@dataclass
class TitledBot(FakeBot):
    titles: list[tuple[str, str]] = field(default_factory=list)

    def upload_png(self, channel: str, thread_ts: str, png: bytes, *, filename: str, title: str, alt_text: str) -> str:
        self.titles.append((title, alt_text))
        return super().upload_png(channel, thread_ts, png, filename=filename, title=title, alt_text=alt_text)


@dataclass
class HeldThreads(FakeThreads):
    holders: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()

    def claim(self, key: str, *, holder: str, **kwargs: Any) -> Any:
        self.holders.append(holder)
        return super().claim(key, holder=holder, **kwargs)


def test_the_graph_is_uploaded_titled_under_its_own_key_by_the_claims_holder() -> None:
    rig = AppRig(bot=TitledBot(), threads=HeldThreads())
    chat = rig.chat()
    assert isinstance(chat.app, AppMode)
    chat.app.holder = lambda: "holder-1"
    body = metric_document()
    result = chat.deliver(body, now=NOW)
    assert (result.delivered, result.skipped, result.busy) == (["default"], [], [])
    chart = chart_for(json.loads(body), rig.config)
    assert chart is not None
    assert rig.bot.titles == [(chart.title, chart.alt_text)]  # type: ignore[attr-defined]
    assert rig.threads.holders == ["holder-1"]  # type: ignore[attr-defined]
    transition = json.loads(body)["transition"]
    assert set(rig.ledger.items) == {delivery_key(transition, "default"), chart_key(transition, "default")}
    assert rig.ledger.items[chart_key(transition, "default")]["outcome"] == DELIVERED
    again = chat.deliver(body, now=NOW)
    assert (again.delivered, again.skipped) == ([], ["default"])


def test_a_graph_being_uploaded_by_another_delivery_is_busy_the_reply_delivered() -> None:
    rig = AppRig()
    body = metric_document()
    rig.ledger.claim(chart_key(json.loads(body)["transition"], "default"), now=NOW, lease_seconds=60)
    result = rig.chat().deliver(body, now=NOW)
    assert (result.delivered, result.busy, result.skipped) == (["default"], ["default"], [])
    assert rig.bot.uploads == []


def test_a_retried_graph_upload_is_reported_delivered() -> None:
    rig = AppRig()
    chat = rig.chat()
    rig.bot.fail["upload_png"] = FakeBotError("upload_failed", permanent=True)
    first = chat.deliver(metric_document(), now=NOW)
    assert (first.delivered, first.permanent) == (["default"], ["default"])
    assert first.errors == ["channel 'default': upload_failed"]
    retry = chat.deliver(metric_document(), now=NOW)
    assert (retry.delivered, retry.skipped, retry.errors) == (["default"], [], [])
    assert len(rig.bot.uploads) == 1


def test_without_charts_or_a_configuration_a_metric_message_is_posted_with_no_graph() -> None:
    for unset in ("charts", "config"):
        rig = AppRig()
        chat = rig.chat()
        assert isinstance(chat.app, AppMode)
        if unset == "charts":
            chat.app.charts = None
        else:
            chat.config = None
        result = chat.deliver(metric_document(), now=NOW)
        assert (result.delivered, result.skipped, result.errors) == (["default"], [], [])
        assert (rig.bot.uploads, rig.charts.widgets) == ([], [])


class BareError(FakeBotError):
    """A failure that says neither whether it is permanent nor Slack's error code."""

    def __init__(self, text: str) -> None:
        Exception.__init__(self, text)


def test_a_failure_that_does_not_say_it_is_permanent_is_retried() -> None:
    rig = AppRig()
    rig.bot.fail["post_parent"] = BareError("timeout")
    result = rig.chat().deliver(document(), now=NOW)
    assert (result.transient, result.permanent, result.not_configured) == (["default"], [], [])
    assert result.errors == ["channel 'default': timeout"]


def test_a_bot_token_not_set_is_counted_not_configured() -> None:
    rig = AppRig()
    rig.bot.fail["post_parent"] = FakeBotError(credentials.NOT_CONFIGURED_ERROR, permanent=True)
    result = rig.chat().deliver(document(), now=NOW)
    assert (result.permanent, result.not_configured) == (["default"], ["default"])


def test_a_members_later_notification_updates_its_own_card_with_its_account() -> None:
    rig = AppRig()
    chat = rig.chat(organization=True)
    chat.deliver(document(account=MEMBER, outcome=Outcome.WOULD_STOP), now=NOW)
    later = document(account=MEMBER, kind=Kind.METRIC_STALL, outcome=Outcome.DEFERRED, at=NOW + timedelta(minutes=1))
    chat.deliver(later, now=NOW)
    assert rig.bot.calls.count("update") == 1
    [parent] = rig.bot.parents(CHANNEL)
    [stop] = guard_actions(rig.bot.messages[(CHANNEL, parent)])
    assert json.loads(stop["value"]).get("account") == MEMBER


def test_a_members_card_only_update_edits_the_members_card() -> None:
    rig = AppRig()
    chat = rig.chat(organization=True)
    chat.deliver(document(account=MEMBER, outcome=Outcome.STOPPED, at=NOW + timedelta(minutes=5)), now=NOW)
    [parent] = rig.bot.parents(CHANNEL)
    result = chat.deliver(card_only(account=MEMBER), now=NOW + timedelta(minutes=10))
    assert (result.delivered, result.busy) == (["default"], [])
    assert rig.bot.messages[(CHANNEL, parent)]["text"].startswith("⏹️ Stopped, ended ")


def test_a_card_only_update_the_card_already_shows_is_not_made_again() -> None:
    rig = AppRig()
    body = card_only()
    version = slack_messages.card_version(json.loads(body))
    rig.threads.items[thread_key("train-1", CHANNEL)] = ThreadRecord(ts="1.0", card_version=version)
    result = rig.chat().deliver(body, now=NOW + timedelta(minutes=10))
    assert (result.delivered, rig.bot.calls) == (["default"], [])


def test_a_card_not_updated_is_reported_with_slacks_error() -> None:
    rig = AppRig()
    chat = rig.chat()
    chat.deliver(document(), now=NOW)
    rig.bot.fail["update"] = FakeBotError("message_not_found", permanent=True)
    later = chat.deliver(document(rule="Overfit", at=NOW + timedelta(minutes=1)), now=NOW)
    assert later.errors == ["channel 'default': the card was not updated: message_not_found"]


def test_a_graph_retried_after_the_threads_record_expired_opens_the_thread_again() -> None:
    rig = AppRig()
    chat = rig.chat()
    rig.bot.fail["upload_png"] = FakeBotError("upload_failed", permanent=False)
    chat.deliver(metric_document(), now=NOW)
    key = thread_key("train-1", CHANNEL)
    del rig.threads.items[key]  # its TTL passed before the retry
    # another delivery is posting the new parent: the graph waits for it
    rig.threads.claim(key, holder="other", now=NOW, lease_seconds=60, ttl_seconds=60)
    busy = chat.deliver(metric_document(), now=NOW)
    assert (busy.busy, busy.delivered) == (["default"], [])
    del rig.threads.items[key]
    later = NOW + timedelta(minutes=1)
    retry = chat.deliver(metric_document(), now=later)
    assert retry.delivered == ["default"]
    _, second = rig.bot.parents(CHANNEL)
    [(_, thread, _, _)] = rig.bot.uploads
    assert thread == second  # a new card, posted by this delivery, holds the graph
    assert rig.threads.items[key].ts == second
    assert rig.threads.expires[key] == int(later.timestamp()) + 86400


def test_a_test_notification_from_a_member_account_reaches_every_channel() -> None:
    rig = AppRig()
    result = rig.chat(organization=True).deliver(a_test_notification(MEMBER), now=NOW)
    assert (result.delivered, result.errors) == (["default", "ops"], [])
    assert rig.threads.items == {}
