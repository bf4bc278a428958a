"""`training-guard mute` against the state table on moto: the records a Slack click writes, from a terminal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from infra import outputs
from tests.helpers import NOW
from tests.integration.test_doctor import refuse
from training_guard.adapters.mutes import DynamoMutes
from training_guard.domain.mutes import silence
from training_guard_local import cli, doctor, mute
from training_guard_local.emulator import TABLE, Emulation
from training_guard_local.inputs import UsageError
from training_guard_local.preflight import Aws

pytestmark = pytest.mark.integration


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Emulation]:
    with Emulation() as emulation:
        monkeypatch.setattr(doctor, "connect", lambda environ, region: Aws(emulation.region, "test", emulation.client))
        monkeypatch.setattr(mute, "table_of", lambda aws, stack: TABLE)
        monkeypatch.setattr(mute, "utcnow", lambda: NOW)
        for job in RUNNING:
            emulation.put_job({"TrainingJobName": job, "TrainingJobStatus": "InProgress"})
        yield emulation


RUNNING = ("mnist-1", "resnet-2")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["mute", *argv])
    captured = capsys.readouterr()
    return code, captured.out.strip(), captured.err.strip()


def store(aws: Emulation) -> DynamoMutes:
    return DynamoMutes(aws.client("dynamodb"), TABLE)


def caller(aws: Emulation) -> str:
    return f"cli:{aws.client('sts').get_caller_identity()['Arn']}"


def test_a_rule_is_silenced_for_the_job_for_two_hours_in_the_name_of_the_caller(
    aws: Emulation, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--job", "mnist-1", "--rule", "LossNotDecreasing", "--for", "2h")
    assert (code, err) == (0, "")
    [stored] = store(aws).read("mnist-1").entries
    assert stored == silence("LossNotDecreasing", by=caller(aws), at=NOW, seconds=7200)
    assert out == f"mnist-1: {stored.describe()}"


def test_a_members_job_is_exempted_until_it_ends(aws: Emulation, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--job", "bert-7", "--account", "111122223333", "--exempt", "--until-job-ends", "--json")
    assert code == 0
    document = json.loads(out)
    assert document == {
        "job": "111122223333/bert-7",
        "effect": "exempt",
        "rule": "*",
        "by": caller(aws),
        "at": NOW.isoformat(),
        "until": None,
    }
    assert store(aws).read("bert-7").entries == ()
    assert store(aws).read("bert-7", "111122223333").exemption(NOW + timedelta(days=20)) is not None


def test_list_shows_what_is_in_force_and_leaves_out_what_lapsed(
    aws: Emulation, capsys: pytest.CaptureFixture[str]
) -> None:
    store(aws).put("old-1", silence("A", by="slack:U0X", at=NOW - timedelta(hours=3), seconds=3600), now=NOW)
    run(capsys, "--job", "mnist-1", "--rule", "LossNotDecreasing", "--for", "30m")
    run(capsys, "--job", "resnet-2", "--exempt", "--for", "1d")
    code, out, _ = run(capsys, "list")
    assert code == 0
    assert out.splitlines() == [
        f"mnist-1: rule LossNotDecreasing is muted for this job by {caller(aws)} until 2026-11-30 03:30 UTC "
        "(set 2026-11-30 03:00 UTC)",
        f"resnet-2: the job is exempted by {caller(aws)} until 2026-12-01 03:00 UTC (set 2026-11-30 03:00 UTC)",
    ]
    code, out, _ = run(capsys, "list", "--job", "resnet-2", "--json")
    assert [row["job"] for row in json.loads(out)] == ["resnet-2"]
    assert run(capsys, "list", "--job", "old-1")[1] == "no mutes in force"


def test_remove_takes_one_mute_away_and_says_when_there_was_none(
    aws: Emulation, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "--job", "mnist-1", "--rule", "LossNotDecreasing", "--for", "2h")
    run(capsys, "--job", "mnist-1", "--exempt", "--for", "2h")
    assert run(capsys, "remove", "--job", "mnist-1", "--rule", "LossNotDecreasing") == (
        0,
        "mnist-1: the mute of rule LossNotDecreasing removed",
        "",
    )
    assert run(capsys, "remove", "--job", "mnist-1", "--rule", "LossNotDecreasing") == (
        1,
        "mnist-1: no mute of rule LossNotDecreasing to remove",
        "",
    )
    [left] = store(aws).read("mnist-1").entries
    assert left.rule == "*"
    assert run(capsys, "remove", "--job", "mnist-1", "--exempt")[0] == 0
    assert store(aws).read("mnist-1").entries == ()


def test_a_job_sagemaker_does_not_know_is_refused(aws: Emulation, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--job", "mnsit-1", "--exempt", "--for", "2h") == (
        2,
        "",
        f"training-guard mute: no training job mnsit-1 in {aws.region}: check the name, and the region "
        "(--region REGION)",
    )
    assert store(aws).read("mnsit-1").entries == ()


@pytest.mark.parametrize("status", ["Completed", "Failed", "Stopped", "Stopping"])
def test_a_job_that_has_ended_is_refused(status: str, aws: Emulation, capsys: pytest.CaptureFixture[str]) -> None:
    aws.put_job({"TrainingJobName": "done-3", "TrainingJobStatus": status})
    code, out, err = run(capsys, "--job", "done-3", "--rule", "LossNotDecreasing", "--until-job-ends")
    assert (code, out) == (2, "")
    assert err.startswith(f"training-guard mute: job done-3 has ended ({status}")
    assert err.endswith("a mute would act on nothing; nothing was written")
    assert store(aws).read("done-3").entries == ()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--rule", "A", "--for", "2h"], "name the job: --job JOB"),
        (["--job", "mnist_1", "--rule", "A", "--for", "2h"], "a training job name is 1 to 63 letters"),
        (["--job", "mnist-1", "--for", "2h"], "--rule RULE, or --exempt"),
        (["--job", "mnist-1", "--rule", "A"], "--for 2h, or --until-job-ends"),
        (["--job", "mnist-1", "--rule", "A", "--for", "2 hours"], "write it like 90m, 2h, 1d"),
        (["--job", "mnist-1", "--rule", "A", "--for", "45d"], "at most 30 days"),
        (["--job", "mnist-1", "--rule", "*", "--for", "2h"], "name one rule"),
        (["--job", "mnist-1", "--account", "1234", "--exempt", "--for", "2h"], "12 digits"),
        (["--job", "mnist-1", "--account", "\uff11" * 12, "--exempt", "--for", "2h"], "12 digits"),  # fullwidth
        (["list", "--rule", "A"], "mute list takes only --job"),
        (["remove", "--job", "mnist-1", "--rule", "A", "--for", "2h"], "mute remove takes no duration"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_aws_is_asked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    def never(environ: Any, region: Any) -> Any:
        raise AssertionError("AWS was asked")

    monkeypatch.setattr(doctor, "connect", never)
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("training-guard mute: ")
    assert says in err
    assert len(err.splitlines()) == 1


def test_a_rule_and_an_exemption_at_once_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["mute", "--job", "mnist-1", "--rule", "A", "--exempt", "--for", "2h"])
    assert exited.value.code == 2


def stack_with(outputs_: dict[str, str]) -> doctor.Stack:
    return doctor.Stack("training-guard", "eu-west-1", "111122223333", "arn", "CREATE_COMPLETE", outputs_)


def test_the_table_comes_from_the_stacks_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    aws = Aws("eu-west-1", "test", lambda service: None)
    monkeypatch.setattr(doctor, "read_stack", lambda aws, name: stack_with({outputs.STATE_TABLE_NAME: "tg-state"}))
    assert mute.table_of(aws, "training-guard") == "tg-state"
    monkeypatch.setattr(doctor, "read_stack", lambda aws, name: stack_with({}))
    with pytest.raises(UsageError, match="has no output StateTableName"):
        mute.table_of(aws, "training-guard")
    monkeypatch.setattr(doctor, "read_stack", lambda aws, name: None)
    with pytest.raises(UsageError, match="no stack training-guard in eu-west-1"):
        mute.table_of(aws, "training-guard")


def test_credentials_that_may_not_describe_jobs_get_a_warning_and_the_mute(
    aws: Emulation, capsys: pytest.CaptureFixture[str]
) -> None:
    refuse(aws, "sagemaker", "DescribeTrainingJob")
    code, out, err = run(capsys, "--job", "queued-4", "--exempt", "--for", "2h")
    assert code == 0
    assert err == (
        "training-guard mute: warning: could not check that job queued-4 is running (AccessDenied): "
        "the mute is written all the same"
    )
    assert out.startswith("queued-4: the job is exempted")
