"""Budgets and idle GPUs through the real sweeper handler on moto.

The Price List API is played from a recorded GetProducts answer by botocore's Stubber (moto answers it with a
404), as for the stops' spend; the GPU datapoints are put with PutMetricData under the dimension SageMaker uses,
`Host = <job>/algo-<n>`. Every AWS call the sweeps make is recorded: tests/infra/test_sweeper_permissions.py checks
the synthesized sweeper role allows each of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.integration.test_job_events_moto import stubbed_price_list
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard.handlers import wiring
from training_guard_local.emulator import TABLE, Emulation

# Every AWS action the budget and idle-GPU sweeps below make, as IAM names it.
BUDGET_AND_IDLE_SWEEP_ACTIONS = frozenset(
    {
        "sagemaker:ListTrainingJobs",
        "sagemaker:DescribeTrainingJob",
        "sagemaker:ListTags",
        "sagemaker:StopTrainingJob",
        "sagemaker:AddTags",
        "cloudwatch:DescribeAlarms",
        "cloudwatch:GetMetricData",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:Scan",  # once per table: the mutes an earlier version wrote get their markers
        "sns:Publish",
        "pricing:GetProducts",
    }
)
SERVICES = ("sagemaker", "cloudwatch", "dynamodb", "sns")

CONFIG = {
    "budgets": [{"job_prefix": "exp-", "max_usd": 5, "warn_at": 0.5}],
    "idle_gpu": {"threshold_percent": 10, "minutes": 15, "ignore_first_minutes": 10},
}
BUDGETED = "exp-resnet-2026-11-30-01-00-00-001"
IDLE = "gpu-idle-2026-11-30-01-00-00-002"
G5 = {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30}
RATE = 2 * 1.515  # the recorded answer's price, two instances: $3.03 an hour
# On the real clock (CloudWatch's datapoints must be recent), to the minute.
T0 = datetime.now(UTC).replace(second=0, microsecond=0)


@pytest.fixture
def aws() -> Iterator[Emulation]:
    with Emulation(GuardConfig.from_dict(CONFIG)) as emulation:
        yield emulation


class Calls(list[str]):
    """The IAM actions of every call the hooked clients make."""

    def hook(self, client: Any, prefix: str) -> None:
        def record(model: Any, **_: Any) -> None:
            self.append(f"{prefix}:{model.name}")

        client.meta.events.register("before-parameter-build", record)


@pytest.fixture
def calls(aws: Emulation) -> Calls:
    """Every call the guard's own clients make from now on (the Price List client: hooked where it is stubbed)."""
    made = Calls()
    for service in SERVICES:
        made.hook(wiring.root().client(service), service)
    return made


def job(
    name: str, *, started: datetime, resources: dict[str, Any], tags: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": "Training",
        "TrainingStartTime": int(started.timestamp() * 1000),
        "ResourceConfig": resources,
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "Tags": tags or {},
    }


def test_a_job_is_warned_at_half_its_budget_then_stopped_at_it_once_with_the_budget_named(
    aws: Emulation, calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub = stubbed_price_list(aws, "get_products_ml_g5_2xlarge_us_east_1_two_pages", "ml.g5.2xlarge")
    calls.hook(wiring.root().pricing_client(), "pricing")
    aws.put_job(job(BUDGETED, started=T0 - timedelta(minutes=60), resources=G5))  # $3.03 spent: over $2.50
    with stub:
        warned = aws.sweep(at=T0)
    stub.assert_no_pending_responses()  # priced once, from the API ...
    with stub:  # ... and from the cache after that: no response is left for a second call
        stopped = aws.sweep(at=T0 + timedelta(minutes=40))  # 100 min: $5.05
        again = aws.sweep(at=T0 + timedelta(minutes=45))
    assert (warned["budget_warnings"], warned["over_budget"]) == ([BUDGETED], [])
    assert (stopped["budget_warnings"], stopped["over_budget"]) == ([], [BUDGETED])
    assert (again["running"], again["over_budget"]) == (0, [])  # Stopping: no longer listed as running
    warning, stop = aws.notifications()
    assert (warning["kind"], warning["outcome"], warning["severity"]) == ("budget_warning", "notified", "warning")
    assert warning["title"] == f"{BUDGETED}: budget warning: $3.03 spent of its $5.00 budget (61 % of the cap)"
    assert warning["spend"]["so_far_usd"] == 3.03
    assert warning["spend"]["price_source"] == "AWS Price List API (2026-08-20)"
    assert (stop["kind"], stop["outcome"]) == ("budget_exceeded", "stopped")
    assert stop["title"] == f"Stopped {BUDGETED}: $5.05 spent of its $5.00 budget"
    assert stop["reason"] == (
        "budgets[0] (jobs starting exp-): $5.00 cap, warned at 50 %, then stop: $5.05 spent (list price)"
    )
    assert (stop["spend"]["so_far_usd"], stop["spend"]["avoided_usd"]) == (5.05, round(RATE * (86400 - 6000) / 3600, 2))
    assert (stop["rule"]["name"], stop["rule"]["kind"], stop["rule"]["status"]) == ("budgets[0]", "budget", "Exceeded")
    assert aws.job_status(BUDGETED) == "Stopping"
    record = aws.client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": f"stop#{BUDGETED}"}})["Item"]
    assert (record["rule"]["S"], record["confirmed"]["BOOL"]) == ("budgets[0]", True)
    assert record["spend_so_far_usd"] == {"N": "5.05"}
    tags = aws.job_tags(BUDGETED)
    assert (tags[contract.TAG_STOPPED_BY], tags[contract.TAG_STOP_RULE]) == ("training-guard", "budgets 0")
    assert set(calls) == BUDGET_AND_IDLE_SWEEP_ACTIONS
    assert calls.count("pricing:GetProducts") == 2  # the recorded answer's two pages, once
    assert calls.count("sagemaker:StopTrainingJob") == 1


def test_a_budget_tag_caps_a_job_no_entry_selects_and_an_unpriced_job_is_said_once(aws: Emulation) -> None:
    # moto answers GetProducts with a 404: ml.g5.2xlarge comes from the shipped table, ml.g5.12xlarge has no price
    aws.put_job(
        job(
            "tagged",
            started=T0 - timedelta(minutes=60),
            resources={"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1},
            tags={"training-guard:budget-usd": "1.50"},
        )
    )
    aws.put_job(
        job(
            "exp-unpriced",
            started=T0 - timedelta(hours=10),
            resources={"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1},
        )
    )
    first, second = aws.sweep(at=T0), aws.sweep(at=T0 + timedelta(minutes=5))
    [stop] = aws.notifications()
    assert (stop["job"]["name"], stop["kind"], stop["outcome"]) == ("tagged", "budget_exceeded", "stopped")
    assert stop["spend"]["price_source"] == "shipped price table (2026-08-20, second-hand)"
    assert stop["reason"].startswith("budget_defaults (tag training-guard:budget-usd = 1.50): $1.50 cap")
    assert first["not_judged"] == {"exp-unpriced": "budgets[0] not judged: no price for ml.g5.12xlarge"}
    assert second["not_judged"] == {}
    assert aws.job_status("exp-unpriced") == "InProgress"


def put_gpu(aws: Emulation, host: str, values: list[float], *, until: datetime) -> None:
    """One-minute GPUUtilization datapoints of a host, the last in the minute before `until`."""
    aws.client("cloudwatch").put_metric_data(
        Namespace=contract.SAGEMAKER_TRAINING_NAMESPACE,
        MetricData=[
            {
                "MetricName": "GPUUtilization",
                "Dimensions": [{"Name": contract.HOST_DIMENSION, "Value": host}],
                "Value": value,
                "Timestamp": until - timedelta(minutes=len(values) - i),
            }
            for i, value in enumerate(values)
        ],
    )


def test_gpus_idle_on_average_over_their_hosts_are_reported_from_cloudwatchs_datapoints(
    aws: Emulation, calls: Calls
) -> None:
    four_gpus = {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2}
    aws.put_job(job(IDLE, started=T0 - timedelta(minutes=40), resources=four_gpus))
    aws.put_job(job("gpu-busy", started=T0 - timedelta(minutes=40), resources=four_gpus))
    put_gpu(aws, f"{IDLE}/algo-1", [36.0] * 20, until=T0)  # 9 % of 4 GPUs
    put_gpu(aws, f"{IDLE}/algo-2", [20.0] * 20, until=T0)  # 5 %
    put_gpu(aws, "gpu-busy/algo-1", [36.0] * 20, until=T0)
    put_gpu(aws, "gpu-busy/algo-2", [100.0] * 20, until=T0)  # 25 %: the job's average is 17 %
    report = aws.sweep(at=T0)
    assert report["idle_gpus"] == [IDLE]
    [note] = aws.notifications()
    assert (note["kind"], note["outcome"], note["title"]) == ("idle_gpu", "notified", f"{IDLE}: GPUs idle")
    assert note["rule"]["details"].startswith("GPU utilisation 7.0 % on average over the last 20 min (below 10 %)")
    assert note["spend"]["so_far_usd"] is None  # ml.g5.12xlarge: no price, unknown rather than $0
    assert aws.sweep(at=T0 + timedelta(minutes=5))["idle_gpus"] == []  # once
    assert calls.count("cloudwatch:GetMetricData") == 2  # one batched read per sweep, both jobs' four hosts
    assert set(calls) <= BUDGET_AND_IDLE_SWEEP_ACTIONS
