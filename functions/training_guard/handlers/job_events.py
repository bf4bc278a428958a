"""Job-events Lambda: one "SageMaker Training Job State Change" event in, one receipt out."""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit

from training_guard import clock, contract
from training_guard.adapters.clients import client
from training_guard.adapters.cloudwatch import CloudWatchAlarms
from training_guard.adapters.ledger import DynamoLedger
from training_guard.adapters.sagemaker import SageMakerJobs
from training_guard.adapters.sns import SnsPublisher
from training_guard.adapters.sqs import DeadLetterParker
from training_guard.events import EventError, ForeignEvent, parse_event
from training_guard.responder import Receipt, Responder
from training_guard.settings import Settings

logger = Logger()
metrics = Metrics(namespace=contract.GUARD_METRICS_NAMESPACE)


@cache
def settings() -> Settings:
    return Settings.from_env()


@cache
def parker() -> DeadLetterParker | None:
    url = settings().dead_letter_queue_url
    return DeadLetterParker(client("sqs"), url) if url else None


@cache
def responder() -> Responder:
    """The composition root: real adapters from typed settings, built once per environment."""
    settings_ = settings()
    return Responder(
        settings_.config,
        jobs=SageMakerJobs(client("sagemaker")),
        ledger=DynamoLedger(client("dynamodb"), settings_.table),
        publisher=SnsPublisher(client("sns"), settings_.topic_arn),
        alarms=CloudWatchAlarms(client("cloudwatch")),
    )


@metrics.log_metrics
@logger.inject_lambda_context(correlation_id_path=correlation_paths.EVENT_BRIDGE)
def handler(event: dict[str, Any], context: Any) -> dict[str, object]:
    return process(event, responder(), account=account_of(context), dead_letters=parker()).as_dict()


def process(
    event: Any,
    guard: Responder,
    *,
    account: str | None,
    now: datetime | None = None,
    dead_letters: DeadLetterParker | None = None,
) -> Receipt:
    """Parse, one domain call, a log line and metrics. An unusable event is parked in the
    dead-letter queue with its reason (or raises `EventError` when there is none)."""
    try:
        parsed = parse_event(event)
    except ForeignEvent as exc:
        # Only the rule's pattern routes events here; anything else was sent by hand: ignore it.
        logger.warning("foreign event ignored", extra={"reason": str(exc)})
        receipt = Receipt(job="", event_id=str(event.get("id", "")), ignored=str(exc))
        count_outcomes(metrics, receipt)
        return receipt
    except EventError as exc:
        return reject(event, exc, dead_letters)
    logger.append_keys(training_job=parsed.job.name, job_status=parsed.job.status)
    if account and parsed.account != account:
        return ignore_other_account(parsed.job.name, parsed.event_id, parsed.account)
    receipt = guard.handle(parsed, now=now or clock.utcnow())
    logger.info("event handled", extra={"receipt": receipt.as_dict()})
    count_outcomes(metrics, receipt)
    return receipt


def reject(event: Any, error: EventError, dead_letters: DeadLetterParker | None) -> Receipt:
    """An unusable event: logged with its reason and parked at once (retrying cannot help)."""
    logger.error("unusable event", extra={"reason": str(error)})
    if dead_letters is None:
        raise error
    body = json.dumps(event, default=str)
    dead_letters.park(body, f"unusable event: {error}")
    event_id = event.get("id") if isinstance(event, dict) else None
    receipt = Receipt(job="", event_id=str(event_id or ""), rejected=str(error))
    count_outcomes(metrics, receipt)
    metrics.add_metric(name="EventsRejected", unit=MetricUnit.Count, value=1)
    return receipt


def ignore_other_account(job: str, event_id: str, event_account: str | None) -> Receipt:
    """The default bus only carries this account's events: anything else is spoofed or misrouted."""
    logger.warning("event from another account ignored", extra={"event_account": event_account})
    receipt = Receipt(job=job, event_id=event_id, ignored=f"event from account {event_account}")
    count_outcomes(metrics, receipt)
    return receipt


def count_outcomes(metrics: Metrics, receipt: Receipt) -> None:
    metrics.add_metric(name="EventsHandled", unit=MetricUnit.Count, value=1)
    if receipt.unrecorded:
        logger.error("acted on but not recorded in the ledger", extra={"transitions": receipt.unrecorded})
        metrics.add_metric(name="UnrecordedTransitions", unit=MetricUnit.Count, value=len(receipt.unrecorded))
    for outcome in receipt.outcomes:
        metrics.add_metric(name=f"Outcome_{outcome}", unit=MetricUnit.Count, value=1)
    if receipt.notifications:
        metrics.add_metric(name="NotificationsPublished", unit=MetricUnit.Count, value=len(receipt.notifications))
    if receipt.duplicates:
        metrics.add_metric(name="DuplicateTransitions", unit=MetricUnit.Count, value=receipt.duplicates)


def account_of(context: Any) -> str | None:
    arn = getattr(context, "invoked_function_arn", "") or ""
    parts = arn.split(":")
    return parts[4] if len(parts) > 4 and parts[4] else None
