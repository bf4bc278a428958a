"""DynamoDB: each job's mutes in one item of the state table, read with one GetItem (mutes.py says what they mean).

One map attribute per mute, `m:<effect>:<rule>`; each write pushes the item's TTL, and expiry is checked at read."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from training_guard import contract
from training_guard.adapters.clients import error_code
from training_guard.domain.accounts import scoped
from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import parse_time
from training_guard.domain.mutes import KEY_PREFIX, RECORD_TTL_SECONDS, Effect, Mute, Mutes, mutes_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_PK = contract.TABLE_PARTITION_KEY
_TTL = contract.TABLE_TTL_ATTRIBUTE
ATTRIBUTE_PREFIX = "m:"
# The latest end of the job's mutes, on its stop item, checked by the stop's one write; never lowered.
IN_FORCE_UNTIL = "in_force_until"
UNTIL_THE_JOB_ENDS = 253402300799  # 9999-12-31T23:59:59Z
MARKERS_FLAG = "meta#mutes-markers-v1"  # the state table's: every mute written before the markers was marked


def in_force_until(mute: Mute) -> int:
    return UNTIL_THE_JOB_ENDS if mute.until is None else math.ceil(mute.until.timestamp())


class DynamoMutes:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def read(self, job: str, account: str | None = None) -> Mutes:
        key = mutes_key(job, account)
        try:
            response = self._client.get_item(TableName=self._table, Key={_PK: {"S": key}}, ConsistentRead=True)
        except ClientError as exc:
            raise ActionFailed(f"read the mutes of {job}", exc) from exc
        return _mutes(response.get("Item") or {})

    def put(self, job: str, mute: Mute, *, account: str | None = None, now: datetime) -> None:
        entry: dict[str, Any] = {
            "effect": {"S": mute.effect.value},
            "rule": {"S": mute.rule},
            "by": {"S": mute.by},
            "at": {"S": mute.at.isoformat()},
            "until": {"S": mute.until.isoformat()} if mute.until is not None else {"NULL": True},
        }
        names = {"#mute": ATTRIBUTE_PREFIX + mute.key, "#ttl": _TTL, "#job": "job"}
        values: dict[str, Any] = {
            ":entry": {"M": entry},
            ":job": {"S": job},
            ":ttl": {"N": str(int(now.timestamp()) + RECORD_TTL_SECONDS)},
        }
        expression = "SET #mute = :entry, #job = :job, #ttl = :ttl"
        if account:
            names["#account"] = "account"
            values[":account"] = {"S": account}
            expression += ", #account = :account"
        # The marker first: a failure between the two writes leaves a marker without a mute (the slower stop).
        self._mark(
            scoped(account, job) if account else job, in_force_until(mute), now, f"record the mute {mute.key} of {job}"
        )
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": mutes_key(job, account)}},
                UpdateExpression=expression,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            raise ActionFailed(f"record the mute {mute.key} of {job}", exc) from exc

    def _mark(self, scope: str, until: int, now: datetime, doing: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": contract.STOP_KEY_PREFIX + scope}},
                UpdateExpression="SET #until = :until, #ttl = if_not_exists(#ttl, :ttl)",
                ConditionExpression="attribute_not_exists(#until) OR #until < :until",
                ExpressionAttributeNames={"#until": IN_FORCE_UNTIL, "#ttl": _TTL},
                ExpressionAttributeValues={
                    ":until": {"N": str(until)},
                    ":ttl": {"N": str(int(now.timestamp()) + RECORD_TTL_SECONDS)},
                },
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":  # a later end is there already
                raise ActionFailed(doing, exc) from exc

    def mark_once(self, now: datetime) -> int | None:
        """Mark the mutes in force that an earlier version wrote, once per table (README, Upgrading): how many."""
        try:
            done = self._client.get_item(TableName=self._table, Key={_PK: {"S": MARKERS_FLAG}}, ConsistentRead=True)
        except ClientError as exc:
            raise ActionFailed("read the mutes' markers flag", exc) from exc
        if "Item" in done:
            return None
        marked = 0
        for scope, mutes in self._scan():
            ends = [in_force_until(m) for m in mutes.entries if m.until is None or m.until > now]
            if ends:
                self._mark(scope, max(ends), now, f"mark the mutes of {scope}")
                marked += 1
        try:
            self._client.put_item(TableName=self._table, Item={_PK: {"S": MARKERS_FLAG}, "at": {"S": now.isoformat()}})
        except ClientError as exc:
            raise ActionFailed("write the mutes' markers flag", exc) from exc
        return marked

    def remove(self, job: str, key: str, *, account: str | None = None) -> bool:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={_PK: {"S": mutes_key(job, account)}},
                UpdateExpression="REMOVE #mute",
                ConditionExpression="attribute_exists(#mute)",
                ExpressionAttributeNames={"#mute": ATTRIBUTE_PREFIX + key},
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise ActionFailed(f"remove the mute {key} of {job}", exc) from exc
        return True

    def jobs(self) -> list[tuple[str, Mutes]]:
        """Every job that has mutes (`<account>/<job>` for a member's): one paginated Scan, for the operator's CLI."""
        return [(scope, mutes) for scope, mutes in self._scan() if mutes.entries]

    def _scan(self) -> Iterator[tuple[str, Mutes]]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "begins_with(#pk, :prefix)",
            "ExpressionAttributeNames": {"#pk": _PK},
            "ExpressionAttributeValues": {":prefix": {"S": KEY_PREFIX}},
        }
        while True:
            try:
                page = self._client.scan(**request)
            except ClientError as exc:
                raise ActionFailed("list the mutes", exc) from exc
            for item in page.get("Items", []):
                yield str(item[_PK]["S"]).removeprefix(KEY_PREFIX), _mutes(item)
            if "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _mutes(item: dict[str, Any]) -> Mutes:
    found = []
    for name, value in sorted(item.items()):
        if not name.startswith(ATTRIBUTE_PREFIX) or "M" not in value:
            continue
        entry = value["M"]
        at = parse_time(entry.get("at", {}).get("S"))
        until_text = entry.get("until", {}).get("S")
        until = parse_time(until_text) if until_text else None
        try:
            effect = Effect(entry.get("effect", {}).get("S", ""))
        except ValueError:
            continue  # written by a later version: not ours to interpret
        if at is None or (until_text and until is None):
            raise ActionFailed(f"read the mute {name} of {item.get(_PK, {}).get('S')}", ValueError("not a timestamp"))
        found.append(
            Mute(effect, str(entry.get("rule", {}).get("S", "")), str(entry.get("by", {}).get("S", "")), at, until)
        )
    return Mutes(tuple(found))
