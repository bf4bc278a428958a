from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fakes import FakeLedger
from tests.helpers import NOW, load_event, with_detail
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard.domain.events import parse_event
from training_guard.domain.outcome import Outcome
from training_guard.domain.policy import decide
from training_guard.render.messages import build, make_test_notification, q_developer_notification
from training_guard.render.slack_messages import NotADocument, escape, fit, render
from training_guard.services.chat import DELIVERED, NOT_CONFIGURED, ChatDelivery, check_url, delivery_key


def document(event: dict[str, Any], outcome: Outcome, config: GuardConfig | None = None) -> dict[str, Any]:
    parsed = parse_event(event)
    decision = decide(parsed.job, config or GuardConfig(), now=NOW)[0]
    return build(parsed, parsed.job, decision, outcome, now=NOW, dry_run=False).document()


def blocks_of(doc: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    return render(doc)


def all_text(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


@pytest.mark.parametrize(
    ("event", "outcome", "header"),
    [
        ("vanishing_gradient_issues_found", Outcome.STOPPED, "🔴 Stopped pytorch-mnist"),
        ("vanishing_gradient_issues_found", Outcome.WOULD_STOP, "🟠 Would have stopped pytorch-mnist"),
        ("vanishing_gradient_issues_found", Outcome.DEFERRED, "🟠 Rule VanishingGradient found issues"),
        ("vanishing_gradient_issues_found", Outcome.ALREADY_ENDED, "🟠 Rule VanishingGradient found issues"),
        ("profiler_issues_found", Outcome.NOTIFIED, "🟠 Rule LowGPUUtilization found issues"),
        ("rule_error", Outcome.NOTIFIED, "🟠 Rule ExplodingTensor failed on"),
        ("failed", Outcome.NOTIFIED, "🔴 Training job pytorch-mnist-lr01-2026-11-30-02-10-00-123 failed"),
        ("stopped_max_runtime", Outcome.NOTIFIED, "🔵 Training job pytorch-mnist-lr01-2026-11-30-02-10-00-123 stopped"),
        (
            "spot_interrupted",
            Outcome.NOTIFIED,
            "🔵 Training job pytorch-mnist-lr01-2026-11-30-02-10-00-123 was interrupted",
        ),
    ],
)
def test_every_kind_renders_a_header_that_says_what_happened(event: str, outcome: Outcome, header: str) -> None:
    text, blocks = blocks_of(document(load_event(event), outcome))
    assert blocks[0]["type"] == "header"
    assert blocks[0]["text"]["text"].startswith(header)
    assert text.startswith(header)
    assert len(blocks) <= 50


def test_stop_message_has_the_facts_rule_policy_line_and_links() -> None:
    _, blocks = blocks_of(document(load_event("vanishing_gradient_issues_found"), Outcome.STOPPED))
    text = all_text(blocks)
    assert "*What the guard did:* Stopped the job." in text
    assert "rules.debugger_default = stop (debugger rule VanishingGradient)" in text
    assert "ml.p3.2xlarge" in text
    assert "*Trained*\\n48 min 30 s" in text
    assert "`VanishingGradient` (debugger) → *IssuesFound*" in text
    assert "RuleEvaluationConditionMet" in text
    [actions] = [b for b in blocks if b["type"] == "actions"]
    assert [e["text"]["text"] for e in actions["elements"]] == ["Open Job", "Open Logs", "Open Rule logs"]
    assert actions["elements"][0]["url"].endswith("#/jobs/pytorch-mnist-lr01-2026-11-30-02-10-00-123")


def test_failed_message_shows_the_failure_reason() -> None:
    _, blocks = blocks_of(document(load_event("failed"), Outcome.NOTIFIED))
    assert "CUDA out of memory" in all_text(blocks)


def test_mentions_and_markup_from_events_are_shown_not_acted_on() -> None:
    event = with_detail(
        load_event("failed"),
        TrainingJobName="job-<!channel>",
        FailureReason="<!here> boom & <https://evil.example|click>",
    )
    text, blocks = blocks_of(document(event, Outcome.NOTIFIED))
    rendered = all_text(blocks)
    assert "<!channel>" not in rendered
    assert "<!here>" not in rendered
    assert "&lt;!here&gt; boom &amp; &lt;https://evil.example|click&gt;" in rendered
    assert "&lt;!channel&gt;" in rendered
    assert "<!channel>" not in text


def test_a_5000_character_status_details_is_cut_to_fit_and_still_valid() -> None:
    event = load_event("vanishing_gradient_issues_found")
    event["detail"]["DebugRuleEvaluationStatuses"][1]["StatusDetails"] = "<&>" * 1700
    _, blocks = blocks_of(document(event, Outcome.STOPPED))
    [rule] = [b for b in blocks if b["type"] == "section" and "(debugger) →" in b.get("text", {}).get("text", "")]
    text = rule["text"]["text"]
    assert len(text) <= 3000
    assert text.endswith("…")
    assert "&lt;&amp;&gt;" in text
    assert not text[:-1].endswith(("&", "&l", "&lt", "&a", "&am", "&amp", "&g", "&gt"))


def test_dry_run_is_said_in_the_context() -> None:
    doc = document(load_event("vanishing_gradient_issues_found"), Outcome.WOULD_STOP)
    doc["dry_run"] = True
    _, blocks = blocks_of(doc)
    assert "*Dry run*: the guard stops nothing." in all_text(blocks)


@pytest.mark.parametrize(
    "payload",
    [{}, {"schema": "other/1"}, [], "text", {"schema": contract.NOTIFICATION_SCHEMA, "kind": "x"}],
)
def test_anything_but_a_notification_document_is_refused(payload: Any) -> None:
    with pytest.raises(NotADocument):
        render(payload)


@given(st.text(alphabet=st.sampled_from("ab<>&;!x "), max_size=400), st.integers(min_value=2, max_value=300))
def test_fit_never_exceeds_the_limit_nor_splits_an_entity(text: str, limit: int) -> None:
    out = fit(text, limit)
    assert len(out) <= limit
    if out == escape(text):
        return
    assert out.endswith("…")
    body = out.removesuffix("…")
    # the cut text is exactly the escaped form of a prefix of the input: no entity is split
    assert any(escape(text[:k]) == body for k in range(len(text) + 1))


def test_q_developer_custom_notification_shape() -> None:
    doc = document(load_event("vanishing_gradient_issues_found"), Outcome.STOPPED)
    note = q_developer_notification(doc)
    assert (note["version"], note["source"]) == ("1.0", "custom")
    assert note["content"]["textType"] == "client-markdown"
    assert note["content"]["title"].startswith(":red_circle: Stopped pytorch-mnist")
    assert "*Why:* rules.debugger_default = stop" in note["content"]["description"]
    assert note["content"]["nextSteps"][0].startswith("<https://us-east-1.console.aws.amazon.com/sagemaker/")
    assert note["content"]["keywords"] == ["issues_found", "stopped", "critical"]
    assert note["metadata"]["threadId"] == "training-guard/pytorch-mnist-lr01-2026-11-30-02-10-00-123"
    assert note["metadata"]["relatedResources"] == [doc["job"]["arn"]]


def a_test_document() -> dict[str, Any]:
    return make_test_notification(
        test_id="0123456789ab", stack="TrainingGuard", sent_by="ops", account="1", region="eu-west-1", now=NOW
    ).document()


def test_a_test_notification_says_it_is_one() -> None:
    text, blocks = render(a_test_document())
    assert (
        blocks[0]["text"]["text"]
        == "🔵 Test notification from Training Guard (TrainingGuard): nothing happened to any job"
    )
    assert "*What the guard did:* Nothing: this is a test of the notification path." in all_text(blocks)
    assert not [b for b in blocks if b["type"] == "actions"]  # no links to a job
    assert text.startswith("🔵 Test notification")


@pytest.mark.parametrize("min_severity", ["info", "critical"])
def test_a_test_notification_goes_to_every_webhook_whatever_the_routing(min_severity: str) -> None:
    slack = GuardConfig.from_dict(
        {
            "slack": {
                "webhooks": {"default": {}, "on-call": {}, "vision": {}},
                "default": "default",
                "by_severity": {"critical": "on-call"},
                "min_severity": min_severity,
            }
        }
    ).slack
    sent: list[str] = []

    class Sender:
        def send(self, url: str, text: str, blocks: list[dict[str, Any]]) -> Any:
            sent.append(url)
            return type("Delivery", (), {"ok": True})()

    class Urls:
        def url(self, webhook: str) -> str:
            return f"https://hooks.slack.example/{webhook}"

    ledger = FakeLedger()
    chat = ChatDelivery(slack, Urls(), Sender(), ledger, parker=None, ttl_seconds=60)  # type: ignore[arg-type]
    result = chat.deliver(json.dumps(a_test_document()), now=NOW)
    assert result.delivered == ["default", "on-call", "vision"]
    assert sent == [f"https://hooks.slack.example/{w}" for w in ("default", "on-call", "vision")]
    # each delivery recorded where `training-guard test-notification` looks for it
    for webhook in result.delivered:
        assert ledger.items[delivery_key("test#0123456789ab", webhook)]["outcome"] == DELIVERED
    # an ordinary info notification still follows the routing
    info = document(load_event("stopped_max_runtime"), Outcome.NOTIFIED)
    assert chat.deliver(json.dumps(info), now=NOW).delivered == ([] if min_severity == "critical" else ["default"])


def test_a_message_parked_for_want_of_urls_names_each_webhook_before_what_to_do() -> None:
    # two stack-created secrets' reasons fit in the 256 characters adapters/sqs.py keeps (three do not)
    webhooks: dict[str, dict[str, str]] = {"default": {}, "on-call": {}}
    slack = GuardConfig.from_dict({"slack": {"webhooks": webhooks, "default": "default"}}).slack
    parked: list[str] = []

    class Placeholders:
        def url(self, webhook: str) -> str:
            return check_url(webhook, f"TrainingGuard/slack/{webhook}", contract.WEBHOOK_PLACEHOLDER)

    class Parker:
        def park(self, body: str, reason: str) -> None:
            parked.append(reason[:256])  # adapters/sqs.py keeps 256 characters

    class Unreached:
        def send(self, url: str, text: str, blocks: list[dict[str, Any]]) -> Any:
            raise AssertionError("nothing is sent without a URL")

    chat = ChatDelivery(slack, Placeholders(), Unreached(), FakeLedger(), Parker(), ttl_seconds=60)
    result = chat.deliver(json.dumps(a_test_document()), now=NOW)
    assert result.permanent == list(webhooks)
    assert result.not_configured == list(webhooks)  # the notifier counts them: the SecretNotSet self-alarm
    [reason] = parked
    for webhook in webhooks:
        assert f"webhook {webhook!r}: secret TrainingGuard/slack/{webhook} {NOT_CONFIGURED}" in reason
    assert reason.index("on-call") < reason.index("; set it with aws secretsmanager put-secret-value")


# --- Block Kit as plain JSON: the JSON slack_sdk's classes wrote, byte for byte, and their limits --------------------


@pytest.mark.parametrize("event", ["vanishing_gradient_issues_found", "rule_error", "failed", "spot_interrupted"])
def test_the_blocks_are_the_json_slack_sdks_block_kit_classes_write(event: str) -> None:
    # slack_sdk stays a development dependency for this check; the notifier no longer imports it (cold start).
    from slack_sdk.models.blocks import Block

    from training_guard.render.slack_actions import Act, button
    from training_guard.render.slack_messages import render_alarm, render_card

    doc = document(load_event(event), Outcome.WOULD_STOP)
    stop = [button(Act.STOP, label="Stop now", job="j", rule="r", style="danger")]
    alarm = {"AlarmName": "TrainingGuard-X", "NewStateValue": "ALARM", "StateChangeTime": "2026-11-30T01:39:12Z"}
    for _, blocks in (
        render(doc, actions=stop, extra_links={"graph": "https://console.aws.amazon.com/x"}),
        render_card(doc, actions=stop),
        render_alarm(alarm),
    ):
        parsed = [b.to_dict() for b in Block.parse_all(blocks)]
        assert json.dumps(blocks) == json.dumps(parsed)


@pytest.mark.parametrize(
    ("links", "error"),
    [
        ({f"link {i}": "https://x" for i in range(26)}, r"actions block: \d+ items, Block Kit takes at most 25"),
        ({"graph": "https://x/" + "a" * 3000}, "button url: 3010 characters, Block Kit takes at most 3000"),
    ],
)
def test_a_message_over_a_block_kit_limit_is_refused_with_the_limit_named(links: dict[str, str], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        render(document(load_event("rule_error"), Outcome.NOTIFIED), extra_links=links)
