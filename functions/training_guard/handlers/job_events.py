"""Job-events Lambda: one "SageMaker Training Job State Change" event in, one receipt out."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths

from training_guard import contract
from training_guard.adapters import clock
from training_guard.adapters.receipts import count_outcomes, ignore_other_account, reject
from training_guard.adapters.sqs import DeadLetterParker
from training_guard.domain.accounts import accepts
from training_guard.domain.events import EventError, ForeignEvent, parse_event
from training_guard.handlers import wiring
from training_guard.services.responder import MemberAccessPort, Receipt, Responder, responder_in

logger = Logger()
metrics = Metrics(namespace=contract.GUARD_METRICS_NAMESPACE)


@metrics.log_metrics
@logger.inject_lambda_context(correlation_id_path=correlation_paths.EVENT_BRIDGE, clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, object]:
    root = wiring.root()
    guard = root.responder_for(context)
    account = wiring.account_of(context)
    return process(event, guard, account=account, dead_letters=root.parker, members=root.members).as_dict()


def process(
    event: Any,
    guard: Responder,
    *,
    account: str | None,
    now: datetime | None = None,
    dead_letters: DeadLetterParker | None = None,
    members: MemberAccessPort | None = None,
) -> Receipt:
    """Parse, one domain call, a log line, metrics; an unusable event is parked (raised when there is no queue)."""
    try:
        parsed = parse_event(event)
    except ForeignEvent as exc:
        # Only the rule's pattern routes events here; anything else was sent by hand: ignore it.
        logger.warning("foreign event ignored", extra={"reason": str(exc)})
        receipt = Receipt(job="", event_id=str(event.get("id", "")), ignored=str(exc))
        count_outcomes(receipt)
        return receipt
    except EventError as exc:
        return reject(event, exc, dead_letters)
    logger.append_keys(training_job=parsed.job.name, job_status=parsed.job.status, account=parsed.account)
    if not accepts(guard.config, account, parsed.account):
        organization = guard.config.organization is not None
        return ignore_other_account(parsed.job.name, parsed.event_id, parsed.account, organization=organization)
    guard = responder_in(guard, account, parsed.account, members)
    receipt = guard.handle(parsed, now=now or clock.utcnow())
    logger.info("event handled", extra={"receipt": receipt.as_dict()})
    count_outcomes(receipt)
    return receipt
