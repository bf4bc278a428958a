"""The `training-guard` command: operator tooling that runs on a workstation, never in Lambda.

One error boundary (`main`): every input a user can get wrong is one line on stderr naming the problem,
exit 2 (`UsageError`; argparse's own errors too); every known failure of the environment (AWS profile,
config file, credentials, network, region, a full disk, a closed pipe) is one line naming the cause and
the fix, with its own exit code (`EXIT_CODES`); only a bug shows a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from training_guard.config.model import GuardConfig
from training_guard_local.inputs import (
    EXIT_AWS_CONFIG,
    EXIT_CREDENTIALS,
    EXIT_FAILED,
    EXIT_NETWORK,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_PIPE,
    EXIT_PROFILE,
    EXIT_REGION,
    EXIT_USAGE,
    UsageError,
    read_text,
)

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

    from training_guard_local.demo import Demo

__all__ = [
    "EXIT_AWS_CONFIG",
    "EXIT_CODES",
    "EXIT_CREDENTIALS",
    "EXIT_FAILED",
    "EXIT_NETWORK",
    "EXIT_OK",
    "EXIT_OUTPUT",
    "EXIT_PIPE",
    "EXIT_PROFILE",
    "EXIT_REGION",
    "EXIT_USAGE",
    "UsageError",
    "load_config",
    "main",
]

_IMPORTED = time.monotonic()  # waited_seconds' fallback where the process's own start time cannot be read
# What each exit status means: `training-guard --help` prints this table, the README repeats it.
EXIT_CODES = {
    EXIT_OK: "done",
    EXIT_FAILED: "done, and found a problem (a failed check, an unmet expectation, --strict warnings)",
    EXIT_USAGE: "bad input: an argument or a file (the line names it)",
    EXIT_PROFILE: "the AWS profile named by AWS_PROFILE does not exist",
    EXIT_AWS_CONFIG: "the AWS config or credentials file cannot be parsed",
    EXIT_CREDENTIALS: "no usable AWS credentials (none, partial, expired or refused)",
    EXIT_NETWORK: "AWS cannot be reached (network, proxy, AWS_ENDPOINT_URL)",
    EXIT_REGION: "no AWS region",
    EXIT_OUTPUT: "the output cannot be written (a full disk, an I/O error)",
    EXIT_PIPE: "the output's reader went away (a closed pipe: ... | head)",
}
# The commands that never call AWS: they run with none of the user's AWS settings (a missing profile, a broken
# ~/.aws/config or an endpoint URL must not reach the emulation's boto3 sessions).
OFFLINE = frozenset({"simulate", "slack-preview", "demo", "check-metrics", "plan"})
# Error codes AWS answers when the credentials themselves are refused (not a missing permission).
_REFUSED_CREDENTIALS = frozenset(
    {
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "InvalidSignatureException",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
    }
)
_CREDENTIALS_FIX = (
    "choose credentials with AWS_PROFILE=NAME (aws configure --profile NAME, or aws sso login --profile NAME)"
)
# A write that failed for want of room or of a writable disk (EIO too when stdout itself failed: no file was read).
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line (the usage is one `--help` away)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # `--since -5d` is a value its command refuses with the reason ("must be positive"), not a missing argument:
        # argparse takes only plain negative numbers (-5, -.5) for values (its private matcher, read by parse_args)
        self._negative_number_matcher = re.compile(r"^-\d+(\.\d+)?[a-z]*$|^-\.\d+$")

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        # argparse's own drops a failed write (`--help > /dev/full` exited 0): this one lets main report it
        (file or sys.stdout).write(self.format_help())


@dataclass(frozen=True)
class Fault:
    """A failure of the environment, not of the input nor of the code: the line to print and the exit status."""

    status: int
    line: str


def fault_of(exc: BaseException) -> Fault | None:
    """The environment's failure behind `exc`: itself, or the error a command's one-line message was raised from
    (the commands word their own errors; the class, hence the line and the exit status, is the cause's)."""
    if isinstance(exc, BrokenPipeError):
        return Fault(EXIT_PIPE, "the output's reader went away (a closed pipe, e.g. | head): output cut short")
    if isinstance(exc, OSError) and exc.errno == errno.EIO and not exc.filename:
        return _full(exc)
    seen: BaseException | None = exc
    while seen is not None:
        found = _full(seen) if isinstance(seen, OSError) and seen.errno in _FULL else _aws_fault(seen)
        if found is not None:
            return found
        seen = seen.__cause__ or seen.__context__
    return None


def _full(exc: OSError) -> Fault:
    where = exc.filename or "the output"
    return Fault(EXIT_OUTPUT, f"cannot write {where}: {exc.strerror}: free some space, or write elsewhere")


def _aws_fault(exc: BaseException) -> Fault | None:
    from botocore import exceptions as aws

    if isinstance(exc, aws.ProfileNotFound):
        profile = exc.kwargs.get("profile", "")
        return Fault(
            EXIT_PROFILE,
            f"the AWS profile {profile!r} does not exist: set AWS_PROFILE to one of `aws configure list-profiles`, "
            "or unset it",
        )
    if isinstance(exc, aws.ConfigParseError):
        path = exc.kwargs.get("path", "")
        return Fault(
            EXIT_AWS_CONFIG,
            f"cannot parse the AWS config file {path}: fix its syntax (a [profile NAME] header, then `key = value` "
            "lines), or point AWS_CONFIG_FILE at another file",
        )
    if isinstance(exc, aws.NoCredentialsError):
        return Fault(EXIT_CREDENTIALS, f"no AWS credentials found: {_CREDENTIALS_FIX}")
    if isinstance(
        exc,
        aws.PartialCredentialsError | aws.CredentialRetrievalError | aws.SSOError | aws.TokenRetrievalError,
    ):
        return Fault(EXIT_CREDENTIALS, f"cannot use the AWS credentials ({exc}): {_CREDENTIALS_FIX}")
    if isinstance(exc, aws.ClientError) and exc.response.get("Error", {}).get("Code") in _REFUSED_CREDENTIALS:
        code = exc.response["Error"]["Code"]
        return Fault(EXIT_CREDENTIALS, f"AWS refused the credentials ({code}): {_CREDENTIALS_FIX}")
    if isinstance(exc, aws.ConnectionError | aws.HTTPClientError):
        return Fault(
            EXIT_NETWORK,
            f"cannot reach AWS ({exc}): check the network connection, a proxy (HTTPS_PROXY) or AWS_ENDPOINT_URL",
        )
    if isinstance(exc, aws.NoRegionError):
        return Fault(
            EXIT_REGION,
            "no AWS region: export AWS_REGION=REGION (or the command's --region REGION, or "
            "aws configure set region REGION)",
        )
    return None


@contextlib.contextmanager
def offline_environment() -> Iterator[None]:
    """While an offline command runs, none of the user's AWS settings is seen (restored after it)."""
    saved = {key: value for key, value in os.environ.items() if key.startswith("AWS_")}
    for key in saved:
        del os.environ[key]
    os.environ.update(
        AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, AWS_EC2_METADATA_DISABLED="true"
    )
    try:
        yield
    finally:
        for key in [key for key in os.environ if key.startswith("AWS_")]:
            del os.environ[key]
        os.environ.update(saved)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every command is a sub-parser of this one."""
    top = _Parser(
        prog="training-guard",
        description=__doc__.split("\n\n")[0],
        epilog="exit status:\n"
        + "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_CODES.items())
        + "\n  a traceback: a bug in training-guard (please report it)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    simulate = commands.add_parser(
        "simulate",
        help="replay recorded EventBridge events through the real job-events handler on an emulated AWS",
        description=(
            "Replays recorded 'SageMaker Training Job State Change' events (and the guard's CloudWatch alarm "
            "events, and CloudWatch Logs subscription deliveries), in order and duplicates included, through the "
            "real handlers against an embedded AWS emulation, each at its own time and in its own account and "
            "region. Prints one JSON object per event: job, stopped, notifications, error, warnings, outcomes, "
            "log_rules, and more. --log FILE plays a saved training log as the subscription would deliver it."
        ),
    )
    simulate.add_argument(
        "--log",
        type=Path,
        metavar="LOGFILE",
        help="a training log (plain text, or as aws logs get-log-events / filter-log-events print it), delivered to "
        "the log-rules function as the subscription would, after the EVENT.json files",
    )
    simulate.add_argument("--job", help="the training job whose log --log is (its stream: <job>/algo-<host>-<epoch>)")
    simulate.add_argument("--host", type=int, default=1, help="the host that wrote the --log (algo-<host>; default 1)")
    simulate.add_argument(
        "--write-deliveries",
        type=Path,
        metavar="FILE",
        help="also write the deliveries built from --log here: a JSON array of Lambda events {awslogs: {data}}",
    )
    _replay_arguments(simulate, optional_events=True)
    simulate.set_defaults(run=_simulate)

    preview = commands.add_parser(
        "slack-preview",
        help="show the Slack messages recorded events would produce (HTML page or text)",
        description=(
            "Plays the events like `simulate`, delivers the notifications through the real Slack "
            "notifier to a local Slack-compatible listener, and writes what Slack received: an HTML "
            "page that looks like Slack (--html FILE) and/or text on stdout."
        ),
    )
    preview.add_argument("--html", type=Path, help="write the messages as an HTML page here")
    _replay_arguments(preview)
    preview.set_defaults(run=_slack_preview)

    checker = commands.add_parser(
        "check-metrics",
        help="apply MetricDefinitions regexes, or the log rules (--rules), to a training log",
        description=(
            "Applies each definition's regex to each log line (first capture group, must be a finite "
            "number) and prints per metric how many values it finds, the first and last, a sparkline "
            "and warnings (never matches, nan/inf captures, non-numbers, too-greedy captures). With --rules it runs "
            "the log rules the guard's Lambda runs over the log instead (the same code, in the same batches) and "
            "shows each rule's firing: the line, what the guard would do, why, and the series with that point marked."
        ),
    )
    checker.add_argument(
        "--definitions",
        metavar="DEFS",
        help='JSON list of {"Name", "Regex"}, or what aws sagemaker describe-training-job prints; inline or a file '
        "(optional with --rules: the built-in readers recognise the common formats)",
    )
    checker.add_argument(
        "--log",
        required=True,
        type=Path,
        metavar="LOGFILE",
        help="a training log ('-' for stdin): plain text, or what aws logs get-log-events / filter-log-events print",
    )
    checker.add_argument("--rules", action="store_true", help="run the log rules (log_rules in the configuration)")
    checker.add_argument(
        "--config",
        type=Path,
        help="with --rules: the per-account file layered over cdk.json, as make deploy CONFIG=FILE reads it "
        "(default: cdk.json's configuration; outside the project folder, the built-in defaults)",
    )
    checker.add_argument(
        "--log-rules-tag",
        metavar="VALUE",
        help="with --rules: the job's training-guard:log-rules tag, e.g. 'Divergence=notify,loss=my_loss' or 'off'",
    )
    checker.add_argument("--json", action="store_true", help="one JSON object per metric (with --rules: per firing)")
    checker.add_argument(
        "--strict", action="store_true", help="exit 1 when any metric has a warning (with --rules: when a rule fires)"
    )
    checker.set_defaults(run=_check_metrics)

    demo = commands.add_parser(
        "demo",
        help="run the whole guard end to end on an emulated AWS account (no account needed)",
        description=(
            "Synthesizes the real stack, installs its event rules on an emulated EventBridge, runs the "
            "real handlers in-process against moto, delivers Slack messages to a listener on 127.0.0.1, "
            "plays a scenario and checks its expectations (exit 1 if the outcome differs)."
        ),
    )
    demo.add_argument(
        "--scenario",
        help="a scenario JSON file, or the name of a shipped one (seed, dry_run, ...; default: seed)",
    )
    demo.add_argument("--config", type=Path, help="a GuardConfig JSON file replacing the scenario's config")
    demo.set_defaults(run=_demo)

    redrive = commands.add_parser(
        "redrive",
        help="hand a dead-letter queue's messages back to their function or queue (uses your AWS credentials)",
        description=(
            "Reads a dead-letter queue, prints why each message failed, and hands each on: events to "
            "their function (asynchronous invoke), chat messages back to the chat queue. A message is "
            "deleted only after it was handed on; --dry-run only shows them."
        ),
    )
    redrive.add_argument(
        "--dead-letters", required=True, metavar="QUEUE_URL", help="the dead-letter queue (stack outputs)"
    )
    target = redrive.add_mutually_exclusive_group(required=True)
    target.add_argument("--function", metavar="NAME", help="the function to re-invoke with each event")
    target.add_argument("--queue", metavar="QUEUE_URL", help="the queue to send each message back to (chat)")
    redrive.add_argument("--dry-run", action="store_true", help="show what would be redriven, change nothing")
    redrive.add_argument("--limit", type=int, default=1000, help="at most this many messages (default 1000)")
    redrive.add_argument("--region", help="the queue's region (default: your AWS configuration's)")
    redrive.set_defaults(run=_redrive)

    preflight = commands.add_parser(
        "preflight",
        help="check the account, region and workstation before a deploy (uses your AWS credentials)",
        description=(
            "Reads the configuration the CDK app will deploy and checks, one line each: credentials and a "
            "region, the Powertools layer parameter in that region, the account's Lambda concurrency, each "
            "Slack webhook secret (never its value), the AWS CLI and Node.js. Exit 1 if any check fails."
        ),
    )
    preflight.add_argument(
        "--config", metavar="FILE", help="the per-account configuration file the deploy uses (make deploy CONFIG=FILE)"
    )
    preflight.add_argument("--json", action="store_true", help="one JSON document instead of text")
    preflight.set_defaults(run=_preflight)

    from training_guard_local import doctor, mute, notify_test, plan, report

    doctor.add_parser(commands)
    mute.add_parser(commands)
    notify_test.add_parser(commands)
    plan.add_parser(commands)
    report.add_parser(commands)

    return top


def command_names(top: argparse.ArgumentParser | None = None) -> list[str]:
    """Every command's name, as the parser knows them."""
    for action in (top or build_parser())._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def main(argv: Sequence[str] | None = None) -> int:
    top = build_parser()
    command = ""
    try:
        try:
            args = top.parse_args(argv)
        except SystemExit:  # --help printed into stdout's buffer: written here, where a failed write is caught
            sys.stdout.flush()
            raise
        command = args.command
        with offline_environment() if args.command in OFFLINE else contextlib.nullcontext():
            code = int(args.run(args))
        sys.stdout.flush()  # inside the boundary: a full disk or a closed pipe is reported here, not at exit
        return code
    except Exception as exc:
        fault = fault_of(exc) or (Fault(EXIT_USAGE, str(exc)) if isinstance(exc, UsageError) else None)
        if fault is None:
            raise  # a bug: its traceback
        if fault.status in (EXIT_OUTPUT, EXIT_PIPE):
            _drop_stdout()
        print(f"training-guard{f' {command}' if command else ''}: {fault.line}", file=sys.stderr, flush=True)
        return fault.status


def _drop_stdout() -> None:
    """Python flushes stdout at exit, which would fail again: point it at devnull first, as the Python docs'
    note on SIGPIPE does (https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    with contextlib.suppress(OSError, ValueError):  # stdout is no file (a test's capture): nothing to do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _replay_arguments(parser: argparse.ArgumentParser, *, optional_events: bool = False) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        help="the per-account file layered over cdk.json, as make deploy CONFIG=FILE reads it (default: cdk.json's "
        "configuration; outside the project folder, the built-in defaults)",
    )
    parser.add_argument(
        "--now",
        metavar="TIME",
        help="decide every event as at this ISO-8601 time (default: each event at its own `time`)",
    )
    parser.add_argument(
        "--account", help="replay every event in this AWS account (default: each event's own `account`)"
    )
    parser.add_argument("--region", help="replay every event in this region (default: each event's own `region`)")
    parser.add_argument(
        "events",
        nargs="*" if optional_events else "+",
        type=Path,
        metavar="EVENT.json",
        help="one event (or subscription delivery) or a JSON array of them",
    )


def load_config(path: Path | None) -> GuardConfig:
    """A configuration file (JSON), or the defaults; every mistake is one UsageError line."""
    from training_guard_local import configs

    return configs.file_only(path)


def deployed_config(path: Path | None) -> GuardConfig:
    """The configuration a deploy from this folder would use (`configs.deployed`): cdk.json's `training-guard` context
    with the file layered over it, as `make deploy CONFIG=FILE` reads it; outside the project folder, the file alone."""
    from training_guard_local import configs

    return configs.deployed(path).config


def _replay_options(args: argparse.Namespace) -> dict[str, Any]:
    from training_guard_local import replay

    return {
        "now": replay.parse_now(args.now),
        "account": replay.check_account(args.account),
        "region": replay.check_region(args.region),
    }


def _note(command: str) -> Any:
    return lambda text: print(f"training-guard {command}: {text}", file=sys.stderr, flush=True)


def _simulate(args: argparse.Namespace) -> int:
    from training_guard.domain.log_filter import effective_filter_pattern
    from training_guard_local import emulator, replay
    from training_guard_local.emulator import Emulation
    from training_guard_local.inputs import check_writable

    options = _replay_options(args)
    if not args.events and args.log is None:
        raise UsageError("give EVENT.json files, a training log with --log LOGFILE, or both")
    if args.log is None and (args.job is not None or args.write_deliveries is not None):
        raise UsageError("--job and --write-deliveries go with --log LOGFILE")
    if args.write_deliveries is not None:
        check_writable(args.write_deliveries, "deliveries")
    config = deployed_config(args.config)
    events = replay.load_events(args.events)
    if args.log is not None:
        deliveries = replay.load_log(
            args.log,
            job=args.job,
            host=args.host,
            filter_pattern=effective_filter_pattern(config.log_rules),
            owner=options["account"] or emulator.ACCOUNT,
            end=options["now"] or datetime.now(UTC).replace(microsecond=0),
            note=_note("simulate"),
        )
        if args.write_deliveries is not None:
            _write_json(args.write_deliveries, [d.event for d in deliveries])
        events += deliveries
    progress = replay.Progress(len(events))
    with Emulation(config, handler_logs=False) as aws:
        player = replay.Replay(aws, note=_note("simulate"), **options)
        try:
            for line in player.lines(replay.consume(events), progress=progress):
                print(json.dumps(line))
        finally:
            progress.close()
    sys.stdout.flush()  # inside main's try: a closed pipe is reported there, not at exit
    return EXIT_OK


def _write_json(path: Path, value: Any) -> None:
    try:
        path.write_text(json.dumps(value, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror or exc}") from None


def _slack_preview(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from training_guard.config.model import SlackConfig, SlackWebhook
    from training_guard_local import replay
    from training_guard_local.emulator import Emulation
    from training_guard_local.inputs import check_writable
    from training_guard_local.slack_listener import SlackListener, render_text
    from training_guard_local.slack_preview import page

    options = _replay_options(args)
    if args.html:
        check_writable(args.html, "HTML page")
    config = deployed_config(args.config)
    if not config.slack.enabled:
        config = replace(config, slack=SlackConfig(webhooks={"default": SlackWebhook()}, default="default"))
    events = replay.load_events(args.events)
    progress = replay.Progress(len(events), label="slack-preview")
    with SlackListener() as slack:
        urls = {name: slack.url(name) for name in config.slack.webhooks}
        with Emulation(config, webhook_urls=urls, handler_logs=False) as aws:
            player = replay.Replay(
                aws, note=_note("slack-preview"), after_each=lambda at: aws.pump_chat(rounds=3, at=at), **options
            )
            try:
                played = list(player.lines(replay.consume(events), progress=progress))
            finally:
                progress.close()
        received = [(r.path.split("/")[-1].removesuffix("-secret-token"), r.body) for r in slack.received()]
    if args.html:
        try:
            args.html.write_text(page(received), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{args.html}: cannot write: {exc.strerror or exc}") from None
        done = f"wrote {len(received)} message(s) to {args.html}"
        print(f"{done}: {_nothing_to_post(played)}" if not received else done, file=sys.stderr)
    elif not received:
        print(f"training-guard slack-preview: {_nothing_to_post(played)}", file=sys.stderr)
    else:
        for channel, body in received:
            print(f"#{channel}\n{render_text(body)}\n")
        sys.stdout.flush()
    return EXIT_OK


def _nothing_to_post(played: Sequence[dict[str, Any]], shown: int = 3) -> str:
    """Why no Slack message came of the events, from their replay lines (the first few events)."""
    reasons = []
    for line in played[:shown]:
        if line["error"] or line["ignored"]:
            why = line["error"] or line["ignored"]
        elif line["duplicates"]:
            why = "a duplicate of a transition already handled"
        elif line["notifications"]:
            why = f"notified ({', '.join(line['notifications'])}), but to no Slack channel of this configuration"
        else:
            status = f" ({line['job_status']})" if line["job_status"] else ""
            why = f"job {line['job']}{status}: no transition this configuration announces"
        reasons.append(f"{line['event']}: {why}")
    more = f"; and {len(played) - shown} more event(s)" if len(played) > shown else ""
    return f"nothing to post: {'; '.join(reasons)}{more}"


def _redrive(args: argparse.Namespace) -> int:
    from training_guard_local import redrive

    if args.limit < 1:
        raise UsageError(f"--limit {args.limit}: must be at least 1")
    try:
        count = redrive.run(
            args.dead_letters,
            function=args.function,
            queue=args.queue,
            region=args.region,
            dry_run=args.dry_run,
            limit=args.limit,
        )
    except redrive.RedriveError as exc:
        raise UsageError(str(exc)) from None
    print(f"{'would redrive' if args.dry_run else 'redriven'}: {count}", file=sys.stderr)
    return EXIT_OK


def _preflight(args: argparse.Namespace) -> int:
    from training_guard_local import preflight

    return preflight.main(args.config, json_output=args.json)


def _demo(args: argparse.Namespace) -> int:
    demo = demo_of(args.scenario, args.config)
    return demo.run(started=time.monotonic() - waited_seconds())  # "done in": all the person waited


def waited_seconds() -> float:
    """Wall-clock seconds since this process started (Python's start-up and imports included): what the person at
    the terminal has waited. Linux's /proc (proc(5): stat's starttime in clock ticks after boot, and uptime);
    elsewhere, since this module was imported."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED


def demo_of(
    scenario_name: str | None, config: Path | None = None, *, out: TextIO | None = None, folder: Path | None = None
) -> Demo:
    """What `training-guard demo [--scenario S] [--config C]` runs, printing to `out` (stdout by default); `folder`:
    see `Demo` (the command passes none)."""
    from training_guard_local import configs
    from training_guard_local import scenario as scenarios
    from training_guard_local.demo import Demo

    path = scenarios.resolve(scenario_name)  # a file, or a shipped scenario's name
    layered = configs.deployed(config) if config else None  # what `make deploy CONFIG=FILE` deploys
    override, source = (layered.config, configs.named(layered)) if layered else (None, None)
    try:
        scenario = scenarios.load(path, config_override=override, config_source=source)
    except scenarios.ScenarioError as exc:
        raise UsageError(" ".join(str(exc).split())) from None
    return Demo(scenario, out=out, folder=folder)


def _check_metrics(args: argparse.Namespace) -> int:
    from training_guard_local import check_metrics
    from training_guard_local.inputs import decode

    if args.rules:
        return _check_log_rules(args)
    for flag in ("config", "log_rules_tag"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag.replace('_', '-')} is for the log rules: add --rules")
    if args.definitions is None:
        raise UsageError("--definitions is needed without --rules (the job's MetricDefinitions to check)")
    try:
        definitions = check_metrics.load_definitions(args.definitions)
    except check_metrics.DefinitionsError as exc:
        raise UsageError(str(exc)) from None
    if str(args.log) == "-":
        lines = decode(sys.stdin.buffer.read(), "stdin", "log").splitlines()
    else:
        lines = read_text(args.log, "log").splitlines()
    try:
        reports = check_metrics.check_bounded(definitions, lines)
    except check_metrics.SlowRegex as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        for report in reports:
            print(json.dumps(report.as_dict()))
    else:
        print(check_metrics.render(reports))
    sys.stdout.flush()
    return EXIT_FAILED if args.strict and any(r.warnings() for r in reports) else EXIT_OK


def _check_log_rules(args: argparse.Namespace) -> int:
    """check-metrics --rules: the log as the Lambda would have read it (check_metrics.run_rules)."""
    from training_guard import contract
    from training_guard.domain.log_rules import job_overrides
    from training_guard_local import check_metrics, configs

    layered = configs.deployed(args.config)
    definitions = check_metrics.rule_definitions(args.definitions)
    tags = {contract.LOG_RULES_TAG: args.log_rules_tag} if args.log_rules_tag is not None else {}
    _, problem = job_overrides(tags)
    if problem is not None:
        raise UsageError(f"--log-rules-tag: {problem}")
    with check_metrics.open_log(args.log) as (source, handle):
        kind, lines = check_metrics.read_log(handle, source)
        run = check_metrics.run_rules(
            lines, source=source, kind=kind, config=layered.config, definitions=definitions, tags=tags
        )
    if args.json:
        for row in run.as_dicts():
            print(json.dumps(row))
    else:
        print(check_metrics.render_rules(run, configs.named(layered)))
    sys.stdout.flush()
    return EXIT_FAILED if args.strict and run.firings else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
