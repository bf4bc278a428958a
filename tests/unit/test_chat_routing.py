"""Chat routing by account: a webhook per account (the hub's or a member's) and per organizational unit, beside the
routes by team and severity; the notifier routes each message by the account its document names, and a bad route
names its field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes import FakeLedger
from tests.helpers import NOW, load_event
from training_guard.config.model import ConfigError, GuardConfig
from training_guard.domain.events import parse_event
from training_guard.domain.outcome import Outcome
from training_guard.domain.policy import decide
from training_guard.handlers import slack_notifier
from training_guard.render.messages import build
from training_guard.services.chat import ChatDelivery, delivery_key

HUB = "111122223333"
MEMBER_A = "444455556666"
MEMBER_B = "777788889999"
MEMBER_C = "121212121212"
OUTSIDER = "999999999999"
RESEARCH = "ou-ab12-cdef3456"
PROD = "ou-ab12-prod9999"
ORGANIZATION = {
    "hub_account": HUB,
    "region": "eu-west-1",
    "members": [MEMBER_A, MEMBER_B, MEMBER_C],
    "account_units": {MEMBER_A: RESEARCH, MEMBER_B: RESEARCH, MEMBER_C: PROD},
}
WEBHOOKS: dict[str, dict[str, str]] = {
    "default": {},
    "on-call": {},
    "vision": {},
    "research": {},
    "team-b": {},
    "platform": {},
}
SLACK = {
    "webhooks": WEBHOOKS,
    "team_tag": "team",
    "by_severity": {"critical": "on-call"},
    "by_account": {MEMBER_B: "team-b", HUB: "platform"},
    "by_organizational_unit": {RESEARCH: "research"},
}


def hub(**slack: Any) -> GuardConfig:
    return GuardConfig.from_dict({"slack": {**SLACK, **slack}, "organization": ORGANIZATION})


# --- the route ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("account", "unit", "tags", "severity", "expected"),
    [
        (MEMBER_A, RESEARCH, {}, "warning", ["research"]),  # its unit's webhook
        (MEMBER_B, RESEARCH, {}, "warning", ["team-b"]),  # its own webhook before its unit's
        (MEMBER_C, PROD, {}, "warning", ["default"]),  # a unit without a route: the default
        (HUB, None, {}, "warning", ["platform"]),
        (
            MEMBER_A,
            RESEARCH,
            {"team": "vision"},
            "critical",
            ["vision", "research", "on-call"],
        ),  # team, account, severity
        (MEMBER_B, RESEARCH, {"team": "team-b"}, "info", ["team-b"]),  # each webhook once
        (None, None, {}, "warning", ["default"]),  # a notification about no account
    ],
)
def test_a_notification_goes_to_its_team_its_accounts_or_units_and_its_severitys_webhooks(
    account: str | None, unit: str | None, tags: dict[str, str], severity: str, expected: list[str]
) -> None:
    assert hub().slack.route(severity, tags, account=account, unit=unit) == expected


def test_below_the_minimum_severity_no_account_route_applies() -> None:
    assert hub(min_severity="warning").slack.route("info", {}, account=MEMBER_B, unit=RESEARCH) == []


def test_without_an_account_the_routes_are_those_of_team_and_severity_as_before() -> None:
    slack = GuardConfig.from_dict({"slack": {"webhooks": WEBHOOKS, "team_tag": "team"}}).slack
    assert slack.route("critical", {"team": "vision"}) == ["vision"]
    assert slack.route("warning", {}) == ["default"]


def test_the_unit_of_an_account_is_the_configured_one_for_the_hub_and_members_only() -> None:
    organization = hub().organization
    assert organization is not None
    assert [organization.unit_of(a) for a in (MEMBER_A, MEMBER_C, HUB, OUTSIDER, None)] == [
        RESEARCH,
        PROD,
        None,
        None,
        None,
    ]


def test_routes_by_account_alone_are_routes_enough_without_a_default() -> None:
    config = GuardConfig.from_dict(
        {"slack": {"webhooks": {"team-b": {}}, "by_account": {MEMBER_B: "team-b"}}, "organization": ORGANIZATION}
    )
    assert config.slack.default is None
    assert config.slack.route("warning", {}, account=MEMBER_A) == []
    assert config.slack.route("warning", {}, account=MEMBER_B) == ["team-b"]


# --- bad values name their field -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slack", "organization", "expected"),
    [
        ({"by_account": {"4444": "team-b"}}, {}, "slack.by_account.4444: not an account ID (12 digits)"),
        (
            {"by_account": {MEMBER_A: "nobody"}},
            {},
            f"slack.by_account.{MEMBER_A}: names no webhook in slack.webhooks: 'nobody'",
        ),
        (
            {"by_account": {OUTSIDER: "team-b"}},
            {},
            f"slack.by_account.{OUTSIDER}: not the hub account nor a member account of organization",
        ),
        (
            {"by_organizational_unit": {"research": "research"}},
            {},
            "slack.by_organizational_unit.research: not an OU ID (ou-...) or root ID (r-...)",
        ),
        (
            {"by_organizational_unit": {RESEARCH: "nobody"}},
            {},
            f"slack.by_organizational_unit.{RESEARCH}: names no webhook in slack.webhooks: 'nobody'",
        ),
        (
            {"by_organizational_unit": {"ou-ab12-elsewhere": "research"}},
            {},
            "slack.by_organizational_unit.ou-ab12-elsewhere: no account is in this unit: say which are in "
            "organization.account_units",
        ),
        (
            {},
            {"account_units": {OUTSIDER: RESEARCH}},
            f"organization.account_units.{OUTSIDER}: not the hub account nor",
        ),
        ({}, {"account_units": {"abc": RESEARCH}}, "organization.account_units.abc: not an account ID (12 digits)"),
        (
            {},
            {"account_units": {MEMBER_A: "research"}},
            f"organization.account_units.{MEMBER_A}: not an OU ID (ou-...) or root ID (r-...): 'research'",
        ),
    ],
)
def test_a_bad_account_route_names_its_field(
    slack: dict[str, Any], organization: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        GuardConfig.from_dict({"slack": {**SLACK, **slack}, "organization": {**ORGANIZATION, **organization}})
    assert expected in str(caught.value)


@pytest.mark.parametrize("routes", ["by_account", "by_organizational_unit"])
def test_routes_by_account_need_an_organization(routes: str) -> None:
    with pytest.raises(ConfigError) as caught:
        GuardConfig.from_dict(
            {"slack": {**SLACK, "by_account": {}, "by_organizational_unit": {}, routes: SLACK[routes]}}
        )
    assert f"slack.{routes}: routes by account need an organization section" in str(caught.value)


# --- the notifier routes by the document's account ----------------------------------------------------------------


class Sender:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, url: str, text: str, blocks: list[dict[str, Any]]) -> Any:
        self.sent.append(url.rsplit("/", 1)[-1])
        return type("Delivery", (), {"ok": True})()


class Urls:
    def url(self, webhook: str) -> str:
        return f"https://hooks.slack.example/{webhook}"


def delivery(config: GuardConfig) -> tuple[ChatDelivery, Sender]:
    sender = Sender()
    chat = ChatDelivery(
        config.slack,
        Urls(),
        sender,
        FakeLedger(),
        parker=None,  # type: ignore[arg-type]
        ttl_seconds=60,
        organization=config.organization,
    )
    return chat, sender


def document_about(account: str | None, event: str = "rule_error") -> str:
    raw = load_event(event)
    raw["account"] = account
    parsed = parse_event(raw)
    decision = decide(parsed.job, GuardConfig(), now=NOW)[0]
    doc = build(parsed, parsed.job, decision, Outcome.NOTIFIED, now=NOW, dry_run=False).document()
    doc["job"]["tags"] = {}
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("account", "expected"),
    [(MEMBER_A, ["research"]), (MEMBER_B, ["team-b"]), (MEMBER_C, ["default"]), (HUB, ["platform"])],
)
def test_the_notifier_routes_each_message_by_the_account_its_document_names(account: str, expected: list[str]) -> None:
    chat, sender = delivery(hub())
    result = chat.deliver(document_about(account), now=NOW)
    assert (result.account, result.delivered, sender.sent) == (account, expected, expected)


def test_a_document_naming_no_account_is_routed_as_before() -> None:
    chat, sender = delivery(hub())
    result = chat.deliver(document_about(None), now=NOW)
    assert (result.account, sender.sent) == (None, ["default"])


def test_without_the_organization_the_notifier_knows_no_unit() -> None:
    config = hub()
    sender = Sender()
    chat = ChatDelivery(config.slack, Urls(), sender, FakeLedger(), parker=None, ttl_seconds=60)  # type: ignore[arg-type]
    chat.deliver(document_about(MEMBER_A), now=NOW)
    assert sender.sent == ["default"]


def test_a_self_monitoring_alarm_is_routed_by_its_account() -> None:
    chat, sender = delivery(hub())
    alarm = {
        "AlarmName": "TrainingGuard-JobEventsErrors",
        "NewStateValue": "ALARM",
        "NewStateReason": "Threshold Crossed",
        "StateChangeTime": "2026-11-30T03:00:00.000+0000",
        "AWSAccountId": HUB,
    }
    result = chat.deliver(json.dumps(alarm), now=NOW)
    assert (result.account, sender.sent) == (HUB, ["platform", "on-call"])


def test_the_notifier_logs_each_message_with_its_account(monkeypatch: pytest.MonkeyPatch) -> None:
    chat, _ = delivery(hub())
    logged: list[dict[str, Any]] = []
    monkeypatch.setattr(slack_notifier.logger, "info", lambda message, extra: logged.append({message: extra}))
    event = {"Records": [{"messageId": "m-1", "body": document_about(MEMBER_B)}]}
    assert slack_notifier.process(event, chat, now=NOW) == {"batchItemFailures": []}
    [entry] = logged
    assert entry["message handled"]["account"] == MEMBER_B
    assert entry["message handled"]["delivered"] == ["team-b"]


def test_the_shipped_example_routes_its_members_by_their_unit_and_the_hub_by_its_account() -> None:
    from pathlib import Path

    example = json.loads((Path(__file__).resolve().parents[2] / "configs" / "organization.json").read_text())
    config = GuardConfig.from_dict(example)
    assert config.organization is not None
    chat, sender = delivery(config)
    for account in ("444455556666", "777788889999", "111122223333"):
        chat.deliver(document_about(account), now=NOW)
    assert sender.sent == ["research", "research", "platform"]


def test_the_same_transition_of_two_members_jobs_of_the_same_name_is_delivered_for_each() -> None:
    """The document's transition names the job, not the account: without the account in the delivery's key, B's
    message was taken for a redelivery of A's and never sent."""
    config = GuardConfig.from_dict({"slack": {"webhooks": {"default": {}}}, "organization": ORGANIZATION})
    chat, sender = delivery(config)
    first = chat.deliver(document_about(MEMBER_A), now=NOW)
    second = chat.deliver(document_about(MEMBER_B), now=NOW)
    again = chat.deliver(document_about(MEMBER_A), now=NOW)  # SQS's redelivery of A's message
    assert (first.delivered, second.delivered, again.skipped) == (["default"], ["default"], ["default"])
    assert sender.sent == ["default", "default"]
    # The hub's own messages keep the keys a single-account guard used, so a hub keeps its history.
    doc = json.loads(document_about(HUB))
    assert chat.deliver(json.dumps(doc), now=NOW).delivered == ["default"]
    assert delivery_key(doc["transition"], "default") in chat.ledger.items  # type: ignore[attr-defined]
    assert delivery_key(f"{MEMBER_B}/{doc['transition']}", "default") in chat.ledger.items  # type: ignore[attr-defined]
