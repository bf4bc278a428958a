"""`make first-day`: the README's two commands, each timed on a fresh clone of HEAD.

A new user's first minutes are `make demo` and `make test` on a fresh clone. Each runs here in a clone of its
own (so neither profits from the other's environment), with the machine's package caches as they are (uv's,
npm's and mypy's caches outside the clone: warm after the first run on a machine). Prints one line per command
and the targets of the first-day issue: demo within 30 s, test within 120 s on a 2-core machine. It measures;
it does not fail on a slow machine (exit 1 only when a command itself fails).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS_S = {"demo": 30, "test": 120}


def timed(command: str, clone: Path) -> tuple[float, int, str]:
    started = time.monotonic()
    done = subprocess.run(  # noqa: S603 - our own make targets
        ["make", "--no-print-directory", command],  # noqa: S607
        cwd=clone,
        capture_output=True,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "VIRTUAL_ENV"))},
    )
    return time.monotonic() - started, done.returncode, done.stdout[-2000:] + done.stderr[-2000:]


def main() -> int:
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"first day on a fresh clone of HEAD ({head}), {os.cpu_count()} cores", file=sys.stderr)
    failed = False
    for command, target in TARGETS_S.items():
        with tempfile.TemporaryDirectory(prefix="training-guard-first-day-") as tmp:
            clone = Path(tmp) / "training-guard"
            subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)  # noqa: S603, S607
            print(f"  make {command} ...", file=sys.stderr, flush=True)
            seconds, code, tail = timed(command, clone)
        verdict = "within" if seconds <= target else "OVER"
        print(f"make {command:<5} {seconds:6.1f} s  ({verdict} the {target} s target){'' if code == 0 else '  FAILED'}")
        if code != 0:
            failed = True
            print(tail, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
