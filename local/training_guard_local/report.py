"""`training-guard report`: what the deployed guard stopped, would have stopped and saved over a window.

Reads, with the user's own credentials and changing nothing: the stack's outputs (the state table's name,
`infra.outputs.STATE_TABLE_NAME`, found as `training-guard doctor` finds them), the audit records `stop#<job>`
of the state table (one paginated Scan) and the guard's metrics (one GetMetricData request for every
outcome, hourly sums), both through `training_guard.adapters.activity`, the reading path the weekly digest's
function uses too. The totals are `training_guard.domain.totals`, the same the weekly digest sends. Output: one screen
of text, `--json` (the document the HTML page is made from), and `--html FILE`
(a self-contained page with the charts, `report_html.py`).

Exit 0 with the report (a metric read that was refused is a warning: would-have-stopped is then unknown);
2 with one line for a usage error: a bad --since or --html, no region, no credentials, no stack, a table
the credentials may not read.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TextIO

from botocore.exceptions import BotoCoreError, ClientError

from infra import outputs
from training_guard.adapters import activity
from training_guard.domain import totals
from training_guard.domain.errors import ActionFailed
from training_guard.domain.totals import StopEntry
from training_guard.render.digest import count, spend_cell, spend_text
from training_guard_local import doctor
from training_guard_local.inputs import UsageError

EXIT_OK: Final = 0
EXIT_USAGE: Final = 2

DEFAULT_SINCE: Final = "30d"
# The audit records expire 400 days after the stop (responder.AUDIT_RETENTION_SECONDS, pinned by a test): a
# window reaching further back would count stops that are gone as never made.
MAX_DAYS: Final = 400
TOP: Final = 5  # rules and prefixes shown in the text (the JSON and the HTML page list them all)

# The reading path (the Scan of the stop records, the GetMetricData request, their limits) is shared with the weekly
# digest's function: training_guard.adapters.activity. MAX_DAYS * 24 hours * len(totals.METRICS) metrics stays
# under one request's METRIC_DATAPOINTS_MAX (a test pins that).
METRIC_QUERIES_MAX: Final = activity.METRIC_QUERIES_MAX
METRIC_DATAPOINTS_MAX: Final = activity.METRIC_DATAPOINTS_MAX
metric_queries = activity.metric_queries
PROGRESS_SECONDS: Final = 2.0  # a scan still running after this long reports its progress on stderr

# Why the report's two counts of stops can differ (handlers/receipts.py publishes the metric; responder.py writes
# the record of every stop, whichever function made it).
STOPS_NOTE: Final = (
    "stops counts the audit records: every job the guard stopped and SageMaker confirmed, whoever stopped it (an "
    "event, an alarm, the sweeper, Stop now in Slack). stops_counted_by_metrics is the Outcome_stopped metric, "
    "which only the job-events and alarm-events functions publish (not the sweeper, not Stop now), summed over "
    "whole hours: it can be lower. The records are the count to use."
)
_SINCE = re.compile(r"^(\d+)\s*([dh])$")
_NEGATIVE = re.compile(r"^-\s*(\d+\s*[dh]?)$")  # -5d: a duration is how far back, never negative


# --- the window -----------------------------------------------------------------------------------------------


def parse_since(text: str, now: datetime) -> datetime:
    """`30d`, `12h`, or a date (`2026-11-01`, midnight UTC) or time (`2026-11-01T08:00Z`) in the past."""
    value = text.strip().lower()
    negative = _NEGATIVE.match(value)
    if negative:
        back = negative.group(1) if negative.group(1)[-1] in "dh" else f"{negative.group(1)}d"
        raise UsageError(f"--since {text}: must be positive: how far back, e.g. {back}")
    found = _SINCE.match(value)
    if found:
        amount, unit = int(found.group(1)), found.group(2)
        if amount < 1:
            raise UsageError(f"--since {text}: must be at least 1{unit}")
        since = now - (timedelta(days=amount) if unit == "d" else timedelta(hours=amount))
    else:
        moment = _moment(text.strip())
        if moment is None:
            raise UsageError(
                f"--since {text}: not a duration nor a date; write 30d, 7d, 12h, 2026-11-01 or 2026-11-01T08:00Z"
            )
        since = moment
        if since >= now:
            raise UsageError(f"--since {text}: is not in the past (now is {_when(now)})")
    if now - since > timedelta(days=MAX_DAYS):
        raise UsageError(
            f"--since {text}: at most {MAX_DAYS} days back; the guard keeps its audit records {MAX_DAYS} days"
        )
    return since


def _moment(text: str) -> datetime | None:
    try:
        if "t" not in text.lower():
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def check_html_path(path: Path) -> None:
    """Before any work: the page can be written there (its folder exists, it is not a folder)."""
    if path.is_dir():
        raise UsageError(f"--html {path}: is a folder; name the HTML file to write")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"--html {path}: the folder {folder} does not exist")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"--html {path}: cannot be written (no permission)")
    if not path.exists() and not os.access(folder, os.W_OK):
        raise UsageError(f"--html {path}: the folder {folder} cannot be written to")


# --- reading the audit records and the metrics ------------------------------------------------------------------


class ScanProgress:
    """`scanning T: 120,000 items read, 37 stop records` on stderr, once a scan runs longer than `after`
    seconds, then at most every `every` seconds (in place on a terminal)."""

    def __init__(
        self,
        table: str,
        *,
        stream: TextIO | None = None,
        after: float = PROGRESS_SECONDS,
        every: float = PROGRESS_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.table = table
        self.stream = stream or sys.stderr
        self.after, self.every, self.clock = after, every, clock
        self.started = clock()
        self.shown: float | None = None
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def step(self, read: int, found: int) -> None:
        now = self.clock()
        if now - self.started < self.after or (self.shown is not None and now - self.shown < self.every):
            return
        self.shown = now
        line = f"training-guard report: scanning {self.table}: {read:,} items read, {found:,} stop records"
        self.stream.write(f"\r{line}\x1b[K" if self.tty else f"{line}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.shown is not None:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def scan_stops(
    dynamodb: Any,
    table: str,
    *,
    since: datetime,
    progress: ScanProgress | None = None,
    page_size: int | None = None,
) -> list[StopEntry]:
    """Every stop record of the table stopped at `since` or later (activity.scan_stops), with the progress shown
    and a refusal said in one line."""
    try:
        return activity.scan_stops(
            dynamodb, table, since=since, page_size=page_size, on_page=progress.step if progress else None
        )
    except ActionFailed as failed:
        exc = activity.client_error(failed)
        if exc is None:
            raise
        code = doctor.error_code(exc)
        if code == "ResourceNotFoundException":
            raise UsageError(f"the state table {table} does not exist: deploy the guard again (make deploy)") from None
        raise UsageError(
            f"Scan of the state table {table} was refused ({code}): the credentials need dynamodb:Scan on it"
        ) from None
    finally:
        if progress is not None:
            progress.close()


def read_metrics(cloudwatch: Any, *, since: datetime, until: datetime) -> dict[str, list[tuple[datetime, float]]]:
    """Hourly sums of every guard metric the report uses (activity.read_metrics)."""
    return activity.read_metrics(cloudwatch, since=since, until=until)


# --- the report -----------------------------------------------------------------------------------------------------


def build(
    aws: Any,
    stack_name: str,
    *,
    since: datetime,
    until: datetime,
    prefix_separator: str | None = None,
    progress: bool = True,
    page_size: int | None = None,
) -> dict[str, Any]:
    """The report's document: the totals, and where they come from."""
    try:
        stack = doctor.read_stack(aws, stack_name)
    except ClientError as exc:  # DescribeStacks itself refused
        raise UsageError(doctor.refused(exc)) from None
    if stack is None:
        raise UsageError(
            f"no stack {stack_name} in {aws.region}: deploy it (make deploy), or name it: "
            "training-guard report --stack NAME --region REGION"
        )
    table = stack.output(outputs.STATE_TABLE_NAME)
    if table is None:
        raise UsageError(
            f"the stack {stack_name} has no output {outputs.STATE_TABLE_NAME}: it was deployed by an older version "
            "of the guard; deploy this one (make deploy)"
        )
    warnings: list[str] = []
    stops = scan_stops(
        aws.client("dynamodb"),
        table,
        since=since,
        progress=ScanProgress(table) if progress else None,
        page_size=page_size,
    )
    metrics: dict[str, list[tuple[datetime, float]]] | None
    try:
        metrics = read_metrics(aws.client("cloudwatch"), since=since, until=until)
    except ActionFailed as failed:
        refused = activity.client_error(failed)
        if refused is None:
            raise
        metrics = None
        warnings.append(
            f"the guard's metrics could not be read (GetMetricData: {doctor.error_code(refused)}): would-have-stopped "
            "and the other outcomes are unknown; the credentials need cloudwatch:GetMetricData"
        )
    result = totals.compute(stops, metrics, since=since, until=until, prefix_separator=prefix_separator)
    document: dict[str, Any] = {
        "schema": totals.REPORT_SCHEMA,
        "stack": stack.name,
        "region": stack.region,
        "account": stack.account,
        "table": table,
        "prefix_separator": prefix_separator,
        "warnings": warnings,
    }
    for key, value in result.as_dict().items():
        document[key] = value
        if key == "stops":  # one count of stops, the records'; the metric's own, named for what it counts
            outcomes = result.outcomes if result.metrics is not None else None
            document["stops_counted_by_metrics"] = outcomes.get("stopped", 0) if outcomes is not None else None
            document["stops_note"] = STOPS_NOTE
    if document["outcomes"] is not None:
        document["outcomes"] = {k: v for k, v in document["outcomes"].items() if k != "stopped"}
    return document


def render_text(document: Mapping[str, Any]) -> str:
    """One screen: the totals, the top rules and prefixes, the stops per day as a sparkline."""
    since, until = _utc(document["since"]), _utc(document["until"])
    days = (until - since) / timedelta(days=1)
    lines = [
        f"Training Guard report: stack {document['stack']} in {document['region']} (account {document['account']})",
        f"{_when(since)} to {_when(until)} ({_span(days)})",
        "",
    ]
    unconfirmed = document["unconfirmed_stops"]
    stopped = count(document["stops"], "job")
    if unconfirmed:
        stopped += f"  ({count(unconfirmed, 'stop attempt')} never confirmed by SageMaker, left out)"
    would = document["would_stop"]
    outcomes = document["outcomes"]
    counted = document.get("stops_counted_by_metrics")
    lines += [
        f"  {'stopped':<20}{stopped}",
        *(
            [f"  {'':<20}(the Outcome_stopped metric counts {counted}: only stops on an event or an alarm)"]
            if counted is not None and counted != document["stops"]
            else []
        ),
        f"  {'would have stopped':<20}"
        + (f"{would}  (not stopped: dry run, or the job's tags)" if would is not None else "unknown (see below)"),
        f"  {'spend avoided':<20}{spend_text(document['spend_avoided'], 'up to ', ' at list price')}",
        f"  {'spend at the stop':<20}{spend_text(document['spend_so_far'], '', '')}",
    ]
    if outcomes:
        others = [f"{k.replace('_', ' ')} {v}" for k, v in outcomes.items() if k not in ("stopped", "would_stop") and v]
        lines.append(f"  {'other outcomes':<20}{' · '.join(others) if others else 'none'}")
    for title, groups in (
        ("top rules and guards", document["rules"]),
        ("most-stopped job prefixes", document["prefixes"]),
    ):
        lines += ["", f"{title:<44}{'stops':>6}   spend avoided"]
        if not groups:
            lines.append("  (no stops)")
        for group in groups[:TOP]:
            name = f"{group['name']} ({group['kind']})" if group.get("kind") else group["name"]
            lines.append(f"  {_clip(name, 42):<42}{group['stops']:>6}   {spend_cell(group['spend_avoided'])}")
        if len(groups) > TOP:
            lines.append(f"  ... {len(groups) - TOP} more (--json or --html lists them all)")
    per_day = [d["stops"] for d in document["days"]]
    lines += ["", f"stops per day  {_sparkline(per_day)}  (max {max(per_day, default=0)})"]
    lines += [f"warning: {w}" for w in document["warnings"]]
    return "\n".join(lines)


# --- the command ------------------------------------------------------------------------------------------------


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Register the sub-command on the CLI's sub-parsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "report",
        help="what the deployed guard stopped, would have stopped and saved (uses your AWS credentials)",
        description=(
            "Reads the stack's state table (the audit record of every stop) and the guard's metrics, and prints "
            "the stops, the would-have-stopped, the spend avoided (an estimate at list price; unknown figures are "
            "counted apart), the rules and guards that stopped most and the most-stopped job-name prefixes. "
            "--html FILE writes a self-contained page with the charts. Read-only."
        ),
    )
    doctor.add_stack_arguments(parser)
    parser.add_argument(
        "--since",
        default=DEFAULT_SINCE,
        metavar="WHEN",
        help=(
            f"the window's start: 30d, 7d, 12h, or a date 2026-11-01 (UTC); at most {MAX_DAYS}d "
            f"(default {DEFAULT_SINCE})"
        ),
    )
    parser.add_argument("--html", type=Path, metavar="FILE", help="also write the report as an HTML page with charts")
    parser.add_argument(
        "--prefix-separator",
        metavar="SEP",
        help="group jobs by the name up to the first SEP (default: the name without its trailing -<digits> groups)",
    )
    parser.set_defaults(run=run)
    return parser


def utcnow() -> datetime:
    """The report's clock (a seam for the tests)."""
    return datetime.now(UTC)


def run(args: argparse.Namespace) -> int:
    now = utcnow()
    since = parse_since(args.since, now)
    if args.prefix_separator is not None and not args.prefix_separator:
        raise UsageError("--prefix-separator: must not be empty")
    if args.html is not None:
        check_html_path(args.html)
    try:
        document = build(
            doctor.connect(os.environ, args.region),
            args.stack,
            since=since,
            until=now,
            prefix_separator=args.prefix_separator,
        )
    except BotoCoreError as exc:  # no network, an expired token met mid-way: still one line
        raise UsageError(f"cannot reach AWS: {exc}") from None
    if args.html is not None:
        from training_guard_local.report_html import page

        try:
            args.html.write_text(page(document), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--html {args.html}: cannot write: {exc.strerror or exc}") from None
        print(f"training-guard report: wrote {args.html}", file=sys.stderr)
    if args.json:
        print(json.dumps(document, indent=2, ensure_ascii=False), flush=True)
    else:
        print(render_text(document), flush=True)
    for warning in document["warnings"]:
        print(f"training-guard report: warning: {warning}", file=sys.stderr)
    return EXIT_OK


# --- small helpers ----------------------------------------------------------------------------------------------------


def _utc(value: Any) -> datetime:
    moment = datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else value
    assert isinstance(moment, datetime)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _span(days: float) -> str:
    if days < 2:
        return f"{round(days * 24)} hours"
    return f"{days:.0f} days" if math.isclose(days, round(days), abs_tol=0.01) else f"{days:.1f} days"


def _sparkline(values: Sequence[int]) -> str:
    marks = " ▁▂▃▄▅▆▇█"
    top = max(values, default=0)
    if top == 0:
        return "·" * min(len(values), 60) or "-"
    if len(values) > 60:  # one mark per day up to 60 days; beyond, each mark is the largest of its days
        step = math.ceil(len(values) / 60)
        values = [max(values[i : i + step]) for i in range(0, len(values), step)]
    return "".join(marks[math.ceil(v / top * (len(marks) - 1))] if v else "·" for v in values)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
