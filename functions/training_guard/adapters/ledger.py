"""DynamoDB: the transition ledger (exactly-once) and the stop audit records.

The items and their attributes: docs/design/exactly-once.md.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from training_guard import contract
from training_guard.adapters.clients import error_code
from training_guard.adapters.mutes import IN_FORCE_UNTIL
from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import parse_time
from training_guard.services.ports import Claim, StopClaim, StopRecord, StopSpend

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_PK = contract.TABLE_PARTITION_KEY
_TTL = contract.TABLE_TTL_ATTRIBUTE


def _stop_key(job: str) -> str:
    return f"stop#{job}"


class DynamoLedger:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def claim(self, key: str, *, now: datetime, lease_seconds: int) -> Claim:
        """Claim a transition for `lease_seconds`: granted, done before, or held by another attempt."""
        # Powertools Idempotency's in-progress semantics, but one event holds several transitions, each its own.
        epoch = int(now.timestamp())
        try:
            self._client.put_item(
                TableName=self._table,
                Item=_claim_item(key, epoch, lease_seconds),
                ConditionExpression="attribute_not_exists(#pk) OR (#state = :busy AND lease_until < :now)",
                ExpressionAttributeNames={"#pk": _PK, "#state": "state"},
                ExpressionAttributeValues={":busy": {"S": "in_progress"}, ":now": {"N": str(epoch)}},
                # The item that made the condition fail tells "done" from "busy" without a second read.
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                old = exc.response.get("Item") or {}
                return Claim.DONE if old.get("state", {}).get("S") == "done" else Claim.BUSY
            raise ActionFailed(f"claim {key}", exc) from exc
        return Claim.GRANTED

    def complete(self, key: str, *, now: datetime, ttl_seconds: int, outcome: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": key}},
                UpdateExpression="SET #state = :done, outcome = :outcome, #ttl = :ttl REMOVE lease_until",
                ExpressionAttributeNames={"#state": "state", "#ttl": _TTL},
                ExpressionAttributeValues={
                    ":done": {"S": "done"},
                    ":outcome": {"S": outcome},
                    ":ttl": {"N": str(int(now.timestamp()) + ttl_seconds)},
                },
            )
        except ClientError as exc:
            raise ActionFailed(f"complete {key}", exc) from exc

    def release(self, key: str) -> None:
        try:
            self._client.delete_item(
                TableName=self._table,
                Key={_PK: {"S": key}},
                ConditionExpression="#state = :busy",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={":busy": {"S": "in_progress"}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise ActionFailed(f"release {key}", exc) from exc

    def claim_stop(self, record: StopRecord, *, ttl_seconds: int) -> StopClaim:
        item = _stop_item(record, ttl_seconds)
        try:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                # Written only when there is none: a retry of the same rule's stop finds its earlier record and
                # keeps it whole, with what it gathered since (its confirmation, the transitions folded into it).
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": _PK},
                # The record that made the condition fail, read in the same write.
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                old = exc.response.get("Item")
                previous = _record(old) if old else self.get_stop(record.job)
                granted = previous is not None and previous.rule == record.rule
                return StopClaim(granted=granted, previous=previous)
            raise ActionFailed(f"record stop of {record.job}", exc) from exc
        return StopClaim(granted=True, previous=None)

    def claim_first_stop(
        self,
        key: str,
        record: StopRecord,
        *,
        now: datetime,
        lease_seconds: int,
        ttl_seconds: int,
        mutes_of: str | None,
    ) -> bool:
        # One TransactWriteItems: all three conditions hold, or nothing is written
        # (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
        epoch = int(now.timestamp())
        names = {"#pk": _PK}
        items: list[Any] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": _claim_item(key, epoch, lease_seconds),
                    "ConditionExpression": "attribute_not_exists(#pk)",
                    "ExpressionAttributeNames": names,
                }
            },
            {
                "Put": {
                    "TableName": self._table,
                    "Item": _stop_item(record, ttl_seconds),
                    "ConditionExpression": "attribute_not_exists(#pk)",
                    "ExpressionAttributeNames": names,
                }
            },
        ]
        if mutes_of is not None:
            items.append(
                {
                    "ConditionCheck": {
                        "TableName": self._table,
                        "Key": {_PK: {"S": mutes_of}},
                        "ConditionExpression": "attribute_not_exists(#pk) OR attribute_not_exists(#until) "
                        "OR #until < :now",
                        "ExpressionAttributeNames": {**names, "#until": IN_FORCE_UNTIL},
                        "ExpressionAttributeValues": {":now": {"N": str(epoch)}},
                    }
                }
            )
        try:
            self._client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException":
                return False  # a duplicate, a retry, another rule's stop or a mute: the stop goes the longer way
            raise ActionFailed(f"claim {key} and record the stop of {record.job}", exc) from exc
        return True

    def confirm_stop(self, job: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": _stop_key(job)}},
                UpdateExpression="SET #confirmed = :true",
                # Never create a record that holds nothing but the confirmation.
                ConditionExpression="attribute_exists(#pk)",
                ExpressionAttributeNames={"#pk": _PK, "#confirmed": "confirmed"},
                ExpressionAttributeValues={":true": {"BOOL": True}},
            )
        except ClientError as exc:
            raise ActionFailed(f"confirm stop of {job}", exc) from exc

    def fold(self, job: str, key: str) -> bool:
        # ADD to a set is idempotent (https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/dynamodb/aws.sdk.kotlin.services.dynamodb.model/-update-item-request/update-expression.html);
        # a job's keys (at most 20 Debugger and 20 Profiler rules, guards, its end) fit the 400 KB item
        # (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html).
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": _stop_key(job)}},
                UpdateExpression="ADD #folded :key",
                ConditionExpression="#confirmed = :true",
                ExpressionAttributeNames={"#folded": "folded", "#confirmed": "confirmed"},
                ExpressionAttributeValues={":key": {"SS": [key]}, ":true": {"BOOL": True}},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False  # no stop of the guard's, or one not (yet) confirmed: the transition is announced
            raise ActionFailed(f"fold {key} into the stop of {job}", exc) from exc
        return True

    def record_stop_spend(self, job: str, spend: StopSpend) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": _stop_key(job)}},
                UpdateExpression=(
                    "SET spend_avoided_usd = :avoided, spend_so_far_usd = :so_far, "
                    "price_source = :source, instance_types = :types"
                ),
                # Never create a record that holds nothing but the spend.
                ConditionExpression="attribute_exists(#pk)",
                ExpressionAttributeNames={"#pk": _PK},
                ExpressionAttributeValues={
                    ":avoided": _usd(spend.avoided_usd),
                    ":so_far": _usd(spend.so_far_usd),
                    ":source": {"S": spend.price_source} if spend.price_source else {"NULL": True},
                    ":types": {"L": [{"S": t} for t in spend.instance_types]},
                },
            )
        except ClientError as exc:
            raise ActionFailed(f"record the spend of the stop of {job}", exc) from exc

    def get_stop(self, job: str) -> StopRecord | None:
        try:
            response = self._client.get_item(
                TableName=self._table, Key={_PK: {"S": _stop_key(job)}}, ConsistentRead=True
            )
        except ClientError as exc:
            raise ActionFailed(f"read stop record of {job}", exc) from exc
        item = response.get("Item")
        return _record(item) if item else None

    def drop_stop(self, job: str) -> None:
        try:
            self._client.delete_item(TableName=self._table, Key={_PK: {"S": _stop_key(job)}})
        except ClientError as exc:
            raise ActionFailed(f"drop stop record of {job}", exc) from exc


def _claim_item(key: str, epoch: int, lease_seconds: int) -> dict[str, Any]:
    return {
        _PK: {"S": key},
        "state": {"S": "in_progress"},
        "lease_until": {"N": str(epoch + lease_seconds)},
        # An abandoned claim still expires, like a done one.
        _TTL: {"N": str(epoch + 86400)},
    }


def _stop_item(record: StopRecord, ttl_seconds: int) -> dict[str, Any]:
    return {
        _PK: {"S": _stop_key(record.job)},
        "job": {"S": record.job},
        "rule": {"S": record.rule},
        "reason": {"S": record.reason},
        "stopped_at": {"S": record.at.isoformat()},
        "event_id": {"S": record.event_id},
        "stopped_by": {"S": contract.stopped_by(record.rule)},
        _TTL: {"N": str(int(record.at.timestamp()) + ttl_seconds)},
    }


def _record(item: dict[str, Any]) -> StopRecord:
    def s(name: str) -> str:
        return str(item.get(name, {}).get("S", ""))

    at = parse_time(s("stopped_at"))
    if at is None:
        raise ActionFailed(f"read stop record {s(_PK)}", ValueError("stopped_at is not a timestamp"))
    return StopRecord(
        job=s("job"),
        rule=s("rule"),
        reason=s("reason"),
        at=at,
        event_id=s("event_id"),
        confirmed=item.get("confirmed", {}).get("BOOL") is True,
        folded=tuple(sorted(item.get("folded", {}).get("SS", ()))),
        spend=_spend(item),
    )


def _usd(amount: float | None) -> dict[str, Any]:
    """Dollars to the cent as a DynamoDB number, or NULL when unknown."""
    return {"NULL": True} if amount is None else {"N": f"{amount:.2f}"}


def _spend(item: dict[str, Any]) -> StopSpend | None:
    """The stop's spend, or None when the record has none (written before the stop took effect, or older)."""
    if "spend_avoided_usd" not in item:
        return None

    def number(name: str) -> float | None:
        value = item.get(name, {}).get("N")
        return None if value is None else float(value)

    return StopSpend(
        avoided_usd=number("spend_avoided_usd"),
        so_far_usd=number("spend_so_far_usd"),
        price_source=item.get("price_source", {}).get("S"),
        instance_types=tuple(t["S"] for t in item.get("instance_types", {}).get("L", []) if "S" in t),
    )
