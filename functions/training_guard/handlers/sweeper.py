"""Sweeper Lambda, on a schedule: orphaned alarms, reconciliation of lost events, stalled jobs, budgets, idle GPUs.

A hub sweeps its own account, then every member's (docs/design/sweeps.md); the metrics add up the accounts."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from training_guard import contract
from training_guard.adapters import clock
from training_guard.adapters.mutes import DynamoMutes
from training_guard.domain.errors import ActionFailed
from training_guard.handlers import wiring
from training_guard.services.sweeper import (
    MemberSweepersPort,
    OrganizationSweepIncomplete,
    OrganizationSweepReport,
    Sweeper,
    SweepIncomplete,
    SweepReport,
)

logger = Logger()
metrics = Metrics(namespace=contract.GUARD_METRICS_NAMESPACE)

# Accounts of a hub's sweep with no report: failed before the end, or not started for want of time.
ACCOUNTS_NOT_SWEPT_METRIC = "AccountsNotSwept"


@metrics.log_metrics
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    root = wiring.root()
    now = clock.utcnow()
    _mark_mutes_once(root.mutes, now)
    return process(
        root.sweeper_for(context),
        now=now,
        account=wiring.account_of(context),
        region=wiring.region_of(context),
        members=root.members,
        time_left=wiring.time_left(context),
    )


def _mark_mutes_once(mutes: DynamoMutes, now: datetime) -> None:
    try:
        marked = mutes.mark_once(now)
    except ActionFailed as exc:  # the sweep matters more: the next one tries again
        logger.warning("mutes not marked yet", extra={"reason": str(exc)})
        return
    if marked is not None:
        logger.info("mutes marked for the stop's one write", extra={"jobs": marked})


def process(
    sweeper: Sweeper,
    *,
    now: datetime,
    account: str | None,
    region: str | None,
    members: MemberSweepersPort | None = None,
    time_left: Callable[[], float] = lambda: math.inf,
) -> dict[str, Any]:
    """One sweep of this account, or of the hub and each member; raises at the end if anything was not swept."""
    organization = sweeper.config.organization
    if organization is None:
        try:
            report = sweeper.sweep(now=now, account=account, region=region)
        except SweepIncomplete as incomplete:
            logger.error("sweep incomplete", extra={"report": asdict(incomplete.report)})
            metrics.add_metric(
                name=contract.Metric.SWEEP_FAILURES, unit=MetricUnit.Count, value=len(incomplete.report.failed)
            )
            raise
        _said(report)
        logger.info("sweep done", extra={"report": asdict(report)})
        _count([report])
        return asdict(report)
    if members is None:
        raise ValueError("a hub's sweep needs its member access (organization is set)")
    try:
        swept = sweeper.sweep_organization(members, now=now, account=account, region=region, time_left=time_left)
    except OrganizationSweepIncomplete as incomplete:
        _organization(incomplete.report)
        logger.error(
            "sweep incomplete", extra={"failed": incomplete.report.failed, "deferred": incomplete.report.deferred}
        )
        raise
    _organization(swept)
    return swept.as_dict()


def _organization(swept: OrganizationSweepReport) -> None:
    for report in swept.reports:
        _said(report)
        incomplete = report.account in swept.failed
        log = logger.error if incomplete else logger.info
        log(
            "sweep incomplete" if incomplete else "sweep done",
            extra={"account": report.account, "report": asdict(report)},
        )
    for account in swept.not_swept:
        why = swept.failed.get(account, "not started: too little time left in this invocation")
        logger.error("account not swept", extra={"account": account, "reason": why})
    failed_jobs = sum(len(r.failed) for r in swept.reports)
    if failed_jobs:
        metrics.add_metric(name=contract.Metric.SWEEP_FAILURES, unit=MetricUnit.Count, value=failed_jobs)
    if swept.not_swept:
        metrics.add_metric(name=ACCOUNTS_NOT_SWEPT_METRIC, unit=MetricUnit.Count, value=len(swept.not_swept))
    _count(swept.reports)


def _said(report: SweepReport) -> None:
    extra = {"account": report.account}
    if report.not_judged:
        # Said once per job (the ledger remembers): a budget without a price, GPUs whose count is unknown.
        logger.warning("not judged", extra={**extra, "jobs": report.not_judged})
    if report.price_problems:
        logger.warning("price lookup problems", extra={**extra, "problems": report.price_problems})
    if report.fleet_alarms_over_cap:
        # Their jobs were judged by the sweep (every sweep_minutes), not by the alarm's events (every minute).
        logger.warning("fleet alarms over a CloudWatch cap", extra={**extra, "guards": report.fleet_alarms_over_cap})


def _count(reports: list[SweepReport]) -> None:
    """The sweep's metrics summed over the accounts (an account dimension bills a metric per account), counts above zero
    only: a custom metric is billed for the hours it is sent (docs/cost.md), its alarms treat missing data as fine."""
    counts = {
        contract.Metric.RUNNING_JOBS: sum(r.running for r in reports),
        contract.Metric.ORPHANED_ALARMS_DELETED: sum(len(r.orphaned_alarms_deleted) for r in reports),
        contract.Metric.STALLED_JOBS: sum(len(r.stalled) for r in reports),
        contract.Metric.RECONCILED: sum(len(r.reconciled) for r in reports),
        contract.FLEET_ALARMS_OVER_CAP_METRIC: sum(len(r.fleet_alarms_over_cap) for r in reports),
    }
    for name, value in counts.items():
        if value:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
