"""What the event handlers do with a receipt: one log line and the guard's metrics; unusable and
foreign events parked or ignored with their reason."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from training_guard import contract
from training_guard.adapters.sqs import DeadLetterParker
from training_guard.events import EventError
from training_guard.responder import Receipt

logger = Logger()
metrics = Metrics(namespace=contract.GUARD_METRICS_NAMESPACE)


def reject(event: Any, error: EventError, dead_letters: DeadLetterParker | None) -> Receipt:
    """An unusable event: logged with its reason and parked at once (retrying cannot help)."""
    logger.error("unusable event", extra={"reason": str(error)})
    if dead_letters is None:
        raise error
    body = json.dumps(event, default=str)
    dead_letters.park(body, f"unusable event: {error}")
    event_id = event.get("id") if isinstance(event, dict) else None
    receipt = Receipt(job="", event_id=str(event_id or ""), rejected=str(error))
    count_outcomes(receipt)
    metrics.add_metric(name="EventsRejected", unit=MetricUnit.Count, value=1)
    return receipt


def ignore_other_account(job: str, event_id: str, event_account: str | None) -> Receipt:
    """The default bus only carries this account's events: anything else is spoofed or misrouted."""
    logger.warning("event from another account ignored", extra={"event_account": event_account})
    receipt = Receipt(job=job, event_id=event_id, ignored=f"event from account {event_account}")
    count_outcomes(receipt)
    return receipt


def count_outcomes(receipt: Receipt) -> None:
    metrics.add_metric(name="EventsHandled", unit=MetricUnit.Count, value=1)
    if receipt.unrecorded:
        logger.error("acted on but not recorded in the ledger", extra={"transitions": receipt.unrecorded})
        metrics.add_metric(name="UnrecordedTransitions", unit=MetricUnit.Count, value=len(receipt.unrecorded))
    for outcome in receipt.outcomes:
        metrics.add_metric(name=f"Outcome_{outcome}", unit=MetricUnit.Count, value=1)
    if receipt.notifications:
        metrics.add_metric(name="NotificationsPublished", unit=MetricUnit.Count, value=len(receipt.notifications))
    if receipt.folded:
        # Acted on and recorded (the ledger's outcome "folded", the stop record's audit), never published:
        # this line is what a person searching the logs for a missing message finds.
        logger.info(
            "folded into the guard's stop of the job, not announced",
            extra={"training_job": receipt.job, "transitions": receipt.folded},
        )
        metrics.add_metric(name="NotificationsFolded", unit=MetricUnit.Count, value=len(receipt.folded))
    if receipt.duplicates:
        metrics.add_metric(name="DuplicateTransitions", unit=MetricUnit.Count, value=receipt.duplicates)
