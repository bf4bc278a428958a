"""A file named with `-c config=FILE` layers over cdk.json's configuration instead of replacing it.

Before, `make deploy CONFIG=configs/example.json` (a file without `slack`) silently deployed no
notifier, no webhook secret and no chat queue although cdk.json configures a webhook.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App

from infra import guard_config, outputs
from infra.guard_config import layer
from tests.infra.conftest import CDK_JSON, Synth, shipped_context
from training_guard.config.model import ConfigError, GuardConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "configs" / "example.json"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return Synth(tmp_path_factory.mktemp("example"), {"config": str(EXAMPLE)})


def test_the_example_file_without_slack_keeps_the_notifier_cdk_json_configures(example: Synth) -> None:
    assert "slack" not in json.loads(EXAMPLE.read_text())
    assert shipped_context()["training-guard"]["slack"]["webhooks"] == {"default": {}}
    assert example.one("AWS::Lambda::Function", "ChatNotifier")
    assert example.one("AWS::Lambda::EventSourceMapping")
    _, secret = example.one("AWS::SecretsManager::Secret")
    assert secret["Properties"]["Name"] == "TrainingGuard/slack/default"
    assert outputs.CHAT_QUEUE in example.json["Outputs"]


def test_what_the_functions_receive_is_the_file_over_cdk_json(example: Synth) -> None:
    shipped = example.shipped_config("JobEvents")
    file = json.loads(EXAMPLE.read_text())
    assert shipped.emails == tuple(file["emails"])  # from the file
    assert shipped.min_training_minutes == file["min_training_minutes"]
    assert dict(shipped.rules.actions) == file["rules"]["actions"]
    assert list(shipped.slack.webhooks) == ["default"]  # from cdk.json
    assert shipped.slack.default == "default"
    [email] = [
        s for s in example.resources("AWS::SNS::Subscription").values() if s["Properties"]["Protocol"] == "email"
    ]
    assert email["Properties"]["Endpoint"] == "ml-oncall@example.com"


def test_objects_merge_at_every_depth() -> None:
    base = {"rules": {"debugger_default": "stop", "actions": {"A": "notify"}}, "dry_run": False}
    top = {"rules": {"actions": {"B": "stop"}}}
    assert layer(base, top) == {
        "rules": {"debugger_default": "stop", "actions": {"A": "notify", "B": "stop"}},
        "dry_run": False,
    }


def test_lists_and_scalars_replace_what_is_beneath() -> None:
    base = {"emails": ["a@example.com", "b@example.com"], "jobs": {"exclude_prefixes": ["tmp-"]}, "dry_run": False}
    top = {"emails": ["c@example.com"], "jobs": {"exclude_prefixes": []}, "dry_run": True}
    assert layer(base, top) == {"emails": ["c@example.com"], "jobs": {"exclude_prefixes": []}, "dry_run": True}


def test_null_removes_the_value_beneath_so_the_built_in_default_applies() -> None:
    base = {"slack": {"webhooks": {"default": {}, "ops": {}}}, "q_developer": {"slack_channel_id": "C1"}}
    assert layer(base, {"slack": None, "q_developer": None}) == {}
    assert layer(base, {"slack": None}) == {"q_developer": {"slack_channel_id": "C1"}}
    assert layer(base, {"slack": {"webhooks": {"default": None}}}) == {
        "slack": {"webhooks": {"ops": {}}},
        "q_developer": {"slack_channel_id": "C1"},
    }
    # a null inside an object the base lacks is dropped too, not kept as null
    assert layer({}, {"stall": {"minutes": 30, "action": None}}) == {"stall": {"minutes": 30}}


def test_an_object_replaces_a_value_that_is_not_one() -> None:
    assert layer({"slack": "oops"}, {"slack": {"min_severity": "warning"}}) == {"slack": {"min_severity": "warning"}}
    assert layer({"slack": {"min_severity": "info"}}, {"slack": "oops"}) == {"slack": "oops"}


def test_the_layers_are_not_changed() -> None:
    base: dict[str, Any] = {"rules": {"actions": {"A": "notify"}}}
    top: dict[str, Any] = {"rules": {"actions": {"B": "stop"}}}
    layer(base, top)
    assert base == {"rules": {"actions": {"A": "notify"}}}
    assert top == {"rules": {"actions": {"B": "stop"}}}


def test_a_file_can_remove_one_webhook_and_route_to_another(tmp_path: Path) -> None:
    file = tmp_path / "ops.json"
    file.write_text(json.dumps({"slack": {"webhooks": {"default": None, "ops": {}}, "default": "ops"}}))
    layered = guard_config.from_cdk_json(CDK_JSON, str(file))
    assert list(layered.config.slack.webhooks) == ["ops"]
    assert layered.config.slack.default == "ops"


def test_a_mistake_is_reported_for_the_layered_document_naming_both_layers(tmp_path: Path) -> None:
    file = tmp_path / "bad.json"
    file.write_text(
        json.dumps({"slack": {"webhooks": {"default": None}, "by_severity": {"critical": "ops"}}, "dry_rn": True})
    )
    with pytest.raises(ConfigError) as raised:
        guard_config.from_cdk_json(CDK_JSON, str(file))
    message = str(raised.value)
    assert message.startswith(f"{file} (layered over cdk.json context 'training-guard') is invalid:")
    assert "dry_rn: unknown setting (did you mean 'dry_run'?)" in message
    # the layered document is checked as a whole: the route names the webhook the file removed
    assert "slack.by_severity.critical: names no webhook in slack.webhooks: 'ops'" in message


def test_a_file_that_is_not_an_object_is_named(tmp_path: Path) -> None:
    file = tmp_path / "list.json"
    file.write_text("[]")
    with pytest.raises(ConfigError, match=r"\(document\): must be an object, got a list"):
        guard_config.from_cdk_json(CDK_JSON, str(file))


def test_a_binary_file_or_cdk_json_is_named_never_a_traceback(tmp_path: Path) -> None:
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x00\xd0\xff{}")
    with pytest.raises(
        ConfigError, match=r"model.bin is invalid:\s+- \(document\): not UTF-8 text: invalid continuation"
    ):
        guard_config.from_cdk_json(CDK_JSON, str(binary))
    with pytest.raises(ConfigError, match=r"model.bin is invalid:\s+- \(document\): not UTF-8 text"):
        guard_config.from_cdk_json(binary, None)


def test_the_app_and_the_cli_read_the_same_configuration(tmp_path: Path) -> None:
    file = tmp_path / "prod.json"
    file.write_text(json.dumps({"dry_run": True, "slack": {"min_severity": "warning"}}))
    context = {**shipped_context(), "config": str(file)}
    from_app = guard_config.load(App(context=context).node)
    layered = guard_config.from_cdk_json(CDK_JSON, str(file))
    assert from_app == layered.config
    assert layered.layers == ("cdk.json context 'training-guard'", str(file))
    assert from_app.dry_run is True
    assert from_app.slack.min_severity == "warning"
    assert list(from_app.slack.webhooks) == ["default"]


def test_without_a_file_the_context_alone_is_the_configuration() -> None:
    layered = guard_config.from_cdk_json(CDK_JSON, None)
    assert layered.config == GuardConfig.from_dict(shipped_context()["training-guard"])
    assert layered.source == "cdk.json context 'training-guard'"


def test_a_context_given_as_json_text_is_layered_too(tmp_path: Path) -> None:
    file = tmp_path / "dry.json"
    file.write_text(json.dumps({"dry_run": True}))
    context = {"training-guard": json.dumps({"emails": ["a@example.com"]}), "config": str(file)}
    config = guard_config.load(App(context=context).node)
    assert (config.dry_run, config.emails) == (True, ("a@example.com",))
