"""SNS: publish one notification with a body per protocol."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from training_guard.domain.errors import ActionFailed
from training_guard.render.messages import Notification, q_developer_notification

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sns.type_defs import MessageAttributeValueTypeDef

# Body and attributes together; above it, Publish is refused (docs/limits.md).
SNS_MAX_MESSAGE_BYTES = 262_144
_ATTRIBUTES_ALLOWANCE = 1024  # the three short message attributes, with room to spare
# Longest text kept in each string of the document, tried in turn until the message fits.
_TEXT_LIMITS = (None, 1024, 256, 64)


def sns_message(notification: Notification, *, members: Collection[str] = ()) -> str:
    """The `MessageStructure="json"` body: prose for e-mail and SMS, Q Developer's form for HTTPS, the document else;
    UTF-8, not \\u-escaped; long strings cut to the first of `_TEXT_LIMITS` that fits rather than the message lost."""
    document, email = notification.document(), notification.email_text()
    budget = SNS_MAX_MESSAGE_BYTES - _ATTRIBUTES_ALLOWANCE
    for limit in _TEXT_LIMITS:
        doc = document if limit is None else _shorten(document, limit)
        body = _body(doc, email if limit is None else _cut(email, 16 * limit), notification.sms_text(), members)
        if len(body.encode()) <= budget:
            break
    return body


def _body(doc: dict[str, Any], email: str, sms: str, members: Collection[str]) -> str:
    document = _json(doc)
    return _json(
        {
            "default": document,
            "sqs": document,  # the chat queue's subscription; spelled out for readers of the raw message
            "email": email,
            "sms": sms,
            "https": _json(q_developer_notification(doc, members=members)),
        }
    )


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shorten(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return _cut(value, limit)
    if isinstance(value, dict):
        return {_cut(str(k), limit): _shorten(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v, limit) for v in value]
    return value


def message_attributes(notification: Notification) -> dict[str, MessageAttributeValueTypeDef]:
    return {
        "kind": {"DataType": "String", "StringValue": notification.kind.value},
        "outcome": {"DataType": "String", "StringValue": notification.outcome.value},
        "severity": {"DataType": "String", "StringValue": notification.severity},
    }


class SnsPublisher:
    def __init__(self, client: SNSClient, topic_arn: str, *, members: Collection[str] = ()) -> None:
        """`members`: the organization's member accounts (their jobs get Q Developer threads of their own)."""
        self._client = client
        self._topic_arn = topic_arn
        self._members = frozenset(members)

    def publish(self, notification: Notification) -> None:
        try:
            self._client.publish(
                TopicArn=self._topic_arn,
                Subject=notification.subject(),
                Message=sns_message(notification, members=self._members),
                MessageStructure="json",
                MessageAttributes=message_attributes(notification),
            )
        except ClientError as exc:
            raise ActionFailed(f"sns:Publish to {self._topic_arn}", exc) from exc
