"""Metric guards, pure: queries, alarm names, alarm events and the per-job guard tag grammar.

How the alarms reach the guard, and CloudWatch's caps: docs/design/metric-guards.md."""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from training_guard import contract
from training_guard.config import json_words
from training_guard.config.frozen import frozen
from training_guard.config.model import COMPARISONS, Action, MetricGuard
from training_guard.domain.events import EventError, parse_time

# Patterns as text: `re` compiles each on first use (and caches it), not at every cold start.
_HOST = r"^(?P<job>.+)/algo-\d+$"
_ORDER = {">": "DESC", ">=": "DESC", "<": "ASC", "<=": "ASC"}
# Per-job guard tags: "<stat> <above|below|at-or-above|at-or-below> <number> [M/N] [notify|stop]"
_TAG_VALUE = (
    r"(?i)^\s*(?P<stat>avg|min|max|sum)\s+(?P<op>above|below|at-or-above|at-or-below)\s+"
    r"(?P<threshold>[-+]?(\d+(\.\d*)?|\.\d+)(e[-+]?\d+)?)"
    r"(\s+(?P<m>\d+)/(?P<n>\d+))?(\s+(?P<action>notify|stop))?\s*$"
)
_TAG_OPERATORS = {"above": ">", "below": "<", "at-or-above": ">=", "at-or-below": "<="}
_STATISTIC_NAMES = {"AVG": "Average", "MIN": "Minimum", "MAX": "Maximum", "SUM": "Sum", "COUNT": "SampleCount"}
MAX_JOB_ALARMS = 10  # per job: tags beyond this are reported, not alarmed


def fleet_alarm_name(guard: MetricGuard) -> str:
    return f"{contract.ALARM_NAME_PREFIX}{guard.name}"


def insights_query(guard: MetricGuard) -> str:
    group = contract.HOST_DIMENSION if guard.instance_metric else contract.JOB_DIMENSION
    stat = guard.statistic
    # Not injectable: the metric name was validated (letters, digits and _.:/- only; no quotes).
    return (
        f'SELECT {stat}("{guard.metric}") FROM "{contract.SAGEMAKER_TRAINING_NAMESPACE}" '  # noqa: S608
        f"GROUP BY {group} ORDER BY {stat}() {_ORDER[guard.comparison]}"
    )


def job_of_host(host: str) -> str:
    """`<job>/algo-<n>` -> `<job>` (instance metrics name the host, not the job)."""
    match = re.match(_HOST, host)
    return match.group("job") if match else host


def job_of_dimensions(dimensions: Mapping[str, Any]) -> str | None:
    if isinstance(dimensions.get(contract.JOB_DIMENSION), str):
        return str(dimensions[contract.JOB_DIMENSION])
    if isinstance(dimensions.get(contract.HOST_DIMENSION), str):
        return job_of_host(dimensions[contract.HOST_DIMENSION])
    return None


@frozen
class AlarmObservation:
    event_id: str
    account: str | None
    region: str | None
    time: datetime | None
    alarm_name: str
    state: str  # ALARM | OK | INSUFFICIENT_DATA
    reason: str
    job: str | None
    metric: str | None
    contributor: bool

    @property
    def guard_name(self) -> str | None:
        """The fleet guard the alarm belongs to (None for per-job alarms)."""
        if self.alarm_name.startswith(contract.JOB_ALARM_PREFIX):
            return None
        return self.alarm_name.removeprefix(contract.ALARM_NAME_PREFIX)


def parse_alarm_event(event: Any) -> AlarmObservation:
    if not isinstance(event, Mapping):
        raise EventError(f"event must be a JSON object, got {json_words.kind(event)}")
    detail_type = event.get("detail-type")
    if event.get("source") != contract.CLOUDWATCH_EVENT_SOURCE or detail_type not in (
        contract.ALARM_STATE_CHANGE,
        contract.ALARM_CONTRIBUTOR_STATE_CHANGE,
    ):
        raise EventError(f"not an alarm state change (source={event.get('source')!r}, detail-type={detail_type!r})")
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise EventError("event has no 'detail' object")
    name = detail.get("alarmName")
    if not isinstance(name, str) or not name.startswith(contract.ALARM_NAME_PREFIX):
        raise EventError(f"not one of the guard's alarms: {name!r}")
    raw_state = detail.get("state")
    state: Mapping[str, Any] = raw_state if isinstance(raw_state, Mapping) else {}
    value = state.get("value")
    if not isinstance(value, str):
        raise EventError(f"alarm {name}: detail.state.value is missing")
    contributor = detail.get("alarmContributor")
    dimensions: Mapping[str, Any] = {}
    metric = None
    if isinstance(contributor, Mapping) and isinstance(contributor.get("attributes"), Mapping):
        dimensions = contributor["attributes"]
    else:
        dimensions, metric = _single_metric(detail)
    job = job_of_dimensions(dimensions)
    return AlarmObservation(
        event_id=str(event.get("id") or ""),
        account=event.get("account") if isinstance(event.get("account"), str) else None,
        region=event.get("region") if isinstance(event.get("region"), str) else None,
        time=parse_time(state.get("timestamp")) or parse_time(event.get("time")),
        alarm_name=name,
        state=value,
        reason=str(state.get("reason") or "")[:1024],
        job=job,
        metric=metric,
        contributor=isinstance(contributor, Mapping),
    )


def _single_metric(detail: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    configuration = detail.get("configuration")
    metrics = configuration.get("metrics") if isinstance(configuration, Mapping) else None
    for entry in metrics if isinstance(metrics, list) else []:
        stat = entry.get("metricStat") if isinstance(entry, Mapping) else None
        metric = stat.get("metric") if isinstance(stat, Mapping) else None
        if isinstance(metric, Mapping) and isinstance(metric.get("dimensions"), Mapping):
            name = metric.get("name")
            return metric["dimensions"], name if isinstance(name, str) else None
    return {}, None


@frozen
class JobAlarmSpec:
    job: str
    metric: str
    statistic: str
    comparison: str
    threshold: float
    datapoints: int
    periods: int
    action: Action

    @property
    def alarm_name(self) -> str:
        return job_alarm_name(self.job, self.metric)

    @property
    def cloudwatch_statistic(self) -> str:
        return _STATISTIC_NAMES[self.statistic]

    @property
    def comparison_operator(self) -> str:
        return COMPARISONS[self.comparison]

    def describe(self) -> str:
        return (
            f"tag {contract.JOB_ALARM_TAG_PREFIX}{self.metric}: {self.statistic}({self.metric}) "
            f"{self.comparison} {self.threshold:g} for {self.datapoints} of {self.periods} min -> {self.action.value}"
        )


def job_alarm_name(job: str, metric: str) -> str:
    # Alarm names allow any printable ASCII but the metric is hashed to keep names short and stable.
    digest = hashlib.sha256(metric.encode()).hexdigest()[:8]
    return f"{contract.JOB_ALARM_PREFIX}{job}-{digest}"


def job_alarm_specs(job: str, tags: Mapping[str, str]) -> tuple[list[JobAlarmSpec], list[str]]:
    """Per-job guards from a job's tags, and a message for each tag that breaks the grammar."""
    specs: list[JobAlarmSpec] = []
    problems: list[str] = []
    for key, value in sorted(tags.items()):
        if not key.startswith(contract.JOB_ALARM_TAG_PREFIX):
            continue
        metric = key.removeprefix(contract.JOB_ALARM_TAG_PREFIX)
        spec, problem = _parse_tag(job, metric, value)
        if problem:
            problems.append(f"tag {key}={value!r}: {problem}")
        elif spec:
            specs.append(spec)
    if len(specs) > MAX_JOB_ALARMS:
        problems.append(f"{len(specs)} per-job guards; only the first {MAX_JOB_ALARMS} are created")
        specs = specs[:MAX_JOB_ALARMS]
    return specs, problems


def _parse_tag(job: str, metric: str, value: str) -> tuple[JobAlarmSpec | None, str | None]:
    if not metric:
        return None, "no metric after the prefix"
    if metric in contract.INSTANCE_METRICS:
        return None, "instance metrics are per host: use a fleet guard (metric_guards) for them"
    match = re.match(_TAG_VALUE, value)
    if not match:
        return None, "expected '<avg|min|max|sum> <above|below|at-or-above|at-or-below> <number> [M/N] [notify|stop]'"
    m = int(match.group("m") or 3)
    n = int(match.group("n") or m)
    if not 1 <= m <= n <= 180:
        return None, f"M/N must satisfy 1 <= M <= N <= 180, got {m}/{n}"
    return (
        JobAlarmSpec(
            job=job,
            metric=metric,
            statistic=match.group("stat").upper(),
            comparison=_TAG_OPERATORS[match.group("op").lower()],
            threshold=float(match.group("threshold")),
            datapoints=m,
            periods=n,
            action=Action((match.group("action") or "notify").lower()),
        ),
        None,
    )


# At most 100 contributors in ALARM, and PARTIAL_DATA past 500 series or 10,000 metrics (docs/limits.md).
CONTRIBUTORS_IN_ALARM_MAX = 100
PARTIAL_DATA_SERIES_MAX = 500
PARTIAL_DATA_METRICS_MAX = 10_000
PARTIAL_DATA = "PARTIAL_DATA"
# "N+ time series evaluated to ALARM": the "+" says the list is cut, whatever N (not only at 100).
CAPPED_REASON = re.compile(r"\b(\d+)\+ time series")
_BREACHES: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


@frozen
class FleetAlarmState:
    name: str
    state: str | None
    reason: str
    evaluation_state: str | None  # PARTIAL_DATA, EVALUATION_FAILURE, ... or None when evaluating all data


def over_cap(guard: MetricGuard, *, listed: int | None, state: FleetAlarmState | None, series: int) -> str | None:
    """Why the fleet alarm of `guard` may miss a breaching job, or None.

    `listed`: contributors listed (None: not read); `series`: running jobs or hosts selected, a lower bound."""
    if listed is not None and listed >= CONTRIBUTORS_IN_ALARM_MAX:
        return f"{listed} contributors in ALARM: CloudWatch lists at most {CONTRIBUTORS_IN_ALARM_MAX}"
    capped = CAPPED_REASON.search(state.reason) if state is not None else None
    if capped is not None:
        return f"the alarm reports {capped.group(0)} in ALARM: CloudWatch lists only part of them"
    if state is not None and state.evaluation_state == PARTIAL_DATA:
        return (
            f"the alarm evaluates partial data ({PARTIAL_DATA}: over {PARTIAL_DATA_SERIES_MAX} series or "
            f"{PARTIAL_DATA_METRICS_MAX:,} metrics)"
        )
    if series > PARTIAL_DATA_SERIES_MAX:
        unit = "hosts" if guard.instance_metric else "jobs"
        return f"{series} running {unit}: the alarm evaluates partial data past {PARTIAL_DATA_SERIES_MAX} series"
    return None


def selects(guard: MetricGuard, job: str, tags: Mapping[str, str]) -> bool:
    """Whether the guard's job_prefix and job_tag select the job (the responder applies the same two)."""
    if guard.job_prefix and not job.startswith(guard.job_prefix):
        return False
    return not (guard.job_tag and guard.job_tag not in tags)


def cloudwatch_statistic(guard: MetricGuard) -> str:
    return _STATISTIC_NAMES[guard.statistic.upper()]


def breaching_minutes(points: list[tuple[datetime, float]], guard: MetricGuard) -> int:
    """Of the last `periods` one-minute datapoints of one series, how many breach (a missing minute does not)."""
    # Counted back from the newest datapoint, not from now: CloudWatch's publishing delay must not hide minutes.
    if not points:
        return 0
    newest = max(t for t, _ in points)
    window = [(t, v) for t, v in points if (newest - t).total_seconds() < guard.periods * 60]
    compare = _BREACHES[guard.comparison]
    return sum(1 for _, value in window if compare(value, guard.threshold))
