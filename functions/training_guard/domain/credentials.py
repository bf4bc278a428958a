"""Whether a secret holds a usable credential: never a placeholder the stack writes, never a published example."""

from __future__ import annotations

import re

from training_guard import contract

# The signing secret of Slack's worked example (https://docs.slack.dev/authentication/verifying-requests-from-slack):
# public, so a request signed with it proves nothing.
SLACK_EXAMPLE_SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # noqa: S105
PUBLISHED = frozenset(
    {
        contract.WEBHOOK_PLACEHOLDER,
        contract.BOT_TOKEN_PLACEHOLDER,
        contract.SIGNING_SECRET_PLACEHOLDER,
        SLACK_EXAMPLE_SIGNING_SECRET,
    }
)
PLACEHOLDER_MARK = "REPLACE-ME"
# Slack documents no format; its pages show 32 letters and digits: a floor on the shape, not Slack's pattern.
SIGNING_SECRET_SHAPE = re.compile(r"[A-Za-z0-9]{32,}")
SIGNING_SECRET_WORDS = "32 or more letters and digits, from the app's Basic Information page"  # noqa: S105
BOT_TOKEN_PREFIX = "xoxb-"  # noqa: S105 - the prefix of a bot user's token (domain.md section 8)
BOT_TOKEN_SHAPE = re.compile(r"xoxb-[A-Za-z0-9-]{10,}")
_LOOPBACK_PREFIXES = ("http://127.0.0.1:", "http://localhost:", "http://[::1]:")  # the emulation's listener
WEBHOOK_SHAPE = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]+)?/\S*")
# An incoming webhook's path: /services/<team T...>/<B...>/<token>; the docs' "T.../B.../..." is no URL.
SLACK_SERVICES = re.compile(r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9_-]{8,}")
ELIDED = ("...", "…", "<", ">")  # the marks of an example written in a doc or a fix command

NOT_CONFIGURED_ERROR = "not_configured"
SIGNING_SECRET, BOT_TOKEN, WEBHOOK_URL = "signing_secret", "bot_token", "webhook_url"


def _common(value: str) -> str | None:
    if not value.strip():
        return "is empty"
    if value.strip() in PUBLISHED or PLACEHOLDER_MARK in value:
        return "still holds a placeholder or a published example value"
    return None


def signing_secret_problem(value: str) -> str | None:
    problem = _common(value)
    if problem is None and not SIGNING_SECRET_SHAPE.fullmatch(value.strip()):
        problem = f"is not shaped like a Slack signing secret ({SIGNING_SECRET_WORDS})"
    return problem


def bot_token_problem(value: str) -> str | None:
    problem = _common(value)
    if problem is None and not BOT_TOKEN_SHAPE.fullmatch(value.strip()):
        problem = f"is not shaped like a bot token ({BOT_TOKEN_PREFIX}...)"
    return problem


def webhook_url_problem(value: str) -> str | None:
    """Why `value` cannot be a webhook URL; None when it can (https, or the emulation's loopback listener)."""
    problem = _common(value)
    url = value.strip()
    if problem is None and any(mark in url for mark in ELIDED):
        problem = "holds an example with parts left out, not a webhook URL"
    if problem is None and not (WEBHOOK_SHAPE.fullmatch(url) or url.startswith(_LOOPBACK_PREFIXES)):
        problem = "is not an https:// URL"
    if problem is None and url.startswith("https://hooks.slack.com/services/") and not SLACK_SERVICES.fullmatch(url):
        problem = "is not shaped like a Slack incoming webhook (https://hooks.slack.com/services/T.../B.../<token>)"
    return problem


WORDS = {SIGNING_SECRET: "signing secret", BOT_TOKEN: "bot token", WEBHOOK_URL: "webhook URL"}
PROBLEMS = {SIGNING_SECRET: signing_secret_problem, BOT_TOKEN: bot_token_problem, WEBHOOK_URL: webhook_url_problem}


def put_secret_command(secret_id: str, kind: str, region: str | None = None) -> str:
    """The command an operator runs to set the secret (the value left for them to fill in)."""
    example = {
        SIGNING_SECRET: "<signing secret>",
        BOT_TOKEN: f"{BOT_TOKEN_PREFIX}...",
        WEBHOOK_URL: "https://hooks.slack.com/services/...",
    }
    where = f" --region {region}" if region else ""
    return f"aws secretsmanager put-secret-value{where} --secret-id {secret_id} --secret-string '{example[kind]}'"
