"""Debugger's loss rules over a log stream's lines: folded one point at a time into bounded, idempotent state.

The rules, their defaults and what duplicates and reorders can and cannot change: docs/design/log-rules.md.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from training_guard import contract
from training_guard.config.model import LOG_RULE_NAMES, LogAction, LogRules
from training_guard.domain.log_lines import LineReader, loss_metrics, loss_role

STATE_VERSION = 1
MAX_METRIC_NAMES = 64  # names remembered for recognising the loss; a line of a hundred keys is not a hundred series
MAX_IDS = 256  # event ids kept at the newest millisecond (duplicates older than it are told by their timestamp)
MAX_BATCHES = 16  # fingerprints of the last batches folded: a redelivered batch is recognised whole
MAX_SAMPLE = 200  # characters kept of the first line whose capture is not a number

NAN, DIVERGENCE, LND, OVERFIT, OVERTRAINING, STALLED = LOG_RULE_NAMES
_ACTION_WORDS = {"stop": "stop", "notify": "notify", "dry_run": "dry_run", "dry-run": "dry_run", "ignore": "ignore"}
_OFF_WORDS = frozenset({"off", "false", "no", "none", "0", "disabled"})
_RULE_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,39}$")


@dataclass(frozen=True)
class LogEvent:
    """One log line as CloudWatch Logs delivers it (offline: `id` is the line number as text)."""

    id: str
    timestamp_ms: int
    message: str
    line: int | None = None  # 1-based line of a file (offline); None in the Lambda


@dataclass(frozen=True)
class Firing:
    """A rule's verdict on a line: the rule, the metric, the value, the line and the setting that decided it."""

    rule: str
    metric: str | None
    value: float | None
    line: int | None
    event_id: str
    timestamp_ms: int
    action: str  # "stop" | "notify" | "dry_run"
    setting: str
    reader: str
    detail: str


@dataclass(frozen=True)
class LogRuleOverrides:
    """A job's log-rules tag, read: everything off, actions per rule, which metrics are the losses."""

    off: bool = False
    actions: Mapping[str, LogAction] = field(default_factory=dict)  # rule name as written -> action
    loss: str | None = None
    validation: str | None = None

    def action_for(self, rule: str) -> LogAction | None:
        return self.actions.get(rule) or self.actions.get(rule.lower())


def job_overrides(tags: Mapping[str, str]) -> tuple[LogRuleOverrides | None, str | None]:
    """The job's LOG_RULES_TAG read: (overrides, None), (None, None) without the tag, (None, problem) if unreadable.

    `off`, or comma-separated `Rule=action` (stop, notify, dry_run, ignore), `loss=<metric>`, `val=<metric>`.
    """
    value = tags.get(contract.LOG_RULES_TAG)
    if value is None:
        return None, None
    text = value.strip()
    if text.lower() in _OFF_WORDS:
        return LogRuleOverrides(off=True), None
    if text.lower() == "on" or not text:
        return LogRuleOverrides(), None
    actions: dict[str, LogAction] = {}
    loss = validation = None
    for item in text.split(","):
        key, sep, word = (part.strip() for part in item.partition("="))
        if not sep or not key or not word:
            return None, _tag_problem(value, f"{item.strip()!r} is not NAME=VALUE")
        if key.lower() == "loss":
            loss = word
        elif key.lower() in ("val", "validation"):
            validation = word
        elif _RULE_KEY.match(key) and word.lower() in _ACTION_WORDS:
            actions[_rule_key(key)] = LogAction(_ACTION_WORDS[word.lower()])
        elif _RULE_KEY.match(key):
            return None, _tag_problem(value, f"{key}={word}: the action is one of stop, notify, dry_run, ignore")
        else:
            return None, _tag_problem(value, f"{key!r} is not a rule name")
    return LogRuleOverrides(actions=actions, loss=loss, validation=validation), None


def _rule_key(key: str) -> str:
    """A built-in rule by its canonical name whatever the case (`divergence` is `Divergence`); a pattern as written."""
    return next((name for name in LOG_RULE_NAMES if name.lower() == key.lower()), key)


def _tag_problem(value: str, why: str) -> str:
    return (
        f"tag {contract.LOG_RULES_TAG}={value!r} is ignored: {why}; write `off` or e.g. "
        "`Divergence=notify,NaN=stop,loss=my_loss,val=val_loss`"
    )


# --- The state of one stream -----------------------------------------------------------------------------------


class _Series:
    """One loss series: count, best, the window LossNotDecreasing compares, Overtraining's and Overfit's marks."""

    __slots__ = (
        "at_best",
        "best",
        "best_line",
        "count",
        "name",
        "ot_best",
        "ot_since",
        "ratio_at_min",
        "streak",
        "train_at_min",
        "window",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0  # points folded in order
        self.best = math.inf  # the lowest value, late points included (a minimum does not care about order)
        self.best_line: int | None = None
        self.window: list[float] = []  # the last 2 x num_steps values folded in order
        self.ot_best = math.inf  # Overtraining: the last value that improved by delta
        self.ot_since = 0
        self.ratio_at_min: float | None = None  # Overfit (validation series): the gap at the minimum
        self.train_at_min: float | None = None
        self.streak = 0
        self.at_best = 0  # count at the best

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "n": self.count,
            "best": _finite_or_none(self.best),
            "best_line": self.best_line,
            "w": list(self.window),
            "ot": [_finite_or_none(self.ot_best), self.ot_since],
            "of": [self.ratio_at_min, self.train_at_min, self.streak],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> _Series:
        series = cls(str(doc["name"]))
        series.count = int(doc.get("n", 0))
        series.best = _float_or_inf(doc.get("best"))
        series.best_line = doc.get("best_line")
        series.window = [float(v) for v in doc.get("w", ())]
        ot = doc.get("ot") or [None, 0]
        series.ot_best, series.ot_since = _float_or_inf(ot[0]), int(ot[1])
        of = doc.get("of") or [None, None, 0]
        series.ratio_at_min, series.train_at_min, series.streak = of[0], of[1], int(of[2])
        return series


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _float_or_inf(value: Any) -> float:
    return math.inf if value is None else float(value)


class StreamState:
    """What one (job, log stream) has shown so far, in a few KB whatever the log's length; JSON-serialisable."""

    def __init__(self) -> None:
        self.ts: int | None = None  # the newest timestamp folded
        self.ids: list[str] = []  # digests of the ids folded at `ts`
        self.batches: list[str] = []  # digests of the last batches folded
        self.lines = 0  # lines folded in order: a firing's line in the Lambda
        self.first_ms: int | None = None
        self.point_ms: int | None = None  # timestamp of the newest point read
        self.last_event: str | None = None
        self.names: list[str] = []  # metric names seen, at most MAX_METRIC_NAMES
        self.fired: dict[str, int | None] = {}  # rule -> line it fired at
        self.unparsed = 0  # captures of the job's definitions that were not numbers
        self.unparsed_sample: str | None = None
        self.loss: _Series | None = None
        self.val: _Series | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "v": STATE_VERSION,
            "ts": self.ts,
            "ids": list(self.ids),
            "batches": list(self.batches),
            "lines": self.lines,
            "first_ms": self.first_ms,
            "point_ms": self.point_ms,
            "last_event": self.last_event,
            "names": list(self.names),
            "fired": dict(self.fired),
            "unparsed": self.unparsed,
            "unparsed_sample": self.unparsed_sample,
            "loss": self.loss.to_json() if self.loss else None,
            "val": self.val.to_json() if self.val else None,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> StreamState:
        """The state saved by `to_json`; a state of another version starts afresh (the rules re-learn the stream)."""
        state = cls()
        if doc.get("v") != STATE_VERSION:
            return state
        state.ts = doc.get("ts")
        state.ids = [str(i) for i in doc.get("ids", ())]
        state.batches = [str(b) for b in doc.get("batches", ())]
        state.lines = int(doc.get("lines", 0))
        state.first_ms = doc.get("first_ms")
        state.point_ms = doc.get("point_ms")
        state.last_event = doc.get("last_event")
        state.names = [str(n) for n in doc.get("names", ())]
        state.fired = {str(k): v for k, v in dict(doc.get("fired", {})).items()}
        state.unparsed = int(doc.get("unparsed", 0))
        state.unparsed_sample = doc.get("unparsed_sample")
        state.loss = _Series.from_json(doc["loss"]) if doc.get("loss") else None
        state.val = _Series.from_json(doc["val"]) if doc.get("val") else None
        return state

    def copy(self) -> StreamState:
        return StreamState.from_json(self.to_json())

    def mark(self, firing: Firing) -> None:
        """Records a firing made outside `evaluate` (the stall check), so that the rule fires once per stream."""
        self.fired.setdefault(firing.rule, firing.line)


# --- The rules, resolved for one job ----------------------------------------------------------------------------


class _Plan:
    """The rules' actions and setting lines for one job: configuration, then the job's tag."""

    def __init__(self, rules: LogRules, overrides: LogRuleOverrides | None) -> None:
        self.rules = rules
        self.actions: dict[str, LogAction] = {}
        self.settings: dict[str, str] = {}
        sections = {
            NAN: rules.nan.action,
            DIVERGENCE: rules.divergence.action,
            LND: rules.loss_not_decreasing.action,
            OVERFIT: rules.overfit.action,
            OVERTRAINING: rules.overtraining.action,
            STALLED: rules.stalled.action,
        }
        for name, action in sections.items():
            self._resolve(name, action, rules.rule_setting(name), overrides)
        self.patterns: list[tuple[str, re.Pattern[str]]] = []
        for index, pattern in enumerate(rules.patterns):
            self._resolve(pattern.name, pattern.action, pattern.describe(index), overrides)
            if self.actions[pattern.name] is not LogAction.IGNORE:
                self.patterns.append((pattern.name, re.compile(pattern.regex)))
        tagged = overrides or LogRuleOverrides()
        self.loss_metric = tagged.loss or rules.loss_metric
        self.validation_metric = tagged.validation or rules.validation_metric
        self.nan_regex = re.compile(rules.nan.tensor_regex) if rules.nan.tensor_regex is not None else None

    def _resolve(self, name: str, action: LogAction, line: str, overrides: LogRuleOverrides | None) -> None:
        tagged = overrides.action_for(name) if overrides else None
        if tagged is not None and tagged is not action:
            line = f"{line}; tag {contract.LOG_RULES_TAG} {name}={tagged.value}"
            action = tagged
        self.actions[name] = action
        self.settings[name] = line

    def on(self, rule: str) -> bool:
        return self.actions[rule] is not LogAction.IGNORE


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def evaluate(
    state: StreamState | None,
    events: Sequence[LogEvent],
    *,
    reader: LineReader,
    rules: LogRules,
    tags: Mapping[str, str] | None = None,
) -> tuple[StreamState, list[Firing]]:
    """Folds a batch of one stream's events into (a copy of) the state; returns it and the new firings.

    A rule fires at most once per stream. An event already folded changes nothing; an event older than the newest
    folded is late: only the rules that do not depend on order (NaN, patterns, the best loss) read it.
    """
    folded = StreamState() if state is None else state.copy()
    if not rules.enabled or not events:
        return folded, []
    overrides, _ = job_overrides(tags or {})
    if overrides is not None and overrides.off:
        return folded, []
    batch = _digest("\n".join(event.id for event in events))
    if batch in folded.batches:
        return folded, []
    lines_before = folded.lines
    run = _Run(folded, _Plan(rules, overrides), reader)
    for event in sorted(events, key=attrgetter("timestamp_ms")):
        run.fold(event)
    run.finish()
    if folded.lines != lines_before:  # a batch of late or repeated events only is idempotent without its digest
        folded.batches = [*folded.batches, batch][-MAX_BATCHES:]
    return folded, run.firings


class _Run:
    """One batch being folded."""

    def __init__(self, state: StreamState, plan: _Plan, reader: LineReader) -> None:
        self.state = state
        self.plan = plan
        self.reader = reader
        self.firings: list[Firing] = []
        self.start_ts = state.ts
        self.start_ids = frozenset(state.ids)
        self.newest_ids: list[str] = []  # ids folded at the newest millisecond, in this batch
        self.names = set(state.names)
        self.roles = self._roles()
        self.nan_ok: dict[tuple[str, str], bool] = {}
        self.rules = plan.rules
        self.event = LogEvent("", 0, "")  # the event being folded
        self.line: int | None = None

    def _roles(self) -> tuple[str | None, str | None]:
        plan = self.plan
        return loss_metrics(self.state.names, loss=plan.loss_metric, validation=plan.validation_metric)

    def fold(self, event: LogEvent) -> None:
        late = self._admit(event)
        if late is None:
            return  # folded before
        state = self.state
        self.event = event
        self.line = event.line if event.line is not None else state.lines
        message = event.message
        for name, pattern in self.plan.patterns:
            if name not in state.fired and pattern.search(message):
                self._fire(name, None, None, "pattern", f"the line matches {pattern.pattern!r}")
        points, unparsed = self.reader.scan(message)
        if unparsed is not None:
            state.unparsed += 1
            if state.unparsed_sample is None:
                state.unparsed_sample = f"{unparsed}: {message[:MAX_SAMPLE]}"
        if not points:
            return
        if not late and (state.point_ms is None or event.timestamp_ms > state.point_ms):
            state.point_ms = event.timestamp_ms
        for metric, value, source in points:
            if metric not in self.names and len(self.names) < MAX_METRIC_NAMES:
                self._new_name(metric)
            if value != value or value in (math.inf, -math.inf):  # noqa: PLR0124 - NaN is the one value unequal to itself
                self._non_finite(metric, value, source)
            elif metric == self.roles[0]:
                self._loss(metric, value, source, late=late)
            elif metric == self.roles[1] and not late:
                self._validation(metric, value, source)

    def _admit(self, event: LogEvent) -> bool | None:
        """Whether the event is late (older than the newest folded before this batch); None if folded before."""
        ts = event.timestamp_ms
        if self.start_ts is not None and ts <= self.start_ts:
            if ts < self.start_ts:
                return True
            if _digest(event.id) in self.start_ids:
                return None
        state = self.state
        state.lines += 1
        if state.ts is None or ts > state.ts:
            state.ts = ts
            self.newest_ids = []
        self.newest_ids.append(event.id)
        state.last_event = event.id
        if state.first_ms is None:
            state.first_ms = ts
        return False

    def finish(self) -> None:
        state = self.state
        digests = [_digest(i) for i in self.newest_ids]
        if state.ts == self.start_ts:
            digests = state.ids + digests
        state.ids = digests[-MAX_IDS:]

    def _new_name(self, metric: str) -> None:
        self.names.add(metric)
        self.state.names.append(metric)
        roles = self._roles()
        if roles != self.roles:
            self.roles = roles
            state = self.state
            if state.loss is not None and state.loss.name != roles[0]:
                state.loss = None
            if state.val is not None and state.val.name != roles[1]:
                state.val = None

    def _fire(self, rule: str, metric: str | None, value: float | None, reader: str, detail: str) -> None:
        event, line = self.event, self.line
        self.state.fired[rule] = line
        self.firings.append(
            Firing(
                rule=rule,
                metric=metric,
                value=value,
                line=line,
                event_id=event.id,
                timestamp_ms=event.timestamp_ms,
                action=self.plan.actions[rule].value,
                setting=self.plan.settings[rule],
                reader=reader,
                detail=detail,
            )
        )

    # --- each rule ----------------------------------------------------------------------------------------------

    def _non_finite(self, metric: str, value: float, source: str) -> None:
        if NAN in self.state.fired or not self.plan.on(NAN):
            return
        nan_rule = self.rules.nan
        if nan_rule.only_nan and value == value:  # noqa: PLR0124 - an infinity, not NaN
            return
        key = (metric, source)
        eligible = self.nan_ok.get(key)
        if eligible is None:
            if self.plan.nan_regex is not None:
                eligible = self.plan.nan_regex.search(metric) is not None
            else:
                # The job's definitions name what it cares about; a built-in reader's key must be a loss.
                eligible = source == "MetricDefinitions" or loss_role(metric) is not None
            self.nan_ok[key] = eligible
        if eligible:
            self._fire(NAN, metric, value, source, f"{metric} is {_shown(value)}")

    def _loss(self, metric: str, value: float, source: str, *, late: bool) -> None:
        line = self.line
        state = self.state
        series = state.loss
        if series is None:
            series = state.loss = _Series(metric)
        best = series.best
        if value < best:
            series.best, series.best_line = value, line
        if late:
            return  # order-free: the best only
        series.count += 1
        rules = self.rules
        fired = state.fired
        if (
            DIVERGENCE not in fired
            and series.count > rules.divergence.warmup
            and best > 0
            and value >= rules.divergence.factor * best
            and self.plan.on(DIVERGENCE)
        ):
            where = f" (line {series.best_line})" if series.best_line is not None else ""
            self._fire(
                DIVERGENCE,
                metric,
                value,
                source,
                f"{metric} {value:.4g} is {value / best:.1f}x its best {best:.4g}{where}",
            )
        lnd = rules.loss_not_decreasing
        steps = lnd.num_steps
        window = series.window
        window.append(value)
        if len(window) > 2 * steps:
            del window[: len(window) - 2 * steps]
        if LND not in fired and series.count >= 2 * steps and series.count % steps == 0 and self.plan.on(LND):
            before = sum(window[:steps]) / steps
            now = sum(window[steps:]) / steps
            if before > 0 and now > before * (1 - lnd.diff_percent / 100):
                change = (now / before - 1) * 100
                how = "rose" if change > lnd.increase_threshold_percent else "changed"
                self._fire(
                    LND,
                    metric,
                    value,
                    source,
                    f"the mean of {metric} over the last {steps} points ({now:.4g}) {how} by {change:+.2f} % against "
                    f"the {steps} before ({before:.4g}): less than the {lnd.diff_percent:g} % decrease required",
                )
        self._overtraining(series, value, rules.overtraining.patience_train, source)

    def _validation(self, metric: str, value: float, source: str) -> None:
        line = self.line
        state = self.state
        series = state.val
        if series is None:
            series = state.val = _Series(metric)
        series.count += 1
        train = self._train_level()
        ratio = (value - train) / train if train is not None and train > 0 else None
        if value < series.best:
            series.best, series.best_line = value, line
            series.ratio_at_min, series.train_at_min, series.streak = ratio, train, 0
        else:
            self._overfit(series, value, ratio, train, source)
        self._overtraining(series, value, self.rules.overtraining.patience_validation, source)

    def _train_level(self) -> float | None:
        """The training loss now: the mean of its last num_steps points (one point is too noisy to compare)."""
        loss = self.state.loss
        if loss is None or not loss.window:
            return None
        recent = loss.window[-self.rules.loss_not_decreasing.num_steps :]
        return sum(recent) / len(recent)

    def _overfit(self, series: _Series, value: float, ratio: float | None, train: float | None, source: str) -> None:
        rule = self.rules.overfit
        if OVERFIT in self.state.fired or not self.plan.on(OVERFIT) or series.count <= rule.start_step:
            return
        if ratio is None or train is None or series.ratio_at_min is None or series.train_at_min is None:
            series.streak = 0
            return
        # The gap's growth since the minimum that is the validation loss rising (not the training loss falling).
        growth = (value - series.best) / train
        if train <= series.train_at_min and growth > rule.ratio_threshold:
            series.streak += 1
        else:
            series.streak = 0
        if series.streak >= rule.patience:
            where = f" (line {series.best_line})" if series.best_line is not None else ""
            self._fire(
                OVERFIT,
                series.name,
                value,
                source,
                f"{series.name} {value:.4g} rose from its minimum {series.best:.4g}{where} while the training loss "
                f"fell to {train:.4g}: the gap grew by {growth:.2f} of the training loss ({rule.patience} points)",
            )

    def _overtraining(self, series: _Series, value: float, patience: int, source: str) -> None:
        delta = self.rules.overtraining.delta
        if value < series.ot_best - delta:
            series.ot_best, series.ot_since = value, 0
            return
        series.ot_since += 1
        if series.ot_since >= patience and OVERTRAINING not in self.state.fired and self.plan.on(OVERTRAINING):
            self._fire(
                OVERTRAINING,
                series.name,
                value,
                source,
                f"{series.name} has not improved by {delta:g} in {series.ot_since} points (best {series.ot_best:.4g})",
            )


def _shown(value: float) -> str:
    return "NaN" if value != value else ("+inf" if value > 0 else "-inf")  # noqa: PLR0124


def stalled(
    state: StreamState, *, now_ms: int, rules: LogRules, tags: Mapping[str, str] | None = None
) -> Firing | None:
    """StalledTrainingRule: no new point for `threshold` seconds (since the first line if none yet)."""
    if not rules.enabled or STALLED in state.fired:
        return None
    overrides, _ = job_overrides(tags or {})
    if overrides is not None and overrides.off:
        return None
    plan = _Plan(rules, overrides)
    since = state.point_ms if state.point_ms is not None else state.first_ms
    if not plan.on(STALLED) or since is None:
        return None
    quiet_s = (now_ms - since) / 1000
    if quiet_s < rules.stalled.threshold:
        return None
    what = "a new point" if state.point_ms is not None else "a first point"
    return Firing(
        rule=STALLED,
        metric=state.loss.name if state.loss else None,
        value=None,
        line=state.lines or None,
        event_id=f"{STALLED}@{since}",  # one stall episode, one id: a repeated check is a duplicate
        timestamp_ms=now_ms,
        action=plan.actions[STALLED].value,
        setting=plan.settings[STALLED],
        reader="clock",
        detail=f"no {what} in the log for {quiet_s / 60:.0f} min (threshold {rules.stalled.threshold} s)",
    )
