"""What the guard did over a window: stops, would-have-stopped, spend avoided, who stopped what, per day.

Pure, behind `training-guard report` and the weekly digest; what counts and why: docs/design/digest.md."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from training_guard import contract
from training_guard.config.frozen import frozen
from training_guard.domain.events import parse_time
from training_guard.domain.outcome import Outcome
from training_guard.domain.values import cents, iso

REPORT_SCHEMA: Final = "training-guard.report/1"
STOP_KEY_PREFIX: Final = contract.STOP_KEY_PREFIX
# The guard's metrics carry service = POWERTOOLS_SERVICE_NAME, as the dashboard graphs them (a test pins the two).
SERVICE_DIMENSION: Final = {contract.SERVICE_DIMENSION: contract.SERVICE_NAME}
OUTCOME_METRIC_PREFIX: Final = contract.OUTCOME_METRIC_PREFIX
OUTCOME_METRICS: Final = tuple(f"{OUTCOME_METRIC_PREFIX}{o.value}" for o in Outcome)
WOULD_STOP_METRIC: Final = f"{OUTCOME_METRIC_PREFIX}{Outcome.WOULD_STOP.value}"
# Not `SpendAvoidedUSD` (one series per rule, no fixed-dimension query sums it): the stop records carry it.
METRICS: Final = OUTCOME_METRICS

_TRAILING_NUMBERS = re.compile(r"(?:-\d+)+$")
_SECTION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

__all__ = [
    "METRICS",
    "REPORT_SCHEMA",
    "SERVICE_DIMENSION",
    "STOP_KEY_PREFIX",
    "Day",
    "Group",
    "SpendSum",
    "StopEntry",
    "Totals",
    "compute",
    "job_prefix",
]


def job_prefix(name: str, separator: str | None = None) -> str:
    """The name without its trailing `-<digits>` groups, or up to `separator`; the whole name when that is empty."""
    if separator:
        head, found, _ = name.partition(separator)
        return head if found and head else name
    return _TRAILING_NUMBERS.sub("", name) or name


@frozen
class StopEntry:
    job: str
    rule: str
    reason: str
    at: datetime
    confirmed: bool
    spend_avoided_usd: float | None = None
    spend_so_far_usd: float | None = None
    price_source: str | None = None
    instance_types: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """The configuration section that decided the stop: the first name of its policy line."""
        found = _SECTION.match(self.reason.strip())
        return found.group(0) if found else ""

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> StopEntry | None:
        """A `stop#<job>` item of the state table; None for any other item or one without a readable time."""
        key = _string(item.get(contract.TABLE_PARTITION_KEY))
        if key is None or not key.startswith(STOP_KEY_PREFIX):
            return None
        at = parse_time(_string(item.get("stopped_at")))
        if at is None:
            return None
        return cls(
            job=_string(item.get("job")) or key[len(STOP_KEY_PREFIX) :],
            rule=_string(item.get("rule")) or "?",
            reason=_string(item.get("reason")) or "",
            at=at.astimezone(UTC),
            confirmed=(item.get("confirmed") or {}).get("BOOL") is True,
            spend_avoided_usd=_usd(item.get("spend_avoided_usd")),
            spend_so_far_usd=_usd(item.get("spend_so_far_usd")),
            price_source=_string(item.get("price_source")),
            instance_types=_strings(item.get("instance_types")),
        )


@frozen
class SpendSum:
    usd: float = 0.0
    known: int = 0
    unknown: int = 0

    def add(self, value: float | None) -> SpendSum:
        if value is None:
            return SpendSum(self.usd, self.known, self.unknown + 1)
        return SpendSum(self.usd + value, self.known + 1, self.unknown)

    def as_dict(self) -> dict[str, Any]:
        return {"usd": cents(self.usd), "known": self.known, "unknown": self.unknown}


@frozen
class Group:
    name: str
    stops: int
    spend_avoided: SpendSum
    kind: str | None = None

    def as_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {"name": self.name, "stops": self.stops}
        if self.kind is not None:
            document["kind"] = self.kind
        return document | {"spend_avoided": self.spend_avoided.as_dict()}


@frozen
class Day:
    day: date
    stops: int
    would_stop: int | None  # None: the guard's metrics could not be read
    spend_avoided_usd: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "day": self.day.isoformat(),
            "stops": self.stops,
            "would_stop": self.would_stop,
            "spend_avoided_usd": cents(self.spend_avoided_usd),
        }


@frozen
class Totals:
    since: datetime
    until: datetime
    stops: int
    unconfirmed: int  # stop records SageMaker never confirmed: not in any other figure
    would_stop: int | None
    spend_avoided: SpendSum
    spend_so_far: SpendSum
    rules: tuple[Group, ...]
    prefixes: tuple[Group, ...]
    days: tuple[Day, ...]
    metrics: Mapping[str, float] | None  # each guard metric's sum over the window; None: not read
    unpriced_jobs: tuple[str, ...] = field(default=())

    @property
    def outcomes(self) -> dict[str, int]:
        return {
            name.removeprefix(OUTCOME_METRIC_PREFIX): round(value)
            for name, value in (self.metrics or {}).items()
            if name.startswith(OUTCOME_METRIC_PREFIX)
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "since": iso(self.since),
            "until": iso(self.until),
            "stops": self.stops,
            "unconfirmed_stops": self.unconfirmed,
            "would_stop": self.would_stop,
            "spend_avoided": self.spend_avoided.as_dict() | {"unknown_jobs": list(self.unpriced_jobs)},
            "spend_so_far": self.spend_so_far.as_dict(),
            "rules": [g.as_dict() for g in self.rules],
            "prefixes": [g.as_dict() for g in self.prefixes],
            "outcomes": self.outcomes if self.metrics is not None else None,
            "metrics": (
                {name: cents(value) for name, value in self.metrics.items()} if self.metrics is not None else None
            ),
            "days": [d.as_dict() for d in self.days],
        }


def compute(
    stops: Iterable[StopEntry],
    metrics: Mapping[str, Sequence[tuple[datetime, float]]] | None,
    *,
    since: datetime,
    until: datetime,
    prefix_separator: str | None = None,
) -> Totals:
    """The totals of the stops within [since, until], and `metrics`: the guard metrics' hourly-or-coarser sums (None:
    not read). Raises ValueError when the window ends before it starts."""
    since, until = since.astimezone(UTC), until.astimezone(UTC)
    if until < since:
        raise ValueError(f"the window ends ({until}) before it starts ({since})")
    within = sorted((s for s in stops if since <= s.at <= until), key=lambda s: (s.at, s.job))
    confirmed = [s for s in within if s.confirmed]

    spend_avoided, spend_so_far = SpendSum(), SpendSum()
    by_rule: dict[tuple[str, str], list[StopEntry]] = defaultdict(list)
    by_prefix: dict[str, list[StopEntry]] = defaultdict(list)
    stops_per_day: Counter[date] = Counter()
    spend_per_day: dict[date, float] = defaultdict(float)
    for stop in confirmed:
        spend_avoided = spend_avoided.add(stop.spend_avoided_usd)
        spend_so_far = spend_so_far.add(stop.spend_so_far_usd)
        by_rule[(stop.rule, stop.kind)].append(stop)
        by_prefix[job_prefix(stop.job, prefix_separator)].append(stop)
        stops_per_day[stop.at.date()] += 1
        spend_per_day[stop.at.date()] += stop.spend_avoided_usd or 0.0

    sums: dict[str, float] | None = None
    would_stop_per_day: Counter[date] = Counter()
    if metrics is not None:
        start = since.replace(minute=0, second=0, microsecond=0)
        sums = {}
        for name in sorted(set(METRICS) | set(metrics)):
            points = [(t.astimezone(UTC), v) for t, v in metrics.get(name, ()) if math.isfinite(v)]
            points = [(t, v) for t, v in points if start <= t <= until]
            sums[name] = math.fsum(v for _, v in points)
            if name == WOULD_STOP_METRIC:
                for t, v in points:
                    would_stop_per_day[t.date()] += round(v)

    days = tuple(
        Day(
            day=day,
            stops=stops_per_day[day],
            would_stop=would_stop_per_day[day] if sums is not None else None,
            spend_avoided_usd=spend_per_day.get(day, 0.0),
        )
        for day in _days(since.date(), until.date())
    )
    return Totals(
        since=since,
        until=until,
        stops=len(confirmed),
        unconfirmed=len(within) - len(confirmed),
        would_stop=round(sums[WOULD_STOP_METRIC]) if sums is not None else None,
        spend_avoided=spend_avoided,
        spend_so_far=spend_so_far,
        rules=_ranked((name, kind, group) for (name, kind), group in by_rule.items()),
        prefixes=_ranked((name, None, group) for name, group in by_prefix.items()),
        days=days,
        metrics=sums,
        unpriced_jobs=tuple(s.job for s in confirmed if s.spend_avoided_usd is None),
    )


def _ranked(groups: Iterable[tuple[str, str | None, list[StopEntry]]]) -> tuple[Group, ...]:
    made = []
    for name, kind, stops in groups:
        spend = SpendSum()
        for stop in stops:
            spend = spend.add(stop.spend_avoided_usd)
        made.append(Group(name=name, stops=len(stops), spend_avoided=spend, kind=kind))
    # Most stops first; then the most spend avoided; then by name, so that the order never depends on the scan's.
    return tuple(sorted(made, key=lambda g: (-g.stops, -g.spend_avoided.usd, g.name, g.kind or "")))


def _days(first: date, last: date) -> Iterable[date]:
    day = first
    while day <= last:
        yield day
        day += timedelta(days=1)


def _string(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return None
    text = value.get("S")
    return text if isinstance(text, str) else None


def _usd(value: Any) -> float | None:
    """A figure in dollars: a number (or a numeric string), finite and not negative; anything else is unknown."""
    if not isinstance(value, Mapping):
        return None
    raw = value.get("N", value.get("S"))
    if not isinstance(raw, str):
        return None
    try:
        number = float(raw)
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, Mapping):
        return ()
    if isinstance(value.get("SS"), list):
        return tuple(str(v) for v in value["SS"])
    if isinstance(value.get("L"), list):
        return tuple(s for s in (_string(v) for v in value["L"]) if s)
    text = _string(value)
    return tuple(p.strip() for p in text.split(",") if p.strip()) if text else ()
