"""`make first-day`: the README's two commands, each timed on a fresh clone of HEAD.

A new user's first minutes are `make demo` and `make test` on a fresh clone. Each runs here in a clone of its
own (so neither profits from the other's environment), with the machine's package caches as they are (uv's,
npm's and mypy's caches outside the clone: warm after the first run on a machine). Prints one line per command
and the targets of the first-day issue: demo within 30 s, test within 120 s on a 2-core machine. It measures;
it does not fail on a slow machine (exit 1 only when a command itself fails).

Beside the wall time: the CPU time each command used (its processes', user and system), and the machine's speed
as the time of a fixed pure-Python loop. Shared machines of the same kind differ from day to day (this one ran the
same `make demo` in 16.4 s one day and 32.6 s another), so figures from two days compare only with that one.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS_S = {"demo": 30, "test": 120}


REFERENCE_ADDITIONS = 20_000_000


def reference_loop_s() -> float:
    """Seconds for 20 million additions in a pure-Python loop, best of three: the machine's speed today."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        total = 0
        for i in range(REFERENCE_ADDITIONS):
            total += i
        best = min(best, time.process_time() - started)
    return best


def children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(command: str, clone: Path) -> tuple[float, float, int, str]:
    """Wall seconds, CPU seconds of the command's processes, exit code, the end of its output."""
    cpu = children_cpu_s()
    started = time.monotonic()
    done = subprocess.run(  # noqa: S603 - our own make targets
        ["make", "--no-print-directory", command],  # noqa: S607
        cwd=clone,
        capture_output=True,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "VIRTUAL_ENV"))},
    )
    seconds = time.monotonic() - started
    return seconds, children_cpu_s() - cpu, done.returncode, done.stdout[-2000:] + done.stderr[-2000:]


def main() -> int:
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"first day on a fresh clone of HEAD ({head}), {os.cpu_count()} cores", file=sys.stderr)
    print(f"machine speed: {reference_loop_s():.2f} s for {REFERENCE_ADDITIONS:,} additions in pure Python (best of 3)")
    failed = False
    for command, target in TARGETS_S.items():
        with tempfile.TemporaryDirectory(prefix="training-guard-first-day-") as tmp:
            clone = Path(tmp) / "training-guard"
            subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)  # noqa: S603, S607
            print(f"  make {command} ...", file=sys.stderr, flush=True)
            seconds, cpu, code, tail = timed(command, clone)
        verdict = "within" if seconds <= target else "OVER"
        print(
            f"make {command:<5} {seconds:6.1f} s  ({verdict} the {target} s target), {cpu:.0f} s of CPU"
            + ("" if code == 0 else "  FAILED")
        )
        if code != 0:
            failed = True
            print(tail, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
