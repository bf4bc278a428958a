"""The log-rules subscription filter on the training log group: what to do is decided from what the group holds
(pure), then applied with CloudWatch Logs' API. It never touches a filter it did not create, nor another group."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import ClientError

from training_guard import contract
from training_guard.adapters.clients import error_code, error_message

if TYPE_CHECKING:
    from collections.abc import Callable

# CloudWatch Logs allows two subscription filters a log group, not adjustable
# (https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutSubscriptionFilter.html).
FILTERS_PER_GROUP_MAX = 2
# The only group the guard subscribes to: never one of its own (its functions' logs would feed it: a loop).
SUBSCRIBABLE_GROUPS = frozenset({contract.TRAINING_LOG_GROUP})
# A custom resource's response is at most 4096 bytes; its reason is cut well inside that.
# https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html
REASON_MAX_CHARS = 1000
RESPONSE_TIMEOUT_SECONDS = 10


class Status(StrEnum):
    """What the deploy did to the subscription: the custom resource's `Status` attribute and the stack output."""

    SUBSCRIBED = "subscribed"  # ours created
    UPDATED = "updated"  # ours was there: updated in place
    NOT_SUBSCRIBED = "not-subscribed"  # the group holds two filters of others (or refused ours): nothing touched
    REMOVED = "removed"  # delete: ours removed
    NOTHING_TO_REMOVE = "nothing-to-remove"  # delete: no filter of ours (or ours now sends elsewhere: kept)


class RequestError(ValueError):
    """The custom resource's properties are unusable (a template the guard did not synthesize)."""


@dataclass(frozen=True)
class Filter:
    name: str
    destination: str
    pattern: str = ""


@dataclass(frozen=True)
class Subscription:
    """The filter the guard wants: the custom resource's properties."""

    group: str
    name: str
    pattern: str
    destination: str

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> Subscription:
        values = {key: properties.get(key) for key in ("LogGroupName", "FilterName", "FilterPattern", "DestinationArn")}
        missing = [key for key, value in values.items() if not isinstance(value, str)]
        if missing:
            raise RequestError(f"the custom resource has no {', '.join(missing)}; deploy the guard's own template")
        group, name = str(values["LogGroupName"]), str(values["FilterName"])
        if group not in SUBSCRIBABLE_GROUPS:
            raise RequestError(
                f"LogGroupName {group!r}: the guard subscribes only {contract.TRAINING_LOG_GROUP} (never its own logs)"
            )
        if name != contract.LOG_SUBSCRIPTION_FILTER_NAME:
            raise RequestError(f"FilterName {name!r}: the guard's filter is {contract.LOG_SUBSCRIPTION_FILTER_NAME}")
        return cls(group, name, str(values["FilterPattern"]), str(values["DestinationArn"]))


@dataclass(frozen=True)
class Plan:
    put: bool  # PutSubscriptionFilter ours (create or update)
    delete: bool  # DeleteSubscriptionFilter ours
    status: Status
    detail: str


def plan_subscribe(wanted: Subscription, existing: Sequence[Filter]) -> Plan:
    """Create or update ours; with two filters of others on the group, touch nothing and say so."""
    ours = [f for f in existing if f.name == wanted.name]
    if ours:
        before = ours[0]
        moved = f" (it sent to {before.destination})" if before.destination != wanted.destination else ""
        return Plan(True, False, Status.UPDATED, f"updated {wanted.name} on {wanted.group} in place{moved}")
    others = [f.name for f in existing]
    if len(others) >= FILTERS_PER_GROUP_MAX:
        return Plan(False, False, Status.NOT_SUBSCRIBED, not_subscribed(wanted, others))
    beside = f" beside {', '.join(others)}" if others else ""
    return Plan(True, False, Status.SUBSCRIBED, f"subscribed {wanted.name} to {wanted.group}{beside}")


def plan_unsubscribe(wanted: Subscription, existing: Sequence[Filter]) -> Plan:
    """Remove ours only, and only while it still sends to this stack's function (another stack may have taken the
    name since)."""
    ours = [f for f in existing if f.name == wanted.name]
    if not ours:
        return Plan(False, False, Status.NOTHING_TO_REMOVE, f"no filter {wanted.name} on {wanted.group}")
    if ours[0].destination != wanted.destination:
        return Plan(
            False,
            False,
            Status.NOTHING_TO_REMOVE,
            f"kept {wanted.name} on {wanted.group}: it sends to {ours[0].destination}, not to this stack's function",
        )
    return Plan(False, True, Status.REMOVED, f"removed {wanted.name} from {wanted.group}")


def not_subscribed(wanted: Subscription, others: Sequence[str]) -> str:
    return (
        f"NOT subscribed: {wanted.group} already holds {len(others)} subscription filters of others "
        f"({', '.join(others)}) and CloudWatch Logs allows {FILTERS_PER_GROUP_MAX}; the log rules see no line. "
        f"Remove one of them (aws logs delete-subscription-filter --log-group-name {wanted.group} --filter-name NAME) "
        "and deploy again, or leave the log rules to the metric guards"
    )


class LogsApi(Protocol):
    """The CloudWatch Logs calls the subscription makes (boto3's client has them)."""

    def describe_subscription_filters(self, **kwargs: Any) -> Mapping[str, Any]: ...
    def put_subscription_filter(self, **kwargs: Any) -> Mapping[str, Any]: ...
    def delete_subscription_filter(self, **kwargs: Any) -> Mapping[str, Any]: ...
    def create_log_group(self, **kwargs: Any) -> Mapping[str, Any]: ...


class LogSubscriptions:
    def __init__(self, logs: LogsApi) -> None:
        self.logs = logs

    def filters(self, group: str) -> list[Filter] | None:
        """The group's subscription filters, or None when the group does not exist."""
        found: list[Filter] = []
        token: str | None = None
        while True:
            try:
                page = self.logs.describe_subscription_filters(
                    logGroupName=group, **({"nextToken": token} if token else {})
                )
            except ClientError as exc:
                if error_code(exc) == "ResourceNotFoundException":
                    return None
                raise
            found += [
                Filter(str(f.get("filterName", "")), str(f.get("destinationArn", "")), str(f.get("filterPattern", "")))
                for f in page.get("subscriptionFilters", [])
            ]
            token = page.get("nextToken")
            if not token:
                return found

    def subscribe(self, wanted: Subscription) -> Plan:
        existing = self.filters(wanted.group)
        if existing is None:
            # The group appears with the account's first training job; made now (default retention: never
            # expire, as SageMaker would make it), so the subscription is in place before that job's first line.
            try:
                self.logs.create_log_group(logGroupName=wanted.group)
            except ClientError as exc:
                if error_code(exc) != "ResourceAlreadyExistsException":  # a job created it meanwhile
                    raise
            existing = self.filters(wanted.group) or []
        plan = plan_subscribe(wanted, existing)
        if not plan.put:
            return plan
        try:
            self.logs.put_subscription_filter(
                logGroupName=wanted.group,
                filterName=wanted.name,
                filterPattern=wanted.pattern,
                destinationArn=wanted.destination,
            )
        except ClientError as exc:
            if error_code(exc) != "LimitExceededException":
                raise
            # A filter of others arrived since the listing (or the group's regex quota is spent): report, do not fail.
            others = [f.name for f in self.filters(wanted.group) or [] if f.name != wanted.name]
            detail = f"{not_subscribed(wanted, others)} (CloudWatch Logs: {error_message(exc)})"
            return Plan(False, False, Status.NOT_SUBSCRIBED, detail)
        return plan

    def unsubscribe(self, wanted: Subscription) -> Plan:
        existing = self.filters(wanted.group)
        plan = plan_unsubscribe(wanted, existing or [])
        if plan.delete:
            try:
                self.logs.delete_subscription_filter(logGroupName=wanted.group, filterName=wanted.name)
            except ClientError as exc:
                if error_code(exc) != "ResourceNotFoundException":
                    raise
        return plan


def response_document(
    event: Mapping[str, Any], *, ok: bool, reason: str, data: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The custom resource's answer to CloudFormation. The physical id names the group and the filter, so an update
    keeps the resource and a rename replaces it (CloudFormation then deletes the old one)."""
    properties = event.get("ResourceProperties") or {}
    physical = event.get("PhysicalResourceId") or (
        f"{properties.get('LogGroupName', '')}|{properties.get('FilterName', '')}"
    )
    document: dict[str, Any] = {
        "Status": "SUCCESS" if ok else "FAILED",
        "Reason": reason[:REASON_MAX_CHARS],
        "PhysicalResourceId": physical,
        "StackId": event.get("StackId", ""),
        "RequestId": event.get("RequestId", ""),
        "LogicalResourceId": event.get("LogicalResourceId", ""),
    }
    if data:
        document["Data"] = dict(data)
    return document


def send_response(url: str, document: Mapping[str, Any], *, opener: Callable[..., Any] | None = None) -> None:
    """PUT the answer to the presigned S3 URL CloudFormation gave; an exception here makes Lambda retry."""
    if not url.startswith("https://"):
        raise RequestError("ResponseURL: CloudFormation gives an https URL; refusing to send elsewhere")
    body = json.dumps(document).encode()
    # An empty Content-Type: the URL is presigned without one.
    request = urllib.request.Request(  # noqa: S310 - https only, checked above
        url, data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
    )
    with (opener or urllib.request.urlopen)(request, timeout=RESPONSE_TIMEOUT_SECONDS):
        pass
