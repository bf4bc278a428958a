"""Users' own scenarios: with or without a config, with or without Slack, shipped ones by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training_guard_local.cli import main

pytestmark = pytest.mark.e2e

OWN = {
    "name": "mine: no config at all",
    "jobs": {"a": {"name": "my-job-2026-11-30-04-00-00", "metrics": ["train:loss"]}},
    "steps": [
        {
            "minute": 0,
            "job": "a",
            "status": "InProgress",
            "secondary": "Training",
            "rules": {"VanishingGradient": "InProgress"},
        },
        {"minute": 3, "job": "a", "publish": {"train:loss": [2.3, 2.1]}},
        {
            "minute": 5,
            "job": "a",
            "status": "InProgress",
            "rules": {"VanishingGradient": "IssuesFound"},
            "deliveries": 2,
        },
        {"minute": 6, "job": "a", "sagemaker": "finish_stopping"},
        {"minute": 7, "sweep": True},
    ],
    "expect": {"a": {"stopped_by_guard": True, "final_status": "Stopped", "notifications": ["issues_found"]}},
}


def test_a_scenario_without_config_runs_every_step_without_slack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # no config: no Slack webhook, so no chat queue; every step used to end in QueueDoesNotExist after the first
    scenario = tmp_path / "mine.json"
    scenario.write_text(json.dumps(OWN))
    assert main(["demo", "--scenario", str(scenario)]) == 0
    out = capsys.readouterr().out
    assert "[+00:07] sweeper: scheduled run" in out
    assert "All expectations met." in out
    assert "slack #" not in out


def test_a_users_config_without_slack_runs_the_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed = json.loads((Path(__file__).parents[2] / "local/training_guard_local/scenarios/seed.json").read_text())
    config = tmp_path / "prod.json"
    # layered over cdk.json as the deploy reads it: `"slack": null` turns off cdk.json's Slack webhook
    config.write_text(json.dumps({**seed["config"], "slack": None}))
    assert main(["demo", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "All expectations met." in out
    assert "slack #" not in out


def test_a_shipped_scenario_is_named_not_pathed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--scenario", "dry_run"]) == 0
    assert capsys.readouterr().out.startswith("Training Guard demo: dry run: check a policy before deploying it")
