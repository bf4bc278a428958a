"""Check an estimator's metric definitions against a training log, the way SageMaker applies them.

SageMaker runs each definition's regex over each line of the job's log and publishes the first
capture group as the metric's value. CloudWatch accepts only finite numbers, so `nan` and `inf`
captures are lost; a capture that does not parse as a number is lost too. This shows, per metric,
how many values a log yields, the first and last, a sparkline, and what looks wrong.

A user's regex can backtrack catastrophically (`(a+)+$` on a long line of `a`s takes longer than the
age of the universe), and Python's `re` cannot be interrupted: it holds the interpreter until it
returns. `check_bounded` therefore matches in a child process that records which definition and line
it is on; the parent ends it when one regex has spent more than `REGEX_SECONDS_PER_LINE` on one line
and names that regex and line (`SlowRegex`).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import multiprocessing
import re
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from training_guard.config import json_words
from training_guard.config.model import LOG_RULE_NAMES, GuardConfig, LogAction, LogRules
from training_guard.domain import log_lines
from training_guard.domain.log_lines import LineReader, RawPoint
from training_guard.domain.log_rules import Firing, LogEvent, StreamState, evaluate, stalled
from training_guard_local.inputs import UsageError, looks_like_yaml, parse_json, read_text

SPARKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 40
_GREEDY = re.compile(r"\((?!\?)[^)]*\.[*+](?!\?)[^)]*\)")  # a capture group holding an unbounded greedy .* / .+
# A sane regex takes microseconds on a log line; one that takes this long on a single line backtracks
# catastrophically and would stall on every such line.
REGEX_SECONDS_PER_LINE = 1.0
_POLL_SECONDS = 0.02


class DefinitionsError(ValueError):
    """The definitions are not a list of {"Name", "Regex"} with valid regexes."""


class SlowRegex(RuntimeError):
    """One definition's regex took more than the time allowed on one line."""


@dataclass(frozen=True)
class Definition:
    name: str
    regex: re.Pattern[str]


@dataclass
class MetricReport:
    name: str
    values: list[float] = field(default_factory=list)
    non_finite: list[str] = field(default_factory=list)  # nan / inf: CloudWatch refuses them
    non_numeric: list[str] = field(default_factory=list)
    greedy: bool = False
    suspicious_captures: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.values)

    def warnings(self) -> list[str]:
        out: list[str] = []
        if not self.values and not self.non_finite and not self.non_numeric:
            out.append("the regex never matches a line of this log")
        if self.non_finite:
            out.append(
                f"{len(self.non_finite)} capture(s) are not finite ({_sample(self.non_finite)}): "
                "CloudWatch accepts no nan or inf, so these datapoints are dropped"
            )
        if self.non_numeric:
            out.append(f"{len(self.non_numeric)} capture(s) are not numbers ({_sample(self.non_numeric)})")
        if self.suspicious_captures or (self.greedy and self.non_numeric):
            sample = _sample(self.suspicious_captures or self.non_numeric)
            out.append(f"the capture group matches too much ({sample}); prefer a lazy (.*?) or a number pattern")
        elif self.greedy and self.values:
            out.append("the capture group is greedy (.*); it works on this log but breaks if the line format changes")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "count": self.count,
            "first": self.values[0] if self.values else None,
            "last": self.values[-1] if self.values else None,
            "warnings": self.warnings(),
        }


def _sample(items: Sequence[str], n: int = 2) -> str:
    shown = ", ".join(repr(i[:40]) for i in list(dict.fromkeys(items))[:n])
    return shown + (", ..." if len(set(items)) > n else "")


def load_definitions(text_or_path: str) -> list[Definition]:
    """Inline JSON, or the path of a file holding an estimator's `metric_definitions` list, an AlgorithmSpecification
    or a whole DescribeTrainingJob answer (`aws sagemaker describe-training-job --training-job-name NAME`)."""
    inline = text_or_path.lstrip().startswith(("[", "{")) or (
        not Path(text_or_path).exists() and ("\n" in text_or_path or looks_like_yaml(text_or_path))
    )
    try:
        if inline:
            data = parse_json(text_or_path, "--definitions", "definitions")
        else:
            path = Path(text_or_path)
            data = parse_json(read_text(path, "definitions"), path, "definitions")
    except UsageError as exc:
        raise DefinitionsError(str(exc)) from None
    if isinstance(data, dict) and isinstance(data.get("AlgorithmSpecification"), dict):
        # what `aws sagemaker describe-training-job` prints: the definitions are in its AlgorithmSpecification
        data = data["AlgorithmSpecification"]
        if "MetricDefinitions" not in data:
            raise DefinitionsError(
                "the job's AlgorithmSpecification has no MetricDefinitions: the job publishes no metric from its log"
            )
    if isinstance(data, dict) and isinstance(data.get("MetricDefinitions"), list):
        data = data["MetricDefinitions"]  # an AlgorithmSpecification, as DescribeTrainingJob returns it
    if not isinstance(data, list) or not data:
        raise DefinitionsError(
            'definitions must be a non-empty list of {"Name": ..., "Regex": ...}, a job\'s AlgorithmSpecification '
            f"or what `aws sagemaker describe-training-job` prints; got {json_words.shown(data)}"
        )
    out: list[Definition] = []
    for i, item in enumerate(data):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("Name"), str)
            or not isinstance(item.get("Regex"), str)
        ):
            raise DefinitionsError(
                f'definitions[{i}] must be {{"Name": "...", "Regex": "..."}}, got {json_words.shown(item)}'
            )
        try:
            pattern = re.compile(item["Regex"])
        except re.error as exc:
            raise DefinitionsError(f"definitions[{i}] ({item['Name']}): invalid regex: {exc}") from None
        if pattern.groups < 1:
            raise DefinitionsError(f"definitions[{i}] ({item['Name']}): the regex has no capture group")
        out.append(Definition(item["Name"], pattern))
    return out


def check(definitions: Sequence[Definition], lines: Iterable[str], *, position: Any = None) -> list[MetricReport]:
    """Each definition over each line; `position` (two shared integers), if given, is kept at the
    (line, definition) being matched, for a watcher to tell a stuck regex."""
    reports = [MetricReport(d.name, greedy=bool(_GREEDY.search(d.regex.pattern))) for d in definitions]
    for number, line in enumerate(lines):
        for index, (definition, report) in enumerate(zip(definitions, reports, strict=True)):
            if position is not None:
                position[0], position[1] = number, index
            match = definition.regex.search(line)
            if match is None or match.group(1) is None:
                continue
            captured = match.group(1).strip()
            try:
                value = float(captured)
            except ValueError:
                report.non_numeric.append(captured)
                continue
            if not math.isfinite(value):
                report.non_finite.append(captured)
                continue
            report.values.append(value)
            if len(match.group(1)) > 32 or re.search(r"\s\S", match.group(1).strip()):
                report.suspicious_captures.append(match.group(1))
    return reports


def check_bounded(
    definitions: Sequence[Definition], lines: Sequence[str], *, seconds_per_line: float | None = None
) -> list[MetricReport]:
    """`check`, with each regex's time on each line bounded (default REGEX_SECONDS_PER_LINE; see the
    module's docstring)."""
    seconds_per_line = REGEX_SECONDS_PER_LINE if seconds_per_line is None else seconds_per_line
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    position = context.RawArray("q", 2)  # the child's (line, definition) being matched now
    position[0] = position[1] = -1
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(
        target=_check_in_child, args=(list(definitions), list(lines), position, sender), daemon=True
    )
    child.start()
    sender.close()
    try:
        seen, since = (-2, -2), time.monotonic()
        while not receiver.poll(_POLL_SECONDS):
            now = (position[0], position[1])
            if now != seen:
                seen, since = now, time.monotonic()
            elif now[0] >= 0 and time.monotonic() - since > seconds_per_line:
                line, index = now
                raise SlowRegex(
                    f"definitions[{index}] ({definitions[index].name}): the regex {definitions[index].regex.pattern!r} "
                    f"took more than {seconds_per_line:g} s on line {line + 1} of the log (catastrophic backtracking: "
                    "nested or adjacent quantifiers such as (a+)+ or (.*)*; make the pattern unambiguous)"
                )
            if not child.is_alive() and not receiver.poll(0):
                raise RuntimeError(f"the regex checker stopped unexpectedly (exit code {child.exitcode})")
        reports: list[MetricReport] = receiver.recv()
        return reports
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receiver.close()


def _check_in_child(definitions: list[Definition], lines: list[str], position: Any, sender: Any) -> None:
    reports = check(definitions, lines, position=position)
    position[0] = position[1] = -1  # done matching: sending a large result is not a stuck regex
    sender.send(reports)
    sender.close()


def sparkline(values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    if not values:
        return ""
    if len(values) > width:  # sample evenly, keeping the last value
        step = (len(values) - 1) / (width - 1)
        values = [values[round(i * step)] for i in range(width)]
    low, high = min(values), max(values)
    if high == low:
        return SPARKS[3] * len(values)
    return "".join(SPARKS[round((v - low) / (high - low) * (len(SPARKS) - 1))] for v in values)


def render(reports: Sequence[MetricReport]) -> str:
    lines = []
    for r in reports:
        if r.values:
            lines.append(
                f"{r.name}: {r.count} values, first {r.values[0]:g}, last {r.values[-1]:g}  {sparkline(r.values)}"
            )
        else:
            lines.append(f"{r.name}: no values")
        lines += [f"  warning: {w}" for w in r.warnings()]
    return "\n".join(lines)


# --- --rules: the log rules the Lambda runs, over a saved log --------------------------------------------------------

RULES_BATCH = 1000  # events folded per evaluate() call: the Lambda's batches are of this order; memory stays flat
TRACE_WIDTH = SPARK_WIDTH  # columns of a firing's sparkline
MAX_TRACED = 64  # metrics traced per stream (the domain remembers as many names)
_NOT_FINITE = "\u00d7"  # a multiplication sign where a stretch of the series has no finite value
# What `aws logs get-log-events` / `filter-log-events` print (--output json): an object whose first key is one of these.
_AWS_CLI_JSON = re.compile(
    r'^\ufeff?\s*\{\s*"(events|nextForwardToken|nextBackwardToken|searchedLogStreams|nextToken)"'
)
_JSON_SPACE = re.compile(r"\s*")
_JSON = json.JSONDecoder()
_JSON_CHUNK = 1 << 16
_HEAD_BYTES = 4096  # read to tell the log's kind


@dataclass
class _Bucket:
    first: int  # the first and last line it covers
    last: int
    total: float = 0.0
    finite: int = 0
    points: int = 0

    def merged(self, other: _Bucket) -> _Bucket:
        return _Bucket(
            self.first, other.last, self.total + other.total, self.finite + other.finite, self.points + other.points
        )

    @property
    def mean(self) -> float:
        return self.total / self.finite if self.finite else math.nan


class Trace:
    """One metric's whole series in at most 2 x TRACE_WIDTH buckets: pairs merge as the log grows (memory is flat)."""

    def __init__(self, name: str, reader: str, line: int, value: float) -> None:
        self.name, self.reader = name, reader
        self.closed: list[_Bucket] = []
        self.size = 1  # points per bucket
        self.count = 1
        self.first = self.last = (line, value)
        # The bucket being filled, as plain fields: add() is called for every point of every line.
        self.open_first = self.open_last = line
        finite = value - value == 0
        self.open_total, self.open_finite, self.open_points = (value, 1, 1) if finite else (0.0, 0, 1)

    def add(self, line: int, value: float) -> None:
        self.count += 1
        self.last = (line, value)
        if self.open_points == self.size:
            self._close()
            self.open_first = line
        self.open_last = line
        self.open_points += 1
        if value - value == 0:  # finite
            self.open_total += value
            self.open_finite += 1

    def _close(self) -> None:
        closed = self.closed
        closed.append(_Bucket(self.open_first, self.open_last, self.open_total, self.open_finite, self.open_points))
        self.open_total, self.open_finite, self.open_points = 0.0, 0, 0
        if len(closed) == 2 * TRACE_WIDTH:
            self.closed = [a.merged(b) for a, b in zip(closed[::2], closed[1::2], strict=True)]
            self.size *= 2

    @property
    def buckets(self) -> list[_Bucket]:
        opened = _Bucket(self.open_first, self.open_last, self.open_total, self.open_finite, self.open_points)
        return [*self.closed, opened]

    def columns(self) -> list[_Bucket]:
        """At most TRACE_WIDTH columns, each the buckets of an even share of the series."""
        buckets = self.buckets
        width = min(TRACE_WIDTH, len(buckets))
        out = []
        for i in range(width):
            group = buckets[i * len(buckets) // width : (i + 1) * len(buckets) // width]
            column = group[0]
            for bucket in group[1:]:
                column = column.merged(bucket)
            out.append(column)
        return out

    def picture(self, line: int | None) -> tuple[str, int | None, bool]:
        """The sparkline (_NOT_FINITE where a stretch has no finite value), the column holding `line`, and whether the
        scale is logarithmic (a positive series spanning ten times or more: a loss falls by orders of magnitude)."""
        columns = self.columns()
        means = [c.mean for c in columns]
        finite = [m for m in means if math.isfinite(m)]
        low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
        logarithmic = low > 0 and high >= 10 * low
        if logarithmic:
            means = [math.log(m) if math.isfinite(m) else m for m in means]
            low, high = math.log(low), math.log(high)
        chars = []
        for mean in means:
            if not math.isfinite(mean):
                chars.append(_NOT_FINITE)
            elif high == low:
                chars.append(SPARKS[3])
            else:
                chars.append(SPARKS[round((mean - low) / (high - low) * (len(SPARKS) - 1))])
        at = None
        if line is not None:
            at = next((i for i, c in enumerate(columns) if c.first <= line <= c.last), None)
            if at is None:  # between two points of the series: the column of the next point
                at = next((i for i, c in enumerate(columns) if c.first > line), len(columns) - 1)
        return "".join(chars), at, logarithmic


class _TracingReader(LineReader):
    """The Lambda's LineReader; it also hands each point to its stream's traces (the sparklines)."""

    def __init__(self, definitions: Sequence[tuple[str, str]]) -> None:
        super().__init__(definitions)
        self.traces: dict[str, Trace] = {}
        self.lines: dict[int, int] = {}  # id() of a message in the batch being folded -> its line

    def scan(self, message: str) -> tuple[list[RawPoint], str | None]:
        points, unparsed = super().scan(message)
        line = self.lines.get(id(message))
        if points and line is not None:
            traces = self.traces
            for metric, value, reader in points:
                trace = traces.get(metric)
                if trace is not None:
                    trace.add(line, value)
                elif len(traces) < MAX_TRACED:
                    traces[metric] = Trace(metric, reader, line, value)
        return points, unparsed


@dataclass(frozen=True)
class LogLine:
    """One line of the log: its position (a file line, or an event's number in a JSON file), time and stream."""

    line: int
    timestamp_ms: int | None
    message: str
    stream: str | None = None
    event_id: str | None = None


@dataclass
class RulesRun:
    """What --rules found in a log: the firings in line order, per stream the traces and the last state."""

    source: str
    kind: str  # "text" | "json" (what `aws logs get-log-events` / `filter-log-events` print)
    lines: int = 0
    firings: list[tuple[str | None, Firing]] = field(default_factory=list)  # (stream, firing)
    streams: dict[str | None, _Stream] = field(default_factory=dict)
    dry_run: bool = False

    @property
    def unit(self) -> str:
        return "line" if self.kind == "text" else "event"

    def action(self, firing: Firing) -> str:
        """What the guard would do: a stop under the configuration's dry_run is a dry run."""
        return "dry_run" if self.dry_run and firing.action == "stop" else firing.action

    def as_dicts(self) -> list[dict[str, Any]]:
        return [
            {
                "rule": f.rule,
                "metric": f.metric,
                "line": f.line,
                "value": _json_number(f.value),
                "action": self.action(f),
                "setting": f.setting,
                "reader": f.reader,
                "detail": f.detail,
                "stream": stream,
                "timestamp": f.timestamp_ms if self.kind != "text" else None,
            }
            for stream, f in self.firings
        ]


def _json_number(value: float | None) -> float | str | None:
    """A number JSON can carry; nan and the infinities as the words Python and JavaScript print."""
    if value is None or math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


class _Stream:
    """One log stream folded as the Lambda folds it: batches through evaluate(), the stall check between them."""

    def __init__(self, name: str | None, definitions: Sequence[tuple[str, str]], run: RulesRun, **rules: Any) -> None:
        self.name = name
        self.reader = _TracingReader(definitions)
        self.state: StreamState | None = None
        self.pending: list[LogEvent] = []
        self.run = run
        self.rules: LogRules = rules["rules"]
        self.tags: Mapping[str, str] = rules["tags"]
        self.timed = rules["timed"]
        self.slice_ms = self.rules.stalled.threshold * 1000 // 4  # a batch spans less: a silence is seen in time

    def add(self, line: LogLine, timestamp_ms: int) -> None:
        event = LogEvent(line.event_id or str(line.line), timestamp_ms, line.message, line.line)
        pending = self.pending
        if pending and (
            len(pending) >= RULES_BATCH or (self.timed and timestamp_ms - pending[0].timestamp_ms >= self.slice_ms)
        ):
            self.flush()
            if self.timed:
                self.stall_check(timestamp_ms, line.line)
        pending.append(event)

    def flush(self) -> None:
        if not self.pending:
            return
        reader = self.reader
        reader.lines = {id(event.message): event.line for event in self.pending if event.line is not None}
        self.state, firings = evaluate(self.state, self.pending, reader=reader, rules=self.rules, tags=self.tags)
        reader.lines = {}
        self.pending = []
        self.run.firings.extend((self.name, f) for f in firings)

    def stall_check(self, now_ms: int, line: int | None) -> None:
        """The scheduled check, as at `now_ms` (the next line's time; `line` is that line, None at the log's end)."""
        if self.state is None:
            return
        firing = stalled(self.state, now_ms=now_ms, rules=self.rules, tags=self.tags)
        if firing is not None:
            self.state.mark(firing)
            self.run.firings.append((self.name, replace(firing, line=line if line is not None else self.run.lines)))


def run_rules(
    lines: Iterable[LogLine],
    *,
    source: str,
    kind: str,
    config: GuardConfig,
    definitions: Sequence[tuple[str, str]] = (),
    tags: Mapping[str, str] | None = None,
) -> RulesRun:
    """Every line through the Lambda's evaluate(), stream by stream, in batches; memory does not grow with the log."""
    run = RulesRun(source, kind, dry_run=config.dry_run)
    options = {"rules": config.log_rules, "tags": dict(tags or {}), "timed": kind != "text"}
    base = 0  # a plain text log has no times: a millisecond a line keeps the order and the ids apart
    for line in lines:
        run.lines += 1
        stream = run.streams.get(line.stream)
        if stream is None:
            stream = run.streams[line.stream] = _Stream(line.stream, definitions, run, **options)
        stream.add(line, line.timestamp_ms if line.timestamp_ms is not None else base + line.line)
    for stream in run.streams.values():
        stream.flush()
        if stream.timed and stream.state is not None and stream.state.ts is not None:
            stream.stall_check(stream.state.ts, None)
    run.firings.sort(key=lambda sf: sf[1].line or 0)
    return run


class _Replayed(io.RawIOBase):
    """The bytes already read to tell the log's kind, then the rest of the file (a pipe cannot be rewound)."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self.head, self.rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.head[: len(buffer)] if self.head else self.rest.read(len(buffer))
        self.head = self.head[len(data) :] if self.head else b""
        buffer[: len(data)] = data
        return len(data)


def read_log(handle: BinaryIO, source: str) -> tuple[str, Iterator[LogLine]]:
    """The log's kind and its lines, read as they are needed: plain text, or what `aws logs` prints as JSON."""
    head = b""
    while len(head) < _HEAD_BYTES and (chunk := handle.read(_HEAD_BYTES - len(head))):
        head += chunk
    handle = io.BufferedReader(_Replayed(head, handle))
    if b"\x00" in head:
        raise UsageError(f"{source}: not a text file (binary data); the log must be UTF-8 text")
    if _AWS_CLI_JSON.match(head.decode("utf-8", errors="replace")):
        text = io.TextIOWrapper(handle, encoding="utf-8-sig", errors="strict")
        return "json", _JsonEvents(text, source).lines()
    return "text", _text_lines(handle, source)


def _text_lines(handle: BinaryIO, source: str) -> Iterator[LogLine]:
    for number, raw in enumerate(handle, 1):
        try:
            message = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(
                f"{source}: line {number} is not UTF-8 text (byte 0x{raw[exc.start]:02x}); save the log as UTF-8"
            ) from None
        if number == 1:
            message = message.removeprefix("\ufeff")
        yield LogLine(number, None, message.rstrip("\r\n"))


class _JsonEvents:
    """The `events` of an `aws logs get-log-events` / `filter-log-events` answer, one at a time from the file."""

    def __init__(self, text: TextIO, source: str) -> None:
        self.text, self.source = text, source
        self.buffer, self.at, self.ended = "", 0, False

    def _more(self) -> bool:
        try:
            chunk = self.text.read(_JSON_CHUNK)
        except UnicodeDecodeError as exc:
            raise UsageError(f"{self.source}: not UTF-8 text ({exc.reason}); save the log as UTF-8") from None
        if not chunk:
            self.ended = True
            return False
        self.buffer = self.buffer[self.at :] + chunk
        self.at = 0
        return True

    def _peek(self) -> str:
        while True:
            self.at = _JSON_SPACE.match(self.buffer, self.at).end()  # type: ignore[union-attr]
            if self.at < len(self.buffer) or not self._more():
                return self.buffer[self.at : self.at + 1]

    def _expect(self, char: str, where: str) -> None:
        found = self._peek()
        if found != char:
            seen = repr(found) if found else "the end of the file"
            raise UsageError(f"{self.source}: not the JSON `aws logs` prints: expected {char!r} {where}, found {seen}")
        self.at += 1

    def _value(self, where: str) -> Any:
        self._peek()
        while True:
            try:
                value, end = _JSON.raw_decode(self.buffer, self.at)
            except json.JSONDecodeError as exc:
                if self._more():
                    continue  # the value goes on in the next chunk
                raise UsageError(f"{self.source}: not JSON {where} ({exc.msg})") from None
            if end == len(self.buffer) and not self.ended and self._more():
                continue  # a number may go on in the next chunk
            self.at = end
            return value

    def lines(self) -> Iterator[LogLine]:
        self._expect("{", "at the start")
        seen_events = False
        while self._peek() != "}":
            key = self._value("at a key")
            if not isinstance(key, str):
                raise UsageError(f"{self.source}: not JSON: a key that is not a string")
            self._expect(":", f"after {key!r}")
            if key == "events":
                seen_events = True
                yield from self._events()
            else:
                self._value(f"in {key!r}")
            self._then(f"after {key!r}", "}")
        self.at += 1
        if self._peek():
            raise UsageError(f"{self.source}: more after the JSON object ends; give one `aws logs` answer per file")
        if not seen_events:
            raise UsageError(
                f'{self.source}: no "events" in this JSON; give what `aws logs get-log-events` or '
                "`aws logs filter-log-events` prints (--output json)"
            )

    def _events(self) -> Iterator[LogLine]:
        self._expect("[", 'after "events"')
        number = 0
        while self._peek() != "]":
            number += 1
            event = self._value(f"in events[{number - 1}]")
            yield self._line(event, number)
            self._then(f"after events[{number - 1}]", "]")
        self.at += 1

    def _then(self, where: str, closing: str) -> None:
        """Past the comma after a value, or at the closing bracket."""
        found = self._peek()
        if found == ",":
            self.at += 1
        elif found != closing:
            seen = repr(found) if found else "the end of the file"
            raise UsageError(
                f"{self.source}: not the JSON `aws logs` prints: expected ',' or {closing!r} {where}, found {seen}"
            )

    def _line(self, event: Any, number: int) -> LogLine:
        where = f"{self.source}: events[{number - 1}]"
        if not isinstance(event, dict):
            raise UsageError(
                f"{where}: an event is an object with timestamp and message, not {json_words.shown(event)}"
            )
        message, timestamp = event.get("message"), event.get("timestamp")
        if not isinstance(message, str):
            raise UsageError(f'{where}: "message" must be the line as text, got {json_words.shown(message)}')
        if not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp < 0:
            raise UsageError(f'{where}: "timestamp" must be milliseconds since 1970, got {json_words.shown(timestamp)}')
        stream = event.get("logStreamName")
        event_id = event.get("eventId")
        return LogLine(
            number,
            timestamp,
            message.rstrip("\r\n"),
            stream if isinstance(stream, str) else None,
            event_id if isinstance(event_id, str) and event_id else None,
        )


def render_rules(run: RulesRun, config_name: str) -> str:
    """Per firing: the rule, what it would do, the line, the value, why, and the series with that point marked."""
    unit = run.unit
    out = [f"{run.source}: {run.lines} {unit}s{_streams_words(run)}; the rules of {config_name}"]
    for stream in run.streams.values():
        out.extend(_stream_header(stream, run))
    if not run.firings:
        out.append("No rule fires on this log.")
    for stream_name, firing in run.firings:
        out.extend(_firing_block(run, stream_name, firing))
    out.extend(_not_fired(run))
    return "\n".join(out)


def _streams_words(run: RulesRun) -> str:
    named = [s for s in run.streams if s is not None]
    return f" in {len(named)} streams" if len(named) > 1 else ""


def _stream_header(stream: _Stream, run: RulesRun) -> list[str]:
    state, traces = stream.state, stream.reader.traces
    where = f"[{stream.name}] " if len(run.streams) > 1 and stream.name else ""
    if not traces:
        return [
            f"  {where}no metric in the log: the readers know Hugging Face, Keras, Lightning, XGBoost, LightGBM, "
            "SageMaker's algorithms and `loss=` / `loss:` lines; give the job's --definitions"
        ]
    loss = state.loss.name if state is not None and state.loss is not None else None
    val = state.val.name if state is not None and state.val is not None else None
    words = [f"loss {_named(loss, traces)}", f"validation loss {_named(val, traces)}"]
    lines = [f"  {where}{'; '.join(words)}"]
    if state is not None and state.unparsed:
        sample = state.unparsed_sample
        lines.append(f"  {where}warning: {state.unparsed} capture(s) are not numbers, the first: {sample}")
    return lines


def _named(metric: str | None, traces: Mapping[str, Trace]) -> str:
    if metric is None:
        return "none recognised"
    trace = traces.get(metric)
    return f"`{metric}` ({trace.reader}, {trace.count} points)" if trace else f"`{metric}`"


def _firing_block(run: RulesRun, stream_name: str | None, firing: Firing) -> list[str]:
    stream = run.streams[stream_name]
    where = f" [{stream_name}]" if len(run.streams) > 1 and stream_name else ""
    value = "" if firing.value is None else f"  {firing.metric} = {_shown_value(firing.value)}"
    lines = [
        "",
        f"{firing.rule:<18} {run.action(firing):<8} {run.unit} {firing.line}{where}{value}",
        f"  {firing.detail}",
        f"  decided by {firing.setting}; read by the {firing.reader} reader",
    ]
    trace = stream.reader.traces.get(firing.metric) if firing.metric else None
    if trace is not None and trace.first is not None and trace.last is not None:
        picture, at, logarithmic = trace.picture(firing.line)
        label = f"  {trace.name} "
        first, last = trace.first, trace.last
        lines.append(
            f"{label}{picture}  {_shown_value(first[1])} ({run.unit} {first[0]}) .. {_shown_value(last[1])} "
            f"({run.unit} {last[0]}){', log scale' if logarithmic else ''}"
        )
        if at is not None:
            lines.append(" " * (len(label) + at) + f"^ {run.unit} {firing.line}")
    return lines


def _shown_value(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else ("NaN" if math.isnan(value) else f"{value}")


def _not_fired(run: RulesRun) -> list[str]:
    fired = {f.rule for _, f in run.firings}
    rules = next(iter(run.streams.values())).rules if run.streams else None
    if rules is None:
        return []
    sections = {
        "NaN": rules.nan.action,
        "Divergence": rules.divergence.action,
        "LossNotDecreasing": rules.loss_not_decreasing.action,
        "Overfit": rules.overfit.action,
        "Overtraining": rules.overtraining.action,
        "StalledTrainingRule": rules.stalled.action,
    }
    has_val = any(s.state is not None and s.state.val is not None for s in run.streams.values())
    quiet = []
    for name in (*LOG_RULE_NAMES, *(p.name for p in rules.patterns)):
        if name in fired:
            continue
        why = ""
        if sections.get(name) == LogAction.IGNORE:
            why = " (ignore)"
        elif name == "Overfit" and not has_val:
            why = " (no validation loss)"
        elif name == "StalledTrainingRule" and run.kind == "text":
            why = " (a text log has no times: give the JSON `aws logs` prints)"
        quiet.append(name + why)
    return ["", "Not fired: " + ", ".join(quiet)] if quiet else []


def rule_definitions(text_or_path: str | None) -> tuple[tuple[str, str], ...]:
    """--definitions for --rules: the (Name, Regex) pairs the Lambda's LineReader takes, checked as it checks them."""
    if text_or_path is None:
        return ()
    try:
        pairs = tuple((d.name, d.regex.pattern) for d in load_definitions(text_or_path))
        LineReader(pairs)
    except (DefinitionsError, log_lines.DefinitionsError) as exc:
        raise UsageError(str(exc)) from None
    return pairs


@contextlib.contextmanager
def open_log(path: Path) -> Iterator[tuple[str, BinaryIO]]:
    """The log to stream ('-': stdin), as (its name in messages, a buffered binary file)."""
    if str(path) == "-":
        yield "stdin", sys.stdin.buffer
        return
    try:
        handle = path.open("rb")
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder, not a log file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read log: {exc.strerror or exc}") from None
    with handle:
        yield str(path), handle
