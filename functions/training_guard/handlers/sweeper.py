"""Sweeper Lambda, on a schedule: orphaned alarms, reconciliation of lost events, stalled jobs, budgets, idle GPUs."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from training_guard import clock, contract
from training_guard.handlers import wiring
from training_guard.sweeper import SweepIncomplete

logger = Logger()
metrics = Metrics(namespace=contract.GUARD_METRICS_NAMESPACE)


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    sweeper = wiring.sweeper()
    sweeper.responder.lease_seconds = wiring.lease(context)
    try:
        report = sweeper.sweep(now=clock.utcnow(), account=wiring.account_of(context), region=wiring.region_of(context))
    except SweepIncomplete as incomplete:
        logger.error("sweep incomplete", extra={"report": asdict(incomplete.report)})
        metrics.add_metric(name="SweepFailures", unit=MetricUnit.Count, value=len(incomplete.report.failed))
        raise
    if report.not_judged:
        # Said once per job (the ledger remembers): a budget without a price, GPUs whose count is unknown.
        logger.warning("not judged", extra={"jobs": report.not_judged})
    if report.price_problems:
        logger.warning("price lookup problems", extra={"problems": report.price_problems})
    logger.info("sweep done", extra={"report": asdict(report)})
    metrics.add_metric(name="RunningJobs", unit=MetricUnit.Count, value=report.running)
    metrics.add_metric(name="OrphanedAlarmsDeleted", unit=MetricUnit.Count, value=len(report.orphaned_alarms_deleted))
    metrics.add_metric(name="StalledJobs", unit=MetricUnit.Count, value=len(report.stalled))
    metrics.add_metric(name="Reconciled", unit=MetricUnit.Count, value=len(report.reconciled))
    return asdict(report)
