"""What each committed training log shows, read with a regex per log: the figures in tests/data/training_logs/README.md.

python -m bench.training_logs.facts [tests/data/training_logs]
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

NUMBER = r"([-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|nan|inf))"
# (training loss, validation loss) per log-name prefix: each framework's own words for them
SERIES: dict[str, tuple[str, str | None]] = {
    "pytorch_mnist": (rf"Loss: {NUMBER}", rf"Average loss: {NUMBER}"),
    "pytorch_mlp_overfit": (rf"train_loss={NUMBER}", rf"val_loss={NUMBER}"),
    "pytorch_mlp": (rf"\bloss={NUMBER}", None),
    "xgboost": (rf"train-rmse:{NUMBER}", rf"validation-rmse:{NUMBER}"),
    "lightgbm": (rf"training's l2: {NUMBER}", rf"valid_1's l2: {NUMBER}"),
    "keras": (rf" - loss: {NUMBER}", rf"val_loss: {NUMBER}"),
    "lightning": (rf"train_loss={NUMBER}", rf"val_loss={NUMBER}"),
    "huggingface": (rf"'loss': '{NUMBER}'", rf"'eval_loss': '{NUMBER}'"),
}


@dataclass(frozen=True)
class Series:
    points: list[tuple[int, float]]  # (1-based line, value)

    def first_nonfinite(self) -> int | None:
        return next((n for n, v in self.points if not math.isfinite(v)), None)

    def best(self) -> tuple[int, float]:
        finite = [(n, v) for n, v in self.points if math.isfinite(v)]
        return min(finite, key=lambda p: p[1])

    def first_times_best(self, factor: float) -> tuple[int, float, float] | None:
        """The first line whose value is `factor` times the lowest value before it: (line, value, best)."""
        best = math.inf
        for n, v in self.points:
            if math.isfinite(v) and best < math.inf and v >= factor * best:
                return n, v, best
            if math.isfinite(v):
                best = min(best, v)
        return None

    def stays_above(self, factor: float) -> tuple[int, float] | None:
        """The first line from which every later value is `factor` times the best before that line (or not finite)."""
        start = None
        best = math.inf
        for n, v in self.points:
            if math.isfinite(v) and best < math.inf and v >= factor * best:
                start = start or (n, best)
            elif math.isfinite(v):
                start = None
            if math.isfinite(v) and start is None:
                best = min(best, v)
        return start


def series(path: Path, pattern: str) -> Series:
    regex = re.compile(pattern)
    points = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if match := regex.search(line):
                points.append((number, float(match.group(1))))
    return Series(points)


def describe(path: Path) -> str:
    prefix = max((p for p in SERIES if path.stem.startswith(p)), key=len)
    loss_pattern, val_pattern = SERIES[prefix]
    loss = series(path, loss_pattern)
    out = [f"{path.name}: {sum(1 for _ in path.open(encoding='utf-8'))} lines, {len(loss.points)} loss points"]
    if (nan := loss.first_nonfinite()) is not None:
        out.append(f"first non-finite loss at line {nan}")
    line, value = loss.best()
    first, last = loss.points[0], loss.points[-1]
    out.append(f"loss {first[1]:g} (line {first[0]}) -> best {value:g} (line {line}) -> last {last[1]:g}")
    if (times := loss.first_times_best(4.0)) is not None:
        out.append(f"first loss >= 4x the best before it: {times[1]:g} at line {times[0]} (best {times[2]:g})")
    if (above := loss.stays_above(4.0)) is not None:
        out.append(f"loss stays >= 4x its best ({above[1]:g}) from line {above[0]} on")
    if val_pattern:
        val = series(path, val_pattern)
        vline, vvalue = val.best()
        index = [n for n, _ in val.points].index(vline) + 1
        out.append(
            f"validation: {len(val.points)} points, minimum {vvalue:g} at line {vline} (its point {index}), "
            f"last {val.points[-1][1]:g}"
        )
    return "; ".join(out)


def main(argv: list[str]) -> int:
    folder = Path(argv[0] if argv else "tests/data/training_logs")
    for path in sorted(folder.glob("*.log")):
        print(describe(path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
