"""The sweeper over fakes: what the order of its reads decides."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.fakes import FakeAlarms, FakeJobs, FakeLedger, FakePublisher, FakeTrainingMetrics
from tests.helpers import NOW, SWEEP_ACCOUNT, SWEEP_REGION, job_arn, running_job
from training_guard.config.model import GuardConfig
from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import Finding, JobEvent, TrainingJob
from training_guard.domain.metric_guards import AlarmObservation, job_alarm_name
from training_guard.services.ports import StopRecord
from training_guard.services.responder import Responder
from training_guard.services.sweeper import Sweeper, SweepIncomplete, SweepReport, training_since


class JobStartsBetweenTheReads:
    """A job starts (and the job-events function makes its per-job alarm) right after the sweeper's
    first read, whichever read comes first: the race between listing jobs and listing alarms."""

    def __init__(self) -> None:
        self.jobs = FakeJobs()
        self.alarms = FakeAlarms(names=[job_alarm_name("ended-job", "train:loss")])
        self.started = False
        outer = self

        class Jobs(FakeJobs):
            def running(self) -> list[str]:
                names = super().running()
                outer.start_once()
                return names

        class Alarms(FakeAlarms):
            def job_alarm_names(self, job: str | None = None) -> list[str]:
                names = super().job_alarm_names(job)
                outer.start_once()
                return names

        self.jobs = Jobs()
        self.alarms = Alarms(names=list(self.alarms.names))

    def start_once(self) -> None:
        if not self.started:
            self.started = True
            self.jobs.jobs["new-job"] = TrainingJob(name="new-job", status="InProgress")
            self.alarms.names.append(job_alarm_name("new-job", "train:loss"))


def test_a_job_that_starts_during_a_sweep_keeps_its_new_alarm() -> None:
    world = JobStartsBetweenTheReads()
    responder = Responder(GuardConfig(), world.jobs, FakeLedger(), FakePublisher())
    report = Sweeper(responder, world.jobs, world.alarms, FakeTrainingMetrics()).sweep(
        now=NOW, account=None, region=None
    )
    assert report.orphaned_alarms_deleted == [job_alarm_name("ended-job", "train:loss")]
    assert world.alarms.names == [job_alarm_name("new-job", "train:loss")]


def test_training_is_counted_from_the_last_entry_into_training() -> None:
    job = TrainingJob(
        name="j",
        status="InProgress",
        secondary_status="Training",
        training_start_time=NOW - timedelta(hours=2),
        training_phase_start=NOW - timedelta(minutes=5),
    )
    assert training_since(job) == NOW - timedelta(minutes=5)
    assert training_since(TrainingJob(name="j", status="InProgress", secondary_status="Downloading")) is None
    fallback = TrainingJob(name="j", status="InProgress", secondary_status="Training", training_start_time=NOW)
    assert training_since(fallback) == NOW


# --- a sweep over fakes: what it hands on, what it reads, what it reports ----------------------------------
ACCOUNT, REGION = SWEEP_ACCOUNT, SWEEP_REGION
SWEEP_ID = "sweep-20261130T030000"
STALL = {"stall": {"minutes": 10, "action": "stop"}}
LOSS_GUARD = {"name": "loss-diverging", "metric": "train:loss", "threshold": 5, "action": "stop"}


arn = job_arn


def training(name: str, minutes: float = 30, **changes: Any) -> TrainingJob:
    """A running job `minutes` into its training phase, declaring train:loss and val:loss."""
    return running_job(name, timedelta(minutes=minutes), **{"metric_names": ("train:loss", "val:loss"), **changes})


class Metrics(FakeTrainingMetrics):
    """Datapoints by window: `recent` jobs published in the stall window, `before` jobs only before it."""

    def __init__(self) -> None:
        super().__init__()
        self.recent: set[str] = set()
        self.before: set[str] = set()

    def jobs_with_datapoints(
        self, series: Iterable[tuple[str, str]], *, since: datetime, until: datetime, period_seconds: int = 60
    ) -> set[str]:
        asked = list(series)
        self.reads.append((asked, since, until, period_seconds))
        published = self.recent if until >= NOW else self.before
        return {job for job, _ in asked if job in published}


class Jobs(FakeJobs):
    """Records tag reads; `failing` jobs cannot be described."""

    def __init__(self) -> None:
        super().__init__()
        self.tag_reads: list[str | None] = []
        self.failing: set[str] = set()

    def tags(self, arn: str) -> dict[str, str]:
        self.tag_reads.append(arn)
        return super().tags(arn)

    def describe(self, name: str) -> TrainingJob | None:
        if name in self.failing:
            raise ActionFailed(f"DescribeTrainingJob {name}", RuntimeError("throttled"))
        return super().describe(name)


class Fleet:
    def __init__(self, config: dict[str, Any], *jobs: TrainingJob) -> None:
        self.jobs = Jobs()
        self.jobs.jobs = {job.name: job for job in jobs}
        self.alarms = FakeAlarms()
        self.metrics = Metrics()
        self.ledger = FakeLedger()
        self.publisher = FakePublisher()
        self.responder = Responder(
            GuardConfig.from_dict(config), self.jobs, self.ledger, self.publisher, alarms=self.alarms, sleep=no_wait
        )
        self.sweeper = Sweeper(self.responder, self.jobs, self.alarms, self.metrics)

    def sweep(self) -> SweepReport:
        return self.sweeper.sweep(now=NOW, account=ACCOUNT, region=REGION)

    def published(self) -> list[tuple[str, str, str, str | None, str | None, str]]:
        return [
            (n.job.name, n.kind.value, n.outcome.value, n.account, n.region, n.event_id)
            for n in self.publisher.published
        ]


def no_wait(seconds: float) -> None:
    pass


def test_jobs_quiet_for_the_window_or_longer_that_published_before_are_stalled_and_stopped() -> None:
    fleet = Fleet(STALL, training("long-quiet"), training("just-quiet", minutes=10), training("too-young", minutes=9))
    fleet.metrics.before = {"long-quiet", "just-quiet"}
    report = fleet.sweep()
    assert report.stalled == ["long-quiet", "just-quiet"]
    assert fleet.published() == [
        ("long-quiet", "metric_stall", "stopped", ACCOUNT, REGION, SWEEP_ID),
        ("just-quiet", "metric_stall", "stopped", ACCOUNT, REGION, SWEEP_ID),
    ]
    assert fleet.publisher.published[0].finding == Finding(
        name="stall",
        source="metric",
        status="NoData",
        details="no datapoint of train:loss, val:loss in the last 10 min",
    )
    series = [(job, metric) for job in ("long-quiet", "just-quiet") for metric in ("train:loss", "val:loss")]
    # The window read at 1 minute, then whether they ever published: from the start of the longest training
    # phase to the start of the window, hourly.
    assert fleet.metrics.reads == [
        (series, NOW - timedelta(minutes=10), NOW, 60),
        (series, NOW - timedelta(minutes=30), NOW - timedelta(minutes=10), 3600),
    ]


def test_a_job_that_never_published_is_reported_asking_about_its_metric_definitions_never_stopped() -> None:
    fleet = Fleet(STALL, training("never", minutes=25.9))
    assert fleet.sweep().stalled == ["never"]
    assert fleet.published() == [("never", "metric_stall", "notified", ACCOUNT, REGION, SWEEP_ID)]
    [note] = fleet.publisher.published
    assert note.finding == Finding(
        name="no-metrics",
        source="metric",
        status="NoData",
        details="no datapoint of train:loss, val:loss in 25 min of training: do its MetricDefinitions match its logs?",
    )
    assert note.reason == "stall.minutes = 10: never published, so notify only: notify only"
    assert fleet.jobs.jobs["never"].status == "InProgress"


def test_a_stall_is_decided_on_the_jobs_tags_and_at_the_sweeps_time() -> None:
    fleet = Fleet(
        {**STALL, "min_training_minutes": 60},
        training("exempt"),
        training("young"),
        training("no-arn", arn=None),
    )
    fleet.jobs.tags_by_arn[arn("exempt")] = {"training-guard:exempt": "true"}
    fleet.metrics.before = {"exempt", "young", "no-arn"}
    fleet.sweep()
    assert [(name, outcome) for name, _, outcome, *_ in fleet.published()] == [
        ("exempt", "would_stop"),
        ("young", "deferred"),  # 30 of min_training_minutes=60, counted at the sweep's time
        ("no-arn", "deferred"),
    ]
    assert arn("exempt") in fleet.jobs.tag_reads
    assert None not in fleet.jobs.tag_reads  # tags are read by ARN: a job without one has none to read


def test_a_job_stopped_by_an_alarm_in_the_sweep_is_not_checked_for_a_stall() -> None:
    fleet = Fleet({**STALL, "metric_guards": [LOSS_GUARD]}, training("diverging"))
    fleet.metrics.before = {"diverging"}
    contributor = AlarmObservation(
        event_id="the-alarms-own-event",
        account=None,
        region=None,
        time=NOW,
        alarm_name="training-guard-loss-diverging",
        state="ALARM",
        reason="Threshold Crossed",
        job="diverging",
        metric="train:loss",
        contributor=True,
    )
    fleet.alarms.contributors["training-guard-loss-diverging"] = [contributor]
    report = fleet.sweep()
    # Handled as the sweep's own observation: its id, account and region.
    assert fleet.published() == [("diverging", "metric_alarm", "stopped", ACCOUNT, REGION, SWEEP_ID)]
    assert report.stalled == []


def test_with_per_job_alarms_off_the_sweep_leaves_a_firing_per_job_alarm_alone() -> None:
    fleet = Fleet({"per_job_alarms": False}, training("tagged"))
    fleet.jobs.tags_by_arn[arn("tagged")] = {"training-guard:alarm:train:loss": "max above 5 3/5 stop"}
    name = job_alarm_name("tagged", "train:loss")
    fleet.alarms.firing_jobs = [
        AlarmObservation("e", None, None, NOW, name, "ALARM", "Threshold Crossed", "tagged", "train:loss", False)
    ]
    fleet.sweep()
    assert fleet.published() == []


def test_a_reconciled_finding_is_announced_with_the_sweeps_account_and_region() -> None:
    issues = Finding(name="VanishingGradient", source="debugger", status="IssuesFound")
    fleet = Fleet({}, training("lost-event", rules=(issues,)))
    report = fleet.sweep()
    assert fleet.published() == [("lost-event", "issues_found", "stopped", ACCOUNT, REGION, SWEEP_ID)]
    assert [receipt["job"] for receipt in report.reconciled] == ["lost-event"]


def test_jobs_that_cannot_be_swept_are_named_with_why_and_the_first_five_shown() -> None:
    names = [f"job-{n}" for n in range(6)]
    fleet = Fleet({}, *(training(name) for name in names), training("fine"))
    fleet.jobs.failing = set(names)
    with pytest.raises(SweepIncomplete) as incomplete:
        fleet.sweep()
    why = {name: f"DescribeTrainingJob {name} failed: throttled" for name in names}
    assert incomplete.value.report.failed == why
    assert (
        str(incomplete.value)
        == f"6 of 7 running job(s) in account {ACCOUNT} not swept ("
        + "; ".join(f"{name}: {why[name]}" for name in names[:5])
        + ")"
    )


def test_a_failed_alarm_reaction_is_reported_against_its_job() -> None:
    fleet = Fleet({"metric_guards": [LOSS_GUARD]}, training("diverging"))
    fleet.alarms.contributors["training-guard-loss-diverging"] = [
        AlarmObservation("e", None, None, NOW, "training-guard-loss-diverging", "ALARM", "x", "diverging", None, True)
    ]
    fleet.publisher.fail = ActionFailed("sns:Publish", RuntimeError("throttled"))
    with pytest.raises(SweepIncomplete) as incomplete:
        fleet.sweep()
    assert incomplete.value.report.failed == {"diverging": "sns:Publish failed: throttled"}


def test_transitions_another_attempt_holds_are_left_to_the_next_sweep() -> None:
    issues = Finding(name="VanishingGradient", source="debugger", status="IssuesFound")
    fleet = Fleet({"metric_guards": [LOSS_GUARD]}, training("held", rules=(issues,)), training("alarm-held"))
    fleet.ledger.claim("t#held#debugger#VanishingGradient#IssuesFound", now=NOW, lease_seconds=120)
    fleet.ledger.claim("t#alarm-held#metric#loss-diverging#ALARM", now=NOW, lease_seconds=120)
    fleet.alarms.contributors["training-guard-loss-diverging"] = [
        AlarmObservation("e", None, None, NOW, "training-guard-loss-diverging", "ALARM", "x", "alarm-held", None, True)
    ]
    report = fleet.sweep()
    assert (report.busy, report.failed, fleet.published()) == (["held", "alarm-held"], {}, [])


def test_a_failing_look_back_is_reported_as_the_stall_check_and_nothing_is_called_stalled() -> None:
    class LookBackFails(Metrics):
        def jobs_with_datapoints(
            self, series: Iterable[tuple[str, str]], *, since: datetime, until: datetime, period_seconds: int = 60
        ) -> set[str]:
            if until < NOW:
                raise ActionFailed("GetMetricData", RuntimeError("throttled"))
            return super().jobs_with_datapoints(series, since=since, until=until, period_seconds=period_seconds)

    fleet = Fleet(STALL, training("quiet"))
    fleet.sweeper.metrics = LookBackFails()
    with pytest.raises(SweepIncomplete) as incomplete:
        fleet.sweep()
    assert (incomplete.value.report.failed, incomplete.value.report.stalled) == (
        {"stall check": "GetMetricData failed: throttled"},
        [],
    )
    assert fleet.published() == []


def test_a_failing_per_job_alarm_read_is_reported_by_name() -> None:
    class AlarmsFail(FakeAlarms):
        def firing_job_alarms(self) -> list[AlarmObservation]:
            raise ActionFailed("DescribeAlarms", RuntimeError("throttled"))

    fleet = Fleet({}, training("running"))
    fleet.sweeper.alarms = AlarmsFail()
    with pytest.raises(SweepIncomplete) as incomplete:
        fleet.sweep()
    assert incomplete.value.report.failed == {"per-job alarms": "DescribeAlarms failed: throttled"}


# --- one job, one story ------------------------------------------------------------------------------------
def test_the_stopped_change_of_a_job_the_sweeper_stopped_for_a_stall_is_folded() -> None:
    fleet = Fleet(STALL, training("long-quiet"))
    fleet.metrics.before = {"long-quiet"}
    fleet.sweep()
    assert fleet.ledger.stops["long-quiet"].confirmed
    stopped = replace(fleet.jobs.jobs["long-quiet"], status="Stopped", secondary_status="Stopped")
    fleet.jobs.jobs["long-quiet"] = stopped
    event = JobEvent("e2", ACCOUNT, REGION, NOW, "aws.sagemaker", "SageMaker Training Job State Change", stopped)
    receipt = fleet.responder.handle(event, now=NOW)
    assert receipt.folded == ["t#long-quiet#job#status#Stopped"]
    assert fleet.published() == [("long-quiet", "metric_stall", "stopped", ACCOUNT, REGION, SWEEP_ID)]


def test_a_reconciled_finding_folded_into_a_stop_made_meanwhile_is_reported_not_announced() -> None:
    # The sweep read the job running; before it reacted, an event's invocation stopped it for VanishingGradient.
    vanishing = Finding(name="VanishingGradient", source="debugger", status="IssuesFound")
    ratio = Finding(name="WeightUpdateRatio", source="debugger", status="IssuesFound")
    fleet = Fleet(STALL, training("raced", rules=(vanishing, ratio)))
    fleet.metrics.before = {"raced"}  # and it went quiet
    fleet.ledger.stops["raced"] = StopRecord("raced", "VanishingGradient", "why", NOW, "e1", confirmed=True)
    fleet.ledger.complete("t#raced#debugger#VanishingGradient#IssuesFound", now=NOW, ttl_seconds=60, outcome="stopped")
    report = fleet.sweep()
    assert fleet.published() == []
    assert [(r["job"], r["folded"]) for r in report.reconciled] == [
        ("raced", ["t#raced#debugger#WeightUpdateRatio#IssuesFound"])
    ]
    assert report.stalled == ["raced"]  # found, recorded, folded
    assert fleet.ledger.stops["raced"].folded == (
        "t#raced#debugger#WeightUpdateRatio#IssuesFound",
        "t#raced#metric#stall#NoData",
    )
