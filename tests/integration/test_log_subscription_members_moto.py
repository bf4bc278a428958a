"""The subscriber's member part on moto's accounts: the real adapters assume each member's log role (moto gives the
assumed role's account) and act on that account's training log group only.

Plain moto 5.2.5 reads a destination ARN given to PutSubscriptionFilter as a log group's, so the filters here are
seeded in moto's model; the put itself, through the emulation's destinations, is in test_member_logs_e2e.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import boto3
import pytest
from moto.logs.models import logs_backends

from tests.integration.test_organization_moto import HUB, MEMBER_A, MEMBER_B, REGION, mocked_accounts
from training_guard import contract
from training_guard.adapters.log_subscription import (
    LogsApi,
    LogSubscriptions,
    Members,
    MemberSubscriptions,
    Status,
    Subscription,
    member_logs,
)

GROUP = contract.TRAINING_LOG_GROUP
OURS = contract.LOG_SUBSCRIPTION_FILTER_NAME
DESTINATION = f"arn:aws:logs:{REGION}:{HUB}:destination:training-guard-member-logs"
ELSEWHERE = f"arn:aws:logs:{REGION}:999999999999:destination:another-hub"
MEMBERS = Members((MEMBER_A, MEMBER_B), "TrainingGuardMember-Logs", DESTINATION)
WANTED = Subscription(GROUP, OURS, contract.LOG_FILTER_PATTERN, f"arn:aws:lambda:{REGION}:{HUB}:function:LogEvents")


@pytest.fixture
def accounts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with mocked_accounts(monkeypatch):
        for account, destination in ((MEMBER_A, DESTINATION), (MEMBER_B, ELSEWHERE)):
            backend = logs_backends[account][REGION]
            backend.create_log_group(GROUP, {})
            backend.groups[GROUP].put_subscription_filter(OURS, "", destination, "")
        yield


@pytest.mark.usefixtures("accounts")
def test_delete_removes_ours_in_each_member_through_its_role_and_keeps_what_is_not_ours() -> None:
    outcomes = MemberSubscriptions(partial(member_logs, boto3.client("sts", region_name=REGION))).apply(
        WANTED, MEMBERS, subscribe=(), unsubscribe=MEMBERS.accounts
    )
    assert {(o.account, o.status) for o in outcomes} == {
        (MEMBER_A, Status.REMOVED),
        (MEMBER_B, Status.NOTHING_TO_REMOVE),  # another hub's filter of the same name
    }
    assert logs_backends[MEMBER_A][REGION].groups[GROUP].subscription_filters == {}
    assert list(logs_backends[MEMBER_B][REGION].groups[GROUP].subscription_filters) == [OURS]
    assert GROUP not in logs_backends[HUB][REGION].groups  # the hub's own account untouched


@pytest.mark.usefixtures("accounts")
def test_a_members_logs_are_that_accounts() -> None:
    logs: LogsApi = member_logs(boto3.client("sts", region_name=REGION), MEMBERS.role_arn(MEMBER_A))
    [found] = LogSubscriptions(logs).filters(GROUP) or []
    assert found.destination == DESTINATION
    own = boto3.client("logs", region_name=REGION)
    with pytest.raises(own.exceptions.ResourceNotFoundException):
        own.describe_subscription_filters(logGroupName=GROUP)
