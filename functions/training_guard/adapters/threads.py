"""DynamoDB: the record of each job's Slack thread per channel (threads.py says why and how it is used).

The item and its claim: docs/design/chat-delivery.md; it expires with the ledger's transitions (dedup_ttl_days)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from training_guard import contract
from training_guard.adapters.clients import error_code
from training_guard.domain.errors import ActionFailed
from training_guard.services.threads import ClaimOutcome, ParentClaim, ThreadRecord, lease_expiry

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_PK = contract.TABLE_PARTITION_KEY
_TTL = contract.TABLE_TTL_ATTRIBUTE
CLAIMED = "claimed"
POSTED = "posted"


class DynamoThreads:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def read(self, key: str) -> ThreadRecord | None:
        try:
            response = self._client.get_item(TableName=self._table, Key={_PK: {"S": key}}, ConsistentRead=True)
        except ClientError as exc:
            raise ActionFailed(f"read thread {key}", exc) from exc
        item = response.get("Item")
        return _record(item) if item else None

    def claim(self, key: str, *, holder: str, now: datetime, lease_seconds: int, ttl_seconds: int) -> ParentClaim:
        epoch = int(now.timestamp())
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    _PK: {"S": key},
                    "state": {"S": CLAIMED},
                    "holder": {"S": holder},
                    "lease_until": {"N": str(lease_expiry(now, lease_seconds))},
                    _TTL: {"N": str(epoch + ttl_seconds)},
                },
                ConditionExpression="attribute_not_exists(#pk) OR (#state = :claimed AND lease_until < :now)",
                ExpressionAttributeNames={"#pk": _PK, "#state": "state"},
                ExpressionAttributeValues={":claimed": {"S": CLAIMED}, ":now": {"N": str(epoch)}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise ActionFailed(f"claim thread {key}", exc) from exc
            old = exc.response.get("Item")
            record = _record(old) if old else self.read(key)
            if record is not None and record.ts:
                return ParentClaim(ClaimOutcome.POSTED, record)
            return ParentClaim(ClaimOutcome.BUSY, record)
        return ParentClaim(ClaimOutcome.GRANTED)

    def record_parent(
        self, key: str, *, holder: str, ts: str, card_version: int, now: datetime, ttl_seconds: int
    ) -> ThreadRecord:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": key}},
                UpdateExpression=(
                    "SET #state = :posted, ts = :ts, card_version = :version, #ttl = :ttl REMOVE holder, lease_until"
                ),
                # Only the holder records its parent: one whose claim was taken over finds the other's record.
                ConditionExpression="#state = :claimed AND holder = :holder",
                ExpressionAttributeNames={"#state": "state", "#ttl": _TTL},
                ExpressionAttributeValues={
                    ":posted": {"S": POSTED},
                    ":claimed": {"S": CLAIMED},
                    ":holder": {"S": holder},
                    ":ts": {"S": ts},
                    ":version": {"N": str(card_version)},
                    ":ttl": {"N": str(int(now.timestamp()) + ttl_seconds)},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise ActionFailed(f"record the parent of {key}", exc) from exc
            old = exc.response.get("Item")
            record = _record(old) if old else self.read(key)
            # Taken over and posted by another: theirs is the thread; otherwise ours is the only parent so far.
            return record if record is not None and record.ts else ThreadRecord(ts=ts, card_version=card_version)
        return ThreadRecord(ts=ts, card_version=card_version)

    def release(self, key: str, *, holder: str) -> None:
        try:
            self._client.delete_item(
                TableName=self._table,
                Key={_PK: {"S": key}},
                ConditionExpression="#state = :claimed AND holder = :holder",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={":claimed": {"S": CLAIMED}, ":holder": {"S": holder}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise ActionFailed(f"release thread {key}", exc) from exc

    def advance_card(self, key: str, version: int) -> bool:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": key}},
                UpdateExpression="SET card_version = :version",
                ConditionExpression=(
                    "#state = :posted AND (attribute_not_exists(card_version) OR card_version < :version)"
                ),
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={":posted": {"S": POSTED}, ":version": {"N": str(version)}},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise ActionFailed(f"advance the card of {key}", exc) from exc
        return True


def _record(item: dict[str, Any]) -> ThreadRecord:
    def number(name: str) -> int | None:
        value = item.get(name, {}).get("N")
        return None if value is None else int(value)

    return ThreadRecord(
        ts=item.get("ts", {}).get("S"),
        holder=item.get("holder", {}).get("S"),
        lease_until=number("lease_until"),
        card_version=number("card_version") or 0,
    )
