"""The log-rules subscription's custom resource: CloudFormation's Create/Update/Delete in, its answer PUT back."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError

from training_guard.adapters.clients import client
from training_guard.adapters.log_subscription import (
    LogsApi,
    LogSubscriptions,
    RequestError,
    Status,
    Subscription,
    response_document,
    send_response,
)

logger = Logger()


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process(event, LogSubscriptions(cast("LogsApi", client("logs"))), send_response)


def process(
    event: Mapping[str, Any],
    subscriptions: LogSubscriptions,
    respond: Callable[[str, Mapping[str, Any]], None],
) -> dict[str, Any]:
    """Always answers CloudFormation (a custom resource without an answer holds the stack until it times out)."""
    kind = str(event.get("RequestType", ""))
    try:
        wanted = Subscription.from_properties(event.get("ResourceProperties") or {})
        plan = subscriptions.unsubscribe(wanted) if kind == "Delete" else subscriptions.subscribe(wanted)
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
        document = response_document(
            event, ok=True, reason=plan.detail, data={"Status": plan.status.value, "Detail": plan.detail[:1000]}
        )
    respond(str(event.get("ResponseURL", "")), document)
    return document
