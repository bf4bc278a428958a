"""Idle GPUs: the sweeper reads each GPU job's hosts' GPUUtilization in one batched read, divides each host's value
by its instance type's GPU count, averages over the job's hosts minute by minute, and calls a job idle below the
threshold for `minutes` in a row after its first `ignore_first_minutes` of training. Over fakes.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.fakes import FakeAlarms, FakeJobs, FakeLedger, FakePublisher, FakeTrainingMetrics
from tests.helpers import NOW, SWEEP_ACCOUNT, SWEEP_REGION, job_arn, running_job
from training_guard.config.model import GuardConfig, IdleGpuGuard, settings_of
from training_guard.domain.events import InstanceGroup, TrainingJob
from training_guard.services.responder import Responder
from training_guard.services.sweeper import IDLE_READ_MARGIN, Sweeper, SweepReport, gpus_per_host, hosts_of, idle_run

ACCOUNT, REGION = SWEEP_ACCOUNT, SWEEP_REGION
IDLE = {"idle_gpu": {"threshold_percent": 10, "minutes": 15, "ignore_first_minutes": 10}}
IDLE_STOP = {"idle_gpu": {**IDLE["idle_gpu"], "action": "stop"}}


arn = job_arn


def gpu_job(
    name: str, trained_minutes: float = 60, instance_type: str | None = "ml.p4d.24xlarge", **changes: Any
) -> TrainingJob:
    return running_job(
        name, timedelta(minutes=trained_minutes), **{"instance_type": instance_type, "instance_count": 1, **changes}
    )


def minutes_before(n: int) -> datetime:
    return NOW - timedelta(minutes=n)


def series(values: list[float]) -> list[tuple[datetime, float]]:
    """One datapoint a minute, the last value the latest complete minute (NOW - 1 min)."""
    return [(minutes_before(len(values) - i), v) for i, v in enumerate(values)]


class Fleet:
    def __init__(self, config: dict[str, Any], *jobs: TrainingJob) -> None:
        self.jobs = FakeJobs(jobs={j.name: j for j in jobs})
        self.ledger = FakeLedger()
        self.publisher = FakePublisher()
        self.metrics = FakeTrainingMetrics()
        self.responder = Responder(GuardConfig.from_dict(config), self.jobs, self.ledger, self.publisher)
        self.sweeper = Sweeper(self.responder, self.jobs, FakeAlarms(), self.metrics)

    def gpu(self, host: str, values: list[float]) -> None:
        self.metrics.host_points[host] = series(values)

    def sweep(self) -> SweepReport:
        return self.sweeper.sweep(now=NOW, account=ACCOUNT, region=REGION)

    def published(self) -> list[tuple[str, str, str]]:
        return [(n.job.name, n.kind.value, n.outcome.value) for n in self.publisher.published]


# --- minutes in a row ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("idle_minutes", "idle"), [(15, True), (14, False)])
def test_a_job_is_idle_after_exactly_minutes_in_a_row_and_not_one_less(idle_minutes: int, idle: bool) -> None:
    fleet = Fleet(IDLE, gpu_job("train-1"))
    fleet.gpu("train-1/algo-1", [400.0] * 5 + [40.0] * idle_minutes)  # 8 GPUs: 40 is 5 %, 400 is 50 %
    report = fleet.sweep()
    assert fleet.published() == ([("train-1", "idle_gpu", "notified")] if idle else [])
    assert report.idle_gpus == (["train-1"] if idle else [])


def test_a_busy_minute_or_a_minute_without_data_ends_the_run() -> None:
    assert idle_run(series([0.0] * 10 + [50.0] + [0.0] * 14), 1, 10, not_before=NOW - timedelta(hours=1)) == (14, 0.0)
    gap = [(t, v) for t, v in series([0.0] * 30) if t != minutes_before(10)]
    assert idle_run(gap, 1, 10, not_before=NOW - timedelta(hours=1))[0] == 9


def test_the_first_minutes_of_training_are_not_judged() -> None:
    # 24 min of training, all idle: only 14 of them come after the first 10 minutes
    fleet = Fleet(IDLE, gpu_job("young", trained_minutes=24), gpu_job("old", trained_minutes=25))
    fleet.gpu("young/algo-1", [0.0] * 24)
    fleet.gpu("old/algo-1", [0.0] * 25)
    fleet.sweep()
    assert fleet.published() == [("old", "idle_gpu", "notified")]
    [(hosts, _, _, _)] = fleet.metrics.host_reads
    assert hosts == ["old/algo-1"]  # the young job is not even read


def test_idle_minutes_before_the_ignored_first_minutes_do_not_count() -> None:
    not_before = NOW - timedelta(minutes=14)
    assert idle_run(series([0.0] * 30), 8, 10, not_before=not_before) == (14, 0.0)


def test_the_first_minutes_are_counted_from_the_last_entry_into_training() -> None:
    # training started an hour ago, but re-entered Training (a spot restart) 20 min ago: 10 min judged, too few
    restarted = gpu_job("spot", trained_minutes=60, training_phase_start=NOW - timedelta(minutes=20))
    fleet = Fleet(IDLE, restarted)
    fleet.gpu("spot/algo-1", [0.0] * 60)
    fleet.sweep()
    assert fleet.published() == []


# --- normalised by the GPU count -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("instance_type", "host_value", "idle"),
    [
        ("ml.p4d.24xlarge", 700.0, False),  # one idle GPU of 8: 87.5 %
        ("ml.p4d.24xlarge", 100.0, False),  # one busy GPU of 8: 12.5 %, not below 10 %
        ("ml.p4d.24xlarge", 70.0, True),  # 8.75 %: idle, though 70 is far above 10 unnormalised
        ("ml.g5.2xlarge", 70.0, False),  # one GPU: 70 %
        ("ml.g5.12xlarge", 36.0, True),  # 4 GPUs: 9 %
    ],
)
def test_a_hosts_utilisation_is_divided_by_its_gpu_count(instance_type: str, host_value: float, idle: bool) -> None:
    fleet = Fleet(IDLE, gpu_job("train-1", instance_type=instance_type))
    fleet.gpu("train-1/algo-1", [host_value] * 20)
    fleet.sweep()
    assert fleet.published() == ([("train-1", "idle_gpu", "notified")] if idle else [])


def test_the_jobs_hosts_are_averaged_minute_by_minute() -> None:
    two_hosts = gpu_job("pair", instance_count=2)
    fleet = Fleet(IDLE, two_hosts)
    fleet.gpu("pair/algo-1", [0.0] * 20)  # idle
    fleet.gpu("pair/algo-2", [200.0] * 20)  # 25 %: the job's average is 12.5 %, not idle
    assert hosts_of(two_hosts) == ["pair/algo-1", "pair/algo-2"]
    fleet.sweep()
    assert fleet.published() == []
    fleet.gpu("pair/algo-2", [120.0] * 20)  # 15 %: the average is 7.5 %
    fleet.sweep()
    assert fleet.published() == [("pair", "idle_gpu", "notified")]
    [note] = fleet.publisher.published
    assert note.finding is not None
    assert note.finding.details == (
        "GPU utilisation 7.5 % on average over the last 20 min (below 10 %): 2 host(s) of 8 GPU(s) each, "
        "each host's GPUUtilization divided by its 8"
    )
    assert (
        note.reason
        == "idle_gpu: GPUs below 10 % for 15 min in a row, after the first 10 min of training -> notify: notify only"
    )
    assert note.title == "pair: GPUs idle"
    assert note.document()["kind"] == "idle_gpu"


def test_every_gpu_job_is_read_in_one_batched_call_over_the_window_and_a_margin() -> None:
    fleet = Fleet(IDLE, gpu_job("a"), gpu_job("b", instance_count=3), gpu_job("cpu", instance_type="ml.m5.xlarge"))
    fleet.sweep()
    [(hosts, metric, since, until)] = fleet.metrics.host_reads
    assert hosts == ["a/algo-1", "b/algo-1", "b/algo-2", "b/algo-3"]
    assert (metric, until - since) == ("GPUUtilization", timedelta(minutes=15) + IDLE_READ_MARGIN)
    assert until == NOW


# --- never judged, or not judged ---------------------------------------------------------------------------------
@pytest.mark.parametrize("instance_type", ["ml.m5.xlarge", "ml.c5.2xlarge", "ml.trn1.32xlarge"])
def test_a_type_without_gpus_is_never_judged_nor_read(instance_type: str) -> None:
    fleet = Fleet(IDLE, gpu_job("cpu", instance_type=instance_type))
    report = fleet.sweep()
    assert (fleet.metrics.host_reads, fleet.published(), report.not_judged) == ([], [], {})


@pytest.mark.parametrize("instance_type", ["ml.p5.48xlarge", "ml.g7e.2xlarge", "ml.p9.96xlarge"])
def test_an_unknown_gpu_count_is_not_judged_and_said_once(instance_type: str) -> None:
    fleet = Fleet(IDLE, gpu_job("big", instance_type=instance_type))
    fleet.gpu("big/algo-1", [0.0] * 30)
    first, second = fleet.sweep(), fleet.sweep()
    assert first.not_judged == {
        "big": f"idle_gpu not judged: the GPU count of {instance_type} is unknown, so its hosts' GPUUtilization "
        "cannot be normalised"
    }
    assert (second.not_judged, fleet.published(), fleet.metrics.host_reads) == ({}, [], [])


def test_instance_groups_of_different_gpu_counts_are_not_judged() -> None:
    mixed = gpu_job(
        "hetero",
        instance_type=None,
        instance_groups=(InstanceGroup("ml.p4d.24xlarge", 2, "gpu"), InstanceGroup("ml.c5.2xlarge", 1, "data")),
    )
    assert gpus_per_host(mixed) == (
        "its instance groups have different GPU counts (ml.p4d.24xlarge (8 GPUs), ml.c5.2xlarge (0 GPUs)); "
        "CloudWatch does not say which host is which"
    )
    same = replace(mixed, instance_groups=(InstanceGroup("ml.g5.12xlarge", 1), InstanceGroup("ml.g5.24xlarge", 2)))
    assert (gpus_per_host(same), hosts_of(same)) == (4, ["hetero/algo-1", "hetero/algo-2", "hetero/algo-3"])


def test_a_job_not_training_now_is_not_judged() -> None:
    fleet = Fleet(IDLE, gpu_job("uploading", secondary_status="Uploading"))
    fleet.gpu("uploading/algo-1", [0.0] * 60)
    fleet.sweep()
    assert (fleet.metrics.host_reads, fleet.published()) == ([], [])


# --- the one path to a stop ----------------------------------------------------------------------------------------
def test_stop_once_then_the_job_is_left_alone() -> None:
    fleet = Fleet(IDLE_STOP, gpu_job("idle"))
    fleet.gpu("idle/algo-1", [0.0] * 20)
    fleet.sweep()
    fleet.jobs.jobs["idle"] = gpu_job("idle")  # still listed InProgress at the next sweep
    fleet.sweep()
    assert fleet.published() == [("idle", "idle_gpu", "stopped")]
    assert fleet.jobs.stop_calls == ["idle"]
    record = fleet.ledger.stops["idle"]
    assert (record.rule, record.reason.split(":")[0]) == ("idle-gpu", "idle_gpu")


def test_in_dry_run_or_exempt_an_idle_job_would_be_stopped() -> None:
    fleet = Fleet({**IDLE_STOP, "dry_run": True}, gpu_job("idle"))
    fleet.gpu("idle/algo-1", [0.0] * 20)
    fleet.sweep()
    assert fleet.published() == [("idle", "idle_gpu", "would_stop")]
    exempt = Fleet(IDLE_STOP, gpu_job("idle"))
    exempt.jobs.tags_by_arn[arn("idle")] = {"training-guard:exempt": "true"}
    exempt.gpu("idle/algo-1", [0.0] * 20)
    exempt.sweep()
    assert exempt.published() == [("idle", "idle_gpu", "would_stop")]
    assert fleet.jobs.stop_calls == exempt.jobs.stop_calls == []


def test_off_by_default() -> None:
    fleet = Fleet({}, gpu_job("idle"))
    fleet.gpu("idle/algo-1", [0.0] * 60)
    fleet.sweep()
    assert (fleet.metrics.host_reads, fleet.published()) == ([], [])


def test_the_longest_window_is_read_at_one_minute_within_the_15_days_cloudwatch_keeps_it() -> None:
    """1-minute datapoints are kept 15 days
    (https://docs.amazonaws.cn/en_us/AmazonCloudWatch/latest/APIReference/API_GetMetricData.md)."""
    [longest] = [d.setting.maximum for d in settings_of(IdleGpuGuard) if d.name == "minutes"]
    assert longest is not None
    assert timedelta(minutes=longest) + IDLE_READ_MARGIN <= timedelta(days=15)


def test_what_the_idle_jobs_price_lookup_ran_into_is_in_the_sweeps_report() -> None:
    from tests.fakes import FakePrices

    fleet = Fleet(IDLE, gpu_job("idle"))
    prices = FakePrices(problems=["GetProducts ml.p4d.24xlarge in eu-west-1 failed: ThrottlingException"])
    fleet.responder = Responder(
        GuardConfig.from_dict(IDLE), fleet.jobs, fleet.ledger, fleet.publisher, alarms=FakeAlarms(), prices=prices
    )
    fleet.sweeper = Sweeper(fleet.responder, fleet.jobs, FakeAlarms(), fleet.metrics)
    fleet.gpu("idle/algo-1", [0.0] * 20)
    report = fleet.sweep()
    assert fleet.published() == [("idle", "idle_gpu", "notified")]
    assert report.price_problems == ["GetProducts ml.p4d.24xlarge in eu-west-1 failed: ThrottlingException"]
