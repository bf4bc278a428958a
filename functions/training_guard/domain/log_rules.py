"""Debugger's loss rules over a log stream's lines: folded one point at a time into bounded, idempotent state.

The rules, their defaults and what duplicates and reorders can and cannot change: docs/design/log-rules.md."""

from __future__ import annotations

import hashlib
import math
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import field
from itertools import islice
from operator import attrgetter
from typing import Any

from training_guard import contract
from training_guard.config.frozen import frozen
from training_guard.config.model import LOG_RULE_NAMES, LogAction, LogRules
from training_guard.domain.log_lines import DEFINED, RESCAN, LineReader, TextPoints, loss_metrics, loss_role

STATE_VERSION = 1
MAX_METRIC_NAMES = 64  # names remembered for recognising the loss; a line of a hundred keys is not a hundred series
MAX_IDS = 256  # event ids kept at the newest millisecond (duplicates older than it are told by their timestamp)
MAX_BATCHES = 16  # fingerprints of the last batches folded: a redelivered batch is recognised whole
MAX_SAMPLE = 200  # characters kept of the first line whose capture is not a number
LEVEL_ALPHA = 0.2  # the level: an average of the log over ~9 points, not the lowest point (docs/design/log-rules.md)
NOISE_ALPHA = 0.05  # the point-to-point noise: an average of |change of the log| over about forty points
MEAN_ABS_STEP = 1.128  # E|a - b| of two independent normal draws, in standard deviations (2 / sqrt(pi))
NOISE_MARGIN = 3.5  # a climb, not a spike; chosen on real logs and log-normal noise (docs/design/log-rules.md)

_log, _exp = math.log, math.exp  # module globals: a lookup less per point than math.log
NAN, DIVERGENCE, LND, OVERFIT, OVERTRAINING, STALLED = LOG_RULE_NAMES
_ACTION_WORDS = {"stop": "stop", "notify": "notify", "dry_run": "dry_run", "dry-run": "dry_run", "ignore": "ignore"}
_OFF_WORDS = frozenset({"off", "false", "no", "none", "0", "disabled"})
_RULE_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,39}$")
_ITEM_SEPARATOR = re.compile(r"[\s,;]+")  # a SageMaker tag value holds no comma (docs/limits.md); offline ones may
_AROUND_EQUALS = re.compile(r"\s*=\s*")


@frozen
class LogEvent:
    """One log line as CloudWatch Logs delivers it (offline: `id` is the line number as text)."""

    id: str
    timestamp_ms: int
    message: str
    line: int | None = None  # 1-based line of a file (offline); None in the Lambda


@frozen
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

    @property
    def said(self) -> str:
        """The detail as a decision says it: with the line (of the stream, 1-based) and the reader that saw it."""
        where = [f"line {self.line}"] if self.line is not None else []
        where += [f"read by {self.reader}"] if self.reader else []
        return f"{self.detail} ({', '.join(where)})" if where else self.detail


@frozen
class LogRuleOverrides:
    """A job's log-rules tag, read: everything off, actions per rule, which metrics are the losses."""

    off: bool = False
    actions: Mapping[str, LogAction] = field(default_factory=dict)  # rule name as written -> action
    loss: str | None = None
    validation: str | None = None

    def action_for(self, rule: str) -> LogAction | None:
        return self.actions.get(rule) or self.actions.get(rule.lower())


def job_overrides(tags: Mapping[str, str]) -> tuple[LogRuleOverrides | None, str | None]:
    """The job's LOG_RULES_TAG read: (overrides, None), (None, None) without the tag, (None, problem) if unreadable."""
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
    for item in _ITEM_SEPARATOR.split(_AROUND_EQUALS.sub("=", text)):
        key, sep, word = item.partition("=")
        if not sep or not key or not word:
            return None, _tag_problem(value, f"{item!r} is not NAME=VALUE")
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
        "`Divergence=notify NaN=stop loss=my_loss val=val_loss`"
    )


# What a point changes in a series, in the order `_HOT` reads and `_Series.set_hot` writes them.
_Hot = tuple[
    float | None, int, float | None, float | None, float | None, float, int | None, float, int, float | None, int
]
_FRESH: _Hot = (None, 0, None, None, None, math.inf, None, math.inf, 0, None, 0)
_HOT = attrgetter(
    "prev", "count", "last_log", "noise", "level", "best", "best_line", "ot_best", "ot_since", "train_at_min", "streak"
)
_NO_WINDOW: deque[float] = deque(maxlen=0)
_At = tuple[str, LogEvent, int | None]  # a point's reader, event and line


class _Series:
    """One loss series: count, best, level and noise, window, Overtraining's and Overfit's marks."""

    __slots__ = (
        "best",
        "best_line",
        "count",
        "last_log",
        "level",
        "name",
        "noise",
        "ot_best",
        "ot_since",
        "prev",
        "streak",
        "train_at_min",
        "window",
    )

    def __init__(self, name: str, keep: int = 0) -> None:
        self.name = name
        self.count = 0
        self.best = math.inf  # loss: the lowest level, in the log (see LEVEL_ALPHA); validation: the lowest value
        self.best_line: int | None = None
        self.level: float | None = None
        self.noise: float | None = None
        self.prev: float | None = None
        self.last_log: float | None = None
        self.window: deque[float] = deque(maxlen=keep or None)  # the last 2 x num_steps values folded in order
        self.ot_best = math.inf  # Overtraining: the last value that improved by delta
        self.ot_since = 0
        self.train_at_min: float | None = None  # Overfit (validation series): the training level at the minimum
        self.streak = 0

    def hot(self) -> _Hot:
        """The fields a point changes, for a run's locals."""
        return _HOT(self)

    def set_hot(self, hot: _Hot) -> None:
        (
            self.prev,
            self.count,
            self.last_log,
            self.noise,
            self.level,
            self.best,
            self.best_line,
            self.ot_best,
            self.ot_since,
            self.train_at_min,
            self.streak,
        ) = hot

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "n": self.count,
            "best": _finite_or_none(self.best),
            "best_line": self.best_line,
            "level": [self.level, self.noise, self.prev, self.last_log],
            "w": list(self.window),
            "ot": [_finite_or_none(self.ot_best), self.ot_since],
            "of": [self.train_at_min, self.streak],
        }

    def copy(self) -> _Series:
        new = _Series.__new__(_Series)
        new.name, new.count, new.best, new.best_line = self.name, self.count, self.best, self.best_line
        new.level, new.noise, new.prev, new.last_log = self.level, self.noise, self.prev, self.last_log
        new.window = self.window.copy()
        new.ot_best, new.ot_since, new.train_at_min, new.streak = (
            self.ot_best,
            self.ot_since,
            self.train_at_min,
            self.streak,
        )
        return new

    def forked(self, keep: int | None) -> _Series:
        """A run's copy, `hot` left to the run; the window shared if `keep` is None (validation: it keeps none)."""
        new = _Series.__new__(_Series)
        window = self.window
        if keep is not None:
            window = window.copy() if window.maxlen == keep else deque(window, maxlen=keep)
        new.name, new.window = self.name, window
        return new

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> _Series:
        series = cls(str(doc["name"]))
        series.count = int(doc.get("n", 0))
        series.best = _float_or_inf(doc.get("best"))
        series.best_line = doc.get("best_line")
        series.level, series.noise, series.prev, series.last_log = doc.get("level") or [None, None, None, None]
        series.window = deque(float(v) for v in doc.get("w", ()))
        ot = doc.get("ot") or [None, 0]
        series.ot_best, series.ot_since = _float_or_inf(ot[0]), int(ot[1])
        of = doc.get("of") or [None, 0]
        series.train_at_min, series.streak = of[0], int(of[1])
        return series


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _float_or_inf(value: Any) -> float:
    return math.inf if value is None else float(value)


class StreamState:
    """What one (job, log stream) has shown so far, in a few KB whatever the log's length; JSON-serialisable."""

    __slots__ = (  # copied once a batch: slots are copied faster than an instance dict
        "batches",
        "fired",
        "first_ms",
        "ids",
        "last_event",
        "lines",
        "loss",
        "names",
        "point_ms",
        "ts",
        "unparsed",
        "unparsed_sample",
        "val",
    )

    def __init__(self) -> None:
        self.ts: int | None = None  # the newest timestamp folded
        self.ids: list[str] = []  # digests of the ids folded at `ts` (none while `last_event` is alone there)
        self.batches: list[str] = []
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
        """The state saved by `to_json` (another version starts afresh); ValueError, in one line, if not a state."""
        try:
            return cls._read(doc) if doc.get("v") == STATE_VERSION else cls()
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"not a log-rules stream state ({type(exc).__name__}: {exc}); drop it to start afresh"
            ) from None

    @classmethod
    def _read(cls, doc: Mapping[str, Any]) -> StreamState:
        state = cls()
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
        """What `from_json(to_json())` gives, sharing nothing mutable, without the round trip (once a delivery)."""
        new = StreamState.__new__(StreamState)
        new.ts, new.ids, new.batches, new.lines = self.ts, self.ids[:], self.batches[:], self.lines
        new.first_ms, new.point_ms, new.last_event = self.first_ms, self.point_ms, self.last_event
        new.names, new.fired, new.unparsed, new.unparsed_sample = (
            self.names[:],
            self.fired.copy(),
            self.unparsed,
            self.unparsed_sample,
        )
        loss, val = self.loss, self.val
        new.loss = None if loss is None else loss.copy()
        new.val = None if val is None else val.copy()
        return new

    def fork(self) -> StreamState:
        """A copy for `evaluate`: the lists and the dict are shared, never changed in place (a run replaces them)."""
        new = StreamState.__new__(StreamState)
        new.ts, new.ids, new.batches, new.lines = self.ts, self.ids, self.batches, self.lines
        new.first_ms, new.point_ms, new.last_event = self.first_ms, self.point_ms, self.last_event
        new.names, new.fired, new.unparsed, new.unparsed_sample = (
            self.names,
            self.fired,
            self.unparsed,
            self.unparsed_sample,
        )
        new.loss, new.val = self.loss, self.val  # a run folds into its own copies (`_Run.fold`)
        return new

    def mark(self, firing: Firing) -> None:
        """Records a firing made outside `evaluate` (the stall check), so that the rule fires once per stream."""
        if firing.rule not in self.fired:
            self.fired = {**self.fired, firing.rule: firing.line}  # replaced: a fork may share it

    def at_newest(self) -> list[str]:
        """Digests of the ids folded at the newest millisecond: `ids`, or `last_event`'s when it was alone there."""
        if self.ids or self.last_event is None:
            return self.ids
        return [_digest(self.last_event)]


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
        # What every batch's run reads, worked out once a plan rather than once a delivery.
        self.rules_on = {rule: self.on(rule) for rule in LOG_RULE_NAMES}
        self._on_after: dict[tuple[str, ...], dict[str, bool]] = {}
        self._contexts: dict[tuple[tuple[str, ...], tuple[str, ...]], _Context] = {}
        self._nan_ok: dict[tuple[str, str], bool] = {}
        # (roles, NaN on) -> built-in readers' metrics no rule reads then (not a role, no NaN to catch), and the others
        self._quiet: dict[tuple[tuple[str | None, str | None], bool], tuple[set[str], set[str]]] = {}
        self.log_factor, self.warmup = math.log(rules.divergence.factor), rules.divergence.warmup
        self.steps = rules.loss_not_decreasing.num_steps
        self.delta = rules.overtraining.delta
        self.patience_train = rules.overtraining.patience_train
        self.patience_validation = rules.overtraining.patience_validation

    def _resolve(self, name: str, action: LogAction, line: str, overrides: LogRuleOverrides | None) -> None:
        tagged = overrides.action_for(name) if overrides else None
        if tagged is not None and tagged is not action:
            line = f"{line}; tag {contract.LOG_RULES_TAG} {name}={tagged.value}"
            action = tagged
        self.actions[name] = action
        self.settings[name] = line

    def on(self, rule: str) -> bool:
        return self.actions[rule] is not LogAction.IGNORE

    def context(self, state: StreamState) -> _Context:
        """A run's start for a stream's names and firings: names, roles, rules on, NaN on, unread and read metrics."""
        key = (tuple(state.names), tuple(state.fired))
        found = self._contexts.get(key)
        if found is None:
            names = key[0]
            roles = _roles(names, self.loss_metric, self.validation_metric)
            on = self.on_after(state.fired)
            if len(self._contexts) >= MAX_CACHED:
                self._contexts.clear()
            found = self._contexts[key] = (frozenset(names), roles, on, on[NAN], *self.quiet(roles, on[NAN]))
        return found

    def on_after(self, fired: Mapping[str, int | None]) -> dict[str, bool]:
        """Which built-in rules may still fire once `fired` have: shared, a run copies it before a change."""
        key = tuple(fired)
        on = self._on_after.get(key)
        if on is None:
            if len(self._on_after) >= MAX_CACHED:
                self._on_after.clear()
            on = self._on_after[key] = {rule: on and rule not in fired for rule, on in self.rules_on.items()}
        return on

    def nan_eligible(self, metric: str, source: str) -> bool:
        """Whether a non-finite value of `metric` read by `source` is the NaN rule's to judge."""
        key = (metric, source)
        eligible = self._nan_ok.get(key)
        if eligible is None:
            if self.nan_regex is not None:
                eligible = self.nan_regex.search(metric) is not None
            else:
                # The job's definitions name what it cares about; a built-in reader's key must be a loss.
                eligible = source == DEFINED or loss_role(metric) is not None
            if len(self._nan_ok) >= MAX_CACHED * 4:
                self._nan_ok.clear()
            self._nan_ok[key] = eligible
        return eligible

    def quiet(self, roles: tuple[str | None, str | None], nan_on: bool) -> tuple[set[str], set[str]]:
        """(metrics a run need not read, the others) under these roles: filled by `_Run._heard`, shared by runs."""
        key = (roles, nan_on)
        found = self._quiet.get(key)
        if found is None:
            if len(self._quiet) >= MAX_CACHED:
                self._quiet.clear()
            found = self._quiet[key] = (set(), set())
        return found


# Per execution environment: a job's rules and tag give the same plan, its names the same roles, at every delivery.
MAX_CACHED = 256
MAX_FILED = 4096  # metric names a plan files as read or unread by its rules (a log's are few, a hostile log's not)
_PLANS: dict[tuple[int, str | None], tuple[LogRules, _Plan | None]] = {}
_Context = tuple[frozenset[str], tuple[str | None, str | None], dict[str, bool], bool, set[str], set[str]]
_ROLES: dict[tuple[tuple[str, ...], str | None, str | None], tuple[str | None, str | None]] = {}


def _roles(names: tuple[str, ...], loss: str | None, validation: str | None) -> tuple[str | None, str | None]:
    key = (names, loss, validation)
    roles = _ROLES.get(key)
    if roles is None:
        if len(_ROLES) >= MAX_CACHED:
            _ROLES.clear()
        roles = _ROLES[key] = loss_metrics(names, loss=loss, validation=validation)
    return roles


def _plan(rules: LogRules, tag: str | None) -> _Plan | None:
    """The plan for these rules and this log-rules tag value (None: the tag turns them off), made once."""
    key = (id(rules), tag)
    cached = _PLANS.get(key)
    if cached is not None and cached[0] is rules:  # the same object: an id is reused only after it is freed
        return cached[1]
    overrides, _ = job_overrides({} if tag is None else {contract.LOG_RULES_TAG: tag})
    plan = None if overrides is not None and overrides.off else _Plan(rules, overrides)
    if len(_PLANS) >= MAX_CACHED:
        _PLANS.clear()
    _PLANS[key] = (rules, plan)
    return plan


_ID, _TIMESTAMP = attrgetter("id"), attrgetter("timestamp_ms")
_NOTHING: frozenset[str] = frozenset()


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
    """Folds a batch of one stream's events into (a fork of) the state; returns it and the new firings."""
    folded = StreamState() if state is None else state.fork()
    if not rules.enabled or not events:
        return folded, []
    plan = _plan(rules, tags.get(contract.LOG_RULES_TAG) if tags else None)
    if plan is None:
        return folded, []
    ordered = sorted(events, key=_TIMESTAMP)
    # A batch folded before has no event newer than the state's: only then can its digest be among the kept ones.
    old = folded.ts is not None and ordered[-1].timestamp_ms <= folded.ts
    batch = _digest("\n".join(map(_ID, events))) if old and folded.batches else None
    if batch is not None and batch in folded.batches:
        return folded, []
    lines, unparsed = folded.lines, folded.unparsed
    run = _Run(folded, plan, reader)
    run.fold(ordered)
    # Kept for what its events alone would not tell, were it delivered again: a count late lines change too.
    if folded.unparsed != unparsed or (folded.lines != lines and run.crowded):
        folded.batches = [*folded.batches[1 - MAX_BATCHES :], batch or _digest("\n".join(map(_ID, events)))]
    return folded, run.firings


class _Run:
    """One batch being folded. Each rule is a few comparisons per point: this is the hot path of a chatty job."""

    __slots__ = (  # set once a batch: a few, read into locals by `fold`
        "crowded",
        "firings",
        "loud",
        "names",
        "nan_heard",
        "on",
        "plan",
        "quiet",
        "reader",
        "roles",
        "rules",
        "sample_now",
        "start_ts",
        "state",
        "unparsed_at",
    )

    def __init__(self, state: StreamState, plan: _Plan, reader: LineReader) -> None:
        self.state = state
        self.plan = plan
        self.reader = reader
        self.rules = plan.rules
        self.firings: list[Firing] = []
        self.start_ts = state.ts
        self.names, self.roles, self.on, self.nan_heard, self.quiet, self.loud = plan.context(state)
        self.unparsed_at, self.sample_now, self.crowded = -1, False, False

    def fold(self, events: Sequence[LogEvent]) -> None:  # noqa: PLR0912, PLR0915 - one loop: a call costs per point
        """Each event in timestamp order, the series in locals: the Python overhead per point is what the bench counts.

        Every line read in order goes through this loop (a reader's own `scan` too), so each rule has one implementation
        here; the late lines of `_late` feed only the NaN rule and the patterns."""
        lines, fresh = self._late(events)
        state, names, plan = self.state, self.names, self.plan
        point_ms = state.point_ms
        texts, scan, patterns = self.reader.texts or _rescan, self.reader.scan, plan.patterns
        heard, quiet, loud = self._heard, self.quiet, self.loud
        loss_name, val_name = self.roles
        on = self.on
        on_div, on_lnd, on_ot, on_of = on[DIVERGENCE], on[LND], on[OVERTRAINING], on[OVERFIT]
        log_factor, warmup, steps, delta = plan.log_factor, plan.warmup, plan.steps, plan.delta
        patience_train, patience_validation, keep = plan.patience_train, plan.patience_validation, 2 * plan.steps
        loss, val = state.loss, state.val  # their fields in locals for the batch: read several times faster than slots
        (l_prev, l_count, l_last, l_noise, l_level, l_best, l_best_line, l_ot_best, l_ot_since, l_at_min, l_streak) = (
            _FRESH if loss is None else loss.hot()
        )
        (v_prev, v_count, v_last, v_noise, v_level, v_best, v_best_line, v_ot_best, v_ot_since, v_at_min, v_streak) = (
            _FRESH if val is None else val.hot()
        )
        if loss is not None:
            loss = state.loss = loss.forked(keep)
        if val is not None:
            val = state.val = val.forked(None)
        window = _NO_WINDOW if loss is None else loss.window
        groups: Sequence[tuple[str, Sequence[tuple[str, str | float]]]]
        for event in fresh:
            lines += 1
            message = event.message
            if patterns:
                self._patterns(message, event, lines if event.line is None else event.line)
            found = texts(message)
            if found is None:
                continue
            line = event.line
            if line is None:
                line = lines
            if found is RESCAN:  # points of several readers, as floats: each (reader, [(metric, value)])
                points, unparsed = scan(message)
                if unparsed is not None:
                    self._unparsed(unparsed, message)
                groups = [(source, [(metric, value)]) for metric, value, source in points]
            else:
                groups = (found,)
            ts = event.timestamp_ms
            for source, pairs in groups:
                skip = quiet if source != DEFINED else _NOTHING  # a definition's capture is always read (a number?)
                for metric, number in pairs:
                    if metric in skip and metric in names:  # no rule reads it, and it needs no name: its number unread
                        point_ms = ts
                        continue
                    try:
                        value = float(number)
                    except ValueError:
                        if source != DEFINED:
                            raise
                        self._unparsed_text(metric, message, lines)
                        continue
                    point_ms = ts
                    if metric not in names and len(names) < MAX_METRIC_NAMES:
                        loss_name, val_name = self._new_name(metric)
                        names, quiet, loud = self.names, self.quiet, self.loud
                        skip = quiet if source != DEFINED else _NOTHING
                        if state.loss is not loss:  # dropped: the loss is another metric now
                            loss = None
                        if state.val is not val:
                            val = None
                    if value - value:  # nan or an infinity (a finite x - x is 0.0)
                        self._non_finite(metric, value, source, event, line)
                    elif metric == loss_name:
                        if loss is None:
                            loss = state.loss = _Series(str(loss_name), keep)
                            (
                                l_prev,
                                l_count,
                                l_last,
                                l_noise,
                                l_level,
                                l_best,
                                l_best_line,
                                l_ot_best,
                                l_ot_since,
                                l_at_min,
                                l_streak,
                            ) = _FRESH
                            window = loss.window
                        if value == l_prev:
                            continue  # a progress bar repeating its last value
                        l_prev = value
                        l_count += 1
                        window.append(value)
                        if value > 0:
                            log = _log(value)
                            if l_last is not None:
                                step = log - l_last if log > l_last else l_last - log
                                l_noise = step if l_noise is None else l_noise + NOISE_ALPHA * (step - l_noise)
                            l_last = log
                            l_level = log if l_level is None else l_level + LEVEL_ALPHA * (log - l_level)
                            if log >= l_best + log_factor and l_count > warmup and on_div:
                                self._diverged(
                                    loss.name, value, (l_best, l_level, l_noise, l_best_line), (source, event, line)
                                )
                                on_div = self.on[DIVERGENCE]
                            if l_level < l_best and l_count >= 3:
                                l_best, l_best_line = l_level, line
                            smooth = _exp(l_level)  # Overtraining on the level: one low batch is no optimum to beat
                        else:
                            l_last = None  # a loss at or below 0 has no log: Divergence waits for positive points
                            smooth = value
                        if l_count <= warmup:
                            l_ot_best = smooth  # the first points are not judged (as Divergence): the level is settling
                        elif smooth < l_ot_best - delta:
                            l_ot_best, l_ot_since = smooth, 0
                        else:
                            l_ot_since += 1
                            if l_ot_since >= patience_train and val is None and on_ot:
                                what = (loss.name, value, source)
                                self._overtrained(
                                    f"the level of {loss.name}", (l_ot_since, l_ot_best), what, event, line
                                )
                                on_ot = self.on[OVERTRAINING]
                        if l_count % steps == 0 and l_count >= keep and on_lnd:
                            self._loss_not_decreasing(loss.name, window, (value, source), event, line)
                            on_lnd = self.on[LND]
                    elif metric == val_name:
                        if val is None:
                            val = state.val = _Series(str(val_name), keep)
                            (
                                v_prev,
                                v_count,
                                v_last,
                                v_noise,
                                v_level,
                                v_best,
                                v_best_line,
                                v_ot_best,
                                v_ot_since,
                                v_at_min,
                                v_streak,
                            ) = _FRESH
                        if value == v_prev:
                            continue
                        if v_prev is not None:  # the point-to-point noise, in the loss's units (|value - prev|)
                            step = value - v_prev if value > v_prev else v_prev - value
                            v_noise = step if v_noise is None else v_noise + NOISE_ALPHA * (step - v_noise)
                        v_prev = value
                        v_count += 1
                        if value < v_best:  # the training level is taken only where a branch reads it
                            v_best, v_best_line = value, line
                            v_at_min, v_streak = self._train_level(), 0
                        elif on_of:
                            v_streak = self._overfit(
                                (val.name, value, v_count),
                                (v_best, v_best_line, v_noise, v_at_min, v_streak),
                                (source, event, line),
                            )
                            on_of = self.on[OVERFIT]
                        if value < v_ot_best - delta:
                            v_ot_best, v_ot_since = value, 0
                        else:
                            v_ot_since += 1
                        if v_ot_since >= patience_validation and on_ot:
                            what = (val.name, value, source)
                            self._overtrained(val.name, (v_ot_since, v_ot_best), what, event, line)
                            on_ot = self.on[OVERTRAINING]
                    elif skip is quiet and metric not in loud:
                        heard(metric, source)
        if loss is not None:
            loss.set_hot(
                (
                    l_prev,
                    l_count,
                    l_last,
                    l_noise,
                    l_level,
                    l_best,
                    l_best_line,
                    l_ot_best,
                    l_ot_since,
                    l_at_min,
                    l_streak,
                )
            )
        if val is not None:
            val.set_hot(
                (
                    v_prev,
                    v_count,
                    v_last,
                    v_noise,
                    v_level,
                    v_best,
                    v_best_line,
                    v_ot_best,
                    v_ot_since,
                    v_at_min,
                    v_streak,
                )
            )
        self._done(events, lines, point_ms)

    def _done(self, events: Sequence[LogEvent], lines: int, point_ms: int | None) -> None:
        state = self.state
        if lines != state.lines:  # sorted: the last event is the newest folded (a first batch: the first, the first)
            state.first_ms = events[0].timestamp_ms if state.first_ms is None else state.first_ms
            state.ts = events[-1].timestamp_ms
        state.lines, state.point_ms = lines, point_ms
        self._remember_newest(events)

    def _late(self, events: Sequence[LogEvent]) -> tuple[int, Sequence[LogEvent]]:
        """Reads the late events, which come first (sorted); returns the lines folded so far and the events to fold."""
        state = self.state
        lines = state.lines
        start = -1 if self.start_ts is None else self.start_ts
        ahead = 0
        for event in events:
            if event.timestamp_ms > start:
                break
            ahead += 1
        if not ahead:
            return lines, events
        start_ids = frozenset(state.at_newest())
        fresh: list[LogEvent] = []
        for event in islice(events, ahead):
            if event.timestamp_ms < start:  # older than the newest folded before this batch
                self._late_line(event, lines if event.line is None else event.line)
            elif not start_ids or _digest(event.id) not in start_ids:
                fresh.append(event)
        return lines, [*fresh, *islice(events, ahead, None)]

    def _late_line(self, event: LogEvent, line: int | None) -> None:
        """A late line feeds only the rules that do not depend on order: the patterns and NaN (the design)."""
        message = event.message
        if self.plan.patterns:
            self._patterns(message, event, line)
        points, unparsed = self.reader.scan(message)
        if unparsed is not None:
            self._unparsed(unparsed, message)
        for metric, value, source in points:
            if value - value:
                self._non_finite(metric, value, source, event, line)

    def _patterns(self, message: str, event: LogEvent, line: int | None) -> None:
        for name, pattern in self.plan.patterns:
            if name not in self.state.fired and pattern.search(message):
                self._fire(name, (None, None, "pattern"), f"the line matches {pattern.pattern!r}", event, line)

    def _unparsed(self, name: str, message: str) -> None:
        state = self.state
        state.unparsed += 1
        if state.unparsed_sample is None:
            state.unparsed_sample = f"{name}: {message[:MAX_SAMPLE]}"

    def _unparsed_text(self, name: str, message: str, at: int) -> None:
        """`_unparsed` a capture at a time: a line counted once, its sample naming its last capture, as `scan` does."""
        state = self.state
        if at != self.unparsed_at:
            self.unparsed_at, self.sample_now = at, state.unparsed_sample is None
            state.unparsed += 1
        if self.sample_now:
            state.unparsed_sample = f"{name}: {message[:MAX_SAMPLE]}"

    def _remember_newest(self, events: Sequence[LogEvent]) -> None:
        """The ids folded at the newest millisecond: the only ones a later batch can repeat without being late."""
        state = self.state
        ts = state.ts
        if events[-1].timestamp_ms != ts:
            return
        if ts != self.start_ts and (len(events) == 1 or events[-2].timestamp_ms != ts):
            # alone there (the common case); its digest kept too: a guard deployed before reads only `ids`
            state.last_event, state.ids = events[-1].id, [_digest(events[-1].id)]
            return
        at_newest: list[str] = []
        for event in reversed(events):
            if event.timestamp_ms != ts:
                break
            if len(at_newest) == MAX_IDS:
                self.crowded = True  # ids the state cannot keep: a repeat of this batch is told by its digest
                break
            at_newest.append(event.id)
        before = state.at_newest() if ts == self.start_ts else []  # the ids before this batch, at the same millisecond
        digests = [_digest(i) for i in reversed(at_newest)]
        if before:
            known = set(before)
            digests = [d for d in digests if d not in known]
            if not digests:
                return  # all folded before: a repeat changes nothing
            digests = before + digests
            self.crowded = self.crowded or len(digests) > MAX_IDS
        state.last_event = at_newest[0]
        state.ids = digests[-MAX_IDS:]

    def _new_name(self, metric: str) -> tuple[str | None, str | None]:
        """Remembers a metric's name; returns the roles, which a new name can change (a series is then started)."""
        self.names = self.names | {metric}  # replaced: a context shares it
        names = self.state.names = [*self.state.names, metric]  # replaced: a fork shares it
        plan = self.plan
        roles = _roles(tuple(names), plan.loss_metric, plan.validation_metric)
        if roles != self.roles:
            self.roles = roles
            self.nan_heard = self.on[NAN]  # a metric no rule read may be a loss now: filed again
            self.quiet, self.loud = self.plan.quiet(roles, self.nan_heard)
            state = self.state
            if state.loss is not None and state.loss.name != roles[0]:
                state.loss = None
            if state.val is not None and state.val.name != roles[1]:
                state.val = None
        return roles

    def _fire(
        self, rule: str, what: tuple[str | None, float | None, str], detail: str, event: LogEvent, line: int | None
    ) -> None:
        """Records the firing; `what` is (metric, value, reader)."""
        metric, value, reader = what
        self.state.fired = {**self.state.fired, rule: line}  # replaced: a fork shares it
        self.on = {**self.on, rule: False}  # the plan's, shared until now
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

    def _non_finite(self, metric: str, value: float, source: str, event: LogEvent, line: int | None) -> None:
        if not self.on[NAN] or (self.rules.nan.only_nan and value == value):  # noqa: PLR0124 - an infinity
            return
        if self.plan.nan_eligible(metric, source):
            self._fire(NAN, (metric, value, source), f"{metric} is {_shown(value)}", event, line)

    def _heard(self, metric: str, source: str) -> None:
        """Files a built-in reader's metric that is not a role: quiet if no NaN of it can fire (under these roles)."""
        quiet, loud = self.quiet, self.loud
        if len(quiet) + len(loud) >= MAX_FILED:  # a log of ever new keys: filed again from nothing (all read meanwhile)
            quiet.clear()
            loud.clear()
        (loud if self.nan_heard and self.plan.nan_eligible(metric, source) else quiet).add(metric)

    def _diverged(
        self, name: str, value: float, series: tuple[float, float | None, float | None, int | None], at: _At
    ) -> None:
        """The point is factor x the best level: a stop if the level climbed too, half-way and out of its noise."""
        best, level, noise, best_line = series
        level = level or best
        margin = max(self.plan.log_factor / 2, NOISE_MARGIN * (noise or 0.0) / MEAN_ABS_STEP)
        if level - best < margin:
            return
        source, event, line = at
        where = f" (line {best_line})" if best_line is not None else ""
        detail = (
            f"{name} {value:.4g} is {value / math.exp(best):.1f}x its best level "
            f"{math.exp(best):.4g}{where}, and its level has climbed {math.exp(level - best):.1f}x"
        )
        self._fire(DIVERGENCE, (name, value, source), detail, event, line)

    def _loss_not_decreasing(
        self, name: str, window: deque[float], point: tuple[float, str], event: LogEvent, line: int | None
    ) -> None:
        rule, steps = self.rules.loss_not_decreasing, self.plan.steps
        values = list(window)
        before = sum(values[:steps]) / steps
        now = sum(values[steps:]) / steps
        if before > 0 and now > before * (1 - rule.diff_percent / 100):
            change = (now / before - 1) * 100
            how = "rose" if change > rule.increase_threshold_percent else "changed"
            detail = (
                f"the mean of {name} over the last {steps} points ({now:.4g}) {how} by {change:+.2f} % "
                f"against the {steps} before ({before:.4g}): less than the {rule.diff_percent:g} % decrease required"
            )
            value, source = point
            self._fire(LND, (name, value, source), detail, event, line)

    def _overtrained(
        self,
        what_improves: str,
        since: tuple[int, float],
        what: tuple[str, float, str],
        event: LogEvent,
        line: int | None,
    ) -> None:
        ot_since, ot_best = since
        detail = f"{what_improves} has not improved by {self.plan.delta:g} in {ot_since} points (best {ot_best:.4g})"
        self._fire(OVERTRAINING, what, detail, event, line)

    def _train_level(self) -> float | None:
        """The training loss now: the mean of its last num_steps points (one point is too noisy to compare)."""
        loss = self.state.loss
        if loss is None or not loss.window:
            return None
        window, steps = loss.window, self.plan.steps
        if len(window) <= steps:
            return sum(window) / len(window)
        return sum(islice(window, len(window) - steps, None)) / steps

    def _overfit(
        self,
        point: tuple[str, float, int],
        series: tuple[float, int | None, float | None, float | None, int],
        at: _At,
    ) -> int:
        """The validation series' new streak of points risen out of its noise since its minimum (firing at patience)."""
        name, value, count = point
        best, best_line, noise, train_at_min, streak = series
        rule = self.rules.overfit
        train = self._train_level()
        if count <= rule.start_step or train is None or train <= 0 or train_at_min is None:
            return 0
        # growth counts the validation loss rising, not the training loss falling (docs/design/log-rules.md)
        rise = value - best
        growth = rise / train
        noisy = rise < NOISE_MARGIN * (noise or 0.0) / MEAN_ABS_STEP
        streak = streak + 1 if train <= train_at_min and growth > rule.ratio_threshold and not noisy else 0
        if streak >= rule.patience:
            source, event, line = at
            where = f" (line {best_line})" if best_line is not None else ""
            detail = (
                f"{name} {value:.4g} rose from its minimum {best:.4g}{where} while the training loss "
                f"fell to {train:.4g}: up by {growth:.2f} of the training loss for {rule.patience} points"
            )
            self._fire(OVERFIT, (name, value, source), detail, event, line)
        return streak


def _rescan(message: str) -> TextPoints:
    """`texts` for a reader whose own `scan` reads every line."""
    return RESCAN


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
