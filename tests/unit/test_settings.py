from __future__ import annotations

import re
from pathlib import Path

import pytest

from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard.config.settings import BotSettings, ChatSettings, Settings, SettingsError

ENV = {
    contract.ENV_CONFIG: GuardConfig().to_json(),
    contract.ENV_TABLE: "table",
    contract.ENV_TOPIC_ARN: "arn:aws:sns:us-east-1:123456789012:topic",
}


def test_settings_read_the_environment() -> None:
    settings = Settings.from_env(ENV)
    assert settings.config == GuardConfig()
    assert (settings.table, settings.topic_arn) == ("table", ENV[contract.ENV_TOPIC_ARN])


def test_missing_variables_are_named() -> None:
    with pytest.raises(SettingsError, match=f"missing environment variable\\(s\\): {contract.ENV_TABLE}"):
        Settings.from_env({k: v for k, v in ENV.items() if k != contract.ENV_TABLE})


def test_an_invalid_config_value_names_the_variable_and_the_field() -> None:
    with pytest.raises(SettingsError, match=rf"(?s)\${contract.ENV_CONFIG} is invalid.*dry_run: must be true or false"):
        Settings.from_env({**ENV, contract.ENV_CONFIG: '{"dry_run": "maybe"}'})


def _file_env(path: Path) -> dict[str, str]:
    return {k: v for k, v in ENV.items() if k != contract.ENV_CONFIG} | {contract.ENV_CONFIG_FILE: str(path)}


def test_the_deployed_functions_read_the_configuration_file_named_in_the_environment(tmp_path: Path) -> None:
    shipped = GuardConfig.from_dict({"dry_run": True, "sweep_minutes": 7})
    path = tmp_path / "config.json"
    path.write_text(shipped.to_json(), encoding="utf-8")
    assert Settings.from_env(_file_env(path)).config == shipped
    # the file wins over an inline configuration left in the environment
    assert Settings.from_env({**_file_env(path), contract.ENV_CONFIG: GuardConfig().to_json()}).config == shipped


def test_the_chat_settings_read_the_configuration_file_too(tmp_path: Path) -> None:
    shipped = GuardConfig.from_dict({"slack": {"webhooks": {"on-call": {}}, "default": "on-call"}})
    path = tmp_path / "config.json"
    path.write_text(shipped.to_json(), encoding="utf-8")
    env = {
        contract.ENV_CONFIG_FILE: str(path),
        contract.ENV_TABLE: "table",
        contract.ENV_WEBHOOK_SECRETS: '{"on-call": "arn:aws:secretsmanager:us-east-1:123456789012:secret:x"}',
        contract.ENV_DEAD_LETTER_QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/dlq",
    }
    assert ChatSettings.from_env(env).config == shipped


def test_a_missing_configuration_file_names_the_variable_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(SettingsError, match=re.escape(f"${contract.ENV_CONFIG_FILE} ({path}): cannot read")):
        Settings.from_env(_file_env(path))


def test_an_invalid_configuration_file_names_the_variable_the_file_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"dry_run": "maybe"}', encoding="utf-8")
    with pytest.raises(
        SettingsError, match=rf"(?s){re.escape(f'${contract.ENV_CONFIG_FILE} ({path}) is invalid')}.*dry_run"
    ):
        Settings.from_env(_file_env(path))
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(
        SettingsError, match=rf"(?s){re.escape(f'${contract.ENV_CONFIG_FILE} ({path}) is invalid')}.*JSON"
    ):
        Settings.from_env(_file_env(path))


def test_without_any_configuration_both_variables_are_named() -> None:
    with pytest.raises(SettingsError, match=re.escape(f"{contract.ENV_CONFIG_FILE} (or {contract.ENV_CONFIG})")):
        Settings.from_env({k: v for k, v in ENV.items() if k != contract.ENV_CONFIG})


def test_the_bot_paces_its_posts_as_the_webhooks_do() -> None:
    bot = {contract.ENV_SLACK_BOT_TOKEN_SECRET: "training-guard/slack-bot"}
    assert BotSettings.from_env(bot).min_interval_seconds == 1.0  # Slack's one message a second per channel
    assert BotSettings.from_env({**bot, contract.ENV_SLACK_MIN_INTERVAL: "0"}).min_interval_seconds == 0.0
    with pytest.raises(SettingsError, match=f"\\${contract.ENV_SLACK_MIN_INTERVAL} must be between 0 and 60"):
        BotSettings.from_env({**bot, contract.ENV_SLACK_MIN_INTERVAL: "61"})
