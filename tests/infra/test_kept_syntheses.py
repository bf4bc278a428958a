"""The infra tests' kept syntheses (conftest.Synth): the same cloud assembly for the same inputs only."""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path

import pytest

from infra.components.names import STACK_NAME
from tests.infra import conftest
from tests.infra.conftest import CHECKOUT, ConfigSynth, Synth, prune, synthesis_key
from training_guard_local import template_cache


def config_file(folder: Path, document: dict[str, object]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "guard.json").write_text(json.dumps(document))
    return str(folder / "guard.json")


def test_the_key_is_the_configurations_content_not_its_temporary_name(tmp_path: Path) -> None:
    one = synthesis_key({"config": config_file(tmp_path / "a", {"dry_run": True})}, "Synth")
    assert one == synthesis_key({"config": config_file(tmp_path / "b", {"dry_run": True})}, "Synth")
    assert one != synthesis_key({"config": config_file(tmp_path / "c", {"dry_run": False})}, "Synth")
    assert one != synthesis_key({"config": config_file(tmp_path / "a", {"dry_run": True})}, "OrgSynth")


def test_the_key_changes_with_a_source_a_library_and_the_apps_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = tmp_path / "stack.py"
    source.write_text("v1")
    monkeypatch.setattr(template_cache, "sources", lambda: [source])
    before = synthesis_key({}, "Synth")
    source.write_text("v2")
    assert synthesis_key({}, "Synth") != before
    source.write_text("v1")
    assert synthesis_key({}, "Synth") == before
    assert synthesis_key({}, "Synth", [Path(__file__)]) != before  # a subclass's own file
    monkeypatch.setenv("CONTEXT_OVERFLOW_LOCATION_ENV", str(tmp_path / "context.json"))
    assert synthesis_key({}, "Synth") != before
    monkeypatch.delenv("CONTEXT_OVERFLOW_LOCATION_ENV")
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "0.0.0" if name == "cdk-nag" else real(name))
    assert synthesis_key({}, "Synth") != before


def test_a_kept_synthesis_is_the_same_assembly_and_synthesizes_only_for_jsii_objects(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(template_cache.CACHE_ENV, str(tmp_path / "cache"))
    document = {"dry_run": True}
    made = ConfigSynth(tmp_path / "made", document)
    assert "stack" in vars(made)  # synthesized here
    [kept] = (tmp_path / "cache" / "syntheses").iterdir()
    # the one checkout path an assembly holds is kept as a token, read back as this checkout's
    assert CHECKOUT in (kept / f"{STACK_NAME}.assets.json").read_text()
    copied = ConfigSynth(tmp_path / "copied", document)
    assert "stack" not in vars(copied)
    assert copied.json == made.json
    for made_file in made.outdir.iterdir():
        if made_file.is_file():
            assert (copied.outdir / made_file.name).read_bytes() == made_file.read_bytes(), made_file.name
    assert copied.report() == made.report()
    assert copied.stack.artifact_id == STACK_NAME  # asked for: synthesized beside the copy
    assert (tmp_path / "copied" / "cdk.out-again" / f"{STACK_NAME}.template.json").is_file()
    assert [p.name for p in (tmp_path / "cache" / "syntheses").iterdir()] == [kept.name]


def test_with_the_cache_off_nothing_is_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(template_cache.CACHE_ENV, template_cache.OFF)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # where it would go if `off` were not heard
    assert "stack" in vars(Synth(tmp_path / "out"))
    assert not (tmp_path / "cache").exists()


def test_a_copy_marks_its_synthesis_used_and_pruning_keeps_the_most_recently_used(tmp_path: Path) -> None:
    kept = tmp_path / "syntheses"
    for age, name in enumerate(["newest", "newer", "older", "oldest"]):
        (kept / name).mkdir(parents=True)
        (kept / name / "manifest.json").write_text("{}")
        os.utime(kept / name, (1_000_000 - age, 1_000_000 - age))
    (kept / "half.1.tmp").mkdir()  # being written by another process: not counted, not removed yet
    assert conftest._copied(kept / "oldest", tmp_path / "out" / "cdk.out")
    prune(kept, 2)
    assert sorted(p.name for p in kept.iterdir()) == ["half.1.tmp", "newest", "oldest"]
