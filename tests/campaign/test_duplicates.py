"""Campaign: duplicated and re-ordered delivery across a fleet. Exactly once, always."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.campaign.streams import deliveries, plan_fleet
from tests.fakes import FakeJobs, FakeLedger, FakePublisher
from tests.helpers import NOW, readme_campaign_row
from tests.log_deliveries import (
    MNIST_DEFINITIONS,
    FakeLogStates,
    LogJobPlan,
    log_deliveries,
    plan_log_fleet,
    subscription,
)
from training_guard.config.model import GuardConfig
from training_guard.domain.events import TrainingJob, parse_event
from training_guard.services.log_watch import Invocation, LogWatch, decode
from training_guard.services.responder import Responder
from training_guard_local.emulator import ACCOUNT, Emulation

SEED = 20261130


def check_exactly_once(plans: list[Any], stops: Counter[str], notes: Counter[tuple[str, str]]) -> None:
    for plan in plans:
        assert stops[plan.name] == (1 if plan.kind == "stop" else 0), plan
        for kind, count in plan.expected_notifications.items():
            assert notes[(plan.name, kind)] == count, (plan, kind)
    expected_total = sum(sum(p.expected_notifications.values()) for p in plans)
    assert sum(notes.values()) == expected_total


def test_1000_jobs_with_every_event_up_to_three_times_shuffled(figures: dict[str, Any]) -> None:
    plans = plan_fleet(1000, SEED)
    stream = deliveries(plans, seed=SEED)
    jobs, ledger, publisher = FakeJobs(), FakeLedger(), FakePublisher()
    guard = Responder(GuardConfig(), jobs, ledger, publisher)
    duplicates = 0
    for event in stream:
        parsed = parse_event(event)
        current = jobs.jobs.get(parsed.job.name)
        # SageMaker's view: follows the events, except that a stop is not undone
        if current is None or current.status == "InProgress":
            jobs.jobs[parsed.job.name] = parsed.job
        duplicates += guard.handle(parsed, now=NOW).duplicates
    stops = Counter(jobs.stop_calls)
    notes = Counter((n.job.name, n.kind.value) for n in publisher.published)
    check_exactly_once(plans, stops, notes)
    figures.update(
        jobs=len(plans),
        deliveries=len(stream),
        should_stop=sum(p.kind == "stop" for p in plans),
        stop_calls=sum(stops.values()),
        notifications=len(publisher.published),
        duplicate_transitions_ignored=duplicates,
    )
    f = figures
    assert readme_campaign_row("1,000 jobs") == (
        f"{f['deliveries']:,} deliveries; {f['should_stop']} jobs should stop: {f['stop_calls']} `StopTrainingJob` "
        f"calls; {f['notifications']} transitions: {f['notifications']} notifications; {duplicates} duplicate "
        "transitions ignored"
    )


def test_the_same_campaign_against_moto_through_the_real_handler(figures: dict[str, Any]) -> None:
    plans = plan_fleet(40, SEED + 1)
    stream = deliveries(plans, seed=SEED + 1)
    with Emulation(GuardConfig()) as aws:
        stops: Counter[str] = Counter()
        for event in stream:
            receipt = aws.deliver(event)
            if receipt["stopped"]:
                stops[receipt["job"]] += 1
        notes = Counter((n["job"]["name"], n["kind"]) for n in aws.notifications())
        check_exactly_once(plans, stops, notes)
        assert all(aws.job_status(p.name) == "Stopping" for p in plans if p.kind == "stop")
    figures.update(
        jobs=len(plans), deliveries=len(stream), stop_calls=sum(stops.values()), notifications=sum(notes.values())
    )
    assert readme_campaign_row(f"the same through the real handler on moto ({len(plans)} jobs)") == (
        f"{len(stream)} deliveries, {sum(stops.values())} stops, {sum(notes.values())} notifications: exactly once"
    )


# --- the log path: every batch of every host's log up to three times, shuffled ------------------------------------
LOG_T0_MS = int(NOW.timestamp() * 1000) - 3_600_000


def check_log_stops_once(plans: list[LogJobPlan], stops: Counter[str], notes: Counter[str]) -> None:
    for plan in plans:
        expected = 1 if plan.kind == "stop" else 0
        assert (stops[plan.name], notes[plan.name]) == (expected, expected), plan.name


def test_log_path_300_jobs_every_batch_up_to_three_times_shuffled_stop_once(figures: dict[str, Any]) -> None:
    plans = plan_log_fleet(300, SEED, owner=ACCOUNT, t0_ms=LOG_T0_MS)
    stream = log_deliveries(plans, seed=SEED)
    jobs, ledger, publisher, states = FakeJobs(), FakeLedger(), FakePublisher(), FakeLogStates()
    for plan in plans:
        arn = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-job/{plan.name}"
        jobs.jobs[plan.name] = TrainingJob(
            name=plan.name,
            status="InProgress",
            arn=arn,
            secondary_status="Training",
            metric_definitions=MNIST_DEFINITIONS,
        )
    watch = LogWatch(Responder(GuardConfig(), jobs, ledger, publisher), states)
    duplicates = firings = 0
    for doc in stream:
        receipt = watch.deliver(decode(subscription(doc)), now=NOW, invocation=Invocation(ACCOUNT))
        firings += len(receipt.firings)
        duplicates += receipt.findings.duplicates if receipt.findings else 0
    stops = Counter(jobs.stop_calls)
    notes = Counter(n.job.name for n in publisher.published)
    check_log_stops_once(plans, stops, notes)
    figures.update(
        jobs=len(plans),
        streams=sum(len(p.streams) for p in plans),
        deliveries=len(stream),
        should_stop=sum(p.kind == "stop" for p in plans),
        firings=firings,
        stop_calls=sum(stops.values()),
        notifications=len(publisher.published),
        duplicate_transitions_ignored=duplicates,
        state_saves=states.puts,
    )


def test_log_path_the_same_through_the_real_handler_on_moto(figures: dict[str, Any]) -> None:
    from training_guard_local import sagemaker_ext
    from training_guard_local.emulator import REGION, handler_output_to_stderr

    plans = plan_log_fleet(20, SEED + 1, owner=ACCOUNT, t0_ms=LOG_T0_MS)
    stream = log_deliveries(plans, seed=SEED + 1)
    with Emulation(GuardConfig()) as aws:
        with handler_output_to_stderr():
            from training_guard.handlers import log_events
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
        for doc in stream:
            aws.invoke(log_events.handler, subscription(doc), aws.context("training-guard-log-events"), at=NOW)
        stops = Counter(call.job for call in sagemaker_ext.stop_calls())
        notes = Counter(n["job"]["name"] for n in aws.notifications())
        check_log_stops_once(plans, stops, notes)
    figures.update(deliveries=len(stream), stop_calls=sum(stops.values()), notifications=sum(notes.values()))
