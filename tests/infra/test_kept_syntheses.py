"""The infra tests' kept syntheses (conftest.Synth): the same cloud assembly for the same inputs only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from infra.components.names import STACK_NAME
from tests.infra.conftest import ConfigSynth, Synth, prune, synthesis_key
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
    assert one != synthesis_key({"config": str(tmp_path / "a" / "guard.json"), "other": 1}, "Synth")


def test_a_kept_synthesis_is_the_same_assembly_and_synthesizes_only_for_jsii_objects(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(template_cache.CACHE_ENV, str(tmp_path / "cache"))
    document = {"dry_run": True}
    made = ConfigSynth(tmp_path / "made", document)
    assert "stack" in vars(made)  # synthesized here
    [kept] = (tmp_path / "cache" / "syntheses").iterdir()
    copied = ConfigSynth(tmp_path / "copied", document)
    assert "stack" not in vars(copied)
    assert copied.json == made.json
    assert sorted(p.name for p in copied.outdir.iterdir()) == sorted(p.name for p in made.outdir.iterdir())
    assert copied.report() == made.report()
    assert copied.stack.artifact_id == STACK_NAME  # asked for: synthesized beside the copy
    assert (tmp_path / "copied" / "cdk.out-again" / f"{STACK_NAME}.template.json").is_file()
    assert len(list((tmp_path / "cache" / "syntheses").iterdir())) == 1
    assert kept.is_dir()


def test_with_the_cache_off_nothing_is_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(template_cache.CACHE_ENV, template_cache.OFF)
    assert "stack" in vars(Synth(tmp_path / "out"))
    assert not any(tmp_path.glob("**/syntheses"))


def test_pruning_keeps_the_most_recently_used(tmp_path: Path) -> None:
    for age, name in enumerate(["newest", "used", "older", "oldest"]):
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (1_000_000 - age, 1_000_000 - age))
    prune(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["newest", "used"]
