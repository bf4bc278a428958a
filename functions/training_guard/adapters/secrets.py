"""Secrets Manager through Powertools Parameters (in the layer already): webhook URLs, cached 5 minutes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

from training_guard.domain.errors import ActionFailed
from training_guard.services.chat import check_url

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient

CACHE_SECONDS = 300


class Secrets:
    def __init__(self, client: SecretsManagerClient, *, max_age: int = CACHE_SECONDS) -> None:
        self._provider = SecretsProvider(boto3_client=client)
        self._max_age = max_age

    def get(self, secret_id: str) -> str:
        try:
            return str(self._provider.get(secret_id, max_age=self._max_age))
        except GetParameterError as exc:
            # Names the secret and AWS's error, never a value.
            raise ActionFailed(f"read secret {secret_id}", exc.__cause__ or exc) from None


class SecretWebhookUrls:
    def __init__(self, secrets: Secrets, secret_ids: dict[str, str]) -> None:
        self._secrets = secrets
        self._ids = secret_ids

    def url(self, webhook: str) -> str:
        secret_id = self._ids[webhook]
        return check_url(webhook, secret_id, self._secrets.get(secret_id))
