from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from training_guard_local import scenario as scenarios

SCENARIOS = Path(scenarios.__file__).parent / "scenarios"


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.json")), ids=lambda p: p.name)
def test_shipped_scenarios_are_valid(path: Path) -> None:
    loaded = scenarios.load(path)
    assert loaded.steps
    assert loaded.expect


def minimal(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "jobs": {"a": {"name": "job-a"}},
        "steps": [{"minute": 0, "job": "a", "status": "InProgress"}],
    }
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (minimal(jobs={}), "jobs: must be an object"),
        (minimal(steps=[]), "steps: must be a non-empty list"),
        (minimal(steps=[{"minute": 0, "job": "b", "status": "InProgress"}]), "steps[0].job: no job 'b' in jobs"),
        (
            minimal(steps=[{"minute": 0, "job": "a"}]),
            "steps[0]: needs exactly one of status, alarm, sagemaker, sweep, publish",
        ),
        (minimal(steps=[{"minute": 0, "job": "a", "status": "Running"}]), "steps[0].status: must be one of"),
        (
            minimal(steps=[{"minute": 0, "job": "a", "status": "InProgress", "rules": {"R": "Bad"}}]),
            "steps[0].rules.R: must be one of",
        ),
        (minimal(steps=[{"minute": 0, "job": "a", "alarm": "nope"}]), "steps[0].alarm: no metric guard 'nope'"),
        (
            minimal(steps=[{"minute": 5, "sweep": True}, {"minute": 1, "sweep": True}]),
            "steps[1].minute: must be a number, not before",
        ),
        (minimal(steps=[{"minute": 0, "job": "a", "status": "InProgress", "deliveries": 0}]), "steps[0].deliveries"),
        (minimal(config={"dry_rn": True}), "config.dry_rn: unknown setting"),
        (minimal(expect={"zz": {}}), "expect.zz: no job 'zz' in jobs"),
        (minimal(colour=1), "colour: unknown field"),
    ],
)
def test_scenario_mistakes_name_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenarios.parse(data)
    assert message in str(caught.value)


def test_unreadable_scenarios_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(scenarios.ScenarioError, match=r"bad\.json is invalid:\n  - not JSON"):
        scenarios.load(bad)
