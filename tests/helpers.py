"""Shared test helpers: realistic event fixtures and small builders."""

from __future__ import annotations

import copy
import importlib.util
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from training_guard.domain.events import TrainingJob

EVENTS_DIR = Path(__file__).parent / "events"
NOW = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)


def load_event(name: str) -> dict[str, Any]:
    """A fresh copy of a recorded event fixture (tests/events/NAME.json)."""
    data: dict[str, Any] = json.loads((EVENTS_DIR / f"{name}.json").read_text())
    return copy.deepcopy(data)


def event_names() -> list[str]:
    return sorted(p.stem for p in EVENTS_DIR.glob("*.json"))


def with_detail(event: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(event)
    out["detail"].update(changes)
    return out


def rule_status(name: str, status: str, details: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "RuleConfigurationName": name,
        "RuleEvaluationJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:processing-job/job-{name.lower()}-1a2b",
        "RuleEvaluationStatus": status,
        "LastModifiedTime": 1796004905123,
    }
    if details is not None:
        entry["StatusDetails"] = details
    return entry


SWEEP_ACCOUNT, SWEEP_REGION = "123456789012", "eu-west-1"  # the account and region the sweeper tests run in


def job_arn(name: str, account: str = SWEEP_ACCOUNT, region: str = SWEEP_REGION) -> str:
    return f"arn:aws:sagemaker:{region}:{account}:training-job/{name}"


def running_job(name: str, trained: timedelta, **changes: Any) -> TrainingJob:
    """A job in training for `trained` at NOW (InProgress/Training, no rules); `changes` set any other field."""
    start = NOW - trained
    job = TrainingJob(
        name=name,
        status="InProgress",
        arn=job_arn(name),
        secondary_status="Training",
        rules=(),
        training_start_time=start,
        training_phase_start=start,
    )
    return replace(job, **changes)


def load_tool(name: str) -> ModuleType:
    """A script of tools/ (standard library only, run by the Makefile by path, not a package) as a module."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "tools" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readme_campaign_row(campaign: str) -> str:
    """The figures the README's fault-campaign table shows for the campaign whose name starts with `campaign`: the
    campaign's test holds the README to what it measured."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith(f"| {campaign}")]
    assert len(rows) == 1, f"README: one fault-campaign row starting with {campaign!r}, found {len(rows)}"
    return rows[0].rsplit(" | ", 1)[1].removesuffix(" |")
