"""The emulation's SageMaker extension behaves like SageMaker where the guard depends on it."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests import faults
from tests.helpers import load_event
from training_guard_local import sagemaker_ext
from training_guard_local.emulator import Emulation


def test_stop_moves_a_running_job_to_stopping_then_stopped(aws: Emulation) -> None:
    detail = load_event("vanishing_gradient_issues_found")["detail"]
    aws.put_job(detail)
    sagemaker = aws.client("sagemaker")
    sagemaker.stop_training_job(TrainingJobName=detail["TrainingJobName"])
    assert aws.job_status(detail["TrainingJobName"]) == "Stopping"
    assert aws.finish_stopping(detail["TrainingJobName"]) is True
    described = sagemaker.describe_training_job(TrainingJobName=detail["TrainingJobName"])
    assert (described["TrainingJobStatus"], described["SecondaryStatus"]) == ("Stopped", "Stopped")


def test_stop_of_a_job_not_in_progress_is_the_validation_exception_sagemaker_sends(aws: Emulation) -> None:
    detail = load_event("failed")["detail"]
    aws.put_job(detail)
    with pytest.raises(ClientError) as caught:
        aws.client("sagemaker").stop_training_job(TrainingJobName=detail["TrainingJobName"])
    error = caught.value.response["Error"]
    assert error["Code"] == "ValidationException"
    assert error["Message"] == "The request was rejected because the training job is in status Failed."


# SageMaker's answer for a job that does not exist (aws/amazon-sagemaker-examples#2360), not moto's "Could not find".
@pytest.mark.parametrize(
    "call",
    [
        lambda sm: sm.describe_training_job(TrainingJobName="nope"),
        lambda sm: sm.stop_training_job(TrainingJobName="nope"),
        lambda sm: sm.list_tags(ResourceArn="arn:aws:sagemaker:us-east-1:123456789012:training-job/nope"),
        lambda sm: sm.add_tags(
            ResourceArn="arn:aws:sagemaker:us-east-1:123456789012:training-job/nope", Tags=[{"Key": "k", "Value": "v"}]
        ),
    ],
    ids=["DescribeTrainingJob", "StopTrainingJob", "ListTags", "AddTags"],
)
def test_a_job_that_does_not_exist_is_answered_in_sagemakers_words(aws: Emulation, call: Any) -> None:
    with pytest.raises(ClientError) as caught:
        call(aws.client("sagemaker"))
    error = caught.value.response["Error"]
    assert (error["Code"], error["Message"]) == ("ValidationException", "Requested resource not found.")


@pytest.mark.parametrize("ended", ["Completed", "Failed", "Stopped"])
@pytest.mark.parametrize("late", ["InProgress", "Stopping", "Completed", "Failed", "Stopped"])
def test_an_ended_job_keeps_its_end_state_whatever_a_late_event_says(aws: Emulation, ended: str, late: str) -> None:
    detail = load_event("vanishing_gradient_issues_found")["detail"]
    name = detail["TrainingJobName"]
    aws.put_job({**detail, "TrainingJobStatus": ended, "SecondaryStatus": ended, "TrainingEndTime": 1764470000000})
    aws.put_job({**detail, "TrainingJobStatus": late, "SecondaryStatus": "Training", "TrainingEndTime": None})
    described = aws.client("sagemaker").describe_training_job(TrainingJobName=name)
    assert (described["TrainingJobStatus"], described["SecondaryStatus"]) == (ended, ended)
    assert described["TrainingEndTime"].year == 2025
    with pytest.raises(ClientError, match=f"is in status {ended}"):
        aws.client("sagemaker").stop_training_job(TrainingJobName=name)


def test_a_stopping_job_ends_as_its_event_says_but_never_runs_again(aws: Emulation) -> None:
    detail = load_event("vanishing_gradient_issues_found")["detail"]
    aws.put_job(detail)
    aws.client("sagemaker").stop_training_job(TrainingJobName=detail["TrainingJobName"])
    aws.put_job({**detail, "TrainingJobStatus": "InProgress"})
    assert aws.job_status(detail["TrainingJobName"]) == "Stopping"
    aws.put_job({**detail, "TrainingJobStatus": "Stopped", "SecondaryStatus": "Stopped"})
    assert aws.job_status(detail["TrainingJobName"]) == "Stopped"


def test_describe_returns_the_events_state_with_rule_statuses(aws: Emulation) -> None:
    detail = load_event("vanishing_gradient_issues_found")["detail"]
    aws.put_job(detail)
    described = aws.client("sagemaker").describe_training_job(TrainingJobName=detail["TrainingJobName"])
    assert described["TrainingJobStatus"] == "InProgress"
    assert described["AlgorithmSpecification"]["MetricDefinitions"] == [
        {"Name": "train:loss", "Regex": "Train_loss=(.*?);"}
    ]
    statuses = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"] for s in described["DebugRuleEvaluationStatuses"]}
    assert statuses["VanishingGradient"] == "IssuesFound"
    assert described["DebugRuleEvaluationStatuses"][0]["LastModifiedTime"].year == 2026
    assert "TrainingEndTime" not in described


def test_a_late_in_progress_event_does_not_undo_a_stop(aws: Emulation) -> None:
    detail = load_event("vanishing_gradient_issues_found")["detail"]
    aws.put_job(detail)
    aws.client("sagemaker").stop_training_job(TrainingJobName=detail["TrainingJobName"])
    aws.put_job(detail)
    assert aws.job_status(detail["TrainingJobName"]) == "Stopping"


def test_the_arn_an_event_reports_finds_its_job_for_tags(aws: Emulation) -> None:
    detail = load_event("vanishing_gradient_issues_found")["detail"]
    reported = f"arn:aws:sagemaker:{aws.region}:{aws.account}:training-job/not-the-jobs-name"
    aws.put_job({**detail, "TrainingJobArn": reported, "Tags": {"team": "vision"}})
    sagemaker = aws.client("sagemaker")
    sagemaker.add_tags(ResourceArn=reported, Tags=[{"Key": "guard", "Value": "stopped"}])
    tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=reported)["Tags"]}
    assert tags == {"team": "vision", "guard": "stopped"}
    assert aws.job_tags(detail["TrainingJobName"]) == tags


def test_a_stop_refused_in_front_of_the_emulation_changes_nothing(aws: Emulation) -> None:
    """A fault (tests/faults.py) runs before the emulation's answer: the job runs on and no stop is recorded."""
    detail = load_event("vanishing_gradient_issues_found")["detail"]
    aws.put_job(detail)
    sagemaker = aws.client("sagemaker")
    faults.refuse(sagemaker, "StopTrainingJob", lambda _request: faults.THROTTLING)
    with pytest.raises(ClientError, match="ThrottlingException"):
        sagemaker.stop_training_job(TrainingJobName=detail["TrainingJobName"])
    assert aws.job_status(detail["TrainingJobName"]) == "InProgress"
    assert sagemaker_ext.stop_calls(job=detail["TrainingJobName"]) == []
