"""Every command and every kind of bad input: one line on stderr naming the problem, exit 2, nothing on
stdout, never a traceback, and no work started (no emulation, no synthesis, no AWS call)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import EVENTS_DIR
from training_guard_local import check_metrics
from training_guard_local.cli import main

EVENT = str(EVENTS_DIR / "vanishing_gradient_issues_found.json")
LOG = str(EVENTS_DIR.parent / "logs" / "mnist_lr01.log")
DEFS = str(EVENTS_DIR.parent / "logs" / "mnist_metric_definitions.json")
DLQ = "https://sqs.eu-west-1.amazonaws.com/123456789012/training-guard-events-dead-letters"

# The kinds of bad file a user can hand any command, as (name, bytes, the problem named).
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
LATIN1 = '{"name": "caf\xe9"}'.encode("latin-1")
YAML_CONFIG = b"# my guard\ndry_run: true\nrules:\n  debugger_default: notify\n"
FILES: list[tuple[str, bytes | None, str]] = [
    ("missing", None, "cannot read {what}: No such file or directory"),
    ("folder", b"", "is a folder, not a {what} file"),
    ("binary", BINARY, "not a text file (binary data); the {what} must be UTF-8 text"),
    ("non-utf8", LATIN1, "not UTF-8 text (byte 0xe9 at offset 13)"),
    ("not-json", b'{"dry_run": tru', "not JSON (Expecting value at line 1 column 13)"),
    ("yaml", YAML_CONFIG, "looks like YAML; {plural} are JSON"),
]
PLURAL = {"config": "configurations", "events": "events", "scenario": "scenarios", "definitions": "metric definitions"}


def make(tmp_path: Path, kind: str, content: bytes | None) -> str:
    path = tmp_path / f"{kind}.json"
    if content is None:
        return str(path)
    if kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(content)
    return str(path)


# command -> slot -> argv builder given the bad file; every other argument is valid
SLOTS: dict[str, Callable[[str], list[str]]] = {
    "simulate --config": lambda f: ["simulate", "--config", f, EVENT],
    "simulate events": lambda f: ["simulate", EVENT, f],
    "slack-preview --config": lambda f: ["slack-preview", "--config", f, EVENT],
    "slack-preview events": lambda f: ["slack-preview", f],
    "check-metrics --definitions": lambda f: ["check-metrics", "--definitions", f, "--log", LOG],
    "demo --scenario": lambda f: ["demo", "--scenario", f],
    "demo --config": lambda f: ["demo", "--config", f],
    "plan --config": lambda f: ["plan", "--config", f],
}
WHAT = {
    "--config": "config",
    "events": "events",
    "--scenario": "scenario",
    "--definitions": "definitions",
    "--log": "log",
}


@dataclass(frozen=True)
class Case:
    argv: list[str]
    problem: str


def file_cases() -> dict[str, Callable[[Path], Case]]:
    cases: dict[str, Callable[[Path], Case]] = {}

    def case(slot: str, kind: str, content: bytes | None, problem: str) -> Callable[[Path], Case]:
        what = WHAT[slot.rsplit(maxsplit=1)[-1]]

        def build(tmp_path: Path) -> Case:
            path = make(tmp_path, kind, content)
            argv = SLOTS[slot](path) if slot in SLOTS else ["check-metrics", "--definitions", DEFS, "--log", path]
            return Case(argv, f"{path}: " + problem.format(what=what, plural=PLURAL.get(what, "")))

        return build

    for slot in SLOTS:
        for kind, content, problem in FILES:
            cases[f"{slot} | {kind}"] = case(slot, kind, content, problem)
    for kind, content, problem in FILES[:4]:  # a log is text, not JSON
        cases[f"check-metrics --log | {kind}"] = case("check-metrics --log", kind, content, problem)
    return cases


def write(tmp_path: Path, name: str, data: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


BAD_CONFIG = {"rules": {"debugger_default": "halt"}}
BAD_SCENARIO = {
    "jobs": {"a": {"name": "job-a", "instance_count": "two"}},
    "steps": [{"job": "a", "status": "InProgress"}],
}


def html_missing_folder(tmp_path: Path) -> Case:
    target = tmp_path / "no-such-folder" / "preview.html"
    return Case(["slack-preview", "--html", str(target), EVENT], f"the folder {target.parent} does not exist")


def html_folder(tmp_path: Path) -> Case:
    return Case(["slack-preview", "--html", str(tmp_path), EVENT], f"{tmp_path}: is a folder; name the HTML page file")


def empty_events(tmp_path: Path) -> Case:
    empty = write(tmp_path, "empty.json", [])
    return Case(["simulate", empty], f"{empty}: an empty list")


# Files that are JSON but wrong, and options with wrong values.
CONTENT_CASES: dict[str, Callable[[Path], Case]] = {
    "simulate --config | invalid": lambda t: Case(
        ["simulate", "--config", write(t, "c.json", BAD_CONFIG), EVENT],
        "rules.debugger_default: must be one of stop, notify, ignore",
    ),
    "simulate events | empty list": empty_events,
    "simulate --now | not a time": lambda t: Case(
        ["simulate", "--now", "yesterday", EVENT], "--now 'yesterday': not an ISO-8601"
    ),
    "simulate --account | not 12 digits": lambda t: Case(
        ["simulate", "--account", "prod", EVENT], "--account 'prod': an AWS account ID is 12 digits"
    ),
    "simulate --region | not a region": lambda t: Case(
        ["simulate", "--region", "Europe", EVENT], "--region 'Europe': not an AWS region name"
    ),
    "slack-preview --html | folder missing": html_missing_folder,
    "slack-preview --html | is a folder": html_folder,
    "slack-preview --now | not a time": lambda t: Case(
        ["slack-preview", "--now", "2026-13-01", EVENT], "--now '2026-13-01': not an ISO-8601"
    ),
    "check-metrics --definitions | invalid regex": lambda t: Case(
        ["check-metrics", "--definitions", '[{"Name": "x", "Regex": "("}]', "--log", LOG],
        "definitions[0] (x): invalid regex",
    ),
    "check-metrics --definitions | inline YAML": lambda t: Case(
        ["check-metrics", "--definitions", "- Name: loss\n  Regex: loss=(.*?);", "--log", LOG],
        "--definitions: looks like YAML; metric definitions are JSON",
    ),
    "demo --scenario | invalid field": lambda t: Case(
        ["demo", "--scenario", write(t, "s.json", BAD_SCENARIO)],
        "jobs.a.instance_count: must be a whole number of at least 1, got 'two'",
    ),
    "demo --scenario | unknown name": lambda t: Case(
        ["demo", "--scenario", "dry-rnu"], "dry-rnu: no such scenario file, and no shipped scenario of that name"
    ),
    "demo --config | invalid": lambda t: Case(
        ["demo", "--config", write(t, "c.json", BAD_CONFIG)],
        "rules.debugger_default: must be one of stop, notify, ignore",
    ),
    "redrive --dead-letters | not a queue URL": lambda t: Case(
        ["redrive", "--dead-letters", "training-guard-dlq", "--function", "f"],
        "--dead-letters 'training-guard-dlq': not an SQS queue URL",
    ),
    "redrive --limit | zero": lambda t: Case(
        ["redrive", "--dead-letters", DLQ, "--function", "f", "--limit", "0"], "--limit 0: must be at least 1"
    ),
    "redrive | missing argument": lambda t: Case(["redrive", "--function", "f"], "required: --dead-letters"),
}
CASES = {**file_cases(), **CONTENT_CASES}


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_line_naming_the_problem_and_exit_2(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[name](tmp_path)
    started: list[str] = []
    monkeypatch.setattr("training_guard_local.emulator.Emulation.__enter__", lambda self: started.append("emulation"))
    monkeypatch.setattr("training_guard_local.demo.synthesize", lambda scenario: started.append("synth"))
    try:
        code = main(case.argv)
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"training-guard {case.argv[0]}: "), err
    assert case.problem in err, err
    assert "Traceback" not in err
    assert started == []  # checked before any work


def test_every_command_and_every_file_kind_is_in_the_matrix() -> None:
    names = set(CASES)
    for command in ("simulate", "slack-preview", "check-metrics", "demo", "redrive"):
        assert any(n.startswith(command) for n in names), command
    for slot in SLOTS:
        for kind, _, _ in FILES:
            assert f"{slot} | {kind}" in names


def test_a_binary_log_on_stdin_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(BINARY)))
    assert main(["check-metrics", "--definitions", DEFS, "--log", "-"]) == 2
    assert capsys.readouterr().err == (
        "training-guard check-metrics: stdin: not a text file (binary data); the log must be UTF-8 text\n"
    )


def test_a_regex_that_backtracks_forever_is_named_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(check_metrics, "REGEX_SECONDS_PER_LINE", 0.3)
    log = tmp_path / "train.log"
    log.write_text("epoch 1 loss=0.5;\n" + "a" * 40 + "!\n")  # (a+)+$ on 40 a's: 2^40 ways to fail
    definitions = '[{"Name": "loss", "Regex": "loss=(.*?);"}, {"Name": "evil", "Regex": "((a+)+)$"}]'
    assert main(["check-metrics", "--definitions", definitions, "--log", str(log)]) == 2
    err = capsys.readouterr().err
    assert err == (
        "training-guard check-metrics: definitions[1] (evil): the regex '((a+)+)$' took more than 0.3 s on line 2 "
        "of the log (catastrophic backtracking: nested or adjacent quantifiers such as (a+)+ or (.*)*; make the "
        "pattern unambiguous)\n"
    )


def test_the_bounded_check_gives_what_the_plain_one_does() -> None:
    definitions = check_metrics.load_definitions(DEFS)
    lines = Path(LOG).read_text().splitlines()
    bounded = check_metrics.check_bounded(definitions, lines)
    assert [r.as_dict() for r in bounded] == [r.as_dict() for r in check_metrics.check(definitions, lines)]


def clean_aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in (
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
        "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
    ):  # fmt: skip
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata lookup on a workstation


# No credentials, a profile that does not exist: tests/integration/test_cli_faults.py, for every command.


def test_redrive_without_a_region_uses_the_queues(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto import mock_aws

    clean_aws_environment(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        import boto3

        sqs = boto3.client("sqs", region_name="eu-west-1")
        url = sqs.create_queue(QueueName="training-guard-events-dead-letters")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="{}")
        assert main(["redrive", "--dead-letters", url, "--function", "f", "--dry-run"]) == 0
        wrong = url.replace("training-guard-events-dead-letters", "no-such-queue")
        assert main(["redrive", "--dead-letters", wrong, "--function", "f"]) == 2
    out, err = capsys.readouterr()
    assert out.endswith(": no reason recorded\n")
    assert err.splitlines()[0] == "would redrive: 1"
    assert err.splitlines()[1].startswith("training-guard redrive: ReceiveMessage failed: ")
    assert "NonExistentQueue" in err.splitlines()[1]
