"""The `training-guard` command: operator tooling that runs on a workstation, never in Lambda."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from training_guard.config import ConfigError, GuardConfig

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input to the command; printed as one line on stderr, exit 2."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="training-guard", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    simulate = commands.add_parser(
        "simulate",
        help="replay recorded EventBridge events through the real job-events handler on an emulated AWS",
        description=(
            "Replays recorded 'SageMaker Training Job State Change' events, in order and duplicates "
            "included, through the real job-events handler against an embedded AWS emulation. "
            "Prints one JSON object per event: job, stopped, notifications, error, and more."
        ),
    )
    simulate.add_argument("--config", type=Path, help="a GuardConfig JSON file (default: built-in defaults)")
    simulate.add_argument("events", nargs="+", type=Path, metavar="EVENT.json", help="one event or a JSON array")
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
    preview.add_argument("--config", type=Path, help="a GuardConfig JSON file (default: built-in defaults)")
    preview.add_argument("--html", type=Path, help="write the messages as an HTML page here")
    preview.add_argument("events", nargs="+", type=Path, metavar="EVENT.json", help="one event or a JSON array")
    preview.set_defaults(run=_slack_preview)

    checker = commands.add_parser(
        "check-metrics",
        help="apply MetricDefinitions regexes to a training log the way SageMaker does",
        description=(
            "Applies each definition's regex to each log line (first capture group, must be a finite "
            "number) and prints per metric how many values it finds, the first and last, a sparkline "
            "and warnings (never matches, nan/inf captures, non-numbers, too-greedy captures)."
        ),
    )
    checker.add_argument(
        "--definitions", required=True, metavar="DEFS", help='JSON list of {"Name", "Regex"}, inline or a file path'
    )
    checker.add_argument("--log", required=True, type=Path, metavar="LOGFILE", help="a training log ('-' for stdin)")
    checker.add_argument("--json", action="store_true", help="one JSON object per metric instead of text")
    checker.add_argument("--strict", action="store_true", help="exit 1 when any metric has a warning")
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
    demo.add_argument("--scenario", type=Path, help="a scenario JSON file (default: the seed scenario)")
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

    from training_guard_local import doctor, notify_test, plan

    doctor.add_parser(commands)
    notify_test.add_parser(commands)
    plan.add_parser(commands)

    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except UsageError as exc:
        print(f"training-guard {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE


def load_config(path: Path | None) -> GuardConfig:
    if path is None:
        return GuardConfig()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    try:
        return GuardConfig.from_json(text, source=str(path))
    except ConfigError as exc:
        raise UsageError(" ".join(str(exc).split())) from None


def load_events(paths: Sequence[Path]) -> list[Any]:
    """Every event of every file, in order; all files are read before any event is played."""
    events: list[Any] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
        events.extend(data if isinstance(data, list) else [data])
    return events


def _simulate(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    events = load_events(args.events)
    from training_guard_local.emulator import Emulation

    with Emulation(config) as aws:
        for event in events:
            print(json.dumps(simulate_one(aws, event)), flush=True)
    return EXIT_OK


def _slack_preview(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from training_guard.config import SlackConfig, SlackWebhook
    from training_guard_local.emulator import Emulation
    from training_guard_local.slack_listener import SlackListener, render_text
    from training_guard_local.slack_preview import page

    config = load_config(args.config)
    if not config.slack.enabled:
        config = replace(config, slack=SlackConfig(webhooks={"default": SlackWebhook()}, default="default"))
    events = load_events(args.events)
    with SlackListener() as slack:
        urls = {name: slack.url(name) for name in config.slack.webhooks}
        with Emulation(config, webhook_urls=urls) as aws:
            for event in events:
                simulate_one(aws, event)
            aws.pump_chat(rounds=3)
        received = [(r.path.split("/")[-1].removesuffix("-secret-token"), r.body) for r in slack.received()]
    if args.html:
        args.html.write_text(page(received), encoding="utf-8")
        print(f"wrote {len(received)} message(s) to {args.html}", file=sys.stderr)
    else:
        for channel, body in received:
            print(f"#{channel}\n{render_text(body)}\n")
    return EXIT_OK


def _redrive(args: argparse.Namespace) -> int:
    import boto3

    from training_guard_local import redrive

    sqs = boto3.client("sqs")
    hand_on = (
        redrive.to_function(boto3.client("lambda"), args.function)
        if args.function
        else redrive.to_queue(sqs, args.queue)
    )
    count = redrive.redrive(sqs, args.dead_letters, hand_on, dry_run=args.dry_run, limit=args.limit)
    print(f"{'would redrive' if args.dry_run else 'redriven'}: {count}", file=sys.stderr)
    return EXIT_OK


def _preflight(args: argparse.Namespace) -> int:
    from training_guard_local import preflight

    return preflight.main(args.config, json_output=args.json)


def _demo(args: argparse.Namespace) -> int:
    from training_guard_local import scenario as scenarios
    from training_guard_local.demo import Demo

    override = load_config(args.config) if args.config else None
    try:
        scenario = scenarios.load(args.scenario or scenarios.SEED_SCENARIO, config_override=override)
    except scenarios.ScenarioError as exc:
        raise UsageError(" ".join(str(exc).split())) from None
    return Demo(scenario).run()


def _check_metrics(args: argparse.Namespace) -> int:
    from training_guard_local import check_metrics

    try:
        definitions = check_metrics.load_definitions(args.definitions)
    except check_metrics.DefinitionsError as exc:
        raise UsageError(str(exc)) from None
    if str(args.log) == "-":
        lines = sys.stdin.read().splitlines()
    else:
        try:
            lines = args.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            raise UsageError(f"{args.log}: cannot read: {exc.strerror or exc}") from None
    reports = check_metrics.check(definitions, lines)
    if args.json:
        for report in reports:
            print(json.dumps(report.as_dict()))
    else:
        print(check_metrics.render(reports))
    return EXIT_FAILED if args.strict and any(r.warnings() for r in reports) else EXIT_OK


def simulate_one(aws: Any, event: Any) -> dict[str, Any]:
    """Play one event; the result says what the guard did, or why the event could not be used."""
    from training_guard.errors import GuardError
    from training_guard.events import EventError

    detail = event.get("detail") if isinstance(event, dict) else None
    job = detail.get("TrainingJobName") if isinstance(detail, dict) else None
    try:
        receipt = aws.deliver(event)
    except (EventError, GuardError) as exc:
        return {"job": job, "stopped": False, "notifications": [], "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - one bad event must not end the replay; it is reported
        return {"job": job, "stopped": False, "notifications": [], "error": f"{type(exc).__name__}: {exc}"}
    notes = aws.notifications()
    # not a training-job event at all: rejected (parked in the dead-letter queue) or foreign (ignored)
    foreign = receipt.get("rejected") or (receipt["ignored"] if not receipt["job"] else None)
    return {
        "job": receipt["job"] or job,
        "stopped": receipt["stopped"],
        "notifications": receipt["notifications"],
        "error": foreign,
        "outcomes": receipt["outcomes"],
        "titles": [n.get("title") for n in notes],
        "duplicates": receipt["duplicates"],
        "ignored": receipt["ignored"],
        "described": receipt["described"],
        "job_status": aws.job_status(receipt["job"]),
    }


if __name__ == "__main__":
    sys.exit(main())
