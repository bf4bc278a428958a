"""The demo's "done in" is what the person waited: from the process's start, not from when the demo began."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from training_guard_local import cli


def test_the_wait_counts_from_the_process_start_not_from_the_import() -> None:
    code = "import time; time.sleep(0.5); from training_guard_local.cli import waited_seconds; print(waited_seconds())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert 0.5 <= float(done.stdout) < 30


def test_the_demo_is_told_when_the_wait_began(monkeypatch: pytest.MonkeyPatch) -> None:
    told: list[float] = []

    class Demo:
        def run(self, started: float | None = None) -> int:
            assert started is not None
            told.append(time.monotonic() - started)
            return 0

    monkeypatch.setattr(cli, "demo_of", lambda *_: Demo())
    monkeypatch.setattr(cli, "waited_seconds", lambda: 12.0)
    assert cli.main(["demo"]) == 0
    assert told == [pytest.approx(12.0, abs=0.5)]


def test_without_proc_the_wait_counts_from_the_import(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(*_: Any, **__: Any) -> str:
        raise OSError("no /proc here")

    monkeypatch.setattr(Path, "read_text", unreadable)
    assert cli.waited_seconds() == pytest.approx(time.monotonic() - cli._IMPORTED, abs=0.5)
