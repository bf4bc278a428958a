"""`training-guard mute`: the mutes Slack's buttons make, from a terminal (one notion of a mute: mutes.py).

    training-guard mute --job J --rule R --for 2h          silence rule R for job J for two hours
    training-guard mute --job J --rule R --until-job-ends  ... until the job ends
    training-guard mute --job J --exempt --for 1d          never stop job J for a day (still notified)
    training-guard mute list [--job J]                     the mutes in force
    training-guard mute remove --job J --rule R            (or --exempt)

It writes the same records as a click in Slack, in the deployed stack's state table (found from the stack's outputs,
as `training-guard report` finds it), with your AWS credentials: `dynamodb:UpdateItem` on the table to add or remove,
`dynamodb:Scan` to list. A mute records who made it: `cli:<your ARN>` (STS GetCallerIdentity). `--account` names a
member account's job (organization mode). Usage errors are one line and exit 2, and so is a mute for a job that
SageMaker does not know in the region or that has ended (DescribeTrainingJob); removing a mute that is not there
exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from infra import outputs
from training_guard.domain.errors import ActionFailed
from training_guard.domain.mutes import (
    ALL_RULES,
    Effect,
    Mute,
    MuteError,
    Mutes,
    check_job,
    exempt,
    parse_duration,
    silence,
)
from training_guard.domain.text import ascii_int
from training_guard_local import doctor
from training_guard_local.inputs import UsageError

EXIT_OK = 0
EXIT_FAILED = 1
LIST, REMOVE = "list", "remove"
_ACCOUNT_DIGITS = 12


def utcnow() -> datetime:
    """The time a mute starts (a seam for the tests)."""
    return datetime.now(UTC)


def table_of(aws: Any, stack_name: str) -> str:
    """The state table of the deployed stack, from its outputs; a usage error naming what to do when there is none."""
    try:
        stack = doctor.read_stack(aws, stack_name)
    except ClientError as exc:
        raise UsageError(doctor.refused(exc)) from None
    if stack is None:
        raise UsageError(
            f"no stack {stack_name} in {aws.region}: deploy it (make deploy), or name it: "
            "training-guard mute --stack NAME --region REGION ..."
        )
    table = stack.output(outputs.STATE_TABLE_NAME)
    if table is None:
        raise UsageError(
            f"the stack {stack_name} has no output {outputs.STATE_TABLE_NAME}: it was deployed by an older version "
            "of the guard; deploy this one (make deploy)"
        )
    return table


def add(store: Any, *, job: str, account: str | None, mute: Mute, now: datetime) -> Mute:
    store.put(job, mute, account=account, now=now)
    return mute


def in_force(store: Any, *, job: str | None, account: str | None, now: datetime) -> list[tuple[str, Mute]]:
    """(job, mute) for every mute in force (`<account>/<job>` for a member's job); one job's, or all of them."""
    if job is not None:
        scope = f"{account}/{job}" if account else job
        found: list[tuple[str, Mutes]] = [(scope, store.read(job, account))]
    else:
        found = store.jobs()
    return [(scope, m) for scope, mutes in found for m in mutes.active(now).entries]


def render(rows: list[tuple[str, Mute]]) -> str:
    if not rows:
        return "no mutes in force"
    return "\n".join(f"{scope}: {mute.describe()}" for scope, mute in rows)


def as_json(rows: list[tuple[str, Mute]]) -> str:
    return json.dumps([_document(scope, m) for scope, m in rows], indent=2, ensure_ascii=False)


def _document(scope: str, mute: Mute) -> dict[str, Any]:
    return {
        "job": scope,
        "effect": mute.effect.value,
        "rule": mute.rule,
        "by": mute.by,
        "at": mute.at.isoformat(),
        "until": mute.until.isoformat() if mute.until else None,
    }


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Register the sub-command on the CLI's sub-parsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "mute",
        help="silence a rule for a job, or exempt a job from stops, for a while (list and remove them too)",
        description=(
            "Writes the mutes Slack's Snooze, Mute and Exempt buttons write, in the deployed guard's state table: "
            "--rule R silences rule R for the job (its findings and errors are neither acted on nor announced), "
            "--exempt keeps the job from being stopped (what would have stopped it is announced as would-stop). "
            "Each lasts --for a duration (90m, 2h, 1d) or --until-job-ends. `mute list` shows the mutes in force, "
            "`mute remove` takes one away. Uses your AWS credentials."
        ),
    )
    parser.add_argument("action", nargs="?", choices=[LIST, REMOVE], help="list or remove (default: add a mute)")
    parser.add_argument("--job", metavar="JOB", help="the training job's name")
    parser.add_argument("--account", metavar="ACCOUNT", help="the member account of the job (organization mode)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--rule", metavar="RULE", help="the rule (or metric guard) to silence for the job")
    what.add_argument("--exempt", action="store_true", help="exempt the job from stops instead")
    how_long = parser.add_mutually_exclusive_group()
    how_long.add_argument("--for", dest="duration", metavar="DURATION", help="how long: 90m, 2h, 1d, 1h30m")
    how_long.add_argument("--until-job-ends", action="store_true", help="until the job stops, fails or completes")
    doctor.add_stack_arguments(parser)
    parser.set_defaults(run=_run)
    return parser


@dataclass(frozen=True)
class _Wanted:
    """A mute to add, checked before anything is read: the rule (None: exempt the job) and its duration."""

    rule: str | None
    seconds: int | None  # None: until the job ends

    def mute(self, *, by: str, at: datetime) -> Mute:
        if self.rule is None:
            return exempt(by=by, at=at, seconds=self.seconds)
        return silence(self.rule, by=by, at=at, seconds=self.seconds)


def _run(args: argparse.Namespace) -> int:
    wanted = _check(args)
    aws = doctor.connect(os.environ, args.region)
    identity: Mapping[str, str] = doctor.identify(aws)
    from training_guard.adapters.mutes import DynamoMutes

    store = DynamoMutes(aws.client("dynamodb"), table_of(aws, args.stack))
    if wanted is not None and args.account is None:  # a member's job is in its own account: not ours to describe
        _check_running(aws, args.job)
    try:
        return _act(args, wanted, store, by=f"cli:{identity['Arn']}", now=utcnow())
    except ActionFailed as exc:
        raise UsageError(f"{exc}: your credentials need dynamodb:UpdateItem and dynamodb:Scan on the table") from None


# The statuses after which a job emits nothing a mute could act on (Stopping: its stop is under way).
_ENDED = frozenset({"Completed", "Failed", "Stopped", "Stopping"})


def _check_running(aws: Any, job: str) -> None:
    """A mute for a job SageMaker does not know in the region, or one that has ended, is a mistake: said in one line
    (DescribeTrainingJob). Credentials that may not describe jobs get a warning, and the mute is written."""
    try:
        described = aws.client("sagemaker").describe_training_job(TrainingJobName=job)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        message = str(error.get("Message", "")).lower()
        # SageMaker: "Requested resource not found."; the emulation (moto): "Could not find training job ..."
        if error.get("Code") in ("ValidationException", "ResourceNotFound") and (
            "not found" in message or "not find" in message
        ):
            raise UsageError(
                f"no training job {job} in {aws.region}: check the name, and the region (--region REGION)"
            ) from None
        print(
            f"training-guard mute: warning: could not check that job {job} is running ({error.get('Code')}): "
            "the mute is written all the same",
            file=sys.stderr,
        )
        return
    status = described.get("TrainingJobStatus")
    if status in _ENDED:
        ended = described.get("TrainingEndTime")
        when = f" at {ended.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if isinstance(ended, datetime) else ""
        raise UsageError(f"job {job} has ended ({status}{when}): a mute would act on nothing; nothing was written")


def _check(args: argparse.Namespace) -> _Wanted | None:
    """The mute to add (None for list and remove), or a usage error naming the argument."""
    try:
        if args.job is not None:
            check_job(args.job)
        account = args.account
        if account is not None and (len(account) != _ACCOUNT_DIGITS or ascii_int(account, _ACCOUNT_DIGITS) is None):
            raise UsageError(f"--account {args.account!r}: an AWS account ID is 12 digits")
        if args.action == LIST:
            if args.rule or args.exempt or args.duration or args.until_job_ends:
                raise UsageError("mute list takes only --job (and --account)")
            return None
        if args.job is None:
            raise UsageError("name the job: --job JOB")
        if not (args.rule or args.exempt):
            raise UsageError("say what to mute: --rule RULE, or --exempt for the whole job")
        if args.action == REMOVE:
            if args.duration or args.until_job_ends:
                raise UsageError("mute remove takes no duration")
            return None
        if not (args.duration or args.until_job_ends):
            raise UsageError("say for how long: --for 2h, or --until-job-ends")
        wanted = _Wanted(
            None if args.exempt else args.rule, None if args.until_job_ends else parse_duration(args.duration)
        )
        wanted.mute(by="cli", at=utcnow())  # the rule's name is checked now, before AWS is asked anything
        return wanted
    except MuteError as exc:
        raise UsageError(str(exc)) from None


def _act(args: argparse.Namespace, wanted: _Wanted | None, store: Any, *, by: str, now: datetime) -> int:
    if args.action == LIST:
        rows = in_force(store, job=args.job, account=args.account, now=now)
        print(as_json(rows) if args.json else render(rows), flush=True)
        return EXIT_OK
    scope = f"{args.account}/{args.job}" if args.account else args.job
    if args.action == REMOVE:
        rule = ALL_RULES if args.exempt else args.rule.strip()
        key = f"{(Effect.EXEMPT if args.exempt else Effect.SILENCE).value}:{rule}"
        removed = store.remove(args.job, key, account=args.account)
        what = "exemption" if args.exempt else f"mute of rule {rule}"
        if args.json:
            print(json.dumps({"job": scope, "removed": key if removed else None}), flush=True)
        else:
            print(f"{scope}: the {what} removed" if removed else f"{scope}: no {what} to remove", flush=True)
        return EXIT_OK if removed else EXIT_FAILED
    assert wanted is not None
    mute = add(store, job=args.job, account=args.account, mute=wanted.mute(by=by, at=now), now=now)
    print(json.dumps(_document(scope, mute)) if args.json else f"{scope}: {mute.describe()}", flush=True)
    return EXIT_OK
