"""The linters' kept verdicts (conftest.clean_verdict): only a clean one is kept, and only for the same inputs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.infra.conftest import clean_verdict, settings_read
from training_guard_local import template_cache


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    monkeypatch.setenv(template_cache.CACHE_ENV, str(tmp_path))
    return []


def linter(runs: list[str], findings: list[str]) -> Callable[[], list[str]]:
    def run() -> list[str]:
        runs.append("ran")
        return findings

    return run


def test_a_clean_verdict_is_kept_for_the_same_inputs_only(runs: list[str]) -> None:
    assert clean_verdict("lint", [b"template", b"1.0"], linter(runs, [])) == []
    assert clean_verdict("lint", [b"template", b"1.0"], linter(runs, ["never asked"])) == []
    assert len(runs) == 1
    assert clean_verdict("lint", [b"template", b"1.1"], linter(runs, ["a new version finds this"])) == [
        "a new version finds this"
    ]
    assert clean_verdict("other", [b"template", b"1.0"], linter(runs, ["another tool"])) == ["another tool"]
    assert clean_verdict("lint", [b"templat", b"e1.0"], linter(runs, ["parts are hashed apart"])) == [
        "parts are hashed apart"
    ]
    assert len(runs) == 4


def test_findings_are_never_kept(runs: list[str]) -> None:
    for _ in range(2):
        assert clean_verdict("lint", [b"template"], linter(runs, ["E3030 BillingMode"])) == ["E3030 BillingMode"]
    assert len(runs) == 2


def test_with_the_cache_off_every_verdict_is_found_again(runs: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(template_cache.CACHE_ENV, template_cache.OFF)
    for _ in range(2):
        assert clean_verdict("lint", [b"template"], linter(runs, [])) == []
    assert len(runs) == 2


def test_a_tools_settings_files_and_variables_are_part_of_the_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """checkov reads .checkov.yaml and CKV_SKIP_CHECK: a skip added later must not find the clean verdict kept."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CKV_SKIP_CHECK", raising=False)
    seen = [settings_read((".checkov.yaml",), ("CKV_",))]
    (work / ".checkov.yaml").write_text("skip-check: [CKV_AWS_27]\n")
    seen.append(settings_read((".checkov.yaml",), ("CKV_",)))
    (work / ".checkov.yaml").unlink()
    (home / ".checkov.yaml").write_text("skip-check: [CKV_AWS_27]\n")
    seen.append(settings_read((".checkov.yaml",), ("CKV_",)))
    (home / ".checkov.yaml").unlink()
    monkeypatch.setenv("CKV_SKIP_CHECK", "CKV_AWS_27")
    seen.append(settings_read((".checkov.yaml",), ("CKV_",)))
    assert len(set(seen)) == 4
    monkeypatch.delenv("CKV_SKIP_CHECK")
    assert settings_read((".checkov.yaml",), ("CKV_",)) == seen[0]
    monkeypatch.setenv("UNRELATED", "1")
    assert settings_read((".checkov.yaml",), ("CKV_",)) == seen[0]
