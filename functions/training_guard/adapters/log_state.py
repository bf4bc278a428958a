"""DynamoDB: each training log stream's rule state (`log_rules.StreamState`) in the state table, versioned.

Items `logstate#<stream>` and `logjob#<job>`; the flow that reads and writes them: docs/design/log-path.md."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from training_guard import contract
from training_guard.adapters.clients import error_code
from training_guard.domain.accounts import scoped
from training_guard.domain.errors import ActionFailed
from training_guard.domain.log_rules import StreamState

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_PK = contract.TABLE_PARTITION_KEY
_TTL = contract.TABLE_TTL_ATTRIBUTE
STATE_PREFIX = "logstate#"
JOB_PREFIX = "logjob#"
ITEM_MAX_BYTES = 400 * 1024  # DynamoDB's item limit (docs/limits.md); a stream's bounded state is far under it


def state_key(stream: str, account: str | None = None) -> str:
    """A stream's item; a member account's stream is scoped by the account (its job names are its own)."""
    return f"{STATE_PREFIX}{scoped(account, stream) if account else stream}"


def job_key(job: str, account: str | None = None) -> str:
    return f"{JOB_PREFIX}{scoped(account, job) if account else job}"


def state_document(state: StreamState) -> str:
    """The state as stored: compact JSON (its size is what the item's size is made of)."""
    return json.dumps(state.to_json(), separators=(",", ":"), ensure_ascii=False, allow_nan=True)


class DynamoLogState:
    def __init__(self, client: DynamoDBClient, table: str, *, ttl_seconds: int) -> None:
        self._client = client
        self._table = table
        self._ttl_seconds = ttl_seconds  # like the ledger's: config.dedup_ttl_days, a job's whole life

    def get(self, stream: str, *, account: str | None = None) -> tuple[StreamState | None, int]:
        """The stream's state and its version (None and 0 when there is none yet)."""
        try:
            response = self._client.get_item(
                TableName=self._table, Key={_PK: {"S": state_key(stream, account)}}, ConsistentRead=True
            )
        except ClientError as exc:
            raise ActionFailed(f"read the log state of {stream}", exc) from exc
        item = response.get("Item")
        if not item:
            return None, 0
        try:
            state = StreamState.from_json(json.loads(item["state"]["S"]))
            version = int(item["version"]["N"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ActionFailed(f"read the log state of {stream}", exc) from exc
        return state, version

    def put(
        self, job: str, stream: str, state: StreamState, *, version: int, now: datetime, account: str | None = None
    ) -> bool:
        """Write the state as version `version + 1` if the stored one is still `version`; False if another was first."""
        if version == 0:
            self._list_stream(job, stream, now=now, account=account)  # first: a stream listed is never lost
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    _PK: {"S": state_key(stream, account)},
                    "job": {"S": job},
                    "stream": {"S": stream},
                    "state": {"S": state_document(state)},
                    "version": {"N": str(version + 1)},
                    _TTL: {"N": str(self._expiry(now))},
                },
                # No item is version 0 (an item whose TTL ran out is gone: folded again from nothing).
                ConditionExpression="attribute_not_exists(#pk) OR #version = :expected",
                ExpressionAttributeNames={"#pk": _PK, "#version": "version"},
                ExpressionAttributeValues={":expected": {"N": str(version)}},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise ActionFailed(f"save the log state of {stream}", exc) from exc
        return True

    def streams(self, job: str, *, account: str | None = None) -> list[str]:
        """The job's log streams that have a state (the stall check reads each)."""
        item = self._job_item(job, account)
        return sorted(item.get("streams", {}).get("SS", ()))

    def first_report(self, job: str, problem: str, *, now: datetime, account: str | None = None) -> bool:
        """Record that `problem` of the job was reported: True the first time only (one conditional write)."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": job_key(job, account)}},
                UpdateExpression="ADD #reported :problem SET #job = :job, #ttl = :ttl",
                ConditionExpression="attribute_not_exists(#reported) OR NOT contains(#reported, :name)",
                ExpressionAttributeNames={"#reported": "reported", "#job": "job", "#ttl": _TTL},
                ExpressionAttributeValues={
                    ":problem": {"SS": [problem]},
                    ":name": {"S": problem},
                    ":job": {"S": job},
                    ":ttl": {"N": str(self._expiry(now))},
                },
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise ActionFailed(f"record the log problem {problem} of {job}", exc) from exc
        return True

    def _list_stream(self, job: str, stream: str, *, now: datetime, account: str | None) -> None:
        # ADD to a set is idempotent; a job's streams are one per host (hundreds at most: well inside the item).
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": job_key(job, account)}},
                UpdateExpression="ADD #streams :stream SET #job = :job, #ttl = :ttl",
                ExpressionAttributeNames={"#streams": "streams", "#job": "job", "#ttl": _TTL},
                ExpressionAttributeValues={
                    ":stream": {"SS": [stream]},
                    ":job": {"S": job},
                    ":ttl": {"N": str(self._expiry(now))},
                },
            )
        except ClientError as exc:
            raise ActionFailed(f"list the log stream {stream} of {job}", exc) from exc

    def _job_item(self, job: str, account: str | None) -> dict[str, Any]:
        try:
            response = self._client.get_item(
                TableName=self._table, Key={_PK: {"S": job_key(job, account)}}, ConsistentRead=True
            )
        except ClientError as exc:
            raise ActionFailed(f"read the log streams of {job}", exc) from exc
        return dict(response.get("Item") or {})

    def _expiry(self, now: datetime) -> int:
        return int(now.timestamp()) + self._ttl_seconds
