"""Prose share of a Python package: docstring and comment lines over non-blank lines.

`python -m bench.prose [PATH ...]` (default `functions/training_guard`) prints the figure per folder and in total.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from collections import defaultdict
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[1] / "functions" / "training_guard"
_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def prose_lines(source: str) -> tuple[set[int], set[int]]:
    """(prose line numbers, non-blank line numbers) of one module; blank lines inside a docstring are not counted."""
    lines = source.splitlines()
    nonblank = {n for n, text in enumerate(lines, 1) if text.strip()}
    prose: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, _DOCUMENTED) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                prose.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            prose.add(token.start[0])
    return prose & nonblank, nonblank


def measure(root: Path) -> dict[str, tuple[int, int]]:
    """{folder relative to root ("." for the root itself): (prose lines, non-blank lines)} over every .py file."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path in sorted(root.rglob("*.py")):
        prose, nonblank = prose_lines(path.read_text(encoding="utf-8"))
        rel = path.relative_to(root)
        folder = rel.parts[0] if len(rel.parts) > 1 else "."
        counts[folder][0] += len(prose)
        counts[folder][1] += len(nonblank)
    return {folder: (p, n) for folder, (p, n) in sorted(counts.items())}


def report(root: Path) -> str:
    per_folder = measure(root)
    prose = sum(p for p, _ in per_folder.values())
    total = sum(n for _, n in per_folder.values())
    rows = [f"{folder:<12} {p:>5} / {n:>5}  {100 * p / n:5.1f} %" for folder, (p, n) in per_folder.items() if n]
    share = 100 * prose / total if total else 0.0
    rows.append(f"{'total':<12} {prose:>5} / {total:>5}  {share:5.1f} %")
    return "\n".join([f"prose lines / non-blank lines of {root.name}", *rows])


def main(argv: list[str]) -> int:
    for arg in argv or [str(DEFAULT)]:
        print(report(Path(arg)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
