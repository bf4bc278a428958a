from __future__ import annotations

import pytest

from training_guard import contract
from training_guard.config import GuardConfig
from training_guard.settings import Settings, SettingsError

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
