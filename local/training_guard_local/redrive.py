"""Redrive a dead-letter queue after fixing what made its messages fail.

The guard's dead-letter queues hold three kinds of message:
- an EventBridge event its rule could not deliver (the body is the event);
- a Lambda on-failure record after the function's retries (`requestPayload` is the event,
  `responsePayload.errorMessage` says why);
- a chat message the Slack notifier could not deliver (a notification document or an alarm
  notification, with a `reason` attribute when the notifier parked it).
Events go back to their function (asynchronous invoke, as EventBridge would); chat messages go
back to the chat queue. A message is deleted only after it was handed on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    receipt: str
    payload: str  # what to hand on: the original event, or the chat message as it was
    why: str


def read(message: dict[str, Any]) -> DeadLetter:
    body = message.get("Body", "")
    attributes = message.get("MessageAttributes") or {}
    why = (attributes.get("reason") or attributes.get("ERROR_MESSAGE") or {}).get("StringValue") or ""
    payload = body
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and "requestPayload" in data:  # a Lambda on-failure destination record
        payload = json.dumps(data["requestPayload"])
        response = data.get("responsePayload") or {}
        condition = (data.get("requestContext") or {}).get("condition", "")
        why = why or f"{condition}: {response.get('errorType', '')} {response.get('errorMessage', '')}".strip()
    return DeadLetter(message["MessageId"], message["ReceiptHandle"], payload, why or "no reason recorded")


def redrive(
    sqs: Any,
    dead_letters_url: str,
    hand_on: Callable[[str], None],
    *,
    dry_run: bool = False,
    limit: int = 1000,
    say: Callable[[str], None] = print,
) -> int:
    """Hand each dead letter on; returns how many were redriven (or would be, in a dry run)."""
    done = 0
    seen: set[str] = set()
    while done < limit:
        batch = sqs.receive_message(
            QueueUrl=dead_letters_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            VisibilityTimeout=60,
        ).get("Messages", [])
        fresh = [m for m in batch if m["MessageId"] not in seen]
        for again in (m for m in batch if m["MessageId"] in seen):  # a dry run's, received twice
            sqs.change_message_visibility(
                QueueUrl=dead_letters_url, ReceiptHandle=again["ReceiptHandle"], VisibilityTimeout=0
            )
        if not fresh:
            break
        for message in fresh:
            seen.add(message["MessageId"])
            letter = read(message)
            say(f"{letter.message_id}: {letter.why[:160]}")
            if dry_run:
                sqs.change_message_visibility(
                    QueueUrl=dead_letters_url, ReceiptHandle=letter.receipt, VisibilityTimeout=0
                )
            else:
                hand_on(letter.payload)
                sqs.delete_message(QueueUrl=dead_letters_url, ReceiptHandle=letter.receipt)
            done += 1
            if done >= limit:
                break
    return done


def to_function(lambda_client: Any, function: str) -> Callable[[str], None]:
    def invoke(payload: str) -> None:
        lambda_client.invoke(FunctionName=function, InvocationType="Event", Payload=payload.encode())

    return invoke


def to_queue(sqs: Any, queue_url: str) -> Callable[[str], None]:
    def send(payload: str) -> None:
        sqs.send_message(QueueUrl=queue_url, MessageBody=payload)

    return send


class RedriveError(RuntimeError):
    """Why the redrive cannot start or went wrong, in one line with what to do."""


# https://sqs.<region>.amazonaws.com/<account>/<name> (and the legacy https://<region>.queue.amazonaws.com/...)
_QUEUE_URL = re.compile(
    r"^https://(?:sqs\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?|(?P<legacy>[a-z0-9-]+)\.queue\.amazonaws\.com)"
    r"/\d{12}/[\w-]{1,80}(?:\.fifo)?$"
)


def queue_region(url: str, option: str = "--dead-letters") -> str:
    match = _QUEUE_URL.match(url)
    if not match:
        raise RedriveError(
            f"{option} {url!r}: not an SQS queue URL (https://sqs.<region>.amazonaws.com/<account>/<queue>; "
            "the stack's outputs list the dead-letter queues)"
        )
    return match.group("region") or match.group("legacy")


def run(
    dead_letters_url: str,
    *,
    function: str | None,
    queue: str | None,
    region: str | None = None,
    dry_run: bool = False,
    limit: int = 1000,
    say: Callable[[str], None] = print,
) -> int:
    """The `redrive` command: clients in the queue's region with the user's credentials, then `redrive`."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    from training_guard_local.sessions import new_session

    region = region or queue_region(dead_letters_url)
    if queue:
        queue_region(queue, "--queue")
    try:
        session = new_session(region_name=region)
        if session.get_credentials() is None:
            raise NoCredentialsError  # said once, below
        sqs = session.client("sqs")
        hand_on = to_function(session.client("lambda"), function) if function else to_queue(sqs, queue or "")
        return redrive(sqs, dead_letters_url, hand_on, dry_run=dry_run, limit=limit, say=say)
    except NoRegionError:
        raise RedriveError("no AWS region: pass --region or set AWS_REGION (or a region in your AWS profile)") from None
    except NoCredentialsError:
        raise RedriveError("no AWS credentials found: set AWS_PROFILE or sign in with `aws sso login`") from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise RedriveError(
            f"{exc.operation_name} failed: {error.get('Code', '?')}: {error.get('Message', '')}".rstrip(": ")
        ) from None
    except BotoCoreError as exc:  # a profile that does not exist, expired SSO, no network, ...
        raise RedriveError(str(exc)) from None
