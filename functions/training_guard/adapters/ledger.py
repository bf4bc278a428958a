"""DynamoDB: the transition ledger (exactly-once) and the stop audit records.

The items and their attributes: docs/design/exactly-once.md."""

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
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": _stop_key(record.job)}},
                # Only when there is none (the item may hold the mutes' marker): a retry keeps its earlier record whole.
                **_stop_update(record, ttl_seconds, condition="attribute_not_exists(#rule)"),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                old = exc.response.get("Item")
                previous = _record(old) if old else self.get_stop(record.job)
                same = previous is not None and previous.rule == record.rule
                # An attempt that wrote its record before its stop and may still be acting: not ours to redo yet.
                busy = same and previous is not None and (previous.lease_until or 0) > int(record.at.timestamp())
                return StopClaim(granted=same and not busy, previous=previous, busy=busy)
            raise ActionFailed(f"record stop of {record.job}", exc) from exc
        return StopClaim(granted=True, previous=None)

    def claim_first_stop(
        self, record: StopRecord, *, now: datetime, lease_seconds: int, ttl_seconds: int, check_mutes: bool
    ) -> bool:
        # One PutItem, written only over no record and no mute in force: a marker it replaces had ended.
        names = {"#rule": "rule"}
        values: dict[str, Any] = {}
        condition = "attribute_not_exists(#rule)"
        if check_mutes:
            condition += " AND (attribute_not_exists(#until) OR #until < :now)"
            names["#until"] = IN_FORCE_UNTIL
            values[":now"] = {"N": str(int(now.timestamp()))}
        item = _stop_item(record, ttl_seconds) | {"lease_until": {"N": str(int(now.timestamp()) + lease_seconds)}}
        request: dict[str, Any] = {
            "TableName": self._table,
            "Item": {_PK: {"S": _stop_key(record.job)}, **item},
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
        }
        if values:  # DynamoDB refuses a value no expression uses
            request["ExpressionAttributeValues"] = values
        try:
            self._client.put_item(**request)
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False  # a stop recorded (a duplicate, a retry, another rule) or a mute: the longer way
            raise ActionFailed(f"record the stop of {record.job}", exc) from exc
        return True

    def release_stop_lease(self, job: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": _stop_key(job)}},
                UpdateExpression="REMOVE lease_until",
                ConditionExpression="attribute_exists(#rule)",  # nothing to release once the record was dropped
                ExpressionAttributeNames={"#rule": "rule"},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise ActionFailed(f"release the stop lease of {job}", exc) from exc

    def confirm_stop(self, job: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": _stop_key(job)}},
                UpdateExpression="SET #confirmed = :true",
                # Never create a record that holds nothing but the confirmation.
                ConditionExpression="attribute_exists(#rule)",
                ExpressionAttributeNames={"#rule": "rule", "#confirmed": "confirmed"},
                ExpressionAttributeValues={":true": {"BOOL": True}},
            )
        except ClientError as exc:
            raise ActionFailed(f"confirm stop of {job}", exc) from exc

    def fold(self, job: str, key: str) -> bool:
        # ADD to a set is idempotent (https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/dynamodb/aws.sdk.kotlin.services.dynamodb.model/-update-item-request/update-expression.html);
        # a job's keys (20 Debugger and 20 Profiler rules, guards, its end) fit the 400 KB item (docs/limits.md).
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
                ConditionExpression="attribute_exists(#rule)",
                ExpressionAttributeNames={"#rule": "rule"},
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
        return _record(item) if item and "rule" in item else None  # the mutes' marker alone is no stop record

    def drop_stop(self, job: str) -> None:
        key = {_PK: {"S": _stop_key(job)}}
        try:
            try:
                # The whole item, unless it holds the job's mutes' marker: then only the record's attributes.
                self._client.delete_item(
                    TableName=self._table,
                    Key=key,
                    ConditionExpression="attribute_not_exists(#until)",
                    ExpressionAttributeNames={"#until": IN_FORCE_UNTIL},
                )
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise
                self._client.update_item(
                    TableName=self._table,
                    Key=key,
                    UpdateExpression="REMOVE " + ", ".join(f"#r{i}" for i in range(len(_RECORD_ATTRIBUTES))),
                    ExpressionAttributeNames={f"#r{i}": name for i, name in enumerate(_RECORD_ATTRIBUTES)},
                )
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


_RECORD_ATTRIBUTES = (
    "job",
    "rule",
    "reason",
    "stopped_at",
    "event_id",
    "stopped_by",
    "lease_until",
    "confirmed",
    "folded",
    "spend_avoided_usd",
    "spend_so_far_usd",
    "price_source",
    "instance_types",
)


def _stop_item(record: StopRecord, ttl_seconds: int) -> dict[str, Any]:
    return {
        "job": {"S": record.job},
        "rule": {"S": record.rule},
        "reason": {"S": record.reason},
        "stopped_at": {"S": record.at.isoformat()},
        "event_id": {"S": record.event_id},
        "stopped_by": {"S": contract.stopped_by(record.rule)},
        _TTL: {"N": str(int(record.at.timestamp()) + ttl_seconds)},
    }


def _stop_update(record: StopRecord, ttl_seconds: int, *, condition: str) -> dict[str, Any]:
    """The UpdateItem arguments that write a stop record and keep the rest of the item (its mutes' marker)."""
    sets = _stop_item(record, ttl_seconds)
    names = {f"#a{i}": name for i, name in enumerate(sets)} | {"#rule": "rule"}
    return {
        "UpdateExpression": "SET " + ", ".join(f"#a{i} = :a{i}" for i in range(len(sets))),
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {f":a{i}": value for i, value in enumerate(sets.values())},
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
        lease_until=int(item["lease_until"]["N"]) if "N" in item.get("lease_until", {}) else None,
    )


def _usd(amount: float | None) -> dict[str, Any]:
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
