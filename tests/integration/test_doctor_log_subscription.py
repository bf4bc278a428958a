"""`training-guard doctor` on the log rules' subscription, as the training log group holds it now: ours sending to the
guard's function, removed since the deploy, sent elsewhere, or crowded out by two filters of others."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from infra import outputs
from tests.integration.deployed import CONFIG, STACK, Deployment, deployed
from training_guard import contract
from training_guard_local import doctor
from training_guard_local.preflight import FAIL, OK, Check

pytestmark = pytest.mark.integration

GROUP = contract.TRAINING_LOG_GROUP
OURS = contract.LOG_SUBSCRIPTION_FILTER_NAME


@pytest.fixture
def stack() -> Iterator[Deployment]:
    with deployed(CONFIG) as deployment:
        yield deployment


def log_check(stack: Deployment) -> Check:
    now = datetime.now(UTC) + timedelta(seconds=doctor.SECRET_CACHE_SECONDS + 1)
    [check] = [c for c in doctor.examine(stack.aws(), STACK, now=now).checks if c.name == "log-subscription"]
    return check


def other_function(stack: Deployment, name: str) -> str:
    role = stack.client("iam").create_role(RoleName=f"r-{name}", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    from tests.integration.test_log_subscription_moto import zipped

    made = stack.client("lambda").create_function(
        FunctionName=name, Runtime="python3.13", Role=role, Handler="index.handler", Code={"ZipFile": zipped()}
    )
    return str(made["FunctionArn"])


def test_the_deployed_subscription_passes(stack: Deployment) -> None:
    check = log_check(stack)
    assert check.status == OK
    assert check.message == f"{OURS} sends {GROUP} to {stack.outputs[outputs.LOG_EVENTS_FUNCTION]}"


def test_a_filter_removed_since_the_deploy_fails_with_deploy_again(stack: Deployment) -> None:
    stack.client("logs").delete_subscription_filter(logGroupName=GROUP, filterName=OURS)
    check = log_check(stack)
    assert (check.status, check.message) == (FAIL, f"no filter {OURS} on {GROUP}: the log rules read nothing")
    assert check.fix.startswith("deploy again: make deploy")


def test_two_foreign_filters_fail_naming_them_and_the_command_that_frees_one(stack: Deployment) -> None:
    logs = stack.client("logs")
    logs.delete_subscription_filter(logGroupName=GROUP, filterName=OURS)
    for name in ("splunk", "datadog"):
        arn = other_function(stack, name)
        logs.put_subscription_filter(logGroupName=GROUP, filterName=name, filterPattern="", destinationArn=arn)
    check = log_check(stack)
    assert check.status == FAIL
    assert "holds 2 subscription filters of others (datadog, splunk)" in check.message
    assert "aws logs delete-subscription-filter" in check.fix


def test_ours_sending_elsewhere_fails(stack: Deployment) -> None:
    arn = other_function(stack, "elsewhere")
    stack.client("logs").put_subscription_filter(
        logGroupName=GROUP, filterName=OURS, filterPattern="", destinationArn=arn
    )
    check = log_check(stack)
    assert (check.status, check.message.endswith(f"not to {stack.outputs[outputs.LOG_EVENTS_FUNCTION]}")) == (
        FAIL,
        True,
    )
