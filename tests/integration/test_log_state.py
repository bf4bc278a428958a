"""A warm Lambda container keeps the Logger's appended keys from one invocation to the next unless the handler's
`inject_lambda_context` clears them (Powertools: "custom keys are persisted across warm invocations ... clear_state").
An invocation that logs before it knows its job must not carry the previous job's name."""

from __future__ import annotations

import json

import pytest

from tests.helpers import load_event
from training_guard_local.emulator import Emulation


def _lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_a_log_line_before_the_job_is_known_does_not_name_the_previous_invocations_job(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with Emulation(quiet=True) as aws:
        first = load_event("vanishing_gradient_issues_found")
        aws.deliver(first)
        capfd.readouterr()
        aws.deliver(
            {"id": "not-sagemaker", "source": "aws.ec2", "detail-type": "EC2 Instance State-change Notification"}
        )
        aws.sweep()
    out, err = capfd.readouterr()
    logged = _lines(out) + _lines(err)
    assert any(line.get("message") == "foreign event ignored" for line in logged)
    assert all("training_job" not in line for line in logged), logged
