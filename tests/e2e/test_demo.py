"""The local end-to-end demo: the real stack's rules on an emulated bus, the real handlers, Slack."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_readme import check_demo_block
from tests.helpers import EVENTS_DIR
from training_guard.config.model import GuardConfig
from training_guard_local import configs, emulator
from training_guard_local import scenario as scenarios
from training_guard_local.cli import demo_of, main
from training_guard_local.demo import Demo
from training_guard_local.emulator import Emulation

pytestmark = pytest.mark.e2e
SCENARIOS = Path(scenarios.__file__).parent / "scenarios"
ROOT = Path(__file__).resolve().parents[2]  # the project folder: its cdk.json


def run(path: Path) -> tuple[int, str]:
    out = io.StringIO()
    code = Demo(scenarios.load(path), out=out).run()
    return code, out.getvalue()


@dataclass(frozen=True)
class Played:
    code: int
    out: str
    demo: Demo

    @property
    def summary(self) -> dict[str, list[str]]:
        """The summary table's rows by job key: their cells, stripped."""
        table = self.out.split("\nSummary\n", 1)[1].split("\n\n", 1)[0]
        rows = [[cell.strip() for cell in line.split("│")] for line in table.splitlines() if "│" in line]
        return {row[0]: row[1:] for row in rows[1:]}


@pytest.fixture(scope="module")
def seed() -> Played:
    """The seed scenario, played once for the tests of this module (what `make demo` plays)."""
    out = io.StringIO()
    demo = demo_of(None, out=out)  # what `make demo` runs
    code = demo.run()
    return Played(code, out.getvalue(), demo)


def test_the_readmes_make_demo_block_is_what_the_demo_printed(seed: Played) -> None:
    check_demo_block("seed", seed.out)


def test_the_seed_scenario_meets_its_expectations(seed: Played) -> None:
    code, out = seed.code, seed.out
    assert code == 0, out
    # the rules installed are the synthesized template's, with their handlers
    assert (
        '{"detail-type": ["SageMaker Training Job State Change"], "source": ["aws.sagemaker"]} -> training_guard.handlers.job_events.handler'
        in out
    )
    assert '"alarmName": [{"prefix": "training-guard-"}]' in out
    # the diverging MNIST job: stopped once despite three deliveries, rule errors only reported
    # every stop the guard makes is shown, once: mnist (its rule), resnet (its alarm), exp (the sweeper's budget), and
    # lr01 and nan (their logs: tests/e2e/test_demo_log_rules.py)
    assert out.count("StopTrainingJob called") == 5
    assert (
        "slack #default │ 🔴 Stopped pytorch-mnist-lr01-2026-11-30-02-10-00: rule VanishingGradient found issues" in out
    )
    assert (
        "slack #default │ 🔴 Stopped resnet50-no-debugger-2026-11-30-02-12-00: metric guard loss-diverging fired" in out
    )
    assert "🟠 Would have stopped bert-finetune-2026-11-30-02-13-00" in out
    assert "All expectations met." in out
    assert seed.summary["mnist"][4:] == ["2", "Stopped"]  # the rule error, then the stop (later findings fold into it)
    assert seed.summary["resnet"][4:] == ["1", "Stopped"]


def test_the_stop_message_and_the_summary_show_spend_so_far_and_spend_avoided(seed: Played) -> None:
    # ml.g5.2xlarge at the recorded $1.515 an hour: trained from +00:01 to the stop at +00:06 (5 min: $0.13), and a
    # day's MaxRuntimeInSeconds less those 5 minutes left (86,100 s: $36.23)
    stop = seed.out.split("🔴 Stopped pytorch-mnist-lr01-2026-11-30-02-10-00", 1)[1].split("\n[+", 1)[0]
    assert "│ Spend: $0.13 so far · up to $36.23 avoided" in stop
    assert "│ Spend: $0.08 so far\n" in seed.out  # the rule error at +00:04: no stop in question
    assert "│ Spend: $0.28 so far\n" in seed.out  # bert: a would-stop avoided nothing (its document still says)
    header = seed.out.split("\nSummary\n", 1)[1].splitlines()[0]
    assert [cell.strip() for cell in header.split("│")][3:5] == ["spent so far", "avoided"]
    assert seed.summary["mnist"][2:4] == ["$0.13", "up to $36.23"]
    assert seed.summary["resnet"][2:4] == ["$0.45", "up to $72.27"]  # two instances, 9 minutes
    assert seed.summary["bert"][2:4] == ["$0.28", "would: up to $36.08"]  # exempt: it was not stopped
    assert seed.summary["xgb"][2:4] == ["-", "-"]  # nothing announced, nothing priced


def test_prices_come_from_the_recorded_price_list_answer_through_the_adapter_and_say_so(seed: Played) -> None:
    assert "Price List API: recorded GetProducts answers played by botocore's Stubber (nothing reaches AWS)" in seed.out
    assert (
        "ml.g5.2xlarge: tests/events/pricing/get_products_ml_g5_2xlarge_us_east_1_two_pages.json (2 pages)" in seed.out
    )
    assert (
        "ml.g5.2xlarge: $1.515 an hour (2026-08-20), from the Price List API: here its recorded answer, "
        "played by botocore's Stubber" in seed.out
    )
    assert (
        "ml.g5.12xlarge: unknown (no price for ml.g5.12xlarge): no recorded answer, no entry in the shipped price table"
        in seed.out
    )
    price_list = seed.demo.aws.price_list
    assert price_list is not None
    # Both pages once (the jobs after the first are priced from the cache), then the unrecorded type once
    assert price_list.asked == [
        ("us-east-1", "ml.g5.2xlarge", 1),
        ("us-east-1", "ml.g5.2xlarge", 2),
        ("us-east-1", "ml.g5.12xlarge", None),
    ]


def test_a_job_over_its_budget_is_warned_once_then_stopped_by_the_sweeper(seed: Played) -> None:
    out = seed.out
    # 8 x ml.g5.2xlarge ($12.12 an hour) from +00:01: $3.03 at the sweep of +00:16, $5.05 at +00:26 (cap $5)
    warning = (
        "🟠 exp-vit-lr-sweep-2026-11-30-02-15-00: budget warning: $3.03 spent of its $5.00 budget (61 % of the cap)"
    )
    assert out.count(warning) == 1
    assert out.count("budget warning:") == 2  # the sweeper's line and the message: not again at +00:21
    assert "[+00:21] sweeper: scheduled run\n         guard: 2 running job(s)" in out
    stop = out.split("🔴 Stopped exp-vit-lr-sweep-2026-11-30-02-15-00: $5.05 spent of its $5.00 budget", 1)[1]
    assert (
        "│ Why: budgets[0] (jobs starting exp-): $5.00 cap, warned at 50 %, then stop: $5.05 spent (list price)" in stop
    )
    assert "│ Spend: $5.05 so far · up to $285.83 avoided" in stop
    assert (
        "guard: over budget: exp; idle GPUs: llm\n         guard: StopTrainingJob called for exp (the sweeper's)\n"
        in out
    )
    assert seed.summary["exp"] == [
        "budgets[0] Warning, budgets[0] Exceeded",
        "notified, stopped",
        "$5.05",
        "up to $285.83",
        "2",
        "Stopped",
    ]


def test_a_job_whose_gpus_idle_is_reported_from_its_hosts_gpu_utilization(seed: Played) -> None:
    out = seed.out
    assert (
        "llm: SageMaker publishes GPUUtilization of llm-finetune-2026-11-30-02-16-00/algo-1, one a minute from "
        "+00:06: 31, 29, 34, 30, 28, 33, … (mean 30.4)" in out
    )
    assert "slack #default │ 🟠 llm-finetune-2026-11-30-02-16-00: GPUs idle" in out
    assert "│ Spend: unknown: no price for ml.g5.12xlarge" in out
    assert seed.summary["llm"] == ["idle-gpu Idle", "notified", "unknown", "-", "1", "InProgress"]


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


def test_the_demos_config_is_the_one_simulate_and_the_deploy_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A policy that only routes critical messages to cdk.json's webhook `default`: valid, and posting to Slack, only
    # layered over cdk.json, as `make deploy CONFIG=FILE` reads it (the file alone names a webhook it lacks).
    config = tmp_path / "routing.json"
    config.write_text(json.dumps({"slack": {"by_severity": {"critical": "default"}}}))
    monkeypatch.chdir(ROOT)
    played: list[GuardConfig] = []

    class Recorded(Emulation):
        def __init__(self, config: GuardConfig | None = None, **kwargs: Any) -> None:
            played.append(config or GuardConfig())
            super().__init__(config, **kwargs)

    monkeypatch.setattr(emulator, "Emulation", Recorded)
    assert main(["simulate", "--config", str(config), str(EVENTS_DIR / "vanishing_gradient_issues_found.json")]) == 0
    out = io.StringIO()
    demo = demo_of(str(SCENARIOS / "dry_run.json"), config, out=out)
    assert demo.scenario.config == played[0] == configs.deployed(config).config
    assert set(played[0].slack.webhooks) == {"default"}  # cdk.json's webhook, which the file's routing names
    capsys.readouterr()
    demo.run()
    assert "slack #default │ 🔴 Stopped cnn-dry-run-2026-11-30-03-00-00: rule Overfit found issues" in out.getvalue()
