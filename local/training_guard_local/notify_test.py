"""`training-guard test-notification`: one marked notification through the deployed path, and where it arrived.

It builds the notification with the guard's own renderers (`messages.make_test_notification`: the
`training-guard.notification/1` document, the e-mail prose, the Q Developer form), publishes it to the stack's
topic with the guard's own SNS adapter, and then reports per channel:
- each Slack webhook: delivered when the notifier has recorded the delivery in the state table (the ledger item
  `chat.delivery_key(transition, webhook)`, outcome `delivered`), parked when the message sits in the chat
  dead-letter queue (with its reason), or not seen within the timeout;
- each e-mail (and SMS) subscription: confirmed (SNS sends to it) or pending (it receives nothing);
- Amazon Q Developer: subscribed to the topic or not.
Progress goes to stderr; the report to stdout (or `--json`). Exit 1 when a channel did not get the message.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from botocore.exceptions import ClientError

from infra import outputs
from training_guard import contract
from training_guard.domain.errors import ActionFailed
from training_guard.services.chat import DELIVERED, NOT_CONFIGURED, delivery_key
from training_guard_local import doctor
from training_guard_local.inputs import UsageError
from training_guard_local.preflight import FAIL, OK, WARN, WEBHOOK_URL_EXAMPLE, Aws, Check, Status

EXIT_OK = 0
EXIT_FAILED = 1
DEFAULT_TIMEOUT: Final = 60  # seconds; SQS hands the message to the notifier within seconds when it is idle
MAX_TIMEOUT: Final = 900
POLL_SECONDS: Final = 2.0
PROGRESS_EVERY: Final = 10.0  # seconds between progress lines when nothing changes


@dataclass
class Report:
    stack: str
    region: str | None
    test_id: str = ""
    topic: str = ""
    message_id: str = ""
    channels: list[Check] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if any(c.status == FAIL for c in self.channels) else EXIT_OK


@dataclass
class Webhook:
    name: str
    secret_id: str
    status: Status | None = None  # None while waiting, then OK or FAIL
    message: str = ""
    fix: str = ""


def send(
    aws: Aws,
    stack_name: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    progress: Callable[[str], None] | None = None,
    test_id: str | None = None,
) -> Report:
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    report = Report(stack_name, aws.region)
    stack = doctor.read_stack(aws, stack_name)
    if stack is None:
        report.channels.append(
            Check("stack", FAIL, f"no stack {stack_name} in {aws.region}", "training-guard doctor says what to do")
        )
        return report
    topic = stack.output(outputs.TOPIC_ARN)
    if topic is None:
        report.channels.append(doctor.check_outputs(stack))
        return report
    from training_guard.adapters.sns import SnsPublisher
    from training_guard.render.messages import make_test_notification

    report.test_id = test_id or uuid.uuid4().hex[:12]
    note = make_test_notification(
        test_id=report.test_id,
        stack=stack.name,
        sent_by=stack.caller,
        account=stack.account,
        region=stack.region,
        now=datetime.now(UTC),
    )
    sns = aws.client("sns")
    report.topic = topic
    try:
        SnsPublisher(sns, topic).publish(note)
    except ActionFailed as exc:
        report.channels.append(
            Check(
                "publish",
                FAIL,
                f"could not publish to {topic}: {exc}",
                "your credentials need sns:Publish on the topic and kms:GenerateDataKey* and kms:Decrypt on the "
                "guard's key (the topic is encrypted with it)",
            )
        )
        return report
    started = monotonic()
    say(f"published test notification {report.test_id} to {topic}")
    subscribed = doctor.subscriptions(sns, topic)
    if stack.slack:
        report.channels += _slack(
            aws,
            stack,
            transition=note.transition,
            subscribed=subscribed,
            timeout=timeout,
            sleep=sleep,
            monotonic=monotonic,
            started=started,
            say=say,
        )
    report.channels += _subscribers(stack, topic, subscribed)
    if not [c for c in report.channels if c.status == OK or not c.name.startswith("q-developer")]:
        report.channels.append(
            Check(
                "subscribers",
                FAIL,
                "nothing is subscribed to the topic: nobody is notified",
                "configure Slack, Q Developer or e-mails (README, Configure) and deploy: make deploy",
            )
        )
    return report


def _slack(
    aws: Aws,
    stack: doctor.Stack,
    *,
    transition: str,
    subscribed: Sequence[Mapping[str, Any]],
    timeout: float,
    sleep: Callable[[float], None],
    monotonic: Callable[[], float],
    started: float,
    say: Callable[[str], None],
) -> list[Check]:
    notifier = stack.output(outputs.SLACK_NOTIFIER_FUNCTION)
    functions, _ = doctor.read_functions(aws.client("lambda"), stack)
    function = next((f for f in functions if f.name == notifier), None)
    named = function.webhook_secrets() if function else {}
    webhooks = [Webhook(stack.webhook_of(sid, named), sid) for sid in stack.secret_ids()]
    if not webhooks:
        return []
    table, dead_letters, chat_queue = (
        stack.output(outputs.STATE_TABLE_NAME),
        stack.output(outputs.CHAT_DEAD_LETTERS),
        stack.output(outputs.CHAT_QUEUE),
    )
    sqs = aws.client("sqs")
    if chat_queue:
        arn = sqs.get_queue_attributes(QueueUrl=chat_queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        if not any(s.get("Protocol") == "sqs" and s.get("Endpoint") == arn for s in subscribed):
            fix = "deploy again: make deploy"
            return [
                Check(f"slack:{w.name}", FAIL, "the chat queue is not subscribed to the topic", fix) for w in webhooks
            ]
    dynamodb = aws.client("dynamodb")
    log_group = function.log_group if function else f"/aws/lambda/{notifier}"
    said, last = "", started
    while True:
        # The dead-letter queue first: the notifier parks a message only after recording every delivery of it
        # that succeeded, so a webhook not recorded by then is one the parked message did not reach.
        reason = _parked(sqs, dead_letters, transition) if dead_letters else None
        for webhook in (w for w in webhooks if not w.status):
            if table and _delivered(dynamodb, table, delivery_key(transition, webhook.name)):
                webhook.status = OK
                webhook.message = f"delivered ({monotonic() - started:.0f} s after publishing: the notifier's record)"
            elif reason is not None:
                _park(webhook, reason, stack)
        elapsed = monotonic() - started
        waiting = [w for w in webhooks if not w.status]
        line = "slack: " + ", ".join(f"{w.name} {_state(w)}" for w in webhooks) + f" ({elapsed:.0f} s)"
        if line.split(" (", 1)[0] != said.split(" (", 1)[0] or monotonic() - last >= PROGRESS_EVERY:
            say(line)
            said, last = line, monotonic()
        if not waiting:
            break
        if elapsed >= timeout:
            for webhook in waiting:
                webhook.status = FAIL
                webhook.message = f"not delivered within {timeout:.0f} s, nor parked in the chat dead-letter queue"
                webhook.fix = (
                    "the notifier retries what Slack refuses for a while before parking it: see what it logged: "
                    f"aws logs tail {log_group} --region {stack.region} --since 10m; then training-guard doctor"
                )
            break
        sleep(POLL_SECONDS)
    return [Check(f"slack:{w.name}", w.status or FAIL, w.message, w.fix) for w in webhooks]


def _state(webhook: Webhook) -> str:
    return {OK: "delivered", FAIL: "parked"}.get(webhook.status or "", "waiting")


def _delivered(dynamodb: Any, table: str, key: str) -> bool:
    item = dynamodb.get_item(TableName=table, Key={contract.TABLE_PARTITION_KEY: {"S": key}}, ConsistentRead=True).get(
        "Item"
    )
    return bool(item) and item.get("state", {}).get("S") == "done" and item.get("outcome", {}).get("S") == DELIVERED


def _parked(sqs: Any, queue: str, transition: str) -> str | None:
    """Why this message sits in the chat dead-letter queue, or None when it is not there."""
    for letter in doctor.peek(sqs, queue):
        try:
            document = json.loads(letter.body)
        except ValueError:
            continue
        if isinstance(document, dict) and document.get("transition") == transition:
            return letter.why
    return None


def _park(webhook: Webhook, reason: str, stack: doctor.Stack) -> None:
    # The reason joins one error per webhook ("webhook 'x': ..."); it is cut at 256 characters, so a webhook it
    # no longer names gets it whole.
    parts = [p.strip().rstrip(";").strip() for p in re.split(r"(?=webhook '[^']+': )", reason) if p.strip()]
    mine = next((p for p in parts if p.startswith(f"webhook {webhook.name!r}: ")), reason)
    webhook.status = FAIL
    webhook.message = f"parked in the chat dead-letter queue: {mine}"
    if NOT_CONFIGURED in mine:
        webhook.message = f"parked in the chat dead-letter queue: {webhook.secret_id} {NOT_CONFIGURED}"
        webhook.fix = (
            f"aws secretsmanager put-secret-value --region {stack.region} --secret-id {webhook.secret_id} "
            f"--secret-string '{WEBHOOK_URL_EXAMPLE}'; then training-guard doctor --fix delivers what waited"
        )
    else:
        webhook.fix = "training-guard doctor shows the chat dead letters and how to redrive them"


def _subscribers(stack: doctor.Stack, topic: str, subscribed: Sequence[Mapping[str, Any]]) -> list[Check]:
    checks = []
    for sub in subscribed:
        protocol, who = sub.get("Protocol"), str(sub.get("Endpoint"))
        if protocol not in ("email", "email-json", "sms"):
            continue
        name = f"{'sms' if protocol == 'sms' else 'e-mail'}:{who}"
        if sub.get("SubscriptionArn") == doctor.PENDING_CONFIRMATION:
            checks.append(
                Check(
                    name,
                    FAIL,
                    "pending confirmation: SNS sends it nothing",
                    f"{who} confirms from the 'AWS Notification - Subscription Confirmation' message "
                    "(training-guard doctor shows how to ask for a new one)",
                )
            )
        else:
            checks.append(
                Check(name, OK, "confirmed: SNS sends it the message (subject 'Training Guard: Test notification ...')")
            )
    if any(doctor.is_q_developer(s) for s in subscribed):
        checks.append(
            Check("q-developer", OK, "subscribed: the message appears in its Slack channel, in a thread of its own")
        )
    else:
        checks.append(Check("q-developer", WARN, "not configured: no Amazon Q Developer subscription on the topic"))
    return checks


# --- output and the command --------------------------------------------------------------------------------


def render(report: Report, marks: Mapping[str, str] = doctor.SYMBOLS) -> str:
    lines = [f"Training Guard test notification {report.test_id or '-'}: stack {report.stack} in {report.region}"]
    width = max((len(c.name) for c in report.channels), default=0)
    for c in report.channels:
        lines.append(f"{marks[c.status]:<2} {c.name:<{width}}  {c.message}")
        if c.fix and c.status != OK:
            lines.append(f"   {'':<{width}}  fix: {c.fix}")
    failed = sum(c.status == FAIL for c in report.channels)
    lines.append(
        f"test-notification: {failed} channel(s) did not get it"
        if failed
        else "test-notification: every channel got it"
    )
    return "\n".join(lines)


def as_json(report: Report) -> str:
    return json.dumps(
        {
            "stack": report.stack,
            "region": report.region,
            "test_id": report.test_id,
            "topic": report.topic,
            "exit_code": report.exit_code,
            "channels": [asdict(c) for c in report.channels],
        },
        ensure_ascii=False,
    )


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Register the sub-command on the CLI's sub-parsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "test-notification",
        help="send one marked test notification through the deployed guard and report where it arrived",
        description=(
            "Publishes one notification titled 'Test notification ...' to the stack's topic, rendered by the "
            "guard's own code, and reports per channel whether it arrived: each Slack webhook (the notifier's "
            "record in the state table, or the chat dead-letter queue and its reason), each e-mail subscription "
            "(confirmed or pending) and Amazon Q Developer (subscribed or not). Exit 1 if a channel did not get it."
        ),
    )
    doctor.add_stack_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"how long to wait for Slack deliveries (default {DEFAULT_TIMEOUT})",
    )
    parser.set_defaults(run=_run)
    return parser


def pause(seconds: float) -> None:
    """The wait between two looks at the state table (the tests run the notifier here instead)."""
    time.sleep(seconds)


def _run(args: argparse.Namespace) -> int:
    if not 0 < args.timeout <= MAX_TIMEOUT:
        raise UsageError(f"--timeout must be more than 0 and at most {MAX_TIMEOUT} seconds")
    aws = doctor.connect(os.environ, args.region)
    try:
        report = send(aws, args.stack, timeout=args.timeout, sleep=pause)
    except ClientError as exc:
        raise UsageError(doctor.refused(exc)) from None
    print(as_json(report) if args.json else render(report, doctor.symbols(sys.stdout)), flush=True)
    return report.exit_code
