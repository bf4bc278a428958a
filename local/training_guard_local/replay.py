"""Replays of a user's recorded events: what `simulate` and `slack-preview` share.

A replay decides as the guard would have when each event arrived, in the account and region it
came from, so that the same file gives the same answer on any day and in any account:

- **time**: each event is played with the guard's clock at the event's own `time` (or at `--now`
  for every event); an event without a usable time is played at the previous event's time (the
  first one at the wall clock) and its line says so;
- **account and region**: each event is played in an emulated stack in its own `account` and
  `region` (the guard ignores events from other accounts, so playing them all in one would decide
  nothing); `--account` / `--region` replace them for every event; an event without them is played
  in the emulation's default account or region, and a note on stderr says so once;
- **every event gives one full line**: the same keys whatever happened, `error` saying why an event
  could not be used (or what in it the guard cannot read, such as a rule-status list that is not a
  list), `warnings` what the guard reads as unknown (statuses it does not know, times it cannot
  parse); SageMaker job events go to the job-events handler, CloudWatch alarm events to the
  alarm-events handler.

Long replays show a progress line on stderr (`Progress`); the handlers' own logs and metrics are
not printed (each line says what they would).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from training_guard import contract
from training_guard.config import json_words
from training_guard.domain import policy
from training_guard.domain.events import parse_time
from training_guard_local import logs_ext
from training_guard_local.inputs import UsageError, read_json

# The SageMaker API model's values (docs: domain §2); others are kept by the guard but may be typos.
JOB_STATUSES = ("InProgress", "Completed", "Failed", "Stopping", "Stopped", "Deleting")
SECONDARY_STATUSES = (
    "Starting", "Pending", "Downloading", "Training", "Uploading", "Interrupted", "Restarting", "Updating",
    "MaxRuntimeExceeded", "MaxWaitTimeExceeded", "Stopping", "Stopped", "Completed", "Failed",
    "LaunchingMLInstances", "PreparingTrainingStack", "DownloadingTrainingImage",
)  # fmt: skip
RULE_STATUSES = ("InProgress", "NoIssuesFound", "IssuesFound", "Error", "Stopping", "Stopped")
_RULE_LISTS = ("DebugRuleEvaluationStatuses", "ProfilerRuleEvaluationStatuses")
_DETAIL_TIMES = ("CreationTime", "TrainingStartTime", "TrainingEndTime", "LastModifiedTime")
_ALARM_DETAIL_TYPES = (contract.ALARM_STATE_CHANGE, contract.ALARM_CONTRIBUTOR_STATE_CHANGE)
ACCOUNT_PATTERN = re.compile(r"^\d{12}$")
REGION_PATTERN = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")

# Progress is shown for replays longer than this (shorter ones take seconds): rewritten in place on a
# terminal, otherwise one line at each tenth.
PROGRESS_MIN_EVENTS = 1000
PROGRESS_REDRAW_SECONDS = 0.5

LINE_KEYS = (
    # what each line held before replays had accounts and times, in the same order; then what they added
    "job", "stopped", "notifications", "error", "outcomes", "titles", "duplicates", "ignored", "described",
    "job_status", "folded", "warnings", "event", "account", "region", "time", "spend",
    # a subscription delivery's: how many log events it held, and what the log rules saw in them
    "log_events", "log_rules",
)  # fmt: skip


@dataclass(frozen=True)
class Recorded:
    """One recorded event and where it came from (`file.json` or `file.json[3]`)."""

    where: str
    event: Any


def load_events(paths: Sequence[Path]) -> list[Recorded]:
    """Every event of every file, in order; all files are read before any event is played."""
    events: list[Recorded] = []
    for path in paths:
        data = read_json(path, "events")
        if isinstance(data, list):
            if not data:
                raise UsageError(f"{path}: an empty list; a file holds one event or a JSON array of events")
            events.extend(Recorded(f"{path}[{i}]", event) for i, event in enumerate(data))
        elif isinstance(data, Mapping):
            events.append(Recorded(str(path), data))
        else:  # a file of one string or number holds no event (inside an array, one is reported and skipped)
            raise UsageError(
                f"{path}: holds {json_words.kind(data)}; a file holds one event (a JSON object) "
                "or a JSON array of events"
            )
    for recorded in events:
        check_wrapped(recorded)
        if logs_ext.is_delivery(recorded.event):
            try:
                logs_ext.decode(recorded.event)
            except logs_ext.DeliveryError as exc:
                raise UsageError(f"{recorded.where}: not a CloudWatch Logs subscription delivery: {exc}") from None
    return events


# A training job's name (SageMaker's CreateTrainingJob pattern; domain.md §11)
JOB_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def load_log(
    path: Path,
    *,
    job: str | None,
    host: int,
    filter_pattern: str,
    owner: str,
    end: datetime,
    note: Callable[[str], None] = lambda _: None,
) -> list[Recorded]:
    """The subscription deliveries CloudWatch Logs would send for a saved log: its lines (plain text, timed a second
    apart up to `end`; or as `aws logs get-log-events` / `filter-log-events` print them, with their times and IDs)
    written to the job's stream (`job`, else each event's `logStreamName`), those matching `filter_pattern` delivered
    one PutLogEvents call at a time."""
    if job is not None and not JOB_NAME_PATTERN.match(job):
        raise UsageError(f"--job {job!r}: not a training job name (letters, digits and hyphens, at most 63)")
    if host < 1:
        raise UsageError(f"--host {host}: a host is numbered from 1 (algo-1)")
    try:
        logs_ext.matcher(filter_pattern)
    except logs_ext.FilterPatternError as exc:
        raise UsageError(f"log_rules.filter_pattern: {exc}") from None
    text = logs_ext.read_log(path)
    lines = text.splitlines()
    end_ms = int(end.timestamp() * 1000)
    events = logs_ext.read_events(text, start_ms=end_ms - (len(lines) - 1) * 1000)
    if not events:
        raise UsageError(f"{path}: no log line in it")
    streams: dict[str, list[dict[str, Any]]] = {}
    named = logs_ext.stream_name(job, epoch=events[0]["timestamp"] // 1000, host=host) if job else None
    for event in events:
        stream = named or event.get("logStreamName")
        if not stream:
            raise UsageError(f"--log {path}: the log names no stream: give the job's name with --job NAME")
        streams.setdefault(stream, []).append(event)
    recorded: list[Recorded] = []
    for stream, stream_events in streams.items():
        deliveries = logs_ext.deliveries(stream_events, filter_pattern=filter_pattern, log_stream=stream, owner=owner)
        matched = sum(len(logs_ext.decode(d)["logEvents"]) for d in deliveries)
        note(
            f"{path}: {len(stream_events):,} log events to {stream}, {matched:,} matching the filter pattern "
            f"{filter_pattern!r}: {len(deliveries)} deliver{'y' if len(deliveries) == 1 else 'ies'}"
        )
        recorded += [Recorded(f"{path}[delivery {i}]", d) for i, d in enumerate(deliveries, start=1)]
    return recorded


# What a job's or an alarm's `detail` (or one rule status) holds at its top level, and the envelope it belongs in.
_DETAIL_OF = (
    (("TrainingJobName", "TrainingJobStatus", "RuleConfigurationName", "RuleEvaluationStatus"), "aws.sagemaker",
     "SageMaker Training Job State Change"),
    (("alarmName",), "aws.cloudwatch", "CloudWatch Alarm State Change"),
)  # fmt: skip


def check_wrapped(recorded: Recorded) -> None:
    """A bare `detail` (or a rule status) given for an event: one line saying how to wrap it."""
    event = recorded.event
    if not isinstance(event, Mapping) or "detail" in event or "detail-type" in event:
        return
    for keys, source, detail_type in _DETAIL_OF:
        if any(key in event for key in keys):
            raise UsageError(
                f"{recorded.where}: this looks like an event's detail: wrap it in an EventBridge event "
                f'({{"source": "{source}", "detail-type": "{detail_type}", "detail": ...}})'
            )


def consume(events: list[Recorded]) -> Iterator[Recorded]:
    """The events in order, each let go of once played: a 50,000-event file's parsed events weigh
    hundreds of megabytes, which the emulation's growing state would otherwise come on top of."""
    events.reverse()
    while events:
        yield events.pop()


def parse_now(text: str | None) -> datetime | None:
    """`--now`: an ISO-8601 time (a time without a zone is UTC)."""
    if text is None:
        return None
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--now {text!r}: not an ISO-8601 time (e.g. 2026-11-30T02:15:05Z)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def check_account(account: str | None) -> str | None:
    if account is not None and not ACCOUNT_PATTERN.match(account):
        raise UsageError(f"--account {account!r}: an AWS account ID is 12 digits")
    return account


def check_region(region: str | None) -> str | None:
    if region is not None and not REGION_PATTERN.match(region):
        raise UsageError(f"--region {region!r}: not an AWS region name (e.g. eu-west-1)")
    return region


def is_alarm_event(event: Any) -> bool:
    return (
        isinstance(event, Mapping)
        and event.get("source") == contract.CLOUDWATCH_EVENT_SOURCE
        and event.get("detail-type") in _ALARM_DETAIL_TYPES
    )


def lint(event: Any) -> tuple[str | None, list[str]]:
    """What in a job event the guard cannot read: an error (a part of the event is lost) and warnings
    (values it reads as unknown). The guard's parser is tolerant by design; a replay says so."""
    errors: list[str] = []
    warnings: list[str] = []
    if not isinstance(event, Mapping):
        return None, warnings
    if "time" in event and parse_time(event["time"]) is None:
        warnings.append(f"time {event['time']!r} is not a time")
    detail = event.get("detail")
    if not isinstance(detail, Mapping) or event.get("source") != contract.SAGEMAKER_EVENT_SOURCE:
        return None, warnings
    status = detail.get("TrainingJobStatus")
    if isinstance(status, str) and status and status not in JOB_STATUSES:
        warnings.append(f"detail.TrainingJobStatus {status!r} is not a known status ({', '.join(JOB_STATUSES)})")
    secondary = detail.get("SecondaryStatus")
    if secondary is not None and secondary not in SECONDARY_STATUSES:
        warnings.append(f"detail.SecondaryStatus {secondary!r} is not a known secondary status")
    for key in _DETAIL_TIMES:
        if detail.get(key) is not None and parse_time(detail[key]) is None:
            warnings.append(f"detail.{key} {detail[key]!r} is not a time: the guard reads it as unknown")
    _lint_rules(detail, errors, warnings)
    return ("; ".join(errors) or None), warnings


def _lint_rules(detail: Mapping[str, Any], errors: list[str], warnings: list[str]) -> None:
    for key in _RULE_LISTS:
        entries = detail.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            errors.append(
                f"detail.{key} must be a list of rule statuses, got {json_words.kind(entries)}: "
                "the guard reads no rule from it"
            )
            continue
        for i, entry in enumerate(entries):
            where = f"detail.{key}[{i}]"
            if not isinstance(entry, Mapping):
                errors.append(f"{where} must be an object, got {json_words.kind(entry)}: the guard skips it")
                continue
            name, rule_status = entry.get("RuleConfigurationName"), entry.get("RuleEvaluationStatus")
            if not isinstance(name, str) or not name or not isinstance(rule_status, str) or not rule_status:
                errors.append(f"{where} needs RuleConfigurationName and RuleEvaluationStatus: the guard skips it")
            elif rule_status not in RULE_STATUSES:
                warnings.append(
                    f"{where} ({name}): RuleEvaluationStatus {rule_status!r} is not a known status "
                    f"({', '.join(RULE_STATUSES)})"
                )
            if entry.get("LastModifiedTime") is not None and parse_time(entry["LastModifiedTime"]) is None:
                warnings.append(f"{where}.LastModifiedTime {json_words.shown(entry['LastModifiedTime'])} is not a time")


class Progress:
    """`12,000 of 50,000 events (820/s, about 46 s left)` on stderr, for replays above PROGRESS_MIN_EVENTS."""

    def __init__(self, total: int, *, stream: TextIO | None = None, label: str = "simulate") -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.label = label
        self.enabled = total > PROGRESS_MIN_EVENTS
        self.tty = self.enabled and _isatty(self.stream)
        self.started = time.monotonic()
        self._drawn = 0.0
        self._next_tenth = 1

    def step(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            if now - self._drawn >= PROGRESS_REDRAW_SECONDS or done == self.total:
                self._drawn = now
                self.stream.write("\r" + self._line(done, now) + "\x1b[K")
                self.stream.flush()
        elif done * 10 >= self._next_tenth * self.total:
            while done * 10 >= self._next_tenth * self.total:
                self._next_tenth += 1
            self.stream.write(self._line(done, now) + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def _line(self, done: int, now: float) -> str:
        elapsed = max(now - self.started, 1e-9)
        rate = done / elapsed
        left = (self.total - done) / rate if rate else 0.0
        return f"{self.label}: {done:,} of {self.total:,} events ({rate:,.0f}/s, about {left:,.0f} s left)"


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Replay:
    """Plays recorded events through the real handlers on an emulation (`Emulation`), one line each."""

    def __init__(
        self,
        aws: Any,
        *,
        now: datetime | None = None,
        account: str | None = None,
        region: str | None = None,
        note: Callable[[str], None] = lambda _: None,
        after_each: Callable[[datetime], object] | None = None,
    ) -> None:
        self.aws = aws
        self.now = now
        self.account = account
        self.region = region
        self.note = note
        self.after_each = after_each  # e.g. slack-preview's chat pump, at the event's time
        self._last_time: datetime | None = None
        self._noted: set[str] = set()
        # (account, region, stream) -> the IDs of the log events delivered, in order: a rule's line is a count of them
        self._delivered: dict[tuple[str, str, str], list[str]] = {}

    def lines(self, events: Iterable[Recorded], *, progress: Progress | None = None) -> Iterator[dict[str, Any]]:
        for done, recorded in enumerate(events, start=1):
            yield self.play(recorded)
            if progress:
                progress.step(done)

    def play(self, recorded: Recorded) -> dict[str, Any]:
        if logs_ext.is_delivery(recorded.event):
            return self._play_delivery(recorded)
        event = recorded.event
        warnings: list[str] = []
        account, region = self._where(recorded, warnings)
        at = self._when(event, warnings)
        if isinstance(event, Mapping) and (event.get("account") != account or event.get("region") != region):
            event = {**event, "account": account, "region": region}  # EventBridge always sets both
        lint_error, lint_warnings = lint(event)
        warnings += lint_warnings
        detail = event.get("detail") if isinstance(event, Mapping) else None
        line = _line(recorded, _job_name(event, detail), account, region, at, warnings)
        self.aws.use(account, region)
        try:
            receipt = self.aws.deliver_alarm(event, at=at) if is_alarm_event(event) else self.aws.deliver(event, at=at)
        except Exception as exc:  # noqa: BLE001 - one bad event must not end the replay; it is reported
            line["error"] = f"{type(exc).__name__}: {exc}"
            line["job_status"] = self.aws.job_status(line["job"])
            return line
        notes = self.aws.notifications()
        if self.after_each is not None:
            self.after_each(at)
        # not the guard's event at all: rejected (parked in the dead-letter queue) or foreign (ignored)
        unusable = receipt.get("rejected") or (receipt.get("ignored") if not receipt.get("job") else None)
        line.update(
            job=receipt.get("job") or line["job"],
            stopped=bool(receipt.get("stopped")),
            notifications=list(receipt.get("notifications") or []),
            error=unusable or lint_error,
            outcomes=list(receipt.get("outcomes") or []),
            titles=[n.get("title") for n in notes],
            duplicates=int(receipt.get("duplicates") or 0),
            folded=list(receipt.get("folded") or []),
            ignored=receipt.get("ignored"),
            described=bool(receipt.get("described")),
        )
        if line["stopped"] or line["notifications"]:
            line["spend"] = spend_of(receipt.get("spend"))
        line["job_status"] = self.aws.job_status(line["job"])
        return line

    def _play_delivery(self, recorded: Recorded) -> dict[str, Any]:
        """A subscription delivery to the log-rules function: in its owner's account (a delivery names no region: the
        emulation's, or --region), at its last log event's time (or --now)."""
        doc = logs_ext.decode(recorded.event)
        warnings: list[str] = []
        account = self.account or doc["owner"]
        if not ACCOUNT_PATTERN.match(account):
            warnings.append(f"owner {account!r} does not look like an AWS account")
        region = self.region or self.aws.default_region
        times = [int(e["timestamp"]) for e in doc["logEvents"]]
        at = self.now or (datetime.fromtimestamp(max(times) / 1000, UTC) if times else self._last_time)
        if at is None:
            at = datetime.now(UTC).replace(microsecond=0)
            warnings.append("no log event: replayed at the current time")
        self._last_time = at
        job = logs_ext.job_of(doc["logStream"])
        line = _line(recorded, job, account, region, at, warnings)
        line.update(
            log_events=len(doc["logEvents"]),
            log_rules=[],
        )
        if job is None:
            warnings.append(f"logStream {doc['logStream']!r} is not a training job's (<job>/algo-<n>-<epoch>)")
        self.aws.use(account, region)
        if job is not None and self.aws.job_status(job) is None and doc["messageType"] == logs_ext.DATA_MESSAGE:
            started = datetime.fromtimestamp(min(times) / 1000, UTC) if times else at
            self.aws.put_job(emulated_job(job, account, region, started))
            warnings.append(
                f"job {job} not seen before in this replay: emulated InProgress since its first log line, with no "
                "MetricDefinitions and no tags (give its state-change event first to set them)"
            )
        self._delivered.setdefault((account, region, doc["logStream"]), []).extend(
            str(e["id"]) for e in doc["logEvents"]
        )
        try:
            receipt = self.aws.deliver_logs(logs_ext.encode({**doc, "owner": account}), at=at)
        except Exception as exc:  # noqa: BLE001 - one bad delivery must not end the replay; it is reported
            line["error"] = f"{type(exc).__name__}: {exc}"
            line["job_status"] = self.aws.job_status(job) if job else None
            return line
        notes = self.aws.notifications()
        if self.after_each is not None:
            self.after_each(at)
        # the log-rules receipt: the rules that fired, and what the responder did about them (its own receipt)
        findings = receipt.get("findings") if isinstance(receipt.get("findings"), Mapping) else receipt
        line.update(
            job=receipt.get("job") or job,
            stopped=bool(findings.get("stopped")),
            notifications=list(findings.get("notifications") or []),
            outcomes=list(findings.get("outcomes") or []),
            titles=[n.get("title") for n in notes],
            duplicates=int(findings.get("duplicates") or 0),
            folded=list(findings.get("folded") or []),
            ignored=receipt.get("ignored") or findings.get("ignored"),
            error=receipt.get("rejected"),
            described=bool(findings.get("described")),
            log_rules=self._fired(receipt, notes, findings, (account, region, doc["logStream"])),
        )
        if line["stopped"] or line["notifications"]:
            line["spend"] = spend_of(findings.get("spend"))
        line["job_status"] = self.aws.job_status(line["job"]) if line["job"] else None
        return line

    def _fired(
        self,
        receipt: Mapping[str, Any],
        notes: list[dict[str, Any]],
        findings: Mapping[str, Any],
        where: tuple[str, str, str],
    ) -> list[dict[str, Any]]:
        """Each rule that fired on the delivery: the stream's line it fired at (as the function saved it in the
        stream's state), that line's event ID as this replay delivered it, and what its notification says (or
        `folded`: into the guard's stop of the job)."""
        fired = [f if isinstance(f, str) else str(f.get("rule")) for f in receipt.get("firings") or []]
        if not fired:
            return []
        from training_guard.adapters.log_state import DynamoLogState
        from training_guard_local.emulator import TABLE

        state, _ = DynamoLogState(self.aws.client("dynamodb"), TABLE, ttl_seconds=1).get(where[2])
        rules = [n for n in notes if n.get("kind") == policy.Kind.LOG_RULE.value and isinstance(n.get("rule"), Mapping)]
        said = {n["rule"]["name"]: n for n in rules}
        delivered = self._delivered.get(where, [])
        out = []
        for rule in fired:
            at_line = state.fired.get(rule) if state is not None else None
            note = said.get(rule) or {}
            folded = any(f"#{policy.LOG_RULE}#{rule}#" in str(key) for key in findings.get("folded") or [])
            out.append(
                {
                    "rule": rule,
                    "line": at_line,
                    "event_id": delivered[at_line - 1] if at_line and at_line <= len(delivered) else None,
                    "outcome": note.get("outcome") or ("folded" if folded else None),
                    "detail": (note.get("rule") or {}).get("details"),
                }
            )
        return out

    def _where(self, recorded: Recorded, warnings: list[str]) -> tuple[str, str]:
        event = recorded.event if isinstance(recorded.event, Mapping) else {}
        out: list[str] = []
        for field, override, default, pattern in (
            ("account", self.account, self.aws.default_account, ACCOUNT_PATTERN),
            ("region", self.region, self.aws.default_region, REGION_PATTERN),
        ):
            value = event.get(field)
            if override:
                out.append(override)
            elif isinstance(value, str) and value:
                if not pattern.match(value):
                    warnings.append(f"{field} {value!r} does not look like an AWS {field}")
                out.append(value)
            else:
                out.append(default)
                warnings.append(f"no {field}: replayed in {default}")
                if field not in self._noted:
                    self._noted.add(field)
                    self.note(
                        f"{recorded.where}: the event has no {field}; replayed in the emulation's {field} {default} "
                        f"(so is any other event without one; choose with --{field})"
                    )
        return out[0], out[1]

    def _when(self, event: Any, warnings: list[str]) -> datetime:
        if self.now is not None:
            return self.now
        at = parse_time(event.get("time")) if isinstance(event, Mapping) else None
        if at is None:
            fallback = self._last_time or datetime.now(UTC).replace(microsecond=0)
            source = "the previous event's time" if self._last_time else "the current time"
            warnings.append(f"no usable time: replayed at {source}")
            at = fallback
        self._last_time = at
        return at


def emulated_job(job: str, account: str, region: str, started: datetime) -> dict[str, Any]:
    """The state-change detail of a job known only from its log: InProgress since `started`, nothing declared."""
    ms = int(started.timestamp() * 1000)
    return {
        "TrainingJobName": job,
        "TrainingJobArn": f"arn:aws:sagemaker:{region}:{account}:training-job/{job}",
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": "Training",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "MetricDefinitions": []},
        "CreationTime": ms,
        "TrainingStartTime": ms,
        "LastModifiedTime": ms,
    }


def spend_of(document: Any) -> dict[str, Any]:
    """A line's `spend`: the job's spend as the guard priced it for its notification (pricing.Spend, through the
    responder's record), money in USD; a null says why in `why`."""
    spend = document if isinstance(document, Mapping) else {}
    out: dict[str, Any] = {key: spend.get(key) for key in ("so_far_usd", "avoided_usd", "price_source")}
    if None in out.values():
        whys = [str(note) for note in spend.get("notes") or []]
        if out["avoided_usd"] is None and spend.get("avoided_label") is None:
            whys.append("no stop in question: nothing avoided")
        out["why"] = "; ".join(dict.fromkeys(whys)) or (
            "the guard priced nothing for this event" if not spend else "no price, and no reason given"
        )
    return out


def _job_name(event: Any, detail: Any) -> str | None:
    if isinstance(detail, Mapping):
        name = detail.get("TrainingJobName")
        if isinstance(name, str):
            return name
        if is_alarm_event(event):
            contributor = detail.get("alarmContributor")
            attributes = contributor.get("attributes") if isinstance(contributor, Mapping) else None
            if isinstance(attributes, Mapping):
                job = attributes.get(contract.JOB_DIMENSION) or attributes.get(contract.HOST_DIMENSION)
                return str(job).split("/")[0] if job else None
    return None


def _line(  # noqa: PLR0917 - the line's facts, in its order
    recorded: Recorded, job: Any, account: str, region: str, at: datetime, warnings: list[str]
) -> dict[str, Any]:
    """A replayed event's or delivery's line before it is played: nothing done yet."""
    line: dict[str, Any] = dict.fromkeys(LINE_KEYS)
    line.update(
        event=recorded.where,
        job=job,
        account=account,
        region=region,
        time=at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        stopped=False,
        notifications=[],
        warnings=warnings,
        outcomes=[],
        titles=[],
        duplicates=0,
        folded=[],
        described=False,
    )
    return line
