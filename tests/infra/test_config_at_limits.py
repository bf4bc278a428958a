"""The configuration at its documented maxima deploys: it ships in a layer, not in the environment.

Lambda allows 4 KB of environment variables per function in aggregate, 5 layers per function, and
250 MB unzipped for a function with its layers.
https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.components import config_layer, functions
from tests.infra.conftest import Synth
from training_guard import contract
from training_guard.config.model import MAX_FLEET_GUARDS, MAX_WEBHOOKS, GuardConfig

FUNCTIONS = ("JobEventsHandler", "AlarmEvents", "Sweeper", "ChatNotifier")
# A value CloudFormation fills in at deploy time (a name, an ARN, a queue URL) counted generously,
# as the stack's own check does.
TOKEN_BYTES = 256


def _name(prefix: str, i: int, length: int = 40) -> str:
    """A name of exactly `length` characters (guard and webhook names allow at most 40)."""
    head = f"{prefix}{i:02d}-"
    return head + "x" * (length - len(head))


def largest_config() -> dict[str, Any]:
    webhooks: dict[str, Any] = {}
    for i in range(MAX_WEBHOOKS):
        # half created by the stack, half named secrets that already exist
        # (a named secret at the longest name the configuration accepts, 100 characters)
        webhooks[_name("team", i)] = {"secret_name": f"platform/ml/slack/{_name('channel', i, 82)}"} if i % 2 else {}
    names = list(webhooks)
    return {
        "metric_guards": [
            {
                "name": _name("guard", i),
                "metric": f"validation:{'very_long_metric_name_' * 4}{i}",
                "statistic": "AVG",
                "comparison": "<" if i % 2 else ">",
                "threshold": 0.000123 + i,
                "periods": 180,
                "datapoints": 120,
                "action": "stop" if i % 3 == 0 else "notify",
                "job_prefix": f"research-division-computer-vision-team-{i:02d}-experiment-",
                "job_tag": f"ml-platform:guards:{_name('tag', i)}",
            }
            for i in range(MAX_FLEET_GUARDS)
        ],
        "slack": {
            "webhooks": webhooks,
            "default": names[0],
            "by_severity": {"critical": names[1], "warning": names[2]},
            "team_tag": "team",
        },
        "stall": {"minutes": 45, "action": "stop"},
        "stop_requires_tag": "training-guard:guarded",
        "emails": [f"ml-oncall-{i}@example.com" for i in range(5)],
    }


@pytest.fixture(scope="module")
def largest(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    config = tmp_path_factory.mktemp("config") / "largest.json"
    document = largest_config()
    # The file layers over cdk.json, whose webhook `default` would be the 21st: null removes it.
    document["slack"]["webhooks"] = {"default": None, **document["slack"]["webhooks"]}
    config.write_text(json.dumps(document))
    return Synth(tmp_path_factory.mktemp("largest"), {"config": str(config)})


def environment_bytes(variables: dict[str, Any]) -> int:
    """An upper bound of a function's environment as Lambda counts it (keys and values)."""

    def value_bytes(value: Any) -> int:
        if isinstance(value, str):
            return len(value.encode())
        if isinstance(value, dict) and "Fn::Join" in value:
            return sum(value_bytes(part) for part in value["Fn::Join"][1])
        return TOKEN_BYTES  # Ref, Fn::GetAtt: a name, an ARN or a URL

    return sum(len(key.encode()) + value_bytes(value) for key, value in variables.items())


def test_the_largest_configuration_is_far_too_large_for_an_environment() -> None:
    # the point of the test: inline, this configuration alone would be several times Lambda's limit
    config = GuardConfig.from_dict(largest_config())
    assert len(config.metric_guards) == MAX_FLEET_GUARDS == 50
    assert len(config.slack.webhooks) == MAX_WEBHOOKS
    assert len(config.to_json().encode()) > 4 * functions.LAMBDA_ENV_MAX_BYTES


def test_every_function_environment_stays_under_4_kb(largest: Synth) -> None:
    for path in FUNCTIONS:
        _, fn = largest.one("AWS::Lambda::Function", path)
        variables = fn["Properties"]["Environment"]["Variables"]
        assert contract.ENV_CONFIG not in variables
        assert environment_bytes(variables) < functions.LAMBDA_ENV_MAX_BYTES == 4096, path


def test_every_function_reads_back_exactly_the_configuration_from_its_layer(largest: Synth) -> None:
    expected = GuardConfig.from_dict(largest_config())
    for path in FUNCTIONS:
        assert largest.shipped_config(path) == expected, path


def test_one_configuration_layer_for_the_stack_and_room_for_it_on_every_function(largest: Synth) -> None:
    layers = largest.resources("AWS::Lambda::LayerVersion")
    assert len(layers) == 1
    [(layer_id, layer)] = layers.items()
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    for path in FUNCTIONS:
        _, fn = largest.one("AWS::Lambda::Function", path)
        assert len(fn["Properties"]["Layers"]) == 2 <= config_layer.LAMBDA_MAX_LAYERS  # Powertools + configuration
        assert {"Ref": layer_id} in fn["Properties"]["Layers"]


def test_the_layer_holds_only_the_configuration_file(largest: Synth) -> None:
    manifest = json.loads((largest.outdir / f"{largest.artifact_id}.assets.json").read_text())
    [source] = [f["source"]["path"] for f in manifest["files"].values() if f["displayName"].startswith("GuardConfig")]
    root = largest.outdir / source
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == [config_layer.CONFIG_FILE]
    size = (root / config_layer.CONFIG_FILE).stat().st_size
    assert 4 * functions.LAMBDA_ENV_MAX_BYTES < size < 250 * 1024 * 1024  # far over 4 KB, far under 250 MB
    assert f"/opt/{config_layer.CONFIG_FILE}" == config_layer.CONFIG_PATH  # Lambda extracts layers into /opt


def test_the_webhook_secrets_are_named_in_the_environment_not_linked(largest: Synth) -> None:
    config = GuardConfig.from_dict(largest_config())
    _, fn = largest.one("AWS::Lambda::Function", "ChatNotifier")
    names = json.loads(fn["Properties"]["Environment"]["Variables"][contract.ENV_WEBHOOK_SECRETS])
    assert set(names) == set(config.slack.webhooks)
    for webhook, hook in config.slack.webhooks.items():
        assert names[webhook] == (hook.secret_name or f"TrainingGuard/slack/{webhook}")


def test_the_stack_still_refuses_an_environment_over_4_kb() -> None:
    functions._check_environment_size("small", {"A": "x" * 100})
    with pytest.raises(ValueError, match="over Lambda's 4096"):
        functions._check_environment_size("large", {"A": "x" * 4096})
