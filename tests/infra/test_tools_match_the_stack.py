"""The operator tools (preflight, doctor, report) and the CDK app agree on the names and values they share: tested
here, with the CDK tests, because reading the app's side loads aws-cdk-lib."""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk import App, Stack

from infra.app import STACK_NAME
from infra.components.chat import webhook_secret_name
from infra.components.functions import POWERTOOLS_LAYER_PARAMETER
from infra.components.monitoring import REACTION_METRICS, SERVICE_DIMENSION
from training_guard.adapters.secrets import CACHE_SECONDS
from training_guard.domain import totals
from training_guard_local import doctor, preflight
from training_guard_local.preflight import FAIL, Check, Plan, WebhookSecret

ROOT = Path(__file__).resolve().parents[2]


def test_the_plan_is_what_the_cdk_app_reads(tmp_path: Path) -> None:
    config = tmp_path / "prod.json"
    config.write_text(
        json.dumps({"slack": {"webhooks": {"default": {}, "vision": {"secret_name": "teams/vision/slack"}}}})
    )
    plan = preflight.load_plan(str(config), ROOT)
    assert isinstance(plan, Plan)
    assert plan.layer_parameter == POWERTOOLS_LAYER_PARAMETER
    stack_made = webhook_secret_name(Stack(App(), STACK_NAME), "default")
    assert plan.secrets == (
        WebhookSecret("default", stack_made, created_by_stack=True),
        WebhookSecret("vision", "teams/vision/slack", created_by_stack=False),
    )
    assert plan.source == f"-c config={config}, stack {STACK_NAME}"
    shipped = preflight.load_plan(None, ROOT)  # cdk.json's context: one webhook, "default"
    assert isinstance(shipped, Plan)
    assert [s.webhook for s in shipped.secrets] == ["default"]


def test_names_shared_with_the_stack_are_the_stacks() -> None:
    assert doctor.DEFAULT_STACK == STACK_NAME
    assert doctor.SECRET_CACHE_SECONDS == CACHE_SECONDS


def test_a_bad_configuration_file_is_a_failed_check(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"min_training_minutes": -5}))
    check = preflight.load_plan(str(bad), ROOT)
    assert isinstance(check, Check)
    assert check.status == FAIL
    assert "min_training_minutes: must be between 0 and" in check.message


def test_the_metrics_it_reads_are_the_ones_the_guard_publishes_and_graphs() -> None:
    assert totals.SERVICE_DIMENSION == SERVICE_DIMENSION
    assert set(REACTION_METRICS) <= set(totals.METRICS)
