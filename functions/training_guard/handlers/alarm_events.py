"""Alarm-events Lambda: a metric guard's alarm (or alarm contributor) state change in."""

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
from training_guard.domain.events import EventError
from training_guard.domain.metric_guards import parse_alarm_event
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
    try:
        alarm = parse_alarm_event(event)
    except EventError as exc:
        return reject(event, exc, dead_letters)
    logger.append_keys(alarm=alarm.alarm_name, training_job=alarm.job, alarm_state=alarm.state, account=alarm.account)
    if not accepts(guard.config, account, alarm.account):
        organization = guard.config.organization is not None
        return ignore_other_account(alarm.job or "", alarm.event_id, alarm.account, organization=organization)
    guard = responder_in(guard, account, alarm.account, members)
    receipt = guard.handle_alarm(alarm, now=now or clock.utcnow())
    logger.info("alarm handled", extra={"receipt": receipt.as_dict()})
    count_outcomes(receipt)
    return receipt
