"""Names the stack gives and the workstation tools (plan, preflight, doctor) need: pure, no jsii.

Importing the CDK takes about 2 s (jsii starts Node.js); these tools only need the names.
"""

from __future__ import annotations

STACK_NAME = "TrainingGuard"


def webhook_secret_name(stack_name: str, webhook: str) -> str:
    """The name of the secret the stack creates for a Slack webhook the configuration does not name one for."""
    return f"{stack_name}/slack/{webhook}"


def bot_token_secret_name(stack_name: str) -> str:
    """Slack app mode: the secret the stack creates for the bot token when the configuration names none."""
    return webhook_secret_name(stack_name, "slack-app-bot-token")


def signing_secret_name(stack_name: str) -> str:
    """Slack app mode: the secret the stack creates for the signing secret when the configuration names none."""
    return webhook_secret_name(stack_name, "slack-app-signing-secret")


def dashboard_name(stack_name: str) -> str:
    return f"{stack_name}-activity"
