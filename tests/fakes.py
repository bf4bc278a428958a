"""In-memory fakes of the responder's ports, with the same semantics as the AWS adapters."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import TrainingJob
from training_guard.domain.metric_guards import AlarmObservation, FleetAlarmState, JobAlarmSpec
from training_guard.domain.pricing import PriceQuote
from training_guard.render.messages import Notification
from training_guard.services.ports import Claim, StopClaim, StopRecord, StopSpend


@dataclass
class FakeJobs:
    jobs: dict[str, TrainingJob] = field(default_factory=dict)
    stop_calls: list[str] = field(default_factory=list)
    describe_calls: list[str] = field(default_factory=list)
    tags_by_arn: dict[str, dict[str, str]] = field(default_factory=dict)
    fail_stop: BaseException | None = None
    fail_tag: BaseException | None = None

    def describe(self, name: str) -> TrainingJob | None:
        self.describe_calls.append(name)
        return self.jobs.get(name)

    def stop(self, name: str) -> bool:
        if self.fail_stop:
            raise self.fail_stop
        self.stop_calls.append(name)
        job = self.jobs.get(name)
        if job is None or job.status != "InProgress":
            return False
        self.jobs[name] = replace(job, status="Stopping")
        return True

    def tags(self, arn: str) -> dict[str, str]:
        return dict(self.tags_by_arn.get(arn, {}))

    def running(self) -> list[str]:
        return [name for name, job in self.jobs.items() if job.status == "InProgress"]

    def tag(self, arn: str, tags: Mapping[str, str]) -> None:
        if self.fail_tag:
            raise self.fail_tag
        self.tags_by_arn.setdefault(arn, {}).update(tags)


@dataclass
class FakeLedger:
    items: dict[str, dict[str, object]] = field(default_factory=dict)
    stops: dict[str, StopRecord] = field(default_factory=dict)
    # The stop's one write checks the job's mutes' marker (DynamoDB: in its own condition): FakeMutes.in_force.
    mutes_in_force: Callable[[str, datetime], bool] | None = None
    first_stops: int = 0

    def claim(self, key: str, *, now: datetime, lease_seconds: int) -> Claim:
        item = self.items.get(key)
        epoch = int(now.timestamp())
        if item is not None and item["state"] == "done":
            return Claim.DONE
        if item is not None and not float(str(item["lease_until"])) < epoch:
            return Claim.BUSY
        self.items[key] = {"state": "in_progress", "lease_until": epoch + lease_seconds}
        return Claim.GRANTED

    def complete(self, key: str, *, now: datetime, ttl_seconds: int, outcome: str) -> None:
        self.items[key] = {"state": "done", "outcome": outcome, "expires_at": now.timestamp() + ttl_seconds}

    def release(self, key: str) -> None:
        if self.items.get(key, {}).get("state") == "in_progress":
            del self.items[key]

    def claim_stop(self, record: StopRecord, *, ttl_seconds: int) -> StopClaim:
        previous = self.stops.get(record.job)
        if previous is not None:  # kept whole: granted to a retry of the same rule's stop only
            same = previous.rule == record.rule
            busy = same and (previous.lease_until or 0) > int(record.at.timestamp())
            return StopClaim(granted=same and not busy, previous=previous, busy=busy)
        self.stops[record.job] = record
        return StopClaim(granted=True, previous=None)

    def claim_first_stop(
        self, record: StopRecord, *, now: datetime, lease_seconds: int, ttl_seconds: int, check_mutes: bool
    ) -> bool:
        self.first_stops += 1
        if record.job in self.stops:
            return False
        if check_mutes and self.mutes_in_force is not None and self.mutes_in_force(record.job, now):
            return False
        self.stops[record.job] = replace(record, lease_until=int(now.timestamp()) + lease_seconds)
        return True

    def release_stop_lease(self, job: str) -> None:
        if job in self.stops:
            self.stops[job] = replace(self.stops[job], lease_until=None)

    def get_stop(self, job: str) -> StopRecord | None:
        return self.stops.get(job)

    def drop_stop(self, job: str) -> None:
        self.stops.pop(job, None)

    def confirm_stop(self, job: str) -> None:
        if job not in self.stops:  # DynamoDB refuses the conditional update
            raise ActionFailed(f"confirm stop of {job}", RuntimeError("ConditionalCheckFailedException"))
        self.stops[job] = replace(self.stops[job], confirmed=True)

    def fold(self, job: str, key: str) -> bool:
        record = self.stops.get(job)
        if record is None or not record.confirmed:
            return False
        self.stops[job] = replace(record, folded=tuple(sorted({*record.folded, key})))
        return True

    def record_stop_spend(self, job: str, spend: StopSpend) -> None:
        if job not in self.stops:  # DynamoDB refuses the conditional update
            raise ActionFailed(
                f"record the spend of the stop of {job}", RuntimeError("ConditionalCheckFailedException")
            )
        self.stops[job] = replace(self.stops[job], spend=spend)


@dataclass
class FakePublisher:
    published: list[Notification] = field(default_factory=list)
    fail: BaseException | None = None

    def publish(self, notification: Notification) -> None:
        if self.fail:
            raise self.fail
        self.published.append(notification)


@dataclass
class FakeAlarms:
    """The guard's alarms: per-job alarms by name, and what is firing now."""

    names: list[str] = field(default_factory=list)
    put: list[JobAlarmSpec] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    firing_jobs: list[AlarmObservation] = field(default_factory=list)
    contributors: dict[str, list[AlarmObservation]] = field(default_factory=dict)  # fleet alarm -> in ALARM
    fleet_states: dict[str, FleetAlarmState] = field(default_factory=dict)  # fleet alarm -> DescribeAlarms

    def put_job_alarm(self, spec: JobAlarmSpec) -> None:
        self.put.append(spec)
        self.names.append(spec.alarm_name)

    def job_alarm_names(self, job: str | None = None) -> list[str]:
        return list(self.names)

    def delete_alarms(self, names: Sequence[str]) -> None:
        self.deleted += names
        self.names = [n for n in self.names if n not in names]

    def firing_job_alarms(self) -> list[AlarmObservation]:
        return list(self.firing_jobs)

    def firing_contributors(self, alarm_name: str) -> list[AlarmObservation]:
        return list(self.contributors.get(alarm_name, []))

    def fleet_alarm_states(self, names: Sequence[str]) -> dict[str, FleetAlarmState]:
        return {n: self.fleet_states[n] for n in names if n in self.fleet_states}


@dataclass
class FakeTrainingMetrics:
    """Datapoint reads, recorded; `publishing` names the jobs that have datapoints in any window, `host_points` the
    instance metric's one-minute averages per host."""

    publishing: set[str] = field(default_factory=set)
    reads: list[tuple[list[tuple[str, str]], datetime, datetime, int]] = field(default_factory=list)
    host_points: dict[str, list[tuple[datetime, float]]] = field(default_factory=dict)  # host -> 1-minute averages
    host_reads: list[tuple[list[str], str, datetime, datetime]] = field(default_factory=list)
    # series_values: (dimension value, metric) -> one-minute datapoints; every read recorded
    series_points: dict[tuple[str, str], list[tuple[datetime, float]]] = field(default_factory=dict)
    series_reads: list[tuple[str, list[str], str, str]] = field(default_factory=list)

    def jobs_with_datapoints(
        self, series: Iterable[tuple[str, str]], *, since: datetime, until: datetime, period_seconds: int = 60
    ) -> set[str]:
        asked = list(series)
        self.reads.append((asked, since, until, period_seconds))
        return {job for job, _ in asked if job in self.publishing}

    def host_averages(
        self, hosts: Sequence[str], *, metric: str, since: datetime, until: datetime
    ) -> dict[str, list[tuple[datetime, float]]]:
        """`host_points`' datapoints of the hosts asked, within [since, until), as CloudWatch returns them."""
        self.host_reads.append((list(hosts), metric, since, until))
        found = {h: [(t, v) for t, v in self.host_points.get(h, []) if since <= t < until] for h in hosts}
        return {h: points for h, points in found.items() if points}

    def series_values(
        self, dimension: str, values: Sequence[str], *, metric: str, statistic: str, since: datetime, until: datetime
    ) -> dict[str, list[tuple[datetime, float]]]:
        self.series_reads.append((dimension, list(values), metric, statistic))
        found = {v: [(t, x) for t, x in self.series_points.get((v, metric), []) if since <= t < until] for v in values}
        return {v: points for v, points in found.items() if points}


@dataclass
class FakePrices:
    """List prices by (region, type); every lookup recorded, with what happened before it (`events`, shared with
    a FakeJobs' calls when the test wants the order). `fail` raises as an unexpected error would."""

    quotes: dict[tuple[str, str], PriceQuote] = field(default_factory=dict)
    asked: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    fail: BaseException | None = None

    def prices(self, region: str, instance_types: tuple[str, ...], *, now: datetime) -> dict[str, PriceQuote | None]:
        self.asked.append((region, instance_types))
        if self.fail:
            raise self.fail
        return {t: self.quotes.get((region, t)) for t in instance_types}

    def take_problems(self) -> list[str]:
        problems, self.problems = self.problems, []
        return problems


@dataclass
class FakeMeter:
    spend_avoided_usd: list[tuple[str, float]] = field(default_factory=list)

    def spend_avoided(self, rule: str, usd: float) -> None:
        self.spend_avoided_usd.append((rule, usd))
