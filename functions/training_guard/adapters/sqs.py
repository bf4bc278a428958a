"""SQS: park a message that cannot be delivered in the dead-letter queue, with the reason."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from training_guard.errors import ActionFailed

_ATTRIBUTE_MAX = 256


class DeadLetterParker:
    def __init__(self, client: Any, queue_url: str) -> None:
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
