"""No default is a credential: what the functions, doctor and preflight accept as a Slack secret's value."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest

from training_guard import contract
from training_guard.domain import credentials
from training_guard.services.chat import NotConfigured, check_url

HOOK = "https://hooks.slack.com/services/" + "/".join(("T0TEST", "B0TEST", "not-a-real-token"))
PLACEHOLDERS = [
    contract.WEBHOOK_PLACEHOLDER,
    contract.BOT_TOKEN_PLACEHOLDER,
    contract.SIGNING_SECRET_PLACEHOLDER,
    credentials.SLACK_EXAMPLE_SIGNING_SECRET,
    "REPLACE-ME later",
]


@pytest.mark.parametrize("kind", sorted(credentials.PROBLEMS))
@pytest.mark.parametrize("value", PLACEHOLDERS)
def test_no_placeholder_or_published_value_is_a_credential_of_any_kind(kind: str, value: str) -> None:
    assert credentials.PROBLEMS[kind](value) == "still holds a placeholder or a published example value"
    assert credentials.PROBLEMS[kind](f"  {value}\n") is not None


@pytest.mark.parametrize("kind", sorted(credentials.PROBLEMS))
@pytest.mark.parametrize("value", ["", " ", "\n\t"])
def test_an_empty_secret_is_no_credential(kind: str, value: str) -> None:
    assert credentials.PROBLEMS[kind](value) == "is empty"


def test_a_signing_secret_is_32_or_more_letters_and_digits() -> None:
    assert credentials.signing_secret_problem(secrets.token_hex(16)) is None
    assert credentials.signing_secret_problem(f" {secrets.token_hex(20)}\n") is None
    for wrong in (secrets.token_hex(15), "hunter2", secrets.token_hex(16)[:31] + "!"):
        assert "not shaped like a Slack signing secret" in str(credentials.signing_secret_problem(wrong))


def test_a_bot_token_starts_with_xoxb_and_has_a_body() -> None:
    assert credentials.bot_token_problem(f"{credentials.BOT_TOKEN_PREFIX}{secrets.token_hex(12)}") is None
    for wrong in ("xoxb-", "xoxb-short", f"xoxp-{secrets.token_hex(12)}", secrets.token_hex(16)):
        assert credentials.bot_token_problem(wrong) == "is not shaped like a bot token (xoxb-...)"


def test_a_webhook_url_is_https_or_the_emulations_loopback_listener() -> None:
    assert credentials.webhook_url_problem(HOOK) is None
    assert credentials.webhook_url_problem("https://hooks.slack.com/triggers/T0/1/a") is None  # a workflow's
    assert credentials.webhook_url_problem("http://127.0.0.1:8080/hook") is None
    for wrong in ("http://hooks.slack.com/services/T0/B0/x", "hooks.slack.com/services/x", "https://", "ftp://x/"):
        assert credentials.webhook_url_problem(wrong) == "is not an https:// URL"
    assert "incoming webhook" in str(credentials.webhook_url_problem("https://hooks.slack.com/services/T0/B0"))


def test_every_example_webhook_url_the_project_prints_is_refused() -> None:
    # The README, the docs and the fix commands show elided URLs; one pasted as it is must not pass as real.
    root = Path(__file__).resolve().parents[2]
    texts = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    texts += sorted((root / "local").rglob("*.py")) + sorted((root / "functions").rglob("*.py"))
    found = set()
    for path in texts:
        found |= set(re.findall(r"https://hooks\.slack\.com/[^\s'\"`)|]*", path.read_text(encoding="utf-8")))
    examples = {url.rstrip(",:;") for url in found} - {"https://hooks.slack.com/"}
    assert "https://hooks.slack.com/services/T.../B.../..." in examples
    assert {
        url: credentials.webhook_url_problem(url) for url in examples if credentials.webhook_url_problem(url) is None
    } == {}


def test_the_notifier_refuses_a_webhook_secret_holding_a_placeholder_with_the_fix() -> None:
    for value in (contract.WEBHOOK_PLACEHOLDER, "", "https://"):
        with pytest.raises(NotConfigured) as caught:
            check_url("default", "TrainingGuard/slack/default", value)
        assert "put-secret-value --secret-id TrainingGuard/slack/default" in caught.value.remedy
    assert check_url("default", "s", f" {HOOK}\n") == HOOK


def test_the_fix_names_the_secret_the_region_and_what_to_put() -> None:
    assert credentials.put_secret_command("tg/signing", credentials.SIGNING_SECRET, "eu-west-1") == (
        "aws secretsmanager put-secret-value --region eu-west-1 --secret-id tg/signing --secret-string '<signing secret>'"
    )
