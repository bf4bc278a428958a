from __future__ import annotations

import json
from pathlib import Path

import pytest

from training_guard.config import Action, ConfigError, GuardConfig, SlackConfig, SlackWebhook

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
    examples = sorted((CDK_JSON.parent / "configs").glob("*.json"))
    assert examples
    for example in examples:
        GuardConfig.from_json(example.read_text(), source=str(example))
