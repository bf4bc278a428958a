"""Secrets Manager: webhook URLs and the bot token, each cached 5 minutes per execution environment.

A dictionary, not Powertools Parameters: its package loads its SSM, AppConfig and DynamoDB providers (~2.5 ms of
the notifier's cold start, measured) for one GetSecretValue."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from training_guard.domain.errors import ActionFailed
from training_guard.services.chat import check_url

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient

CACHE_SECONDS = 300


class Secrets:
    def __init__(
        self,
        client: SecretsManagerClient,
        *,
        max_age: int = CACHE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._max_age = max_age
        self._monotonic = monotonic
        self._cache: dict[str, tuple[float, str]] = {}  # secret ID -> (read at, value)

    def get(self, secret_id: str) -> str:
        now = self._monotonic()
        cached = self._cache.get(secret_id)
        if cached is not None and now - cached[0] <= self._max_age:
            return cached[1]
        try:
            answer = self._client.get_secret_value(SecretId=secret_id)
            value = str(answer["SecretString"] if "SecretString" in answer else answer["SecretBinary"])
        except (BotoCoreError, ClientError, KeyError) as exc:
            # Names the secret and AWS's error, never a value.
            raise ActionFailed(f"read secret {secret_id}", exc) from None
        self._cache[secret_id] = (now, value)
        return value


class SecretWebhookUrls:
    def __init__(self, secrets: Secrets, secret_ids: dict[str, str]) -> None:
        self._secrets = secrets
        self._ids = secret_ids

    def url(self, webhook: str) -> str:
        secret_id = self._ids[webhook]
        return check_url(webhook, secret_id, self._secrets.get(secret_id))
