"""What moto's SageMaker backend lacks for the guard: job states and `StopTrainingJob`.

moto 5.2 creates every training job `Completed` at once, keeps no rule statuses and raises
NotImplementedError on `stop_training_job`. This module adds, for the emulation only, as answers given through
botocore's events in front of moto (answers.py; moto's code is not touched, its jobs' data is):

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

`install()` is idempotent; a client answers so if made from a session `answers.install` was given (the emulation's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moto.sagemaker import models as sm_models

from training_guard.adapters import clock
from training_guard.domain.events import parse_time
from training_guard_local import answers

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
LIFECYCLE = ("TrainingJobStatus", "SecondaryStatus", "FailureReason", "TrainingEndTime")

SERVICE = "sagemaker"
VALIDATION = "ValidationException"
# An event's job ARN -> the job's (account, region, name); an emulation's start forgets them with its jobs.
_ARN_ALIASES: dict[str, tuple[str, str, str]] = {}


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


def _resolve_alias(params: dict[str, Any]) -> None:
    """`AddTags`/`ListTags` of the ARN an event reported: of the job's own ARN, which moto knows."""
    aliased = _ARN_ALIASES.get(str(params.get("ResourceArn")))
    if aliased is not None:
        account, region, name = aliased
        job = _backend(account, region).training_jobs.get(name)
        if job is not None:
            params["ResourceArn"] = job.arn


def _tags(call: answers.Call, model: Any) -> answers.Reply | None:
    """moto answers for a job it finds by the ARN; a training job it would not find is SageMaker's "not found"."""
    kind, _, name = str(call.params.get("ResourceArn")).rpartition(":")[2].partition("/")
    if kind == "training-job" and name not in _backend(call.account, call.region).training_jobs:
        return answers.refusal(model, VALIDATION, NOT_FOUND)
    return None


def _describe_training_job(call: answers.Call, model: Any) -> answers.Reply | None:
    if call.params.get("TrainingJobName") not in _backend(call.account, call.region).training_jobs:
        return answers.refusal(model, VALIDATION, NOT_FOUND)
    return None


def _stop_training_job(call: answers.Call, model: Any) -> answers.Reply:
    name = str(call.params.get("TrainingJobName"))
    job = _backend(call.account, call.region).training_jobs.get(name)
    if job is None:
        return answers.refusal(model, VALIDATION, NOT_FOUND)
    if job.training_job_status != "InProgress":
        message = f"The request was rejected because the training job is in status {job.training_job_status}."
        return answers.refusal(model, VALIDATION, message)
    job.training_job_status = "Stopping"
    job.secondary_status = "Stopping"
    job.last_modified_time = clock.utcnow()
    _STOP_CALLS.append(StopCall(call.account, call.region, name, call.access_key))
    return answers.reply(model)


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
    """Forget the stops and the ARNs events reported (a new emulation: moto's jobs are gone)."""
    _STOP_CALLS.clear()
    _ARN_ALIASES.clear()


def install(session: Any = None) -> None:
    """Answer `StopTrainingJob`, and SageMaker's "not found", in front of moto (idempotent; `answers.install`)."""
    answers.install(session)
    answers.answer(SERVICE, "StopTrainingJob", _stop_training_job)
    answers.answer(SERVICE, "DescribeTrainingJob", _describe_training_job)
    answers.answer(SERVICE, "AddTags", _tags, prepare=_resolve_alias)
    answers.answer(SERVICE, "ListTags", _tags, prepare=_resolve_alias)


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
        _ARN_ALIASES[arn] = (account, region, name)
    # moto creates a job Completed: a new job takes the event's state
    kept = existed and keeps_its_state(str(job.training_job_status), detail.get("TrainingJobStatus"))
    for key, attr in _DETAIL_FIELDS.items():
        if key in detail and not (kept and key in LIFECYCLE):
            setattr(job, attr, _rule_times(detail[key]) if key.endswith("RuleEvaluationStatuses") else detail[key])
    for key, attr in _TIME_FIELDS.items():
        if key in detail and not (kept and key in LIFECYCLE):
            setattr(job, attr, parse_time(detail[key]))
    return job


def keeps_its_state(current: str, reported: Any) -> bool:
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
