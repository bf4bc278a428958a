"""The local end-to-end demo: the real stack's rules on an emulated bus, the real handlers, Slack."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from training_guard_local import scenario as scenarios
from training_guard_local.cli import main
from training_guard_local.demo import Demo

pytestmark = pytest.mark.e2e
SCENARIOS = Path(scenarios.__file__).parent / "scenarios"


def run(path: Path) -> tuple[int, str]:
    out = io.StringIO()
    code = Demo(scenarios.load(path), out=out).run()
    return code, out.getvalue()


def test_the_seed_scenario_meets_its_expectations() -> None:
    code, out = run(scenarios.SEED_SCENARIO)
    assert code == 0, out
    # the rules installed are the synthesized template's, with their handlers
    assert (
        '{"detail-type": ["SageMaker Training Job State Change"], "source": ["aws.sagemaker"]} -> training_guard.handlers.job_events.handler'
        in out
    )
    assert '"alarmName": [{"prefix": "training-guard-"}]' in out
    # the diverging MNIST job: stopped once despite three deliveries, rule errors only reported
    assert out.count("StopTrainingJob called") == 2  # mnist and resnet, once each
    assert (
        "slack #default │ 🔴 Stopped pytorch-mnist-lr01-2026-11-30-02-10-00: rule VanishingGradient found issues" in out
    )
    assert (
        "slack #default │ 🔴 Stopped resnet50-no-debugger-2026-11-30-02-12-00: metric guard loss-diverging fired" in out
    )
    assert "🟠 Would have stopped bert-finetune-2026-11-30-02-13-00" in out
    assert "All expectations met." in out
    summary = out.split("\nSummary\n", 1)[1]
    assert "mnist  │" in summary
    assert "│ 2     │ Stopped" in summary  # the rule error, then the stop (later findings fold into it)


def test_the_dry_run_scenario_defers_then_reports_without_stopping() -> None:
    code, out = run(SCENARIOS / "dry_run.json")
    assert code == 0, out
    assert "StopTrainingJob called" not in out
    assert "stop deferred" in out
    assert "per-job alarm created: training-guard-job-llm-quiet-logs-2026-11-30-03-00-00-" in out
    assert "per-job alarm deleted: training-guard-job-llm-quiet-logs-2026-11-30-03-00-00-" in out
    assert "Would have stopped llm-quiet-logs-2026-11-30-03-00-00: no new metrics" in out


def test_an_unmet_expectation_fails_the_demo(tmp_path: Path) -> None:
    data = json.loads(scenarios.SEED_SCENARIO.read_text())
    data["expect"]["xgb"] = {"stopped_by_guard": True}
    data["steps"] = [s for s in data["steps"] if s.get("job") in ("xgb", None)]
    broken = tmp_path / "wrong.json"
    broken.write_text(json.dumps(data))
    code, out = run(broken)
    assert code == 1
    assert "✗ xgb: stopped by the guard False, expected True" in out


def test_a_users_config_replaces_the_scenarios(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "guard.json"
    config.write_text(json.dumps({"dry_run": True, "slack": {"webhooks": {"default": {}}}}))
    # the seed expects stops; under the user's dry-run policy nothing is stopped, so the demo says so
    assert main(["demo", "--config", str(config), "--scenario", str(SCENARIOS / "dry_run.json")]) == 1
    assert "The outcome differs from the scenario's expectations" in capsys.readouterr().out
