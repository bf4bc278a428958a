"""bench/prose.py counts docstring and comment lines over non-blank lines, per folder and in total."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import prose


def test_counts_docstrings_and_comments_over_non_blank_lines(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "inner").mkdir(parents=True)
    (package / "top.py").write_text('"""Module."""\n\nX = 1  # why\n\n\ndef f() -> int:\n    return X\n')
    (package / "inner" / "deep.py").write_text(
        'class C:\n    """Two\n\n    lines."""\n\n    # alone\n    y = "not a docstring"\n'
    )

    assert prose.measure(package) == {".": (2, 4), "inner": (3, 5)}
    report = prose.report(package)
    assert report.splitlines()[-1].split() == ["total", "5", "/", "9", "55.6", "%"]


def test_main_prints_the_figure_of_each_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.py").write_text("# one\nA = 1\n")

    assert prose.main([str(tmp_path)]) == 0
    assert "50.0 %" in capsys.readouterr().out
