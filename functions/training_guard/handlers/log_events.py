"""Log-events Lambda: a log delivery, Firehose's member deliveries or the stall check in (docs/design/log-path.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from training_guard import contract
from training_guard.adapters import clock
from training_guard.adapters.receipts import count_outcomes, ignore_other_account, reject
from training_guard.adapters.sqs import DeadLetterParker
from training_guard.domain.accounts import accepts
from training_guard.domain.errors import GuardError
from training_guard.domain.events import EventError
from training_guard.handlers import wiring
from training_guard.services.log_watch import (
    Delivery,
    DeliveryUnfinished,
    Invocation,
    LogWatch,
    decode,
    decode_data,
    firehose_records,
    is_firehose,
    is_scheduled,
)
from training_guard.services.responder import MemberAccessPort, responder_in

logger = Logger()
metrics = Metrics(namespace=contract.GUARD_METRICS_NAMESPACE)


@metrics.log_metrics
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, object]:
    root = wiring.root()
    invocation = Invocation(wiring.account_of(context), wiring.region_of(context), wiring.time_left(context))
    return process(
        event, root.log_watch_for(context), invocation=invocation, dead_letters=root.parker, members=root.members
    )


def process(
    event: Any,
    watch: LogWatch,
    *,
    invocation: Invocation,
    now: datetime | None = None,
    dead_letters: DeadLetterParker | None = None,
    members: MemberAccessPort | None = None,
) -> dict[str, object]:
    """Decode, one service call, a log line and metrics. An unusable delivery is parked with its reason."""
    now = now or clock.utcnow()
    if is_scheduled(event):
        return check_stalls(watch, invocation=invocation, now=now, members=members)
    if is_firehose(event):
        return process_firehose(
            event, watch, invocation=invocation, now=now, dead_letters=dead_letters, members=members
        )
    try:
        delivery = decode(event)
    except EventError as exc:
        return reject(event, exc, dead_letters).as_dict()
    return _deliver(delivery, watch, invocation=invocation, now=now, members=members)


class MemberStallsUnchecked(GuardError):
    """Members whose jobs the stall check could not ask: the others were checked; Lambda's retry asks again."""


def check_stalls(
    watch: LogWatch, *, invocation: Invocation, now: datetime, members: MemberAccessPort | None = None
) -> dict[str, object]:
    """The hub's running jobs, then each member's through its role; a member that fails fails the invocation last."""
    report = watch.check_stalls(now=now, invocation=invocation)
    logger.info("log stall check done", extra={"report": report.as_dict()})
    if report.findings is not None:
        count_outcomes(report.findings)
    answer = report.as_dict()
    organization = watch.responder.config.organization
    if organization is None or not watch.rules.enabled:
        return answer
    by_member: dict[str, object] = {}
    failed: list[str] = []
    for account in organization.members:
        if account == invocation.account:
            continue
        try:
            guard = responder_in(watch.responder, invocation.account, account, members)
            member = watch.check_stalls(now=now, invocation=invocation, guard=guard, account=account)
        except Exception as exc:  # noqa: BLE001 - one member's refusal must leave the others checked; raised below
            logger.warning("log stall check: account not checked", extra={"account": account, "reason": str(exc)})
            failed.append(account)
            continue
        logger.info("log stall check done", extra={"account": account, "report": member.as_dict()})
        if member.findings is not None:
            count_outcomes(member.findings)
        by_member[account] = member.as_dict()
    answer["members"] = by_member
    if failed:
        raise MemberStallsUnchecked(f"log stall check: members not checked: {', '.join(failed)}")
    return answer


DROPPED = "Dropped"  # read here, delivered nowhere; with recordId and empty data (docs/design/log-subscription.md)


def process_firehose(
    event: Any,
    watch: LogWatch,
    *,
    invocation: Invocation,
    now: datetime,
    dead_letters: DeadLetterParker | None = None,
    members: MemberAccessPort | None = None,
) -> dict[str, object]:
    """Each record's member deliveries folded as direct ones, then Dropped; one left unfinished fails the batch."""
    try:
        records = firehose_records(event)
    except EventError as exc:
        return reject(event, exc, dead_letters).as_dict()
    answers: list[dict[str, str]] = []
    for record_id, data in records:
        try:
            deliveries = decode_data(data, where=f"record {record_id}")
        except EventError as exc:
            reject({"recordId": record_id, "data": data}, exc, dead_letters)
        else:
            for delivery in deliveries:
                _deliver(delivery, watch, invocation=invocation, now=now, members=members)
        answers.append({"recordId": record_id, "result": DROPPED, "data": ""})
    return {"records": answers}


def _deliver(
    delivery: Delivery,
    watch: LogWatch,
    *,
    invocation: Invocation,
    now: datetime,
    members: MemberAccessPort | None,
) -> dict[str, object]:
    logger.append_keys(training_job=delivery.job, log_stream=delivery.stream, account=delivery.owner)
    guard = watch.responder
    # A control message carries no account's logs (its owner is CloudWatch Logs itself): the service ignores it.
    if not delivery.control and not accepts(guard.config, invocation.account, delivery.owner):
        organization = guard.config.organization is not None
        job = delivery.job or ""
        return ignore_other_account(job, delivery.event_id, delivery.owner, organization=organization).as_dict()
    guard = responder_in(guard, invocation.account, delivery.owner, members)
    try:
        receipt = watch.deliver(delivery, now=now, invocation=invocation, guard=guard)
    except DeliveryUnfinished as exc:
        logger.warning("log delivery unfinished: left to the retry", extra={"reason": str(exc)})
        metrics.add_metric(name=contract.Metric.LOG_DELIVERIES_UNFINISHED, unit=MetricUnit.Count, value=1)
        raise
    logger.info("log delivery handled", extra={"receipt": receipt.as_dict()})
    if receipt.problems:
        metrics.add_metric(name=contract.Metric.LOG_RULE_PROBLEMS, unit=MetricUnit.Count, value=len(receipt.problems))
    if receipt.findings is not None:
        count_outcomes(receipt.findings)
    return receipt.as_dict()
