"""The guard's one configuration surface: `GuardConfig`.

The CDK app reads it from `cdk.json` context (or a per-account file), validates it at synth and
hands it to the functions as one JSON environment value, which they validate again at start-up.

It is written with frozen dataclasses and a small strict reader rather than pydantic: pydantic
adds ~50 ms to every cold start (measured beside boto3 on these machines), and cold start is
part of the guard's reaction time. The reader rejects unknown keys (typos are the commonest
configuration mistake) and reports every problem at once, each with its field path.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from training_guard import contract


class Action(StrEnum):
    """What a rule finding leads to."""

    STOP = "stop"
    NOTIFY = "notify"
    IGNORE = "ignore"


class ConfigError(ValueError):
    """The configuration is invalid; `problems` lists `field.path: message` lines."""

    def __init__(self, problems: list[str], source: str = "training-guard configuration") -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source} is invalid:\n{lines}")


@dataclass(frozen=True)
class RulePolicy:
    debugger_default: Action = Action.STOP
    profiler_default: Action = Action.NOTIFY
    # Per rule (RuleConfigurationName), overriding the defaults above.
    actions: Mapping[str, Action] = field(default_factory=dict)


@dataclass(frozen=True)
class JobTags:
    exempt: str = contract.DEFAULT_EXEMPT_TAG
    notify_only: str = contract.DEFAULT_NOTIFY_ONLY_TAG


@dataclass(frozen=True)
class JobSelection:
    include_prefixes: tuple[str, ...] = ()  # empty: every job
    exclude_prefixes: tuple[str, ...] = ()


@dataclass(frozen=True)
class LifecycleNotifications:
    failed: bool = True
    stopped: bool = True
    spot_interrupted: bool = True
    completed: bool = False


SEVERITIES = ("info", "warning", "critical")  # in rising order
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,39}$")
_SLACK_ID_PATTERN = re.compile(r"^[A-Z0-9]{1,255}$")
_METRIC_PATTERN = re.compile(r"^[A-Za-z0-9_.:/\-]{1,255}$")
# Metrics Insights alarms: 200 per account and region; the guard keeps to a share of that.
MAX_FLEET_GUARDS = 50


@dataclass(frozen=True)
class SlackWebhook:
    # The Secrets Manager secret holding the webhook URL; None: the stack creates one.
    secret_name: str | None = None


@dataclass(frozen=True)
class SlackConfig:
    """Slack incoming webhooks by name, and which notifications go to which."""

    webhooks: Mapping[str, SlackWebhook] = field(default_factory=dict)
    default: str | None = None  # the webhook for notifications no route below claims
    by_severity: Mapping[str, str] = field(default_factory=dict)  # severity -> webhook name
    team_tag: str | None = None  # a job tag whose value names a webhook (e.g. team=vision)
    min_severity: str = "info"

    @property
    def enabled(self) -> bool:
        return bool(self.webhooks)

    def route(self, severity: str, tags: Mapping[str, str]) -> list[str]:
        """The webhooks one notification goes to (each at most once), in a stable order."""
        if not self.enabled or _rank(severity) < _rank(self.min_severity):
            return []
        chosen: list[str] = []
        team = tags.get(self.team_tag) if self.team_tag else None
        if team in self.webhooks:
            chosen.append(str(team))
        by_severity = self.by_severity.get(severity)
        if by_severity and by_severity not in chosen:
            chosen.append(by_severity)
        if not chosen and self.default:
            chosen.append(self.default)
        return chosen


@dataclass(frozen=True)
class QDeveloperConfig:
    """Amazon Q Developer in chat applications: a Slack channel subscribed to the topic."""

    slack_workspace_id: str
    slack_channel_id: str


STATISTICS = ("AVG", "MIN", "MAX", "SUM", "COUNT")
COMPARISONS = {  # configuration spelling -> CloudWatch ComparisonOperator
    ">": "GreaterThanThreshold",
    ">=": "GreaterThanOrEqualToThreshold",
    "<": "LessThanThreshold",
    "<=": "LessThanOrEqualToThreshold",
}
MAX_EVALUATION_MINUTES = 180  # Metrics Insights alarms evaluate the last 3 hours only


@dataclass(frozen=True)
class MetricGuard:
    """One fleet-wide alarm on a training metric: one Metrics Insights multi-time-series alarm."""

    name: str
    metric: str
    threshold: float
    statistic: str = "MAX"
    comparison: str = ">"
    datapoints: int = 3  # ... out of `periods` one-minute periods
    periods: int = 3
    action: Action = Action.NOTIFY
    job_prefix: str | None = None  # only jobs whose names start with this
    job_tag: str | None = None  # only jobs carrying this tag key

    @property
    def instance_metric(self) -> bool:
        return self.metric in contract.INSTANCE_METRICS

    def describe(self) -> str:
        return (
            f"metric_guards.{self.name}: {self.statistic}({self.metric}) {self.comparison} {self.threshold:g} "
            f"for {self.datapoints} of {self.periods} min -> {self.action.value}"
        )


@dataclass(frozen=True)
class StallGuard:
    """A running job that declared metrics but published none for `minutes` is reported (or stopped)."""

    minutes: int = 30
    action: Action = Action.NOTIFY


def _rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else 0


@dataclass(frozen=True)
class GuardConfig:
    rules: RulePolicy = field(default_factory=RulePolicy)
    dry_run: bool = False
    tags: JobTags = field(default_factory=JobTags)
    # Findings within this many minutes of the job's training start do not stop it yet.
    min_training_minutes: int = 0
    jobs: JobSelection = field(default_factory=JobSelection)
    notifications: LifecycleNotifications = field(default_factory=LifecycleNotifications)
    # E-mail addresses subscribed to the notification topic at deploy time.
    emails: tuple[str, ...] = ()
    # How long a handled transition is remembered (duplicates arrive within minutes; days is ample).
    dedup_ttl_days: int = 14
    slack: SlackConfig = field(default_factory=SlackConfig)
    q_developer: QDeveloperConfig | None = None
    metric_guards: tuple[MetricGuard, ...] = ()
    stall: StallGuard | None = None
    per_job_alarms: bool = True  # honour training-guard:alarm:<metric> tags on jobs
    # When set, the guard may stop only jobs carrying this tag with the value "true" (enforced by
    # IAM with an aws:ResourceTag condition, and by the policy, which reports would-have-stopped).
    stop_requires_tag: str | None = None
    sweep_minutes: int = 5

    def metric_guard(self, name: str) -> MetricGuard | None:
        return next((g for g in self.metric_guards if g.name == name), None)

    def action_for(self, rule_name: str, *, profiler: bool) -> Action:
        explicit = self.rules.actions.get(rule_name)
        if explicit is not None:
            return explicit
        return self.rules.profiler_default if profiler else self.rules.debugger_default

    def selects(self, job_name: str) -> bool:
        if self.jobs.include_prefixes and not job_name.startswith(self.jobs.include_prefixes):
            return False
        return not job_name.startswith(self.jobs.exclude_prefixes) if self.jobs.exclude_prefixes else True

    def to_json(self) -> str:
        """The canonical serialized form (what the functions receive)."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, source: str = "training-guard configuration") -> GuardConfig:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError([f"(document): not valid JSON: {exc}"], source) from None
        return cls.from_dict(data, source)

    @classmethod
    def from_dict(cls, data: Any, source: str = "training-guard configuration") -> GuardConfig:
        problems: list[str] = []
        root = _Reader(data, "", problems)
        config = _read_config(root)
        if problems:
            raise ConfigError(problems, source)
        return config


def _read_config(r: _Reader) -> GuardConfig:
    rules = r.section("rules")
    actions_reader = rules.section("actions")
    actions = {
        name: action
        for name in actions_reader.names()
        if (action := actions_reader.choice(name, Action, None)) is not None
    }
    rule_policy = RulePolicy(
        debugger_default=rules.choice("debugger_default", Action, Action.STOP) or Action.STOP,
        profiler_default=rules.choice("profiler_default", Action, Action.NOTIFY) or Action.NOTIFY,
        actions=actions,
    )
    rules.done(("debugger_default", "profiler_default", "actions"))

    tags = r.section("tags")
    job_tags = JobTags(
        exempt=tags.text("exempt", contract.DEFAULT_EXEMPT_TAG),
        notify_only=tags.text("notify_only", contract.DEFAULT_NOTIFY_ONLY_TAG),
    )
    tags.done(("exempt", "notify_only"))

    jobs = r.section("jobs")
    selection = JobSelection(
        include_prefixes=jobs.text_list("include_prefixes"),
        exclude_prefixes=jobs.text_list("exclude_prefixes"),
    )
    jobs.done(("include_prefixes", "exclude_prefixes"))

    notes = r.section("notifications")
    lifecycle = LifecycleNotifications(
        failed=notes.flag("failed", True),
        stopped=notes.flag("stopped", True),
        spot_interrupted=notes.flag("spot_interrupted", True),
        completed=notes.flag("completed", False),
    )
    notes.done(("failed", "stopped", "spot_interrupted", "completed"))

    emails = r.text_list("emails")
    for i, email in enumerate(emails):
        if "@" not in email or email.startswith("@") or email.endswith("@") or " " in email:
            r.problem(f"emails[{i}]", f"not an e-mail address: {email!r}")

    slack = _read_slack(r.section("slack"))
    q_developer = _read_q_developer(r) if r.has("q_developer") else None
    metric_guards = _read_metric_guards(r)
    stall = _read_stall(r.section("stall")) if r.has("stall") else None

    config = GuardConfig(
        rules=rule_policy,
        dry_run=r.flag("dry_run", False),
        tags=job_tags,
        min_training_minutes=r.integer("min_training_minutes", 0, minimum=0, maximum=7 * 24 * 60),
        jobs=selection,
        notifications=lifecycle,
        emails=emails,
        dedup_ttl_days=r.integer("dedup_ttl_days", 14, minimum=1, maximum=365),
        slack=slack,
        q_developer=q_developer,
        metric_guards=metric_guards,
        stall=stall,
        per_job_alarms=r.flag("per_job_alarms", True),
        stop_requires_tag=r.optional_text("stop_requires_tag"),
        sweep_minutes=r.integer("sweep_minutes", 5, minimum=1, maximum=60),
    )
    r.done(
        (
            "rules",
            "dry_run",
            "tags",
            "min_training_minutes",
            "jobs",
            "notifications",
            "emails",
            "dedup_ttl_days",
            "slack",
            "q_developer",
            "metric_guards",
            "stall",
            "per_job_alarms",
            "stop_requires_tag",
            "sweep_minutes",
        )
    )
    return config


def _read_metric_guards(root: _Reader) -> tuple[MetricGuard, ...]:
    guards: list[MetricGuard] = []
    for r in root.items("metric_guards"):
        name = r.text("name", "")
        if name and not _NAME_PATTERN.match(name):
            r.problem("name", "guard names are 1-40 letters, digits or '-', starting with a letter or digit")
        if name.startswith("job-"):
            r.problem("name", "names starting with 'job-' are reserved for per-job alarms")
        if name in {g.name for g in guards}:
            r.problem("name", f"duplicate guard name {name!r}")
        metric = r.text("metric", "")
        if metric and not _METRIC_PATTERN.match(metric):
            r.problem("metric", f"not a metric name: {metric!r}")
        statistic = r.text("statistic", "MAX").upper()
        if statistic not in STATISTICS:
            r.problem("statistic", f"must be one of {', '.join(STATISTICS)}, got {statistic!r}")
        comparison = r.text("comparison", ">")
        if comparison not in COMPARISONS:
            r.problem("comparison", f"must be one of {', '.join(COMPARISONS)}, got {comparison!r}")
        periods = r.integer("periods", 3, minimum=1, maximum=MAX_EVALUATION_MINUTES)
        datapoints = r.integer("datapoints", min(3, periods), minimum=1, maximum=MAX_EVALUATION_MINUTES)
        if datapoints > periods:
            r.problem("datapoints", f"cannot exceed periods ({datapoints} > {periods})")
        guards.append(
            MetricGuard(
                name=name,
                metric=metric,
                threshold=r.number("threshold"),
                statistic=statistic,
                comparison=comparison,
                datapoints=datapoints,
                periods=periods,
                action=r.choice("action", Action, Action.NOTIFY) or Action.NOTIFY,
                job_prefix=r.optional_text("job_prefix"),
                job_tag=r.optional_text("job_tag"),
            )
        )
        r.done(
            (
                "name",
                "metric",
                "threshold",
                "statistic",
                "comparison",
                "datapoints",
                "periods",
                "action",
                "job_prefix",
                "job_tag",
            )
        )
        if guards[-1].action is Action.IGNORE:
            r.problem("action", "a metric guard either notifies or stops: use notify or stop")
    if len(guards) > MAX_FLEET_GUARDS:
        root.problem("metric_guards", f"at most {MAX_FLEET_GUARDS} guards (Metrics Insights alarms are limited)")
    return tuple(guards)


def _read_stall(r: _Reader) -> StallGuard:
    stall = StallGuard(
        minutes=r.integer("minutes", 30, minimum=5, maximum=24 * 60),
        action=r.choice("action", Action, Action.NOTIFY) or Action.NOTIFY,
    )
    if stall.action is Action.IGNORE:
        r.problem("action", "use notify or stop (or set stall to null to turn it off)")
    r.done(("minutes", "action"))
    return stall


def _read_slack(r: _Reader) -> SlackConfig:
    hooks = r.section("webhooks")
    webhooks: dict[str, SlackWebhook] = {}
    for name in hooks.names():
        if not _NAME_PATTERN.match(name):
            hooks.problem(name, "webhook names are 1-40 letters, digits or '-', starting with a letter or digit")
            continue
        hook = hooks.section(name)
        secret = hook.optional_text("secret_name")
        hook.done(("secret_name",))
        webhooks[name] = SlackWebhook(secret_name=secret)
    default = r.optional_text("default")
    if default is None and "default" in webhooks:
        default = "default"
    if default is not None and default not in webhooks:
        r.problem("default", f"names no webhook in slack.webhooks (have: {', '.join(webhooks) or 'none'})")
    routes = r.section("by_severity")
    by_severity: dict[str, str] = {}
    for severity in routes.names():
        target = routes.optional_text(severity)
        if severity not in SEVERITIES:
            routes.problem(severity, f"not a severity; use {', '.join(SEVERITIES)}")
        elif target not in webhooks:
            routes.problem(severity, f"names no webhook in slack.webhooks: {target!r}")
        else:
            by_severity[severity] = target
    min_severity = r.text("min_severity", "info")
    if min_severity not in SEVERITIES:
        r.problem("min_severity", f"must be one of {', '.join(SEVERITIES)}, got {min_severity!r}")
        min_severity = "info"
    config = SlackConfig(
        webhooks=webhooks,
        default=default,
        by_severity=by_severity,
        team_tag=r.optional_text("team_tag"),
        min_severity=min_severity,
    )
    if webhooks and default is None and not config.team_tag and not by_severity:
        r.problem("default", "set a default webhook, or routes (by_severity, team_tag), or no message is ever sent")
    r.done(("webhooks", "default", "by_severity", "team_tag", "min_severity"))
    return config


def _read_q_developer(root: _Reader) -> QDeveloperConfig:
    r = root.section("q_developer")
    ids = {}
    for key in ("slack_workspace_id", "slack_channel_id"):
        value = r.text(key, "")
        if value and not _SLACK_ID_PATTERN.match(value):
            r.problem(key, f"must be a Slack ID (capital letters and digits, e.g. T0123ABCD), got {value!r}")
        ids[key] = value
    r.done(("slack_workspace_id", "slack_channel_id"))
    return QDeveloperConfig(**ids)


class _Reader:
    """Reads one JSON object strictly, recording problems with their dotted field paths."""

    def __init__(self, data: Any, path: str, problems: list[str]) -> None:
        self._path = path
        self._problems = problems
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            self.problem("", f"must be an object, got {_type_name(data)}")
            data = {}
        self._data: Mapping[str, Any] = data

    def _where(self, key: str) -> str:
        if not key:
            return self._path or "(document)"
        return f"{self._path}.{key}" if self._path else key

    def problem(self, key: str, message: str) -> None:
        self._problems.append(f"{self._where(key)}: {message}")

    def names(self) -> list[str]:
        return [str(k) for k in self._data]

    def section(self, key: str) -> _Reader:
        return _Reader(self._data.get(key), self._where(key), self._problems)

    def flag(self, key: str, default: bool) -> bool:
        value = self._data.get(key, default)
        if not isinstance(value, bool):
            self.problem(key, f"must be true or false, got {value!r}")
            return default
        return value

    def integer(self, key: str, default: int, *, minimum: int, maximum: int) -> int:
        value = self._data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(key, f"must be a whole number, got {value!r}")
            return default
        if not minimum <= value <= maximum:
            self.problem(key, f"must be between {minimum} and {maximum}, got {value}")
            return default
        return value

    def items(self, key: str) -> list[_Reader]:
        """A list of objects, each read with its index in the path (`metric_guards[0].name`)."""
        value = self._data.get(key, [])
        if not isinstance(value, list):
            self.problem(key, f"must be a list, got {_type_name(value)}")
            return []
        return [_Reader(item, f"{self._where(key)}[{i}]", self._problems) for i, item in enumerate(value)]

    def number(self, key: str) -> float:
        value = self._data.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:  # noqa: PLR0124 - NaN
            self.problem(key, f"must be a number, got {value!r}")
            return 0.0
        if abs(value) == float("inf"):
            self.problem(key, "must be finite")
            return 0.0
        return float(value)

    def has(self, key: str) -> bool:
        return self._data.get(key) is not None

    def optional_text(self, key: str) -> str | None:
        value = self._data.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.problem(key, f"must be a non-empty string, got {value!r}")
            return None
        return value

    def text(self, key: str, default: str) -> str:
        value = self._data.get(key, default)
        if not isinstance(value, str) or not value.strip():
            self.problem(key, f"must be a non-empty string, got {value!r}")
            return default
        return value

    def text_list(self, key: str) -> tuple[str, ...]:
        value = self._data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.problem(key, f"must be a list of non-empty strings, got {value!r}")
            return ()
        return tuple(value)

    def choice(self, key: str, enum: type[Action], default: Action | None) -> Action | None:
        value = self._data.get(key)
        if value is None and key not in self._data:
            return default
        allowed = [m.value for m in enum]
        if value not in allowed:
            self.problem(key, f"must be one of {', '.join(allowed)}, got {value!r}")
            return default
        return enum(value)

    def done(self, known: tuple[str, ...]) -> None:
        for key in self._data:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                allowed = ", ".join(known)
                self.problem(str(key), f"unknown setting{hint}; known settings here: {allowed}")


def _type_name(value: Any) -> str:
    return {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )
