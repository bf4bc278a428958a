"""The log rules' subscription: ours is created or updated, two filters of others are never touched, the group is made
when it does not exist (and never changed when it does), Delete removes only ours, and CloudFormation always gets its
answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from botocore.exceptions import ClientError

from training_guard import contract
from training_guard.adapters.log_subscription import (
    FILTERS_PER_GROUP_MAX,
    Filter,
    LogSubscriptions,
    Plan,
    RequestError,
    Status,
    Subscription,
    plan_subscribe,
    plan_unsubscribe,
    response_document,
    send_response,
)
from training_guard.handlers import log_subscription

GROUP = contract.TRAINING_LOG_GROUP
OURS = contract.LOG_SUBSCRIPTION_FILTER_NAME
FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:TrainingGuard-LogRulesHandler"
WANTED = Subscription(GROUP, OURS, contract.LOG_FILTER_PATTERN, FUNCTION)
SPLUNK = Filter("splunk-forwarder", "arn:aws:firehose:us-east-1:123456789012:deliverystream/splunk")
DATADOG = Filter("datadog", "arn:aws:lambda:us-east-1:123456789012:function:datadog-forwarder")


def error(code: str, message: str = "") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "op")


class FakeLogs:
    """CloudWatch Logs' subscription calls as the API reference describes them: two filters a group (LimitExceeded
    past them), ResourceNotFound for a group that does not exist, a put with an existing name updates it."""

    def __init__(self, groups: Mapping[str, list[Filter]] | None = None, *, page_size: int = 50) -> None:
        self.groups: dict[str, dict[str, Filter]] = {g: {f.name: f for f in fs} for g, fs in (groups or {}).items()}
        self.retention: dict[str, int | None] = dict.fromkeys(self.groups, 30)
        self.calls: list[str] = []
        self.page_size = page_size
        self.arrives_before_put: Filter | None = None

    def describe_subscription_filters(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append("describe")
        group = self.groups.get(kwargs["logGroupName"])
        if group is None:
            raise error("ResourceNotFoundException", "The specified log group does not exist.")
        filters = sorted(group.values(), key=lambda f: f.name)
        start = int(kwargs.get("nextToken", 0))
        page = filters[start : start + self.page_size]
        answer: dict[str, Any] = {
            "subscriptionFilters": [
                {"filterName": f.name, "destinationArn": f.destination, "filterPattern": f.pattern} for f in page
            ]
        }
        if start + self.page_size < len(filters):
            answer["nextToken"] = str(start + self.page_size)
        return answer

    def put_subscription_filter(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append("put")
        group = self.groups.get(kwargs["logGroupName"])
        if group is None:
            raise error("ResourceNotFoundException")
        if self.arrives_before_put is not None:
            group[self.arrives_before_put.name] = self.arrives_before_put
        name = kwargs["filterName"]
        if name not in group and len(group) >= FILTERS_PER_GROUP_MAX:
            raise error("LimitExceededException", "Resource limit exceeded.")
        group[name] = Filter(name, kwargs["destinationArn"], kwargs["filterPattern"])
        return {}

    def delete_subscription_filter(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append("delete")
        group = self.groups.get(kwargs["logGroupName"], {})
        if kwargs["filterName"] not in group:
            raise error("ResourceNotFoundException")
        del group[kwargs["filterName"]]
        return {}

    def create_log_group(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append("create")
        if kwargs["logGroupName"] in self.groups:
            raise error("ResourceAlreadyExistsException")
        self.groups[kwargs["logGroupName"]] = {}
        self.retention[kwargs["logGroupName"]] = None  # never expire, as SageMaker makes it
        return {}


# --- the decision, pure -----------------------------------------------------------------------------------


def test_an_empty_group_gets_ours() -> None:
    assert plan_subscribe(WANTED, []) == Plan(True, False, Status.SUBSCRIBED, f"subscribed {OURS} to {GROUP}")


def test_one_filter_of_others_leaves_room_for_ours_beside_it() -> None:
    plan = plan_subscribe(WANTED, [SPLUNK])
    assert (plan.put, plan.status) == (True, Status.SUBSCRIBED)
    assert plan.detail.endswith("beside splunk-forwarder")


def test_two_filters_of_others_are_the_limit_and_are_not_touched() -> None:
    plan = plan_subscribe(WANTED, [SPLUNK, DATADOG])
    assert (plan.put, plan.delete, plan.status) == (False, False, Status.NOT_SUBSCRIBED)
    assert "splunk-forwarder, datadog" in plan.detail
    assert "delete-subscription-filter" in plan.detail  # the way out, named


@pytest.mark.parametrize("others", [[], [SPLUNK]])
def test_ours_already_there_is_updated_in_place(others: list[Filter]) -> None:
    plan = plan_subscribe(WANTED, [*others, Filter(OURS, FUNCTION, "old")])
    assert (plan.put, plan.status) == (True, Status.UPDATED)
    moved = plan_subscribe(WANTED, [Filter(OURS, FUNCTION + "-old")])
    assert "it sent to" in moved.detail


def test_delete_removes_ours_only_while_it_sends_to_this_stack() -> None:
    assert plan_unsubscribe(WANTED, [SPLUNK, Filter(OURS, FUNCTION)]).delete
    assert not plan_unsubscribe(WANTED, [SPLUNK]).delete
    kept = plan_unsubscribe(WANTED, [Filter(OURS, "arn:aws:lambda:us-east-1:123456789012:function:other-stack")])
    assert (kept.delete, kept.status) == (False, Status.NOTHING_TO_REMOVE)


@pytest.mark.parametrize(
    ("properties", "complaint"),
    [
        ({"LogGroupName": "/aws/lambda/TrainingGuard-LogRulesHandler"}, "subscribes only /aws/sagemaker/TrainingJobs"),
        ({"LogGroupName": "/aws/sagemaker/ProcessingJobs"}, "subscribes only"),
        ({"FilterName": "someone-elses"}, "the guard's filter is training-guard-log-rules"),
        ({"DestinationArn": None}, "has no DestinationArn"),
    ],
)
def test_no_other_group_or_filter_name_is_ever_subscribed(properties: dict[str, Any], complaint: str) -> None:
    document = {
        "LogGroupName": GROUP,
        "FilterName": OURS,
        "FilterPattern": "",
        "DestinationArn": FUNCTION,
        **properties,
    }
    with pytest.raises(RequestError, match=complaint):
        Subscription.from_properties(document)


# --- applied to CloudWatch Logs ------------------------------------------------------------------------------


def test_a_missing_group_is_created_then_subscribed() -> None:
    logs = FakeLogs()
    plan = LogSubscriptions(logs).subscribe(WANTED)
    assert plan.status is Status.SUBSCRIBED
    assert logs.calls == ["describe", "create", "describe", "put"]
    assert logs.groups[GROUP] == {OURS: Filter(OURS, FUNCTION, contract.LOG_FILTER_PATTERN)}
    assert logs.retention[GROUP] is None


def test_a_group_a_job_creates_meanwhile_is_subscribed_all_the_same() -> None:
    logs = FakeLogs()
    real_create = logs.create_log_group

    def racing(**kwargs: Any) -> dict[str, Any]:
        real_create(**kwargs)
        raise error("ResourceAlreadyExistsException")

    logs.create_log_group = racing  # type: ignore[method-assign]
    assert LogSubscriptions(logs).subscribe(WANTED).status is Status.SUBSCRIBED


def test_an_existing_group_is_never_created_again_nor_its_retention_changed() -> None:
    logs = FakeLogs({GROUP: [SPLUNK]})
    plan = LogSubscriptions(logs).subscribe(WANTED)
    assert plan.status is Status.SUBSCRIBED
    assert "create" not in logs.calls
    assert logs.retention[GROUP] == 30
    assert set(logs.groups[GROUP]) == {"splunk-forwarder", OURS}
    assert logs.groups[GROUP]["splunk-forwarder"] == SPLUNK


def test_at_the_limit_two_foreign_filters_are_left_exactly_as_they_were() -> None:
    logs = FakeLogs({GROUP: [SPLUNK, DATADOG]})
    plan = LogSubscriptions(logs).subscribe(WANTED)
    assert plan.status is Status.NOT_SUBSCRIBED
    assert logs.calls == ["describe"]  # no put, no delete
    assert logs.groups[GROUP] == {"splunk-forwarder": SPLUNK, "datadog": DATADOG}


def test_ours_is_updated_in_place_beside_a_foreign_filter() -> None:
    logs = FakeLogs({GROUP: [SPLUNK, Filter(OURS, FUNCTION, "%loss%")]})
    plan = LogSubscriptions(logs).subscribe(WANTED)
    assert plan.status is Status.UPDATED
    assert logs.groups[GROUP][OURS].pattern == contract.LOG_FILTER_PATTERN
    assert logs.groups[GROUP]["splunk-forwarder"] == SPLUNK


def test_a_foreign_filter_arriving_between_listing_and_put_is_reported_not_fatal() -> None:
    logs = FakeLogs({GROUP: [SPLUNK]})
    logs.arrives_before_put = DATADOG
    plan = LogSubscriptions(logs).subscribe(WANTED)
    assert plan.status is Status.NOT_SUBSCRIBED
    assert "Resource limit exceeded." in plan.detail
    assert set(logs.groups[GROUP]) == {"splunk-forwarder", "datadog"}


def test_filters_are_read_across_pages() -> None:
    logs = FakeLogs({GROUP: [SPLUNK, Filter(OURS, FUNCTION)]}, page_size=1)
    assert LogSubscriptions(logs).filters(GROUP) == [SPLUNK, Filter(OURS, FUNCTION)]


def test_delete_removes_ours_and_leaves_the_group_and_the_others() -> None:
    logs = FakeLogs({GROUP: [SPLUNK, Filter(OURS, FUNCTION)]})
    assert LogSubscriptions(logs).unsubscribe(WANTED).status is Status.REMOVED
    assert logs.groups[GROUP] == {"splunk-forwarder": SPLUNK}
    missing = FakeLogs()
    assert LogSubscriptions(missing).unsubscribe(WANTED).status is Status.NOTHING_TO_REMOVE
    assert missing.calls == ["describe"]


def test_an_access_error_is_raised_not_reported_as_a_status() -> None:
    logs = FakeLogs({GROUP: []})

    def denied(**kwargs: Any) -> dict[str, Any]:
        raise error("AccessDeniedException", "not authorized")

    logs.put_subscription_filter = denied  # type: ignore[method-assign]
    with pytest.raises(ClientError):
        LogSubscriptions(logs).subscribe(WANTED)


# --- the custom resource's answer ----------------------------------------------------------------------------


def event(kind: str, **properties: Any) -> dict[str, Any]:
    return {
        "RequestType": kind,
        "ResponseURL": "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/presigned",
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/TrainingGuard/1",
        "RequestId": "req-1",
        "LogicalResourceId": "LogRulesSubscription",
        "ResourceType": "Custom::TrainingGuardLogSubscription",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:subscriber",
            "LogGroupName": GROUP,
            "FilterName": OURS,
            "FilterPattern": contract.LOG_FILTER_PATTERN,
            "DestinationArn": FUNCTION,
            **properties,
        },
    }


def answered(request: dict[str, Any], logs: FakeLogs) -> dict[str, Any]:
    sent: list[tuple[str, Mapping[str, Any]]] = []
    log_subscription.process(request, LogSubscriptions(logs), lambda url, doc: sent.append((url, doc)))
    [(url, document)] = sent
    assert url == request["ResponseURL"]
    return dict(document)


def test_create_answers_success_with_the_status_attribute() -> None:
    document = answered(event("Create"), FakeLogs({GROUP: [SPLUNK]}))
    assert document["Status"] == "SUCCESS"
    assert document["Data"]["Status"] == "subscribed"
    assert document["PhysicalResourceId"] == f"{GROUP}|{OURS}"
    assert (document["RequestId"], document["LogicalResourceId"]) == ("req-1", "LogRulesSubscription")


def test_two_foreign_filters_succeed_the_deploy_and_say_not_subscribed() -> None:
    document = answered(event("Update", PhysicalResourceId="x"), FakeLogs({GROUP: [SPLUNK, DATADOG]}))
    assert document["Status"] == "SUCCESS"
    assert document["Data"]["Status"] == "not-subscribed"
    assert document["Reason"].startswith("NOT subscribed: /aws/sagemaker/TrainingJobs already holds 2")


def test_a_refused_call_fails_the_create_with_the_reason() -> None:
    logs = FakeLogs({GROUP: []})

    def denied(**kwargs: Any) -> dict[str, Any]:
        raise error("AccessDeniedException", "not authorized to perform logs:PutSubscriptionFilter")

    logs.put_subscription_filter = denied  # type: ignore[method-assign]
    document = answered(event("Create"), logs)
    assert document["Status"] == "FAILED"
    assert "PutSubscriptionFilter" in document["Reason"]


def test_a_delete_never_blocks_the_stack_even_when_it_cannot_act() -> None:
    bad = event("Delete", LogGroupName="/aws/lambda/anything")
    bad["PhysicalResourceId"] = "/aws/lambda/anything|training-guard-log-rules"
    document = answered(bad, FakeLogs())
    assert document["Status"] == "SUCCESS"
    assert document["PhysicalResourceId"] == bad["PhysicalResourceId"]
    ours = FakeLogs({GROUP: [SPLUNK, Filter(OURS, FUNCTION)]})
    request = event("Delete")
    request["PhysicalResourceId"] = f"{GROUP}|{OURS}"
    assert answered(request, ours)["Data"]["Status"] == "removed"
    assert ours.groups[GROUP] == {"splunk-forwarder": SPLUNK}


def test_the_response_fits_cloudformations_4096_bytes_whatever_the_reason() -> None:
    import json

    document = response_document(event("Create"), ok=False, reason="x" * 10_000, data={"Detail": "y" * 1000})
    assert len(json.dumps(document).encode()) < 4096


def test_the_answer_is_put_to_the_https_url_only() -> None:
    seen: list[Any] = []

    class Opened:
        def __enter__(self) -> Opened:
            return self

        def __exit__(self, *args: object) -> None:
            return None

    def opener(request: Any, timeout: float) -> Opened:
        seen.append((request.get_method(), request.full_url, request.data, request.get_header("Content-type"), timeout))
        return Opened()

    send_response("https://s3.amazonaws.com/presigned?sig=1", {"Status": "SUCCESS"}, opener=opener)
    assert seen == [("PUT", "https://s3.amazonaws.com/presigned?sig=1", b'{"Status": "SUCCESS"}', "", 10)]
    with pytest.raises(RequestError):
        send_response("http://169.254.169.254/latest", {"Status": "SUCCESS"}, opener=opener)
    assert len(seen) == 1
