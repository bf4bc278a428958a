"""Seeded event streams for the campaign: what a fleet of jobs makes SageMaker send."""

from __future__ import annotations

import copy
import random
import uuid
from dataclasses import dataclass
from typing import Any

from tests.helpers import load_event, rule_status

KINDS = ("stop", "rule_error", "failed", "completed")


@dataclass(frozen=True)
class JobPlan:
    name: str
    kind: str  # what should happen: stop | rule_error | failed | completed
    events: tuple[dict[str, Any], ...]  # in SageMaker's order

    @property
    def expected_notifications(self) -> dict[str, int]:
        return {
            "stop": {"issues_found": 1},
            "rule_error": {"rule_error": 1},
            "failed": {"job_failed": 1},
            "completed": {},
        }[self.kind]


def _event(name: str, status: str, rules: list[dict[str, Any]] | None, **detail: Any) -> dict[str, Any]:
    event = copy.deepcopy(load_event("vanishing_gradient_issues_found"))
    event["id"] = str(uuid.UUID(int=random.getrandbits(128)))
    event["detail"].update(
        TrainingJobName=name,
        TrainingJobArn=f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
        TrainingJobStatus=status,
        SecondaryStatus="Training" if status == "InProgress" else status,
        Tags={"team": "fleet"},
        **detail,
    )
    if rules is None:
        event["detail"].pop("DebugRuleEvaluationStatuses", None)
    else:
        event["detail"]["DebugRuleEvaluationStatuses"] = rules
    return event


def plan_fleet(jobs: int, seed: int) -> list[JobPlan]:
    random.seed(seed)
    plans = []
    for i in range(jobs):
        name = f"fleet-{seed}-{i:05d}"
        kind = KINDS[i % len(KINDS)]
        start = _event(name, "InProgress", [rule_status("VanishingGradient", "InProgress")])
        if kind == "stop":
            finding = _event(name, "InProgress", [rule_status("VanishingGradient", "IssuesFound", "condition met")])
            events: tuple[dict[str, Any], ...] = (start, finding)
        elif kind == "rule_error":
            events = (start, _event(name, "InProgress", [rule_status("VanishingGradient", "Error", "no data")]))
        elif kind == "failed":
            events = (start, _event(name, "Failed", [], FailureReason="AlgorithmError: boom"))
        else:
            events = (start, _event(name, "Completed", []))
        plans.append(JobPlan(name, kind, events))
    return plans


def deliveries(plans: list[JobPlan], *, seed: int, max_copies: int = 3) -> list[dict[str, Any]]:
    """Every event delivered 1..max_copies times, shuffled within its job, jobs interleaved."""
    rng = random.Random(seed)
    per_job = []
    for plan in plans:
        stream = [copy.deepcopy(e) for e in plan.events for _ in range(rng.randint(1, max_copies))]
        rng.shuffle(stream)
        per_job.append(stream)
    out: list[dict[str, Any]] = []
    while any(per_job):
        stream = rng.choice([s for s in per_job if s])
        out.append(stream.pop(0))
    return out
