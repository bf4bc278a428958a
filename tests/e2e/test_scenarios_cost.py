"""Scenarios about cost: recorded Price List answers (`price_list`) and instance metrics per host (`host_metrics`),
each checked whole when the scenario is loaded; a user's scenario that stops a job for its idle GPUs."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from training_guard_local import scenario as scenarios
from training_guard_local.demo import Demo

pytestmark = pytest.mark.e2e

RECORDING = Path(__file__).parents[1] / "events" / "pricing" / "get_products_ml_g5_2xlarge_us_east_1_two_pages.json"


def minimal(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "jobs": {"a": {"name": "job-a", "instance_type": "ml.g5.12xlarge"}},
        "steps": [{"minute": 0, "job": "a", "status": "InProgress"}],
    }
    data.update(changes)
    return data


def host_step(metrics: Any, minute: float = 5, **more: Any) -> list[dict[str, Any]]:
    return [
        {"minute": 0, "job": "a", "status": "InProgress"},
        {"minute": minute, "job": "a", "host_metrics": metrics, **more},
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            minimal(steps=host_step({"GPUUtilisation": {"algo-1": [1.0]}})),
            "steps[1].host_metrics.GPUUtilisation: not an instance metric SageMaker publishes per host "
            "(CPUUtilization, MemoryUtilization, GPUUtilization, GPUMemoryUtilization, DiskUtilization)",
        ),
        (
            minimal(steps=host_step({"GPUUtilization": {"algo-2": [1.0]}})),
            "steps[1].host_metrics.GPUUtilization.algo-2: not a host of job 'a' (algo-1: one per instance)",
        ),
        (
            minimal(steps=host_step({"GPUUtilization": {"a/algo-1": [1.0]}})),
            "steps[1].host_metrics.GPUUtilization.a/algo-1: not a host of job 'a'",
        ),
        (
            minimal(steps=host_step({"GPUUtilization": {"algo-1": [1.0, -2]}})),
            "steps[1].host_metrics.GPUUtilization.algo-1: must be a non-empty list of numbers from 0, one datapoint a minute",
        ),
        (
            minimal(steps=host_step({"GPUUtilization": {"algo-1": [True]}})),
            "steps[1].host_metrics.GPUUtilization.algo-1: must be a non-empty list of numbers",
        ),
        (
            minimal(steps=host_step({"GPUUtilization": {"algo-1": 30}})),
            "steps[1].host_metrics.GPUUtilization.algo-1: must be a non-empty list of numbers",
        ),
        (
            minimal(steps=host_step({"GPUUtilization": ["algo-1"]})),
            "steps[1].host_metrics.GPUUtilization: must map the job's hosts (algo-1, ...) to lists of datapoints",
        ),
        (
            minimal(steps=host_step({"GPUUtilization": {"algo-1": [1.0] * 7}})),
            "steps[1].host_metrics.GPUUtilization.algo-1: 7 datapoints, one a minute up to minute 5, would start "
            "before the scenario (at most 6)",
        ),
        (
            # ml.g5.12xlarge has 4 GPUs: its host reports 0 to 400
            minimal(steps=host_step({"GPUUtilization": {"algo-1": [30.0, 401]}})),
            "steps[1].host_metrics.GPUUtilization.algo-1: 401 is above 400, the most a host of ml.g5.12xlarge reports "
            "(100 x its 4 GPU(s))",
        ),
        (
            minimal(steps=host_step({"MemoryUtilization": {"algo-1": [101]}})),
            "steps[1].host_metrics.MemoryUtilization.algo-1: 101 is above 100, the most a percentage can be",
        ),
        (minimal(steps=host_step("GPUUtilization")), "steps[1].host_metrics: must map instance metric names"),
        (
            minimal(steps=host_step({})),
            "steps[1]: needs exactly one of status, alarm, sagemaker, sweep, publish, host_metrics, click, log_lines (got none)",
        ),
        (
            minimal(steps=[{"minute": 5, "host_metrics": {"GPUUtilization": {"algo-1": [1.0]}}}]),
            "steps[0].job: required for this step",
        ),
        (
            minimal(steps=host_step({"GPUUtilization": {"algo-1": [1.0]}}, sweep=True)),
            "steps[1]: needs exactly one of status, alarm, sagemaker, sweep, publish, host_metrics, click, log_lines "
            "(got ['sweep', 'host_metrics'])",
        ),
        (minimal(price_list=["ml.g5.2xlarge"]), "price_list: must map instance types to files of recorded"),
        (minimal(price_list={"g5.2xlarge": "x.json"}), "price_list.g5.2xlarge: not a SageMaker instance type"),
        (minimal(price_list={"ml.g5.2xlarge": 7}), "price_list.ml.g5.2xlarge: must be the path of a recorded"),
        (
            minimal(price_list={"ml.g5.2xlarge": "nowhere.json"}),
            "price_list.ml.g5.2xlarge: nowhere.json: cannot read recorded GetProducts answer",
        ),
    ],
)
def test_cost_step_and_price_list_mistakes_name_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenarios.parse(data)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("pages", "message"),
    [
        ({"FormatVersion": "aws_v1"}, "page 1: PriceList must be a list of JSON strings, as GetProducts returns it"),
        (
            [{"PriceList": [{"product": {}}]}],
            "page 1: PriceList must be a list of JSON strings, as GetProducts returns it",
        ),
        ([{"PriceList": []}, {"PriceList": []}], "page 1: has no NextToken, so page 2 would never be asked for"),
        ([{"PriceList": [], "NextToken": "t"}], "page 1: its NextToken asks for a page the recording does not have"),
        ([], "must hold a GetProducts response, or a non-empty list of them (one per page)"),
        ("[]", "must hold a GetProducts response, or a non-empty list of them (one per page)"),
    ],
)
def test_a_recording_that_cannot_be_played_is_refused_when_loaded(tmp_path: Path, pages: Any, message: str) -> None:
    (tmp_path / "answer.json").write_text(json.dumps(pages))
    (tmp_path / "mine.json").write_text(json.dumps(minimal(price_list={"ml.g5.2xlarge": "answer.json"})))
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenarios.load(tmp_path / "mine.json")
    assert caught.value.problems == [f"price_list.ml.g5.2xlarge: {tmp_path / 'answer.json'}: {message}"]


def test_every_cost_problem_is_reported_at_once(tmp_path: Path) -> None:
    data = minimal(
        price_list={"ml.g5.2xlarge": "missing.json"},
        steps=host_step({"GPUUtilization": {"algo-1": [500], "algo-3": [1]}}),
    )
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenarios.parse(data, folder=tmp_path)
    assert [p.split(":")[0] for p in caught.value.problems] == [
        "steps[1].host_metrics.GPUUtilization.algo-1",
        "steps[1].host_metrics.GPUUtilization.algo-3",
        "price_list.ml.g5.2xlarge",
    ]


def test_recordings_are_read_beside_the_scenario_and_a_shipped_scenarios_copy_keeps_its_own(tmp_path: Path) -> None:
    shutil.copy(RECORDING, tmp_path / "g5.json")
    (tmp_path / "mine.json").write_text(
        json.dumps(
            minimal(
                price_list={"ml.g5.2xlarge": "g5.json"},
                steps=host_step({"GPUUtilization": {"algo-1": [30, 28.5]}}, minute=1),
            )
        )
    )
    loaded = scenarios.load(tmp_path / "mine.json")
    recording = loaded.price_list["ml.g5.2xlarge"]
    assert recording.path == tmp_path / "g5.json"
    assert [page.get("NextToken") for page in recording.pages] == ["page-2-token", None]
    assert loaded.steps[1].host_metrics == {"GPUUtilization": {"algo-1": (30.0, 28.5)}}
    # the seed copied elsewhere: its relative path is found beside the shipped scenarios
    shutil.copy(scenarios.SEED_SCENARIO, tmp_path / "my-seed.json")
    seed = scenarios.load(tmp_path / "my-seed.json")
    assert seed.price_list["ml.g5.2xlarge"].path.resolve() == RECORDING.resolve()


IDLE_STOP = {
    "name": "mine: idle GPUs stop the job, prices from the shipped table",
    "config": {"idle_gpu": {"threshold_percent": 10, "minutes": 5, "ignore_first_minutes": 0, "action": "stop"}},
    "jobs": {"ddp": {"name": "ddp-resnet-2026-11-30-05-00-00", "instance_type": "ml.g5.2xlarge", "instance_count": 2}},
    "steps": [
        {"minute": 0, "job": "ddp", "status": "InProgress", "secondary": "Training"},
        # ml.g5.2xlarge has one GPU: host 1 at 12 %, host 2 at 4 %: 8 % on average, under 10
        {"minute": 6, "job": "ddp", "host_metrics": {"GPUUtilization": {"algo-1": [12] * 6, "algo-2": [4] * 6}}},
        {"minute": 7, "sweep": True},
        {"minute": 8, "job": "ddp", "sagemaker": "finish_stopping"},
    ],
    "expect": {"ddp": {"stopped_by_guard": True, "final_status": "Stopped", "notifications": ["idle_gpu"]}},
}


def test_a_users_scenario_stops_a_job_whose_gpus_idle_on_average_over_its_hosts(tmp_path: Path) -> None:
    path = tmp_path / "idle.json"
    path.write_text(json.dumps(IDLE_STOP))
    out = io.StringIO()
    code = Demo(scenarios.load(path), out=out).run()
    text = out.getvalue()
    assert code == 0, text
    assert "Price List API: no recorded answer, nothing reaches AWS: shipped price table, else unknown" in text
    assert (
        "ddp: SageMaker publishes GPUUtilization of ddp-resnet-2026-11-30-05-00-00/algo-2, one a minute from +00:01"
        in text
    )
    assert "guard: idle GPUs: ddp" in text
    # two instances at the shipped table's $1.515 for 6 minutes, the day's max runtime less those left
    assert "ml.g5.2xlarge: $1.515 an hour (2026-08-20), from the shipped price table" in text
    summary = text.split("\nSummary\n", 1)[1].splitlines()[2]
    assert [cell.strip() for cell in summary.split("│")] == [
        "ddp",
        "idle-gpu Idle",
        "stopped",
        "$0.30",
        "up to $72.42",
        "0",
        "Stopped",
    ]
