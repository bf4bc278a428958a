"""The hub's subscription in each member: the same never-take-over filter, put through the member's log role and
pointing at the hub's destination; which members are subscribed or unsubscribed for each request; one member that
fails never fails the deploy nor the others; the stack output says who is not subscribed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from tests.unit.test_log_subscription import DATADOG, FUNCTION, GROUP, OURS, SPLUNK, FakeLogs, error, event
from training_guard.adapters.log_subscription import (
    MEMBERS_SUMMARY_MAX_CHARS,
    Filter,
    LogSubscriptions,
    MemberOutcome,
    Members,
    MemberSubscriptions,
    RequestError,
    Status,
    member_work,
    members_summary,
)
from training_guard.handlers import log_subscription

A, B, C = "444455556666", "777788889999", "111111111111"
DESTINATION = "arn:aws-us-gov:logs:us-gov-west-1:111122223333:destination:training-guard-member-logs"
ROLE = "TrainingGuardMember-Logs"
# A custom resource's response (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html).
RESPONSE_MAX_BYTES = 4096
MEMBERS = {"Members": [A, B], "MemberRoleName": ROLE, "MemberDestinationArn": DESTINATION}


class FakeAccounts:
    """Each member's CloudWatch Logs through its role ARN; a member listed in `refused` has no role (AccessDenied)."""

    def __init__(self, groups: Mapping[str, Mapping[str, list[Filter]]], refused: tuple[str, ...] = ()) -> None:
        self.logs = {account: FakeLogs(dict(g)) for account, g in groups.items()}
        self.refused = refused
        self.assumed: list[str] = []

    def __call__(self, role_arn: str) -> FakeLogs:
        self.assumed.append(role_arn)
        account = role_arn.split(":")[4]
        if account in self.refused:
            raise error("AccessDenied", f"not authorized to perform: sts:AssumeRole on {role_arn}")
        return self.logs.setdefault(account, FakeLogs())


def answer(request: dict[str, Any], hub: FakeLogs, accounts: FakeAccounts) -> dict[str, Any]:
    sent: list[Mapping[str, Any]] = []
    log_subscription.process(
        request, LogSubscriptions(hub), lambda url, doc: sent.append(doc), members=MemberSubscriptions(accounts)
    )
    [document] = sent
    return dict(document)


# --- the decision, pure ---------------------------------------------------------------------------------------------


def test_create_and_update_subscribe_every_member_and_update_unsubscribes_the_ones_removed() -> None:
    new = Members((A, B), ROLE, DESTINATION)
    old = Members((A, C), ROLE, DESTINATION)
    assert member_work("Create", new, None) == ((A, B), ())
    assert member_work("Update", new, old) == ((A, B), (C,))
    assert member_work("Update", new, None) == ((A, B), ())
    assert member_work("Delete", new, None) == ((), (A, B))


def test_the_member_properties_are_checked_and_a_single_account_guard_has_none() -> None:
    assert Members.from_properties({"LogGroupName": GROUP}) is None
    assert Members.from_properties(MEMBERS) == Members((A, B), ROLE, DESTINATION)
    for bad in ({**MEMBERS, "Members": ["12345"]}, {**MEMBERS, "Members": A}, {**MEMBERS, "MemberRoleName": ""}):
        with pytest.raises(RequestError):
            Members.from_properties(bad)


def test_the_role_is_in_the_destinations_partition() -> None:
    assert Members((A,), ROLE, DESTINATION).role_arn(A) == f"arn:aws-us-gov:iam::{A}:role/{ROLE}"


def test_the_summary_names_the_members_not_subscribed_and_fits_its_share_of_the_response() -> None:
    outcomes = [
        MemberOutcome(A, Status.SUBSCRIBED, ""),
        MemberOutcome(B, Status.NOT_SUBSCRIBED, ""),
        MemberOutcome(C, Status.FAILED, ""),
    ]
    assert members_summary(outcomes) == f"1 of 3 members subscribed; not subscribed: {B} (not-subscribed), {C} (failed)"
    many = [MemberOutcome(f"{i:012d}", Status.FAILED, "x" * 900) for i in range(100)]
    assert len(members_summary(many)) == MEMBERS_SUMMARY_MAX_CHARS
    assert members_summary([MemberOutcome(A, Status.REMOVED, "")]) == "1 member(s) unsubscribed"


# --- through the custom resource -------------------------------------------------------------------------------------


def test_each_member_gets_the_same_filter_pointing_at_the_hubs_destination_never_taking_over() -> None:
    accounts = FakeAccounts({A: {GROUP: [SPLUNK]}, B: {GROUP: [SPLUNK, DATADOG]}})
    hub = FakeLogs({GROUP: []})
    document = answer(event("Create", **MEMBERS), hub, accounts)
    assert document["Status"] == "SUCCESS"
    assert hub.groups[GROUP][OURS].destination == FUNCTION  # the hub's own group: its function, as before
    ours = accounts.logs[A].groups[GROUP][OURS]
    assert (ours.destination, ours.pattern) == (DESTINATION, hub.groups[GROUP][OURS].pattern)
    assert set(accounts.logs[B].groups[GROUP]) == {SPLUNK.name, DATADOG.name}  # two of others: left alone
    assert document["Data"]["Members"] == f"1 of 2 members subscribed; not subscribed: {B} (not-subscribed)"
    assert sorted(accounts.assumed) == [f"arn:aws-us-gov:iam::{m}:role/{ROLE}" for m in (A, B)]


def test_a_member_without_its_role_is_reported_and_never_fails_the_deploy_nor_the_others() -> None:
    accounts = FakeAccounts({B: {}}, refused=(A,))
    document = answer(event("Create", **MEMBERS), FakeLogs({GROUP: []}), accounts)
    assert document["Status"] == "SUCCESS"
    assert document["Data"]["Status"] == "subscribed"
    assert document["Data"]["Members"] == f"1 of 2 members subscribed; not subscribed: {A} (failed)"
    assert OURS in accounts.logs[B].groups[GROUP]  # B's group did not exist: made, then subscribed


def test_an_update_removes_ours_from_a_member_no_longer_configured_only_while_it_sends_to_the_hub() -> None:
    accounts = FakeAccounts(
        {
            A: {GROUP: [Filter(OURS, DESTINATION)]},
            C: {GROUP: [Filter(OURS, DESTINATION), SPLUNK]},
        }
    )
    request = event("Update", **{**MEMBERS, "Members": [A]})
    request["OldResourceProperties"] = {**request["ResourceProperties"], "Members": [A, C]}
    document = answer(request, FakeLogs({GROUP: []}), accounts)
    assert document["Status"] == "SUCCESS"
    assert set(accounts.logs[C].groups[GROUP]) == {SPLUNK.name}
    assert OURS in accounts.logs[A].groups[GROUP]
    assert document["Data"]["Members"] == "1 of 1 members subscribed"


def test_delete_removes_ours_from_every_member_and_always_succeeds() -> None:
    elsewhere = Filter(OURS, "arn:aws:logs:us-east-1:999999999999:destination:another-hub")
    accounts = FakeAccounts({A: {GROUP: [Filter(OURS, DESTINATION)]}, B: {GROUP: [elsewhere]}})
    request = event("Delete", **MEMBERS)
    request["PhysicalResourceId"] = f"{GROUP}|{OURS}"
    document = answer(request, FakeLogs({GROUP: [Filter(OURS, FUNCTION)]}), accounts)
    assert document["Status"] == "SUCCESS"
    assert accounts.logs[A].groups[GROUP] == {}
    assert accounts.logs[B].groups[GROUP] == {OURS: elsewhere}  # another hub's filter of the same name: kept


def test_the_hubs_own_failure_still_fails_the_create_before_any_member_is_touched() -> None:
    hub = FakeLogs({GROUP: []})

    def denied(**kwargs: Any) -> dict[str, Any]:
        raise error("AccessDeniedException", "not authorized to perform logs:PutSubscriptionFilter")

    hub.put_subscription_filter = denied  # type: ignore[method-assign]
    accounts = FakeAccounts({})
    document = answer(event("Create", **MEMBERS), hub, accounts)
    assert document["Status"] == "FAILED"
    assert accounts.assumed == []


def test_the_response_with_a_hundred_members_fits_cloudformations_4096_bytes() -> None:
    members = [f"{i:012d}" for i in range(100)]
    accounts = FakeAccounts({}, refused=tuple(members))
    request = event("Create", **{**MEMBERS, "Members": members})
    document = answer(request, FakeLogs({GROUP: [SPLUNK, DATADOG]}), accounts)
    assert len(json.dumps(document).encode()) <= RESPONSE_MAX_BYTES
    assert document["Data"]["Members"].startswith("0 of 100 members subscribed; not subscribed: 000000000000 (failed)")


def test_a_single_account_guard_asks_no_member() -> None:
    accounts = FakeAccounts({})
    document = answer(event("Create"), FakeLogs({GROUP: []}), accounts)
    assert "Members" not in document["Data"]
    assert accounts.assumed == []


def test_an_unexpected_error_in_one_member_is_reported_and_the_deploy_is_still_answered() -> None:
    accounts = FakeAccounts({B: {GROUP: []}})

    def broken(**kwargs: Any) -> dict[str, Any]:
        raise KeyError("subscriptionFilters")  # an answer of a shape nobody documented

    accounts.logs[B].describe_subscription_filters = broken  # type: ignore[method-assign]
    document = answer(event("Create", **{**MEMBERS, "Members": [A, B]}), FakeLogs({GROUP: []}), accounts)
    assert document["Status"] == "SUCCESS"
    assert document["Data"]["Members"] == f"1 of 2 members subscribed; not subscribed: {B} (failed)"
