"""What moto's SageMaker backend lacks for the guard: job states and `StopTrainingJob`.

moto 5.2 creates every training job `Completed` at once, keeps no rule statuses and raises
NotImplementedError on `stop_training_job`. This module adds, for the emulation only:

- `put_job(...)`: create or update a job in the state a recorded event reports;
- `StopTrainingJob` with SageMaker's semantics: only legal while `InProgress` (else
  `ValidationException` "The request was rejected because the training job is in status X."),
  moving the job to `Stopping`; `finish_stopping(...)` then moves it to `Stopped` as SageMaker does
  after the container exits;
- the job found by the ARN its event reports (`AddTags`, `ListTags`): an event may carry an ARN
  whose last segment is not the job's name (AWS's own sample event does), and the real job has the
  ARN its event reports; moto, given an ARN it does not know, failed with an AttributeError where
  it means "not found";
- a missing job answered as SageMaker answers it, not as moto does (`NOT_FOUND`): so that the tests agree with AWS;
- an ended job keeps its end state: Completed, Failed and Stopped are final in SageMaker, so a late or
  re-ordered event (InProgress after Completed) does not bring it back, and a stop of it is refused.

Every `StopTrainingJob` is recorded with the account it was served in and the access key that signed it
(`stop_calls`): the organization demo shows whether a member's job was stopped through that member's role.

Times the emulation sets (a stop's `LastModifiedTime`) come from `training_guard.adapters.clock`, the clock
a replay sets to the event's time.

`install()` is idempotent and must run before the first SageMaker call of a mocked session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moto.core.responses import EmptyResult
from moto.sagemaker import models as sm_models
from moto.sagemaker import responses as sm_responses
from moto.sagemaker.exceptions import ValidationError

from training_guard.adapters import clock
from training_guard.domain.events import parse_time

_DETAIL_FIELDS = {
    # event detail key -> FakeTrainingJob attribute (describe_training_job camel-cases them back)
    "TrainingJobStatus": "training_job_status",
    "SecondaryStatus": "secondary_status",
    "FailureReason": "failure_reason",
    "DebugRuleEvaluationStatuses": "debug_rule_evaluation_statuses",
    "ProfilerRuleEvaluationStatuses": "profiler_rule_evaluation_statuses",
    "ResourceConfig": "resource_config",
    "StoppingCondition": "stopping_condition",
    "TuningJobArn": "tuning_job_arn",
}
_TIME_FIELDS = {
    "CreationTime": "creation_time",
    "TrainingStartTime": "training_start_time",
    "TrainingEndTime": "training_end_time",
    "LastModifiedTime": "last_modified_time",
}
# Attributes of moto's fake that real DescribeTrainingJob would not show for a running job.
_MOTO_ONLY = ("final_metric_data_list", "model_artifacts")


# SageMaker's answer for a training job that does not exist: ValidationException "Requested resource not found."
# (DescribeTrainingJob: aws/aws-sdk#165, aws/amazon-sagemaker-examples#2360); moto says "Could not find ...".
# ListTags/AddTags of a missing resource are ValidationException too (aws/amazon-sagemaker-feedback#108); that
# thread quotes no message, so they answer with the same one.
NOT_FOUND = "Requested resource not found."
ENDED = ("Completed", "Failed", "Stopped")  # SageMaker's final states: no event moves a job out of them
_LIFECYCLE = ("TrainingJobStatus", "SecondaryStatus", "FailureReason", "TrainingEndTime")

_ARN_ALIASES = "_training_guard_arn_aliases"  # backend attribute: an event's job ARN -> the job's name


@dataclass(frozen=True)
class StopCall:
    """One StopTrainingJob request: where it was served and with which credentials."""

    account: str
    region: str
    job: str
    access_key: str


_STOP_CALLS: list[StopCall] = []


def _backend(account: str, region: str) -> Any:
    return sm_models.sagemaker_backends[account][region]


_moto_resource_from_arn = sm_models.SageMakerModelBackend._get_resource_from_arn


def _resource_from_arn(self: Any, arn: str) -> Any:
    """moto's lookup (by the name the ARN ends in); else the job whose event reported this ARN; else "not
    found" in SageMaker's words (where moto's lookup returns None it then failed with AttributeError)."""
    resource = _moto_resource_from_arn(self, arn)
    if resource is None:
        name = getattr(self, _ARN_ALIASES, {}).get(arn)
        resource = self.training_jobs.get(name) if name is not None else None
    if resource is None:
        raise ValidationError(message=NOT_FOUND)
    return resource


_moto_describe_training_job = sm_models.SageMakerModelBackend.describe_training_job


def _describe_training_job(self: Any, training_job_name: str) -> Any:
    if training_job_name not in self.training_jobs:
        raise ValidationError(message=NOT_FOUND)
    return _moto_describe_training_job(self, training_job_name)


def _stop_training_job_backend(self: Any, training_job_name: str) -> None:
    job = self.training_jobs.get(training_job_name)
    if job is None:
        raise ValidationError(message=NOT_FOUND)
    if job.training_job_status != "InProgress":
        raise ValidationError(
            message=f"The request was rejected because the training job is in status {job.training_job_status}."
        )
    job.training_job_status = "Stopping"
    job.secondary_status = "Stopping"
    job.last_modified_time = clock.utcnow()


def _stop_training_job_response(self: Any) -> Any:
    name = self._get_param("TrainingJobName")
    backend = self.sagemaker_backend
    self.sagemaker_backend.stop_training_job(name)
    _STOP_CALLS.append(StopCall(backend.account_id, backend.region_name, str(name), self.get_access_key()))
    return EmptyResult()


def stop_calls(account: str | None = None, region: str | None = None, job: str | None = None) -> list[StopCall]:
    """The StopTrainingJob requests that stopped a job since `forget_stop_calls`, in order (filtered by what is
    given). A refused one (the job not InProgress) is not recorded."""
    return [
        call
        for call in _STOP_CALLS
        if (account is None or call.account == account)
        and (region is None or call.region == region)
        and (job is None or call.job == job)
    ]


def forget_stop_calls() -> None:
    _STOP_CALLS.clear()


def install() -> None:
    """Teach moto's SageMaker `StopTrainingJob` and SageMaker's "not found" (idempotent)."""
    sm_models.SageMakerModelBackend.stop_training_job = _stop_training_job_backend  # type: ignore[attr-defined]
    sm_models.SageMakerModelBackend.describe_training_job = _describe_training_job  # type: ignore[method-assign]
    sm_responses.SageMakerResponse.stop_training_job = _stop_training_job_response  # type: ignore[attr-defined]
    sm_models.SageMakerModelBackend._get_resource_from_arn = _resource_from_arn  # type: ignore[method-assign]


def put_job(account: str, region: str, detail: Mapping[str, Any]) -> Any:
    """Create the job an event names, or bring it to the state the event reports.

    A job that has ended (`ENDED`) keeps its end state whatever a late or duplicate event reports, and a job
    stopping keeps stopping unless the event reports an end: as in SageMaker, where these are final and a stop
    cannot be undone.
    """
    backend = _backend(account, region)
    name = str(detail["TrainingJobName"])
    job = backend.training_jobs.get(name)
    existed = job is not None
    if job is None:
        job = backend.create_training_job(
            training_job_name=name,
            hyper_parameters={},
            algorithm_specification=dict(detail.get("AlgorithmSpecification") or {"TrainingInputMode": "File"}),
            role_arn=f"arn:aws:iam::{account}:role/emulated-sagemaker-role",
            input_data_config=[],
            output_data_config={"S3OutputPath": f"s3://emulated-{account}/output"},
            resource_config=dict(detail.get("ResourceConfig") or {}),
            vpc_config={},
            stopping_condition=dict(detail.get("StoppingCondition") or {}),
            tags=[{"Key": k, "Value": str(v)} for k, v in dict(detail.get("Tags") or {}).items()],
            enable_network_isolation=False,
            enable_inter_container_traffic_encryption=False,
            enable_managed_spot_training=False,
            checkpoint_config={},
            debug_hook_config={},
            debug_rule_configurations=[],
            tensor_board_output_config={},
            experiment_config={},
        )
        # moto replaces MetricDefinitions with a sample; keep what the event declared.
        job.algorithm_specification = dict(detail.get("AlgorithmSpecification") or {"TrainingInputMode": "File"})
        for attr in _MOTO_ONLY:
            setattr(job, attr, None)
        job.training_end_time = None
    arn = detail.get("TrainingJobArn")
    if isinstance(arn, str) and arn:
        aliases: dict[str, str] = backend.__dict__.setdefault(_ARN_ALIASES, {})
        aliases[arn] = name
    # moto creates a job Completed: a new job takes the event's state
    kept = existed and _keeps_its_state(str(job.training_job_status), detail.get("TrainingJobStatus"))
    for key, attr in _DETAIL_FIELDS.items():
        if key in detail and not (kept and key in _LIFECYCLE):
            setattr(job, attr, _rule_times(detail[key]) if key.endswith("RuleEvaluationStatuses") else detail[key])
    for key, attr in _TIME_FIELDS.items():
        if key in detail and not (kept and key in _LIFECYCLE):
            setattr(job, attr, parse_time(detail[key]))
    return job


def _keeps_its_state(current: str, reported: Any) -> bool:
    """Whether the job's status must not follow the event: it has ended, or it is stopping and the event
    reports no end."""
    return current in ENDED or (current == "Stopping" and reported not in ENDED)


def _rule_times(statuses: Any) -> Any:
    """Rule statuses as the API returns them: events carry epoch milliseconds, the API datetimes."""
    if not isinstance(statuses, list):
        return statuses
    return [
        {**s, "LastModifiedTime": parse_time(s.get("LastModifiedTime"))} if isinstance(s, Mapping) else s
        for s in statuses
    ]


def finish_stopping(account: str, region: str, name: str) -> bool:
    """`Stopping` -> `Stopped` (SageMaker does this once the container exits). True if it moved."""
    job = _backend(account, region).training_jobs.get(name)
    if job is None or job.training_job_status != "Stopping":
        return False
    job.training_job_status = "Stopped"
    job.secondary_status = "Stopped"
    job.training_end_time = job.last_modified_time = clock.utcnow()
    return True


def job_status(account: str, region: str, name: str) -> str | None:
    job = _backend(account, region).training_jobs.get(name)
    return None if job is None else str(job.training_job_status)
