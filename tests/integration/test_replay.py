"""Replays that mean what they say: each event decided at its own time, in its own account and
region, one full line per event whatever it holds, quiet stderr, progress for long replays."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.constants import MAX_METRICS

from tests.helpers import EVENTS_DIR, load_event, with_detail
from training_guard.adapters import clock
from training_guard.config.model import GuardConfig
from training_guard_local import replay
from training_guard_local.cli import main
from training_guard_local.emulator import ACCOUNT, REGION, Emulation

JOB = "pytorch-mnist-lr01-2026-11-30-02-10-00-123"
A, B = "111111111111", "222222222222"


def write(tmp_path: Path, events: Any, name: str = "events.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(events))
    return str(path)


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[list[dict[str, Any]], str]:
    assert main(["simulate", *args]) == 0
    out, err = capsys.readouterr()
    return [json.loads(line) for line in out.splitlines()], err


def finding(account: str | None = ACCOUNT, region: str | None = REGION, **changes: Any) -> dict[str, Any]:
    event = load_event("vanishing_gradient_issues_found")
    for key, value in (("account", account), ("region", region)):
        if value is None:
            del event[key]
        else:
            event[key] = value
    event.update(changes)
    return event


# --- accounts and regions --------------------------------------------------------------------------------


def test_events_from_several_accounts_are_each_decided_in_their_own(tmp_path: Path) -> None:
    events = [
        finding(A, "eu-west-1"),
        finding(B, "us-east-1"),
        finding(A, "eu-west-1"),  # SageMaker repeats itself in account A
        with_detail(finding(B, "us-east-1"), TrainingJobStatus="Stopped", SecondaryStatus="Stopped"),
    ]
    with Emulation(GuardConfig(), handler_logs=False) as aws:
        lines = [replay.Replay(aws).play(e) for e in replay.load_events([Path(write(tmp_path, events))])]
        aws.use(A, "eu-west-1")
        tags_a = aws.job_tags(JOB)
        aws.use(B, "us-east-1")
        tags_b = aws.job_tags(JOB)
        sites = aws.sites()
    assert [(line["account"], line["region"]) for line in lines] == [
        (A, "eu-west-1"),
        (B, "us-east-1"),
        (A, "eu-west-1"),
        (B, "us-east-1"),
    ]
    # the same job name in two accounts is two jobs: each is stopped once, in its own account
    assert [line["stopped"] for line in lines] == [True, True, False, False]
    assert [line["duplicates"] for line in lines] == [0, 0, 1, 1]  # the last repeats B's finding
    assert lines[3]["folded"] == [f"t#{JOB}#job#status#Stopped"]  # B's stop, folded into the guard's stop of B's job
    assert [line["ignored"] for line in lines] == [None, None, None, None]  # no "event from account ..."
    assert lines[0]["titles"] == [f"Stopped {JOB}: rule VanishingGradient found issues"]
    assert tags_a["training-guard:stopped-by"] == tags_b["training-guard:stopped-by"] == "training-guard"
    assert sites == [(ACCOUNT, REGION), (A, "eu-west-1"), (B, "us-east-1")]


def test_the_notification_names_the_account_and_region_of_its_event(tmp_path: Path) -> None:
    with Emulation(GuardConfig(), handler_logs=False) as aws:
        aws.use(A, "eu-west-1")
        aws.deliver(finding(A, "eu-west-1"))
        [note] = aws.notifications()
    assert (note["account"], note["region"]) == (A, "eu-west-1")


def test_an_event_without_account_or_region_is_replayed_in_the_default_and_noted_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, [finding(None, None), finding(None, None)])
    lines, err = simulate(capsys, path)
    assert [(line["account"], line["region"]) for line in lines] == [(ACCOUNT, REGION)] * 2
    assert lines[0]["warnings"] == [f"no account: replayed in {ACCOUNT}", f"no region: replayed in {REGION}"]
    assert [line["stopped"] for line in lines] == [True, False]
    assert err.splitlines() == [
        f"training-guard simulate: {path}[0]: the event has no account; replayed in the emulation's account "
        f"{ACCOUNT} (so is any other event without one; choose with --account)",
        f"training-guard simulate: {path}[0]: the event has no region; replayed in the emulation's region "
        f"{REGION} (so is any other event without one; choose with --region)",
    ]


def test_account_and_region_options_replace_every_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, [finding(A, "eu-west-1"), finding(B, "us-east-1"), finding(None, None)])
    lines, err = simulate(capsys, "--account", "333333333333", "--region", "ap-south-1", path)
    assert {(line["account"], line["region"]) for line in lines} == {("333333333333", "ap-south-1")}
    assert [line["stopped"] for line in lines] == [True, False, False]  # one account now: one job
    assert err == ""


# --- time ------------------------------------------------------------------------------------------------


@pytest.fixture
def any_day(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wall clock a year after the events: a replay must not read it."""
    monkeypatch.setattr(clock, "utcnow", lambda: datetime(2027, 11, 30, tzinfo=UTC))


def grace_config(tmp_path: Path) -> str:
    return write(tmp_path, {"min_training_minutes": 60}, "guard.json")


def test_a_finding_in_the_grace_period_is_deferred_on_any_day(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], any_day: None
) -> None:
    # 3.5 minutes into training when it arrived: replayed a day (or a year) later it is still 3.5 minutes
    [line], _ = simulate(
        capsys, "--config", grace_config(tmp_path), str(EVENTS_DIR / "vanishing_gradient_issues_found.json")
    )
    assert line["stopped"] is False
    assert line["outcomes"] == ["deferred"]
    assert line["time"] == "2026-11-30T02:15:05Z"
    assert line["job_status"] == "InProgress"


def test_now_decides_every_event_at_that_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], any_day: None
) -> None:
    event = str(EVENTS_DIR / "vanishing_gradient_issues_found.json")
    [line], _ = simulate(capsys, "--config", grace_config(tmp_path), "--now", "2026-11-30T03:20:00Z", event)
    assert line["time"] == "2026-11-30T03:20:00Z"
    assert line["stopped"] is True  # 68.5 minutes of training by then


def test_slack_preview_shows_the_trained_time_the_guard_saw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], any_day: None
) -> None:
    event = str(EVENTS_DIR / "vanishing_gradient_issues_found.json")
    assert main(["slack-preview", "--config", grace_config(tmp_path), event]) == 0
    out = capsys.readouterr().out
    assert f"Rule VanishingGradient found issues in {JOB}: stop deferred" in out
    assert "Trained: 3 min 35 s" in out


def test_an_event_without_a_time_is_replayed_at_the_previous_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    timeless = finding()
    del timeless["time"]
    lines, _ = simulate(capsys, write(tmp_path, [finding(), timeless, finding(time="in a while")]))
    assert [line["time"] for line in lines] == ["2026-11-30T02:15:05Z"] * 3
    assert lines[1]["warnings"] == ["no usable time: replayed at the previous event's time"]
    assert lines[2]["warnings"] == [
        "no usable time: replayed at the previous event's time",
        "time 'in a while' is not a time",
    ]


# --- one full line for every event -----------------------------------------------------------------------


def test_every_line_has_every_key_whatever_the_event(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = [
        finding(),
        "not an object",
        {"source": "my.app"},
        {"source": "aws.sagemaker", "detail-type": "SageMaker Training Job State Change"},
    ]
    lines, _ = simulate(capsys, write(tmp_path, events))
    assert [list(line) for line in lines] == [list(replay.LINE_KEYS)] * 4
    assert [line["error"] for line in lines] == [
        None,
        "event must be a JSON object, got a string",
        "not a training job state change (source='my.app', detail-type=None)",
        "event has no 'detail' object",
    ]
    assert [line["event"] for line in lines] == [f"{tmp_path / 'events.json'}[{i}]" for i in range(4)]


def test_an_arn_that_does_not_match_the_job_name_still_gives_a_full_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # AWS's own sample event: the ARN ends in kmeans-1, the name is a UUID (the guard tags the ARN)
    sample = load_event("aws_sample_completed")
    running = with_detail(
        sample,
        TrainingJobStatus="InProgress",
        SecondaryStatus="Training",
        DebugRuleEvaluationStatuses=[
            {"RuleConfigurationName": "VanishingGradient", "RuleEvaluationStatus": "IssuesFound"}
        ],
    )
    lines, _ = simulate(capsys, write(tmp_path, running))
    [line] = lines
    assert line["error"] is None
    assert line["stopped"] is True
    assert line["outcomes"] == ["stopped"]
    assert line["job"] == "89c96cc8-dded-4739-afcc-6f1dc936701d"


def test_a_rule_status_list_given_as_a_string_is_an_error_not_a_silent_no_op(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event = with_detail(finding(), DebugRuleEvaluationStatuses="VanishingGradient: IssuesFound")
    [line], _ = simulate(capsys, write(tmp_path, event))
    assert line["error"] == (
        "detail.DebugRuleEvaluationStatuses must be a list of rule statuses, got a string: "
        "the guard reads no rule from it"
    )
    assert line["stopped"] is False
    assert line["outcomes"] == []


def test_unknown_statuses_and_unparsable_times_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    event = finding()
    detail = event["detail"]
    detail["SecondaryStatus"] = "Trainig"
    detail["TrainingStartTime"] = "yesterday"
    detail["DebugRuleEvaluationStatuses"][1]["RuleEvaluationStatus"] = "IssueFound"
    [line], _ = simulate(capsys, write(tmp_path, event))
    assert line["warnings"] == [
        "detail.SecondaryStatus 'Trainig' is not a known secondary status",
        "detail.TrainingStartTime 'yesterday' is not a time: the guard reads it as unknown",
        "detail.DebugRuleEvaluationStatuses[1] (VanishingGradient): RuleEvaluationStatus 'IssueFound' is not a "
        "known status (InProgress, NoIssuesFound, IssuesFound, Error, Stopping, Stopped)",
    ]
    assert line["error"] is None
    assert line["stopped"] is False  # "IssueFound" is no finding


# --- alarm events -------------------------------------------------------------------------------------------

RESNET = "resnet50-no-debugger-2026-11-30-02-20-00-001"
GUARDED = {
    "metric_guards": [{"name": "loss-diverging", "metric": "train:loss", "threshold": 5, "action": "stop"}],
}


def resnet_running() -> dict[str, Any]:
    event = finding()
    event["detail"] = {
        **{k: v for k, v in event["detail"].items() if k != "DebugRuleEvaluationStatuses"},
        "TrainingJobName": RESNET,
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{RESNET}",
    }
    event["time"] = "2026-11-30T02:38:00Z"
    return event


def test_alarm_events_are_replayed_through_the_alarm_handler(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, GUARDED, "guard.json")
    alarm = str(EVENTS_DIR / "alarms" / "contributor_train_loss.json")
    lines, _ = simulate(capsys, "--config", config, write(tmp_path, resnet_running()), alarm)
    assert lines[1]["job"] == RESNET
    assert lines[1]["stopped"] is True
    assert lines[1]["titles"] == [f"Stopped {RESNET}: metric guard loss-diverging fired"]
    assert lines[1]["time"] == "2026-11-30T02:40:04Z"


def test_an_alarm_for_a_job_never_seen_is_reported_not_dropped(capsys: pytest.CaptureFixture[str]) -> None:
    [line], _ = simulate(capsys, str(EVENTS_DIR / "alarms" / "per_job_train_loss.json"))
    assert line["job"] == RESNET
    assert line["ignored"] == f"training job {RESNET} does not exist"


def test_slack_preview_shows_alarm_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, GUARDED, "guard.json")
    alarm = str(EVENTS_DIR / "alarms" / "contributor_train_loss.json")
    assert main(["slack-preview", "--config", config, write(tmp_path, resnet_running()), alarm]) == 0
    assert f"🔴 Stopped {RESNET}: metric guard loss-diverging fired" in capsys.readouterr().out


# --- long replays: quiet, with progress, into a closed pipe -------------------------------------------------------


def many(count: int, *, rules: str | None = None) -> list[dict[str, Any]]:
    """`count` jobs' events: each a finding that stops its job, or with every rule at status `rules` (InProgress:
    decided with no AWS call, for replays whose length is the point)."""
    out = []
    for i in range(count):
        event = copy.deepcopy(finding())
        if rules is not None:
            for status in event["detail"]["DebugRuleEvaluationStatuses"]:
                status.update(RuleEvaluationStatus=rules, StatusDetails="")
        name = f"job-{i:05d}"
        event["detail"]["TrainingJobName"] = name
        event["detail"]["TrainingJobArn"] = f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}"
        out.append(event)
    return out


def run_cli(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "training_guard_local.cli", *args], capture_output=True, text=True, check=False, **kwargs
    )


def values_per_event_of_the_commonest_metric(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> float:
    """How many values one of the events the long replays use adds to the metric the guard adds most to."""
    added: Counter[str] = Counter()
    original = AmazonCloudWatchEMFProvider.add_metric

    def add_metric(self: AmazonCloudWatchEMFProvider, name: str, *args: Any, **kwargs: Any) -> None:
        added[name] += 1
        original(self, name, *args, **kwargs)

    monkeypatch.setattr(AmazonCloudWatchEMFProvider, "add_metric", add_metric)
    simulate(capsys, write(tmp_path, many(4, rules="InProgress"), "four.json"))
    return max(added.values()) / 4


def test_stderr_stays_quiet_past_powertools_metric_flushes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Powertools prints its metric set when one metric reaches MAX_METRICS (100) values (or 100 metrics are set):
    # the replay passes that once
    events = 110
    assert events * values_per_event_of_the_commonest_metric(tmp_path, monkeypatch, capsys) >= MAX_METRICS
    result = run_cli("simulate", write(tmp_path, many(events, rules="InProgress")))
    assert result.returncode == 0
    assert result.stderr == ""
    assert len(result.stdout.splitlines()) == events


def test_a_closed_pipe_ends_the_replay_with_one_line(tmp_path: Path) -> None:
    events = write(tmp_path, many(400, rules="InProgress"))
    with subprocess.Popen(
        [sys.executable, "-m", "training_guard_local.cli", "simulate", events],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()  # what `| head -1` does
        err = process.stderr.read()
        code = process.wait(timeout=120)
    assert json.loads(first)["job"] == "job-00000"
    assert err == (
        "training-guard simulate: the output's reader went away (a closed pipe, e.g. | head): output cut short\n"
    )
    assert code == 9  # cli.EXIT_PIPE


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_is_one_line_rewritten_in_place() -> None:
    stream = Tty()
    progress = replay.Progress(2000, stream=stream)
    for done in range(1, 2001):
        progress.step(done)
    progress.close()
    text = stream.getvalue()
    assert "\n" not in text
    assert "\rsimulate: 2,000 of 2,000 events (" in text
    assert text.endswith("\r\x1b[K")  # the line is cleared at the end


def test_progress_elsewhere_is_a_line_at_each_tenth_and_short_replays_show_none() -> None:
    stream = io.StringIO()
    progress = replay.Progress(5000, stream=stream)
    for done in range(1, 5001):
        progress.step(done)
    lines = stream.getvalue().splitlines()
    assert [line.split(" events")[0] for line in lines] == [f"simulate: {n:,} of 5,000" for n in range(500, 5001, 500)]
    quiet = io.StringIO()
    short = replay.Progress(replay.PROGRESS_MIN_EVENTS, stream=quiet)
    for done in range(1, replay.PROGRESS_MIN_EVENTS + 1):
        short.step(done)
    assert quiet.getvalue() == ""


def test_a_replay_lets_go_of_each_event_once_played() -> None:
    events = [replay.Recorded(f"e[{i}]", {"id": i}) for i in range(3)]
    played = []
    for recorded in replay.consume(events):
        played.append(recorded.where)
        assert len(events) == 3 - len(played)  # the list no longer holds what was played
    assert played == ["e[0]", "e[1]", "e[2]"]
    assert events == []
