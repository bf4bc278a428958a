"""`make bench`'s log-rules section: the evaluator against a bare loop, its memory against the log's length, and the
guard's part of "log line written -> StopTrainingJob issued", on the real logs of tests/data/training_logs.

`python -m bench.log_rules` runs this section alone; `--write` splices it and its headline row into the report.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "functions"), str(ROOT / "local")]

from training_guard.config.model import GuardConfig  # noqa: E402 - after the path set-up above
from training_guard.domain import log_lines  # noqa: E402
from training_guard.domain.log_lines import LineReader  # noqa: E402
from training_guard.domain.log_rules import LogEvent, StreamState, evaluate  # noqa: E402
from training_guard.services.log_watch import CHUNK_EVENTS  # noqa: E402

LOGS = ROOT / "tests" / "data" / "training_logs"
REPORT = ROOT / "docs" / "benchmarks.md"
TARGET_RATIO = 2.0
TARGET_SECONDS = 10.0
THROUGHPUT_LINES = 100_000
THROUGHPUT_RUNS = 5  # interleaved with the bare loop's, medians of CPU time taken
MEMORY_LINES = (200_000, 400_000)
LATENCY_SIZES = (1, 100, 1_000, 10_000)  # events per delivery (CloudWatch Logs documents no batch size)
LATENCY_RUNS = 3
# What an estimator would declare for Keras' `- loss: 0.1 - val_loss: 0.2` (the seed's are for its PyTorch script).
KERAS_DEFINITIONS = (("loss", r" loss: ([0-9.eE+-]+|nan)"), ("val_loss", r"val_loss: ([0-9.eE+-]+|nan)"))
SUBSCRIPTIONS_PAGE = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/Subscriptions.html"
SECTION_TITLE = "## Log rules: the evaluator, its memory, the guard's part of the latency"
HEADLINE_ROW = "| log rules: throughput vs bare loop / memory growth / guard's part of the latency"


class Case:
    """One real log, repeated to length, read with or without definitions; the bare loop's regexes for it."""

    def __init__(
        self,
        label: str,
        log: str,
        definitions: tuple[tuple[str, str], ...],
        bare: Sequence[re.Pattern[str]],
        chunk: int = CHUNK_EVENTS,
    ):
        self.label, self.log, self.definitions, self.bare, self.chunk = label, log, definitions, tuple(bare), chunk


CASES = (
    Case("Keras, no MetricDefinitions", "keras_overfit.log", (), [log_lines._KERAS_ITEM]),
    Case(
        "Keras, two MetricDefinitions",
        "keras_overfit.log",
        KERAS_DEFINITIONS,
        [re.compile(r) for _, r in KERAS_DEFINITIONS],
    ),
    Case("Hugging Face Trainer, no MetricDefinitions", "huggingface_healthy.log", (), [log_lines._DICT_ITEM]),
    # bench/log_cost.py's assumption: 360 matching lines an hour in 60 deliveries, 6 lines each
    Case("Keras, no MetricDefinitions, 6 lines a call", "keras_overfit.log", (), [log_lines._KERAS_ITEM], chunk=6),
)


def real_lines(log: str) -> list[str]:
    return [line for line in (LOGS / log).read_text(encoding="utf-8").splitlines() if line]


def cycled(log: str, count: int) -> Iterator[str]:
    """The real log's lines again and again (a long job of the same shape), `count` of them."""
    return itertools.islice(itertools.cycle(real_lines(log)), count)


def chunks(messages: Iterator[str], size: int = CHUNK_EVENTS) -> Iterator[list[LogEvent]]:
    """Lines as the Lambda folds them: events 100 ms apart with CloudWatch Logs' 56-digit ids, a chunk at a time."""
    batch: list[LogEvent] = []
    for i, message in enumerate(messages):
        batch.append(LogEvent(id=f"{i:056d}", timestamp_ms=1_764_000_000_000 + 100 * i, message=message))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def fold(batches: Sequence[Sequence[LogEvent]] | Iterator[list[LogEvent]], case: Case) -> tuple[StreamState, list[str]]:
    reader, rules = LineReader(case.definitions), GuardConfig().log_rules
    state: StreamState | None = None
    fired: list[str] = []
    for batch in batches:
        state, firings = evaluate(state, batch, reader=reader, rules=rules)
        if firings:  # a comprehension is a call (Python 3.11): not the evaluator's to pay on every batch
            fired += [f"{f.rule} at line {f.line}" for f in firings]
    return state or StreamState(), fired


def bare(messages: Sequence[str], regexes: Sequence[re.Pattern[str]], definitions: bool) -> int:
    """The floor: the same regexes applied to every line and their numbers parsed, nothing else."""
    count = 0
    if definitions:
        for message in messages:
            for regex in regexes:
                match = regex.search(message)
                if match is not None:
                    float(match.group(1))
                    count += 1
    else:
        for message in messages:
            for regex in regexes:
                for found in regex.findall(message):
                    float(found[-1])
                    count += 1
    return count


def throughput(lines: int = THROUGHPUT_LINES, runs: int = THROUGHPUT_RUNS) -> list[dict[str, Any]]:
    rows = []
    for case in CASES:
        messages = list(cycled(case.log, lines))
        batches = list(chunks(iter(messages), case.chunk))
        bare_s, eval_s = [], []
        fired: list[str] = []
        for _ in range(runs):  # interleaved, so the machine's load hits both alike
            # CPU time: on a shared machine a loop descheduled for a moment would count it against itself
            t = time.process_time()
            points = bare(messages, case.bare, bool(case.definitions))
            bare_s.append(time.process_time() - t)
            t = time.process_time()
            _, fired = fold(batches, case)
            eval_s.append(time.process_time() - t)
        b, e = statistics.median(bare_s), statistics.median(eval_s)
        rows.append(
            {
                "case": case.label,
                "log": case.log,
                "lines": lines,
                "points": points,
                "bare lines/s": round(lines / b),
                "evaluator lines/s": round(lines / e),
                "ratio": round(e / b, 2),
                "fired": ", ".join(fired) or "nothing",
            }
        )
    return rows


MEMORY_CODE = """
import json, resource, sys
sys.path.insert(0, {root!r})
from bench import log_rules
state, fired = log_rules.fold(log_rules.chunks(log_rules.cycled({log!r}, {lines})), log_rules.CASES[0])
# this process's own high-water mark (ru_maxrss would keep the parent's across the fork and exec on Linux)
hwm = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")]
peak = int(hwm[0]) if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"lines": {lines}, "peak_rss_kb": peak,
    "state_bytes": len(json.dumps(state.to_json())), "fired": len(fired)}}))
"""


def memory(lengths: Sequence[int] = MEMORY_LINES) -> dict[str, Any]:
    """Peak RSS of a fresh process folding the log lazily, chunk by chunk as the Lambda does, at each length."""
    runs = []
    for lines in lengths:
        code = MEMORY_CODE.format(root=str(ROOT), log=CASES[0].log, lines=lines)
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        command = [sys.executable, "-c", code]
        out = subprocess.run(command, capture_output=True, text=True, env=env, check=True, cwd=ROOT)  # noqa: S603 - ours
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first, last = runs[0], runs[-1]
    return {
        "case": CASES[0].label,
        "runs": runs,
        "growth_mb": round((last["peak_rss_kb"] - first["peak_rss_kb"]) / 1024, 1) + 0.0,  # never "-0.0"
        "state_growth_bytes": last["state_bytes"] - first["state_bytes"],
    }


def latency(sizes: Sequence[int] = LATENCY_SIZES, runs: int = LATENCY_RUNS) -> list[dict[str, Any]]:
    """The guard's part on the emulation: a delivery's decode, fold and stop path, per delivery size. Its last line is
    the real NaN log's first `loss=nan` (every other rule off), so the whole delivery is folded before the stop."""
    from tests.helpers import NOW
    from tests.log_deliveries import document, events, subscription
    from training_guard.handlers import wiring
    from training_guard.services.log_watch import decode
    from training_guard_local.emulator import ACCOUNT, REGION, Emulation, handler_output_to_stderr

    nan_log = real_lines("pytorch_mlp_nan.log")
    first_nan = next(i for i, line in enumerate(nan_log) if line.endswith("loss=nan"))
    before, nan_line = nan_log[:first_nan], nan_log[first_nan]
    off = {"action": "ignore"}
    config = GuardConfig.from_dict(
        {
            "log_rules": {
                "divergence": off,
                "loss_not_decreasing": off,
                "overfit": off,
                "overtraining": off,
                "stalled": off,
            }
        }
    )
    t0_ms = int((NOW - timedelta(hours=1)).timestamp() * 1000)
    rows = []
    with Emulation(config) as aws, handler_output_to_stderr():
        from training_guard.handlers import log_events

        stop_at: list[float] = []
        wiring.root().client("sagemaker").meta.events.register(
            "before-call.sagemaker.StopTrainingJob",
            lambda **_: stop_at.append(time.perf_counter()),
            unique_id="bench-log",
        )

        def invoke(doc: dict[str, Any]) -> dict[str, Any]:
            result: dict[str, Any] = aws.invoke(
                log_events.handler, subscription(doc), aws.context("training-guard-log-events"), at=NOW
            )
            return result

        for size in sizes:
            decode_ms, to_stop_ms, fold_ms = [], [], []
            for run in range(runs):
                job = f"bench-log-{size}-{run}"
                aws.put_job(
                    {
                        "TrainingJobName": job,
                        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{job}",
                        "TrainingJobStatus": "InProgress",
                        "SecondaryStatus": "Training",
                        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
                    }
                )
                stream = f"{job}/algo-1-1764468600"
                # a first delivery: the job's definitions cached and its stream's state saved, as in a running job
                invoke(document(stream, events(before, t0_ms=t0_ms), owner=ACCOUNT))
                lines = [*itertools.islice(itertools.cycle(before), size - 1), nan_line]
                doc = document(stream, events(lines, t0_ms=t0_ms, first=len(before)), owner=ACCOUNT)
                event = subscription(doc)
                t = time.perf_counter()
                delivery = decode(event)
                decode_ms.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                evaluate(None, delivery.events, reader=LineReader(), rules=config.log_rules)
                fold_ms.append((time.perf_counter() - t) * 1000)
                stopped = len(stop_at)
                t = time.perf_counter()
                receipt = aws.invoke(log_events.handler, event, aws.context("training-guard-log-events"), at=NOW)
                if len(stop_at) != stopped + 1 or receipt.get("firings") != ["NaN"]:
                    raise RuntimeError(f"bench: the {size}-line delivery did not stop {job} once: {receipt}")
                to_stop_ms.append((stop_at[-1] - t) * 1000)
            d, f, s = (statistics.median(v) for v in (decode_ms, fold_ms, to_stop_ms))
            rows.append(
                {
                    "events": size,
                    "decode ms": round(d, 2),
                    "fold ms": round(f, 2),
                    "delivery in -> StopTrainingJob ms": round(s, 2),
                    "of which the stop path ms": round(max(s - d - f, 0.0), 2),
                }
            )
    return rows


def measure() -> dict[str, Any]:
    started = time.monotonic()
    print("[log rules] throughput against a bare loop, memory at two lengths, the guard's part of the latency ...")
    out: dict[str, Any] = {"throughput": throughput(), "memory": memory(), "latency": latency()}
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def _table(rows: list[dict[str, Any]]) -> list[str]:
    columns = list(rows[0])
    return [
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
        *("| " + " | ".join(f"{r[c]:,}" if isinstance(r[c], int) else str(r[c]) for c in columns) + " |" for r in rows),
    ]


def section(m: dict[str, Any]) -> list[str]:
    """The report's log-rules section."""
    worst = max(r["ratio"] for r in m["throughput"])
    mem, runs = m["memory"], m["memory"]["runs"]
    biggest = m["latency"][-1]
    big_ms = biggest["delivery in -> StopTrainingJob ms"]
    return [
        SECTION_TITLE,
        "",
        f"`evaluate` over a real log of tests/data/training_logs repeated to {THROUGHPUT_LINES:,} lines, in calls of "
        f"{CHUNK_EVENTS} events (the Lambda's chunk; the last case 6, the cost model's delivery), with the default "
        "rules, against a bare loop over the same lines that only applies the same regexes (the built-in reader's, or "
        f"the definitions') and parses the floats; medians of the CPU time of {THROUGHPUT_RUNS} interleaved runs. "
        f"Target: at most {TARGET_RATIO}x ({'met' if worst <= TARGET_RATIO else 'missed'}: worst {worst}x). A repeated "
        "log starts its curve again at "
        "each repetition, so Divergence may fire once there: what fired is shown.",
        "",
        *_table(m["throughput"]),
        "",
        f"Memory ({mem['case']}, folded lazily chunk by chunk in a fresh process, peak RSS): "
        + ", ".join(
            f"{r['lines']:,} lines {r['peak_rss_kb'] / 1024:.1f} MB (state {r['state_bytes']:,} bytes)" for r in runs
        )
        + f"; growth {mem['growth_mb']:+} MB, state {mem['state_growth_bytes']:+} bytes: the state is a bounded "
        "window.",
        "",
        '"Log line written -> `StopTrainingJob` issued" = CloudWatch Logs\' delivery to the function + the '
        "function's start + the guard's part. AWS documents the delivery only as \"usually less than three "
        f'minutes" ({SUBSCRIPTIONS_PAGE}): the {TARGET_SECONDS:.0f} s target therefore cannot be predicted from cited '
        "figures. The guard's part, measured on the emulation (moto) through the real log-events handler, a warm "
        "container, the delivery's last line a real `loss=nan` (other rules off, so all of it is folded first); decode "
        "and fold are also timed alone:",
        "",
        *_table(m["latency"]),
        "",
        f"At {biggest['events']:,} events a delivery the guard's part is {big_ms} ms "
        "on moto; against AWS the state read and the stop path's DynamoDB and SageMaker calls take their own "
        "(undocumented) times.",
        "",
    ]


def headline_row(m: dict[str, Any]) -> str:
    ratios = ", ".join(f"{r['ratio']}x" for r in m["throughput"])
    worst = max(r["ratio"] for r in m["throughput"])
    big = m["latency"][-1]
    return (
        f"{HEADLINE_ROW} (the report's {len(m['throughput'])} cases; {MEMORY_LINES[0] // 1000}k vs "
        f"{MEMORY_LINES[1] // 1000}k lines; a {big['events']:,}-line delivery on moto) | {ratios} / "
        f"{m['memory']['growth_mb']:+} MB / {big['delivery in -> StopTrainingJob ms']} ms | {TARGET_RATIO}x "
        f"({'met' if worst <= TARGET_RATIO else 'missed, see the report'}) / none / {TARGET_SECONDS:.0f} s end to "
        "end: not predictable, AWS documents delivery only as usually under 3 minutes |"
    )


def spliced(report: str, m: dict[str, Any]) -> str:
    """The report with the log path's sections (the cost's and this one) and the headline row replaced, or added where
    `make bench-report` puts them; the rest as it last wrote it."""
    from bench import log_cost, run

    start, end = run._headline_span(report)
    rows = [r for r in report[start:end].strip().splitlines() if not r.startswith(HEADLINE_ROW)]
    report = report[:start] + "\n" + "\n".join([*rows, headline_row(m)]) + "\n" + report[end:]
    for part in (log_cost.section(run.PRICES), section(m)):
        report = _with_section(report, "\n".join(part))
    return report


def _with_section(report: str, text: str) -> str:
    title = text.split("\n", 1)[0]
    if title in report:
        at = report.index(title)
        after = report.index("\n## ", at + len(title))
        return report[:at] + text + "\n" + report[after + 1 :]  # the blank line before the next title, as `run` writes
    at = report.index(next(t for t in ("## Slack interactivity", "## What the numbers say") if t in report))
    return report[:at] + text + "\n" + report[at:]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    only: dict[str, Callable[[], Any]] = {"--throughput": throughput, "--memory": memory, "--latency": latency}
    for flag, part in only.items():
        if flag in args:
            print(json.dumps(part(), indent=1))
            return 0
    m = measure()
    print("\n".join(section(m)) + "\n" + headline_row(m) + f"\n\nSection run time: {m['seconds']} s.")
    if "--write" in args:
        from bench import run

        text = spliced(REPORT.read_text(encoding="utf-8"), m)
        REPORT.write_text(text, encoding="utf-8")
        run.README.write_text(
            run.readme_with_headline(run.README.read_text(encoding="utf-8"), run.headline_of(text)), encoding="utf-8"
        )
        print(f"written to {REPORT.relative_to(ROOT)} (this section and its headline row) and the README's headline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
