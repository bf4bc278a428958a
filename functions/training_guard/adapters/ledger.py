"""DynamoDB: the transition ledger (exactly-once) and the stop audit records.

One table, partition key `pk`, TTL attribute `expires_at`:
- `t#<job>#<source>#<name>#<status>`: a transition. `state` is `in_progress` (with `lease_until`)
  while one invocation acts on it, then `done` with its `outcome`. A claim succeeds only when no
  item exists or the previous holder's lease ran out (it crashed without releasing).
- `stop#<job>`: the audit record of a stop by the guard: which rule, why, when, which event.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from training_guard import contract
from training_guard.adapters.clients import error_code
from training_guard.errors import ActionFailed
from training_guard.events import parse_time
from training_guard.ports import Claim, StopClaim, StopRecord

_PK = contract.TABLE_PARTITION_KEY
_TTL = contract.TABLE_TTL_ATTRIBUTE


def _stop_key(job: str) -> str:
    return f"stop#{job}"


class DynamoLedger:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def claim(self, key: str, *, now: datetime, lease_seconds: int) -> Claim:
        """Claim a transition for `lease_seconds`: granted, done before, or held by another attempt.

        The semantics of Powertools Idempotency's in-progress record (an expiry that follows the holder's
        remaining invocation time, a takeover once it has passed, "already in progress" otherwise), kept
        in our own ledger because one event holds several transitions (one per rule and per channel),
        each claimed, acted on and completed on its own, beside the per-job stop record.
        """
        epoch = int(now.timestamp())
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    _PK: {"S": key},
                    "state": {"S": "in_progress"},
                    "lease_until": {"N": str(epoch + lease_seconds)},
                    # An abandoned claim still expires, like a done one.
                    _TTL: {"N": str(epoch + 86400)},
                },
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
        item = {
            _PK: {"S": _stop_key(record.job)},
            "job": {"S": record.job},
            "rule": {"S": record.rule},
            "reason": {"S": record.reason},
            "stopped_at": {"S": record.at.isoformat()},
            "event_id": {"S": record.event_id},
            "stopped_by": {"S": contract.STOPPED_BY_VALUE},
            _TTL: {"N": str(int(record.at.timestamp()) + ttl_seconds)},
        }
        try:
            response = self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression="attribute_not_exists(#pk) OR #rule = :rule",
                ExpressionAttributeNames={"#pk": _PK, "#rule": "rule"},
                ExpressionAttributeValues={":rule": {"S": record.rule}},
                ReturnValues="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return StopClaim(granted=False, previous=self.get_stop(record.job))
            raise ActionFailed(f"record stop of {record.job}", exc) from exc
        old = response.get("Attributes")
        return StopClaim(granted=True, previous=_record(old) if old else None)

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


def _record(item: dict[str, Any]) -> StopRecord:
    def s(name: str) -> str:
        return str(item.get(name, {}).get("S", ""))

    at = parse_time(s("stopped_at"))
    if at is None:
        raise ActionFailed(f"read stop record {s(_PK)}", ValueError("stopped_at is not a timestamp"))
    return StopRecord(job=s("job"), rule=s("rule"), reason=s("reason"), at=at, event_id=s("event_id"))
