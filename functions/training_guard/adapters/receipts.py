"""What the event handlers do with a receipt: one log line and the guard's metrics; unusable and
foreign events parked or ignored with their reason; and the spend-avoided metric of every stop."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from training_guard import contract
from training_guard.adapters.sqs import DeadLetterParker
from training_guard.domain.events import EventError
from training_guard.services.responder import Receipt

logger = Logger()
metrics = Metrics(namespace=contract.GUARD_METRICS_NAMESPACE)


# CloudWatch dimension values: printable ASCII, 1 to 1024 characters (docs/limits.md).
DIMENSION_VALUE_MAX = 1024


def dimension_value(text: str) -> str:
    """A rule's name as a legal dimension value: non-printable ASCII becomes "?" (the audit record keeps it whole)."""
    value = "".join(c if " " <= c <= "~" else "?" for c in text)[:DIMENSION_VALUE_MAX]
    return value if value.strip() else "?"


class SpendMeter:
    """`SpendAvoidedUSD` per stop by rule: each rule is one more billed custom metric (docs/cost.md has the sum); a line
    of its own (single_metric), so the dimension does not spread to the invocation's other metrics."""

    def spend_avoided(self, rule: str, usd: float) -> None:
        with single_metric(
            name=contract.SPEND_AVOIDED_METRIC,
            unit=MetricUnit.NoUnit,  # CloudWatch has no currency unit
            value=usd,
            namespace=contract.GUARD_METRICS_NAMESPACE,
        ) as metric:
            metric.add_dimension(name=contract.RULE_DIMENSION, value=dimension_value(rule))
        logger.info("spend avoided by a stop", extra={"rule": rule, "spend_avoided_usd": usd})


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
    metrics.add_metric(name=contract.Metric.EVENTS_REJECTED, unit=MetricUnit.Count, value=1)
    return receipt


def ignore_other_account(job: str, event_id: str, event_account: str | None, *, organization: bool = False) -> Receipt:
    """An event from an account the guard does not guard (`accounts.accepts`): ignored, logged and counted."""
    logger.warning("event from another account ignored", extra={"event_account": event_account})
    why = f"event from account {event_account}" + (
        ", not a member of this guard's organization" if organization else ""
    )
    receipt = Receipt(job=job, event_id=event_id, ignored=why)
    count_outcomes(receipt)
    metrics.add_metric(name=contract.Metric.EVENTS_FROM_OTHER_ACCOUNTS, unit=MetricUnit.Count, value=1)
    return receipt


def count_outcomes(receipt: Receipt) -> None:
    metrics.add_metric(name=contract.Metric.EVENTS_HANDLED, unit=MetricUnit.Count, value=1)
    if receipt.unrecorded:
        logger.error("acted on but not recorded in the ledger", extra={"transitions": receipt.unrecorded})
        metrics.add_metric(
            name=contract.Metric.UNRECORDED_TRANSITIONS, unit=MetricUnit.Count, value=len(receipt.unrecorded)
        )
    for outcome in receipt.outcomes:
        metrics.add_metric(name=f"{contract.OUTCOME_METRIC_PREFIX}{outcome}", unit=MetricUnit.Count, value=1)
    if receipt.notifications:
        metrics.add_metric(
            name=contract.Metric.NOTIFICATIONS_PUBLISHED, unit=MetricUnit.Count, value=len(receipt.notifications)
        )
    if receipt.folded:
        # Acted on and recorded, never published: what a person searching the logs for a missing message finds.
        logger.info(
            "folded into the guard's stop of the job, not announced",
            extra={"training_job": receipt.job, "transitions": receipt.folded},
        )
        metrics.add_metric(name=contract.Metric.NOTIFICATIONS_FOLDED, unit=MetricUnit.Count, value=len(receipt.folded))
    if receipt.duplicates:
        metrics.add_metric(name=contract.Metric.DUPLICATE_TRANSITIONS, unit=MetricUnit.Count, value=receipt.duplicates)
    if receipt.price_problems:
        # The notifications went out with their spend unknown where a price was missing; this says why.
        logger.warning("price lookup problems", extra={"problems": receipt.price_problems})
    if receipt.card_problems:
        # Slack app mode: the job's card still shows the stop, not the job's end (nothing else is lost).
        logger.warning("job card not updated", extra={"training_job": receipt.job, "problems": receipt.card_problems})
