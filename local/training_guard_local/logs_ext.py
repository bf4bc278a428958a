"""CloudWatch Logs' subscription delivery, for the emulation: what moto's logs lack for the log-rules wing.

moto delivers to Lambda only through Docker, reads single terms of a filter pattern, and takes a cross-account
destination's ARN for a log group's: the delivery, the pattern and the destination chain (`Destinations`) are here.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gzip
import itertools
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from training_guard import contract
from training_guard.config import json_words
from training_guard_local import answers

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


# --- across accounts: a destination, its Firehose stream, the stream's processor -----------------------------------
# A member's filter sends to the hub's CloudWatch Logs destination, which puts each delivery into its target, a
# Firehose stream; the stream's Lambda processor gets the records as Firehose's transformation event
# (https://docs.aws.amazon.com/firehose/latest/dev/data-transformation.html). moto 5.2.5 takes a destination's ARN
# for a log group's (PutSubscriptionFilter looks for a group of the destination's name; PutLogEvents then fails the
# same way) and runs no processor: `Destinations` answers those two calls and builds the event; the rest is moto's.
_DESTINATION_ARN = re.compile(
    r"^arn:[a-z-]+:logs:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):destination:(?P<name>[^:]+)$"
)
_STREAM_ARN = re.compile(
    r"^arn:[a-z-]+:firehose:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):deliverystream/(?P<name>.+)$"
)


def is_destination(arn: str) -> bool:
    """A CloudWatch Logs destination's ARN (`arn:<partition>:logs:<region>:<account>:destination:<name>`)."""
    return _DESTINATION_ARN.match(arn) is not None


@dataclass(frozen=True)
class Chain:
    """Where a filter sending to a destination delivers: the destination's stream and that stream's processor."""

    destination_arn: str
    stream_arn: str
    function_arn: str
    handler: str  # the processor function's handler, "module.function"


@dataclass(frozen=True)
class FirehoseBatch:
    """One invocation of a stream's processor: Firehose's transformation event and the documents its records carry."""

    chain: Chain
    event: dict[str, Any]
    documents: list[dict[str, Any]]

    @property
    def record_ids(self) -> list[str]:
        return [str(record["recordId"]) for record in self.event["records"]]


def describe_destination(arn: str) -> dict[str, Any] | None:
    """The destination as moto holds it in its own account, the document DescribeDestinations lists (targetArn,
    accessPolicy); None if absent. Read from moto's model: a request would need its account in the environment,
    which the functions' threads share."""
    from moto.logs.models import logs_backends

    found = _DESTINATION_ARN.match(arn)
    if found is None:
        return None
    destination = logs_backends[found["account"]][found["region"]].destinations.get(arn)
    return None if destination is None else dict(destination.to_dict())


def chain_of(destination_arn: str) -> Chain:
    """A destination followed as CloudWatch Logs and Firehose follow it, from what moto holds: its targetArn
    (DescribeDestinations), that stream's enabled Lambda processor (DescribeDeliveryStream), the function's handler
    (GetFunctionConfiguration)."""
    from moto.awslambda.utils import get_backend
    from moto.core.exceptions import JsonRESTError
    from moto.firehose.models import firehose_backends

    destination = describe_destination(destination_arn)
    if destination is None:
        raise LookupError(f"{destination_arn}: no such destination")
    target = str(destination.get("targetArn", ""))
    stream = _STREAM_ARN.match(target)
    if stream is None:
        raise LookupError(f"destination {destination_arn}: its target {target!r} is not a Firehose stream")
    account, region = stream["account"], stream["region"]
    try:
        described = firehose_backends[account][region].describe_delivery_stream(stream["name"])
        function_arn = processor_of(described["DeliveryStreamDescription"])
        handler = get_backend(account, region).get_function(function_arn).handler
    except JsonRESTError as missing:
        raise LookupError(f"destination {destination_arn}: {missing.message}") from None
    return Chain(destination_arn, target, function_arn, str(handler))


def processor_of(stream: Mapping[str, Any]) -> str:
    """The Lambda ARN of a described stream's enabled processor; LookupError when it has none."""
    for destination in stream.get("Destinations") or []:
        processing = (destination.get("ExtendedS3DestinationDescription") or {}).get("ProcessingConfiguration") or {}
        if not processing.get("Enabled"):
            continue
        for processor in processing.get("Processors") or []:
            for parameter in processor.get("Parameters") or [] if processor.get("Type") == "Lambda" else []:
                if parameter.get("ParameterName") == "LambdaArn":
                    return str(parameter["ParameterValue"])
    raise LookupError(f"Firehose stream {stream.get('DeliveryStreamARN')}: no enabled Lambda processor")


def firehose_event(stream_arn: str, records: Sequence[tuple[str, str, int]]) -> dict[str, Any]:
    """Firehose's transformation event: `records` are (recordId, data, arrival in epoch ms), `data` the record as it
    was put, in base64 (from CloudWatch Logs: its gzip-compressed document)."""
    return {
        "invocationId": str(uuid.uuid4()),
        "deliveryStreamArn": stream_arn,
        "region": stream_arn.split(":")[3],
        "records": [
            {"recordId": record_id, "approximateArrivalTimestamp": arrived_ms, "data": data}
            for record_id, data, arrived_ms in records
        ],
    }


def admits(policy: Any, account: str) -> bool:
    """Whether a destination's access policy (its JSON text) lets `account` put a filter on it: an Allow of
    logs:PutSubscriptionFilter to the account, its root or `*` (conditions are not evaluated)."""
    try:
        document = json.loads(policy) if isinstance(policy, str) else {}
    except ValueError:
        return False
    statements = document.get("Statement") if isinstance(document, dict) else None
    for statement in statements if isinstance(statements, list) else [statements]:
        if not isinstance(statement, dict) or statement.get("Effect") != "Allow":
            continue
        if not {"logs:PutSubscriptionFilter", "logs:*", "*"} & set(_listed(statement.get("Action"))):
            continue
        principal = statement.get("Principal")
        names = _listed(principal.get("AWS") if isinstance(principal, dict) else principal)
        if {"*", account} & set(names) or any(name.endswith(f":iam::{account}:root") for name in names):
            return True
    return False


def _listed(value: Any) -> list[str]:
    """A policy element that is one string or a list of them, as a list."""
    if isinstance(value, str):
        return [value]
    return [str(item) for item in value] if isinstance(value, list) else []


@dataclass
class _Put:
    """One delivery CloudWatch Logs put into a destination's stream."""

    destination_arn: str
    document: dict[str, Any]
    arrived_ms: int


@dataclass
class Destinations:
    """Filters to a cross-account destination and their deliveries while this is entered, for every client that carries
    the answers' handlers (`session`'s are given them: boto3's default session when None; the answers themselves are
    the process's, answers.py): PutSubscriptionFilter to a destination and
    PutLogEvents into a group holding such a filter are answered in front of moto (answers.py; moto serves every other
    call, and these otherwise); `drain()` hands on what was put since, as Firehose hands records to its processor.

    A filter to a destination is put when the destination exists and its access policy admits the caller's account
    (`admits`; a condition such as aws:PrincipalOrgID is not evaluated: moto holds no organization), then with moto's
    own checks (the group exists, two filters at most). PutLogEvents stores the events with moto (the group's filters
    to destinations set aside for that call: moto would look each up as a log group), and each such filter's matching
    events become one record of its destination's stream, one CloudWatch Logs delivery (`document`, owner the group's
    account). Firehose's buffering is not emulated: a drain gives every record since the last, one batch a destination.
    The set-aside is not guarded against a filter put into the same group during that PutLogEvents (no test does).
    """

    session: Any = None
    _pending: list[_Put] = field(default_factory=list, init=False, repr=False)
    _record_ids: Iterator[int] = field(default_factory=lambda: itertools.count(1), init=False, repr=False)
    _answering: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, init=False, repr=False)

    def __enter__(self) -> Destinations:
        answers.install(self.session)
        self._answering.enter_context(
            answers.answering(
                {("logs", "PutSubscriptionFilter"): self._put_filter, ("logs", "PutLogEvents"): self._put_events}
            )
        )
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._answering.close()

    def drain(self) -> list[FirehoseBatch]:
        """Each destination's records put since the last drain, as one invocation of its stream's processor."""
        pending, self._pending = self._pending, []
        batches = []
        for arn in dict.fromkeys(put.destination_arn for put in pending):
            chain = chain_of(arn)
            puts = [put for put in pending if put.destination_arn == arn]
            # Firehose's record IDs are opaque text; these count up, 56 digits like CloudWatch Logs' event IDs
            records = [(f"{next(self._record_ids):056d}", _data(put.document), put.arrived_ms) for put in puts]
            batches.append(FirehoseBatch(chain, firehose_event(chain.stream_arn, records), [p.document for p in puts]))
        return batches

    def _put_filter(self, call: answers.Call, model: Any) -> answers.Reply | None:
        from moto.core.exceptions import JsonRESTError
        from moto.logs.models import logs_backends

        arn = str(call.params.get("destinationArn", ""))
        if not is_destination(arn):
            return None
        destination = describe_destination(arn)
        if destination is None:
            return answers.refusal(
                model, "ResourceNotFoundException", f"The specified destination does not exist: {arn}"
            )
        if call.account != arn.split(":")[4] and not admits(destination.get("accessPolicy"), call.account):
            message = f"{call.account} is not authorized to perform: logs:PutSubscriptionFilter on resource: {arn}"
            return answers.refusal(model, "AccessDeniedException", message)
        group = logs_backends[call.account][call.region].groups.get(str(call.params.get("logGroupName")))
        if group is None:
            return answers.refusal(model, "ResourceNotFoundException", "The specified log group does not exist.")
        try:
            group.put_subscription_filter(
                str(call.params.get("filterName")),
                str(call.params.get("filterPattern", "")),
                arn,
                str(call.params.get("roleArn", "")),
            )
        except JsonRESTError as refused:
            return answers.refusal(model, refused.error_type, refused.message)
        return answers.reply(model)

    def _put_events(self, call: answers.Call, model: Any) -> answers.Reply | None:
        from moto.core.exceptions import JsonRESTError
        from moto.logs.models import logs_backends

        backend = logs_backends[call.account][call.region]
        group = backend.groups.get(str(call.params.get("logGroupName")))
        if group is None:
            return None
        held = {n: f for n, f in group.subscription_filters.items() if is_destination(f.destination_arn)}
        if not held:
            return None
        name = str(call.params.get("logStreamName"))
        before = len(group.streams[name].events) if name in group.streams else 0
        # moto's data, not its code: the group's own filter dict, restored after the call
        kept = group.subscription_filters
        group.subscription_filters = {n: f for n, f in kept.items() if n not in held}
        try:
            events = [dict(e) for e in call.params.get("logEvents") or []]
            token, rejected = backend.put_log_events(group.name, name, events)
        except JsonRESTError as refused:
            return answers.refusal(model, refused.error_type, refused.message)
        finally:
            group.subscription_filters = kept
        # AWS's event IDs are 56 digits (moto counts from 0), as the emulation's put_log_events reads them back
        stored = [
            {"id": str(e.event_id).zfill(56), "timestamp": e.timestamp, "message": e.message}
            for e in group.streams[name].events[before:]
        ]
        arrived_ms = int(time.time() * 1000)
        for found in held.values():
            matches = matcher(found.filter_pattern)
            matched = [event for event in stored if matches(str(event["message"]))]
            if matched:
                doc = document(
                    matched, log_stream=name, owner=call.account, filter_name=found.name, log_group=group.name
                )
                self._pending.append(_Put(found.destination_arn, doc, arrived_ms))
        return answers.reply(
            model, {"nextSequenceToken": token} | ({"rejectedLogEventsInfo": rejected} if rejected else {})
        )


def _data(doc: Mapping[str, Any]) -> str:
    return str(encode(doc)["awslogs"]["data"])
