"""The demo's template cache: what its key covers, and that a bad cache is only ever a miss."""

from __future__ import annotations

from pathlib import Path

import pytest

from training_guard_local import template_cache

CONTEXT = {"training-guard": {"dry_run": False}, "aws:cdk:bundling-stacks": []}


@pytest.fixture
def sources(tmp_path: Path) -> list[Path]:
    infra = tmp_path / "infra"
    (infra / "components").mkdir(parents=True)
    (infra / "app.py").write_text("APP = 1\n")
    (infra / "components" / "chat.py").write_text("CHAT = 1\n")
    (infra / "__pycache__").mkdir()
    (infra / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"compiled")
    demo = tmp_path / "demo.py"
    demo.write_text("DEMO = 1\n")
    return [infra, demo]


def test_the_key_is_stable_for_the_same_inputs(sources: list[Path]) -> None:
    assert template_cache.key(CONTEXT, sources, env={}) == template_cache.key(dict(CONTEXT), sources, env={})


def test_the_key_changes_with_the_configuration(sources: list[Path]) -> None:
    other = {**CONTEXT, "training-guard": {"dry_run": True}}
    assert template_cache.key(CONTEXT, sources, env={}) != template_cache.key(other, sources, env={})


@pytest.mark.parametrize("changed", ["app.py", "components/chat.py"])
def test_the_key_changes_with_any_source_file(sources: list[Path], changed: str) -> None:
    before = template_cache.key(CONTEXT, sources, env={})
    (sources[0] / changed).write_text("CHANGED = 2\n")
    assert template_cache.key(CONTEXT, sources, env={}) != before


def test_the_key_changes_with_a_new_source_file_and_a_single_file_root(sources: list[Path]) -> None:
    before = template_cache.key(CONTEXT, sources, env={})
    (sources[0] / "components" / "new.py").write_text("")
    added = template_cache.key(CONTEXT, sources, env={})
    sources[1].write_text("DEMO = 2\n")
    assert len({before, added, template_cache.key(CONTEXT, sources, env={})}) == 3


def test_compiled_files_and_other_environment_variables_do_not_change_the_key(sources: list[Path]) -> None:
    before = template_cache.key(CONTEXT, sources, env={"HOME": "/a"})
    (sources[0] / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"recompiled")
    assert template_cache.key(CONTEXT, sources, env={"HOME": "/b"}) == before


def test_the_cdk_environment_changes_the_key(sources: list[Path]) -> None:
    assert template_cache.key(CONTEXT, sources, env={}) != template_cache.key(
        CONTEXT, sources, env={"CDK_DEFAULT_REGION": "eu-west-1"}
    )


def test_the_real_sources_are_the_app_the_function_code_and_the_demos_synthesis() -> None:
    root = Path(__file__).resolve().parents[2]
    assert template_cache.sources() == [
        root / "infra",
        root / "functions" / "training_guard",
        root / "local" / "training_guard_local" / "demo.py",
        root / "local" / "training_guard_local" / "template_cache.py",
    ]


def test_a_stored_value_is_loaded_back(tmp_path: Path) -> None:
    value = [{"Resources": {"Fn": {"Type": "AWS::Lambda::Function"}}}, None]
    path = template_cache.store(tmp_path / "cache", "k1", value)
    assert path == tmp_path / "cache" / "k1.json"
    assert template_cache.load(tmp_path / "cache", "k1") == value
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["k1.json"]  # no temporary file left


@pytest.mark.parametrize("content", ["{not json", '{"a": 1}', ""])
def test_a_corrupt_or_foreign_file_is_a_miss(tmp_path: Path, content: str) -> None:
    (tmp_path / "k1.json").write_text(content)
    assert template_cache.load(tmp_path, "k1") is None


def test_a_missing_entry_is_a_miss(tmp_path: Path) -> None:
    assert template_cache.load(tmp_path, "nothing") is None


def test_an_unwritable_cache_is_no_failure(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder should be")
    assert template_cache.store(blocked, "k1", [{}, None]) is None


def test_the_folder_follows_the_environment(tmp_path: Path) -> None:
    assert template_cache.folder({template_cache.CACHE_ENV: template_cache.OFF}) is None
    assert template_cache.folder({template_cache.CACHE_ENV: str(tmp_path)}) == tmp_path
    assert template_cache.folder({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "training-guard" / "templates"
    assert template_cache.load(None, "k1") is None
    assert template_cache.store(None, "k1", [{}, None]) is None


def test_a_path_under_home_is_shown_with_a_tilde() -> None:
    assert template_cache.shown(Path.home() / ".cache" / "x.json") == "~/.cache/x.json"
    assert template_cache.shown(Path("/elsewhere/x.json")) == "/elsewhere/x.json"
