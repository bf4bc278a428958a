"""Typed settings of the functions, read from the environment once and validated with errors
that name the variable. The only module of the package that reads `os.environ`."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING

from training_guard import contract
from training_guard.config.frozen import frozen

if TYPE_CHECKING:
    # Imported where a configuration is read: the Slack acknowledgement must not load it (Slack's 3 seconds).
    from training_guard.config.model import GuardConfig


class SettingsError(RuntimeError):
    """A required environment variable is missing or invalid (a deployment defect)."""


@frozen
class Settings:
    config: GuardConfig
    table: str
    topic_arn: str
    # Unset: an unusable event raises, and Lambda's retries and on-failure destination take it.
    dead_letter_queue_url: str | None = None
    # Slack app mode, in the functions that fold a job's end into the guard's stop: where its card update goes.
    chat_queue_url: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = _required(os.environ if env is None else env, contract.ENV_TABLE, contract.ENV_TOPIC_ARN)
        return cls(
            config=_config(env),
            table=env[contract.ENV_TABLE],
            topic_arn=env[contract.ENV_TOPIC_ARN],
            dead_letter_queue_url=env.get(contract.ENV_REJECTED_EVENTS_QUEUE_URL) or None,
            chat_queue_url=env.get(contract.ENV_CHAT_QUEUE_URL) or None,
        )


def _required(env: Mapping[str, str], *keys: str) -> Mapping[str, str]:
    missing = [k for k in keys if not env.get(k)]
    if not env.get(contract.ENV_CONFIG_FILE) and not env.get(contract.ENV_CONFIG):
        missing.insert(0, f"{contract.ENV_CONFIG_FILE} (or {contract.ENV_CONFIG})")
    if missing:
        raise SettingsError(f"missing environment variable(s): {', '.join(missing)}")
    return env


def _config(env: Mapping[str, str]) -> GuardConfig:
    """The configuration: the file named by ENV_CONFIG_FILE (Lambda allows 4 KB of environment), else ENV_CONFIG."""
    from training_guard.config.model import ConfigError, GuardConfig

    path = env.get(contract.ENV_CONFIG_FILE)
    if path:
        source = f"${contract.ENV_CONFIG_FILE} ({path})"
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except OSError as exc:
            raise SettingsError(f"{source}: cannot read the configuration file: {exc.strerror or exc}") from None
    else:
        source, text = f"${contract.ENV_CONFIG}", env[contract.ENV_CONFIG]
    try:
        return GuardConfig.from_json(text, source=source)
    except ConfigError as exc:
        raise SettingsError(str(exc)) from None


# Seconds between posts to one webhook or channel (Slack: about one message a second); as adapters/slack.py's
SLACK_MIN_INTERVAL = 1.0


@frozen
class ChatSettings:
    config: GuardConfig
    table: str
    webhook_secrets: dict[str, str]  # webhook name -> secret name or ARN (never the URL); empty in app mode
    dead_letter_queue_url: str
    min_interval_seconds: float = SLACK_MIN_INTERVAL
    bot_token_secret: str | None = None
    slack_api_url: str | None = None  # app mode: the Slack Web API's base URL (None: Slack's own)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ChatSettings:
        env = _required(os.environ if env is None else env)
        config = _config(env)
        # Every missing variable named at once: the mode decides which secret variable is needed.
        secrets_key = contract.ENV_SLACK_BOT_TOKEN_SECRET if config.slack.app_mode else contract.ENV_WEBHOOK_SECRETS
        _required(env, contract.ENV_TABLE, secrets_key, contract.ENV_DEAD_LETTER_QUEUE_URL)
        table, dead_letters = env[contract.ENV_TABLE], env[contract.ENV_DEAD_LETTER_QUEUE_URL]
        interval = _seconds(env, contract.ENV_SLACK_MIN_INTERVAL, SLACK_MIN_INTERVAL)
        if config.slack.app_mode:
            return cls(
                config=config,
                table=table,
                webhook_secrets={},
                dead_letter_queue_url=dead_letters,
                min_interval_seconds=interval,
                bot_token_secret=env[contract.ENV_SLACK_BOT_TOKEN_SECRET],
                slack_api_url=env.get(contract.ENV_SLACK_API_URL) or None,
            )
        try:
            secrets = json.loads(env[contract.ENV_WEBHOOK_SECRETS])
        except json.JSONDecodeError as exc:
            raise SettingsError(f"${contract.ENV_WEBHOOK_SECRETS} is not JSON: {exc}") from None
        unknown = set(config.slack.webhooks) - set(secrets)
        if not isinstance(secrets, dict) or unknown:
            raise SettingsError(f"${contract.ENV_WEBHOOK_SECRETS} lacks a secret for webhook(s): {sorted(unknown)}")
        return cls(
            config=config,
            table=table,
            webhook_secrets={str(k): str(v) for k, v in secrets.items()},
            dead_letter_queue_url=dead_letters,
            min_interval_seconds=interval,
        )


@frozen
class InteractionSettings:
    """The Slack acknowledgement's settings: no configuration file, so `allowed_users` comes in the environment."""

    table: str
    signing_secret: str  # the secret's name or ARN, never its value
    click_queue_url: str
    allowed_users: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> InteractionSettings:
        env = os.environ if env is None else env
        keys = (contract.ENV_TABLE, contract.ENV_SLACK_SIGNING_SECRET, contract.ENV_CLICK_QUEUE_URL)
        missing = [k for k in keys if not env.get(k)]
        if missing:
            raise SettingsError(f"missing environment variable(s): {', '.join(missing)}")
        users = frozenset(u for u in (env.get(contract.ENV_SLACK_ALLOWED_USERS) or "").split(",") if u.strip())
        return cls(
            table=env[contract.ENV_TABLE],
            signing_secret=env[contract.ENV_SLACK_SIGNING_SECRET],
            click_queue_url=env[contract.ENV_CLICK_QUEUE_URL],
            allowed_users=frozenset(u.strip() for u in users),
        )


@frozen
class BotSettings:
    """Slack app mode's bot, for the notifier and the click worker alike: its token's secret and the API's URL."""

    bot_token_secret: str
    slack_api_url: str | None = None
    min_interval_seconds: float = SLACK_MIN_INTERVAL

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BotSettings:
        env = os.environ if env is None else env
        if not env.get(contract.ENV_SLACK_BOT_TOKEN_SECRET):
            raise SettingsError(f"missing environment variable(s): {contract.ENV_SLACK_BOT_TOKEN_SECRET}")
        return cls(
            env[contract.ENV_SLACK_BOT_TOKEN_SECRET],
            env.get(contract.ENV_SLACK_API_URL) or None,
            _seconds(env, contract.ENV_SLACK_MIN_INTERVAL, SLACK_MIN_INTERVAL),
        )


def _seconds(env: Mapping[str, str], key: str, default: float) -> float:
    raw = env.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"${key} must be a number of seconds, got {raw!r}") from None
    if not 0 <= value <= 60:
        raise SettingsError(f"${key} must be between 0 and 60 seconds, got {value}")
    return value
