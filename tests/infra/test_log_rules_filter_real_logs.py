"""The default subscription filter pattern against the real training logs (tests/data/training_logs/, engineer B's):
every line the log rules read a point from is delivered. Runs once the logs and the line reader are on the branch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from training_guard import contract

LOGS = Path(__file__).resolve().parents[1] / "data" / "training_logs"
# CloudWatch Logs' regex is searched anywhere in the line, case-sensitive: Python's re.search with the same text.
PATTERN = re.compile(contract.LOG_FILTER_PATTERN.strip("%"))


def logs() -> list[Path]:
    return sorted(LOGS.glob("*.log")) if LOGS.is_dir() else []


@pytest.mark.skipif(not logs(), reason="tests/data/training_logs/ is not on this branch yet")
@pytest.mark.parametrize("log", logs(), ids=lambda p: p.name)
def test_every_line_with_a_point_is_delivered(log: Path) -> None:
    log_lines = pytest.importorskip("training_guard.domain.log_lines")
    reader = log_lines.LineReader()
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    with_points = [line for line in lines if reader.read(line)]
    assert with_points, "a training log the readers find no point in"
    assert [line for line in with_points if not PATTERN.search(line)] == []
