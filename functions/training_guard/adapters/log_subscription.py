"""The log-rules subscription filter on the training log group: planned from what the group holds, then applied.

It never touches a filter it did not create, nor another group (docs/design/log-subscription.md)."""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

import boto3
from botocore.exceptions import ClientError

from training_guard import contract
from training_guard.adapters.clients import RETRY_CONFIG, error_code, error_message

if TYPE_CHECKING:
    from collections.abc import Callable

    from mypy_boto3_sts import STSClient

FILTERS_PER_GROUP_MAX = 2  # CloudWatch Logs' limit a log group, not adjustable (docs/limits.md)
SUBSCRIBABLE_GROUPS = frozenset({contract.TRAINING_LOG_GROUP})  # never the guard's own: its logs would loop
REASON_MAX_CHARS = 1000  # well inside a custom resource's 4,096-byte response (docs/limits.md)
RESPONSE_TIMEOUT_SECONDS = 10


class Status(StrEnum):
    """What the deploy did to the subscription: the custom resource's `Status` attribute and the stack output."""

    SUBSCRIBED = "subscribed"
    UPDATED = "updated"  # ours was there: updated in place
    NOT_SUBSCRIBED = "not-subscribed"  # the group holds two filters of others (or refused ours): nothing touched
    REMOVED = "removed"
    NOTHING_TO_REMOVE = "nothing-to-remove"  # delete: no filter of ours (or ours now sends elsewhere: kept)
    FAILED = "failed"  # a member only: its log role refused or a call failed (the hub's own group fails the deploy)


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
    put: bool
    delete: bool
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
    """Remove ours only, and only while it still sends to this stack's function (another stack may have the name)."""
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
            # made now, as SageMaker would, so that the filter is there before the first job's first line
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


MEMBER_WORKERS = 8  # members' calls mostly wait on the network (docs/design/log-subscription.md)
MEMBERS_SUMMARY_MAX_CHARS = 1000  # beside the reason and the detail, within the response's 4096 bytes
_ACCOUNT = re.compile(r"\d{12}")


@dataclass(frozen=True)
class Members:
    """The hub's custom resource's member properties: the accounts, their log role's name, the hub's destination."""

    accounts: tuple[str, ...]
    role_name: str
    destination: str

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> Members | None:
        """None for a single-account guard (no `Members`)."""
        accounts = properties.get("Members")
        if accounts is None:
            return None
        role, destination = properties.get("MemberRoleName"), properties.get("MemberDestinationArn")
        if not isinstance(accounts, list) or not all(isinstance(a, str) and _ACCOUNT.fullmatch(a) for a in accounts):
            raise RequestError("Members: a list of 12-digit account IDs; deploy the guard's own template")
        if not isinstance(role, str) or not role or not isinstance(destination, str) or not destination:
            raise RequestError("MemberRoleName and MemberDestinationArn: text; deploy the guard's own template")
        return cls(tuple(accounts), role, destination)

    def role_arn(self, account: str) -> str:
        """The member's log role, in the destination's partition (arn:<partition>:logs:...)."""
        partition = self.destination.split(":")[1] if self.destination.count(":") >= 5 else "aws"
        return f"arn:{partition}:iam::{account}:role/{self.role_name}"


def member_work(kind: str, new: Members | None, old: Members | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(subscribe, unsubscribe): Create, Update subscribe the configured; Update drops the others, Delete all."""
    if kind == "Delete":
        return (), new.accounts if new else ()
    subscribe = new.accounts if new else ()
    gone = tuple(a for a in (old.accounts if old else ()) if a not in subscribe)
    return subscribe, gone


@dataclass(frozen=True)
class MemberOutcome:
    account: str
    status: Status
    detail: str


def members_summary(outcomes: Sequence[MemberOutcome]) -> str:
    """One line for the stack output: how many members are subscribed, and which are not."""
    put = [o for o in outcomes if o.status in {Status.SUBSCRIBED, Status.UPDATED}]
    if not put and not any(o.status in {Status.NOT_SUBSCRIBED, Status.FAILED} for o in outcomes):
        text = f"{len(outcomes)} member(s) unsubscribed" if outcomes else "no member"
    else:
        missing = [o for o in outcomes if o.status in {Status.NOT_SUBSCRIBED, Status.FAILED}]
        text = f"{len(put)} of {len(put) + len(missing)} members subscribed"
        if missing:
            text += "; not subscribed: " + ", ".join(f"{o.account} ({o.status.value})" for o in missing)
    return text if len(text) <= MEMBERS_SUMMARY_MAX_CHARS else text[: MEMBERS_SUMMARY_MAX_CHARS - 3] + "..."


class MemberSubscriptions:
    """The guard's filter in members' log groups, through their log roles; a failing member stops no other."""

    def __init__(self, logs_in: Callable[[str], LogsApi], *, workers: int = MEMBER_WORKERS) -> None:
        self.logs_in = logs_in
        self.workers = workers

    def apply(
        self, wanted: Subscription, members: Members, *, subscribe: Sequence[str], unsubscribe: Sequence[str]
    ) -> list[MemberOutcome]:
        theirs = replace(wanted, destination=members.destination)
        work = [(a, True) for a in subscribe] + [(a, False) for a in unsubscribe]
        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(work) or 1))) as pool:
            return list(pool.map(lambda job: self._one(theirs, members, *job), work))

    def _one(self, wanted: Subscription, members: Members, account: str, subscribe: bool) -> MemberOutcome:
        try:
            subscriptions = LogSubscriptions(self.logs_in(members.role_arn(account)))
            plan = subscriptions.subscribe(wanted) if subscribe else subscriptions.unsubscribe(wanted)
        except Exception as exc:  # noqa: BLE001 - one member must never fail the deploy (unanswered) nor the others
            what = "subscribe" if subscribe else "unsubscribe"
            return MemberOutcome(account, Status.FAILED, f"could not {what} {account}: {exc}")
        return MemberOutcome(account, plan.status, f"{account}: {plan.detail}")


SESSION_NAME = "training-guard-log-subscriber"  # the member's CloudTrail shows assumed-role/<log role>/<this>
# boto3's default session is not thread-safe; the clients it makes are (https://docs.aws.amazon.com/boto3/latest/guide/clients.html).
_CLIENTS = threading.Lock()


def member_logs(sts: STSClient, role_arn: str) -> LogsApi:
    """CloudWatch Logs in a member account, through its log role (the subscriber's credentials, one session a call)."""
    credentials = sts.assume_role(RoleArn=role_arn, RoleSessionName=SESSION_NAME)["Credentials"]
    with _CLIENTS:
        logs: LogsApi = boto3.client(
            "logs",
            config=RETRY_CONFIG,
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
        )
    return logs


def response_document(
    event: Mapping[str, Any], *, ok: bool, reason: str, data: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The custom resource's answer; its physical id names group and filter, so a rename replaces the resource."""
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
