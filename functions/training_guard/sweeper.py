"""The scheduled sweep: what events alone cannot guarantee.

Every few minutes, over the jobs running now:
1. **Orphaned per-job alarms** (a missed end event must not leave an alarm billing forever) are
   deleted: any `training-guard-job-<job>-...` alarm whose job is not running.
2. **Reconciliation**: each running job is re-read with `DescribeTrainingJob` and put through the
   same idempotent path as an event, so a finding whose event was lost is still acted on (and a
   handled one is a no-op: its transition key is already done).
3. **Stalls**: a job that declared metric definitions, has trained longer than `stall.minutes`,
   and published no datapoint in that window is reported (or stopped). One batched
   `GetMetricData` per 500 jobs, not one call per job.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from training_guard import contract, policy
from training_guard.config import GuardConfig
from training_guard.errors import GuardError
from training_guard.events import ISSUES_FOUND, JobEvent, RuleStatus, TrainingJob
from training_guard.ports import AlarmsPort, JobsPort
from training_guard.responder import Receipt, Responder

SWEEP_SOURCE = "training-guard.sweeper"


@dataclass
class SweepReport:
    running: int = 0
    orphaned_alarms_deleted: list[str] = field(default_factory=list)
    reconciled: list[dict[str, object]] = field(default_factory=list)  # receipts that did something
    stalled: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # job -> why it could not be swept


class SweepIncomplete(GuardError):
    """Some jobs could not be swept; the others were. Raised after the sweep so the error alarm fires."""

    def __init__(self, report: SweepReport) -> None:
        self.report = report
        shown = "; ".join(f"{job}: {why}" for job, why in list(report.failed.items())[:5])
        super().__init__(f"{len(report.failed)} of {report.running} running job(s) not swept ({shown})")


def job_of_alarm(name: str) -> str:
    """`training-guard-job-<job>-<8 hex>` -> `<job>`."""
    return name.removeprefix(contract.JOB_ALARM_PREFIX)[:-9]


class Sweeper:
    def __init__(self, responder: Responder, jobs: JobsPort, alarms: AlarmsPort) -> None:
        self.responder = responder
        self.jobs = jobs
        self.alarms = alarms

    @property
    def config(self) -> GuardConfig:
        return self.responder.config

    def sweep(self, *, now: datetime, account: str | None, region: str | None) -> SweepReport:
        report = SweepReport()
        running = self.jobs.running()
        report.running = len(running)
        running_set = set(running)
        orphans = [n for n in self.alarms.job_alarm_names() if job_of_alarm(n) not in running_set]
        if orphans:
            self.alarms.delete_alarms(orphans)
            report.orphaned_alarms_deleted = orphans
        still_running: list[TrainingJob] = []
        for name in running:
            # one job's failure (a throttled call, a bad record) must not keep the others unswept
            try:
                job = self.jobs.describe(name)
                if job is None:
                    continue
                receipt = self._reconcile(job, now=now, account=account, region=region)
            except GuardError as exc:
                report.failed[name] = str(exc)
                continue
            if receipt.notifications or receipt.alarms_created:
                report.reconciled.append(receipt.as_dict())
            if not receipt.stopped:
                still_running.append(job)
        if self.config.stall is not None:
            report.stalled = self._stalls(still_running, now=now, account=account, region=region)
        if report.failed:
            raise SweepIncomplete(report)
        return report

    def _event(self, job: TrainingJob, now: datetime, account: str | None, region: str | None) -> JobEvent:
        return JobEvent(
            event_id=f"sweep-{now:%Y%m%dT%H%M%S}",
            account=account,
            region=region,
            time=now,
            source=SWEEP_SOURCE,
            detail_type="Reconciliation",
            job=job,
        )

    def _with_tags(self, job: TrainingJob) -> TrainingJob:
        return replace(job, tags=self.jobs.tags(job.arn)) if job.arn else job

    def _reconcile(self, job: TrainingJob, *, now: datetime, account: str | None, region: str | None) -> Receipt:
        # Tags (exemptions, per-job guards) are read only for jobs that have something to act on.
        if any(r.status == ISSUES_FOUND for r in job.rules or ()) or self.config.per_job_alarms:
            job = self._with_tags(job)
        return self.responder.handle(self._event(job, now, account, region), now=now)

    def _stalls(self, jobs: list[TrainingJob], *, now: datetime, account: str | None, region: str | None) -> list[str]:
        stall = self.config.stall
        assert stall is not None
        window = timedelta(minutes=stall.minutes)
        candidates = [j for j in jobs if j.metric_names and (j.training_seconds(now) or 0) >= window.total_seconds()]
        if not candidates:
            return []
        seen = self.alarms.jobs_with_datapoints(
            [(j.name, j.metric_names[0]) for j in candidates], since=now - window, until=now
        )
        stalled: list[str] = []
        for quiet in (j for j in candidates if j.name not in seen):
            job = self._with_tags(quiet)
            finding = RuleStatus(
                name="stall",
                kind=policy.METRIC,
                status=policy.STALLED,
                details=f"no datapoint of {job.metric_names[0]} in the last {stall.minutes} min",
            )
            setting = f"stall.minutes = {stall.minutes} -> {stall.action.value}"
            receipt = Receipt(job=job.name, event_id="")
            event = self._event(job, now, account, region)
            for decision in policy.decide_metric(job, finding, stall.action, setting, self.config, now=now):
                self.responder.react(event, job, decision, receipt, now)
            if receipt.notifications:
                stalled.append(job.name)
        return stalled
