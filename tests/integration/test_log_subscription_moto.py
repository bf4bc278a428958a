"""The log rules' subscription against moto's CloudWatch Logs: the real boto3 calls, parameters and error codes of
the custom resource, at the two-filter limit, with a group that does not exist yet."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from training_guard import contract
from training_guard.adapters.log_subscription import LogsApi, LogSubscriptions, Status, Subscription
from training_guard.handlers import log_subscription

REGION = "us-east-1"
GROUP = contract.TRAINING_LOG_GROUP


def zipped() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return None\n")
    return buffer.getvalue()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        role = boto3.client("iam").create_role(RoleName="fn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        functions = {}
        for name in ("guard", "splunk", "datadog", "other-guard"):
            functions[name] = boto3.client("lambda").create_function(
                FunctionName=name, Runtime="python3.13", Role=role, Handler="index.handler", Code={"ZipFile": zipped()}
            )["FunctionArn"]
        yield {"logs": boto3.client("logs"), "functions": functions}


def wanted(aws: dict[str, Any], function: str = "guard") -> Subscription:
    return Subscription(
        GROUP, contract.LOG_SUBSCRIPTION_FILTER_NAME, contract.LOG_FILTER_PATTERN, aws["functions"][function]
    )


def filters(aws: dict[str, Any]) -> dict[str, str]:
    found = aws["logs"].describe_subscription_filters(logGroupName=GROUP)["subscriptionFilters"]
    return {f["filterName"]: f["destinationArn"] for f in found}


def foreign(aws: dict[str, Any], *names: str) -> None:
    for name in names:
        aws["logs"].put_subscription_filter(
            logGroupName=GROUP, filterName=name, filterPattern="", destinationArn=aws["functions"][name]
        )


def subscriptions(aws: dict[str, Any]) -> LogSubscriptions:
    logs: LogsApi = aws["logs"]
    return LogSubscriptions(logs)


def test_before_the_first_job_the_group_is_created_and_subscribed(aws: dict[str, Any]) -> None:
    assert subscriptions(aws).subscribe(wanted(aws)).status is Status.SUBSCRIBED
    [group] = aws["logs"].describe_log_groups(logGroupNamePrefix=GROUP)["logGroups"]
    assert "retentionInDays" not in group  # never expire, as SageMaker would make it
    assert filters(aws) == {contract.LOG_SUBSCRIPTION_FILTER_NAME: aws["functions"]["guard"]}


def test_one_foreign_filter_then_ours_beside_it(aws: dict[str, Any]) -> None:
    aws["logs"].create_log_group(logGroupName=GROUP)
    aws["logs"].put_retention_policy(logGroupName=GROUP, retentionInDays=30)
    foreign(aws, "splunk")
    assert subscriptions(aws).subscribe(wanted(aws)).status is Status.SUBSCRIBED
    assert filters(aws) == {
        "splunk": aws["functions"]["splunk"],
        contract.LOG_SUBSCRIPTION_FILTER_NAME: aws["functions"]["guard"],
    }
    [group] = aws["logs"].describe_log_groups(logGroupNamePrefix=GROUP)["logGroups"]
    assert group["retentionInDays"] == 30


def test_ours_is_updated_in_place(aws: dict[str, Any]) -> None:
    """Alone on the group: moto 5.2 refuses any put on a group with two filters, even one naming an existing filter,
    which AWS updates (the API reference: "If you are updating an existing filter, you must specify the correct name");
    the update beside a foreign filter is tested on the fake in tests/unit/test_log_subscription.py."""
    assert subscriptions(aws).subscribe(wanted(aws)).status is Status.SUBSCRIBED
    moved = wanted(aws, "other-guard")
    assert subscriptions(aws).subscribe(moved).status is Status.UPDATED
    assert filters(aws) == {contract.LOG_SUBSCRIPTION_FILTER_NAME: aws["functions"]["other-guard"]}


def test_two_foreign_filters_are_left_alone_and_the_deploy_says_so(aws: dict[str, Any]) -> None:
    aws["logs"].create_log_group(logGroupName=GROUP)
    foreign(aws, "splunk", "datadog")
    sent: list[Any] = []
    event = {
        "RequestType": "Create",
        "ResponseURL": "https://example.invalid/presigned",
        "ResourceProperties": {
            "LogGroupName": GROUP,
            "FilterName": contract.LOG_SUBSCRIPTION_FILTER_NAME,
            "FilterPattern": contract.LOG_FILTER_PATTERN,
            "DestinationArn": aws["functions"]["guard"],
        },
    }
    document = log_subscription.process(event, subscriptions(aws), lambda url, doc: sent.append(doc))
    assert (document["Status"], document["Data"]["Status"]) == ("SUCCESS", "not-subscribed")
    assert filters(aws) == {"splunk": aws["functions"]["splunk"], "datadog": aws["functions"]["datadog"]}


def test_delete_removes_ours_but_not_another_stacks_filter_of_the_same_name(aws: dict[str, Any]) -> None:
    foreign_group = subscriptions(aws)
    assert foreign_group.subscribe(wanted(aws, "other-guard")).status is Status.SUBSCRIBED
    assert subscriptions(aws).unsubscribe(wanted(aws)).status is Status.NOTHING_TO_REMOVE
    assert contract.LOG_SUBSCRIPTION_FILTER_NAME in filters(aws)
    assert subscriptions(aws).unsubscribe(wanted(aws, "other-guard")).status is Status.REMOVED
    assert filters(aws) == {}
    assert aws["logs"].describe_log_groups(logGroupNamePrefix=GROUP)["logGroups"]  # the group stays


def test_the_lambda_entry_point_answers_cloudformation_with_the_subscription_made(
    aws: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from training_guard.handlers import wiring
    from training_guard_local.emulator import LambdaContext

    wiring.reset()  # the function's clients made inside this moto
    sent: list[tuple[str, Any]] = []
    monkeypatch.setattr(log_subscription, "send_response", lambda url, doc: sent.append((url, doc)))
    event = {
        "RequestType": "Create",
        "ResponseURL": "https://example.invalid/presigned",
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/TrainingGuard/1",
        "RequestId": "r-1",
        "LogicalResourceId": "LogRulesSubscription",
        "ResourceProperties": {
            "LogGroupName": GROUP,
            "FilterName": contract.LOG_SUBSCRIPTION_FILTER_NAME,
            "FilterPattern": contract.LOG_FILTER_PATTERN,
            "DestinationArn": aws["functions"]["guard"],
        },
    }
    log_subscription.handler(event, LambdaContext(function_name="subscriber"))
    wiring.reset()
    [(url, document)] = sent
    assert url == "https://example.invalid/presigned"
    assert (document["Status"], document["Data"]["Status"]) == ("SUCCESS", "subscribed")
    assert filters(aws) == {contract.LOG_SUBSCRIPTION_FILTER_NAME: aws["functions"]["guard"]}
