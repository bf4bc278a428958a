"""Every command under every failure of the environment (an AWS profile that does not exist, a broken AWS config
file, no credentials, no network, no region, a full disk, a closed pipe): never a traceback; a failure is one line on
stderr and the fault's own exit status; the offline commands ignore the AWS settings and do their work. The commands
come from the parser, so a new one is in the matrix; most run here as a fresh process would (`run_here`)."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import pkgutil
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import boto3
import pytest

from tests.helpers import EVENTS_DIR
from training_guard import contract, handlers
from training_guard_local import cli, emulator

ROOT = EVENTS_DIR.parents[1]
EVENT = str(EVENTS_DIR / "failed.json")
LOGS = EVENTS_DIR.parent / "logs"
DLQ = "https://sqs.eu-west-1.amazonaws.com/123456789012/training-guard-events-dead-letters"
# The arguments a command needs to get past its parser; a command not named here runs with none.
ARGS: dict[str, list[list[str]]] = {
    "simulate": [[EVENT]],
    "slack-preview": [[EVENT]],
    "check-metrics": [
        ["--definitions", str(LOGS / "mnist_metric_definitions.json"), "--log", str(LOGS / "mnist_lr01.log")]
    ],
    "redrive": [["--dead-letters", DLQ, "--function", "training-guard-job-events", "--dry-run"]],
    "mute": [["list"], ["--job", "mnist-1", "--exempt", "--for", "2h"]],
    "test-notification": [["--timeout", "1"]],
    "demo": [["--scenario", "dry_run"]],
}
# A checklist command reports the environment's failures as failed checks on stdout (exit 1), with the fix.
CHECKLISTS = {"preflight"}
# The dead-letter queue's URL names its region.
NEEDS_NO_REGION = {("region", "redrive")}
# AWS's documented example key id, split so that no scanner takes it for a real one
KEYS = {"AWS_ACCESS_KEY_ID": "AKIA" + "IOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "not-a-secret"}
REGION = {"AWS_REGION": "eu-west-1"}
ALL_AT_ONCE = "every-aws-fault"


@dataclass(frozen=True)
class Fault:
    env: dict[str, str]
    status: int  # what a command that needs AWS exits with
    says: tuple[str, ...]  # one of them in its line (or in a checklist's failed check)
    stdout: str = ""  # "full": /dev/full; "closed": a pipe nobody reads


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def faults(tmp: Path) -> dict[str, Fault]:
    broken = tmp / "broken-config"  # the name is all the listing of the cases needs
    if tmp.is_dir():
        broken.write_text("region = eu-west-1\n[default\n")  # no section header: botocore's ConfigParseError
    # Every fault's AWS is one that refuses connections at once (never the Internet); one attempt, since the SDK's
    # retries are not what is tested here.
    nowhere = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed_port()}", "AWS_MAX_ATTEMPTS": "1"}
    unreachable = {**KEYS, **REGION, **nowhere}
    return {
        "profile": Fault(
            {**unreachable, "AWS_PROFILE": "nope"}, cli.EXIT_PROFILE, ("'nope' does not exist", "(nope) could not")
        ),
        "aws-config": Fault(
            {**unreachable, "AWS_CONFIG_FILE": str(broken)},
            cli.EXIT_AWS_CONFIG,
            (f"cannot parse the AWS config file {broken}",),
        ),
        "credentials": Fault({**REGION, **nowhere}, cli.EXIT_CREDENTIALS, ("no AWS credentials found",)),
        "partial-credentials": Fault(
            {"AWS_ACCESS_KEY_ID": KEYS["AWS_ACCESS_KEY_ID"], **REGION, **nowhere},
            cli.EXIT_CREDENTIALS,
            ("missing: AWS_SECRET_ACCESS_KEY", "no AWS credentials found"),
        ),
        "network": Fault(unreachable, cli.EXIT_NETWORK, ("cannot reach AWS", "the network is unreachable")),
        "region": Fault({**KEYS, **nowhere}, cli.EXIT_REGION, ("no AWS region",)),
        "disk-full": Fault(unreachable, cli.EXIT_OUTPUT, ("No space left on device",), stdout="full"),
        "closed-pipe": Fault(unreachable, cli.EXIT_PIPE, ("closed pipe",), stdout="closed"),
        # For the offline commands, every setting above at once: reading any one of them would fail the run.
        ALL_AT_ONCE: Fault(
            {
                "AWS_PROFILE": "nope",
                "AWS_CONFIG_FILE": str(broken),
                "AWS_ACCESS_KEY_ID": KEYS["AWS_ACCESS_KEY_ID"],
                "AWS_ENDPOINT_URL": unreachable["AWS_ENDPOINT_URL"],
            },
            cli.EXIT_OK,
            (),
        ),
    }


# What only a fresh process shows, kept in one (the rest run in this process): the interpreter's exit status; its last
# flush of stdout at exit, which fails again on a full disk or a closed pipe unless `main` let go of stdout; and the
# demo, which binds the handlers' loggers to its own output at their first import (this process imported them long
# ago).
IN_A_PROCESS = {
    ("disk-full", "--help"),
    ("closed-pipe", "--help"),
    ("disk-full", "check-metrics"),
    ("closed-pipe", "check-metrics"),
    ("profile", "doctor"),
    (ALL_AT_ONCE, "demo"),
}


@dataclass(frozen=True)
class Run:
    argv: list[str]
    status: int
    out: str
    err: str
    seconds: float


def environment(fault: Fault, home: Path) -> dict[str, str]:
    """The fault's AWS settings and none of the machine's own (~/.aws, instance metadata)."""
    return {
        "AWS_CONFIG_FILE": str(home / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        **fault.env,
    }


@contextlib.contextmanager
def broken_stdout(fault: Fault) -> Iterator[int | None]:
    """The file descriptor stdout is for the fault: /dev/full, or a pipe nobody reads (every write: EPIPE)."""
    if fault.stdout == "full":
        with open("/dev/full", "wb") as full:
            yield full.fileno()
    elif fault.stdout == "closed":
        read, write = os.pipe()
        os.close(read)
        try:
            yield write
        finally:
            os.close(write)
    else:
        yield None


def run(argv: list[str], fault: Fault, home: Path) -> Run:
    """The command in its own process, as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | environment(fault, home)
    command = [sys.executable, "-m", "training_guard_local.cli", *argv]
    with broken_stdout(fault) as stdout:
        started = time.monotonic()
        done = subprocess.run(
            command,
            check=False,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE if stdout is None else stdout,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    out = done.stdout.decode() if done.stdout else ""
    return Run(argv, done.returncode, out, done.stderr.decode(), time.monotonic() - started)


def run_here(
    argv: list[str], fault: Fault, home: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> Run:
    """`cli.main` in this process, as a fresh process would run it: the same environment and working folder, AWS
    sessions made anew (boto3's default one, the emulations' kept one), stdout the fault's file descriptor, and a
    traceback or `SystemExit` turned into what the interpreter would print and exit with."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for key, value in environment(fault, home).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    emulator.kept_boto3_session.cache_clear()  # the emulations' session made anew, as in a new process
    capfd.readouterr()
    with contextlib.ExitStack() as stack:
        stdout = stack.enter_context(broken_stdout(fault))
        if stdout is not None:
            stream = stack.enter_context(open(stdout, "w", encoding="utf-8", closefd=False))
            stack.callback(_discard_buffer, stream)
            stack.enter_context(contextlib.redirect_stdout(stream))
        started = time.monotonic()
        try:
            status = cli.main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except Exception:  # noqa: BLE001 - what the interpreter does with it: the traceback, exit 1
            traceback.print_exc()
            status = 1
    emulator.kept_boto3_session.cache_clear()  # and the one made under the fault's settings not kept for later tests
    out, err = capfd.readouterr()
    return Run(argv, status, out, err, time.monotonic() - started)


def _discard_buffer(stream: TextIO) -> None:
    """What a failed write left in the stream's buffer is dropped (the process's exit would drop it the same way)."""
    with contextlib.suppress(OSError, ValueError):
        stream.flush()
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


def cases() -> list[tuple[str, str, list[str]]]:
    """(fault, command, argv): every command the parser knows, each way it is called, under every fault (the
    offline commands under all the AWS faults in one run: they read none of those settings)."""
    calls = [[name, *args] for name in cli.command_names() for args in ARGS.get(name, [[]])]
    every = faults(Path("/nonexistent"))
    matrix = []
    for argv in calls:
        offline = argv[0] in cli.OFFLINE
        for name, fault in every.items():
            if fault.stdout or (name == ALL_AT_ONCE) == offline:
                matrix.append((name, argv[0], argv))
    return matrix + [(fault, "--help", ["--help"]) for fault in ("disk-full", "closed-pipe")]


CASES = cases()


@pytest.fixture(scope="module", autouse=True)
def _handler_logs_on_fd_2() -> None:
    """The guard's handler modules imported as the emulation imports them (their loggers bind stderr then), with
    stderr a stream on file descriptor 2 that stays open, as in a fresh process: not the capture of the first case run
    here, which is closed after it and would stay every later test's log stream."""
    if not logging.getLogger(contract.SERVICE_NAME).handlers:  # no handler module has made its logger yet
        fd_2 = open(2, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115 - the loggers keep it
        with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(fd_2):
            patch.setenv("POWERTOOLS_SERVICE_NAME", contract.SERVICE_NAME)  # as in the emulation
            with emulator.handler_output_to_stderr():
                for module in pkgutil.iter_modules(handlers.__path__):
                    importlib.import_module(f"{handlers.__name__}.{module.name}")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Fault], Path]:
    """The faults, with their broken config file, and an empty home for the AWS files."""
    tmp = tmp_path_factory.mktemp("faults")
    (tmp / "home").mkdir()
    return faults(tmp), tmp / "home"


@pytest.fixture(scope="module")
def processes(home: tuple[dict[str, Fault], Path]) -> dict[tuple[str, str], Run]:
    """The cases kept in a process of their own, run at once on a few threads."""
    by_name, folder = home
    wanted = [(f, argv) for f, command, argv in CASES if (f, command) in IN_A_PROCESS]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        futures = {(f, " ".join(argv)): pool.submit(run, argv, by_name[f], folder) for f, argv in wanted}
        return {key: future.result() for key, future in futures.items()}


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture
def outcome(
    home: tuple[dict[str, Fault], Path],
    processes: dict[tuple[str, str], Run],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> Callable[[str, str, list[str]], tuple[Fault, Run]]:
    """A case's fault and how the command ended: in its own process (`IN_A_PROCESS`), else run here."""

    def of(fault: str, command: str, argv: list[str]) -> tuple[Fault, Run]:
        if (fault, command) in IN_A_PROCESS:
            return home[0][fault], processes[(fault, " ".join(argv))]
        return home[0][fault], run_here(argv, home[0][fault], home[1], monkeypatch, capfd)

    return of


@pytest.mark.parametrize(("fault", "command", "argv"), CASES, ids=[f"{f}-{' '.join(a)}" for f, _, a in CASES])
def test_one_line_and_the_faults_exit_status_never_a_traceback(
    fault: str, command: str, argv: list[str], outcome: Callable[[str, str, list[str]], tuple[Fault, Run]]
) -> None:
    expected, result = outcome(fault, command, argv)
    assert "Traceback" not in result.err, result.err
    if command in cli.OFFLINE and not expected.stdout:
        # Offline: the AWS settings are not read at all, and the command does its work.
        assert (result.status, lines(result.err)) == (cli.EXIT_OK, []), result.err
        assert result.out.strip()
        return
    if command in CHECKLISTS and not expected.stdout and result.status == cli.EXIT_FAILED:
        # The failure is a failed check with its fix, on stdout; nothing on stderr.
        failed = [line for line in lines(result.out) if line.startswith("FAIL") and "credentials" in line]
        assert failed, result.out
        assert any(says in failed[0] for says in expected.says), failed[0]
        assert lines(result.err) == []
        return
    (line,) = lines(result.err)
    assert line.startswith("training-guard"), line
    if expected.stdout and command not in cli.OFFLINE | CHECKLISTS:
        # A command that reads AWS before it writes anything fails first on the unreachable AWS: that is named.
        assert (result.status, line) == (cli.EXIT_NETWORK, line) or result.status == expected.status, line
        return
    if (fault, command) in NEEDS_NO_REGION:
        assert result.status == cli.EXIT_NETWORK, line  # it went on to the (unreachable) AWS
        return
    assert result.status == expected.status, line
    assert any(says in line for says in expected.says), line


def test_every_command_is_in_the_matrix() -> None:
    every = faults(Path("/nonexistent"))
    outputs = {name for name, fault in every.items() if fault.stdout}
    environment = set(every) - outputs - {ALL_AT_ONCE}
    for command in cli.command_names():
        wanted = outputs | ({ALL_AT_ONCE} if command in cli.OFFLINE else environment)
        assert {fault for fault, name, _ in CASES if name == command} == wanted, command
    assert set(ARGS) <= set(cli.command_names())  # no stale entry


def test_the_exit_statuses_are_documented_in_help_and_readme(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    shown = capsys.readouterr().out
    readme = (ROOT / "README.md").read_text()
    for status, meaning in cli.EXIT_CODES.items():
        assert f"  {status}  {meaning}" in shown
        table = meaning.replace("AWS_PROFILE", "`AWS_PROFILE`").replace("AWS_ENDPOINT_URL", "`AWS_ENDPOINT_URL`")
        table = table.replace("--strict", "`--strict`").replace("... | head", "`... \\| head`")
        assert f"| {status} | {table} |" in readme


def test_an_offline_command_sees_none_of_the_aws_settings_and_they_come_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "nope")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    before = dict(os.environ)
    with cli.offline_environment():
        assert "AWS_PROFILE" not in os.environ
        assert "AWS_ENDPOINT_URL" not in os.environ
        assert os.environ["AWS_CONFIG_FILE"] == os.devnull
        os.environ["AWS_REGION"] = "set-inside"  # what an emulation might leave
    assert dict(os.environ) == before
