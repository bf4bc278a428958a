"""Typed settings of the functions, read from the environment once and validated with errors
that name the variable. The only module of the package that reads `os.environ`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from training_guard import contract
from training_guard.config import ConfigError, GuardConfig


class SettingsError(RuntimeError):
    """A required environment variable is missing or invalid (a deployment defect)."""


@dataclass(frozen=True)
class Settings:
    config: GuardConfig
    table: str
    topic_arn: str

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        missing = [k for k in (contract.ENV_CONFIG, contract.ENV_TABLE, contract.ENV_TOPIC_ARN) if not env.get(k)]
        if missing:
            raise SettingsError(f"missing environment variable(s): {', '.join(missing)}")
        try:
            config = GuardConfig.from_json(env[contract.ENV_CONFIG], source=f"${contract.ENV_CONFIG}")
        except ConfigError as exc:
            raise SettingsError(str(exc)) from None
        return cls(config=config, table=env[contract.ENV_TABLE], topic_arn=env[contract.ENV_TOPIC_ARN])
