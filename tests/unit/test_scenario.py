from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from training_guard.config.model import GuardConfig
from training_guard_local import scenario as scenarios
from training_guard_local.inputs import UsageError

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
        (
            minimal(steps=[{"minute": 0, "job": "a", "alarm": "nope"}]),
            "steps[0].alarm: the scenario's config has no metric guard 'nope' (its metric guards: none)",
        ),
        (
            minimal(steps=[{"minute": 5, "sweep": True}, {"minute": 1, "sweep": True}]),
            "steps[1].minute: must be a number, not before",
        ),
        (minimal(steps=[{"minute": 0, "job": "a", "status": "InProgress", "deliveries": 0}]), "steps[0].deliveries"),
        (
            minimal(
                steps=[
                    {"minute": 0, "job": "a", "status": "InProgress"},
                    {"minute": 5, "job": "a", "status": "Completed"},
                    {"minute": 6, "job": "a", "status": "InProgress"},
                ]
            ),
            "steps[2].status: job 'a' ended Completed at steps[1]; Completed, Failed and Stopped are final",
        ),
        (
            minimal(
                steps=[{"minute": 0, "job": "a", "status": "Failed"}, {"minute": 1, "job": "a", "status": "Stopped"}]
            ),
            "steps[1].status: job 'a' ended Failed at steps[0]",
        ),
        (minimal(config={"dry_rn": True}), "config.dry_rn: unknown setting"),
        (minimal(expect={"zz": {}}), "expect.zz: no job 'zz' in jobs"),
        (minimal(colour=1), "colour: unknown field"),
        # wrong types are named, not tracebacks
        (minimal(jobs={"a": {"name": "job-a", "instance_count": "two"}}), "jobs.a.instance_count: must be a whole"),
        (minimal(jobs={"a": {"name": "job-a", "instance_count": 0}}), "jobs.a.instance_count: must be a whole"),
        (minimal(jobs={"a": {"name": "job-a", "instance_type": 5}}), "jobs.a.instance_type: must be a SageMaker"),
        (minimal(jobs={"a": {"name": "job-a", "profiler_rules": "x"}}), "jobs.a.profiler_rules: must be a list"),
        (minimal(jobs={"a": "job-a"}), "jobs.a: must be an object"),
        (
            minimal(steps=[{"minute": 0, "job": "a", "status": "InProgress", "details": "oops"}]),
            "steps[0].details: must map rule names to their StatusDetails text",
        ),
        (
            minimal(steps=[{"minute": 0, "job": "a", "status": "InProgress", "rules": ["VanishingGradient"]}]),
            "steps[0].rules: must map rule names to statuses",
        ),
        (
            minimal(steps=[{"minute": 0, "job": "a", "status": "InProgress", "secondary": "Trainig"}]),
            "steps[0].secondary: must be one of Starting, Pending",
        ),
        (
            minimal(steps=[{"minute": 0, "job": "a", "status": "Failed", "failure_reason": 137}]),
            "steps[0].failure_reason: must be a string, got 137",
        ),
        (minimal(steps=[{"minute": 0, "job": "a", "sagemaker": "stop"}]), "steps[0].sagemaker: must be one of"),
        (minimal(steps=[{"minute": 0, "sweep": "yes"}]), "steps[0].sweep: must be true"),
        (minimal(steps=[{"minute": 0, "job": "a", "publish": {"train:loss": []}}]), "steps[0].publish: must map"),
        (minimal(steps=[{"minute": 0, "job": ["a"], "status": "InProgress"}]), "steps[0].job: no job ['a'] in jobs"),
        (minimal(steps=[{"minute": 0, "status": "InProgress"}]), "steps[0].job: required for this step"),
        # unknown statuses and notification kinds are refused when loaded, not after the run
        (minimal(expect={"a": {"final_status": "Finished"}}), "expect.a.final_status: must be one of"),
        (
            minimal(expect={"a": {"notifications": ["issues_found", "job_stoped"]}}),
            "expect.a.notifications[1]: must be one of issues_found",
        ),
        (minimal(expect={"a": {"notifications": "issues_found"}}), "expect.a.notifications: must be a list"),
        (minimal(expect={"a": {"stopped_by_guard": "yes"}}), "expect.a.stopped_by_guard: must be true or false"),
        (minimal(name=7), "name: must be a string"),
    ],
)
def test_scenario_mistakes_name_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenarios.parse(data)
    assert message in str(caught.value)


def test_every_problem_is_reported_at_once() -> None:
    data = minimal(
        jobs={"a": {"name": "job-a", "instance_count": "two"}},
        steps=[{"minute": 0, "job": "a", "status": "InProgress", "details": "oops"}],
    )
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenarios.parse(data)
    assert caught.value.problems == [
        "jobs.a.instance_count: must be a whole number of at least 1, got 'two'",
        "steps[0].details: must map rule names to their StatusDetails text",
    ]


def test_unreadable_scenarios_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(UsageError, match=r"bad\.json: not JSON \(Expecting property name"):
        scenarios.load(bad)
    yaml = tmp_path / "timeline.yaml"
    yaml.write_text("name: mine\njobs:\n  a: {name: job-a}\n")
    with pytest.raises(UsageError, match="looks like YAML; scenarios are JSON"):
        scenarios.load(yaml)


def test_a_config_given_with_the_scenario_is_blamed_for_a_missing_guard() -> None:
    data = minimal(steps=[{"minute": 0, "job": "a", "alarm": "loss-diverging"}])
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenarios.parse(data, config_override=GuardConfig(), config_source="configs/prod.json")
    assert caught.value.problems == [
        "steps[0].alarm: --config configs/prod.json has no metric guard 'loss-diverging' (its metric guards: none)"
    ]


def test_shipped_scenarios_can_be_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert scenarios.resolve("dry_run") == SCENARIOS / "dry_run.json"
    assert scenarios.resolve("dry_run.json") == SCENARIOS / "dry_run.json"
    assert scenarios.resolve(None) == scenarios.SEED_SCENARIO
    assert scenarios.shipped() == sorted(p.stem for p in SCENARIOS.glob("*.json"))
    # a file of that name in the current folder is the user's, and wins
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dry_run.json").write_text("{}")
    assert scenarios.resolve("dry_run.json") == Path("dry_run.json")
    with pytest.raises(
        UsageError, match=r"nope: no such scenario file, and no shipped scenario of that name \(.*dry_run"
    ):
        scenarios.resolve("nope")
