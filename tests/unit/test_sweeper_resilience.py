"""One failing read or job never keeps the rest of a sweep from running: each failure is reported, the
others are swept, and the sweep then raises so the sweeper's error alarm fires."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, cast

import pytest

from tests.fakes import FakeAlarms, FakeJobs, FakeLedger, FakePublisher, FakeTrainingMetrics
from tests.helpers import NOW
from training_guard.adapters.cloudwatch import CloudWatchAlarms
from training_guard.config.model import GuardConfig
from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import TrainingJob
from training_guard.domain.metric_guards import AlarmObservation
from training_guard.services.responder import Responder
from training_guard.services.sweeper import Sweeper, SweepIncomplete, SweepReport

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient


CONFIG = GuardConfig.from_dict(
    {
        "metric_guards": [
            {"name": "loss", "metric": "train:loss", "threshold": 5, "action": "stop"},
            {"name": "gpu", "metric": "GPUUtilization", "comparison": "<", "threshold": 5},
        ],
        "stall": {"minutes": 10, "action": "notify"},
    }
)


def job(name: str) -> TrainingJob:
    return TrainingJob(
        name=name,
        status="InProgress",
        arn=f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
        secondary_status="Training",
        training_start_time=NOW - timedelta(minutes=60),
        metric_names=("train:loss",),
    )


def contributor(alarm: str, job_name: str) -> AlarmObservation:
    return AlarmObservation("", None, None, NOW, alarm, "ALARM", "Threshold Crossed", job_name, None, True)


class FailingAlarms(FakeAlarms):
    def firing_contributors(self, alarm_name: str) -> list[AlarmObservation]:
        raise ActionFailed(f"DescribeAlarmContributors {alarm_name}", RuntimeError("Rate exceeded"))


class FailingMetrics(FakeTrainingMetrics):
    def jobs_with_datapoints(
        self, series: Iterable[tuple[str, str]], *, since: datetime, until: datetime, period_seconds: int = 60
    ) -> set[str]:
        raise ActionFailed("GetMetricData", RuntimeError("Rate exceeded"))


class PublisherFailingFor(FakePublisher):
    def __init__(self, job_name: str) -> None:
        super().__init__()
        self.job_name = job_name

    def publish(self, notification: object) -> None:
        if getattr(getattr(notification, "job", None), "name", None) == self.job_name:
            raise ActionFailed("sns:Publish", RuntimeError("Throttling"))
        super().publish(notification)  # type: ignore[arg-type]


def sweep(
    alarms: FakeAlarms, metrics: FakeTrainingMetrics, publisher: FakePublisher | None = None
) -> tuple[SweepReport, FakePublisher]:
    jobs = FakeJobs(jobs={n: job(n) for n in ("job-a", "job-b")})
    publisher = publisher or FakePublisher()
    sweeper = Sweeper(Responder(CONFIG, jobs, FakeLedger(), publisher, alarms=alarms), jobs, alarms, metrics)
    with pytest.raises(SweepIncomplete) as failed:
        sweeper.sweep(now=NOW, account=None, region=None)
    return failed.value.report, publisher


def test_a_failing_contributor_read_is_reported_and_the_stall_check_still_runs() -> None:
    report, publisher = sweep(FailingAlarms(), FakeTrainingMetrics())
    assert set(report.failed) == {"alarm training-guard-loss"}
    assert sorted(report.stalled) == ["job-a", "job-b"]  # never published: reported all the same
    assert len(publisher.published) == 2


def test_a_failing_metric_read_is_reported_and_nothing_is_called_stalled() -> None:
    report, publisher = sweep(FakeAlarms(), FailingMetrics())
    assert set(report.failed) == {"stall check"}
    assert report.stalled == []
    assert publisher.published == []


def test_one_stalled_jobs_failing_notification_does_not_keep_the_other_unannounced() -> None:
    report, publisher = sweep(FakeAlarms(), FakeTrainingMetrics(), PublisherFailingFor("job-a"))
    assert set(report.failed) == {"job-a"}
    assert report.stalled == ["job-b"]
    assert [n.job.name for n in publisher.published] == ["job-b"]


def test_only_stopping_guards_are_re_read_and_each_alarm_and_job_once() -> None:
    asked: list[str] = []

    class Recording(FakeAlarms):
        def firing_contributors(self, alarm_name: str) -> list[AlarmObservation]:
            asked.append(alarm_name)
            host = contributor(alarm_name, "job-a")
            return [host, host]  # one per host of a two-host job

    alarms = Recording()
    jobs = FakeJobs(jobs={"job-a": job("job-a")})
    sweeper = Sweeper(
        Responder(CONFIG, jobs, FakeLedger(), FakePublisher(), alarms=alarms),
        jobs,
        alarms,
        FakeTrainingMetrics(publishing={"job-a"}),
    )
    report = SweepReport()
    firing = sweeper._firing(report, {"job-a": job("job-a")}, NOW)
    assert asked == ["training-guard-loss"]  # the notify-only gpu guard is not re-read
    assert [(a.alarm_name, a.job) for a in firing] == [("training-guard-loss", "job-a")]
    assert report.failed == {}


def test_a_runtime_without_the_contributors_operation_fails_like_an_aws_call() -> None:
    class OldBotocore:
        pass

    with pytest.raises(ActionFailed, match="does not know DescribeAlarmContributors"):
        CloudWatchAlarms(cast("CloudWatchClient", OldBotocore())).firing_contributors("training-guard-loss")
