"""The guard's one configuration surface: `GuardConfig`, validated at synth and again at start-up.

Each setting is declared once by `setting()`; the reader, the README's table and `configs/schema.json` derive from it.
A small strict reader, not pydantic (~50 ms of cold start, measured): unknown keys refused, every problem reported."""

from __future__ import annotations

import json
import math
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, asdict, field, fields, is_dataclass
from enum import StrEnum
from typing import Any, TypeVar

from training_guard import contract
from training_guard.config import json_words
from training_guard.config.frozen import frozen

_T = TypeVar("_T")


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


@frozen
class DerivedDefault:
    """A default that depends on sibling settings: `rule(the values read so far)`, described in words."""

    rule: Callable[[Mapping[str, Any]], Any]
    describe: str


@frozen
class Setting:
    """Everything about one setting but its name, type (the annotation) and default."""

    doc: str
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] | None = None  # allowed values (for an enum: a subset of its values)
    ignore_case: bool = False  # compared upper-cased, stored upper-cased
    pattern: str | None = None  # a text value (or each item of a list of text) must match it whole
    pattern_error: str | None = None  # the message when it does not; `{value!r}` is the value
    max_items: int | None = None
    keys: tuple[str, ...] | None = None
    key_pattern: str | None = None  # ... or the pattern its keys must match
    key_error: str | None = None
    why: str | None = None  # appended to a bound, choice or size violation
    derived_default: DerivedDefault | None = None


_SETTING = "training_guard.setting"


def setting(
    default: Any = MISSING,
    *,
    factory: Callable[[], Any] | None = None,
    doc: str,
    minimum: int | None = None,
    maximum: int | None = None,
    choices: tuple[str, ...] | None = None,
    ignore_case: bool = False,
    pattern: str | None = None,
    pattern_error: str | None = None,
    max_items: int | None = None,
    keys: tuple[str, ...] | None = None,
    key_pattern: str | None = None,
    key_error: str | None = None,
    why: str | None = None,
    derived_default: DerivedDefault | None = None,
) -> Any:
    """A configuration field: the default (or `factory`; with neither, required) plus its declaration."""
    meta = {
        _SETTING: Setting(
            doc=doc,
            minimum=minimum,
            maximum=maximum,
            choices=choices,
            ignore_case=ignore_case,
            pattern=pattern,
            pattern_error=pattern_error,
            max_items=max_items,
            keys=keys,
            key_pattern=key_pattern,
            key_error=key_error,
            why=why,
            derived_default=derived_default,
        )
    }
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    if default is MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


# Checks that span fields of one class: each yields (field path relative to the object, message).
_Check = Callable[[Any], Iterator[tuple[str, str]]]
_VALIDATORS: dict[type, list[_Check]] = {}


def _validator(cls: type[_T]) -> Callable[[Callable[[_T], Iterator[tuple[str, str]]]], _Check]:
    def register(check: Callable[[_T], Iterator[tuple[str, str]]]) -> _Check:
        _VALIDATORS.setdefault(cls, []).append(check)
        return check

    return register


@frozen
class RulePolicy:
    debugger_default: Action = setting(Action.STOP, doc="what a Debugger rule's `IssuesFound` leads to")
    profiler_default: Action = setting(Action.NOTIFY, doc="the same for Profiler rules")
    actions: Mapping[str, Action] = setting(
        factory=dict,
        doc='per rule (its `RuleConfigurationName`), overriding the defaults, e.g. `{"LossNotDecreasing": "notify"}`',
    )


@frozen
class JobTags:
    exempt: str = setting(
        contract.DEFAULT_EXEMPT_TAG,
        doc="a job with this tag (any value but `false`/`0`/`no`/`off`) is never stopped",
    )
    notify_only: str = setting(contract.DEFAULT_NOTIFY_ONLY_TAG, doc="the same, worded as notify-only")
    budget_usd: str = setting(
        contract.DEFAULT_BUDGET_TAG,
        doc="a job with this tag (a number, e.g. `500`) is capped at that many US dollars at list price: "
        "warned at `budget_defaults.warn_at` of it, then handled as `budget_defaults.action`",
    )


@frozen
class JobSelection:
    include_prefixes: tuple[str, ...] = setting(
        (), doc="only jobs whose names start with one of these are guarded (empty: every job)"
    )
    exclude_prefixes: tuple[str, ...] = setting((), doc="jobs whose names start with one of these are ignored")


@frozen
class LifecycleNotifications:
    failed: bool = setting(True, doc="notify when a job fails")
    stopped: bool = setting(True, doc="notify when a job is stopped (by the guard or anyone else)")
    spot_interrupted: bool = setting(True, doc="notify when a spot job is interrupted")
    completed: bool = setting(False, doc="notify when a job completes")


SEVERITIES = ("info", "warning", "critical")  # in rising order
_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]{0,39}$"
_SLACK_ID_PATTERN = r"^[A-Z0-9]{1,255}$"
_METRIC_PATTERN = r"^[A-Za-z0-9_.:/\-]{1,255}$"
# What the reader has always accepted as an address: an '@' inside, no space (SNS confirms the rest).
_EMAIL_PATTERN = r"^[^@ ][^ ]*@[^ ]*[^@ ]$"
# Secrets Manager names: ASCII letters, digits and /_+=.@- (CreateSecret's Name,
# https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/secretsmanager/aws.sdk.kotlin.services.secretsmanager.model/-create-secret-request/name.html);
# the guard keeps them to 100 characters so that 20 of them fit in the notifier's 4 KB environment.
_SECRET_NAME_PATTERN = r"^[A-Za-z0-9/_+=.@-]{1,100}$"  # noqa: S105 - a pattern, not a password
MAX_WEBHOOKS = 20
_ACCOUNT_PATTERN = r"^[0-9]{12}$"
# An OU ID, or the organization's root (the StackSet's deployment targets, and the units chat is routed by)
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_StackSetAutoDeploymentTargetSummary.html).
_DEPLOYMENT_TARGET_PATTERN = r"^(ou-[a-z0-9]{4,32}-[a-z0-9]{8,32}|r-[a-z0-9]{4,32})$"
# arn:<partition>:lambda:<region>:<account>:layer:<name>:<version>
_LAYER_ARN_PATTERN = r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:[0-9]{12}:layer:[A-Za-z0-9_-]{1,140}:[0-9]{1,10}$"
# Metrics Insights alarms: 200 per account and region; the guard keeps to a share of that.
MAX_FLEET_GUARDS = 50


@frozen
class SlackWebhook:
    secret_name: str | None = setting(
        None,
        doc="the name of the Secrets Manager secret holding the webhook URL (null: the stack creates one)",
        pattern=_SECRET_NAME_PATTERN,
        pattern_error="a secret name is 1-100 letters, digits or /_+=.@- (the name, not the ARN): {value!r}",
    )


class SlackMode(StrEnum):
    """How the guard posts to Slack."""

    WEBHOOK = "webhook"  # incoming webhooks: one message per notification, no threads, no buttons
    APP = "app"  # a Slack app's bot token: one living thread per job, buttons that act


# A Slack user ID as the payloads name it: "usually begins with U, it is also possible to encounter user IDs beginning
# with W. We recommend considering the string an opaque value" (https://api.slack.com/types/user). Only the shape the
# guard can compare exactly is checked: capital letters and digits, as in a button click's `user.id`.
_SLACK_USER_PATTERN = _SLACK_ID_PATTERN
MAX_APP_CHANNELS = 50
MAX_ALLOWED_USERS = 100


@frozen
class SlackAppConfig:
    """Slack app mode: channels by name (the routes below name them), and who may press the guard's buttons."""

    channels: Mapping[str, str] = setting(
        factory=dict,
        doc="channel name -> Slack channel ID (e.g. `C0123ABCD`); the routes of `slack` name these in app mode",
        max_items=MAX_APP_CHANNELS,
        why="each channel keeps one thread per job in the state table; a guard posts to a few",
        key_pattern=_NAME_PATTERN,
        key_error="channel names are 1-40 letters, digits or '-', starting with a letter or digit",
        pattern=_SLACK_ID_PATTERN,
        pattern_error="must be a Slack channel ID (capital letters and digits, e.g. C0123ABCD), got {value!r}",
    )
    allowed_users: tuple[str, ...] = setting(
        (),
        doc="Slack user IDs (e.g. `U0123ABCD`) whose clicks on Stop now, Snooze, Exempt and Mute are acted on; "
        "anyone else is told they are not allowed",
        pattern=_SLACK_USER_PATTERN,
        pattern_error="must be a Slack user ID (capital letters and digits, e.g. U0123ABCD), got {value!r}",
        max_items=MAX_ALLOWED_USERS,
        why="the interaction function's environment lists them, and Lambda allows 4 KB of environment",
    )
    bot_token_secret_name: str | None = setting(
        None,
        doc="the Secrets Manager secret holding the bot token (`xoxb-...`) (null: the stack creates one)",
        pattern=_SECRET_NAME_PATTERN,
        pattern_error="a secret name is 1-100 letters, digits or /_+=.@- (the name, not the ARN): {value!r}",
    )
    signing_secret_name: str | None = setting(
        None,
        doc="the Secrets Manager secret holding the app's signing secret (null: the stack creates one)",
        pattern=_SECRET_NAME_PATTERN,
        pattern_error="a secret name is 1-100 letters, digits or /_+=.@- (the name, not the ARN): {value!r}",
    )


@_validator(SlackAppConfig)
def _check_slack_app(app: SlackAppConfig) -> Iterator[tuple[str, str]]:
    seen: set[str] = set()
    for i, user in enumerate(app.allowed_users):
        if user in seen:
            yield f"allowed_users[{i}]", f"duplicate user {user}"
        seen.add(user)
    if app.bot_token_secret_name is not None and app.bot_token_secret_name == app.signing_secret_name:
        yield "signing_secret_name", "the bot token and the signing secret are two secrets: name two"


def _default_target(slack: Mapping[str, Any]) -> str | None:
    app = slack.get("app")
    mode = slack.get("mode")
    targets = app.channels if mode is SlackMode.APP and app is not None else slack["webhooks"]
    return "default" if "default" in targets else None


@frozen
class SlackConfig:
    """Slack: incoming webhooks or a Slack app's channels by name, and which notifications go to which."""

    mode: SlackMode = setting(
        SlackMode.WEBHOOK,
        doc="`webhook`: incoming webhooks (`webhooks`); `app`: a Slack app's bot token posts one thread per job "
        "with buttons (`app`); the routes below name webhooks or app channels accordingly",
    )
    webhooks: Mapping[str, SlackWebhook] = setting(
        factory=dict,
        doc="Slack incoming webhooks by name (the shipped `cdk.json` names one, `default`); webhook mode only",
        max_items=MAX_WEBHOOKS,
        why="the notifier's environment names each webhook's secret, and Lambda allows 4 KB of environment",
        key_pattern=_NAME_PATTERN,
        key_error="webhook names are 1-40 letters, digits or '-', starting with a letter or digit",
    )
    app: SlackAppConfig | None = setting(None, doc="app mode: the app's channels and who may use its buttons")
    default: str | None = setting(
        None,
        doc="the webhook (app mode: channel) for notifications no route below claims",
        derived_default=DerivedDefault(
            _default_target, "`default` if a webhook (app mode: a channel) has that name, else `null`"
        ),
    )
    by_severity: Mapping[str, str] = setting(
        factory=dict,
        doc="severity -> webhook (app mode: channel) name",
        keys=SEVERITIES,
        key_error=f"not a severity; use {', '.join(SEVERITIES)}",
    )
    team_tag: str | None = setting(
        None, doc="a job tag whose value names a webhook (app mode: a channel) (e.g. `team=vision`)"
    )
    by_account: Mapping[str, str] = setting(
        factory=dict,
        doc="with an `organization`: account ID -> webhook (app mode: channel) name, for notifications about that "
        "account's jobs (the hub's or a member's)",
        key_pattern=_ACCOUNT_PATTERN,
        key_error="not an account ID (12 digits)",
    )
    by_organizational_unit: Mapping[str, str] = setting(
        factory=dict,
        doc="with an `organization`: OU ID -> webhook (app mode: channel) name, for notifications about the jobs of "
        "the accounts `organization.account_units` puts in that OU (an account's own `by_account` route comes first)",
        key_pattern=_DEPLOYMENT_TARGET_PATTERN,
        key_error="not an OU ID (ou-...) or root ID (r-...)",
    )
    min_severity: str = setting("info", doc="notifications below this severity go nowhere", choices=SEVERITIES)

    @property
    def app_mode(self) -> bool:
        return self.mode is SlackMode.APP

    @property
    def targets(self) -> Mapping[str, Any]:
        """What the routes name: the webhooks, or in app mode the app's channels (name -> channel ID)."""
        if self.app_mode:
            return self.app.channels if self.app is not None else {}
        return self.webhooks

    @property
    def enabled(self) -> bool:
        return bool(self.targets)

    def channel_id(self, name: str) -> str:
        if self.app is None:
            raise KeyError(name)
        return self.app.channels[name]

    def route(
        self, severity: str, tags: Mapping[str, str], *, account: str | None = None, unit: str | None = None
    ) -> list[str]:
        """The webhooks (app mode: channel names) one notification goes to, each once, in a stable order: the job's
        team, its account's (`by_account`, else its unit's), its severity's; the default if none."""
        if not self.enabled or _rank(severity) < _rank(self.min_severity):
            return []
        targets = self.targets
        chosen: list[str] = []
        team = tags.get(self.team_tag) if self.team_tag else None
        if team in targets:
            chosen.append(str(team))
        by_account = self.by_account.get(account or "") or self.by_organizational_unit.get(unit or "")
        if by_account and by_account not in chosen:
            chosen.append(by_account)
        by_severity = self.by_severity.get(severity)
        if by_severity and by_severity not in chosen:
            chosen.append(by_severity)
        if not chosen and self.default:
            chosen.append(self.default)
        return chosen


@_validator(SlackConfig)
def _check_slack(slack: SlackConfig) -> Iterator[tuple[str, str]]:
    if slack.app_mode:
        if slack.app is None:
            yield "app", "mode is app: say which channels the app posts to (app.channels) and who may act"
        elif not slack.app.channels:
            yield "app.channels", "mode is app: name at least one channel (name -> channel ID)"
        if slack.webhooks:
            yield (
                "webhooks",
                "mode is app: the app posts with its bot token, not webhooks; remove them (a file layered over "
                'cdk.json says "webhooks": null), or use mode webhook',
            )
        where, what = "slack.app.channels", "channel"
    else:
        if slack.app is not None:
            yield "app", "read only when mode is app: set mode to app, or remove it"
        where, what = "slack.webhooks", "webhook"
    targets = slack.targets
    if slack.default is not None and slack.default not in targets:
        yield "default", f"names no {what} in {where} (have: {', '.join(targets) or 'none'})"
    for routes in ("by_severity", "by_account", "by_organizational_unit"):
        for key, target in getattr(slack, routes).items():
            if target not in targets:
                yield f"{routes}.{key}", f"names no {what} in {where}: {target!r}"
    routed = slack.team_tag or slack.by_severity or slack.by_account or slack.by_organizational_unit
    if targets and slack.default is None and not routed:
        yield (
            "default",
            f"set a default {what}, or routes (by_severity, team_tag, by_account, by_organizational_unit), or no "
            "message is ever sent",
        )


@frozen
class QDeveloperConfig:
    """Amazon Q Developer in chat applications: a Slack channel subscribed to the topic."""

    slack_workspace_id: str = setting(
        doc="the Slack workspace ID (e.g. `T0123ABCD`)",
        pattern=_SLACK_ID_PATTERN,
        pattern_error="must be a Slack workspace ID (capital letters and digits, e.g. T0123ABCD), got {value!r}",
    )
    slack_channel_id: str = setting(
        doc="the Slack channel ID (e.g. `C0123ABCD`)",
        pattern=_SLACK_ID_PATTERN,
        pattern_error="must be a Slack channel ID (capital letters and digits, e.g. C0123ABCD), got {value!r}",
    )


# Microsoft Teams IDs as the Q Developer (AWS Chatbot) API takes them: the team and the tenant are UUIDs, the channel
# ID is Teams' `19:...@thread...` URL-encoded (CreateMicrosoftTeamsChannelConfiguration's ChannelId pattern,
# https://docs.aws.amazon.com/chatbot/latest/APIReference/API_TeamsChannelConfiguration.html).
_UUID_PATTERN = r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
_TEAMS_CHANNEL_PATTERN = r"^([a-zA-Z0-9-_=+/.,])*%3[aA]([a-zA-Z0-9-_=+/.,])*%40([a-zA-Z0-9-_=+/.,])*$"


@frozen
class QDeveloperTeamsConfig:
    """Amazon Q Developer in chat applications: a Microsoft Teams channel subscribed to the topic."""

    team_id: str = setting(
        doc="the Microsoft Teams team ID (a UUID, from Q Developer's console after authorizing Teams)",
        pattern=_UUID_PATTERN,
        pattern_error="must be a team ID (a UUID), got {value!r}",
    )
    teams_channel_id: str = setting(
        doc="the Teams channel ID as the console shows it, URL-encoded (`19%3a...%40thread.tacv2`)",
        pattern=_TEAMS_CHANNEL_PATTERN,
        pattern_error="must be a Teams channel ID, URL-encoded (19%3a...%40thread.tacv2), got {value!r}",
    )
    teams_tenant_id: str = setting(
        doc="the Microsoft Teams tenant ID (a UUID)",
        pattern=_UUID_PATTERN,
        pattern_error="must be a tenant ID (a UUID), got {value!r}",
    )


STATISTICS = ("AVG", "MIN", "MAX", "SUM", "COUNT")
COMPARISONS = {
    ">": "GreaterThanThreshold",
    ">=": "GreaterThanOrEqualToThreshold",
    "<": "LessThanThreshold",
    "<=": "LessThanOrEqualToThreshold",
}
MAX_EVALUATION_MINUTES = 180  # Metrics Insights alarms evaluate the last 3 hours only
DEFAULT_DATAPOINTS = 3
_ALARM_ACTIONS = (Action.NOTIFY.value, Action.STOP.value)


def _default_datapoints(guard: Mapping[str, Any]) -> int:
    # The one rule for an absent `datapoints`: 3, but never more than `periods`.
    return min(DEFAULT_DATAPOINTS, int(guard["periods"]))


@frozen
class MetricGuard:
    """One fleet-wide alarm on a training metric: one Metrics Insights multi-time-series alarm."""

    name: str = setting(
        doc="the guard's name (in the alarm's name and in messages)",
        pattern=_NAME_PATTERN,
        pattern_error="guard names are 1-40 letters, digits or '-', starting with a letter or digit",
    )
    metric: str = setting(
        doc="a training metric (`train:loss`) or an instance metric (`GPUUtilization`)",
        pattern=_METRIC_PATTERN,
        pattern_error="not a metric name: {value!r}",
    )
    threshold: float = setting(doc="the value the statistic is compared with")
    statistic: str = setting("MAX", doc="the statistic over each minute", choices=STATISTICS, ignore_case=True)
    comparison: str = setting(">", doc="how the statistic compares with the threshold", choices=tuple(COMPARISONS))
    datapoints: int = setting(
        DEFAULT_DATAPOINTS,
        doc="how many breaching minutes (out of `periods`) raise the alarm",
        minimum=1,
        maximum=MAX_EVALUATION_MINUTES,
        derived_default=DerivedDefault(_default_datapoints, f"`{DEFAULT_DATAPOINTS}`, or `periods` if fewer"),
    )
    periods: int = setting(
        3,
        doc="the one-minute periods evaluated",
        minimum=1,
        maximum=MAX_EVALUATION_MINUTES,
        why="Metrics Insights alarms evaluate the last 3 hours only",
    )
    action: Action = setting(
        Action.NOTIFY,
        doc="what a breaching job leads to",
        choices=_ALARM_ACTIONS,
        why="a metric guard either notifies or stops",
    )
    job_prefix: str | None = setting(None, doc="only jobs whose names start with this")
    job_tag: str | None = setting(None, doc="only jobs carrying this tag key")

    @property
    def instance_metric(self) -> bool:
        return self.metric in contract.INSTANCE_METRICS

    def describe(self) -> str:
        return (
            f"metric_guards.{self.name}: {self.statistic}({self.metric}) {self.comparison} {self.threshold:g} "
            f"for {self.datapoints} of {self.periods} min -> {self.action.value}"
        )


@_validator(MetricGuard)
def _check_metric_guard(guard: MetricGuard) -> Iterator[tuple[str, str]]:
    if guard.name.startswith("job-"):
        yield "name", "names starting with 'job-' are reserved for per-job alarms"
    if guard.datapoints > guard.periods:
        yield "datapoints", f"cannot exceed periods ({guard.datapoints} > {guard.periods})"


@frozen
class StallGuard:
    """A running job that declared metrics but published none for `minutes` is reported (or stopped)."""

    minutes: int = setting(30, doc="minutes without a datapoint that make a stall", minimum=5, maximum=24 * 60)
    action: Action = setting(
        Action.NOTIFY,
        doc="what a stalled job leads to",
        choices=_ALARM_ACTIONS,
        why="set stall to null to turn it off",
    )


@frozen
class Budget:
    """A spending cap per job (list price), checked by the sweeper at every sweep."""

    max_usd: float = setting(doc="the cap for one job, in US dollars at list price")
    warn_at: float = setting(0.8, doc="the share of the cap at which the guard warns, once (0: no warning)")
    action: Action = setting(
        Action.STOP, doc="what reaching the cap leads to", choices=_ALARM_ACTIONS, why="a budget notifies or stops"
    )
    job_prefix: str | None = setting(None, doc="only jobs whose names start with this")
    job_tag: str | None = setting(None, doc="only jobs carrying this tag key")

    def selects(self, job_name: str, tags: Mapping[str, str]) -> bool:
        """Whether this entry caps the job: its prefix and its tag key, each when set (neither: every job)."""
        if self.job_prefix and not job_name.startswith(self.job_prefix):
            return False
        return not self.job_tag or self.job_tag in tags

    def describe(self, name: str) -> str:
        """The policy line of this cap, e.g. `budgets[0] (jobs starting exp-): $200.00 cap, warned at 80 %, then
        stop`; `name` says where it was set."""
        scope = [f"jobs starting {self.job_prefix}"] if self.job_prefix else []
        scope += [f"jobs tagged {self.job_tag}"] if self.job_tag else []
        where = f"{name} ({'; '.join(scope)})" if scope else name
        warn = f"warned at {self.warn_at * 100:g} %" if self.warn_at > 0 else "no warning"
        return f"{where}: ${self.max_usd:,.2f} cap, {warn}, then {self.action.value}"


# A job's own budget tag: a plain number of US dollars (tag values allow digits and '.', not '$' or ',').
_BUDGET_TAG_VALUE = re.compile(r"^\s*(\d+(\.\d*)?|\.\d+)\s*$")


def budget_from_tag(value: str) -> float | None:
    """The cap a budget tag's value sets (`500`, `499.99`), or None when it is not a positive number of dollars."""
    if not _BUDGET_TAG_VALUE.match(value):
        return None
    usd = float(value)
    return usd if 0 < usd < math.inf else None


@frozen
class BudgetDefaults:
    """How a cap set by the job's own budget tag is handled."""

    warn_at: float = setting(0.8, doc="the share of a tag's cap at which the guard warns, once (0: no warning)")
    action: Action = setting(
        Action.STOP, doc="what reaching a tag's cap leads to", choices=_ALARM_ACTIONS, why="a budget notifies or stops"
    )


def _check_share(value: float, where: str) -> Iterator[tuple[str, str]]:
    if not 0 <= value < 1:
        yield where, f"must be a share of the cap from 0 up to (not including) 1, got {value:g}"


@_validator(Budget)
def _check_budget(budget: Budget) -> Iterator[tuple[str, str]]:
    if not budget.max_usd > 0:
        yield "max_usd", f"must be a positive amount of US dollars, got {budget.max_usd:g}"
    yield from _check_share(budget.warn_at, "warn_at")


@_validator(BudgetDefaults)
def _check_budget_defaults(defaults: BudgetDefaults) -> Iterator[tuple[str, str]]:
    yield from _check_share(defaults.warn_at, "warn_at")


@frozen
class IdleGpuGuard:
    """A running job whose GPUs sit idle: host GPU utilisation divided by the instance type's GPU count."""

    threshold_percent: int = setting(
        10,
        doc="a job is idle while the average utilisation of its GPUs (each host's value over its GPU count) "
        "stays below this",
        minimum=1,
        maximum=100,
    )
    minutes: int = setting(15, doc="for this many minutes in a row", minimum=5, maximum=24 * 60)
    ignore_first_minutes: int = setting(
        10, doc="a job's first minutes of training are not judged (data loading)", minimum=0, maximum=24 * 60
    )
    action: Action = setting(
        Action.NOTIFY,
        doc="what an idle job leads to",
        choices=_ALARM_ACTIONS,
        why="set idle_gpu to null to turn it off",
    )

    def describe(self) -> str:
        return (
            f"idle_gpu: GPUs below {self.threshold_percent} % for {self.minutes} min in a row, after the first "
            f"{self.ignore_first_minutes} min of training -> {self.action.value}"
        )


# --- Log rules: Debugger's loss rules read from the training log itself (docs/design/log-rules.md) -------------


class LogAction(StrEnum):
    """What a log rule's firing leads to (`dry_run`: notify "would have stopped", whatever the guard's dry_run)."""

    STOP = "stop"
    NOTIFY = "notify"
    DRY_RUN = "dry_run"
    IGNORE = "ignore"


# A log pattern's name is a rule name in messages and in the job's log-rules tag (`NCCL-timeout=stop`).
_LOG_PATTERN_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,39}$"
LOG_RULE_NAMES = ("NaN", "Divergence", "LossNotDecreasing", "Overfit", "Overtraining", "StalledTrainingRule")
# Each pattern is one more regex searched on every line a job writes: a few, not a list of hundreds.
MAX_LOG_PATTERNS = 20
MAX_LOG_WINDOW = 1000  # points kept per series by LossNotDecreasing: the state stays a few KB


def _regex_problem(regex: str | None, example: str) -> str | None:
    if regex is None:
        return None
    try:
        re.compile(regex)
    except re.error as exc:
        return f"not a valid Python regular expression ({exc}); write one such as {example}"
    return None


@frozen
class LogNaNRule:
    """ExplodingTensor's intent: the first NaN or infinity a loss (or any metric the job defines) takes."""

    action: LogAction = setting(LogAction.STOP, doc="what the first non-finite value leads to")
    only_nan: bool = setting(False, doc="only NaN counts (Debugger's `only_nan`); false: infinity too")
    tensor_regex: str | None = setting(
        None,
        doc="the metrics checked, by regex (null: every metric the job's MetricDefinitions name, and the losses "
        "the built-in readers recognise)",
    )

    def describe(self) -> str:
        return f"log_rules.nan (only_nan {str(self.only_nan).lower()})"


@_validator(LogNaNRule)
def _check_log_nan(rule: LogNaNRule) -> Iterator[tuple[str, str]]:
    if (problem := _regex_problem(rule.tensor_regex, "`loss|grad_norm`")) is not None:
        yield "tensor_regex", problem


@frozen
class LogDivergenceRule:
    """The loss climbs to `factor` times the best (lowest) value it has had, after `warmup` points."""

    action: LogAction = setting(LogAction.STOP, doc="what a diverging loss leads to")
    factor: float = setting(4.0, doc="the multiple of the best loss that is divergence (more than 1)")
    warmup: int = setting(
        10, doc="points of the loss read before it is judged (the first steps can be high)", minimum=0, maximum=100000
    )

    def describe(self) -> str:
        return f"log_rules.divergence (factor {self.factor:g}, warmup {self.warmup})"


@_validator(LogDivergenceRule)
def _check_log_divergence(rule: LogDivergenceRule) -> Iterator[tuple[str, str]]:
    if not rule.factor > 1:
        yield "factor", f"must be more than 1 (a multiple of the best loss), got {rule.factor:g}"


@frozen
class LogLossNotDecreasingRule:
    """Debugger's LossNotDecreasing: every `num_steps` points, the loss must have fallen by `diff_percent`."""

    action: LogAction = setting(
        LogAction.NOTIFY,
        doc="what a loss that stopped falling leads to (notify: a plateau and convergence look alike)",
    )
    num_steps: int = setting(
        10,
        doc="points between two checks (each compares the mean of the last num_steps with the one before)",
        minimum=1,
        maximum=MAX_LOG_WINDOW,
        why="the window is kept in the stream's state",
    )
    diff_percent: float = setting(0.1, doc="the least decrease, in percent, between two checks (0 < x < 100)")
    increase_threshold_percent: float = setting(
        5.0, doc="a rise above this percent is reported as a rising loss, not a plateau (0 < x < 100)"
    )

    def describe(self) -> str:
        return (
            f"log_rules.loss_not_decreasing (num_steps {self.num_steps}, diff_percent {self.diff_percent:g}, "
            f"increase_threshold_percent {self.increase_threshold_percent:g})"
        )


@_validator(LogLossNotDecreasingRule)
def _check_log_lnd(rule: LogLossNotDecreasingRule) -> Iterator[tuple[str, str]]:
    for name in ("diff_percent", "increase_threshold_percent"):
        value = getattr(rule, name)
        if not 0 < value < 100:
            yield name, f"must be a percent between 0 and 100 (both excluded), got {value:g}"


@frozen
class LogOverfitRule:
    """Debugger's Overfit, measured from the validation minimum: the validation loss rises while training falls."""

    action: LogAction = setting(LogAction.NOTIFY, doc="what overfitting leads to")
    start_step: int = setting(0, doc="validation points read before the rule judges", minimum=0, maximum=100000)
    patience: int = setting(
        3, doc="validation points in a row that must show it (Debugger: 1)", minimum=1, maximum=MAX_LOG_WINDOW
    )
    ratio_threshold: float = setting(
        0.1,
        doc="how much the gap `(validation - training) / training` must have grown since the validation minimum "
        "(Debugger compares the gap itself with it, which fires on any ordinary gap)",
    )

    def describe(self) -> str:
        return (
            f"log_rules.overfit (ratio_threshold {self.ratio_threshold:g} over the gap at the validation minimum, "
            f"patience {self.patience})"
        )


@_validator(LogOverfitRule)
def _check_log_overfit(rule: LogOverfitRule) -> Iterator[tuple[str, str]]:
    if not rule.ratio_threshold > 0:
        yield "ratio_threshold", f"must be more than 0, got {rule.ratio_threshold:g}"


@frozen
class LogOvertrainingRule:
    """Debugger's Overtraining: a loss no longer improves by `delta` for `patience_*` points."""

    action: LogAction = setting(
        LogAction.NOTIFY, doc="what a loss that no longer improves leads to (notify: convergence looks the same)"
    )
    patience_train: int = setting(
        5,
        doc="training points without an improvement of delta",
        minimum=1,
        maximum=100000,
    )
    patience_validation: int = setting(
        10, doc="validation points without an improvement of delta", minimum=1, maximum=100000
    )
    delta: float = setting(0.01, doc="the least improvement (absolute, in the loss's units) that counts")

    def describe(self) -> str:
        return (
            f"log_rules.overtraining (patience_train {self.patience_train}, patience_validation "
            f"{self.patience_validation}, delta {self.delta:g})"
        )


@_validator(LogOvertrainingRule)
def _check_log_overtraining(rule: LogOvertrainingRule) -> Iterator[tuple[str, str]]:
    if rule.delta < 0:
        yield "delta", f"cannot be negative, got {rule.delta:g}"


@frozen
class LogStalledRule:
    """Debugger's StalledTrainingRule: no new point in the log for `threshold` seconds."""

    action: LogAction = setting(
        LogAction.NOTIFY, doc="what a stalled job leads to (Debugger's stop_training_on_fire is false by default)"
    )
    threshold: int = setting(1800, doc="seconds without a new point", minimum=60, maximum=7 * 24 * 3600)

    def describe(self) -> str:
        return f"log_rules.stalled (threshold {self.threshold} s)"


@frozen
class LogPattern:
    """A line matching `regex` fires the rule `name` (once per log stream)."""

    name: str = setting(
        doc="the rule's name in messages and in the job's log-rules tag",
        pattern=_LOG_PATTERN_NAME,
        pattern_error="pattern names are 1-40 letters, digits, '_' or '-', starting with a letter: {value!r}",
    )
    regex: str = setting(doc="a Python regular expression searched in each line, e.g. `NCCL.*[Tt]imeout`")
    action: LogAction = setting(LogAction.NOTIFY, doc="what a matching line leads to")

    def describe(self, index: int) -> str:
        return f"log_rules.patterns[{index}] ({self.name}: {self.regex})"


@_validator(LogPattern)
def _check_log_pattern(pattern: LogPattern) -> Iterator[tuple[str, str]]:
    if (problem := _regex_problem(pattern.regex, "`NCCL.*[Tt]imeout`")) is not None:
        yield "regex", problem
    if pattern.name.lower() in {n.lower() for n in LOG_RULE_NAMES}:
        yield "name", f"{pattern.name!r} is a built-in log rule's name: choose another"


@frozen
class LogRules:
    """Debugger's loss rules over each job's log lines, seconds after they are written (docs/design/log-rules.md)."""

    enabled: bool = setting(True, doc="read the training log group and apply the rules below")
    loss_metric: str | None = setting(
        None,
        doc="the metric that is the loss, by its name in the job's MetricDefinitions or log (null: recognised by "
        "name: loss, train_loss, train-rmse, ...)",
    )
    validation_metric: str | None = setting(
        None, doc="the metric that is the validation loss (null: recognised by name: val_loss, eval_loss, ...)"
    )
    nan: LogNaNRule = setting(factory=LogNaNRule, doc="the first NaN or infinity in a loss")
    divergence: LogDivergenceRule = setting(factory=LogDivergenceRule, doc="a loss far above its best")
    loss_not_decreasing: LogLossNotDecreasingRule = setting(
        factory=LogLossNotDecreasingRule, doc="a loss that stopped falling"
    )
    overfit: LogOverfitRule = setting(factory=LogOverfitRule, doc="validation loss rising while training falls")
    overtraining: LogOvertrainingRule = setting(factory=LogOvertrainingRule, doc="a loss that no longer improves")
    stalled: LogStalledRule = setting(factory=LogStalledRule, doc="a job that stopped writing points")
    patterns: tuple[LogPattern, ...] = setting(
        (),
        doc="a line matching a regex fires a rule of that name, e.g. "
        '`{"name": "NCCL-timeout", "regex": "NCCL.*[Tt]imeout", "action": "stop"}`',
        max_items=MAX_LOG_PATTERNS,
        why="each pattern is searched in every line a job writes",
    )
    filter_pattern: str | None = setting(
        None,
        doc="the CloudWatch Logs subscription filter pattern: which lines are delivered to the guard (null: the "
        "guard's default)",
    )

    def rule_setting(self, rule: str) -> str:
        """The policy line of a built-in rule, e.g. `log_rules.divergence (factor 4, warmup 10)`."""
        sections: dict[str, LogNaNRule | LogDivergenceRule | LogLossNotDecreasingRule | LogOverfitRule] = {
            "NaN": self.nan,
            "Divergence": self.divergence,
            "LossNotDecreasing": self.loss_not_decreasing,
            "Overfit": self.overfit,
        }
        if rule == "Overtraining":
            return self.overtraining.describe()
        if rule == "StalledTrainingRule":
            return self.stalled.describe()
        return sections[rule].describe()


@_validator(LogRules)
def _check_log_rules(rules: LogRules) -> Iterator[tuple[str, str]]:
    seen: set[str] = set()
    for i, pattern in enumerate(rules.patterns):
        if pattern.name.lower() in seen:
            yield f"patterns[{i}].name", f"duplicate pattern name {pattern.name!r}"
        seen.add(pattern.name.lower())
    if rules.loss_metric is not None and rules.loss_metric == rules.validation_metric:
        yield "validation_metric", "names the same metric as loss_metric: the validation loss is another series"


WEEKDAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")


@frozen
class Digest:
    """A weekly summary to the topic: stops, would-have-stopped, spend avoided, top rules and guards."""

    enabled: bool = setting(True, doc="send the weekly digest")
    weekday: str = setting("MON", doc="the day it is sent", choices=WEEKDAYS, ignore_case=True)
    hour_utc: int = setting(9, doc="the hour it is sent, UTC", minimum=0, maximum=23)


# --- One guard for an organization (docs/organization.md) ------------------------------------------------
# A commercial, China or GovCloud region name (us-east-1, cn-north-1, us-gov-west-1).
_REGION_PATTERN = r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$"
# Organization IDs (https://docs.aws.amazon.com/organizations/latest/APIReference/API_Organization.html).
_ORGANIZATION_ID_PATTERN = r"^o-[a-z0-9]{10,32}$"
# A custom bus name: letters, digits, '.', '-', '_', at most 256, never "default"
# (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_CreateEventBus.html).
_BUS_NAME_PATTERN = r"^[A-Za-z0-9._-]{1,256}$"
# Role names: letters, digits and +=,.@_-; IAM allows 64 characters, the guard 24 (below; docs/limits.md).
_ROLE_NAME_PATTERN = r"^[A-Za-z0-9+=,.@_-]{1,24}$"
# Each member is a bus-policy principal and a role ARN in each acting hub function's AssumeRole: 100 members with role
# names of 24 characters fit both caps, 32 would not (docs/limits.md, tests/infra/test_organization_limits.py).
MAX_MEMBER_ACCOUNTS = 100
STACK_SET_CALLERS = ("SELF", "DELEGATED_ADMIN")


@frozen
class OrganizationConfig:
    """One hub account runs the guard for the member accounts that forward their events to it."""

    hub_account: str = setting(
        doc="the account that runs the guard's functions, table, topic and Slack delivery",
        pattern=_ACCOUNT_PATTERN,
        pattern_error="an account ID is 12 digits: {value!r}",
    )
    region: str = setting(
        doc="the region of the hub and of every member stack (events are forwarded within it)",
        pattern=_REGION_PATTERN,
        pattern_error="not a region name (e.g. eu-west-1): {value!r}",
    )
    members: tuple[str, ...] = setting(
        doc="the member accounts whose training jobs the hub guards; events from any other account are ignored "
        "and counted",
        pattern=_ACCOUNT_PATTERN,
        pattern_error="an account ID is 12 digits: {value!r}",
        max_items=MAX_MEMBER_ACCOUNTS,
        why="each member is named in the hub bus's policy (10 KB) and in each hub function's role policy (10,240 "
        "characters)",
    )
    organization_id: str | None = setting(
        None,
        doc="the organization (`o-...`): the hub bus admits its accounts (`aws:PrincipalOrgID`) instead of listing "
        "the members, and the member role also requires the caller to belong to it",
        pattern=_ORGANIZATION_ID_PATTERN,
        pattern_error="not an organization ID (o- and 10 to 32 lowercase letters or digits): {value!r}",
    )
    organizational_units: tuple[str, ...] = setting(
        (),
        doc="OUs (or the root, `r-...`) the hub's StackSet deploys the member stack to, and to every account "
        "added to them later (empty: no StackSet; deploy the member stack per account)",
        pattern=_DEPLOYMENT_TARGET_PATTERN,
        pattern_error="not an OU ID (ou-...) or root ID (r-...): {value!r}",
    )
    stack_set_call_as: str = setting(
        "SELF",
        doc="`SELF` when the hub is the organization's management account, `DELEGATED_ADMIN` when it is a "
        "registered delegated administrator for StackSets",
        choices=STACK_SET_CALLERS,
    )
    bus_name: str = setting(
        "training-guard-hub",
        doc="the hub's event bus that members forward to",
        pattern=_BUS_NAME_PATTERN,
        pattern_error="a bus name is 1-256 letters, digits, '.', '-' or '_': {value!r}",
    )
    # Declared, not looked up: ListParents (https://docs.aws.amazon.com/goto/WebAPI/organizations-2016-11-28/ListParents)
    # answers only in the management account or a delegated administrator, for the immediate parent only: a lookup would
    # need that grant, a walk up nested OUs and a call the notifier's delivery could fail on.
    account_units: Mapping[str, str] = setting(
        factory=dict,
        doc="the organizational unit of the hub or a member account (account ID -> `ou-...`), for routing chat by "
        "unit (`slack.by_organizational_unit`); taken as written, AWS Organizations is not asked",
        key_pattern=_ACCOUNT_PATTERN,
        key_error="not an account ID (12 digits)",
        pattern=_DEPLOYMENT_TARGET_PATTERN,
        pattern_error="not an OU ID (ou-...) or root ID (r-...): {value!r}",
    )
    member_role_name: str = setting(
        "TrainingGuardMember",
        doc="the role in each member account that the hub's functions assume to describe, stop and tag jobs",
        pattern=_ROLE_NAME_PATTERN,
        pattern_error="a role name here is 1-24 letters, digits or +=,.@_- (each hub role's policy names it once per "
        "member): {value!r}",
    )

    def accepts(self, account: str | None) -> bool:
        return account == self.hub_account or account in self.members

    def unit_of(self, account: str | None) -> str | None:
        """The organizational unit `account_units` puts the account in (None: none said, or not guarded here)."""
        return self.account_units.get(account) if account and self.accepts(account) else None


@_validator(OrganizationConfig)
def _check_organization(organization: OrganizationConfig) -> Iterator[tuple[str, str]]:
    if not organization.members:
        yield "members", "name at least one member account (the hub guards its own account already)"
    seen: set[str] = set()
    for i, account in enumerate(organization.members):
        if account == organization.hub_account:
            yield f"members[{i}]", f"{account} is the hub account, which the hub guards already; remove it here"
        elif account in seen:
            yield f"members[{i}]", f"duplicate member account {account}"
        seen.add(account)
    for i, target in enumerate(organization.organizational_units):
        if target in organization.organizational_units[:i]:
            yield f"organizational_units[{i}]", f"duplicate deployment target {target}"
    if organization.bus_name == "default":
        yield "bus_name", "'default' is the account's default bus; name a custom bus"
    for account in organization.account_units:
        if not organization.accepts(account):
            yield f"account_units.{account}", "not the hub account nor a member account"


def _rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else 0


# A handled transition is remembered while the job can still be re-decided, or its finding is announced again:
# MaxRuntimeInSeconds is at most 28 days, and a job runs at most 30 in all, counting the upload after training
# (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StoppingCondition.html).
MAX_TRAINING_DAYS = 28
MAX_DAYS_AFTER_TRAINING = 30 - MAX_TRAINING_DAYS  # publishing metrics, uploading the model
MIN_DEDUP_TTL_DAYS = MAX_TRAINING_DAYS + MAX_DAYS_AFTER_TRAINING + 1  # one day's margin
SCHEMA_KEY = "$schema"  # accepted (and ignored) at the top of a configuration file, for editors


@frozen
class GuardConfig:
    rules: RulePolicy = setting(factory=RulePolicy, doc="what Debugger and Profiler rule findings lead to")
    dry_run: bool = setting(False, doc='stop nothing; notify "would have stopped" instead')
    tags: JobTags = setting(factory=JobTags, doc="the tag keys of per-job overrides")
    min_training_minutes: int = setting(
        0, doc="findings before this much training time do not stop the job yet", minimum=0, maximum=7 * 24 * 60
    )
    jobs: JobSelection = setting(factory=JobSelection, doc="which jobs are guarded, by name prefix")
    notifications: LifecycleNotifications = setting(
        factory=LifecycleNotifications, doc="which job lifecycle changes are notified"
    )
    emails: tuple[str, ...] = setting(
        (),
        doc="addresses subscribed to the notification topic at deploy time (each confirms by e-mail)",
        pattern=_EMAIL_PATTERN,
        pattern_error="not an e-mail address: {value!r}",
    )
    dedup_ttl_days: int = setting(
        35,
        doc="how long a handled transition is remembered (no finding is announced twice within it)",
        minimum=MIN_DEDUP_TTL_DAYS,
        maximum=365,
        why=(
            f"a handled finding must be remembered for a training job's whole life: SageMaker runs one for up to "
            f"{MAX_TRAINING_DAYS} days, {MAX_TRAINING_DAYS + MAX_DAYS_AFTER_TRAINING} with the upload after it"
        ),
    )
    slack: SlackConfig = setting(factory=SlackConfig, doc="Slack webhooks and which notifications go to which")
    q_developer: QDeveloperConfig | None = setting(
        None, doc="a Slack channel of Amazon Q Developer in chat applications, subscribed to the topic"
    )
    q_developer_teams: QDeveloperTeamsConfig | None = setting(
        None, doc="a Microsoft Teams channel of Amazon Q Developer in chat applications, subscribed to the topic"
    )
    metric_guards: tuple[MetricGuard, ...] = setting(
        (),
        doc="fleet-wide alarms on training metrics (one Metrics Insights alarm each)",
        max_items=MAX_FLEET_GUARDS,
        why="Metrics Insights alarms are limited to 200 per account and region",
    )
    stall: StallGuard | None = setting(None, doc="reports (or stops) running jobs that stopped publishing metrics")
    per_job_alarms: bool = setting(True, doc="honour `training-guard:alarm:<metric>` tags on jobs")
    # Enforced by IAM with an aws:ResourceTag condition, and by the policy, which reports would-have-stopped.
    stop_requires_tag: str | None = setting(
        None,
        doc='e.g. `training-guard:guarded`: only jobs carrying this tag with the value "true" may be stopped '
        "(enforced by IAM too)",
    )
    sweep_minutes: int = setting(5, doc="how often the sweeper runs", minimum=1, maximum=60)
    budgets: tuple[Budget, ...] = setting(
        (),
        doc="spending caps per job by name prefix or tag, checked at every sweep; the job's own budget tag "
        "comes first, then the first entry that selects the job",
    )
    budget_defaults: BudgetDefaults = setting(
        factory=BudgetDefaults, doc="how a cap set by a job's budget tag (`tags.budget_usd`) is handled"
    )
    idle_gpu: IdleGpuGuard | None = setting(
        None, doc="reports (or stops) running jobs whose GPUs sit idle, found by the sweeper"
    )
    digest: Digest = setting(factory=Digest, doc="a weekly digest to the topic: stops, spend avoided, top rules")
    dashboard: bool = setting(
        False,
        doc="a CloudWatch dashboard of the guard's activity (`<stack>-activity`); $3 a month beyond the free tier's "
        "three, so off unless asked for (`training-guard report` shows the same story from the metrics)",
    )
    powertools_layer_arn: str | None = setting(
        None,
        doc="a Powertools for AWS Lambda (Python) layer version ARN (arm64, Python 3.13, the pinned version) used "
        "instead of the public layer's SSM parameter, for regions where that parameter does not exist",
        pattern=_LAYER_ARN_PATTERN,
        pattern_error="not a Lambda layer version ARN (arn:aws:lambda:<region>:<account>:layer:<name>:<n>): {value!r}",
    )
    organization: OrganizationConfig | None = setting(
        None,
        doc="one guard for many accounts: this deployment is the hub, and member stacks forward their events to it "
        "(docs/organization.md; null: this account only)",
    )
    log_rules: LogRules = setting(
        factory=LogRules,
        doc="Debugger's loss rules read from each job's training log, NaN included (docs/design/log-rules.md)",
    )

    def budget_for(self, job_name: str, tags: Mapping[str, str]) -> tuple[str, Budget, str] | None:
        """The cap of a job: (its name, the budget, its policy line), or None: a valid budget tag first (named by its
        key), else the first `budgets` entry that selects the job (`budgets[<i>]`)."""
        value = tags.get(self.tags.budget_usd)
        usd = budget_from_tag(value) if value is not None else None
        if value is not None and usd is not None:
            defaults = self.budget_defaults
            budget = Budget(max_usd=usd, warn_at=defaults.warn_at, action=defaults.action)
            line = budget.describe(f"budget_defaults (tag {self.tags.budget_usd} = {value.strip()})")
            return self.tags.budget_usd, budget, line
        for i, entry in enumerate(self.budgets):
            if entry.selects(job_name, tags):
                name = f"budgets[{i}]"
                return name, entry, entry.describe(name)
        return None

    def budget_tag_problem(self, tags: Mapping[str, str]) -> str | None:
        """Why the job's budget tag sets no cap (None when it has no such tag, or a good one)."""
        value = tags.get(self.tags.budget_usd)
        if value is None or budget_from_tag(value) is not None:
            return None
        return f"tag {self.tags.budget_usd}={value!r}: expected a positive number of US dollars, e.g. 500"

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
        config = _read(cls, data, "", problems, top=True)
        if problems:
            raise ConfigError(problems, source)
        return config


@_validator(GuardConfig)
def _check_guard_config(config: GuardConfig) -> Iterator[tuple[str, str]]:
    seen: set[str] = set()
    for i, guard in enumerate(config.metric_guards):
        if guard.name in seen:
            yield f"metric_guards[{i}].name", f"duplicate guard name {guard.name!r}"
        seen.add(guard.name)
    yield from _check_account_routes(config)


def _check_account_routes(config: GuardConfig) -> Iterator[tuple[str, str]]:
    """Chat routes by account or unit name what the organization guards: anything else would route nothing."""
    slack, organization = config.slack, config.organization
    if organization is None:
        for routes in ("by_account", "by_organizational_unit"):
            if getattr(slack, routes):
                yield f"slack.{routes}", "routes by account need an organization section (this guard has one account)"
        return
    for account in slack.by_account:
        if not organization.accepts(account):
            yield f"slack.by_account.{account}", "not the hub account nor a member account of organization"
    units = set(organization.account_units.values())
    for unit in slack.by_organizational_unit:
        if unit not in units:
            yield (
                f"slack.by_organizational_unit.{unit}",
                "no account is in this unit: say which are in organization.account_units",
            )


# --- The declarations, as the reader and the generated docs see them ----------------------------------


@frozen
class Declared:
    """One setting of a configuration class: name, declaration and the shape of its JSON value. `kind`: bool, int,
    number, text, enum, section, list or map; `item`: a list's or map's element type (`item_kind` its kind), the enum
    or the section's class; `optional` (`X | None`): null means absent."""

    name: str
    setting: Setting
    kind: str
    item: Any
    item_kind: str
    optional: bool
    default: Any  # MISSING when required or given by a factory
    factory: Callable[[], Any] | None

    @property
    def required(self) -> bool:
        return self.default is MISSING and self.factory is None

    def default_value(self) -> Any:
        return self.factory() if self.factory is not None else self.default


_DECLARED: dict[type, tuple[Declared, ...]] = {}


def settings_of(cls: type) -> tuple[Declared, ...]:
    declared = _DECLARED.get(cls)
    if declared is None:
        hints = typing.get_type_hints(cls)
        declared = tuple(_declare(f.name, hints[f.name], f) for f in fields(cls))
        _DECLARED[cls] = declared
    return declared


def _declare(name: str, annotation: Any, f: Any) -> Declared:
    optional = False
    if isinstance(annotation, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional, annotation = True, members[0]
    origin = typing.get_origin(annotation)
    if origin is tuple:
        kind, item = "list", typing.get_args(annotation)[0]
    elif origin is Mapping:
        kind, item = "map", typing.get_args(annotation)[1]
    else:
        kind, item = _scalar_kind(annotation), annotation
    factory = None if f.default_factory is MISSING else f.default_factory
    return Declared(
        name=name,
        setting=f.metadata[_SETTING],
        kind=kind,
        item=item,
        item_kind=_scalar_kind(item) if kind in ("list", "map") else kind,
        optional=optional,
        default=f.default,
        factory=factory,
    )


def _scalar_kind(tp: Any) -> str:
    kinds = {bool: "bool", int: "int", float: "number", str: "text"}
    if tp in kinds:
        return kinds[tp]
    if isinstance(tp, type) and issubclass(tp, StrEnum):
        return "enum"
    if is_dataclass(tp):
        return "section"
    raise TypeError(f"no configuration reader for {tp!r}")


def _expectation(kind: str, item_kind: str, s: Setting, enum: Any = None) -> str:
    if kind == "list":
        return "must be a list of non-empty strings" if item_kind == "text" else "must be a list"
    if kind == "enum":
        return f"must be one of {', '.join(_choices(s, enum))}"
    return {
        "bool": "must be true or false",
        "int": "must be a whole number",
        "number": "must be a number",
        "text": "must be a non-empty string",
        "section": "must be an object",
        "map": "must be an object",
    }[kind]


def _choices(s: Setting, enum: Any) -> tuple[str, ...]:
    if s.choices is not None:
        return s.choices
    return tuple(m.value for m in enum) if enum is not None else ()


# --- The strict reader --------------------------------------------------------------------------------

_INVALID: Any = object()  # a value that was reported; the setting falls back to its default


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path and key else path or key


def _because(s: Setting) -> str:
    return f" ({s.why})" if s.why else ""


def _read(cls: type[_T], data: Any, path: str, problems: list[str], *, top: bool = False) -> _T:
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        problems.append(f"{path or '(document)'}: must be an object, got {json_words.kind(data)}")
        data = {}
    declared = settings_of(cls)
    values: dict[str, Any] = {}
    derived: list[Declared] = []
    for d in declared:
        where = _join(path, d.name)
        raw = data.get(d.name)
        # null is absence for an optional setting, a section or a map; for anything else it is wrong.
        if d.name in data and not (raw is None and (d.optional or d.kind in ("section", "map"))):
            value = _read_value(d, raw, where, problems)
        else:
            value = _INVALID
            if d.required:
                problems.append(f"{where}: {_expectation(d.kind, d.item_kind, d.setting, d.item)}; it is required")
        if value is not _INVALID:
            values[d.name] = value
        elif d.setting.derived_default is not None:
            derived.append(d)
        else:
            values[d.name] = _placeholder(d) if d.required else d.default_value()
    for d in derived:
        assert d.setting.derived_default is not None
        values[d.name] = d.setting.derived_default.rule(values)
    _reject_unknown(data, [d.name for d in declared], path, problems, top=top)
    result = cls(**values)
    for check in _VALIDATORS.get(cls, ()):
        problems.extend(f"{_join(path, key)}: {message}" for key, message in check(result))
    return result


def _reject_unknown(data: Mapping[str, Any], known: list[str], path: str, problems: list[str], *, top: bool) -> None:
    for key in data:
        if key not in known and not (top and key == SCHEMA_KEY):
            import difflib  # here: only a misspelt key needs it (~1 ms of every cold start at the top)

            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"{_join(path, str(key))}: unknown setting{hint}; known settings here: {', '.join(known)}")


def _placeholder(d: Declared) -> Any:
    """Stands in for a missing required value so the object can still be built and checked."""
    return {"number": 0.0, "int": 0, "bool": False}.get(d.kind, "")


def _read_value(d: Declared, value: Any, where: str, problems: list[str]) -> Any:
    s = d.setting
    if d.kind == "list":
        return _read_list(d, value, where, problems)
    if d.kind == "map":
        if not isinstance(value, Mapping):
            problems.append(f"{where}: must be an object, got {json_words.kind(value)}")
            return _INVALID
        out: dict[str, Any] = {}
        for key, item in value.items():
            item_where = f"{where}.{key}"
            if (s.keys is not None and key not in s.keys) or (
                s.key_pattern is not None and not re.fullmatch(s.key_pattern, str(key))
            ):
                problems.append(f"{item_where}: {s.key_error or 'not an allowed key'}")
                continue
            read = _read_one(d.item_kind, d.item, s, item, where=item_where, problems=problems)
            if read is not _INVALID:
                out[str(key)] = read
        if s.max_items is not None and len(value) > s.max_items:
            problems.append(f"{where}: at most {s.max_items} entries, got {len(value)}{_because(s)}")
        return out
    return _read_one(d.kind, d.item, s, value, where=where, problems=problems)


def _read_list(d: Declared, value: Any, where: str, problems: list[str]) -> Any:
    s = d.setting
    if d.item_kind == "text":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            problems.append(f"{where}: must be a list of non-empty strings, got {json_words.shown(value)}")
            return _INVALID
        for i, text in enumerate(value):
            if (message := _text_problem(s, text)) is not None:
                problems.append(f"{where}[{i}]: {message}")
        items: tuple[Any, ...] = tuple(value)
    else:
        if not isinstance(value, list):
            problems.append(f"{where}: must be a list, got {json_words.kind(value)}")
            return _INVALID
        items = tuple(
            _read_one(d.item_kind, d.item, s, v, where=f"{where}[{i}]", problems=problems) for i, v in enumerate(value)
        )
        items = tuple(item for item in items if item is not _INVALID)
    if s.max_items is not None and len(value) > s.max_items:
        problems.append(f"{where}: at most {s.max_items} entries, got {len(value)}{_because(s)}")
    return items


def _read_one(kind: str, tp: Any, s: Setting, value: Any, *, where: str, problems: list[str]) -> Any:
    if kind == "section":
        return _read(tp, value, where, problems)
    result, message = _SCALAR_READERS[kind](tp, s, value)
    if message is not None:
        problems.append(f"{where}: {message}")
        return _INVALID
    return result


# Each scalar reader returns (the value, None) or (anything, the message saying what is wrong).
def _bool(_tp: Any, _s: Setting, value: Any) -> tuple[Any, str | None]:
    return value, None if isinstance(value, bool) else f"must be true or false, got {json_words.shown(value)}"


def _int(_tp: Any, s: Setting, value: Any) -> tuple[Any, str | None]:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # `30.0` is the number 30 to JSON (and to JSON Schema's "integer")
    if isinstance(value, bool) or not isinstance(value, int):
        return value, f"must be a whole number, got {json_words.shown(value)}"
    if (s.minimum is not None and value < s.minimum) or (s.maximum is not None and value > s.maximum):
        return value, f"{_bounds(s)}, got {value}{_because(s)}"
    return value, None


def _number(_tp: Any, _s: Setting, value: Any) -> tuple[Any, str | None]:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:  # noqa: PLR0124 - NaN
        return value, f"must be a number, got {json_words.shown(value)}"
    if math.isinf(value):
        return value, "must be finite"
    return float(value), None


def _text(_tp: Any, s: Setting, value: Any) -> tuple[Any, str | None]:
    if not isinstance(value, str) or not value.strip():
        return value, f"must be a non-empty string, got {json_words.shown(value)}"
    text = value.upper() if s.ignore_case else value
    return text, _text_problem(s, text)


def _enum(tp: Any, s: Setting, value: Any) -> tuple[Any, str | None]:
    allowed = _choices(s, tp)
    if isinstance(value, str) and value in allowed:
        return tp(value), None
    return value, f"must be one of {', '.join(allowed)}, got {json_words.shown(value)}{_because(s)}"


_SCALAR_READERS: dict[str, Callable[[Any, Setting, Any], tuple[Any, str | None]]] = {
    "bool": _bool,
    "int": _int,
    "number": _number,
    "text": _text,
    "enum": _enum,
}


def _bounds(s: Setting) -> str:
    if s.minimum is not None and s.maximum is not None:
        return f"must be between {s.minimum} and {s.maximum}"
    return f"must be at least {s.minimum}" if s.minimum is not None else f"must be at most {s.maximum}"


def _text_problem(s: Setting, text: str) -> str | None:
    if s.choices is not None and text not in s.choices:
        return f"must be one of {', '.join(s.choices)}, got {json_words.shown(text)}{_because(s)}"
    if s.pattern is not None and not re.fullmatch(s.pattern, text):
        return (s.pattern_error or "must match {pattern}, got {value!r}").format(value=text, pattern=s.pattern)
    return None
