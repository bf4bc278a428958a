"""SQS: park a message that cannot be delivered in the dead-letter queue, with the reason; hand a job's card update
to the notifier's queue."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from training_guard import contract
from training_guard.domain.errors import ActionFailed

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from training_guard.render.messages import Notification

_ATTRIBUTE_MAX = 256


class DeadLetterParker:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def park(self, body: str, reason: str) -> None:
        try:
            self._client.send_message(
                QueueUrl=self._queue_url,
                MessageBody=body,
                MessageAttributes={"reason": {"DataType": "String", "StringValue": reason[:_ATTRIBUTE_MAX] or "-"}},
            )
        except ClientError as exc:
            raise ActionFailed("park message in the dead-letter queue", exc) from exc


class CardUpdates:
    """Card updates (ports.CardPort): the document, marked card-only, sent to the chat queue as SNS would deliver it."""

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def update_card(self, notification: Notification) -> None:
        body = json.dumps(
            {**notification.document(), contract.CARD_ONLY: True}, separators=(",", ":"), ensure_ascii=False
        )
        try:
            self._client.send_message(QueueUrl=self._queue_url, MessageBody=body)
        except (ClientError, BotoCoreError) as exc:
            raise ActionFailed(f"sqs:SendMessage of a card update to {self._queue_url}", exc) from exc
