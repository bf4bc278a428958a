"""The sweeper over fakes: what the order of its reads decides."""

from __future__ import annotations

from datetime import timedelta

from tests.fakes import FakeAlarms, FakeJobs, FakeLedger, FakePublisher, FakeTrainingMetrics
from tests.helpers import NOW
from training_guard.config import GuardConfig
from training_guard.events import TrainingJob
from training_guard.metric_guards import job_alarm_name
from training_guard.responder import Responder
from training_guard.sweeper import Sweeper, training_since


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
