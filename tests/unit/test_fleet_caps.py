"""Fleet metric guards past CloudWatch's caps on a Metrics Insights alarm (docs/limits.md, "Metric guards at scale").

At most 100 contributors in ALARM are listed; past 500 series the alarm evaluates partial data. A breaching job
past a cap gets no contributor event and is not in DescribeAlarmContributors: the sweeper judges the guard's jobs
itself then, from GetMetricData, and says which guard was over which cap.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from tests.fakes import FakeAlarms, FakeJobs, FakeLedger, FakePublisher, FakeTrainingMetrics
from tests.helpers import NOW, running_job
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard.domain.metric_guards import (
    CONTRIBUTORS_IN_ALARM_MAX,
    PARTIAL_DATA_SERIES_MAX,
    AlarmObservation,
    FleetAlarmState,
    breaching_minutes,
    fleet_alarm_name,
    over_cap,
)
from training_guard.services.responder import Responder
from training_guard.services.sweeper import Sweeper, SweepReport

STOP = {"name": "loss", "metric": "train:loss", "threshold": 5, "datapoints": 2, "periods": 3, "action": "stop"}
ALARM = "training-guard-loss"
HUNDRED_PLUS = "Threshold Crossed: 100+ time series evaluated to ALARM."  # the page's wording


def config(**guard: object) -> GuardConfig:
    return GuardConfig.from_dict({"metric_guards": [{**STOP, **guard}]})


def name(n: int) -> str:
    return f"job-{n:04d}"


def minutes(*values: float) -> list[tuple[datetime, float]]:
    """One datapoint a minute, the last one two minutes before NOW (CloudWatch publishes late)."""
    last = NOW - timedelta(minutes=2)
    return [(last - timedelta(minutes=len(values) - 1 - i), v) for i, v in enumerate(values)]


def contributor(job: str) -> AlarmObservation:
    return AlarmObservation("", None, None, NOW, ALARM, "ALARM", "Threshold Crossed", job, None, True)


class World:
    """`running` jobs publishing train:loss, of which `breaching` (1-based) are above the threshold."""

    def __init__(self, running: int, breaching: set[int], guard_config: GuardConfig | None = None) -> None:
        self.config = guard_config or config()
        jobs = {
            name(n): running_job(name(n), timedelta(hours=1), metric_names=("train:loss",))
            for n in range(1, running + 1)
        }
        self.jobs = FakeJobs(jobs=jobs)
        self.alarms = FakeAlarms()
        self.metrics = FakeTrainingMetrics(
            series_points={
                (name(n), "train:loss"): minutes(9, 9, 9) if n in breaching else minutes(1, 1, 1)
                for n in range(1, running + 1)
            }
        )
        self.publisher = FakePublisher()

    def sweep(self) -> SweepReport:
        responder = Responder(self.config, self.jobs, FakeLedger(), self.publisher, alarms=self.alarms)
        return Sweeper(responder, self.jobs, self.alarms, self.metrics).sweep(now=NOW, account=None, region=None)


# --- job 101 and job 501 ---------------------------------------------------------------------------------------


def test_job_101_breaching_beyond_the_100_listed_contributors_is_stopped_by_the_sweeper() -> None:
    world = World(running=101, breaching=set(range(1, 102)))
    # CloudWatch lists 100 of the 101 contributors in ALARM, and says "100+"
    world.alarms.contributors[ALARM] = [contributor(name(n)) for n in range(1, 101)]
    world.alarms.fleet_states[ALARM] = FleetAlarmState(ALARM, "ALARM", HUNDRED_PLUS, None)
    report = world.sweep()
    assert name(101) in world.jobs.stop_calls
    assert sorted(set(world.jobs.stop_calls)) == [name(n) for n in range(1, 102)]
    assert report.fleet_alarms_over_cap == {"loss": "100 contributors in ALARM: CloudWatch lists at most 100"}
    [(dimension, asked, metric, statistic)] = world.metrics.series_reads
    assert (dimension, len(asked), metric, statistic) == (contract.JOB_DIMENSION, 101, "train:loss", "Maximum")


def test_job_501_missing_from_a_partial_data_alarm_is_stopped_by_the_sweeper() -> None:
    world = World(running=501, breaching={501})
    # the alarm evaluated the first 500 series only: job 501 is no contributor
    world.alarms.fleet_states[ALARM] = FleetAlarmState(ALARM, "OK", "Threshold Crossed: no datapoints", "PARTIAL_DATA")
    report = world.sweep()
    assert world.jobs.stop_calls == [name(501)]
    assert report.fleet_alarms_over_cap["loss"].startswith("the alarm evaluates partial data (PARTIAL_DATA")
    [stop] = [n for n in world.publisher.published if n.job.name == name(501)]
    assert stop.finding is not None
    assert "judged by the sweeper" in str(stop.finding.details)


def test_501_running_jobs_are_judged_even_before_the_alarm_says_partial_data() -> None:
    world = World(running=PARTIAL_DATA_SERIES_MAX + 1, breaching={7})
    report = world.sweep()
    assert world.jobs.stop_calls == [name(7)]
    assert report.fleet_alarms_over_cap == {
        "loss": "501 running jobs: the alarm evaluates partial data past 500 series"
    }


def test_under_every_cap_the_alarm_is_trusted_and_no_series_is_read() -> None:
    """500 series, 99 contributors listed, EvaluationState unset: the events and the listed contributors are it."""
    world = World(running=PARTIAL_DATA_SERIES_MAX, breaching=set(range(1, 101)))
    world.alarms.contributors[ALARM] = [contributor(name(n)) for n in range(1, CONTRIBUTORS_IN_ALARM_MAX)]
    world.alarms.fleet_states[ALARM] = FleetAlarmState(
        ALARM, "ALARM", "99 out of 500 time series evaluated to ALARM", None
    )
    report = world.sweep()
    assert report.fleet_alarms_over_cap == {}
    assert world.metrics.series_reads == []
    assert sorted(world.jobs.stop_calls) == [name(n) for n in range(1, 100)]  # job 100 waits for its own event


def test_a_notify_guard_over_the_cap_notifies_the_job_it_would_have_missed() -> None:
    world = World(running=3, breaching={2}, guard_config=config(action="notify"))
    world.alarms.fleet_states[ALARM] = FleetAlarmState(ALARM, "ALARM", HUNDRED_PLUS, None)
    report = world.sweep()
    assert world.jobs.stop_calls == []
    assert [n.job.name for n in world.publisher.published] == [name(2)]
    assert "loss" in report.fleet_alarms_over_cap


def test_an_instance_metric_guard_reads_each_host_and_stops_the_job_of_a_breaching_host() -> None:
    guard = config(name="gpu", metric="GPUUtilization", comparison="<", threshold=5)
    world = World(running=2, breaching=set(), guard_config=guard)
    gpu_alarm = fleet_alarm_name(guard.metric_guards[0])
    world.alarms.fleet_states[gpu_alarm] = FleetAlarmState(gpu_alarm, "OK", "", "PARTIAL_DATA")
    two_hosts = replace(world.jobs.jobs[name(2)], instance_type="ml.g5.xlarge", instance_count=2)
    world.jobs.jobs[name(2)] = two_hosts
    world.metrics.series_points = {
        (f"{name(1)}/algo-1", "GPUUtilization"): minutes(50, 50, 50),
        (f"{name(2)}/algo-1", "GPUUtilization"): minutes(50, 50, 50),
        (f"{name(2)}/algo-2", "GPUUtilization"): minutes(1, 1, 1),  # one idle host is a contributor of its own
    }
    world.sweep()
    assert world.jobs.stop_calls == [name(2)]
    [(dimension, asked, _, statistic)] = world.metrics.series_reads
    assert (dimension, statistic) == (contract.HOST_DIMENSION, "Maximum")
    assert asked == [f"{name(1)}/algo-1", f"{name(2)}/algo-1", f"{name(2)}/algo-2"]


def test_a_guard_over_the_cap_judges_only_the_jobs_it_selects() -> None:
    world = World(running=3, breaching={1, 2, 3}, guard_config=config(job_prefix="job-0002"))
    world.alarms.fleet_states[ALARM] = FleetAlarmState(ALARM, "ALARM", HUNDRED_PLUS, None)
    world.sweep()
    assert world.jobs.stop_calls == [name(2)]
    assert world.metrics.series_reads[0][1] == [name(2)]


# --- the pure parts at their limits ----------------------------------------------------------------------------


@pytest.mark.parametrize(("listed", "capped"), [(99, False), (100, True)])
def test_the_contributor_cap_is_reached_at_100_listed(listed: int, capped: bool) -> None:
    guard = config().metric_guards[0]
    assert (over_cap(guard, listed=listed, state=None, series=listed) is not None) is capped


@pytest.mark.parametrize(("series", "capped"), [(500, False), (501, True)])
def test_the_series_cap_is_passed_at_501(series: int, capped: bool) -> None:
    guard = config().metric_guards[0]
    assert (over_cap(guard, listed=None, state=None, series=series) is not None) is capped


@pytest.mark.parametrize(
    ("values", "expected"),
    [((9, 9, 9), 3), ((1, 9, 9), 2), ((9, 1, 1), 1), ((9, 9, 9, 1, 1, 1), 0), ((5, 5, 5), 0)],
)
def test_breaching_minutes_count_the_last_periods_up_to_the_newest_datapoint(
    values: tuple[float, ...], expected: int
) -> None:
    guard = config().metric_guards[0]  # > 5 over the last 3 minutes
    assert breaching_minutes(minutes(*values), guard) == expected


@pytest.mark.parametrize("reason", [HUNDRED_PLUS, "Threshold Crossed: 85+ time series evaluated to ALARM."])
def test_any_n_plus_in_the_alarms_reason_means_the_list_is_cut(reason: str) -> None:
    # The "+" says CloudWatch listed only part of the contributors, whatever the number before it.
    guard = config().metric_guards[0]
    cut = FleetAlarmState(name="loss", state="ALARM", reason=reason, evaluation_state=None)
    assert over_cap(guard, listed=85, state=cut, series=90) is not None
    whole = FleetAlarmState(
        name="loss",
        state="ALARM",
        reason="Threshold Crossed: 85 time series evaluated to ALARM.",
        evaluation_state=None,
    )
    assert over_cap(guard, listed=85, state=whole, series=90) is None
