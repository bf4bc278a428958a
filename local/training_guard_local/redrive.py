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
