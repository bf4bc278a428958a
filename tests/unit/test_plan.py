"""`training-guard plan`: what the guard will do, read from the configuration a deploy would use.

The plan reads cdk.json with the file layered over it (infra/guard_config.py, the app's own reader)
and describes metric guards with the queries the stack deploys (training_guard.domain.metric_guards).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra import guard_config
from training_guard.config.model import MAX_FLEET_GUARDS, MAX_WEBHOOKS, GuardConfig
from training_guard.domain.metric_guards import insights_query
from training_guard_local import cli
from training_guard_local.plan import plan, render

ROOT = Path(__file__).resolve().parents[2]
CDK_JSON = ROOT / "cdk.json"
EXAMPLE = ROOT / "configs" / "example.json"
BASE = "cdk.json context 'training-guard'"

SHIPPED_PLAN = """\
Training Guard plan: cdk.json context 'training-guard'
Debugger and Profiler rules reporting IssuesFound on a running job
  Debugger rules: stop   Profiler rules: notify   (rules.debugger_default, rules.profiler_default)
  a rule in Error is notified unless ignored, never stopped for (it says nothing about the model)
Stopping
  dry run: off: the guard calls StopTrainingJob, once per job, and tags the job
  never stopped: jobs tagged training-guard:exempt or training-guard:notify-only (notified "would have stopped")
  grace: none: a finding stops at once (min_training_minutes = 0)
  jobs guarded: every job
Budgets (list price, checked at every sweep): a job tagged training-guard:budget-usd=<USD> is capped at it, \
warned at 80 %, then stop (budget_defaults)
  budgets: none (budgets): only a job's own tag caps it
Metric guards: none (metric_guards)
  per-job guard tags (training-guard:alarm:<metric>): honoured
  stall check: off (stall): a job that stops logging metrics is not noticed
  idle GPU check: off (idle_gpu): a job whose GPUs sit idle is not noticed
  sweeper: every 5 min (lost events, still-firing guards, orphaned alarms, budgets, idle GPUs)
Notifications: one per transition, to the SNS topic (stack output NotificationTopicArn)
  job lifecycle: failed, stopped, spot interrupted (not: completed)
  e-mail: off: no addresses (emails)
  Slack: 1 webhook (slack.webhooks)
    default: secret TrainingGuard/slack/default, created by the stack: put the webhook URL in it
    routing: everything -> default
  Amazon Q Developer: off: not configured (q_developer)
  a handled transition is remembered 35 days (dedup_ttl_days): never announced twice
Off: metric guards, stall check, idle GPU check, e-mail, Q Developer"""

EVERYTHING_OFF = {
    "rules": {"debugger_default": "ignore", "profiler_default": "ignore"},
    "notifications": {"failed": False, "stopped": False, "spot_interrupted": False, "completed": False},
    "slack": None,
    "q_developer": None,
    "emails": [],
    "metric_guards": [],
    "stall": None,
    "per_job_alarms": False,
}


def text_for(file: Path | None) -> str:
    layered = guard_config.from_cdk_json(CDK_JSON, str(file) if file else None)
    return render(plan(layered.config, layered.layers))


def text_of(config: dict[str, Any]) -> str:
    return render(plan(GuardConfig.from_dict(config), (BASE,)))


def test_the_shipped_configuration_reads_as_this_plan() -> None:
    assert text_for(None) == SHIPPED_PLAN


def test_the_example_file_is_shown_over_cdk_json_and_keeps_its_slack_webhook() -> None:
    lines = text_for(EXAMPLE).splitlines()
    assert lines[0] == f"Training Guard plan: {BASE} + {EXAMPLE}"
    assert lines[1] == "  (the file layers over cdk.json: objects merge, other values replace, null removes)"
    assert "  by name (rules.actions): stop Overtraining; notify LossNotDecreasing" in lines
    assert (
        "  grace: a finding in the first 10 min of training is deferred, then stops the job (min_training_minutes)"
        in lines
    )
    assert "  jobs guarded: every job; not names starting scratch-" in lines
    assert "  e-mail: ml-oncall@example.com (each confirms its subscription once)" in lines
    # the file has no `slack`: cdk.json's webhook stays (before layering, the example deployed no notifier)
    assert "    default: secret TrainingGuard/slack/default, created by the stack: put the webhook URL in it" in lines
    assert lines[-1] == "Off: metric guards, stall check, idle GPU check, Q Developer"


def test_everything_off_is_said_line_by_line() -> None:
    lines = text_of(EVERYTHING_OFF).splitlines()
    assert (
        "  Debugger rules: ignore   Profiler rules: ignore   (rules.debugger_default, rules.profiler_default)" in lines
    )
    assert "  per-job guard tags (training-guard:alarm:<metric>): ignored (per_job_alarms = false)" in lines
    assert "  stall check: off (stall): a job that stops logging metrics is not noticed" in lines
    assert "  job lifecycle: none (not: failed, stopped, spot interrupted, completed)" in lines
    assert "  e-mail: off: no addresses (emails)" in lines
    assert "  Slack: off: no webhooks configured (slack.webhooks)" in lines
    assert "  Amazon Q Developer: off: not configured (q_developer)" in lines
    assert "  idle GPU check: off (idle_gpu): a job whose GPUs sit idle is not noticed" in lines
    assert (
        lines[-1] == "Off: metric guards, stall check, idle GPU check, per-job guard tags, e-mail, Slack, Q Developer"
    )


def test_a_file_can_turn_off_the_slack_webhook_cdk_json_configures(tmp_path: Path) -> None:
    file = tmp_path / "no-slack.json"
    file.write_text(json.dumps({"slack": None}))
    assert "  Slack: off: no webhooks configured (slack.webhooks)" in text_for(file).splitlines()


def test_metric_guards_show_the_query_the_stack_deploys() -> None:
    config = GuardConfig.from_dict(
        {
            "metric_guards": [
                {"name": "loss-diverging", "metric": "train:loss", "threshold": 5, "periods": 5, "action": "stop"},
                {
                    "name": "idle-gpu",
                    "metric": "GPUUtilization",
                    "statistic": "avg",
                    "comparison": "<",
                    "threshold": 5,
                    "datapoints": 20,
                    "periods": 30,
                    "job_prefix": "prod-",
                    "job_tag": "team",
                },
            ]
        }
    )
    lines = render(plan(config, (BASE,))).splitlines()
    start = lines.index("Metric guards: 2, one Metrics Insights alarm each (every job is a contributor)")
    assert lines[start + 1 : start + 5] == [
        "  metric_guards.loss-diverging: MAX(train:loss) > 5 for 3 of 5 min -> stop",
        '    SELECT MAX("train:loss") FROM "/aws/sagemaker/TrainingJobs" GROUP BY TrainingJobName ORDER BY MAX() DESC',
        "  metric_guards.idle-gpu: AVG(GPUUtilization) < 5 for 20 of 30 min -> notify"
        " (jobs starting prod-; jobs tagged team)",
        '    SELECT AVG("GPUUtilization") FROM "/aws/sagemaker/TrainingJobs" GROUP BY Host ORDER BY AVG() ASC',
    ]
    document = plan(config, (BASE,))
    assert [g["query"] for g in document["metric_guards"]] == [insights_query(g) for g in config.metric_guards]
    assert [g["alarm"] for g in document["metric_guards"]] == [
        "training-guard-loss-diverging",
        "training-guard-idle-gpu",
    ]


def test_stopping_shows_dry_run_opt_in_and_selection() -> None:
    lines = text_of(
        {
            "dry_run": True,
            "stop_requires_tag": "training-guard:guarded",
            "jobs": {"include_prefixes": ["prod-", "exp-"]},
        }
    ).splitlines()
    assert '  dry run: ON: nothing is stopped; "would have stopped" is notified instead (dry_run)' in lines
    assert "  opt-in: only jobs tagged training-guard:guarded=true may be stopped (IAM enforces it too)" in lines
    assert "  jobs guarded: only names starting prod-, exp-" in lines


def test_slack_routing_reads_in_the_order_the_notifier_applies_it() -> None:
    config = {
        "slack": {
            "webhooks": {"ops": {}, "on-call": {}, "vision": {"secret_name": "teams/vision/slack"}},
            "default": "ops",
            "by_severity": {"critical": "on-call", "warning": "ops"},
            "team_tag": "team",
            "min_severity": "warning",
        },
        "stall": {"minutes": 45, "action": "stop"},
    }
    lines = text_of(config).splitlines()
    assert "  Slack: 3 webhooks (slack.webhooks)" in lines
    assert "    vision: secret teams/vision/slack" in lines
    assert (
        "    routing: info -> no webhook (min_severity warning); a job tagged team=<webhook> -> that webhook; "
        "warning -> ops; critical -> on-call; everything else -> ops"
    ) in lines
    assert "  stall check: a running job with no new metric for 45 min -> stop" in lines


def test_slack_app_mode_names_its_channels_its_two_secrets_and_the_request_url() -> None:
    config = {
        "slack": {
            "mode": "app",
            "webhooks": None,
            "app": {"channels": {"default": "C0ALERTS", "oncall": "C0ONCALL"}, "allowed_users": ["U0ALICE", "U0BOB"]},
            "by_severity": {"critical": "oncall"},
        }
    }
    lines = text_of(config).splitlines()
    assert (
        "  Slack: app mode (slack.mode): one thread per job in default=C0ALERTS, oncall=C0ONCALL; buttons for 2 "
        "user(s) (slack.app.allowed_users)"
    ) in lines
    assert (
        "    put the bot token in TrainingGuard/slack/slack-app-bot-token and the signing secret in "
        "TrainingGuard/slack/slack-app-signing-secret; the app's request URL is the stack output "
        "SlackInteractivityUrl"
    ) in lines
    assert "    routing: critical -> oncall; everything else -> default" in lines
    assert not [line for line in lines if "webhook" in line and "Slack:" in line]


def test_an_organization_names_its_hub_members_rollout_and_routing_by_account_and_unit() -> None:
    lines = text_for(ROOT / "configs" / "organization.json").splitlines()
    assert lines[2] == (
        "Organization: hub 111122223333 in eu-west-1, 2 member account(s) (444455556666, 777788889999); members get "
        "a StackSet to ou-ab12-cdef3456; any other account's events are ignored"
    )
    assert (
        "    routing: account 111122223333 -> platform; unit ou-ab12-cdef3456 -> research; everything else -> default"
    ) in lines
    assert not any(line.startswith("Organization") for line in text_for(None).splitlines())


def test_the_largest_configuration_still_fits_one_screen() -> None:
    guards = [{"name": f"guard-{i}", "metric": "train:loss", "threshold": i} for i in range(MAX_FLEET_GUARDS)]
    webhooks: dict[str, Any] = {f"team-{i}": {} for i in range(MAX_WEBHOOKS)}
    config = {
        "metric_guards": guards,
        "slack": {"webhooks": webhooks, "default": "team-0", "by_severity": {"critical": "team-1"}, "team_tag": "t"},
        "emails": [f"person-{i}@example.com" for i in range(10)],
        "stop_requires_tag": "guarded",
        "rules": {"actions": {"A": "stop", "B": "notify", "C": "ignore"}},
        "stall": {"minutes": 30},
        "budgets": [{"job_prefix": f"team-{i}-", "max_usd": 100 + i} for i in range(20)],
        "idle_gpu": {},
    }
    lines = render(plan(GuardConfig.from_dict(config), (BASE, "prod.json"))).splitlines()
    assert len(lines) <= 40
    assert "  ... and 46 more (--json lists them all)" in lines
    assert lines[
        lines.index("Metric guards: 50, one Metrics Insights alarm each (every job is a contributor)") - 1
    ] == (
        "  otherwise the first that selects it (budgets): jobs starting team-0- $100.00, warned at 80 %, then stop; "
        "jobs starting team-1- $101.00, warned at 80 %, then stop; jobs starting team-2- $102.00, warned at 80 %, "
        "then stop; and 17 more"
    )
    assert "    ... and 17 more (--json lists them all)" in lines
    assert "  e-mail: person-0@example.com, person-1@example.com, person-2@example.com and 7 more" in " ".join(lines)


def test_the_command_prints_the_plan_of_the_project_folder(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(ROOT)
    assert cli.main(["plan"]) == 0
    assert capsys.readouterr().out == SHIPPED_PLAN + "\n"


def test_the_json_document_holds_what_the_text_says(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(ROOT)
    assert cli.main(["plan", "--json", "--config", "configs/example.json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["layers"] == [BASE, "configs/example.json"]
    assert document["rules"]["by_action"] == {"stop": ["Overtraining"], "notify": ["LossNotDecreasing"], "ignore": []}
    assert document["min_training_minutes"] == 10
    assert document["emails"] == ["ml-oncall@example.com"]
    assert document["slack"]["webhooks"] == {
        "default": {"secret_name": "TrainingGuard/slack/default", "created_by_the_stack": True}
    }
    assert document["off"] == ["metric guards", "stall check", "idle GPU check", "Q Developer"]
    assert document["budgets"] == {
        "tag": "training-guard:budget-usd",
        "defaults": {"warn_at": 0.8, "action": "stop"},
        "entries": [],
    }
    assert document["idle_gpu"] is None


def test_budgets_and_the_idle_gpu_check_are_shown_as_the_sweeper_applies_them() -> None:
    config = {
        "budgets": [
            {"job_prefix": "exp-", "max_usd": 200},
            {"job_tag": "team", "max_usd": 1250.5, "warn_at": 0, "action": "notify"},
            {"max_usd": 50, "job_prefix": "scratch-", "job_tag": "cheap"},
        ],
        "budget_defaults": {"warn_at": 0.5, "action": "notify"},
        "tags": {"budget_usd": "cost-cap"},
        "idle_gpu": {"threshold_percent": 5, "minutes": 30, "ignore_first_minutes": 20, "action": "stop"},
    }
    lines = text_of(config).splitlines()
    assert (
        "Budgets (list price, checked at every sweep): a job tagged cost-cap=<USD> is capped at it, warned at 50 %, "
        "then notify (budget_defaults)"
    ) in lines
    assert (
        "  otherwise the first that selects it (budgets): jobs starting exp- $200.00, warned at 80 %, then stop; "
        "jobs tagged team $1,250.50, no warning, then notify; jobs starting scratch- and jobs tagged cheap $50.00, "
        "warned at 80 %, then stop"
    ) in lines
    assert (
        "  idle GPU check: GPUs below 5 % (per GPU) for 30 min in a row, after the first 20 min of training -> stop "
        "(idle_gpu)"
    ) in lines
    document = plan(GuardConfig.from_dict(config), (BASE,))
    assert document["budgets"]["entries"][1] == {
        "name": "budgets[1]",
        "describe": "budgets[1] (jobs tagged team): $1,250.50 cap, no warning, then notify",
        "max_usd": 1250.5,
        "warn_at": 0.0,
        "action": "notify",
        "job_prefix": None,
        "job_tag": "team",
    }
    assert "idle GPU check" not in document["off"]


def test_an_invalid_file_is_one_line_naming_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"dry_rn": True}))
    monkeypatch.chdir(ROOT)
    assert cli.main(["plan", "--config", str(bad)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"training-guard plan: {bad} (layered over {BASE}) is invalid: - dry_rn: unknown setting")


def test_a_missing_file_is_named(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(ROOT)
    assert cli.main(["plan", "--config", "configs/nonexistent.json"]) == 2
    # in the words of every command that reads a configuration file
    assert capsys.readouterr().err == (
        "training-guard plan: configs/nonexistent.json: cannot read config: No such file or directory\n"
    )


def test_outside_the_project_folder_it_says_where_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["plan"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"training-guard plan: no cdk.json in {tmp_path}: run it from the project folder"
    )


def test_the_documented_example_is_what_the_command_prints(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    command = "$ .venv/bin/training-guard plan --config configs/example.json\n"
    shown = doc[doc.index(command) + len(command) :].split("```", 1)[0]
    monkeypatch.chdir(ROOT)
    assert cli.main(["plan", "--config", "configs/example.json"]) == 0
    assert capsys.readouterr().out == shown
