"""CloudWatch Logs' subscription delivery to Lambda, for the emulation: what moto's logs lack for the log-rules wing.

moto delivers a subscription to Lambda only by running the function in Docker, and its filter-pattern matcher reads
single terms (`?nan ?loss` matches every line, `%regex%` too): the delivery and the pattern are done here instead.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from training_guard import contract
from training_guard.config import json_words

if TYPE_CHECKING:
    pass

# The delivery CloudWatch Logs sends to a Lambda function: {"awslogs": {"data": base64(gzip(JSON))}}, the JSON holding
# these keys (https://docs.aws.amazon.com/lambda/latest/dg/services-cloudwatchlogs.html).
DATA_MESSAGE = "DATA_MESSAGE"
CONTROL_MESSAGE = "CONTROL_MESSAGE"  # sent when a subscription is created, to check the destination
DOCUMENT_KEYS = ("messageType", "owner", "logGroup", "logStream", "subscriptionFilters", "logEvents")
LOG_EVENTS_HANDLER = "training_guard.handlers.log_events.handler"
# A PutLogEvents call carries at most 10,000 events and 1,048,576 bytes, each event counting its message's UTF-8
# bytes plus 26 (https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutLogEvents.html). How
# CloudWatch Logs batches a subscription's deliveries is not documented: the emulation sends each call's matches as one.
PUT_MAX_EVENTS = 10_000
PUT_MAX_BYTES = 1_048_576
PUT_EVENT_OVERHEAD_BYTES = 26
# "<job>/algo-<n>-<epoch seconds>": a training job's stream, one per host (domain.md §11)
_STREAM = re.compile(r"^(?P<job>[A-Za-z0-9](-*[A-Za-z0-9]){0,62})/algo-(?P<host>\d+)-(?P<epoch>\d+)$")


class DeliveryError(ValueError):
    """Not a subscription delivery: the message names the field and what it should hold."""


class FilterPatternError(ValueError):
    """A filter pattern the emulation cannot apply (JSON and space-delimited patterns)."""


@dataclass(frozen=True)
class Subscription:
    """A subscription filter on a log group delivering to a Lambda function, as the template declares it."""

    filter_name: str
    filter_pattern: str
    handler: str  # the destination function's handler, "module.function" as in the template
    log_group: str = contract.TRAINING_LOG_GROUP


# --- the filter pattern ------------------------------------------------------------------------------------------
# The unstructured-log syntax (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/FilterAndPatternSyntax.html):
# "" matches every event; `%regex%` a regular expression; terms (bare or "quoted") must all appear, `-term` must not,
# and `?term ?term` matches when any one appears. Terms are case-sensitive.
_TERM = re.compile(r'\s*([?-]?)("(?:[^"\\]|\\.)*"|[^\s"]+)')


def matcher(pattern: str) -> Callable[[str], bool]:
    """A predicate saying whether a message matches the filter pattern as CloudWatch Logs applies it."""
    text = pattern.strip()
    if not text:
        return lambda _: True
    if len(text) > 1 and text.startswith("%") and text.endswith("%"):
        try:
            regex = re.compile(text[1:-1])
        except re.error as exc:
            raise FilterPatternError(f"filter pattern {pattern!r}: not a regular expression ({exc})") from None
        return lambda message: regex.search(message) is not None
    if text.startswith(("{", "[")):
        raise FilterPatternError(
            f"filter pattern {pattern!r}: JSON and space-delimited patterns are not emulated; use terms or %regex%"
        )
    anyof: list[str] = []
    allof: list[str] = []
    noneof: list[str] = []
    position = 0
    while position < len(text):
        found = _TERM.match(text, position)
        if found is None or not found.group(2):
            break
        sign, term = found.group(1), found.group(2)
        if term.startswith('"'):
            term = term[1:-1].replace('\\"', '"')
        {"?": anyof, "-": noneof, "": allof}[sign].append(term)
        position = found.end()
    if anyof and (allof or noneof):
        raise FilterPatternError(f"filter pattern {pattern!r}: ?term cannot be mixed with other terms")

    def matches(message: str) -> bool:
        if anyof:
            return any(term in message for term in anyof)
        return all(term in message for term in allof) and not any(term in message for term in noneof)

    return matches


# --- the delivery document ---------------------------------------------------------------------------------------
def document(
    events: Sequence[Mapping[str, Any]],
    *,
    log_stream: str,
    owner: str,
    filter_name: str = contract.LOG_SUBSCRIPTION_FILTER_NAME,
    log_group: str = contract.TRAINING_LOG_GROUP,
) -> dict[str, Any]:
    """The decoded delivery: `events` are {"id", "timestamp" (epoch ms), "message"}, in the stream's order."""
    return {
        "messageType": DATA_MESSAGE,
        "owner": owner,
        "logGroup": log_group,
        "logStream": log_stream,
        "subscriptionFilters": [filter_name],
        "logEvents": [
            {"id": str(e["id"]), "timestamp": int(e["timestamp"]), "message": str(e["message"])} for e in events
        ],
    }


def puts(events: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The events in order, cut into PutLogEvents calls within its limits (how an agent writes a long log)."""
    calls: list[list[Mapping[str, Any]]] = []
    size = 0
    for event in events:
        cost = len(str(event["message"]).encode("utf-8")) + PUT_EVENT_OVERHEAD_BYTES
        if not calls or len(calls[-1]) >= PUT_MAX_EVENTS or size + cost > PUT_MAX_BYTES:
            calls.append([])
            size = 0
        calls[-1].append(event)
        size += cost
    return calls


def deliveries(
    events: Sequence[Mapping[str, Any]],
    *,
    filter_pattern: str,
    log_stream: str,
    owner: str,
    filter_name: str = contract.LOG_SUBSCRIPTION_FILTER_NAME,
    log_group: str = contract.TRAINING_LOG_GROUP,
) -> list[dict[str, Any]]:
    """The Lambda events a subscription sends for `events` written to `log_stream`: each PutLogEvents call's matching
    events as one delivery; a call with none sends nothing."""
    matches = matcher(filter_pattern)
    out = []
    for call in puts(events):
        matched = [event for event in call if matches(str(event["message"]))]
        if matched:
            doc = document(matched, log_stream=log_stream, owner=owner, filter_name=filter_name, log_group=log_group)
            out.append(encode(doc))
    return out


def encode(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The Lambda event CloudWatch Logs sends: the document as JSON, gzip-compressed, in base64."""
    data = gzip.compress(json.dumps(doc, separators=(",", ":")).encode("utf-8"))
    return {"awslogs": {"data": base64.b64encode(data).decode("ascii")}}


def is_delivery(event: Any) -> bool:
    """A Lambda event of CloudWatch Logs, or its decoded document."""
    return isinstance(event, Mapping) and ("awslogs" in event or "logEvents" in event or "messageType" in event)


def decode(event: Any) -> dict[str, Any]:
    """The document of a delivery given as the Lambda event (`{"awslogs": {"data": ...}}`) or already decoded;
    DeliveryError naming the field for anything else."""
    if not isinstance(event, Mapping):
        raise DeliveryError(f"a delivery is a JSON object, not {json_words.kind(event)}")
    if "awslogs" in event:
        data = event["awslogs"].get("data") if isinstance(event["awslogs"], Mapping) else None
        if not isinstance(data, str):
            raise DeliveryError("awslogs.data: must be a string, base64 of the gzip-compressed JSON document")
        try:
            raw = gzip.decompress(base64.b64decode(data, validate=True))
        except (binascii.Error, ValueError):
            raise DeliveryError("awslogs.data: not base64") from None
        except (OSError, EOFError):
            raise DeliveryError("awslogs.data: not gzip-compressed (base64 of gzip of the JSON document)") from None
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise DeliveryError("awslogs.data: its gzip holds no JSON document") from None
    else:
        doc = event
    check(doc)
    return dict(doc)


def check(doc: Any) -> None:
    """A decoded delivery holds every key with its type; DeliveryError names the first that does not."""
    if not isinstance(doc, Mapping):
        raise DeliveryError(f"the delivery's document must be a JSON object, not {json_words.kind(doc)}")
    missing = [key for key in DOCUMENT_KEYS if key not in doc]
    if missing:
        raise DeliveryError(f"the delivery's document lacks {', '.join(missing)} (keys: {', '.join(DOCUMENT_KEYS)})")
    if doc["messageType"] not in (DATA_MESSAGE, CONTROL_MESSAGE):
        raise DeliveryError(
            f"messageType: {DATA_MESSAGE} or {CONTROL_MESSAGE}, not {json_words.shown(doc['messageType'])}"
        )
    for key in ("owner", "logGroup", "logStream"):
        if not isinstance(doc[key], str):
            raise DeliveryError(f"{key}: must be a string, not {json_words.kind(doc[key])}")
    if not isinstance(doc["subscriptionFilters"], list):
        raise DeliveryError("subscriptionFilters: must be a list of filter names")
    if not isinstance(doc["logEvents"], list):
        raise DeliveryError("logEvents: must be a list of {id, timestamp, message}")
    for i, event in enumerate(doc["logEvents"]):
        if not isinstance(event, Mapping):
            raise DeliveryError(f"logEvents[{i}]: must be an object {{id, timestamp, message}}")
        if not isinstance(event.get("id"), str):
            raise DeliveryError(f"logEvents[{i}].id: must be a string (CloudWatch Logs' event ID)")
        if isinstance(event.get("timestamp"), bool) or not isinstance(event.get("timestamp"), int):
            raise DeliveryError(f"logEvents[{i}].timestamp: must be a whole number of milliseconds since 1970")
        if not isinstance(event.get("message"), str):
            raise DeliveryError(f"logEvents[{i}].message: must be a string")


# --- streams ---------------------------------------------------------------------------------------------------
def stream_name(job: str, *, epoch: int, host: int = 1) -> str:
    """A training job's log stream: `<job>/algo-<host>-<epoch seconds>`."""
    return f"{job}/algo-{host}-{epoch}"


def job_of(stream: str) -> str | None:
    """The training job a stream belongs to, None for a stream that is not a training job's."""
    found = _STREAM.match(stream)
    return found.group("job") if found else None


# --- the template ------------------------------------------------------------------------------------------------
_PATTERN_KEY = re.compile(r"^filter_?pattern$", re.IGNORECASE)


def subscription_from(template: Mapping[str, Any]) -> Subscription | None:
    """The guard's subscription to the training log group as the synthesized template declares it: a
    AWS::Logs::SubscriptionFilter, or a custom resource (the group may not exist at deploy time) carrying a filter
    pattern and the destination function. None when the template has none."""
    resources: Mapping[str, Any] = template.get("Resources") or {}
    for resource in resources.values():
        kind, props = resource.get("Type", ""), resource.get("Properties") or {}
        if kind != "AWS::Logs::SubscriptionFilter" and not str(kind).startswith(
            ("Custom::", "AWS::CloudFormation::CustomResource")
        ):
            continue
        pattern = next((v for k, v in props.items() if _PATTERN_KEY.match(k) and isinstance(v, str)), None)
        if pattern is None:
            continue
        handler = _destination_handler(props, resources)
        if handler is None:
            continue
        name = next((v for k, v in props.items() if k.lower() == "filtername" and isinstance(v, str)), None)
        group = next((v for k, v in props.items() if k.lower() == "loggroupname" and isinstance(v, str)), None)
        return Subscription(
            filter_name=name or contract.LOG_SUBSCRIPTION_FILTER_NAME,
            filter_pattern=pattern,
            handler=handler,
            log_group=group or contract.TRAINING_LOG_GROUP,
        )
    return None


def _destination_handler(props: Mapping[str, Any], resources: Mapping[str, Any]) -> str | None:
    """The handler of the Lambda function the properties point at (a custom resource's own ServiceToken excepted)."""
    for key, value in props.items():
        if key == "ServiceToken":
            continue
        for logical_id in _referenced(value):
            target = resources.get(logical_id) or {}
            if target.get("Type") == "AWS::Lambda::Function":
                return str(target["Properties"]["Handler"])
    return None


def _referenced(value: Any) -> list[str]:
    """The logical IDs a template value refers to (Ref, Fn::GetAtt), anywhere inside it."""
    if isinstance(value, list):
        return [found for item in value for found in _referenced(item)]
    if not isinstance(value, Mapping):
        return []
    if "Ref" in value and isinstance(value["Ref"], str):
        return [value["Ref"]]
    if "Fn::GetAtt" in value and isinstance(value["Fn::GetAtt"], list) and value["Fn::GetAtt"]:
        return [str(value["Fn::GetAtt"][0])]
    return [found for item in value.values() for found in _referenced(item)]


# --- a log file --------------------------------------------------------------------------------------------------
def read_events(text: str, *, start_ms: int, step_ms: int = 1000) -> list[dict[str, Any]]:
    """A log's events: what `aws logs get-log-events` / `filter-log-events` print (their own IDs, times and, from the
    latter, `logStreamName`), or plain text, one event a line, timed from `start_ms` a `step_ms` apart, the line number
    as the ID."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            printed = json.loads(text)
        except ValueError:
            printed = None
        if isinstance(printed, Mapping) and isinstance(printed.get("events"), list):
            return [
                {
                    "id": str(e.get("eventId") or i),
                    "timestamp": int(e.get("timestamp") or start_ms + (i - 1) * step_ms),
                    "message": str(e.get("message", "")).rstrip("\n"),
                    "logStreamName": e.get("logStreamName") if isinstance(e.get("logStreamName"), str) else None,
                }
                for i, e in enumerate(printed["events"], start=1)
                if isinstance(e, Mapping)
            ]
    return [
        {"id": str(i), "timestamp": start_ms + (i - 1) * step_ms, "message": line}
        for i, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]


def read_log(path: Path) -> str:
    """A log file's text (one line naming the problem for a file that cannot be read)."""
    from training_guard_local.inputs import read_text

    return read_text(path, "log")
