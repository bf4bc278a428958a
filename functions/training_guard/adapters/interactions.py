"""The interactivity endpoint's I/O: replay markers (DynamoDB), the hand-off queue (SQS), the signing secret
(Secrets Manager) and the answers to a click (its response_url, whose client only the asynchronous path makes)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from training_guard import contract
from training_guard.adapters.clients import error_code
from training_guard.domain.errors import ActionFailed

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_sqs import SQSClient

_PK = contract.TABLE_PARTITION_KEY
_TTL = contract.TABLE_TTL_ATTRIBUTE
REPLAY_PREFIX = "slack-request#"
SECRET_MAX_AGE_SECONDS = 300  # a rotated signing secret is picked up within five minutes
# Where Slack's response_urls point (e.g. https://hooks.slack.com/app/T.../...: the block_actions payload reference,
# https://docs.slack.dev/reference/interaction-payloads/block_actions-payload). Anything else is never POSTed to.
SLACK_RESPONSE_URL_PREFIXES = ("https://hooks.slack.com/",)
RESPOND_TIMEOUT_SECONDS = 5


class ReplayMarkers:
    """One state-table item per signed request: a second delivery of the same request finds it and is refused."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def first_time(self, signature: str, timestamp: int, *, expires_at: int) -> bool:
        """Record the request signed `signature` at `timestamp`; False when it was recorded before (a replay)."""
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    _PK: {"S": f"{REPLAY_PREFIX}{timestamp}#{signature}"},
                    # Deleted some time after `expires_at`, never before: the marker outlives the signature's window.
                    _TTL: {"N": str(expires_at)},
                },
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": _PK},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise ActionFailed("record the Slack request against replays", exc) from exc
        return True


class ClickQueue:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._url = queue_url

    def send(self, work: Mapping[str, Any]) -> None:
        try:
            self._client.send_message(QueueUrl=self._url, MessageBody=json.dumps(work, separators=(",", ":")))
        except ClientError as exc:
            raise ActionFailed("hand the click to the asynchronous path", exc) from exc


class SigningSecret:
    """The app's signing secret, read with GetSecretValue and kept for SECRET_MAX_AGE_SECONDS."""

    # By hand: Powertools' SecretsProvider adds ~10 ms of imports to the acknowledgement's cold start (measured).

    def __init__(
        self,
        client: SecretsManagerClient,
        secret_id: str,
        *,
        max_age: float = SECRET_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._id = secret_id
        self._max_age = max_age
        self._clock = clock
        self._value: str | None = None
        self._read_at = 0.0

    def __call__(self) -> str:
        if self._value is None or self._clock() - self._read_at >= self._max_age:
            try:
                value = str(self._client.get_secret_value(SecretId=self._id).get("SecretString") or "")
            except ClientError as exc:
                raise ActionFailed(f"read secret {self._id}", exc) from exc  # names the secret, never its value
            self._value, self._read_at = value, self._clock()
        return self._value


class ResponseUrl:
    """Answers to a click through its response_url: a JSON POST, as Bolt's `respond` does."""

    def __init__(
        self,
        *,
        allowed_prefixes: Sequence[str] = SLACK_RESPONSE_URL_PREFIXES,
        timeout: int = RESPOND_TIMEOUT_SECONDS,
    ) -> None:
        self._allowed = tuple(allowed_prefixes)
        self._timeout = timeout

    def ephemeral(self, url: str, text: str) -> None:
        self._post(url, {"response_type": "ephemeral", "replace_original": False, "text": text})

    def _post(self, url: str, body: dict[str, Any]) -> None:
        if not url.startswith(self._allowed):
            raise ActionFailed("answer the click", ValueError("its response_url is not Slack's"))
        from urllib.request import Request

        from training_guard.adapters.slack import JSON_HEADERS, _sdk_logger, exchange, retry_connection_once

        request = Request(url, data=json.dumps(body).encode("utf-8"), headers=JSON_HEADERS, method="POST")  # noqa: S310
        try:
            status, _, _ = exchange(request, retry=retry_connection_once, timeout=self._timeout, logger=_sdk_logger())
        except Exception as exc:  # noqa: BLE001 - connection errors: the queue delivers the click again
            raise ActionFailed("answer the click", RuntimeError(type(exc).__name__)) from None
        if status != 200:
            raise ActionFailed("answer the click", RuntimeError(f"HTTP {status}"))
