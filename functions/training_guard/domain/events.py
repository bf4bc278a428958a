"""Tolerant parsing of raw events and API responses into domain records.

What it cannot use becomes `None` or empty, except fields without which an event means nothing (`EventError`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import field
from datetime import UTC, datetime
from typing import Any

from training_guard import contract
from training_guard.config import json_words
from training_guard.config.frozen import frozen
from training_guard.domain.text import ascii_int
from training_guard.domain.values import mapping

# SageMaker's vocabularies; unknown values are kept as they are: SageMaker adds statuses, they must not crash the guard.
IN_PROGRESS = "InProgress"
COMPLETED = "Completed"
FAILED = "Failed"
STOPPING = "Stopping"
STOPPED = "Stopped"
TRAINING = "Training"  # the SecondaryStatus while the algorithm trains (after Starting, Downloading)

ISSUES_FOUND = "IssuesFound"
RULE_ERROR = "Error"

DEBUGGER = "debugger"
PROFILER = "profiler"

_RULE_LISTS = (("DebugRuleEvaluationStatuses", DEBUGGER), ("ProfilerRuleEvaluationStatuses", PROFILER))
_MAX_TEXT = 4096  # longest free text kept from an event (StatusDetails is documented <= 1024)
# Epoch values above this are milliseconds (1e11 s is the year 5138; 1e11 ms is 1973).
_MILLIS_THRESHOLD = 1e11


class EventError(ValueError):
    """The event cannot be used; the message says why in one line."""


class ForeignEvent(EventError):
    """A well-formed event that is not the guard's to handle (another source or detail-type)."""


@frozen
class Finding:
    """What a rule or a guard found about a job: a rule's evaluation status, a metric guard's alarm or a stall."""

    name: str  # the rule's RuleConfigurationName, the metric guard's name, or "stall"
    source: str  # DEBUGGER | PROFILER | policy.METRIC: who found it
    status: str
    details: str | None = None
    evaluation_job_arn: str | None = None
    last_modified: datetime | None = None


@frozen
class InstanceGroup:
    """Instances of one type a job runs on: its one type, one of its `InstanceGroups`, or SageMaker's pick."""

    instance_type: str | None
    count: int | None
    name: str | None = None


@frozen
class TrainingJob:
    name: str
    status: str
    arn: str | None = None
    secondary_status: str | None = None
    failure_reason: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    # False when the source said nothing of tags: `tags` is then empty for want of knowing, not because there are none.
    tags_known: bool = True
    # None: the source did not say (the event omitted the lists); () : it said "no rules".
    rules: tuple[Finding, ...] | None = None
    creation_time: datetime | None = None
    training_start_time: datetime | None = None
    training_end_time: datetime | None = None
    last_modified_time: datetime | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    metric_names: tuple[str, ...] = ()
    metric_definitions: tuple[tuple[str, str], ...] = ()  # (Name, Regex): how SageMaker reads the job's log
    tuning_job_arn: str | None = None
    # The latest entry into "Training" (after data download, and again after a spot restart); None: not listed.
    training_phase_start: datetime | None = None
    # What the job is billed for (`billed_instances`); None or empty when the source did not say.
    instance_groups: tuple[InstanceGroup, ...] = ()
    selected_instance_type: str | None = None  # picked by SageMaker from ResourceConfig.InstancePreferences
    selected_instance_count: int | None = None
    max_runtime_seconds: float | None = None
    managed_spot: bool = False
    billable_seconds: float | None = None  # BillableTimeInSeconds: wall-clock, once the job ended
    training_time_seconds: float | None = None

    @property
    def billed_instances(self) -> tuple[InstanceGroup, ...]:
        """What the job is billed for: the selected type, else the heterogeneous groups, else the one type and
        count (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceConfig.html)."""
        if self.selected_instance_type:
            return (InstanceGroup(self.selected_instance_type, self.selected_instance_count),)
        if self.instance_groups:
            return self.instance_groups
        if self.instance_type is None:
            return ()
        return (InstanceGroup(self.instance_type, self.instance_count),)

    @property
    def running(self) -> bool:
        return self.status == IN_PROGRESS

    def training_seconds(self, now: datetime) -> float | None:
        """Seconds of training so far (or in all, once ended); None when unknown."""
        start = self.training_start_time
        if start is None:
            return None
        end = self.training_end_time if self.training_end_time and not self.running else now
        return max(0.0, (end - start).total_seconds())


@frozen
class JobEvent:
    event_id: str
    account: str | None
    region: str | None
    time: datetime | None
    source: str
    detail_type: str
    job: TrainingJob


def parse_event(event: Any) -> JobEvent:
    if not isinstance(event, Mapping):
        raise EventError(f"event must be a JSON object, got {json_words.kind(event)}")
    source = _text(event.get("source"))
    detail_type = _text(event.get("detail-type"))
    if source != contract.SAGEMAKER_EVENT_SOURCE or detail_type != contract.TRAINING_JOB_STATE_CHANGE:
        raise ForeignEvent(f"not a training job state change (source={source!r}, detail-type={detail_type!r})")
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        raise EventError("event has no 'detail' object")
    return JobEvent(
        event_id=_text(event.get("id")) or "",
        account=_text(event.get("account")),
        region=_text(event.get("region")),
        time=parse_time(event.get("time")),
        source=source,
        detail_type=detail_type,
        job=parse_job(detail, where="detail"),
    )


def parse_job(data: Mapping[str, Any], *, where: str = "DescribeTrainingJob") -> TrainingJob:
    name = _text(data.get("TrainingJobName"))
    if not name:
        raise EventError(f"{where}.TrainingJobName is missing or empty")
    status = _text(data.get("TrainingJobStatus"))
    if not status:
        raise EventError(f"{where}.TrainingJobStatus is missing or empty (job {name})")
    resources = data.get("ResourceConfig")
    resources = resources if isinstance(resources, Mapping) else {}
    algorithm = data.get("AlgorithmSpecification")
    algorithm = algorithm if isinstance(algorithm, Mapping) else {}
    return TrainingJob(
        name=name,
        status=status,
        arn=_text(data.get("TrainingJobArn")),
        secondary_status=_text(data.get("SecondaryStatus")),
        failure_reason=_text(data.get("FailureReason")),
        tags=_tags(data.get("Tags")),
        tags_known=data.get("Tags") is not None,
        rules=_rules(data),
        creation_time=parse_time(data.get("CreationTime")),
        training_start_time=parse_time(data.get("TrainingStartTime")),
        training_end_time=parse_time(data.get("TrainingEndTime")),
        last_modified_time=parse_time(data.get("LastModifiedTime")),
        instance_type=_text(resources.get("InstanceType")),
        instance_count=_count(resources.get("InstanceCount")),
        metric_names=_metric_names(algorithm.get("MetricDefinitions")),
        metric_definitions=_metric_definitions(algorithm.get("MetricDefinitions")),
        tuning_job_arn=_text(data.get("TuningJobArn")),
        training_phase_start=_training_phase_start(data.get("SecondaryStatusTransitions")),
        instance_groups=_instance_groups(resources.get("InstanceGroups")),
        selected_instance_type=_text(resources.get("SelectedInstanceType")) or None,
        selected_instance_count=_count(resources.get("SelectedInstanceCount")),
        max_runtime_seconds=parse_seconds(mapping(data.get("StoppingCondition")).get("MaxRuntimeInSeconds")),
        managed_spot=parse_flag(data.get("EnableManagedSpotTraining")),
        billable_seconds=parse_seconds(data.get("BillableTimeInSeconds")),
        training_time_seconds=parse_seconds(data.get("TrainingTimeInSeconds")),
    )


def billed_groups(resources: Any) -> tuple[InstanceGroup, ...]:
    config = mapping(resources)
    return TrainingJob(
        name="-",
        status="-",
        instance_type=_text(config.get("InstanceType")) or None,
        instance_count=_count(config.get("InstanceCount")),
        instance_groups=_instance_groups(config.get("InstanceGroups")),
        selected_instance_type=_text(config.get("SelectedInstanceType")) or None,
        selected_instance_count=_count(config.get("SelectedInstanceCount")),
    ).billed_instances


def parse_seconds(value: Any) -> float | None:
    """A duration in seconds (int, float or numeric string, as events carry numbers); None unless finite, >= 0."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, int | float):
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _instance_groups(value: Any) -> tuple[InstanceGroup, ...]:
    """Every listed group, a malformed one too (unknown type and count): dropping it would under-price the job."""
    if not isinstance(value, list):
        return ()
    return tuple(
        InstanceGroup(
            _text(mapping(g).get("InstanceType")) or None,
            _count(mapping(g).get("InstanceCount")),
            _text(mapping(g).get("InstanceGroupName")) or None,
        )
        for g in value
    )


def parse_flag(value: Any) -> bool:
    """A boolean as JSON carries it; the string "true" too (events are not always typed). Anything else False."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _training_phase_start(value: Any) -> datetime | None:
    if not isinstance(value, list):
        return None
    starts = [
        start
        for t in value
        if isinstance(t, Mapping) and t.get("Status") == TRAINING and (start := parse_time(t.get("StartTime")))
    ]
    return max(starts, default=None)


def parse_time(value: Any) -> datetime | None:
    """Epoch seconds or milliseconds (int, float or numeric string), ISO-8601, datetime, or None."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    number: float | None = None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            number = float(text)
        except ValueError:
            try:
                parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                return None
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if number is None or not math.isfinite(number) or number < 0:
        return None
    seconds = number / 1000.0 if number > _MILLIS_THRESHOLD else number
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _text(value: Any, limit: int = _MAX_TEXT) -> str | None:
    if not isinstance(value, str):
        return None
    return value[:limit]


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return ascii_int(value)
    return None


def _tags(value: Any) -> dict[str, str]:
    """Tags as a map (events) or as [{"Key", "Value"}] (the API); anything else: no tags."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items() if isinstance(k, str) and v is not None}
    if isinstance(value, list):
        pairs = (t for t in value if isinstance(t, Mapping) and isinstance(t.get("Key"), str))
        return {t["Key"]: str(t.get("Value", "")) for t in pairs}
    return {}


def _rules(data: Mapping[str, Any]) -> tuple[Finding, ...] | None:
    present = False
    rules: list[Finding] = []
    for key, kind in _RULE_LISTS:
        entries = data.get(key)
        if entries is None:
            continue
        present = True
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if not isinstance(entry, Mapping):
                continue
            name = _text(entry.get("RuleConfigurationName"))
            status = _text(entry.get("RuleEvaluationStatus"))
            if not name or not status:
                continue
            rules.append(
                Finding(
                    name=name,
                    source=kind,
                    status=status,
                    details=_text(entry.get("StatusDetails")),
                    evaluation_job_arn=_text(entry.get("RuleEvaluationJobArn")),
                    last_modified=parse_time(entry.get("LastModifiedTime")),
                )
            )
    return tuple(rules) if present else None


def _metric_names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(name for d in value if isinstance(d, Mapping) and (name := _text(d.get("Name"))))


def _metric_definitions(value: Any) -> tuple[tuple[str, str], ...]:
    """(Name, Regex) pairs; a definition without both is skipped (SageMaker requires both)."""
    if not isinstance(value, list):
        return ()
    return tuple(
        (name, regex)
        for d in value
        if isinstance(d, Mapping) and (name := _text(d.get("Name"))) and (regex := _text(d.get("Regex")))
    )
