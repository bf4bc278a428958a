"""SNS: publish one notification with a body per protocol."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from training_guard.errors import ActionFailed
from training_guard.messages import Notification, q_developer_notification


def sns_message(notification: Notification) -> str:
    """The `MessageStructure="json"` body: prose for e-mail and SMS, the document for machines.

    HTTPS subscribers get the Amazon Q Developer custom-notification form (Q Developer subscribes
    to the topic over HTTPS and drops any payload it does not recognise).
    """
    doc = notification.document()
    document = json.dumps(doc, separators=(",", ":"))
    return json.dumps(
        {
            "default": document,
            "email": notification.email_text(),
            "email-json": document,
            "sms": notification.sms_text(),
            "sqs": document,
            "lambda": document,
            "https": json.dumps(q_developer_notification(doc), separators=(",", ":")),
            "http": document,
        }
    )


def message_attributes(notification: Notification) -> dict[str, dict[str, str]]:
    """Attributes that subscription filter policies can select on (e.g. severity for SMS)."""
    return {
        "kind": {"DataType": "String", "StringValue": notification.kind.value},
        "outcome": {"DataType": "String", "StringValue": notification.outcome.value},
        "severity": {"DataType": "String", "StringValue": notification.severity},
    }


class SnsPublisher:
    def __init__(self, client: Any, topic_arn: str) -> None:
        self._client = client
        self._topic_arn = topic_arn

    def publish(self, notification: Notification) -> None:
        try:
            self._client.publish(
                TopicArn=self._topic_arn,
                Subject=notification.subject(),
                Message=sns_message(notification),
                MessageStructure="json",
                MessageAttributes=message_attributes(notification),
            )
        except ClientError as exc:
            raise ActionFailed(f"sns:Publish to {self._topic_arn}", exc) from exc
