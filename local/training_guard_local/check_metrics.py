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

import math
import multiprocessing
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training_guard.config import json_words
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
