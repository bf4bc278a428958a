"""The demo's synthesis through its template cache: synthesized once, then the same template from the cache without
the CDK (infra.app is never called again), and synthesized afresh when the configuration differs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from infra import app as infra_app
from training_guard_local import demo, scenario, template_cache


def test_the_demo_synthesizes_once_then_reuses_the_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(template_cache.CACHE_ENV, str(tmp_path))
    seed = scenario.load(scenario.resolve("seed"))
    template, member, kept = demo.synthesized(seed)
    assert (kept, member) == (None, None)
    assert template["Resources"]

    def no_cdk(*_: Any, **__: Any) -> Any:
        raise AssertionError("synthesized again although the sources and configuration are the same")

    monkeypatch.setattr(infra_app, "build_app", no_cdk)
    again, _, kept = demo.synthesized(seed)
    assert again == template
    assert kept is not None
    assert kept.parent == tmp_path

    other = replace(seed, config=replace(seed.config, dry_run=not seed.config.dry_run))
    with pytest.raises(AssertionError, match="synthesized again"):
        demo.synthesized(other)  # another configuration is another key: synthesized, not reused


def test_with_the_cache_off_every_run_synthesizes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(template_cache.CACHE_ENV, template_cache.OFF)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    seed = scenario.load(scenario.resolve("seed"))
    assert demo.synthesized(seed)[2] is None
    assert demo.synthesized(seed)[2] is None
    assert list(tmp_path.iterdir()) == []
