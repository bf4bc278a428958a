"""The log-rules subscription's custom resource: CloudFormation's Create/Update/Delete in, its answer PUT back."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, cast

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError

from training_guard.adapters.log_subscription import (
    LogsApi,
    LogSubscriptions,
    Members,
    MemberSubscriptions,
    RequestError,
    Status,
    Subscription,
    member_logs,
    member_work,
    members_summary,
    response_document,
    send_response,
)
from training_guard.handlers import wiring

logger = Logger()


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    root = wiring.root()
    members = MemberSubscriptions(partial(member_logs, root.client("sts")))
    return process(event, LogSubscriptions(cast("LogsApi", root.client("logs"))), send_response, members=members)


def process(
    event: Mapping[str, Any],
    subscriptions: LogSubscriptions,
    respond: Callable[[str, Mapping[str, Any]], None],
    *,
    members: MemberSubscriptions | None = None,
) -> dict[str, Any]:
    """Always answers CloudFormation (else the stack waits out its timeout); a member never fails the deploy."""
    kind = str(event.get("RequestType", ""))
    try:
        wanted = Subscription.from_properties(event.get("ResourceProperties") or {})
        configured = Members.from_properties(event.get("ResourceProperties") or {})
        plan = subscriptions.unsubscribe(wanted) if kind == "Delete" else subscriptions.subscribe(wanted)
        summary = _members(kind, event, wanted, configured, members)
    except (RequestError, ClientError) as exc:
        if kind == "Delete":
            # A resource that never worked must not block its stack's rollback or deletion.
            logger.warning("log subscription left as it is", extra={"request": kind, "reason": str(exc)})
            document = response_document(event, ok=True, reason=f"nothing removed: {exc}")
        else:
            logger.error("log subscription failed", extra={"request": kind, "reason": str(exc)})
            document = response_document(event, ok=False, reason=str(exc))
    else:
        log = logger.warning if plan.status is Status.NOT_SUBSCRIBED else logger.info
        log(f"log subscription {plan.status.value}", extra={"request": kind, "detail": plan.detail})
        data = {"Status": plan.status.value, "Detail": plan.detail[:1000]}
        if summary is not None:
            data["Members"] = summary
        reason = plan.detail if summary is None else f"{plan.detail}; members: {summary}"
        document = response_document(event, ok=True, reason=reason, data=data)
    respond(str(event.get("ResponseURL", "")), document)
    return document


def _members(
    kind: str,
    event: Mapping[str, Any],
    wanted: Subscription,
    configured: Members | None,
    members: MemberSubscriptions | None,
) -> str | None:
    """The members' part of the request, each outcome logged; None for a single-account guard."""
    if configured is None or members is None:
        return None
    try:
        old = Members.from_properties(event.get("OldResourceProperties") or {}) if kind == "Update" else None
    except RequestError:
        old = None  # an older template without members: nothing to remove
    subscribe, unsubscribe = member_work(kind, configured, old)
    outcomes = members.apply(wanted, configured, subscribe=subscribe, unsubscribe=unsubscribe)
    for outcome in outcomes:
        failed = outcome.status in {Status.FAILED, Status.NOT_SUBSCRIBED}
        (logger.warning if failed else logger.info)(
            f"member log subscription {outcome.status.value}",
            extra={"request": kind, "account": outcome.account, "detail": outcome.detail},
        )
    return members_summary(outcomes)
