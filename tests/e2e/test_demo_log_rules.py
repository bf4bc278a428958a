"""The demo's training logs: jobs write real logs to the emulated group, the template's subscription delivers them."""

from __future__ import annotations

import base64
import gzip
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from training_guard import contract
from training_guard_local import emulator, logs_ext, sagemaker_ext
from training_guard_local import scenario as scenarios
from training_guard_local.demo import Demo
from training_guard_local.scenario import ScenarioError

pytestmark = pytest.mark.e2e
LOGS = Path(__file__).resolve().parents[1] / "data" / "training_logs"


def minimal(log: str | None = "train.log", **changes: Any) -> dict[str, Any]:
    job: dict[str, Any] = {"name": "job-a"} | ({"log": log} if log else {})
    data: dict[str, Any] = {
        "jobs": {"a": job},
        "steps": [{"minute": 0, "job": "a", "status": "InProgress"}, {"minute": 1, "job": "a", "log_lines": 2}],
    }
    data.update(changes)
    return data


def parsed(tmp_path: Path, data: dict[str, Any]) -> scenarios.Scenario:
    (tmp_path / "train.log").write_text("step 1 loss=2.3\n\nstep 2 loss=nan\n", encoding="utf-8")
    return scenarios.parse(data, folder=tmp_path)


def test_a_jobs_log_is_read_with_the_scenario_its_lines_numbered_as_in_the_file(tmp_path: Path) -> None:
    job = parsed(tmp_path, minimal()).jobs["a"]
    assert job.log == tmp_path / "train.log"
    assert job.log_lines == ("step 1 loss=2.3", "", "step 2 loss=nan")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (minimal("nope.log"), "jobs.a.log: "),
        (minimal(jobs={"a": {"name": "job-a", "log": 3}}), "jobs.a.log: must be the path of a training log"),
        (minimal(log=None), "steps[1].log_lines: job 'a' has no log (jobs.a.log)"),
        (
            minimal(steps=[{"minute": 0, "job": "a", "log_lines": -1}]),
            "steps[0].log_lines: must be a whole number of lines from 1, got -1",
        ),
        (
            minimal(steps=[{"minute": 0, "job": "a", "log_lines": True}]),
            "steps[0].log_lines: must be a whole number of lines from 1, got True",
        ),
        (minimal(steps=[{"minute": 0, "log_lines": 3}]), "steps[0].job: required for this step"),
        (
            minimal(jobs={"a": {"name": "job-a", "log": "train.log", "metric_definitions": [{"Name": "loss"}]}}),
            'jobs.a.metric_definitions: must be a list of {"Name": ..., "Regex": ...}',
        ),
        (
            minimal(
                jobs={"a": {"name": "job-a", "log": "train.log", "metric_definitions": [{"Name": "x", "Regex": "("}]}}
            ),
            "jobs.a.metric_definitions[0].Regex: not a regular expression",
        ),
    ],
)
def test_a_log_mistake_is_named_when_the_scenario_is_loaded(tmp_path: Path, data: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as raised:
        parsed(tmp_path, data)
    assert any(message in problem for problem in raised.value.problems), raised.value.problems


def test_an_empty_log_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_text("\n\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"jobs\.a\.log: .*empty\.log holds no log line"):
        scenarios.parse(minimal("empty.log"), folder=tmp_path)


def test_the_seeds_log_jobs_write_the_committed_real_logs() -> None:
    seed = scenarios.load(scenarios.SEED_SCENARIO)
    logs = {key: job.log.resolve() for key, job in seed.jobs.items() if job.log is not None}
    assert logs == {
        "lr01": LOGS / "pytorch_mnist_lr0.1.log",
        "nan": LOGS / "pytorch_mlp_nan.log",
        "steady": LOGS / "pytorch_mnist_healthy.log",
    }
    # no Debugger rule and no metric guard's alarm for them: only their log speaks
    for step in seed.steps:
        if step.job in logs:
            assert not step.rules
            assert step.alarm is None
            assert not step.publish


# --- the demo: the seed's log jobs, played on the seed's configuration (its template, kept from the seed's run) -----
@dataclass
class LogDemo:
    code: int
    out: str
    demo: Demo
    received: list[tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]]  # (event, document, the stream's)


def _log_jobs_only() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(scenarios.SEED_SCENARIO.read_text(encoding="utf-8"))
    keys = {"lr01", "nan", "steady"}
    data["jobs"] = {k: v for k, v in data["jobs"].items() if k in keys}
    data["steps"] = [s for s in data["steps"] if s.get("job") in keys]
    data["expect"] = {k: v for k, v in data["expect"].items() if k in keys}
    data.pop("price_list")
    return data


@pytest.fixture(scope="module")
def played() -> LogDemo:
    scenario = scenarios.parse(_log_jobs_only(), folder=scenarios.SCENARIOS_DIR, source="the seed's log jobs")
    out = io.StringIO()
    demo = Demo(scenario, out=out)
    received: list[tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]] = []
    real = demo._handler(logs_ext.LOG_EVENTS_HANDLER)

    def handler(event: dict[str, Any], context: Any) -> Any:
        """The real handler, and what it received: the event, its decoded document, and the stream as the
        emulated log group holds it then."""
        doc = json.loads(gzip.decompress(base64.b64decode(event["awslogs"]["data"])))
        stream = demo.aws.client("logs").get_log_events(
            logGroupName=doc["logGroup"], logStreamName=doc["logStream"], startFromHead=True
        )["events"]
        received.append((event, doc, stream))
        return real(event, context)

    demo._handlers[logs_ext.LOG_EVENTS_HANDLER] = handler  # the demo's cache of the template's handlers
    code = demo.run()
    return LogDemo(code, out.getvalue(), demo, received)


def _job(played: LogDemo, key: str) -> str:
    return played.demo.scenario.jobs[key].name


def test_the_mnist_job_at_learning_rate_0_1_is_stopped_from_its_log_with_no_rule_and_no_threshold(
    played: LogDemo,
) -> None:
    assert played.code == 0, played.out
    out = played.out
    assert "[+00:01] lr01: InProgress/Training; no Debugger rules" in out
    assert "CloudWatch alarm" not in out  # no metric guard fired: the stop is the log's
    written = out.split("[+00:08] lr01: writes lines 16-30", 1)[1].split("\n[+", 1)[0]
    assert (
        "         log rule LossNotDecreasing fired at line 22: 'Train Epoch: 0 [760/1437 (53%)] Loss: 2.096303' "
        "-> stopped\n"
    ) in written
    assert written.count("StopTrainingJob called") == 1
    assert f"🔴 Stopped {_job(played, 'lr01')}: log rule LossNotDecreasing: the mean of train:loss" in out
    assert "Why: log_rules.loss_not_decreasing (num_steps 10, diff_percent 0.1" in out
    assert "[+00:13] lr01: Stopped at line 22: the last 158 line(s) of its log are never written" in out
    assert [c.job for c in sagemaker_ext.stop_calls()].count(_job(played, "lr01")) == 1


def test_the_nan_job_is_stopped_once_and_the_nan_after_the_stop_folds_into_it(played: LogDemo) -> None:
    out = played.out.split("[+00:08] nan: writes lines 11-20", 1)[1].split("\n[+", 1)[0]
    assert "log rule Divergence fired at line 14: 'step=14 epoch=0 lr=2 loss=14.9981' -> stopped" in out
    assert (
        "log rule NaN fired at line 15: 'step=15 epoch=0 lr=2 loss=nan' -> nothing more: the job is being stopped"
        in out
    )
    assert out.count("StopTrainingJob called") == 1
    assert [c.job for c in sagemaker_ext.stop_calls()].count(_job(played, "nan")) == 1
    assert "[+00:13] nan: Stopped at line 14: the last 70 line(s) of its log are never written" in played.out


def test_the_healthy_job_writes_its_whole_log_and_is_never_stopped(played: LogDemo) -> None:
    assert "[+00:15] steady: writes lines 81-103; the last: 'Training is complete'" in played.out
    assert "[+00:15] steady: Completed/Completed" in played.out
    assert _job(played, "steady") not in [c.job for c in sagemaker_ext.stop_calls()]
    assert f"🔴 Stopped {_job(played, 'steady')}" not in played.out
    # nothing at all for it: the seed keeps the plateau rules quiet, and no other rule fires on a healthy run
    steady = [part.split("\n[+", 1)[0] for part in played.out.split("] steady: writes lines")[1:]]
    assert len(steady) == 5
    assert not [part for part in steady if "log rule" in part or "guard:" in part or "slack" in part]
    assert played.demo.outcomes["steady"].notifications == []


def test_the_function_gets_cloudwatch_logs_delivery_of_the_lines_the_templates_filter_pattern_selects(
    played: LogDemo,
) -> None:
    # the subscription is the template's: its filter pattern (the configuration's default) and its function
    assert (
        f"      subscription {contract.LOG_SUBSCRIPTION_FILTER_NAME} on {contract.TRAINING_LOG_GROUP}: filter pattern "
        f"{contract.LOG_FILTER_PATTERN!r} -> {logs_ext.LOG_EVENTS_HANDLER}\n"
    ) in played.out
    selects = logs_ext.matcher(contract.LOG_FILTER_PATTERN)
    lr01 = played.demo.scenario.jobs["lr01"]
    first_event, first, stream = played.received[0]
    assert set(first_event) == {"awslogs"}  # base64 of gzip of the document, as AWS sends it
    assert first["messageType"] == "DATA_MESSAGE"
    assert first["owner"] == emulator.ACCOUNT
    assert first["logGroup"] == contract.TRAINING_LOG_GROUP
    assert first["subscriptionFilters"] == [contract.LOG_SUBSCRIPTION_FILTER_NAME]
    assert first["logStream"].startswith(f"{lr01.name}/algo-1-")
    # lines 1-15 written to the emulated group; the 13 that can carry a loss delivered, with the group's IDs and times
    assert [e["message"] for e in stream] == list(lr01.log_lines[:15])
    assert [e["message"] for e in first["logEvents"]] == [m for m in lr01.log_lines[:15] if selects(m)]
    assert len(first["logEvents"]) == 13
    kept = {e["timestamp"]: e["message"] for e in stream}
    assert all(kept[e["timestamp"]] == e["message"] and len(e["id"]) == 56 for e in first["logEvents"])
    # one delivery per write while the job runs; none once it has stopped
    jobs = [logs_ext.job_of(doc["logStream"]) for _, doc, _ in played.received]
    assert jobs.count(lr01.name) == 2
    assert jobs.count(played.demo.scenario.jobs["nan"].name) == 2
    assert jobs.count(played.demo.scenario.jobs["steady"].name) == 5


def test_the_stall_check_runs_as_the_templates_schedule_says_and_finds_a_silent_job() -> None:
    data = _log_jobs_only()
    # steady never completes: its last line is written at minute 15, and the sweeps come at 16 and at 50
    data["steps"] = [s for s in data["steps"] if not (s.get("job") == "steady" and s.get("status") == "Completed")]
    data["steps"] += [{"minute": 16, "sweep": True}, {"minute": 50, "sweep": True}]
    data["expect"]["steady"] = {"stopped_by_guard": False, "final_status": "InProgress"}
    scenario = scenarios.parse(data, folder=scenarios.SCENARIOS_DIR, source="a silent job")
    out = io.StringIO()
    assert Demo(scenario, out=out).run() == 0, out.getvalue()
    text = out.getvalue()
    assert "rate(5 minutes) -> training_guard.handlers.log_events.handler (the stall check)" in text
    first, later = text.split("[+00:16] sweeper: scheduled run", 1)[1].split("[+00:50] sweeper: scheduled run", 1)
    assert "log rules: stall check of 1 running job(s); stalled: none" in first
    steady = scenario.jobs["steady"].name
    assert f"log rules: stall check of 1 running job(s); stalled: {steady}/algo-1-" in later
    assert f"{steady}: log rule StalledTrainingRule" in later  # notify only, by default
