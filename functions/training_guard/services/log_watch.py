"""The log-rules wing at run time: a log delivery folded into its stream's state, firings to the responder, then a save.

Also the scheduled stall check; the order and what a timeout at each step does: docs/design/log-path.md."""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import math
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from aws_lambda_powertools import Logger

from training_guard import contract
from training_guard.config.frozen import frozen
from training_guard.config.model import Action, LogRules
from training_guard.domain import policy
from training_guard.domain.errors import GuardError
from training_guard.domain.events import EventError, Finding
from training_guard.domain.job_names import JOB_NAME
from training_guard.domain.log_lines import DefinitionsError, LineReader
from training_guard.domain.log_rules import Firing, LogEvent, StreamState, evaluate, job_overrides, stalled
from training_guard.services.responder import EventStamp, Receipt, Responder

logger = Logger()

CONTROL_MESSAGE = "CONTROL_MESSAGE"  # CloudWatch Logs checking that the destination is reachable: no log events
SCHEDULED_EVENT = "Scheduled Event"  # EventBridge's detail-type of a scheduled rule's event: the stall check
CHUNK_EVENTS = 500  # events folded between two looks at the clock (milliseconds of work)
# Guard choices, not AWS figures: time kept for the save and for one stop path (docs/design/log-path.md).
SAVE_RESERVE_SECONDS = 5.0
ACT_RESERVE_SECONDS = 10.0
SAVE_RESERVE_SHARE = 1 / 6
ACT_RESERVE_SHARE = 1 / 3
SAVE_ATTEMPTS = 3  # conditional puts lost to a concurrent delivery of the same stream, then Lambda's retry
# A job's definitions and tags, per execution environment: definitions never change, tags may (the override tag).
JOBS_CACHED = 256
JOB_CACHE_SECONDS = 300.0
PROBLEM_CACHE_SECONDS = 60.0  # a job whose definitions could not be read is asked again soon
# The problems reported once per job (the job's item in the state table remembers them).
DEFINITIONS = "definitions"  # the job's MetricDefinitions unreadable (DescribeTrainingJob failed, a bad regex)
TAGS = "tags"  # the job's tags unreadable, or its log-rules tag
UNPARSED = "unparsed"  # a definition captured something that is not a number
LINE = "line"  # a line the rules could not read at all (skipped)


class LogStatePort(Protocol):
    """Each log stream's rule state, versioned (adapters.log_state.DynamoLogState; a fake in tests)."""

    def get(self, stream: str, *, account: str | None = None) -> tuple[StreamState | None, int]: ...

    def put(
        self, job: str, stream: str, state: StreamState, *, version: int, now: datetime, account: str | None = None
    ) -> bool:
        """False when the stored version is no longer `version` (another delivery saved first)."""
        ...

    def streams(self, job: str, *, account: str | None = None) -> list[str]: ...

    def first_report(self, job: str, problem: str, *, now: datetime, account: str | None = None) -> bool:
        """True the first time `problem` of the job is reported, False ever after."""
        ...


class DeliveryUnfinished(GuardError):
    """The invocation's time ran out mid-batch: what was folded is saved, the retry folds the rest."""


class StateConflict(GuardError):
    """Other deliveries of the same stream kept saving first: the retry folds the batch again."""


@frozen
class Delivery:
    """One subscription delivery, decoded: one log stream's events."""

    owner: str | None  # the account the log group is in
    group: str
    stream: str
    events: tuple[LogEvent, ...]
    control: bool = False

    @property
    def job(self) -> str | None:
        """The training job of a stream `<job>/algo-<n>-<epoch>` (None: not a training job's stream)."""
        job, slash, host = self.stream.partition("/")
        return job if slash and host and JOB_NAME.fullmatch(job) else None

    @property
    def event_id(self) -> str:
        """The same for every copy of the delivery: its stream and first event."""
        return f"{self.stream}#{self.events[0].id}" if self.events else self.stream


@frozen
class Invocation:
    """What the handler knows of this invocation: its account and region, and the time it has left."""

    account: str | None = None
    region: str | None = None
    time_left: Callable[[], float] = lambda: math.inf


@dataclass
class LogReceipt:
    """What one delivery or stall check caused."""

    job: str
    stream: str
    event_id: str
    events: int = 0
    evaluated: int = 0  # handed to the rules (those already folded change nothing)
    left: int = 0  # left to Lambda's retry when the time ran out
    firings: list[str] = field(default_factory=list)  # new in this delivery
    problems: list[str] = field(default_factory=list)
    conflicts: int = 0
    ignored: str | None = None
    findings: Receipt | None = None  # what the responder did, every firing's receipt added up

    def as_dict(self) -> dict[str, object]:
        return {
            "job": self.job,
            "stream": self.stream,
            "event_id": self.event_id,
            "events": self.events,
            "evaluated": self.evaluated,
            "left": self.left,
            "firings": self.firings,
            "problems": self.problems,
            "conflicts": self.conflicts,
            "ignored": self.ignored,
            "findings": self.findings.as_dict() if self.findings else None,
        }


@dataclass
class StallReport:
    checked: int = 0
    stalled: list[str] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)  # jobs left to the next check for want of time
    findings: Receipt | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "checked": self.checked,
            "stalled": self.stalled,
            "not_checked": self.not_checked,
            "findings": self.findings.as_dict() if self.findings else None,
        }


@frozen
class JobLog:
    """How a job's log is read: its reader (its own definitions, else the built-in ones) and its tags."""

    reader: LineReader
    tags: Mapping[str, str]
    problems: tuple[tuple[str, str], ...] = ()  # (kind, what went wrong)
    missing: bool = False


@frozen
class _Batch:
    """One delivery being folded, with what its steps share."""

    guard: Responder
    delivery: Delivery
    job: str
    job_log: JobLog
    account: str | None  # a member account's stream (None: the guard's own)
    now: datetime
    invocation: Invocation
    receipt: LogReceipt
    save_reserve: float
    act_reserve: float


def is_scheduled(event: Any) -> bool:
    return isinstance(event, Mapping) and event.get("detail-type") == SCHEDULED_EVENT


def decode(event: Any) -> Delivery:
    """`{"awslogs": {"data": base64(gzip(json))}}` to a Delivery; EventError names what is wrong."""
    data = event.get("awslogs", {}).get("data") if isinstance(event, Mapping) else None
    if not isinstance(data, str):
        raise EventError('not a CloudWatch Logs subscription delivery: no "awslogs.data" text')
    [delivery] = decode_data(data, where="awslogs.data", many=False)
    return delivery


def is_firehose(event: Any) -> bool:
    """Firehose's data-transformation event: a member account's deliveries through the hub's destination."""
    return isinstance(event, Mapping) and "records" in event and "deliveryStreamArn" in event


def firehose_records(event: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(recordId, data) of each record; EventError when the event itself is unusable (not a record's data)."""
    records = event.get("records")
    if not isinstance(records, list):
        raise EventError("records: missing or not a list (not Firehose's transformation event)")
    found = []
    for i, record in enumerate(records):
        record_id = record.get("recordId") if isinstance(record, Mapping) else None
        if not isinstance(record_id, str) or not record_id:
            raise EventError(f"records[{i}].recordId: missing or not text (Firehose needs it answered)")
        found.append((record_id, record.get("data")))
    return found


def decode_data(data: Any, *, where: str, many: bool = True) -> list[Delivery]:
    """base64 of gzip of CloudWatch Logs' JSON document(s) to Deliveries; EventError names what is wrong."""
    if not isinstance(data, str):
        raise EventError(f"{where}: missing or not base64 text")
    try:
        text = gzip.decompress(base64.b64decode(data, validate=True)).decode()
    except (binascii.Error, OSError, EOFError, zlib.error) as exc:
        raise EventError(f"{where} is not base64 of gzip: {exc}") from exc
    except ValueError as exc:
        raise EventError(f"{where} does not hold JSON: {exc}") from exc
    docs: list[Any] = []
    decoder, at = json.JSONDecoder(), 0
    try:
        while at < len(text.rstrip()):
            doc, at = decoder.raw_decode(text, at)
            docs.append(doc)
            while at < len(text) and text[at].isspace():
                at += 1
            if not many:
                break
    except ValueError as exc:
        raise EventError(f"{where} does not hold JSON: {exc}") from exc
    if not docs or (not many and text[at:].strip()):
        raise EventError(f"{where} does not hold JSON: one document expected")
    return [_delivery(doc, where) for doc in docs]


def _delivery(doc: Any, where: str) -> Delivery:
    if not isinstance(doc, Mapping):
        raise EventError(f"{where}: the document is not a JSON object")
    owner = doc.get("owner")
    if doc.get("messageType") == CONTROL_MESSAGE:
        return Delivery(owner if isinstance(owner, str) else None, "", "", (), control=True)
    group, stream, raw = doc.get("logGroup"), doc.get("logStream"), doc.get("logEvents")
    for name, value in (("logGroup", group), ("logStream", stream)):
        if not isinstance(value, str) or not value:
            raise EventError(f"{where}.{name}: missing or not text")
    if not isinstance(raw, list):
        raise EventError(f"{where}.logEvents: missing or not a list")
    return Delivery(
        owner if isinstance(owner, str) else None,
        str(group),
        str(stream),
        tuple(_log_event(i, e, where) for i, e in enumerate(raw)),
    )


def _log_event(index: int, raw: Any, data: str = "awslogs.data") -> LogEvent:
    where = f"{data}.logEvents[{index}]"
    if not isinstance(raw, Mapping):
        raise EventError(f"{where}: not an object")
    event_id, timestamp, message = raw.get("id"), raw.get("timestamp"), raw.get("message")
    if not isinstance(event_id, str) or not event_id:
        raise EventError(f"{where}.id: missing or not text")
    if not isinstance(timestamp, int) or isinstance(timestamp, bool):
        raise EventError(f"{where}.timestamp: not epoch milliseconds")
    if not isinstance(message, str):
        raise EventError(f"{where}.message: not text")
    return LogEvent(id=event_id, timestamp_ms=timestamp, message=message)


class LogWatch:
    def __init__(
        self,
        responder: Responder,
        states: LogStatePort,
        *,
        rules: LogRules | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.responder = responder
        self.states = states
        self.rules = rules if rules is not None else responder.config.log_rules
        self._monotonic = monotonic
        self._jobs: OrderedDict[tuple[str | None, str], tuple[float, JobLog]] = OrderedDict()

    def acting(self, responder: Responder) -> LogWatch:
        """This watch with an invocation's responder (its lease); the definitions it keeps are the container's."""
        watch = LogWatch(responder, self.states, rules=self.rules, monotonic=self._monotonic)
        watch._jobs = self._jobs
        return watch

    def deliver(
        self, delivery: Delivery, *, now: datetime, invocation: Invocation, guard: Responder | None = None
    ) -> LogReceipt:
        """Fold, take each new firing to `guard`, save; DeliveryUnfinished when the time ran out (the folded saved)."""
        budget = invocation.time_left()  # the invocation's time, as it starts: the deadline's reserves are shares of it
        guard = guard or self.responder
        account = guard.account_scope  # a member's: its states scoped by its account
        job = delivery.job
        receipt = LogReceipt(job=job or "", stream=delivery.stream, event_id=delivery.event_id)
        receipt.events = len(delivery.events)
        receipt.findings = Receipt(job=job or "", event_id=delivery.event_id)
        receipt.ignored = self._ignored(delivery, guard)
        if receipt.ignored or job is None or not delivery.events:
            return receipt
        job_log = self._job_log(guard, job, account)
        if job_log.missing:
            receipt.ignored = f"training job {job} does not exist"
            return receipt
        for kind, what in job_log.problems:
            self._report(receipt, job, kind, what, now=now, account=account)
        batch = _Batch(
            guard,
            delivery,
            job,
            job_log,
            account,
            now,
            invocation,
            receipt,
            save_reserve=min(SAVE_RESERVE_SECONDS, budget * SAVE_RESERVE_SHARE),
            act_reserve=min(ACT_RESERVE_SECONDS, budget * ACT_RESERVE_SHARE),
        )
        for _ in range(SAVE_ATTEMPTS):
            stored, version = self.states.get(delivery.stream, account=account)
            state, done = self._fold(batch, stored)
            if state is None or (stored is not None and _same(state, stored)):
                break  # nothing new to save (a duplicate delivery): no write
            if self.states.put(job, delivery.stream, state, version=version, now=now, account=account):
                break
            receipt.conflicts += 1  # another delivery of this stream saved first: fold on top of its state
        else:
            raise StateConflict(f"log state of {delivery.stream}: {SAVE_ATTEMPTS} saves lost to other deliveries")
        if state is not None and state.unparsed:
            sample = state.unparsed_sample or ""
            self._report(
                receipt,
                job,
                UNPARSED,
                f"{state.unparsed} capture(s) not a number, first: {sample}",
                now=now,
                account=account,
            )
        receipt.left = len(delivery.events) - done
        if receipt.left:
            raise DeliveryUnfinished(
                f"{delivery.stream}: {done} of {len(delivery.events)} events folded and saved before the time ran "
                f"out; the retry folds the other {receipt.left}"
            )
        return receipt

    def _ignored(self, delivery: Delivery, guard: Responder) -> str | None:
        """Why the delivery is not the log rules' to read (None: it is)."""
        if delivery.control:
            return "CloudWatch Logs' control message (checking the destination)"
        if delivery.group != contract.TRAINING_LOG_GROUP:
            return f"log group {delivery.group} is not {contract.TRAINING_LOG_GROUP}"
        if delivery.job is None:
            return f"log stream {delivery.stream} is not a training job's (<job>/algo-<n>-<epoch>)"
        if not self.rules.enabled:
            return "log_rules.enabled is false"
        return policy.selection_reason(delivery.job, guard.config)

    def _fold(self, b: _Batch, state: StreamState | None) -> tuple[StreamState | None, int]:
        """The state after the events folded in time, and how many; never saved ahead of its chunk's stops."""
        # In time first: a chunk older than one folded before it would be late, and order-dependent rules skip it.
        events = sorted(b.delivery.events, key=_in_time)
        b.receipt.evaluated = 0  # a refold after a lost save counts again
        for start in range(0, len(events), CHUNK_EVENTS):
            if b.invocation.time_left() < b.save_reserve:
                return state, start
            chunk = events[start : start + CHUNK_EVENTS]
            folded, firings = self._evaluate(b, state, chunk)
            for firing in firings:
                if b.invocation.time_left() < b.act_reserve + b.save_reserve:
                    return state, start  # this chunk is folded again by the retry (the ledger keeps stops once)
                self._act(
                    b.guard,
                    b.job,
                    firing,
                    event_id=b.delivery.event_id,
                    owner=b.delivery.owner,
                    now=b.now,
                    invocation=b.invocation,
                    r=b.receipt,
                )
            state = folded
            b.receipt.evaluated += len(chunk)
        return state, len(events)

    def _evaluate(
        self, b: _Batch, state: StreamState | None, chunk: Sequence[LogEvent]
    ) -> tuple[StreamState | None, list[Firing]]:
        try:
            return self._rules(state, chunk, b.job_log)
        except Exception:  # noqa: BLE001 - a line the rules cannot read must not keep the stream's others unread
            logger.debug(
                "a chunk the rules could not read: read again line by line", extra={"stream": b.delivery.stream}
            )
        firings: list[Firing] = []
        for event in chunk:  # again one line at a time, each unreadable line skipped (the same on every refold)
            try:
                state, new = self._rules(state, [event], b.job_log)
            except Exception as exc:  # noqa: BLE001
                what = f"event {event.id} skipped: {type(exc).__name__}: {exc}"
                self._report(b.receipt, b.job, LINE, what, now=b.now, account=b.account)
                continue
            firings += new
        return state, firings

    def _rules(
        self, state: StreamState | None, events: Sequence[LogEvent], job_log: JobLog
    ) -> tuple[StreamState, list[Firing]]:
        return evaluate(state, events, reader=job_log.reader, rules=self.rules, tags=job_log.tags)

    def _act(
        self,
        guard: Responder,
        job: str,
        firing: Firing,
        *,
        event_id: str,
        owner: str | None,
        now: datetime,
        invocation: Invocation,
        r: LogReceipt | StallReport,
    ) -> None:
        """One firing through the responder: policy, mutes, exemptions, dry run, exactly one stop (the ledger)."""
        if firing.action == Action.IGNORE.value:
            return
        stamp = EventStamp(
            event_id,
            owner,
            invocation.region,
            datetime.fromtimestamp(firing.timestamp_ms / 1000, UTC),
            source=contract.LOGS_SOURCE,
            detail_type=contract.LOG_DELIVERY,
        )
        receipt = guard.handle_finding(
            job,
            Finding(name=firing.rule, source=policy.LOG_RULE, status=policy.LOG_ISSUE, details=firing.said),
            action=Action.NOTIFY if firing.action == Action.NOTIFY.value else Action.STOP,
            setting=firing.setting,
            kind=policy.Kind.LOG_RULE,
            stamp=stamp,
            dry_run=firing.action == "dry_run",
            now=now,
        )
        r.findings = _added(r.findings, receipt)
        if isinstance(r, LogReceipt):
            r.firings.append(firing.rule)

    def _job_log(self, guard: Responder, job: str, account: str | None) -> JobLog:
        key = (account, job)
        cached = self._jobs.get(key)
        if cached is not None and cached[0] > self._monotonic():
            self._jobs.move_to_end(key)
            return cached[1]
        job_log = self._read_job(guard, job)
        seconds = PROBLEM_CACHE_SECONDS if job_log.problems or job_log.missing else JOB_CACHE_SECONDS
        self._jobs[key] = (self._monotonic() + seconds, job_log)
        self._jobs.move_to_end(key)
        while len(self._jobs) > JOBS_CACHED:
            self._jobs.popitem(last=False)
        return job_log

    def _read_job(self, guard: Responder, job: str) -> JobLog:
        problems: list[tuple[str, str]] = []
        try:
            described = guard.jobs.describe(job)
        except GuardError as exc:  # read with the built-in readers meanwhile: NaN and divergence still caught
            described = None
            problems.append((DEFINITIONS, f"the job's MetricDefinitions could not be read: {exc}"))
        else:
            if described is None:
                return JobLog(LineReader(()), {}, missing=True)
        tags: dict[str, str] = {}
        if described is not None and described.arn:
            try:
                tags = guard.jobs.tags(described.arn)
            except GuardError as exc:
                problems.append((TAGS, f"the job's tags could not be read (no per-job override applies): {exc}"))
        _, tag_problem = job_overrides(tags)
        if tag_problem is not None:
            problems.append((TAGS, tag_problem))
        definitions = described.metric_definitions if described is not None else ()
        try:
            reader = LineReader(definitions)
        except DefinitionsError as exc:
            problems.append((DEFINITIONS, f"MetricDefinitions unusable, the others read: {exc}"))
            reader = LineReader(tuple(d for d in definitions if _usable(d)))
        return JobLog(reader, tags, tuple(problems))

    def _report(self, r: LogReceipt, job: str, kind: str, what: str, *, now: datetime, account: str | None) -> None:
        """A problem of the job's, said once per job (the state table's flag), never failing the delivery."""
        if kind in {p.split(":", 1)[0] for p in r.problems} or not self.states.first_report(
            job, kind, now=now, account=account
        ):
            return
        logger.warning("log rules problem", extra={"training_job": job, "problem": kind, "detail": what})
        r.problems.append(f"{kind}: {what}")

    def check_stalls(
        self, *, now: datetime, invocation: Invocation, guard: Responder | None = None, account: str | None = None
    ) -> StallReport:
        """Each running job's streams asked `log_rules.stalled`; a stall goes to the responder like a firing."""
        report = StallReport()
        guard = guard or self.responder
        for job in guard.jobs.running():
            if not guard.config.selects(job):
                continue
            if invocation.time_left() < ACT_RESERVE_SECONDS:
                report.not_checked.append(job)
                continue
            report.checked += 1
            for stream in self.states.streams(job, account=account):
                self._stall(guard, job, stream, now=now, invocation=invocation, report=report, account=account)
        return report

    def _stall(
        self,
        guard: Responder,
        job: str,
        stream: str,
        *,
        now: datetime,
        invocation: Invocation,
        report: StallReport,
        account: str | None = None,
    ) -> None:
        """One stream asked; a stall to the responder, then marked in the state so that no later check asks again."""
        state, version = self.states.get(stream, account=account)
        now_ms = int(now.timestamp() * 1000)
        if state is None or stalled(state, now_ms=now_ms, rules=self.rules) is None:
            return
        firing = stalled(state, now_ms=now_ms, rules=self.rules, tags=self._job_log(guard, job, account).tags)
        if firing is None:
            return
        event_id = f"{stream}#{firing.event_id}"
        owner = account or invocation.account
        self._act(guard, job, firing, event_id=event_id, owner=owner, now=now, invocation=invocation, r=report)
        report.stalled.append(stream)
        state.mark(firing)
        self.states.put(job, stream, state, version=version, now=now, account=account)


def _in_time(event: LogEvent) -> tuple[int, str]:
    return event.timestamp_ms, event.id


def _usable(definition: tuple[str, str]) -> bool:
    try:
        LineReader((definition,))
    except DefinitionsError:
        return False
    return True


def _same(a: StreamState, b: StreamState) -> bool:
    return json.dumps(a.to_json(), sort_keys=True) == json.dumps(b.to_json(), sort_keys=True)


def _added(total: Receipt | None, one: Receipt) -> Receipt:
    """Receipts of several findings of one delivery as one (the handler counts outcomes once per delivery)."""
    if total is None:
        return one
    total.stopped = total.stopped or one.stopped
    total.notifications += one.notifications
    total.outcomes += one.outcomes
    total.duplicates += one.duplicates
    total.unrecorded += one.unrecorded
    total.folded += one.folded
    total.spend = one.spend or total.spend
    total.price_problems += one.price_problems
    total.card_problems += one.card_problems
    total.ignored = total.ignored or one.ignored
    return total
