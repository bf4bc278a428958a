"""Replay benchmark: `training-guard simulate` on 5,000 and 50,000 recorded events.

Each size runs in a fresh interpreter (the real command, its stdout to /dev/null) and reports the
wall time, events per second, the peak memory of the process (its maximum resident set size) and
the bytes of stderr (a quiet replay writes none below the progress threshold; above it, the progress
lines). Linear time shows as the same events/s at both sizes.

The events are a fleet's timeline built from the recorded fixtures in tests/events: per job, the
job starting, a Debugger rule finding issues (delivered twice, as SageMaker does), a rule error,
and the job ending (failed, stopped or completed); a job starts every 30 s, each event is at its own
time and the timeline is in time order, so consecutive events come from different jobs, accounts
and regions (three accounts, two regions), as a capture from a central event bus would.

    python -m bench.replay                 # 5,000 and 50,000 events
    python -m bench.replay --events 2000   # one size
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EVENTS_DIR = ROOT / "tests" / "events"
SIZES = (5_000, 50_000)
# An organization's events captured on a central bus: several accounts, mostly one region.
ACCOUNTS = (("111111111111", "us-east-1"), ("222222222222", "us-east-1"), ("333333333333", "eu-west-1"))
START = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
_PER_JOB = 5  # events per job in the timeline below


def _fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS_DIR / f"{name}.json").read_text())
    return data


def timeline(count: int) -> list[dict[str, Any]]:
    """`count` events: jobs of five events each, every event at its own time, in three accounts."""
    finding = _fixture("vanishing_gradient_issues_found")
    error = _fixture("rule_error")
    endings = [_fixture("failed"), _fixture("stopped_max_runtime"), _fixture("aws_sample_completed")]
    events: list[dict[str, Any]] = []
    job = 0
    while len(events) < count + _PER_JOB * 12:  # jobs started late enough to fall outside are cut below
        account, region = ACCOUNTS[job % len(ACCOUNTS)]
        name = f"bench-job-{job:06d}"
        started = START + timedelta(seconds=30 * job)
        running = copy.deepcopy(finding)
        del running["detail"]["DebugRuleEvaluationStatuses"]
        ending = copy.deepcopy(endings[job % len(endings)])
        for step, template in enumerate((running, finding, finding, error, ending)):
            event = copy.deepcopy(template)
            event.update(
                id=f"bench-{job}-{step}", account=account, region=region, time=_stamp(started + timedelta(minutes=step))
            )
            detail = event["detail"]
            detail["TrainingJobName"] = name
            detail["TrainingJobArn"] = f"arn:aws:sagemaker:{region}:{account}:training-job/{name}"
            detail["TrainingStartTime"] = int(started.timestamp() * 1000)
            event["resources"] = [detail["TrainingJobArn"]]
            events.append(event)
        job += 1
    events.sort(key=lambda e: e["time"])  # stable: a job's events keep their order within a minute
    return events[:count]


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


_CHILD = """
import resource, subprocess, sys, time
started = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=open(sys.argv[0] + ".err", "w")).returncode
elapsed = time.perf_counter() - started
print(code, elapsed, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def measure(count: int, folder: Path) -> dict[str, Any]:
    events = folder / f"events-{count}.json"
    events.write_text(json.dumps(timeline(count)))
    probe = folder / f"probe-{count}.py"
    probe.write_text(_CHILD)
    command = [sys.executable, "-m", "training_guard_local.cli", "simulate", str(events)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "functions"), str(ROOT / "local")])}
    result = subprocess.run(  # noqa: S603 - this interpreter, running the project's own command
        [sys.executable, str(probe), *command], capture_output=True, text=True, check=True, env=env
    )
    code, seconds, max_rss_kb = result.stdout.split()
    stderr = Path(str(probe) + ".err").read_text()
    return {
        "events": count,
        "exit": int(code),
        "seconds": float(seconds),
        "events_per_second": count / float(seconds),
        "peak_memory_mb": int(max_rss_kb) / 1024,  # Linux reports ru_maxrss in kilobytes
        "file_mb": events.stat().st_size / 1e6,
        "stderr_lines": len(stderr.splitlines()),
    }


def report(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| events | file MB | time s | events/s | peak memory MB | stderr lines | exit |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {r['events']:,} | {r['file_mb']:.1f} | {r['seconds']:.1f} | {r['events_per_second']:.0f} | "
        f"{r['peak_memory_mb']:.0f} | {r['stderr_lines']} | {r['exit']} |"
        for r in rows
    ]
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        ratio = (last["seconds"] / first["seconds"]) / (last["events"] / first["events"])
        lines.append("")
        lines.append(
            f"time per event at {last['events']:,} vs {first['events']:,} events: {ratio:.2f}x (1.00 = linear)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, action="append", help="a size to replay (repeatable)")
    args = parser.parse_args(argv)
    sizes = tuple(args.events or SIZES)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as folder:
        for count in sizes:
            print(f"replaying {count:,} events ...", file=sys.stderr, flush=True)
            rows.append(measure(count, Path(folder)))
    print("\n".join(report(rows)))
    print(
        f"\nmachine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; bench peak RSS of this process "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
