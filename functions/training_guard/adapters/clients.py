"""boto3 clients with the guard's retry policy (the composition root keeps one per service)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from typing import Literal, Protocol, overload

    from botocore.client import BaseClient
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_pricing import PricingClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sts import STSClient

    class ClientFactory(Protocol):
        """`clients(service)`: the service's client, typed by its mypy_boto3 stubs."""

        @overload
        def __call__(self, service: Literal["cloudwatch"]) -> CloudWatchClient: ...
        @overload
        def __call__(self, service: Literal["dynamodb"]) -> DynamoDBClient: ...
        @overload
        def __call__(self, service: Literal["pricing"]) -> PricingClient: ...
        @overload
        def __call__(self, service: Literal["sagemaker"]) -> SageMakerClient: ...
        @overload
        def __call__(self, service: Literal["secretsmanager"]) -> SecretsManagerClient: ...
        @overload
        def __call__(self, service: Literal["sns"]) -> SNSClient: ...
        @overload
        def __call__(self, service: Literal["sqs"]) -> SQSClient: ...
        @overload
        def __call__(self, service: Literal["sts"]) -> STSClient: ...
        @overload
        def __call__(self, service: str) -> BaseClient: ...  # a service named at run time (the tests' hooks)


# Standard retry mode (backoff with jitter, bounded attempts) and short timeouts: a stuck call fails in time.
RETRY_CONFIG = Config(
    # total_max_attempts counts the first try too (max_attempts would count retries only)
    retries={"mode": "standard", "total_max_attempts": 5},
    connect_timeout=3,
    read_timeout=10,
)


def _new_client(service: str) -> BaseClient:
    made: BaseClient = boto3.client(service, config=RETRY_CONFIG)
    return made


# The cast names what boto3.client returns for each service.
new_client = cast("ClientFactory", _new_client)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def error_message(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Message", ""))
