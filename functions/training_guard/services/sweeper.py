"""The scheduled sweep: what events alone cannot guarantee, in one account or an organization.

The steps and their order: docs/design/sweeps.md."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Protocol, TypeVar

from training_guard import contract
from training_guard.config.model import Action, GuardConfig, IdleGpuGuard, MetricGuard
from training_guard.domain import metric_guards, policy, pricing
from training_guard.domain.errors import GuardError, TransitionBusy
from training_guard.domain.events import TRAINING, Finding, JobEvent, TrainingJob
from training_guard.domain.metric_guards import AlarmObservation
from training_guard.domain.policy import Decision, Kind
from training_guard.domain.pricing import Spend
from training_guard.services.ports import AlarmsPort, JobsPort, TrainingMetricsPort
from training_guard.services.responder import Receipt, Responder

SWEEP_SOURCE = "training-guard.sweeper"
# SageMaker's longest run (MaxRuntimeInSeconds, 28 days), hourly: CloudWatch keeps 1-minute data 15 days only.
EVER_PUBLISHED_LOOKBACK = timedelta(days=28)
EVER_PUBLISHED_PERIOD_SECONDS = 3600
_T = TypeVar("_T")
STALL = "stall"  # the finding of a job that published and then went quiet
NO_METRICS = "no-metrics"  # the finding of a job that never published any declared metric
GPU_METRIC = "GPUUtilization"  # per host (`Host` = <job>/algo-<n>), 0 to 100 x the host's GPU count
# Slack so that minutes not yet published do not break a run of idle minutes (a choice, not an AWS figure).
IDLE_READ_MARGIN = timedelta(minutes=5)
# A choice: a member sweep killed by the timeout hides what the others found; one not started goes first later.
ACCOUNT_SWEEP_RESERVE_SECONDS = 30.0


class MemberSweepersPort(Protocol):
    def sweeper_for(self, base: Sweeper, account: str) -> Sweeper:
        """`base` sweeping `account`. Raises GuardError when AssumeRole is refused, NotAMember for an unknown one."""
        ...


@dataclass
class SweepReport:
    account: str | None = None
    running: int = 0
    orphaned_alarms_deleted: list[str] = field(default_factory=list)
    reconciled: list[dict[str, object]] = field(default_factory=list)  # receipts that did something (folded too)
    stalled: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    busy: list[str] = field(default_factory=list)
    budget_warnings: list[str] = field(default_factory=list)
    over_budget: list[str] = field(default_factory=list)
    idle_gpus: list[str] = field(default_factory=list)
    not_judged: dict[str, str] = field(default_factory=dict)
    price_problems: list[str] = field(default_factory=list)
    # Fleet guards over a CloudWatch cap, and which: this sweep judged their jobs.
    fleet_alarms_over_cap: dict[str, str] = field(default_factory=dict)


class SweepIncomplete(GuardError):
    """Some jobs could not be swept; the others were. Raised after the sweep so the error alarm fires."""

    def __init__(self, report: SweepReport) -> None:
        self.report = report
        shown = "; ".join(f"{job}: {why}" for job, why in list(report.failed.items())[:5])
        where = f" in account {report.account}" if report.account else ""
        super().__init__(f"{len(report.failed)} of {report.running} running job(s){where} not swept ({shown})")


@dataclass
class OrganizationSweepReport:
    accounts: dict[str, SweepReport] = field(default_factory=dict)
    # Jobs not swept: the account's report is in `accounts` too.
    failed: dict[str, str] = field(default_factory=dict)
    deferred: list[str] = field(default_factory=list)  # members not started for want of time: a later sweep's

    @property
    def reports(self) -> list[SweepReport]:
        return list(self.accounts.values())

    @property
    def not_swept(self) -> list[str]:
        return [a for a in self.failed if a not in self.accounts] + self.deferred

    def as_dict(self) -> dict[str, object]:
        return {
            "accounts": {account: asdict(report) for account, report in self.accounts.items()},
            "failed": dict(self.failed),
            "deferred": list(self.deferred),
        }


class OrganizationSweepIncomplete(GuardError):
    """Some accounts were not (completely) swept; every other account was. Raised after the last account."""

    def __init__(self, report: OrganizationSweepReport) -> None:
        self.report = report
        parts = [f"{account}: {why}" for account, why in list(report.failed.items())[:5]]
        if report.deferred:
            parts.append(f"not started for want of time: {', '.join(report.deferred)}")
        swept = len(report.accounts) - len([a for a in report.failed if a in report.accounts])
        total = swept + len(report.failed) + len(report.deferred)
        super().__init__(f"{total - swept} of {total} account(s) not completely swept ({'; '.join(parts)})")


def member_order(members: tuple[str, ...], now: datetime, sweep_minutes: int) -> list[str]:
    """The configured members, turned by one every sweep so that one left out comes early in a later one."""
    if not members:
        return []
    turn = int(now.timestamp() // (sweep_minutes * 60)) % len(members)
    return [*members[turn:], *members[:turn]]


def job_of_alarm(name: str) -> str:
    """`training-guard-job-<job>-<8 hex>` -> `<job>`."""
    return name.removeprefix(contract.JOB_ALARM_PREFIX)[:-9]


class Sweeper:
    def __init__(
        self,
        responder: Responder,
        jobs: JobsPort,
        alarms: AlarmsPort,
        metrics: TrainingMetricsPort,
        *,
        said: set[str] | None = None,
    ) -> None:
        self.responder = responder
        self.jobs = jobs
        self.alarms = alarms
        self.metrics = metrics
        # Spares the ledger's writes; keys name jobs, not accounts, so a hub keeps one set per member (`said_in`).
        self._said: set[str] = set() if said is None else said
        self._said_in: dict[str, set[str]] = {}

    @property
    def config(self) -> GuardConfig:
        return self.responder.config

    def said_in(self, account: str) -> set[str]:
        return self._said_in.setdefault(account, set())

    def sweep_organization(
        self,
        members: MemberSweepersPort,
        *,
        now: datetime,
        account: str | None,
        region: str | None,
        time_left: Callable[[], float] = lambda: math.inf,
    ) -> OrganizationSweepReport:
        """The hub, then every member. Raises `OrganizationSweepIncomplete` at the end if any was not fully swept."""
        organization = self.config.organization
        if organization is None:
            raise ValueError("sweep_organization needs the configuration's organization section")
        report = OrganizationSweepReport()
        hub = account or organization.hub_account
        longest = 0.0
        for swept in [hub, *member_order(organization.members, now, self.config.sweep_minutes)]:
            started = time_left()
            if swept != hub and started < max(ACCOUNT_SWEEP_RESERVE_SECONDS, 2 * longest):
                report.deferred.append(swept)
                continue
            try:
                sweeper = self if swept == hub else members.sweeper_for(self, swept)
                where = (region or organization.region) if swept == hub else organization.region
                report.accounts[swept] = sweeper.sweep(now=now, account=swept, region=where)
            except SweepIncomplete as incomplete:
                report.accounts[swept] = incomplete.report
                report.failed[swept] = str(incomplete)
            except Exception as exc:  # noqa: BLE001 - one account's failure must leave the others swept; raised below
                report.failed[swept] = str(exc) if isinstance(exc, GuardError) else f"{type(exc).__name__}: {exc}"
            if math.isfinite(started):
                longest = max(longest, started - time_left())
        if report.failed or report.deferred:
            raise OrganizationSweepIncomplete(report)
        return report

    def acting(self, responder: Responder) -> Sweeper:
        sweeper = Sweeper(responder, self.jobs, self.alarms, self.metrics, said=self._said)
        sweeper._said_in = self._said_in
        return sweeper

    def sweep(self, *, now: datetime, account: str | None, region: str | None) -> SweepReport:
        # This sweep's own responder: each job's mutes read once for all its steps, forgotten with the sweep.
        return self.acting(self.responder.acting(mutes_memo={}))._sweep(now=now, account=account, region=region)

    def _sweep(self, *, now: datetime, account: str | None, region: str | None) -> SweepReport:
        report = SweepReport(account=account)
        # Alarms before jobs: a job that starts after this read keeps its brand-new alarm.
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
        for alarm in self._firing(report, still_running, now):
            observed = replace(alarm, event_id=f"sweep-{now:%Y%m%dT%H%M%S}", account=account, region=region)
            receipt = self._guarded(report, alarm.job or "", partial(self.responder.handle_alarm, observed, now=now))
            if receipt is not None and self._note(report, receipt).stopped:
                still_running.pop(alarm.job or "", None)
        if self.config.stall is not None:
            report.stalled = self._stalls(report, still_running, now=now, account=account, region=region)
        for job in [j for j in still_running.values() if j.running]:
            if self._guarded(report, job.name, partial(self._budget, report, job, now, account, region)):
                still_running.pop(job.name)  # stopped for its budget: its GPUs are not judged
        if self.config.idle_gpu is not None:
            self._idle_gpus(report, self.config.idle_gpu, still_running, now=now, account=account, region=region)
        if report.failed:
            raise SweepIncomplete(report)
        return report

    @staticmethod
    def _guarded(report: SweepReport, job: str, step: Callable[[], _T]) -> _T | None:
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

    def _firing(self, report: SweepReport, running: dict[str, TrainingJob], now: datetime) -> list[AlarmObservation]:
        """Alarms in ALARM now for running jobs, once per (alarm, job); fleet guards over a cap judged here."""
        firing = (
            (self._guarded(report, "per-job alarms", self.alarms.firing_job_alarms) or [])
            if (self.config.per_job_alarms)
            else []
        )
        guards = self.config.metric_guards
        names = [metric_guards.fleet_alarm_name(g) for g in guards]
        read = partial(self.alarms.fleet_alarm_states, names)
        states = (self._guarded(report, "fleet alarms", read) or {}) if guards else {}
        for guard, name in zip(guards, names, strict=True):
            listed: list[AlarmObservation] | None = None
            if guard.action is Action.STOP:
                listed = self._guarded(report, f"alarm {name}", partial(self.alarms.firing_contributors, name))
                firing += listed or []
            watched = fleet_series(guard, running)
            count = None if listed is None else len(listed)
            why = metric_guards.over_cap(guard, listed=count, state=states.get(name), series=len(watched))
            if why is not None:
                report.fleet_alarms_over_cap[guard.name] = why
                judge = partial(self._judge_fleet_guard, guard, watched, why, now)
                firing += self._guarded(report, f"alarm {name}", judge) or []
        once = {(alarm.alarm_name, alarm.job): alarm for alarm in firing if alarm.job in running}
        return list(once.values())

    def _judge_fleet_guard(
        self, guard: MetricGuard, watched: list[tuple[str, str]], why: str, now: datetime
    ) -> list[AlarmObservation]:
        """The guard's alarm evaluated from GetMetricData: each job breaching `datapoints` of `periods` minutes."""
        if not watched:
            return []
        points = self.metrics.series_values(
            contract.HOST_DIMENSION if guard.instance_metric else contract.JOB_DIMENSION,
            [key for key, _ in watched],
            metric=guard.metric,
            statistic=metric_guards.cloudwatch_statistic(guard),
            since=now - timedelta(minutes=guard.periods) - IDLE_READ_MARGIN,
            until=now,
        )
        breaching: dict[str, int] = {}
        for key, job in watched:
            minutes = metric_guards.breaching_minutes(points.get(key, []), guard)
            if minutes >= guard.datapoints:
                breaching[job] = max(breaching.get(job, 0), minutes)
        return [
            AlarmObservation(
                event_id="",
                account=None,
                region=None,
                time=now,
                alarm_name=metric_guards.fleet_alarm_name(guard),
                state="ALARM",
                reason=(
                    f"judged by the sweeper ({why}): {minutes} of the last {guard.periods} min "
                    f"{guard.statistic}({guard.metric}) {guard.comparison} {guard.threshold:g}"
                ),
                job=job,
                metric=guard.metric,
                contributor=True,
            )
            for job, minutes in breaching.items()
        ]

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
        described = self.jobs.describe(name)
        if described is None:
            return None
        # DescribeTrainingJob carries no tags; read once here for every later step.
        job = self._with_tags(described) if described.running else described
        return job, self.responder.handle(self._event(job, now, account, region), now=now)

    def _act_on(
        self,
        report: SweepReport,
        job: TrainingJob,
        decisions: list[Decision],
        *,
        now: datetime,
        account: str | None,
        region: str | None,
        spend: Spend | None = None,
    ) -> Receipt:
        event = self._event(job, now, account, region)
        receipt = Receipt(job=job.name, event_id=event.event_id)
        try:
            for decision in decisions:
                self.responder.react(event, job, decision, receipt, now, spend=spend)
        finally:
            report.price_problems += receipt.price_problems
        return receipt

    def _say_once(self, report: SweepReport, job: str, key: str, why: str, now: datetime) -> None:
        if key in self._said:
            return
        if self.responder.first_time(key, now):
            report.not_judged[job] = why
        self._said.add(key)

    def _budget(
        self, report: SweepReport, job: TrainingJob, now: datetime, account: str | None, region: str | None
    ) -> bool:
        config = self.config
        if not config.selects(job.name):
            return False
        chosen = config.budget_for(job.name, job.tags)
        problem = config.budget_tag_problem(job.tags)
        if problem is not None:
            instead = f"; {chosen[0]} applies instead" if chosen else "; no budget caps the job"
            bad_tag = policy.budget_tag_problem(job, tag=config.tags.budget_usd, problem=problem + instead)
            self._act_on(report, job, [bad_tag], now=now, account=account, region=region)
        if chosen is None:
            return False
        name, budget, line = chosen
        event = self._event(job, now, account, region)
        priced = Receipt(job=job.name, event_id=event.event_id)
        spend = self.responder.spend(event, job, priced, now)
        report.price_problems += priced.price_problems
        if spend.so_far_usd is None:
            # Unknown is neither $0 nor over budget.
            why = "; ".join(spend.notes) or "its spend so far is unknown"
            key = policy.transition_key(job.name, policy.BUDGET, name, "unpriced")
            self._say_once(report, job.name, key, f"{name} not judged: {why}", now)
            return False
        decisions = policy.decide_budget(
            job,
            name=name,
            budget=budget,
            setting=line,
            spent_usd=spend.so_far_usd,
            config=config,
            now=now,
            mutes=self.responder.mutes_of(job.name),
        )
        if not decisions:
            return False
        receipt = self._act_on(report, job, decisions, now=now, account=account, region=region, spend=spend)
        if receipt.notifications or receipt.folded:
            warned = decisions[0].kind is Kind.BUDGET_WARNING
            (report.budget_warnings if warned else report.over_budget).append(job.name)
        return receipt.stopped

    def _idle_gpus(
        self,
        report: SweepReport,
        guard: IdleGpuGuard,
        running: dict[str, TrainingJob],
        *,
        now: datetime,
        account: str | None,
        region: str | None,
    ) -> None:
        window = timedelta(minutes=guard.minutes)
        candidates: list[tuple[TrainingJob, list[str], int, datetime]] = []
        for job in running.values():
            if not job.running or not self.config.selects(job.name):
                continue
            start = training_since(job)
            judged_from = start + timedelta(minutes=guard.ignore_first_minutes) if start else None
            if judged_from is None or now - judged_from < window:
                continue  # not training now, or not yet `minutes` past its first minutes
            gpus = gpus_per_host(job)
            if isinstance(gpus, str):
                key = policy.transition_key(job.name, policy.METRIC, policy.IDLE_GPU, "unjudged")
                say = partial(self._say_once, report, job.name, key, f"idle_gpu not judged: {gpus}", now)
                self._guarded(report, job.name, say)
            elif gpus is not None:
                candidates.append((job, hosts_of(job), gpus, judged_from))
        if not candidates:
            return
        read = partial(
            self.metrics.host_averages,
            [host for _, hosts, _, _ in candidates for host in hosts],
            metric=GPU_METRIC,
            since=now - window - IDLE_READ_MARGIN,
            until=now,
        )
        averages = self._guarded(report, "idle GPU check", read)
        if averages is None:
            return
        for job, hosts, gpus, judged_from in candidates:
            points = [point for host in hosts for point in averages.get(host, [])]
            minutes, mean = idle_run(points, gpus, guard.threshold_percent, not_before=judged_from)
            if minutes < guard.minutes or mean is None:
                continue
            shown = [h for h in hosts if h in averages]
            details = (
                f"GPU utilisation {mean:.1f} % on average over the last {minutes} min (below "
                f"{guard.threshold_percent} %): {len(shown)} host(s) of {gpus} GPU(s) each, each host's "
                f"{GPU_METRIC} divided by its {gpus}"
            )
            mutes = self._guarded(report, job.name, partial(self.responder.mutes_of, job.name))
            if mutes is None:
                continue
            decisions = policy.decide_idle_gpu(
                job, details=details, guard=guard, config=self.config, now=now, mutes=mutes
            )
            step = partial(self._act_on, report, job, decisions, now=now, account=account, region=region)
            receipt = self._guarded(report, job.name, step)
            if receipt is not None and (receipt.notifications or receipt.folded):
                report.idle_gpus.append(job.name)
            if receipt is not None and receipt.stopped:
                running.pop(job.name, None)

    def _stalls(
        self,
        report: SweepReport,
        running: dict[str, TrainingJob],
        *,
        now: datetime,
        account: str | None,
        region: str | None,
    ) -> list[str]:
        jobs = list(running.values())
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
            mutes = self._guarded(report, job.name, partial(self.responder.mutes_of, job.name))
            if mutes is None:
                continue
            decisions = policy.decide_metric(job, finding, action, setting, self.config, now=now, mutes=mutes)
            step = partial(self._act_on, report, job, decisions, now=now, account=account, region=region)
            receipt = self._guarded(report, job.name, step)
            if receipt is not None and (receipt.notifications or receipt.folded):
                stalled.append(job.name)
            if receipt is not None and receipt.stopped:
                running.pop(job.name, None)
        return stalled


def training_since(job: TrainingJob) -> datetime | None:
    if job.secondary_status != TRAINING:
        return None
    return job.training_phase_start or job.training_start_time


def series(jobs: list[TrainingJob]) -> list[tuple[str, str]]:
    """Every declared metric of every job: a job is alive if any of them moves."""
    return [(job.name, metric) for job in jobs for metric in job.metric_names]


def fleet_series(guard: MetricGuard, running: dict[str, TrainingJob]) -> list[tuple[str, str]]:
    """The (series, job) pairs of a fleet guard's query: hosts for an instance metric, else jobs declaring it."""
    jobs = [j for j in running.values() if j.running and metric_guards.selects(guard, j.name, j.tags)]
    if guard.instance_metric:
        # A job whose instances are unknown still has its first host.
        return [(host, job.name) for job in jobs for host in hosts_of(job) or [f"{job.name}/algo-1"]]
    return [(job.name, job.name) for job in jobs if guard.metric in job.metric_names]


def hosts_of(job: TrainingJob) -> list[str]:
    instances = sum(max(group.count or 1, 1) for group in job.billed_instances)
    return [f"{job.name}/algo-{n}" for n in range(1, instances + 1)]


def gpus_per_host(job: TrainingJob) -> int | str | None:
    """The GPU count of every host; None without GPUs; why not, when unknown or different between groups."""
    types = [group.instance_type for group in job.billed_instances]
    if not any(pricing.has_gpus(t) for t in types):
        return None
    unknown = [t for t in dict.fromkeys(types) if t and pricing.has_gpus(t) and pricing.gpu_count(t) is None]
    if unknown:
        return f"the GPU count of {', '.join(unknown)} is unknown, so its hosts' {GPU_METRIC} cannot be normalised"
    # A heterogeneous cluster's hosts cannot be told apart: "not grouped by instance groups"
    # (https://docs.aws.amazon.com/sagemaker/latest/dg/train-heterogeneous-cluster-configure.html).
    counts = {pricing.gpu_count(t) for t in types}
    if len(counts) > 1:
        listed = ", ".join(f"{t or '?'} ({pricing.gpu_count(t) or 0} GPUs)" for t in dict.fromkeys(types))
        return f"its instance groups have different GPU counts ({listed}); CloudWatch does not say which host is which"
    (count,) = counts
    assert count is not None
    return count


def idle_run(
    points: Iterable[tuple[datetime, float]], gpus: int, threshold_percent: float, *, not_before: datetime
) -> tuple[int, float | None]:
    """(minutes in a row below the threshold up to the latest minute with data, their mean %, None for no run).
    A minute without data, or before `not_before`, ends the run (`points`: 0 to 100 x `gpus`)."""
    by_minute: dict[datetime, list[float]] = {}
    for at, value in points:
        minute = at.replace(second=0, microsecond=0)
        if minute >= not_before and math.isfinite(value):
            by_minute.setdefault(minute, []).append(value / gpus)
    run, total = 0, 0.0
    expected: datetime | None = None
    for minute in sorted(by_minute, reverse=True):
        if expected is not None and minute != expected:
            break
        mean = sum(by_minute[minute]) / len(by_minute[minute])
        if mean >= threshold_percent:
            break
        run, total, expected = run + 1, total + mean, minute - timedelta(minutes=1)
    return run, (total / run if run else None)
