"""The sweeper's role allows every call its budget and idle-GPU checks make, and nothing was added for them.

The calls are the ones recorded on moto by tests/integration/test_budget_sweep_moto.py (the real handler, the
guard's own clients hooked), so a new call there without a grant here fails this test.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.infra.conftest import Synth
from tests.infra.test_stack import training_jobs_arn
from tests.integration.test_budget_sweep_moto import BUDGET_AND_IDLE_SWEEP_ACTIONS

BUDGETS_AND_IDLE = {
    "budgets": [{"job_prefix": "exp-", "max_usd": 200}, {"job_tag": "team", "max_usd": 50, "action": "notify"}],
    "idle_gpu": {"threshold_percent": 10, "minutes": 15, "action": "stop"},
    "stop_requires_tag": "training-guard:guarded",
}
# Per-job SageMaker actions: granted on the account's training jobs only, never on "*".
JOB_ACTIONS = {"sagemaker:DescribeTrainingJob", "sagemaker:ListTags", "sagemaker:StopTrainingJob", "sagemaker:AddTags"}


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    config = tmp_path_factory.mktemp("config") / "guard.json"
    config.write_text(json.dumps(BUDGETS_AND_IDLE))
    return Synth(tmp_path_factory.mktemp("budgeted"), {"config": str(config)})


def sweeper_statements(synth: Synth) -> list[dict[str, Any]]:
    _, policy = synth.one("AWS::IAM::Policy", "Sweeper")
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def actions_of(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


def test_every_call_of_the_budget_and_idle_gpu_sweeps_is_allowed_to_the_sweeper(budgeted: Synth) -> None:
    statements = [s for s in sweeper_statements(budgeted) if s["Effect"] == "Allow"]
    for action in sorted(BUDGET_AND_IDLE_SWEEP_ACTIONS):
        granting = [s for s in statements if action in actions_of(s)]
        assert granting, f"the sweeper's role does not allow {action}"
        if action in JOB_ACTIONS:
            assert all(s["Resource"] == training_jobs_arn() for s in granting), action


def test_the_stop_for_a_budget_or_idle_gpus_is_held_to_the_opt_in_tag_like_any_stop(budgeted: Synth) -> None:
    [stop] = [s for s in sweeper_statements(budgeted) if "sagemaker:StopTrainingJob" in actions_of(s)]
    assert stop["Condition"] == {"StringEquals": {"aws:ResourceTag/training-guard:guarded": "true"}}


def grants(synth: Synth) -> set[tuple[str, str]]:
    """(action, resource) of every statement of the sweeper's role, whatever statement holds it."""
    return {
        (action, json.dumps(resource, sort_keys=True))
        for statement in sweeper_statements(synth)
        for action in actions_of(statement)
        for resource in (statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]])
    }


def test_budgets_and_the_idle_gpu_check_add_no_permission(budgeted: Synth, synth: Synth) -> None:
    # The same grants as the shipped stack's sweeper; only the opt-in condition (stop_requires_tag) differs.
    assert grants(budgeted) == grants(synth)
