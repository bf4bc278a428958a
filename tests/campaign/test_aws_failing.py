"""Campaign: AWS failing. Throttling and 5xx from SageMaker, DynamoDB and SNS, seeded.

Faults are injected in front of moto on the guard's own clients (tests/faults.py: a refused call never
reaches moto, so nothing happened): each is what the SDK raises once its own retries are spent, at the
rates below. An event whose reaction still fails is retried like Lambda does (2 more attempts) and then
counted as dead-lettered. Invariants: no transition is marked done without its effect, no
job is stopped twice, every notification that was published is for a transition marked done.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests import faults as aws_faults
from tests.campaign.streams import deliveries, plan_fleet
from tests.helpers import readme_campaign_row
from training_guard.config.model import GuardConfig
from training_guard.domain.errors import GuardError, TransitionBusy
from training_guard_local.emulator import TABLE, Emulation

SEED = 7
LAMBDA_ATTEMPTS = 3  # the first try and Lambda's 2 async retries
RATES = {  # share of the guard's calls that fail after the SDK's retries
    ("sagemaker", "DescribeTrainingJob"): 0.1,
    ("sagemaker", "StopTrainingJob"): 0.1,
    ("sagemaker", "AddTags"): 0.1,
    ("dynamodb", "PutItem"): 0.05,
    ("dynamodb", "UpdateItem"): 0.05,
    ("sns", "Publish"): 0.1,
}


class Faults:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.injected: Counter[str] = Counter()
        self.succeeded_stops: Counter[str] = Counter()

    def decide(self, service: str, operation: str, rate: float) -> Any:
        def fault(_request: Any) -> aws_faults.Fault | None:
            if self.rng.random() >= rate:
                return None
            self.injected[f"{service}:{operation}"] += 1
            return self.rng.choice(aws_faults.TRANSIENT)

        return fault

    def count_stop(self, http_response: Any, params: Any = None, **kwargs: Any) -> None:
        if http_response.status_code == 200:  # a stop SageMaker accepted (refusals are 400s)
            self.succeeded_stops[kwargs["context"]["job"]] += 1

    @staticmethod
    def remember_job(params: Any, context: Any, **_: Any) -> None:
        context["job"] = params["TrainingJobName"]


@pytest.fixture
def faulty() -> Iterator[tuple[Emulation, Faults]]:
    faults = Faults(SEED)
    # Lambda retries a failed attempt a minute or more later: a claim the attempt left is waited out in no time here
    with Emulation(GuardConfig(), sleep=lambda _seconds: None) as aws:
        for (service, operation), rate in RATES.items():
            aws_faults.refuse(aws.function_client(service), operation, faults.decide(service, operation, rate))
        events = aws.function_client("sagemaker").meta.events
        events.register("before-parameter-build.sagemaker.StopTrainingJob", faults.remember_job)
        events.register("after-call.sagemaker.StopTrainingJob", faults.count_stop)
        yield aws, faults


def test_aws_faults_are_retried_and_nothing_is_half_done(
    faulty: tuple[Emulation, Faults], figures: dict[str, Any]
) -> None:
    aws, faults = faulty
    plans = plan_fleet(60, SEED)
    stream = deliveries(plans, seed=SEED, max_copies=2)
    dead_lettered: list[str] = []
    unrecorded: set[str] = set()
    lambda_retries = 0
    for event in stream:
        for attempt in range(LAMBDA_ATTEMPTS):
            try:
                unrecorded.update(aws.deliver(event)["unrecorded"])
                break
            except GuardError:
                if attempt == LAMBDA_ATTEMPTS - 1:
                    dead_lettered.append(event["detail"]["TrainingJobName"])
                else:
                    lambda_retries += 1
    published = aws.notifications()
    items = aws.client("dynamodb").scan(TableName=TABLE)["Items"]
    done = {i["pk"]["S"] for i in items if i.get("state", {}).get("S") == "done"}
    in_progress = [i["pk"]["S"] for i in items if i.get("state", {}).get("S") == "in_progress"]

    transitions = Counter(n["transition"] for n in published)
    # a transition is marked done only with its notification out
    assert {k for k in done if k.startswith("t#")} <= set(transitions)
    # a notification without a done record is one the ledger could not record (reported), never a silent one
    assert set(transitions) - done <= unrecorded
    # a transition is announced twice only when the ledger failed to record the first announcement
    assert {t for t, c in transitions.items() if c > 1} <= unrecorded
    # the only claims left in progress are those unrecorded ones: every other failure released its claim
    assert set(in_progress) <= unrecorded
    # no job was stopped twice by the guard
    assert all(count == 1 for count in faults.succeeded_stops.values()), faults.succeeded_stops
    # every job that should stop was stopped, unless its events were all dead-lettered
    for plan in plans:
        if plan.kind == "stop" and plan.name not in dead_lettered:
            assert aws.job_status(plan.name) == "Stopping", plan.name
    figures.update(
        deliveries=len(stream),
        faults_injected=sum(faults.injected.values()),
        lambda_retries=lambda_retries,
        dead_lettered=len(dead_lettered),
        transitions_announced=len(transitions),
        unrecorded=len(unrecorded),
        duplicate_announcements=sum(c - 1 for c in transitions.values()),
        stops=sum(faults.succeeded_stops.values()),
    )
    shown = readme_campaign_row("AWS failing")
    assert shown.startswith(
        f"{figures['faults_injected']} faults injected, {lambda_retries} Lambda retries, {len(dead_lettered)} "
        f"dead-lettered, {len(transitions)} transitions announced, {figures['duplicate_announcements']} duplicates, "
        f"{len(unrecorded)} half-done, {figures['stops']} stops (none twice)"
    ), shown


def test_a_claim_race_between_two_invocations_yields_one_reaction(figures: dict[str, Any]) -> None:
    """Two invocations get the same event; the first holds the claim, fails to publish and
    releases it; the second finds the claim busy (a live lease), waits, and fails so that Lambda
    retries it later (the holder might have been an attempt that timed out); Lambda's retry of the
    first completes the transition, and the retry of the second finds it done. One stop, one notification."""
    from tests.helpers import load_event

    event = load_event("vanishing_gradient_issues_found")
    with Emulation(GuardConfig(), sleep=lambda _seconds: None) as aws:  # the busy wait, without waiting
        failures = {"left": 1}  # the publish fails once, after the SDK's own retries

        def fail_once(_request: Any) -> aws_faults.Fault | None:
            if failures["left"]:
                failures["left"] -= 1
                return aws_faults.INTERNAL
            return None

        aws_faults.refuse(aws.function_client("sns"), "Publish", fail_once)
        from training_guard.handlers import wiring

        guard = wiring.root().responder
        # invocation A claims, stops the job, and fails to publish
        original = guard.publisher.publish

        def publish_then_race(note: Any) -> None:
            # while A holds the claim, invocation B arrives with the duplicate
            with pytest.raises(TransitionBusy):
                aws.deliver(event)
            original(note)

        guard.publisher.publish = publish_then_race  # type: ignore[method-assign,assignment]
        with pytest.raises(GuardError, match="sns:Publish"):
            aws.deliver(event)
        assert failures["left"] == 0
        guard.publisher.publish = original  # type: ignore[method-assign]
        retried = aws.deliver(event)  # Lambda's retry of A
        assert retried["stopped"] is True  # our own earlier stop, finished now
        assert aws.deliver(event)["duplicates"] == 1  # Lambda's retry of B
        assert [n["outcome"] for n in aws.notifications()] == ["stopped"]
    figures.update(invocations=4, stops=1, notifications=1)


def test_log_path_aws_faults_are_retried_and_no_job_is_stopped_twice(
    faulty: tuple[Emulation, Faults], figures: dict[str, Any]
) -> None:
    """The log path under the same faults: the state's reads and saves, DescribeTrainingJob (for the definitions and
    for the stop), the stop, the tags and the publish. A delivery that still fails is retried like Lambda does."""
    from tests.helpers import NOW
    from tests.log_deliveries import MNIST_DEFINITIONS, log_deliveries, plan_log_fleet, subscription
    from training_guard_local.emulator import ACCOUNT, REGION, handler_output_to_stderr

    aws, faults = faulty
    with handler_output_to_stderr():
        from training_guard.handlers import log_events
    t0_ms = int(NOW.timestamp() * 1000) - 3_600_000
    plans = plan_log_fleet(30, SEED, owner=ACCOUNT, t0_ms=t0_ms)
    for plan in plans:
        aws.put_job(
            {
                "TrainingJobName": plan.name,
                "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{plan.name}",
                "TrainingJobStatus": "InProgress",
                "SecondaryStatus": "Training",
                "AlgorithmSpecification": {
                    "TrainingInputMode": "File",
                    "MetricDefinitions": [{"Name": n, "Regex": r} for n, r in MNIST_DEFINITIONS],
                },
            }
        )
    stream = log_deliveries(plans, seed=SEED, max_copies=2)
    dead: list[str] = []
    unrecorded: set[str] = set()
    lambda_retries = 0
    for doc in stream:
        for attempt in range(LAMBDA_ATTEMPTS):
            try:
                result = aws.invoke(log_events.handler, subscription(doc), aws.context("log-events"), at=NOW)
                unrecorded.update((result.get("findings") or {}).get("unrecorded", []))
                break
            except GuardError:
                if attempt == LAMBDA_ATTEMPTS - 1:
                    dead.append(doc["logStream"].split("/")[0])
                else:
                    lambda_retries += 1
    published = aws.notifications()
    transitions = Counter(n["transition"] for n in published)
    items = aws.client("dynamodb").scan(TableName=TABLE)["Items"]
    done = {i["pk"]["S"] for i in items if i.get("state", {}).get("S") == "done"}
    assert all(count == 1 for count in faults.succeeded_stops.values()), faults.succeeded_stops
    assert {k for k in done if k.startswith("t#")} <= set(transitions)
    assert {t for t, c in transitions.items() if c > 1} <= unrecorded
    for plan in plans:
        if plan.kind == "stop" and plan.name not in dead:
            assert aws.job_status(plan.name) == "Stopping", plan.name
        if plan.kind == "healthy":
            assert plan.name not in faults.succeeded_stops, plan.name
    figures.update(
        deliveries=len(stream),
        faults_injected=sum(faults.injected.values()),
        lambda_retries=lambda_retries,
        dead_lettered=len(dead),
        stops=sum(faults.succeeded_stops.values()),
        transitions_announced=len(transitions),
        duplicate_announcements=sum(c - 1 for c in transitions.values()),
    )
