"""Cold start is part of reaction time: a function loads only its own libraries, though one module
(handlers/wiring.py) builds every function's objects."""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
HEAVY = ("slack_sdk", "pydantic", "aws_lambda_powertools.utilities.parameters", "moto", "aws_cdk")


@functools.cache
def _modules_after_import(handler: str) -> frozenset[str]:
    """Every module a fresh interpreter holds after importing the handler (one interpreter per handler)."""
    code = f"import json, sys; import training_guard.handlers.{handler}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(FUNCTIONS)}, capture_output=True, text=True, check=True
    )
    return frozenset(json.loads(out.stdout))


def loaded_after_import(handler: str, also: tuple[str, ...] = ()) -> set[str]:
    return {module for module in (*HEAVY, *also) if module in _modules_after_import(handler)}


@pytest.mark.parametrize("handler", ["job_events", "alarm_events", "sweeper", "log_events"])
def test_the_event_handlers_load_no_chat_library_and_no_validation_library(handler: str) -> None:
    assert loaded_after_import(handler) == set()


@pytest.mark.parametrize("handler", ["job_events", "alarm_events", "slack_notifier"])
def test_only_the_weekly_digest_loads_the_digest_renderer(handler: str) -> None:
    # messages.py renders a digest with digest.py, imported when one is rendered (~5 ms of import otherwise)
    assert "training_guard.render.digest" not in loaded_after_import(handler, also=("training_guard.render.digest",))


@pytest.mark.parametrize("handler", ["job_events", "alarm_events", "sweeper", "slack_notifier"])
def test_the_price_tables_load_on_first_use_not_at_import(handler: str) -> None:
    # The shipped price table is the Price List API's fallback and the GPU table the idle-GPU guard's: neither is
    # read at import (about 1.3 ms of every cold start).
    tables = ("training_guard.domain.price_data.training_prices", "training_guard.domain.price_data.gpu_counts")
    assert loaded_after_import(handler, also=tables) & set(tables) == set()


def test_the_notifier_loads_no_slack_sdk_nothing_heavier_and_not_the_policy() -> None:
    # Webhooks are HTTPS+JSON and Block Kit is JSON: the standard library does both. slack_sdk's package __init__
    # imports its whole Web API client (about 0.25x a bare `import boto3` of cold start).
    also = ("training_guard.domain.policy", "training_guard.services.responder")
    assert loaded_after_import("slack_notifier", also=also) == set()


def test_the_notifier_first_call_loads_no_slack_sdk_in_webhook_mode() -> None:
    # What its first invocation adds (handlers/wiring.py's delivery in webhook mode): the sender and the secrets.
    code = (
        "import json, sys; import training_guard.handlers.slack_notifier, training_guard.adapters.slack, "
        "training_guard.adapters.secrets, training_guard.adapters.ledger, training_guard.adapters.sqs; "
        "print(json.dumps([m for m in sys.modules if m.split('.')[0] == 'slack_sdk']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(FUNCTIONS)}, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == []


def test_no_function_module_imports_slack_sdk() -> None:
    # Webhooks, the bot's Web API calls and a click's answer are HTTPS+JSON, Block Kit is JSON and the signature is
    # an HMAC: the standard library does all of it, and the asset ships no slack_sdk (functions/requirements.txt).
    importing = []
    for path in sorted((FUNCTIONS / "training_guard").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            importing += [f"{path.relative_to(FUNCTIONS)}: {n}" for n in names if n.split(".")[0] == "slack_sdk"]
    assert importing == []


def test_the_click_workers_slack_app_loads_no_slack_sdk() -> None:
    # The bot's Web API calls are HTTPS+JSON (or a form) through adapters/slack.py's one retrying loop.
    code = (
        "import json, sys; import training_guard.handlers.interactions, training_guard.adapters.slack_app, "
        "training_guard.adapters.interactions; "
        "print(json.dumps([m for m in sys.modules if m.split('.')[0] == 'slack_sdk']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(FUNCTIONS)}, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == []


def test_the_slack_acknowledgement_and_its_builders_load_no_configuration_and_no_policy() -> None:
    # The interactivity endpoint answers Slack within 3 seconds, cold start included: its handler, the wiring that
    # builds it and the settings it reads stay clear of the configuration reader and the policy.
    code = (
        "import json, sys; import training_guard.handlers.interactions, training_guard.handlers.wiring, "
        "training_guard.config.settings, training_guard.adapters.interactions; "
        "print(json.dumps([m for m in ('training_guard.config.model', 'training_guard.domain.policy', "
        "'training_guard.services.responder', 'aws_lambda_powertools.utilities.parameters') if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(FUNCTIONS)}, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == []


def test_the_demo_and_the_local_tools_start_no_jsii_until_they_synthesize() -> None:
    # Importing aws_cdk starts Node.js and loads the construct library into it (~2 s of CPU): the demo reuses a kept
    # template (template_cache.py) and the tools read the stack's outputs by name, so none of them may import it first.
    modules = [
        "infra.organization.names",
        "infra.outputs",
        "training_guard_local.cli",
        "training_guard_local.demo",
        "training_guard_local.doctor",
        "training_guard_local.notify_test",
        "training_guard_local.report",
        "training_guard_local.mute",
    ]
    code = (
        f"import json, sys, importlib; [importlib.import_module(m) for m in {modules!r}]; "
        "print(json.dumps([m for m in ('aws_cdk', 'jsii') if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
