"""The scheduled sweep: what events alone cannot guarantee.

Every few minutes, over the jobs running now:
1. **Orphaned per-job alarms** (a missed end event must not leave an alarm billing forever) are
   deleted: any `training-guard-job-<job>-...` alarm whose job is not running. The alarms are
   listed *before* the jobs, so a job that starts between the two reads keeps its new alarm.
2. **Reconciliation**: each running job is re-read with `DescribeTrainingJob` and put through the
   same idempotent path as an event, so a finding whose event was lost is still acted on (and a
   handled one is a no-op: its transition key is already done).
3. **Alarms still firing**: a contributor (or per-job alarm) that *stays* in ALARM sends no further
   event, so a stop deferred by `min_training_minutes` would never happen. Every fleet guard's
   contributors in ALARM (`DescribeAlarmContributors`) and every per-job alarm in ALARM go through
   the alarm path again: after the grace period the stop happens; anything handled is a no-op.
4. **Stalls**: a job in the secondary status Training for longer than `stall.minutes` that published
   no datapoint of *any* of its declared metrics in that window. Counted from when it last entered
   Training (not from TrainingStartTime, which includes the data download). A job that never
   published anything is reported, never stopped: its metric definitions may simply not match its
   logs. Two batched `GetMetricData` reads per 500 series, not one call per job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import TypeVar

from training_guard import contract, metric_guards, policy
from training_guard.config import Action, GuardConfig
from training_guard.errors import GuardError, TransitionBusy
from training_guard.events import TRAINING, Finding, JobEvent, TrainingJob
from training_guard.metric_guards import AlarmObservation
from training_guard.ports import AlarmsPort, JobsPort, TrainingMetricsPort
from training_guard.responder import Receipt, Responder

SWEEP_SOURCE = "training-guard.sweeper"
# How far back "did it ever publish" looks: SageMaker's longest training run (MaxRuntimeInSeconds,
# 28 days), read at an hourly period (CloudWatch keeps 1-minute data for 15 days only).
EVER_PUBLISHED_LOOKBACK = timedelta(days=28)
EVER_PUBLISHED_PERIOD_SECONDS = 3600
_T = TypeVar("_T")
STALL = "stall"  # the finding of a job that published and then went quiet
NO_METRICS = "no-metrics"  # the finding of a job that never published any declared metric


@dataclass
class SweepReport:
    running: int = 0
    orphaned_alarms_deleted: list[str] = field(default_factory=list)
    reconciled: list[dict[str, object]] = field(default_factory=list)  # receipts that did something (folded too)
    stalled: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # job -> why it could not be swept
    # Another attempt (an event's invocation) holds the transition: the next sweep looks again.
    busy: list[str] = field(default_factory=list)


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
    def __init__(self, responder: Responder, jobs: JobsPort, alarms: AlarmsPort, metrics: TrainingMetricsPort) -> None:
        self.responder = responder
        self.jobs = jobs
        self.alarms = alarms
        self.metrics = metrics

    @property
    def config(self) -> GuardConfig:
        return self.responder.config

    def sweep(self, *, now: datetime, account: str | None, region: str | None) -> SweepReport:
        report = SweepReport()
        # Alarms before jobs: an alarm listed here belongs to a job that was running when the alarm
        # was made, so a job that starts after this read cannot lose its brand-new alarm below.
        alarm_names = self.alarms.job_alarm_names()
        running = self.jobs.running()
        report.running = len(running)
        running_set = set(running)
        orphans = [n for n in alarm_names if job_of_alarm(n) not in running_set]
        if orphans:
            self.alarms.delete_alarms(orphans)
            report.orphaned_alarms_deleted = orphans
        still_running: dict[str, TrainingJob] = {}
        for name in running:
            reconciled = self._guarded(report, name, partial(self._reconcile, name, now, account, region))
            if reconciled is not None and not self._note(report, reconciled[1]).stopped:
                still_running[name] = reconciled[0]
        for alarm in self._firing(report, still_running):
            observed = replace(alarm, event_id=f"sweep-{now:%Y%m%dT%H%M%S}", account=account, region=region)
            receipt = self._guarded(report, alarm.job or "", partial(self.responder.handle_alarm, observed, now=now))
            if receipt is not None and self._note(report, receipt).stopped:
                still_running.pop(alarm.job or "", None)
        if self.config.stall is not None:
            report.stalled = self._stalls(report, list(still_running.values()), now=now, account=account, region=region)
        if report.failed:
            raise SweepIncomplete(report)
        return report

    @staticmethod
    def _guarded(report: SweepReport, job: str, step: Callable[[], _T]) -> _T | None:
        """One job's step; its failure (a throttled call, a bad record) must not keep the others unswept."""
        try:
            return step()
        except TransitionBusy:
            report.busy.append(job)  # an event's invocation is on it: the next sweep looks again
        except GuardError as exc:
            report.failed[job] = str(exc)
        return None

    @staticmethod
    def _note(report: SweepReport, receipt: Receipt) -> Receipt:
        if receipt.notifications or receipt.folded or receipt.alarms_created:
            report.reconciled.append(receipt.as_dict())
        return receipt

    def _firing(self, report: SweepReport, running: dict[str, TrainingJob]) -> list[AlarmObservation]:
        """Per-job alarms and stopping fleet guards' contributors in ALARM now, for jobs still running,
        once per (alarm, job) (an instance-metric guard has a contributor per host). A notify-only guard
        is not re-read: its event said all there was to say, and nothing of it waits on a grace period."""
        firing = (
            (self._guarded(report, "per-job alarms", self.alarms.firing_job_alarms) or [])
            if (self.config.per_job_alarms)
            else []
        )
        for guard in self.config.metric_guards:
            if guard.action is Action.STOP:
                name = metric_guards.fleet_alarm_name(guard)
                firing += self._guarded(report, f"alarm {name}", partial(self.alarms.firing_contributors, name)) or []
        once = {(alarm.alarm_name, alarm.job): alarm for alarm in firing if alarm.job in running}
        return list(once.values())

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
        return replace(job, tags=self.jobs.tags(job.arn), tags_known=True) if job.arn else job

    def _reconcile(
        self, name: str, now: datetime, account: str | None, region: str | None
    ) -> tuple[TrainingJob, Receipt] | None:
        job = self.jobs.describe(name)
        if job is None:
            return None
        # DescribeTrainingJob carries no tags: the responder reads them when a decision may turn on them.
        return job, self.responder.handle(self._event(job, now, account, region), now=now)

    def _stalls(
        self, report: SweepReport, jobs: list[TrainingJob], *, now: datetime, account: str | None, region: str | None
    ) -> list[str]:
        stall = self.config.stall
        assert stall is not None
        window = timedelta(minutes=stall.minutes)
        since = {j.name: start for j in jobs if j.metric_names and (start := training_since(j)) is not None}
        candidates = [j for j in jobs if j.name in since and now - since[j.name] >= window]
        if not candidates:
            return []
        recent = self._guarded(
            report,
            "stall check",
            partial(self.metrics.jobs_with_datapoints, series(candidates), since=now - window, until=now),
        )
        quiet = [j for j in candidates if recent is not None and j.name not in recent]
        if not quiet:
            return []
        published_before = self._guarded(
            report,
            "stall check",
            partial(
                self.metrics.jobs_with_datapoints,
                series(quiet),
                since=max(min(since[j.name] for j in quiet), now - EVER_PUBLISHED_LOOKBACK),
                until=now - window,
                period_seconds=EVER_PUBLISHED_PERIOD_SECONDS,
            ),
        )
        if published_before is None:
            return []
        stalled: list[str] = []
        for job in quiet:
            names = ", ".join(job.metric_names)
            if job.name in published_before:
                finding = Finding(
                    name=STALL,
                    source=policy.METRIC,
                    status=policy.STALLED,
                    details=f"no datapoint of {names} in the last {stall.minutes} min",
                )
                action, setting = stall.action, f"stall.minutes = {stall.minutes} -> {stall.action.value}"
            else:
                trained = int((now - since[job.name]).total_seconds() // 60)
                finding = Finding(
                    name=NO_METRICS,
                    source=policy.METRIC,
                    status=policy.STALLED,
                    details=f"no datapoint of {names} in {trained} min of training: "
                    "do its MetricDefinitions match its logs?",
                )
                # Never stopped for this: a stall needs a job that published, then went quiet.
                action = Action.NOTIFY
                setting = f"stall.minutes = {stall.minutes}: never published, so notify only"
            step = partial(self._stall, job, finding, action, setting, now=now, account=account, region=region)
            stalled += self._guarded(report, job.name, step) or []
        return stalled

    def _stall(
        self,
        quiet: TrainingJob,
        finding: Finding,
        action: Action,
        setting: str,
        *,
        now: datetime,
        account: str | None,
        region: str | None,
    ) -> list[str]:
        job = self._with_tags(quiet)
        receipt = Receipt(job=job.name, event_id="")
        event = self._event(job, now, account, region)
        for decision in policy.decide_metric(job, finding, action, setting, self.config, now=now):
            self.responder.react(event, job, decision, receipt, now)  # busy or failing: see _guarded
        # A stall folded into the guard's stop of the job was still found (and recorded) by this sweep.
        return [job.name] if receipt.notifications or receipt.folded else []


def training_since(job: TrainingJob) -> datetime | None:
    """When the job began its current training phase, or None when it is not training now (starting,
    downloading, uploading publish no training metrics)."""
    if job.secondary_status != TRAINING:
        return None
    return job.training_phase_start or job.training_start_time


def series(jobs: list[TrainingJob]) -> list[tuple[str, str]]:
    """Every declared metric of every job: a job is alive if any of them moves."""
    return [(job.name, metric) for job in jobs for metric in job.metric_names]
