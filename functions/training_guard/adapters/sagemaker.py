"""SageMaker: describe, stop and tag training jobs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from training_guard.adapters.clients import error_code, error_message
from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import EventError, TrainingJob, parse_job

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

# A missing job answers ValidationException "Requested resource not found." (aws/aws-sdk#165,
# aws/amazon-sagemaker-examples#2360), not its model's ResourceNotFound; other answers say "Could not find".
_NOT_FOUND_CODES = ("ValidationException", "ResourceNotFound", "ResourceNotFoundException")
_NOT_FOUND_WORDS = ("requested resource not found", "could not find")


def is_missing(exc: ClientError) -> bool:
    message = error_message(exc).lower()
    return error_code(exc) in _NOT_FOUND_CODES and any(words in message for words in _NOT_FOUND_WORDS)


class SageMakerJobs:
    def __init__(self, client: SageMakerClient) -> None:
        self._client = client

    def describe(self, name: str) -> TrainingJob | None:
        """The job as SageMaker sees it now; None if it no longer exists."""
        try:
            response = self._client.describe_training_job(TrainingJobName=name)
        except ClientError as exc:
            if is_missing(exc):
                return None
            raise ActionFailed(f"DescribeTrainingJob {name}", exc) from exc
        try:
            return parse_job(response)
        except EventError:
            return None

    def stop(self, name: str) -> bool:
        """True if this call stopped the job; False if it was no longer running (or no longer exists)."""
        try:
            self._client.stop_training_job(TrainingJobName=name)
        except ClientError as exc:
            # "... is in status Stopped.": a race with a person, SageMaker or the job finishing, not a failure.
            if error_code(exc) == "ValidationException" and "status" in error_message(exc).lower():
                return False
            if is_missing(exc):  # nothing left to stop: not a failure to retry until the dead-letter queue
                return False
            raise ActionFailed(f"StopTrainingJob {name}", exc) from exc
        return True

    def tags(self, arn: str) -> dict[str, str]:
        tags: dict[str, str] = {}
        try:
            for page in self._client.get_paginator("list_tags").paginate(ResourceArn=arn):
                tags.update({t["Key"]: t.get("Value", "") for t in page.get("Tags", [])})
        except ClientError as exc:
            raise ActionFailed(f"ListTags {arn}", exc) from exc
        return tags

    def running(self) -> list[str]:
        """Names of the training jobs InProgress now (one call per 100 jobs)."""
        names: list[str] = []
        try:
            for page in self._client.get_paginator("list_training_jobs").paginate(
                StatusEquals="InProgress", PaginationConfig={"PageSize": 100}
            ):
                names += [j["TrainingJobName"] for j in page.get("TrainingJobSummaries", [])]
        except ClientError as exc:
            raise ActionFailed("ListTrainingJobs", exc) from exc
        return names

    def tag(self, arn: str, tags: Mapping[str, str]) -> None:
        try:
            self._client.add_tags(ResourceArn=arn, Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
        except ClientError as exc:
            raise ActionFailed(f"AddTags {arn}", exc) from exc
