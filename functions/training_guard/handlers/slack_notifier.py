"""Slack notifier Lambda: SQS batch of notification documents in, partial batch failures out."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from training_guard import clock, contract
from training_guard.adapters.clients import client
from training_guard.adapters.ledger import DynamoLedger
from training_guard.adapters.secrets import CachedSecrets
from training_guard.adapters.slack import WebhookSender
from training_guard.adapters.sqs import DeadLetterParker
from training_guard.chat import ChatDelivery, MessageResult, check_url
from training_guard.settings import ChatSettings

logger = Logger()
metrics = Metrics(namespace=contract.GUARD_METRICS_NAMESPACE)


class SecretWebhookUrls:
    def __init__(self, secrets: CachedSecrets, secret_ids: dict[str, str]) -> None:
        self._secrets = secrets
        self._ids = secret_ids

    def url(self, webhook: str) -> str:
        secret_id = self._ids[webhook]
        return check_url(webhook, secret_id, self._secrets.get(secret_id))


@cache
def delivery() -> ChatDelivery:
    settings = ChatSettings.from_env()
    return ChatDelivery(
        settings.config.slack,
        urls=SecretWebhookUrls(CachedSecrets(client("secretsmanager")), settings.webhook_secrets),
        sender=WebhookSender(min_interval=settings.min_interval_seconds),
        ledger=DynamoLedger(client("dynamodb"), settings.table),
        parker=DeadLetterParker(client("sqs"), settings.dead_letter_queue_url),
        ttl_seconds=settings.config.dedup_ttl_days * 86400,
    )


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
    return process(event, delivery())


def process(
    event: dict[str, Any], chat: ChatDelivery, *, now: datetime | None = None
) -> dict[str, list[dict[str, str]]]:
    failures: list[dict[str, str]] = []
    metrics.add_metric(name="MessagesReceived", unit=MetricUnit.Count, value=len(event.get("Records", [])))
    for record in event.get("Records", []):
        message_id = record.get("messageId", "")
        try:
            result = chat.deliver(record.get("body", ""), now=now or clock.utcnow())
        except Exception:
            logger.exception("delivery failed", extra={"message_id": message_id})
            failures.append({"itemIdentifier": message_id})
            continue
        log = logger.warning if result.errors else logger.info
        log("message handled", extra={"message_id": message_id, **_summary(result)})
        metrics.add_metric(name="SlackDelivered", unit=MetricUnit.Count, value=len(result.delivered))
        if result.transient or result.permanent:
            metrics.add_metric(
                name="SlackFailed", unit=MetricUnit.Count, value=len(result.transient) + len(result.permanent)
            )
        if result.retry:
            failures.append({"itemIdentifier": message_id})
    return {"batchItemFailures": failures}


def _summary(result: MessageResult) -> dict[str, list[str]]:
    return {name: list(values) for name, values in vars(result).items()}
