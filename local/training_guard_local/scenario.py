"""Scenarios for `training-guard demo`: a timeline of what SageMaker and CloudWatch do, and what
the guard is expected to make of it. JSON files, validated completely when loaded, with errors that
name the field (docs/scenarios.md is the user's guide).

```json
{
  "name": "...",
  "config": { ...GuardConfig... },                    optional; --config FILE overrides it
  "price_list": {"ml.g5.2xlarge": "answer.json"},      optional: recorded GetProducts answers the
                                                        emulated Price List API plays, by instance type
  "jobs": {
    "mnist": {"name": "pytorch-mnist-lr01", "instance_type": "ml.p3.2xlarge", "instance_count": 1,
              "metrics": ["train:loss"], "tags": {"team": "vision"}, "profiler_rules": [],
              "account": "444455556666",          optional: the account the job runs in (an organization's
                                                  member or an outsider; default: the guard's own)
              "log": "train.log",                 optional: the training log the job writes (a file)
              "metric_definitions": [{"Name": "train:loss", "Regex": "Loss: ([0-9.]+)"}]}
  },                                              optional: its MetricDefinitions (default: one per metric)
  "steps": [
    {"minute": 0, "job": "mnist", "status": "InProgress", "secondary": "Training",
     "rules": {"VanishingGradient": "IssuesFound"}, "details": {"VanishingGradient": "..."},
     "deliveries": 3, "note": "..."},                   a SageMaker state-change event (sent N times)
    {"minute": 3, "job": "mnist", "publish": {"train:loss": [2.3, 2.1]}},       SageMaker scrapes metrics
    {"minute": 8, "job": "mnist", "host_metrics": {"GPUUtilization": {"algo-1": [30, 28, 31]}}},
                                                 a host's instance metric, one datapoint a minute to now
    {"minute": 5, "job": "resnet", "alarm": "loss-diverging", "reason": "..."},   a guard's alarm fires
    {"minute": 6, "job": "mnist", "sagemaker": "finish_stopping"},                SageMaker ends a stop
    {"minute": 9, "sweep": true},                                                 the sweeper runs
    {"minute": 9, "job": "bert", "click": {"button": "stop", "user": "U0ALICE"}}  a person presses one of the
                                                 guard's buttons in Slack (slack.mode app): a signed request
    {"minute": 9, "job": "mnist", "log_lines": 40}   the job writes the next 40 lines of its log (to
                                                 /aws/sagemaker/TrainingJobs; the guard's subscription delivers them)
  ],
  "expect": {
    "mnist": {"stopped_by_guard": true, "final_status": "Stopped", "notifications": ["rule_error", ...],
              "stopped_via": "arn:aws:iam::444455556666:role/TrainingGuardMember",   or "hub": its own credentials
              "ignored_events": 0,                 events of the job the guard ignored as another account's
              "stopped_by": "slack:U0ALICE",       the job's training-guard:stopped-by tag at the end
              "stopped_by_click": true,            a click's Stop now made its StopTrainingJob call
              "stop_calls": 1,                     StopTrainingJob calls made for the job
              "slack_parents": 1}                  app mode: the parent messages about the job in each channel
  }
}
```
A configuration with an `organization` makes the demo a hub (moto's default account, in the emulation's region)
with its member accounts; a job's `account` says where it runs (docs/scenarios.md, "Many accounts").
Rule statuses are cumulative: each event carries every rule's latest status, as SageMaker's do.
A job that has ended (Completed, Failed, Stopped) takes no later status step: those are final in SageMaker.
A `price_list` path, and a job's `log`, is read when the scenario is loaded, relative to the scenario's folder, else
to the shipped scenarios' folder (so a copy of a shipped scenario keeps its recordings).
Shipped scenarios (in `scenarios/`) can be named instead of given as a path: `--scenario dry_run`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training_guard.config.model import ConfigError, GuardConfig
from training_guard.domain.policy import Kind
from training_guard.domain.pricing import gpu_count
from training_guard_local.inputs import UsageError, read_json, read_text

JOB_STATUSES = ("InProgress", "Completed", "Failed", "Stopping", "Stopped")
ENDED = ("Completed", "Failed", "Stopped")  # final in SageMaker: a job that has ended never runs again
RULE_STATUSES = ("InProgress", "NoIssuesFound", "IssuesFound", "Error", "Stopping", "Stopped")
# SageMaker's SecondaryStatus values (the API model; docs: domain §2)
SECONDARY_STATUSES = (
    "Starting", "Pending", "Downloading", "Training", "Uploading", "Interrupted", "Restarting", "Updating",
    "MaxRuntimeExceeded", "MaxWaitTimeExceeded", "Stopping", "Stopped", "Completed", "Failed",
)  # fmt: skip
NOTIFICATION_KINDS = tuple(kind.value for kind in Kind)
SAGEMAKER_ACTIONS = ("finish_stopping",)
# The guard's buttons a `click` step can press (slack_actions.Act: Stop now, Snooze, Exempt, Mute).
BUTTONS = ("stop", "snooze", "exempt", "mute")
# A Slack user ID as a click names it: capital letters and digits (config.py's check of slack.app.allowed_users).
_SLACK_USER = re.compile(r"^[A-Z0-9]{2,30}$")
# The instance metrics SageMaker publishes per host (dimension Host = <job>/algo-<n>) in /aws/sagemaker/TrainingJobs
# (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html; docs: domain §4).
INSTANCE_METRICS = ("CPUUtilization", "MemoryUtilization", "GPUUtilization", "GPUMemoryUtilization", "DiskUtilization")
# GPU percentages are "multiplied by the number of GPUs": 0 to 400 % for 4 GPUs
# (https://repost.aws/knowledge-center/sagemaker-cpu-gpu-utilization-100); memory and disk are 0 to 100 %.
# CPU scales with the vCPUs, which no table here gives: it has no ceiling.
_PER_GPU_METRICS = ("GPUUtilization", "GPUMemoryUtilization")
_PERCENT_METRICS = ("MemoryUtilization", "DiskUtilization")
# `expect.<job>.stopped_via` for a stop made with the hub's (or a single-account guard's) own credentials
HUB_CREDENTIALS = "hub"
_ACCOUNT = re.compile(r"^[0-9]{12}$")
# arn:<partition>:iam::<account>:role/<name> (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html)
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$")
SCENARIOS_DIR = Path(__file__).parent / "scenarios"
SEED_SCENARIO = SCENARIOS_DIR / "seed.json"
MAX_DELIVERIES = 10


class ScenarioError(ValueError):
    def __init__(self, problems: list[str], source: str) -> None:
        self.problems = problems
        super().__init__(f"{source} is invalid:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class Job:
    key: str
    name: str
    instance_type: str = "ml.p3.2xlarge"
    instance_count: int = 1
    metrics: tuple[str, ...] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    profiler_rules: tuple[str, ...] = ()
    account: str | None = None  # where the job runs (None: the guard's own account)
    log: Path | None = None  # the training log the job writes, read when the scenario is loaded
    log_lines: tuple[str, ...] = ()  # its lines, as numbered in the file
    # its MetricDefinitions as (Name, Regex); None: one per metric, as the demo writes them
    metric_definitions: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class PriceRecording:
    """A recorded GetProducts answer (the Price List API) for one instance type: its pages, in call order."""

    path: Path
    pages: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class ClickStep:
    """A person presses one of the guard's buttons on the job's latest Slack message that has it."""

    button: str  # one of BUTTONS
    user: str  # their Slack user ID


@dataclass(frozen=True)
class Step:
    minute: float
    job: str | None = None
    status: str | None = None
    secondary: str | None = None
    rules: Mapping[str, str] = field(default_factory=dict)
    details: Mapping[str, str] = field(default_factory=dict)
    failure_reason: str | None = None
    deliveries: int = 1
    alarm: str | None = None
    reason: str | None = None
    sagemaker: str | None = None
    sweep: bool = False
    publish: Mapping[str, list[float]] = field(default_factory=dict)  # metric -> datapoints scraped now
    # instance metric -> host (algo-<n>) -> one datapoint a minute, the last at this step's minute
    host_metrics: Mapping[str, Mapping[str, tuple[float, ...]]] = field(default_factory=dict)
    click: ClickStep | None = None
    log_lines: int = 0  # the job writes this many more lines of its log
    note: str | None = None


@dataclass(frozen=True)
class Expectation:
    stopped_by_guard: bool | None = None
    final_status: str | None = None
    notifications: tuple[str, ...] | None = None
    stopped_via: str | None = None  # the role ARN of the StopTrainingJob call, or HUB_CREDENTIALS
    ignored_events: int | None = None  # the job's events the guard ignored as another account's
    stopped_by: str | None = None  # the job's training-guard:stopped-by tag at the end
    stopped_by_click: bool | None = None  # whether a click's Stop now made the job's StopTrainingJob call
    stop_calls: int | None = None  # StopTrainingJob calls made for the job
    slack_parents: int | None = None  # app mode: parent messages about the job in each channel it reached


@dataclass(frozen=True)
class Scenario:
    name: str
    config: GuardConfig
    jobs: Mapping[str, Job]
    steps: tuple[Step, ...]
    expect: Mapping[str, Expectation]
    # instance type -> the recorded GetProducts answer the emulated Price List API plays for it
    price_list: Mapping[str, PriceRecording] = field(default_factory=dict)


def shipped() -> list[str]:
    """The names of the scenarios that ship with the guard."""
    return sorted(p.stem for p in SCENARIOS_DIR.glob("*.json"))


def resolve(name_or_path: str | None) -> Path:
    """A scenario file: the path given, else the shipped scenario of that name (`dry_run`), else the seed."""
    if name_or_path is None:
        return SEED_SCENARIO
    path = Path(name_or_path)
    if path.exists() or path.parent != Path("."):
        return path  # a path: read as it is (a missing file is reported by the reader)
    named = SCENARIOS_DIR / f"{path.name.removesuffix('.json')}.json"
    if named.is_file():
        return named
    raise UsageError(
        f"{name_or_path}: no such scenario file, and no shipped scenario of that name ({', '.join(shipped())})"
    )


def load(path: Path, *, config_override: GuardConfig | None = None, config_source: str | None = None) -> Scenario:
    """Read and validate a scenario file. Unreadable files raise UsageError (one line), invalid
    scenarios ScenarioError (every problem, each naming its field)."""
    data = read_json(path, "scenario")
    return parse(
        data, source=str(path), config_override=config_override, config_source=config_source, folder=path.parent
    )


def parse(
    data: Any,
    *,
    source: str = "scenario",
    config_override: GuardConfig | None = None,
    config_source: str | None = None,
    folder: Path | None = None,
) -> Scenario:
    """`config_source`: the file `config_override` came from, blamed for what it lacks. `folder`: where
    `price_list` paths are read from (the scenario's folder; None: the current one)."""
    problems: list[str] = []
    if not isinstance(data, Mapping):
        raise ScenarioError(["the scenario must be a JSON object"], source)
    _unknown(data, ("name", "config", "price_list", "jobs", "steps", "expect"), "", problems)
    if data.get("name") is not None and not isinstance(data["name"], str):
        problems.append("name: must be a string")
    config = config_override or GuardConfig()
    if config_override is None and data.get("config") is not None:
        try:
            config = GuardConfig.from_dict(data["config"], source="config")
        except ConfigError as exc:
            problems += [f"config.{p}" for p in exc.problems]
    jobs = _jobs(data.get("jobs"), problems, folder or Path("."))
    blame = f"--config {config_source}" if config_override is not None else "the scenario's config"
    _accounts(jobs, config, problems, blame=blame)
    steps = _steps(data.get("steps"), jobs, config, problems, blame=blame)
    expect = _expect(data.get("expect"), jobs, problems)
    price_list = _price_list(data.get("price_list"), folder or Path("."), problems)
    if problems:
        raise ScenarioError(problems, source)
    return Scenario(str(data.get("name") or source), config, jobs, steps, expect, price_list)


def _unknown(data: Mapping[str, Any], known: tuple[str, ...], where: str, problems: list[str]) -> None:
    for key in data:
        if key not in known:
            problems.append(f"{where}{key}: unknown field; known here: {', '.join(known)}")


_JOB_FIELDS = (
    "name", "instance_type", "instance_count", "metrics", "tags", "profiler_rules", "account", "log",
    "metric_definitions",
)  # fmt: skip


def _jobs(raw: Any, problems: list[str], folder: Path) -> dict[str, Job]:
    if not isinstance(raw, Mapping) or not raw:
        problems.append("jobs: must be an object of job key -> job")
        return {}
    jobs: dict[str, Job] = {}
    for key, spec in raw.items():
        where = f"jobs.{key}"
        if not isinstance(spec, Mapping):
            problems.append(f"{where}: must be an object with at least a name")
            continue
        if not isinstance(spec.get("name"), str) or not spec["name"]:
            problems.append(f"{where}.name: a training job name is required")
            continue
        _unknown(
            spec,
            _JOB_FIELDS,
            f"{where}.",
            problems,
        )
        instance_type = spec.get("instance_type", "ml.p3.2xlarge")
        if not isinstance(instance_type, str) or not instance_type.startswith("ml."):
            problems.append(f"{where}.instance_type: must be a SageMaker instance type such as ml.p3.2xlarge")
            instance_type = "ml.p3.2xlarge"
        count = spec.get("instance_count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            problems.append(f"{where}.instance_count: must be a whole number of at least 1, got {count!r}")
            count = 1
        tags = spec.get("tags", {})
        if not isinstance(tags, Mapping) or not all(isinstance(v, str) for v in tags.values()):
            problems.append(f"{where}.tags: must map tag keys to string values")
            tags = {}
        metrics = _strings(spec.get("metrics", []), f"{where}.metrics", "metric names", problems)
        profiler_rules = _strings(spec.get("profiler_rules", []), f"{where}.profiler_rules", "rule names", problems)
        account = spec.get("account")
        if account is not None and not (isinstance(account, str) and _ACCOUNT.match(account)):
            problems.append(f"{where}.account: an account ID is 12 digits, got {account!r}")
            account = None
        log, lines = _log(spec.get("log"), folder, f"{where}.log", problems)
        jobs[key] = Job(
            key=key,
            name=spec["name"],
            instance_type=instance_type,
            instance_count=count,
            metrics=metrics,
            tags=dict(tags),
            profiler_rules=profiler_rules,
            account=account,
            log=log,
            log_lines=lines,
            metric_definitions=_definitions(spec.get("metric_definitions"), f"{where}.metric_definitions", problems),
        )
    return jobs


def _log(raw: Any, folder: Path, where: str, problems: list[str]) -> tuple[Path | None, tuple[str, ...]]:
    """The job's training log, read now: its lines (the empty ones too, so that a line's number is the file's)."""
    if raw is None:
        return None, ()
    if not isinstance(raw, str) or not raw:
        problems.append(f"{where}: must be the path of a training log (text, one line per log event)")
        return None, ()
    path = next((p for p in (folder / raw, SCENARIOS_DIR / raw) if p.is_file()), folder / raw)
    try:
        text = read_text(path, "training log")
    except UsageError as exc:
        problems.append(f"{where}: {exc}")
        return None, ()
    lines = tuple(text.splitlines())
    if not any(line.strip() for line in lines):
        problems.append(f"{where}: {path} holds no log line")
    return path, lines


def _definitions(raw: Any, where: str, problems: list[str]) -> tuple[tuple[str, str], ...] | None:
    """MetricDefinitions as CreateTrainingJob takes them: [{"Name", "Regex"}], each regex valid."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(
        isinstance(d, Mapping) and isinstance(d.get("Name"), str) and isinstance(d.get("Regex"), str) for d in raw
    ):
        problems.append(f'{where}: must be a list of {{"Name": ..., "Regex": ...}}')
        return None
    for i, definition in enumerate(raw):
        try:
            re.compile(definition["Regex"])
        except re.error as exc:
            problems.append(f"{where}[{i}].Regex: not a regular expression ({exc})")
    return tuple((d["Name"], d["Regex"]) for d in raw)


def _accounts(jobs: Mapping[str, Job], config: GuardConfig, problems: list[str], *, blame: str) -> None:
    """Jobs in other accounts need an organization, and the demo's hub is the emulation's own account and region."""
    organization = config.organization
    if organization is None and all(job.account is None for job in jobs.values()):
        return  # one account, the emulation's own (and moto is not imported for nothing)
    from training_guard_local.emulator import ACCOUNT, REGION

    if organization is None:
        for key, job in jobs.items():
            if job.account not in (None, ACCOUNT):
                problems.append(
                    f"jobs.{key}.account: {blame} guards one account ({ACCOUNT} here); jobs in other accounts need "
                    "its organization section"
                )
        return
    if organization.hub_account != ACCOUNT:
        problems.append(
            f"organization.hub_account: the demo's hub is moto's default account {ACCOUNT} (whose credentials the "
            f"emulation has), and {blame} names {organization.hub_account}"
        )
    if organization.region != REGION:
        problems.append(f"organization.region: the demo runs in {REGION}, and {blame} names {organization.region}")


def _strings(raw: Any, where: str, what: str, problems: list[str]) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        problems.append(f"{where}: must be a list of {what}")
        return ()
    return tuple(raw)


def _text(spec: Mapping[str, Any], key: str, where: str, problems: list[str]) -> str | None:
    value = spec.get(key)
    if value is not None and not isinstance(value, str):
        problems.append(f"{where}.{key}: must be a string, got {value!r}")
        return None
    return value


def _one_of(value: Any, allowed: tuple[str, ...], where: str, problems: list[str]) -> str | None:
    if value is None:
        return None
    if value not in allowed:
        problems.append(f"{where}: must be one of {', '.join(allowed)}, got {value!r}")
        return None
    return str(value)


_STEP_FIELDS = (
    "minute", "job", "status", "secondary", "rules", "details", "failure_reason", "deliveries",
    "alarm", "reason", "sagemaker", "sweep", "publish", "host_metrics", "click", "log_lines", "note",
)  # fmt: skip
_STEP_KINDS = ("status", "alarm", "sagemaker", "sweep", "publish", "host_metrics", "click", "log_lines")
_JOB_STEPS = ("status", "alarm", "sagemaker", "publish", "host_metrics", "click", "log_lines")


def _steps(
    raw: Any, jobs: Mapping[str, Job], config: GuardConfig, problems: list[str], *, blame: str = "the configuration"
) -> tuple[Step, ...]:
    if not isinstance(raw, list) or not raw:
        problems.append("steps: must be a non-empty list")
        return ()
    steps: list[Step] = []
    last_minute = 0.0
    ended: dict[str, tuple[str, str]] = {}  # job key -> (its end state, the step that reported it)
    for i, spec in enumerate(raw):
        where = f"steps[{i}]"
        if not isinstance(spec, Mapping):
            problems.append(f"{where}: must be an object")
            continue
        _unknown(spec, _STEP_FIELDS, f"{where}.", problems)
        minute = spec.get("minute", last_minute)
        if isinstance(minute, bool) or not isinstance(minute, int | float) or minute < last_minute:
            problems.append(f"{where}.minute: must be a number, not before the previous step ({last_minute:g})")
            minute = last_minute
        last_minute = float(minute)
        step = _step(spec, where, float(minute), jobs=jobs, config=config, problems=problems, blame=blame)
        if step.job is not None and step.status is not None:
            if step.job in ended and step.status != ended[step.job][0]:
                status, at = ended[step.job]
                problems.append(
                    f"{where}.status: job {step.job!r} ended {status} at {at}; Completed, Failed and Stopped are final "
                    "in SageMaker (a job that has ended does not run again)"
                )
            elif step.status in ENDED:
                ended.setdefault(step.job, (step.status, where))
        steps.append(step)
    return tuple(steps)


def _step(
    spec: Mapping[str, Any],
    where: str,
    minute: float,
    *,
    jobs: Mapping[str, Job],
    config: GuardConfig,
    problems: list[str],
    blame: str,
) -> Step:
    job = spec.get("job")
    if job is not None and (not isinstance(job, str) or job not in jobs):
        problems.append(f"{where}.job: no job {job!r} in jobs")
        job = None
    kinds = [k for k in _STEP_KINDS if spec.get(k) not in (None, False, {}, [])]
    if len(kinds) != 1:
        problems.append(f"{where}: needs exactly one of {', '.join(_STEP_KINDS)} (got {kinds or 'none'})")
    if any(k in spec for k in _JOB_STEPS) and "job" not in spec:
        problems.append(f"{where}.job: required for this step")
    if "sweep" in spec and spec["sweep"] is not True:
        problems.append(f"{where}.sweep: must be true (a sweeper run)")
    status = _one_of(spec.get("status"), JOB_STATUSES, f"{where}.status", problems)
    secondary = _one_of(spec.get("secondary"), SECONDARY_STATUSES, f"{where}.secondary", problems)
    rules: dict[str, str] = {}
    raw_rules = spec.get("rules", {})
    if not isinstance(raw_rules, Mapping):
        problems.append(f"{where}.rules: must map rule names to statuses ({', '.join(RULE_STATUSES)})")
    else:
        for rule, rule_status in raw_rules.items():
            if _one_of(rule_status, RULE_STATUSES, f"{where}.rules.{rule}", problems) is not None:
                rules[rule] = rule_status
    details = spec.get("details", {})
    if not isinstance(details, Mapping) or not all(isinstance(v, str) for v in details.values()):
        problems.append(f"{where}.details: must map rule names to their StatusDetails text")
        details = {}
    alarm = _text(spec, "alarm", where, problems)
    if alarm and config.metric_guard(alarm) is None:
        known = ", ".join(g.name for g in config.metric_guards) or "none"
        problems.append(f"{where}.alarm: {blame} has no metric guard {alarm!r} (its metric guards: {known})")
    sagemaker = _one_of(spec.get("sagemaker"), SAGEMAKER_ACTIONS, f"{where}.sagemaker", problems)
    deliveries = spec.get("deliveries", 1)
    if isinstance(deliveries, bool) or not isinstance(deliveries, int) or not 1 <= deliveries <= MAX_DELIVERIES:
        problems.append(f"{where}.deliveries: must be a whole number from 1 to {MAX_DELIVERIES}")
        deliveries = 1
    publish = spec.get("publish", {})
    if not isinstance(publish, Mapping) or not all(
        isinstance(v, list) and v and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)
        for v in publish.values()
    ):
        problems.append(f"{where}.publish: must map metric names to non-empty lists of numbers")
        publish = {}
    host_metrics = _host_metrics(
        spec.get("host_metrics"), jobs.get(job) if job else None, minute, f"{where}.host_metrics", problems
    )
    return Step(
        minute=minute,
        job=job,
        status=status,
        secondary=secondary,
        rules=rules,
        details=dict(details),
        failure_reason=_text(spec, "failure_reason", where, problems),
        deliveries=deliveries,
        alarm=alarm,
        reason=_text(spec, "reason", where, problems),
        sagemaker=sagemaker,
        sweep=spec.get("sweep") is True,
        publish={k: [float(x) for x in v] for k, v in publish.items()},
        host_metrics=host_metrics,
        click=_click(spec.get("click"), config, f"{where}.click", problems, blame=blame),
        log_lines=_log_lines(spec.get("log_lines", 0), jobs.get(job) if job else None, where, problems),
        note=_text(spec, "note", where, problems),
    )


def _log_lines(raw: Any, job: Job | None, where: str, problems: list[str]) -> int:
    """How many more lines of its log the job writes: a whole number, of a job that has a log."""
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        problems.append(f"{where}.log_lines: must be a whole number of lines from 1, got {raw!r}")
        return 0
    if raw and job is not None and not job.log_lines:
        problems.append(f"{where}.log_lines: job {job.key!r} has no log (jobs.{job.key}.log)")
    return raw


def _click(raw: Any, config: GuardConfig, where: str, problems: list[str], *, blame: str) -> ClickStep | None:
    """A press of one of the guard's Slack buttons: {"button": "stop", "user": "U0ALICE"}."""
    if raw is None or raw == {}:
        return None
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must be an object with a button ({', '.join(BUTTONS)}) and a user (U0ALICE)")
        return None
    _unknown(raw, ("button", "user"), f"{where}.", problems)
    if not config.slack.app_mode:
        problems.append(f"{where}: buttons are Slack app mode's; {blame} has slack.mode {config.slack.mode.value}")
    button = _one_of(raw.get("button"), BUTTONS, f"{where}.button", problems)
    if raw.get("button") is None:
        problems.append(f"{where}.button: required, one of {', '.join(BUTTONS)}")
    user = raw.get("user")
    if not (isinstance(user, str) and _SLACK_USER.match(user)):
        problems.append(f"{where}.user: a Slack user ID (capital letters and digits, e.g. U0ALICE), got {user!r}")
        user = None
    if button is None or user is None:
        return None
    return ClickStep(button=button, user=user)


def _host_metrics(
    raw: Any, job: Job | None, minute: float, where: str, problems: list[str]
) -> dict[str, dict[str, tuple[float, ...]]]:
    """Instance metrics per host of the step's job: {metric: {"algo-<n>": [one datapoint a minute]}}."""
    if raw is None or raw == {}:
        return {}  # no step of this kind (an empty one is refused as a step of no kind)
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must map instance metric names to hosts (algo-1, ...) and their datapoints")
        return {}
    hosts_of_job = [f"algo-{n}" for n in range(1, (job.instance_count if job else 1) + 1)]
    first = int(minute) + 1  # datapoints one a minute up to the step's minute, none before the scenario starts
    out: dict[str, dict[str, tuple[float, ...]]] = {}
    for metric, hosts in raw.items():
        at = f"{where}.{metric}"
        if metric not in INSTANCE_METRICS:
            problems.append(
                f"{at}: not an instance metric SageMaker publishes per host ({', '.join(INSTANCE_METRICS)})"
            )
            continue
        if not isinstance(hosts, Mapping) or not hosts:
            problems.append(f"{at}: must map the job's hosts (algo-1, ...) to lists of datapoints, one a minute")
            continue
        ceiling = _ceiling(metric, job)
        for host, values in hosts.items():
            here = f"{at}.{host}"
            if job is not None and host not in hosts_of_job:
                problems.append(f"{here}: not a host of job {job.key!r} ({', '.join(hosts_of_job)}: one per instance)")
                continue
            if not isinstance(values, list) or not values or not all(_percentage(v) for v in values):
                problems.append(f"{here}: must be a non-empty list of numbers from 0, one datapoint a minute")
                continue
            if len(values) > first:
                problems.append(
                    f"{here}: {len(values)} datapoints, one a minute up to minute {minute:g}, would start before "
                    f"the scenario (at most {first})"
                )
                continue
            if ceiling is not None and max(values) > ceiling[0]:
                problems.append(f"{here}: {max(values):g} is above {ceiling[0]:g}, the most {ceiling[1]}")
                continue
            out.setdefault(metric, {})[host] = tuple(float(v) for v in values)
    return out


def _percentage(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < float("inf")


def _ceiling(metric: str, job: Job | None) -> tuple[float, str] | None:
    """The most a host reports of this metric, and why; None when no table here says."""
    if metric in _PERCENT_METRICS:
        return 100.0, "a percentage can be"
    gpus = gpu_count(job.instance_type) if job is not None and metric in _PER_GPU_METRICS else None
    if job is not None and gpus is not None:
        return 100.0 * gpus, f"a host of {job.instance_type} reports (100 x its {gpus} GPU(s))"
    return None


def _price_list(raw: Any, folder: Path, problems: list[str]) -> dict[str, PriceRecording]:
    """Recorded GetProducts answers by instance type, each file read now: a page (one response) or a list of pages
    in call order, each page but the last with the `NextToken` that asks for the next."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append("price_list: must map instance types to files of recorded GetProducts answers")
        return {}
    out: dict[str, PriceRecording] = {}
    for instance_type, file in raw.items():
        where = f"price_list.{instance_type}"
        if not instance_type.startswith("ml."):
            problems.append(f"{where}: not a SageMaker instance type such as ml.g5.2xlarge")
            continue
        if not isinstance(file, str) or not file:
            problems.append(f"{where}: must be the path of a recorded GetProducts answer (JSON)")
            continue
        # In the scenario's folder, else beside the shipped scenarios: a copy of one keeps its recordings.
        path = next((p for p in (folder / file, SCENARIOS_DIR / file) if p.is_file()), folder / file)
        try:
            data = read_json(path, "recorded GetProducts answer")
        except UsageError as exc:
            problems.append(f"{where}: {exc}")
            continue
        pages = [data] if isinstance(data, Mapping) else data
        bad = _pages_problem(pages)
        if bad:
            problems.append(f"{where}: {path}: {bad}")
            continue
        out[instance_type] = PriceRecording(path=path, pages=tuple(pages))
    return out


def _pages_problem(pages: Any) -> str | None:
    if not isinstance(pages, list) or not pages or not all(isinstance(p, Mapping) for p in pages):
        return "must hold a GetProducts response, or a non-empty list of them (one per page)"
    for number, page in enumerate(pages, start=1):
        items = page.get("PriceList")
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            return f"page {number}: PriceList must be a list of JSON strings, as GetProducts returns it"
        token = page.get("NextToken")
        if number < len(pages) and not (isinstance(token, str) and token):
            return f"page {number}: has no NextToken, so page {number + 1} would never be asked for"
        if number == len(pages) and token is not None:
            return f"page {number}: its NextToken asks for a page the recording does not have"
    return None


_EXPECT_FIELDS = (
    "stopped_by_guard", "final_status", "notifications", "stopped_via", "ignored_events", "stopped_by",
    "stopped_by_click", "stop_calls", "slack_parents",
)  # fmt: skip


def _expect(raw: Any, jobs: Mapping[str, Job], problems: list[str]) -> dict[str, Expectation]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append("expect: must be an object of job key -> expectation")
        return {}
    out: dict[str, Expectation] = {}
    for key, spec in raw.items():
        where = f"expect.{key}"
        if key not in jobs:
            problems.append(f"{where}: no job {key!r} in jobs")
            continue
        if not isinstance(spec, Mapping):
            problems.append(f"{where}: must be an object")
            continue
        _unknown(
            spec,
            _EXPECT_FIELDS,
            f"{where}.",
            problems,
        )
        stopped = spec.get("stopped_by_guard")
        if stopped is not None and not isinstance(stopped, bool):
            problems.append(f"{where}.stopped_by_guard: must be true or false")
            stopped = None
        final = _one_of(spec.get("final_status"), JOB_STATUSES, f"{where}.final_status", problems)
        notes = spec.get("notifications")
        kinds: tuple[str, ...] | None = None
        if notes is not None:
            if not isinstance(notes, list):
                problems.append(f"{where}.notifications: must be a list of notification kinds")
            else:
                for j, kind in enumerate(notes):
                    _one_of(kind, NOTIFICATION_KINDS, f"{where}.notifications[{j}]", problems)
                kinds = tuple(str(n) for n in notes)
        via = spec.get("stopped_via")
        if via is not None and not (isinstance(via, str) and (via == HUB_CREDENTIALS or _ROLE_ARN.match(via))):
            problems.append(
                f"{where}.stopped_via: a role ARN (arn:aws:iam::<account>:role/<name>) or {HUB_CREDENTIALS!r} (the "
                f"hub's own credentials), got {via!r}"
            )
            via = None
        ignored = spec.get("ignored_events")
        if ignored is not None and (isinstance(ignored, bool) or not isinstance(ignored, int) or ignored < 0):
            problems.append(f"{where}.ignored_events: must be a whole number from 0, got {ignored!r}")
            ignored = None
        out[key] = Expectation(
            stopped_by_guard=stopped,
            final_status=final,
            notifications=kinds,
            stopped_via=via,
            ignored_events=ignored,
            **_stop_expectations(spec, where, problems),
        )
    return out


def _stop_expectations(spec: Mapping[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    """Who stopped the job and how (its tag, a click, the StopTrainingJob calls), and its Slack threads."""
    stopped_by = spec.get("stopped_by")
    if stopped_by is not None and not (isinstance(stopped_by, str) and stopped_by):
        problems.append(f"{where}.stopped_by: the training-guard:stopped-by tag's value, got {stopped_by!r}")
        stopped_by = None
    by_click = spec.get("stopped_by_click")
    if by_click is not None and not isinstance(by_click, bool):
        problems.append(f"{where}.stopped_by_click: must be true or false")
        by_click = None
    return {
        "stopped_by": stopped_by,
        "stopped_by_click": by_click,
        "stop_calls": _count(spec, "stop_calls", where, problems),
        "slack_parents": _count(spec, "slack_parents", where, problems),
    }


def _count(spec: Mapping[str, Any], key: str, where: str, problems: list[str]) -> int | None:
    value = spec.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        problems.append(f"{where}.{key}: must be a whole number from 0, got {value!r}")
        return None
    return value
