from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from training_guard.config.model import (
    MAX_TRAINING_DAYS,
    MIN_DEDUP_TTL_DAYS,
    SCHEMA_KEY,
    Action,
    ConfigError,
    GuardConfig,
    MetricGuard,
    QDeveloperConfig,
    SlackConfig,
    SlackWebhook,
    StallGuard,
    settings_of,
)

CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"


def test_defaults_stop_on_debugger_findings_and_notify_on_profiler_findings() -> None:
    config = GuardConfig()
    assert config.action_for("VanishingGradient", profiler=False) is Action.STOP
    assert config.action_for("LowGPUUtilization", profiler=True) is Action.NOTIFY
    assert config.dry_run is False
    assert config.min_training_minutes == 0
    assert config.notifications.completed is False
    assert config.notifications.failed is True


def test_per_rule_action_overrides_the_kind_default() -> None:
    config = GuardConfig.from_dict({"rules": {"actions": {"LossNotDecreasing": "notify", "LowGPUUtilization": "stop"}}})
    assert config.action_for("LossNotDecreasing", profiler=False) is Action.NOTIFY
    assert config.action_for("LowGPUUtilization", profiler=True) is Action.STOP
    assert config.action_for("ExplodingTensor", profiler=False) is Action.STOP


def test_the_shipped_cdk_json_context_is_the_defaults_plus_one_slack_webhook() -> None:
    context = json.loads(CDK_JSON.read_text())["context"]["training-guard"]
    shipped = GuardConfig.from_dict(context)
    assert shipped == GuardConfig(slack=SlackConfig(webhooks={"default": SlackWebhook()}, default="default"))


def test_serialized_form_round_trips() -> None:
    config = GuardConfig.from_dict(
        {
            "rules": {"actions": {"X": "ignore"}, "profiler_default": "stop"},
            "dry_run": True,
            "jobs": {"include_prefixes": ["prod-"], "exclude_prefixes": ["prod-scratch-"]},
            "emails": ["ml-oncall@example.com"],
            "min_training_minutes": 15,
        }
    )
    assert GuardConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"rules": {"actions": {"LossNotDecreasing": "halt"}}}, "rules.actions.LossNotDecreasing: must be one of"),
        ({"rules": {"debugger_default": "STOP"}}, "rules.debugger_default: must be one of stop, notify, ignore"),
        ({"dry_run": "yes"}, "dry_run: must be true or false"),
        ({"min_training_minutes": -1}, "min_training_minutes: must be between 0 and"),
        ({"min_training_minutes": 1.5}, "min_training_minutes: must be a whole number"),
        ({"jobs": {"include_prefixes": "prod-"}}, "jobs.include_prefixes: must be a list of non-empty strings"),
        ({"tags": {"exempt": ""}}, "tags.exempt: must be a non-empty string"),
        ({"emails": ["not-an-address"]}, "emails[0]: not an e-mail address"),
        ({"dry_rn": True}, "dry_rn: unknown setting (did you mean 'dry_run'?)"),
        ({"notifications": {"complete": True}}, "notifications.complete: unknown setting (did you mean 'completed'?)"),
        ({"rules": []}, "rules: must be an object, got a list"),
        ([], "(document): must be an object"),
    ],
)
def test_each_mistake_is_reported_with_its_field_path(data: object, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        GuardConfig.from_dict(data)
    assert expected in str(caught.value)


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        GuardConfig.from_dict({"dry_run": 1, "min_training_minutes": "5", "colour": "blue"})
    assert len(caught.value.problems) == 3


def test_invalid_json_names_the_source() -> None:
    with pytest.raises(ConfigError, match=r"(?s)prod\.json is invalid:.*not valid JSON"):
        GuardConfig.from_json("{", source="prod.json")


@pytest.mark.parametrize(
    ("include", "exclude", "job", "selected"),
    [
        ((), (), "anything", True),
        (("prod-",), (), "prod-resnet", True),
        (("prod-",), (), "dev-resnet", False),
        ((), ("scratch-",), "scratch-1", False),
        (("prod-",), ("prod-scratch-",), "prod-scratch-1", False),
    ],
)
def test_job_selection_by_name_prefix(
    include: tuple[str, ...], exclude: tuple[str, ...], job: str, selected: bool
) -> None:
    config = GuardConfig.from_dict({"jobs": {"include_prefixes": list(include), "exclude_prefixes": list(exclude)}})
    assert config.selects(job) is selected


def test_every_shipped_example_config_is_valid() -> None:
    examples = sorted(p for p in (CDK_JSON.parent / "configs").glob("*.json") if p.name != "schema.json")
    assert examples
    for example in examples:
        GuardConfig.from_json(example.read_text(), source=str(example))


def test_an_empty_document_reads_as_exactly_the_dataclass_defaults() -> None:
    # The reader has no defaults of its own: it takes each one from the declaration.
    assert GuardConfig.from_dict({}) == GuardConfig()
    assert GuardConfig.from_dict(None) == GuardConfig()
    assert GuardConfig.from_dict({"stall": {}}).stall == StallGuard()
    guard = GuardConfig.from_dict({"metric_guards": [{"name": "a", "metric": "m", "threshold": 1}]}).metric_guards[0]
    assert guard == MetricGuard(name="a", metric="m", threshold=1.0)


@pytest.mark.parametrize(("periods", "datapoints"), [(1, 1), (2, 2), (3, 3), (10, 3)])
def test_absent_datapoints_default_to_three_but_never_more_than_periods(periods: int, datapoints: int) -> None:
    guard = {"name": "a", "metric": "m", "threshold": 1, "periods": periods}
    assert GuardConfig.from_dict({"metric_guards": [guard]}).metric_guards[0].datapoints == datapoints


def test_explicit_datapoints_beyond_periods_are_refused() -> None:
    guard = {"name": "a", "metric": "m", "threshold": 1, "periods": 2, "datapoints": 3}
    with pytest.raises(ConfigError, match=re.escape("metric_guards[0].datapoints: cannot exceed periods (3 > 2)")):
        GuardConfig.from_dict({"metric_guards": [guard]})


def test_a_webhook_named_default_is_the_default_route_unless_another_is_named() -> None:
    assert GuardConfig.from_dict({"slack": {"webhooks": {"default": {}}}}).slack.default == "default"
    assert GuardConfig.from_dict({"slack": {"webhooks": {"default": None}}}).slack.webhooks == {
        "default": SlackWebhook()
    }
    named = GuardConfig.from_dict({"slack": {"webhooks": {"default": {}, "ops": {}}, "default": "ops"}})
    assert named.slack.default == "ops"


def test_dedup_ttl_outlives_the_longest_training_job() -> None:
    # SageMaker runs a training job for at most 28 days (MaxRuntimeInSeconds), 30 in total with
    # the upload after it; the sweeper re-decides a running job every few minutes, so a shorter
    # memory announces the same finding again late in a long job.
    assert MAX_TRAINING_DAYS == 28
    assert MIN_DEDUP_TTL_DAYS == 31
    assert GuardConfig().dedup_ttl_days >= MIN_DEDUP_TTL_DAYS
    assert GuardConfig.from_dict({"dedup_ttl_days": MIN_DEDUP_TTL_DAYS}).dedup_ttl_days == 31
    with pytest.raises(ConfigError) as caught:
        GuardConfig.from_dict({"dedup_ttl_days": MIN_DEDUP_TTL_DAYS - 1})
    [problem] = caught.value.problems
    assert problem.startswith("dedup_ttl_days: must be between 31 and 365, got 30 (")
    assert "whole life" in problem
    assert "28 days" in problem


def test_a_schema_reference_is_ignored_at_the_top_and_unknown_anywhere_else() -> None:
    assert GuardConfig.from_dict({SCHEMA_KEY: "./schema.json", "dry_run": True}) == GuardConfig(dry_run=True)
    with pytest.raises(ConfigError, match=re.escape("rules.$schema: unknown setting")):
        GuardConfig.from_dict({"rules": {SCHEMA_KEY: "./schema.json"}})


def test_a_whole_number_written_with_a_decimal_point_is_that_number() -> None:
    config = GuardConfig.from_dict({"sweep_minutes": 10.0, "dedup_ttl_days": 40.0})
    assert config.sweep_minutes == 10
    assert isinstance(config.sweep_minutes, int)
    assert GuardConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"stall": {"action": "ignore"}}, 'stall.action: must be one of notify, stop, got "ignore" (set stall to null'),
        ({"budgets": [{"max_usd": 0}]}, "budgets[0].max_usd: must be a positive amount of US dollars, got 0"),
        ({"budgets": [{"max_usd": 5, "warn_at": 1}]}, "budgets[0].warn_at: must be a share of the cap from 0 up to"),
        ({"budgets": [{"max_usd": 5, "action": "ignore"}]}, "budgets[0].action: must be one of notify, stop"),
        ({"budgets": [{"warn_at": 0.5}]}, "budgets[0].max_usd: "),
        ({"budget_defaults": {"warn_at": -0.1}}, "budget_defaults.warn_at: must be a share of the cap"),
        ({"idle_gpu": {"threshold_percent": 0}}, "idle_gpu.threshold_percent: must be between 1 and 100, got 0"),
        ({"idle_gpu": {"minutes": 4}}, "idle_gpu.minutes: must be between 5 and 1440, got 4"),
        ({"digest": {"weekday": "monday"}}, "digest.weekday: must be one of MON, TUE"),
        ({"digest": {"hour_utc": 24}}, "digest.hour_utc: must be between 0 and 23, got 24"),
        (
            {"q_developer": {"slack_workspace_id": "T01"}},
            "q_developer.slack_channel_id: must be a non-empty string; it is required",
        ),
        (
            {"q_developer": {"slack_workspace_id": "t01", "slack_channel_id": "C01"}},
            "q_developer.slack_workspace_id: must be a Slack workspace ID (capital letters and digits, e.g. T0123ABCD)",
        ),
        (
            {"q_developer": {"slack_workspace_id": "T01", "slack_channel_id": "c01"}},
            "q_developer.slack_channel_id: must be a Slack channel ID (capital letters and digits, e.g. C0123ABCD)",
        ),
        ({"slack": {"webhooks": {"bad name": {}}}}, "slack.webhooks.bad name: webhook names are 1-40 letters"),
        (
            {"slack": {"webhooks": {"a": {}}, "by_severity": {"urgent": "a"}}},
            "slack.by_severity.urgent: not a severity",
        ),
        (
            {"slack": {"webhooks": {"a": {}}, "by_severity": {"critical": "b"}}},
            "slack.by_severity.critical: names no webhook in slack.webhooks: 'b'",
        ),
        ({"slack": {"webhooks": {"a": {}}}}, "slack.default: set a default webhook, or routes"),
        ({"emails": ["a b@c"]}, "emails[0]: not an e-mail address: 'a b@c'"),
        (
            {"metric_guards": [{"name": "a", "metric": "m", "threshold": 1}] * 51},
            "metric_guards: at most 50 entries, got 51",
        ),
    ],
)
def test_declared_constraints_and_cross_field_checks_name_the_field(data: object, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        GuardConfig.from_dict(data)
    assert expected in str(caught.value)


def test_every_setting_is_declared_with_a_meaning() -> None:
    seen: set[type] = set()
    todo: list[type] = [GuardConfig]
    while todo:
        cls = todo.pop()
        seen.add(cls)
        for declared in settings_of(cls):
            assert declared.setting.doc.strip(), f"{cls.__name__}.{declared.name} has no meaning"
            if declared.item_kind == "section" and declared.item not in seen:
                todo.append(declared.item)
    assert {MetricGuard, StallGuard, QDeveloperConfig, SlackConfig, SlackWebhook} <= seen


def test_twenty_webhooks_at_most_each_secret_named_not_by_arn() -> None:
    from training_guard.config.model import MAX_WEBHOOKS, ConfigError

    hooks: dict[str, dict[str, str]] = {f"team-{i}": {} for i in range(MAX_WEBHOOKS - 1)}
    hooks["default"] = {}
    assert len(GuardConfig.from_dict({"slack": {"webhooks": hooks}}).slack.webhooks) == MAX_WEBHOOKS
    with pytest.raises(ConfigError, match=r"slack\.webhooks: at most 20 entries, got 21"):
        GuardConfig.from_dict({"slack": {"webhooks": {**hooks, "one-more": {}}}})
    with pytest.raises(ConfigError, match=r"secret_name: a secret name is 1-100 letters"):
        GuardConfig.from_dict(
            {"slack": {"webhooks": {"default": {"secret_name": "arn:aws:secretsmanager:us-east-1:1:secret:x"}}}}
        )
    assert GuardConfig.from_dict({"slack": {"webhooks": {"default": {"secret_name": "s" * 100}}}})
    with pytest.raises(ConfigError, match="secret_name"):
        GuardConfig.from_dict({"slack": {"webhooks": {"default": {"secret_name": "s" * 101}}}})


def test_budgets_idle_gpu_and_the_digest_read_with_their_defaults() -> None:
    config = GuardConfig.from_dict(
        {
            "budgets": [{"job_prefix": "exp-", "max_usd": 200}, {"job_tag": "team", "max_usd": 50.5, "warn_at": 0}],
            "idle_gpu": {},
            "digest": {"weekday": "fri", "enabled": False},
        }
    )
    first, second = config.budgets
    assert (first.job_prefix, first.max_usd, first.warn_at, first.action) == ("exp-", 200.0, 0.8, Action.STOP)
    assert (second.job_tag, second.max_usd, second.warn_at) == ("team", 50.5, 0.0)
    assert config.idle_gpu is not None
    assert (config.idle_gpu.threshold_percent, config.idle_gpu.minutes, config.idle_gpu.action) == (
        10,
        15,
        Action.NOTIFY,
    )
    assert (config.digest.enabled, config.digest.weekday, config.digest.hour_utc) == (False, "FRI", 9)
    defaults = GuardConfig()
    assert defaults.budgets == ()
    assert defaults.idle_gpu is None
    assert defaults.digest.enabled
    assert defaults.tags.budget_usd == "training-guard:budget-usd"
