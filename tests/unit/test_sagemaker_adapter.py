"""The SageMaker adapter reads SageMaker's own answers, in AWS's exact shape (botocore's Stubber), not moto's."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from training_guard.adapters.sagemaker import SageMakerJobs
from training_guard.domain.errors import ActionFailed

JOB = "pytorch-mnist-lr01-2026-11-30-02-10-00"
# What SageMaker answers for a job that does not exist (aws/amazon-sagemaker-examples#2360, aws/aws-sdk#165).
AWS_NOT_FOUND = "Requested resource not found."


def stubbed() -> tuple[SageMakerJobs, Stubber]:
    client: Any = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    return SageMakerJobs(client), Stubber(client)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("ValidationException", AWS_NOT_FOUND),
        ("ValidationException", f"Could not find training job '{JOB}'."),
        ("ResourceNotFound", "Resource not found: could not find the training job"),
    ],
)
def test_describe_of_a_job_that_does_not_exist_is_none(code: str, message: str) -> None:
    jobs, stub = stubbed()
    stub.add_client_error("describe_training_job", code, message, 400, expected_params={"TrainingJobName": JOB})
    with stub:
        assert jobs.describe(JOB) is None
    stub.assert_no_pending_responses()


def test_stop_of_a_job_that_does_not_exist_stops_nothing_and_does_not_raise() -> None:
    jobs, stub = stubbed()
    stub.add_client_error("stop_training_job", "ValidationException", AWS_NOT_FOUND, 400)
    with stub:
        assert jobs.stop(JOB) is False


def test_stop_of_a_job_that_already_ended_stops_nothing() -> None:
    jobs, stub = stubbed()
    stub.add_client_error(
        "stop_training_job",
        "ValidationException",
        "The request was rejected because the training job is in status Completed.",
        400,
    )
    with stub:
        assert jobs.stop(JOB) is False


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (
            "ValidationException",
            "1 validation error detected: Value 'x y' at 'trainingJobName' failed to satisfy constraint",
        ),
        ("ThrottlingException", "Rate exceeded"),
        ("AccessDeniedException", f"not authorized to perform: sagemaker:DescribeTrainingJob on {JOB}"),
    ],
)
def test_any_other_error_of_describe_is_a_failure_to_retry(code: str, message: str) -> None:
    jobs, stub = stubbed()
    stub.add_client_error("describe_training_job", code, message, 400)
    with stub, pytest.raises(ActionFailed):
        jobs.describe(JOB)


def test_any_other_error_of_stop_is_a_failure_to_retry() -> None:
    jobs, stub = stubbed()
    stub.add_client_error("stop_training_job", "ThrottlingException", "Rate exceeded", 400)
    with stub, pytest.raises(ActionFailed):
        jobs.stop(JOB)
