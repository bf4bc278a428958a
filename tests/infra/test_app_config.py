"""How the app finds its configuration, and what a mistake in it looks like at synth."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import App

from infra.app import build_app, check_context_config
from infra.partitions import DEPLOY_REGION_VARIABLE, TARGET_PARTITIONS_CONTEXT, partition_problems
from tests.infra.conftest import ConfigSynth, Synth, shipped_context, synthesized
from training_guard.config.model import ConfigError, GuardConfig

ROOT = Path(__file__).resolve().parents[2]


def test_a_per_account_file_named_with_dash_c_config_is_used(tmp_path: Path) -> None:
    config_file = tmp_path / "prod.json"
    config_file.write_text(json.dumps({"dry_run": True, "emails": ["ml-oncall@example.com"]}))
    synth = Synth(tmp_path / "out", {"config": str(config_file)})
    shipped = synth.shipped_config("JobEvents")
    assert shipped.dry_run is True
    [subscription] = [
        s for s in synth.resources("AWS::SNS::Subscription").values() if s["Properties"]["Protocol"] == "email"
    ]
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == "ml-oncall@example.com"
    dlq_id, _ = synth.one("AWS::SQS::Queue", "AlertingDeadLetters")
    assert subscription["Properties"]["RedrivePolicy"] == {"deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]}}


def test_an_invalid_config_fails_before_anything_is_built() -> None:
    app = App(context={"training-guard": {"rules": {"actions": {"VanishingGradient": "halt"}}}})
    with pytest.raises(ConfigError, match=r"rules\.actions\.VanishingGradient: must be one of stop, notify, ignore"):
        build_app(app)


def test_a_missing_config_file_is_named() -> None:
    with pytest.raises(ConfigError, match=re.escape("cannot read /nonexistent/prod.json")):
        build_app(App(context={"config": "/nonexistent/prod.json"}))


def test_synth_with_a_bad_config_prints_the_field_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"min_training_minutes": -5, "dry_rn": True}))
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({"config": str(bad)}), "CDK_OUTDIR": str(tmp_path / "out")}
    # the app, with a line that says whether it loaded the CDK before it refused the configuration
    app = "import sys, infra.app as a; code = a.main(); print(sorted({'aws_cdk', 'jsii'} & set(sys.modules))); sys.exit(code)"
    result = subprocess.run([sys.executable, "-c", app], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert result.stdout.strip() == "[]"
    assert result.returncode == 1
    assert "min_training_minutes: must be between 0 and" in result.stderr
    assert "dry_rn: unknown setting (did you mean 'dry_run'?)" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_clis_context_is_checked_before_the_cdk_is_loaded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What `cdk synth` hands the app in CDK_CONTEXT_JSON: cdk.json's context, with -c config=FILE layered over it."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"dry_run": True}))
    monkeypatch.setenv("CDK_CONTEXT_JSON", json.dumps({**shipped_context(), "config": str(good)}))
    check_context_config()  # nothing to say
    monkeypatch.setenv("CDK_CONTEXT_JSON", json.dumps({"training-guard": {"min_training_minutes": "soon"}}))
    with pytest.raises(ConfigError, match="min_training_minutes"):
        check_context_config()
    for unreadable in ("", "not json", "[1]"):  # left to build_app, which reads the context CDK parsed
        monkeypatch.setenv("CDK_CONTEXT_JSON", unreadable)
        check_context_config()
    # a context split between the variable and a file: the half in the variable is not the configuration
    monkeypatch.setenv("CDK_CONTEXT_JSON", json.dumps({"training-guard": {"min_training_minutes": "soon"}}))
    monkeypatch.setenv("CONTEXT_OVERFLOW_LOCATION_ENV", str(tmp_path / "rest.json"))
    check_context_config()


def test_an_opt_in_tag_makes_iam_refuse_to_stop_untagged_jobs(tmp_path: Path) -> None:
    synth = synthesized(ConfigSynth, {"stop_requires_tag": "training-guard:guarded"}, tmp_path)  # test_stop_opt_in's
    for path in ("JobEventsHandler", "AlarmEvents", "Sweeper"):
        _, policy = synth.one("AWS::IAM::Policy", path)
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        stops = [s for s in statements if "sagemaker:StopTrainingJob" in s["Action"]]
        assert stops == [
            {
                "Action": "sagemaker:StopTrainingJob",
                "Condition": {"StringEquals": {"aws:ResourceTag/training-guard:guarded": "true"}},
                "Effect": "Allow",
                "Resource": stops[0]["Resource"],
                "Sid": "StopOptedInTrainingJobs",
            }
        ]


def test_a_configured_powertools_layer_replaces_the_ssm_parameter(tmp_path: Path) -> None:
    arn = "arn:aws:lambda:me-central-1:123456789012:layer:powertools-python-arm64:4"
    config_file = tmp_path / "layer.json"
    config_file.write_text(json.dumps({"powertools_layer_arn": arn}))
    synth = Synth(tmp_path / "out", {"config": str(config_file)})
    for _, fn in synth.resources("AWS::Lambda::Function").items():
        assert arn in fn["Properties"]["Layers"]
    assert "/aws/service/powertools/" not in json.dumps(synth.json.get("Parameters", {}))


def test_a_powertools_layer_that_is_not_a_layer_arn_is_named() -> None:
    with pytest.raises(ConfigError, match="powertools_layer_arn: not a Lambda layer version ARN"):
        GuardConfig.from_dict({"powertools_layer_arn": "arn:aws:lambda:us-east-1:123456789012:function:x"})


# --- partitions: the guard runs in aws only -----------------------------------------------------------------


def test_cdk_json_targets_the_aws_partition_only() -> None:
    assert shipped_context()[TARGET_PARTITIONS_CONTEXT] == ["aws"]


@pytest.mark.parametrize("partitions", [["aws", "aws-cn"], ["aws-us-gov"]])
def test_a_context_naming_another_partition_is_refused_at_synth(partitions: list[str]) -> None:
    other = next(p for p in partitions if p != "aws")
    app = App(context={TARGET_PARTITIONS_CONTEXT: partitions})
    with pytest.raises(ConfigError, match=re.escape(f"names {other}: the guard runs only in the aws partition")):
        build_app(app, checks=False)


@pytest.mark.parametrize(("region", "partition"), [("cn-north-1", "aws-cn"), ("us-gov-west-1", "aws-us-gov")])
def test_a_deploy_region_of_another_partition_is_refused_at_synth(
    monkeypatch: pytest.MonkeyPatch, region: str, partition: str
) -> None:
    monkeypatch.setenv(DEPLOY_REGION_VARIABLE, region)
    with pytest.raises(ConfigError, match=re.escape(f"region {region} is in the {partition} partition")):
        build_app(App(context={TARGET_PARTITIONS_CONTEXT: ["aws"]}), checks=False)


def test_aws_regions_and_unknown_regions_are_not_refused() -> None:
    assert partition_problems(["aws"], {DEPLOY_REGION_VARIABLE: "eu-west-1"}) == []
    assert partition_problems(None, {DEPLOY_REGION_VARIABLE: "xx-nowhere-9"}) == []  # botocore's data may lag


def test_synth_for_china_prints_one_line_per_problem_and_no_traceback(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps({TARGET_PARTITIONS_CONTEXT: ["aws", "aws-cn"]}),
        "CDK_DEFAULT_REGION": "cn-northwest-1",
        "CDK_OUTDIR": str(tmp_path / "out"),
    }
    app = "import sys, infra.app as a; sys.exit(a.main())"
    result = subprocess.run([sys.executable, "-c", app], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "error: the deployment target is invalid:" in result.stderr
    assert "names aws-cn" in result.stderr
    assert "region cn-northwest-1 is in the aws-cn partition" in result.stderr
    assert "Traceback" not in result.stderr
