"""Scenarios for `training-guard demo`: a timeline of what SageMaker and CloudWatch do, and what
the guard is expected to make of it. JSON files, validated with errors that name the field.

```json
{
  "name": "...",
  "config": { ...GuardConfig... },                    optional; --config FILE overrides it
  "jobs": {
    "mnist": {"name": "pytorch-mnist-lr01", "instance_type": "ml.p3.2xlarge", "instance_count": 1,
              "metrics": ["train:loss"], "tags": {"team": "vision"}}
  },
  "steps": [
    {"minute": 0, "job": "mnist", "status": "InProgress", "secondary": "Training",
     "rules": {"VanishingGradient": "IssuesFound"}, "details": {"VanishingGradient": "..."},
     "deliveries": 3, "note": "..."},                   a SageMaker state-change event (sent N times)
    {"minute": 5, "job": "resnet", "alarm": "loss-diverging", "reason": "..."},   a guard's alarm fires
    {"minute": 6, "job": "mnist", "sagemaker": "finish_stopping"},                SageMaker ends a stop
    {"minute": 9, "sweep": true}                                                  the sweeper runs
  ],
  "expect": {
    "mnist": {"stopped_by_guard": true, "final_status": "Stopped", "notifications": ["rule_error", ...]}
  }
}
```
Rule statuses are cumulative: each event carries every rule's latest status, as SageMaker's do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training_guard.config import ConfigError, GuardConfig

JOB_STATUSES = ("InProgress", "Completed", "Failed", "Stopping", "Stopped")
RULE_STATUSES = ("InProgress", "NoIssuesFound", "IssuesFound", "Error", "Stopping", "Stopped")
SEED_SCENARIO = Path(__file__).parent / "scenarios" / "seed.json"


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
    note: str | None = None


@dataclass(frozen=True)
class Expectation:
    stopped_by_guard: bool | None = None
    final_status: str | None = None
    notifications: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    config: GuardConfig
    jobs: Mapping[str, Job]
    steps: tuple[Step, ...]
    expect: Mapping[str, Expectation]


def load(path: Path, *, config_override: GuardConfig | None = None) -> Scenario:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError([f"cannot read: {exc.strerror or exc}"], str(path)) from None
    except json.JSONDecodeError as exc:
        raise ScenarioError([f"not JSON ({exc.msg} at line {exc.lineno})"], str(path)) from None
    return parse(data, source=str(path), config_override=config_override)


def parse(data: Any, *, source: str = "scenario", config_override: GuardConfig | None = None) -> Scenario:
    problems: list[str] = []
    if not isinstance(data, Mapping):
        raise ScenarioError(["the scenario must be a JSON object"], source)
    _unknown(data, ("name", "config", "jobs", "steps", "expect"), "", problems)
    config = config_override or GuardConfig()
    if config_override is None and data.get("config") is not None:
        try:
            config = GuardConfig.from_dict(data["config"], source="config")
        except ConfigError as exc:
            problems += [f"config.{p}" for p in exc.problems]
    jobs = _jobs(data.get("jobs"), problems)
    steps = _steps(data.get("steps"), jobs, config, problems)
    expect = _expect(data.get("expect"), jobs, problems)
    if problems:
        raise ScenarioError(problems, source)
    return Scenario(str(data.get("name") or source), config, jobs, steps, expect)


def _unknown(data: Mapping[str, Any], known: tuple[str, ...], where: str, problems: list[str]) -> None:
    for key in data:
        if key not in known:
            problems.append(f"{where}{key}: unknown field; known here: {', '.join(known)}")


def _jobs(raw: Any, problems: list[str]) -> dict[str, Job]:
    if not isinstance(raw, Mapping) or not raw:
        problems.append("jobs: must be an object of job key -> job")
        return {}
    jobs: dict[str, Job] = {}
    for key, spec in raw.items():
        where = f"jobs.{key}"
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str) or not spec["name"]:
            problems.append(f"{where}.name: a training job name is required")
            continue
        _unknown(
            spec,
            ("name", "instance_type", "instance_count", "metrics", "tags", "profiler_rules"),
            f"{where}.",
            problems,
        )
        tags = spec.get("tags") or {}
        if not isinstance(tags, Mapping) or not all(isinstance(v, str) for v in tags.values()):
            problems.append(f"{where}.tags: must map tag keys to string values")
            tags = {}
        metrics = spec.get("metrics") or []
        if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
            problems.append(f"{where}.metrics: must be a list of metric names")
            metrics = []
        jobs[key] = Job(
            key=key,
            name=spec["name"],
            instance_type=str(spec.get("instance_type") or "ml.p3.2xlarge"),
            instance_count=int(spec.get("instance_count") or 1),
            metrics=tuple(metrics),
            tags=dict(tags),
            profiler_rules=tuple(spec.get("profiler_rules") or ()),
        )
    return jobs


_STEP_FIELDS = (
    "minute", "job", "status", "secondary", "rules", "details", "failure_reason", "deliveries",
    "alarm", "reason", "sagemaker", "sweep", "publish", "note",
)  # fmt: skip


def _steps(  # noqa: PLR0912 - one flat checklist of a step's fields reads best
    raw: Any, jobs: Mapping[str, Job], config: GuardConfig, problems: list[str]
) -> tuple[Step, ...]:
    if not isinstance(raw, list) or not raw:
        problems.append("steps: must be a non-empty list")
        return ()
    steps: list[Step] = []
    last_minute = 0.0
    for i, spec in enumerate(raw):
        where = f"steps[{i}]"
        if not isinstance(spec, Mapping):
            problems.append(f"{where}: must be an object")
            continue
        _unknown(spec, _STEP_FIELDS, f"{where}.", problems)
        minute = spec.get("minute", last_minute)
        if isinstance(minute, bool) or not isinstance(minute, int | float) or minute < last_minute:
            problems.append(f"{where}.minute: must be a number, not before the previous step ({last_minute})")
            minute = last_minute
        last_minute = float(minute)
        job = spec.get("job")
        if job is not None and job not in jobs:
            problems.append(f"{where}.job: no job {job!r} in jobs")
        kinds = [k for k in ("status", "alarm", "sagemaker", "sweep", "publish") if spec.get(k)]
        if len(kinds) != 1:
            problems.append(
                f"{where}: needs exactly one of status, alarm, sagemaker, sweep, publish (got {kinds or 'none'})"
            )
        publish = spec.get("publish") or {}
        if not isinstance(publish, Mapping) or not all(
            isinstance(v, list) and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)
            for v in publish.values()
        ):
            problems.append(f"{where}.publish: must map metric names to lists of numbers")
            publish = {}
        if (spec.get("status") or spec.get("alarm") or spec.get("sagemaker") or publish) and job is None:
            problems.append(f"{where}.job: required for this step")
        if spec.get("status") and spec["status"] not in JOB_STATUSES:
            problems.append(f"{where}.status: must be one of {', '.join(JOB_STATUSES)}")
        rules = spec.get("rules") or {}
        for rule, status in rules.items() if isinstance(rules, Mapping) else []:
            if status not in RULE_STATUSES:
                problems.append(f"{where}.rules.{rule}: must be one of {', '.join(RULE_STATUSES)}")
        if spec.get("alarm") and config.metric_guard(spec["alarm"]) is None:
            problems.append(f"{where}.alarm: no metric guard {spec['alarm']!r} in the configuration")
        if spec.get("sagemaker") not in (None, "finish_stopping"):
            problems.append(f"{where}.sagemaker: the only SageMaker action is finish_stopping")
        deliveries = spec.get("deliveries", 1)
        if isinstance(deliveries, bool) or not isinstance(deliveries, int) or not 1 <= deliveries <= 10:
            problems.append(f"{where}.deliveries: must be a whole number from 1 to 10")
            deliveries = 1
        steps.append(
            Step(
                minute=float(minute),
                job=job,
                status=spec.get("status"),
                secondary=spec.get("secondary"),
                rules=dict(rules) if isinstance(rules, Mapping) else {},
                details=dict(spec.get("details") or {}),
                failure_reason=spec.get("failure_reason"),
                deliveries=deliveries,
                alarm=spec.get("alarm"),
                reason=spec.get("reason"),
                sagemaker=spec.get("sagemaker"),
                sweep=bool(spec.get("sweep")),
                publish={k: [float(x) for x in v] for k, v in publish.items()},
                note=spec.get("note"),
            )
        )
    return tuple(steps)


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
        _unknown(spec, ("stopped_by_guard", "final_status", "notifications"), f"{where}.", problems)
        notes = spec.get("notifications")
        out[key] = Expectation(
            stopped_by_guard=spec.get("stopped_by_guard"),
            final_status=spec.get("final_status"),
            notifications=tuple(notes) if isinstance(notes, list) else None,
        )
    return out
