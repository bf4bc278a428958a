"""The demo's training logs: a job writes its lines to the emulated group, the template's subscription delivers them.

Each `log_lines` step writes the job's next lines (one PutLogEvents call, timed evenly since its previous write) to
moto's `/aws/sagemaker/TrainingJobs`, stream `<job>/algo-1-<training start>`; the lines matching the subscription's
filter pattern go, as CloudWatch Logs' base64 + gzip delivery, to the handler the template subscribes (logs_ext.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from training_guard import contract
from training_guard.adapters.log_state import DynamoLogState
from training_guard.domain.policy import Kind
from training_guard_local import logs_ext
from training_guard_local.emulator import LOG_EVENTS_FUNCTION, TABLE

if TYPE_CHECKING:
    from collections.abc import Callable

    from training_guard_local.emulator import Emulation
    from training_guard_local.scenario import Job, Step

SHOWN_LINE_MAX = 90  # characters of a log line the demo prints; longer ones are cut with an ellipsis
HOST = 1  # the demo's jobs run on one host: algo-1
SCHEDULED_EVENT = "Scheduled Event"  # EventBridge's detail-type of a scheduled rule's event


@dataclass
class Written:
    """What a job has written of its log so far."""

    lines: int = 0  # lines of the file written (blank ones included: they are numbered)
    until: datetime | None = None  # the time of its last write
    line_of: dict[str, int] = field(default_factory=dict)  # event ID -> the file's line number
    delivered: list[str] = field(default_factory=list)  # the IDs of the events delivered, in order
    stopped_at: int | None = None  # the line at which a log rule stopped it
    told_stopped: bool = False  # the demo has said the job writes no more


class Demo(Protocol):
    """What of the demo (demo.Demo) its training logs use: its emulation, its printing, its account of each job."""

    @property
    def aws(self) -> Emulation: ...
    @property
    def start(self) -> datetime: ...
    @property
    def outcomes(self) -> Mapping[str, Any]: ...

    def say(self, text: str = "") -> None: ...
    def account_of(self, job: Job) -> str: ...
    def _stamp(self, step: Step) -> str: ...
    def _who(self, job: Job) -> str: ...
    def key_of(self, name: str, account: str | None = None) -> str | None: ...
    def _handler(self, path: str) -> Callable[..., Any]: ...
    def _note(self, got: Any, note: dict[str, Any]) -> None: ...
    def _react(self, receipt: dict[str, Any], account: str = ...) -> None: ...


class DemoLogs:
    """The training logs of a demo's jobs and the subscription that reads them (None: the template has none)."""

    def __init__(self, demo: Demo, subscription: logs_ext.Subscription | None) -> None:
        self.demo = demo
        self.subscription = subscription
        self.written: dict[str, Written] = {}
        self.stall_check: str | None = None  # the scheduled rule of the function's stall check

    def schedule(self, template: Mapping[str, Any]) -> str | None:
        """The template's scheduled rule that invokes the subscription's function (its stall check), if any; said."""
        sub = self.subscription
        resources = template.get("Resources") or {}
        for logical_id, resource in resources.items():
            props = resource.get("Properties") or {}
            if resource.get("Type") != "AWS::Events::Rule" or "ScheduleExpression" not in props or sub is None:
                continue
            targets = [t.get("Arn", {}).get("Fn::GetAtt", [None])[0] for t in props.get("Targets") or []]
            handlers = {resources.get(t, {}).get("Properties", {}).get("Handler") for t in targets}
            if sub.handler in handlers:
                self.stall_check = str(logical_id)
                self.demo.say(
                    f"      rule {logical_id}: {props['ScheduleExpression']} -> {sub.handler} (the stall check)"
                )
                return self.stall_check
        return None

    def check_stalls(self, at: datetime) -> None:
        """The stall check's scheduled event to the function, as its rule sends it (with each sweeper run here)."""
        if self.stall_check is None or self.subscription is None:
            return
        demo, account = self.demo, self.demo.aws.account
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": SCHEDULED_EVENT,
            "source": "aws.events",
            "account": account,
            "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": demo.aws.region,
            "resources": [f"arn:aws:events:{demo.aws.region}:{account}:rule/{self.stall_check}"],
            "detail": {},
        }
        report = demo.aws.invoke(
            demo._handler(self.subscription.handler), event, demo.aws.context(LOG_EVENTS_FUNCTION), at=at
        )
        stalled = ", ".join(str(s) for s in report.get("stalled") or []) or "none"
        demo.say(f"         log rules: stall check of {report.get('checked', 0)} running job(s); stalled: {stalled}")
        findings = report.get("findings")
        if isinstance(findings, Mapping):
            demo._react(dict(findings), account)

    def describe(self) -> str:
        """One line of the setup: the subscription as the template declares it."""
        sub = self.subscription
        if sub is None:
            group = contract.TRAINING_LOG_GROUP
            return f"      no subscription to {group} in the template: the jobs' log lines reach nothing"
        return (
            f"      subscription {sub.filter_name} on {sub.log_group}: filter pattern {sub.filter_pattern!r} -> "
            f"{sub.handler}"
        )

    def stream(self, job: Job) -> str:
        """The job's log stream: named after its training start, as SageMaker names it."""
        started = self.demo.start + timedelta(minutes=1)  # the demo's TrainingStartTime (Demo._state_event)
        return logs_ext.stream_name(job.name, epoch=int(started.timestamp()), host=HOST)

    def play(self, job: Job, step: Step, at: datetime) -> None:
        """The job writes its next `step.log_lines` lines; the subscription delivers those that match."""
        demo, stamp, who = self.demo, self.demo._stamp(step), self.demo._who(job)
        written = self.written.setdefault(job.key, Written())
        status = demo.aws.job_status(job.name, account=demo.account_of(job))
        left = len(job.log_lines) - written.lines
        if status not in (None, "InProgress"):
            if not written.told_stopped:
                written.told_stopped = True
                at_line = f" at line {written.stopped_at}" if written.stopped_at else ""
                demo.say(f"{stamp} {who}: {status}{at_line}: the last {left} line(s) of its log are never written")
            return
        first = written.lines
        chunk = job.log_lines[first : first + step.log_lines]
        if not chunk:
            demo.say(f"{stamp} {who}: its log has no more lines")
            return
        since = written.until or at - timedelta(minutes=1)
        spacing = (at - since) / len(chunk)
        events: list[dict[str, Any]] = [
            {"timestamp": int((since + spacing * (i + 1)).timestamp() * 1000), "message": line, "line": first + i + 1}
            for i, line in enumerate(chunk)
            if line.strip()  # CloudWatch Logs takes no empty event
        ]
        written.lines, written.until = first + len(chunk), at
        stream = self.stream(job)
        with demo.aws.in_account(demo.account_of(job)):
            stored = demo.aws.put_log_events(stream, events)
        for event, kept in zip(events, stored, strict=True):
            written.line_of[kept["id"]] = event["line"]
        if first == 0:
            name = job.log.name if job.log else "its log"
            demo.say(f"{stamp} {who}: its log ({name}) goes to {contract.TRAINING_LOG_GROUP}, stream {stream}")
        demo.say(f"{stamp} {who}: writes lines {first + 1}-{first + len(chunk)}; the last: {_shown(chunk[-1])}")
        if self.subscription is not None:
            self._deliver(job, written, stored, stream, at)

    def _deliver(self, job: Job, written: Written, stored: list[dict[str, Any]], stream: str, at: datetime) -> None:
        demo, sub = self.demo, self.subscription
        assert sub is not None
        account = demo.account_of(job)
        deliveries = logs_ext.deliveries(
            stored,
            filter_pattern=sub.filter_pattern,
            log_stream=stream,
            owner=account,
            filter_name=sub.filter_name,
            log_group=sub.log_group,
        )
        matched = sum(len(logs_ext.decode(d)["logEvents"]) for d in deliveries)
        sent = f" -> {_deliveries(len(deliveries))} (base64 + gzip)" if deliveries else ""
        demo.say(f"         subscription: {matched} of {len(stored)} line(s) match its filter pattern{sent}")
        handler = demo._handler(sub.handler)
        for delivery in deliveries:
            written.delivered += [e["id"] for e in logs_ext.decode(delivery)["logEvents"]]
            receipt = demo.aws.invoke(handler, delivery, demo.aws.context(LOG_EVENTS_FUNCTION), at=at)
            # the notifications now (the step's drain would find them too): each says what its rule's firing did
            notes = demo.aws.notifications()
            for note in notes:
                demo._note(demo.outcomes[demo.key_of(note["job"]["name"], note.get("account")) or job.key], note)
            ours = [n for n in notes if n["job"]["name"] == job.name and n.get("kind") == Kind.LOG_RULE.value]
            did = {n["rule"]["name"]: n["outcome"] for n in ours if n.get("rule")}
            self._saw(job, written, stream, receipt, did)
            findings = receipt.get("findings")
            demo._react({**findings, "job": job.name} if isinstance(findings, Mapping) else dict(receipt), account)

    def _saw(self, job: Job, written: Written, stream: str, receipt: Mapping[str, Any], did: Mapping[str, str]) -> None:
        """What each log rule that fired saw: the line of the file, read from the stream's state as the function saved
        it (its line is the stream's count of lines delivered), and what the guard did about it."""
        fired = [f if isinstance(f, str) else str(f.get("rule")) for f in receipt.get("firings") or []]
        if not fired:
            return
        state, _ = DynamoLogState(self.demo.aws.client("dynamodb"), TABLE, ttl_seconds=1).get(stream)
        for rule in fired:
            counted = state.fired.get(rule) if state is not None else None  # the stream's count of lines delivered
            line = (
                written.line_of.get(written.delivered[counted - 1])
                if counted and counted <= len(written.delivered)
                else None
            )
            where = f" at line {line}: {_shown(job.log_lines[line - 1])}" if line else ""
            outcome = did.get(rule) or ("nothing more: the job is being stopped" if written.stopped_at else "nothing")
            self.demo.say(f"         log rule {rule} fired{where} -> {outcome}")
            self.demo.outcomes[job.key].saw.append(f"{rule} line {line}" if line else rule)
            if outcome == "stopped" and written.stopped_at is None:
                written.stopped_at = line


def _shown(line: str) -> str:
    text = line.replace("#011", "\t").expandtabs(1).strip()
    return repr(text if len(text) <= SHOWN_LINE_MAX else text[: SHOWN_LINE_MAX - 1] + "…")


def _deliveries(count: int) -> str:
    return "1 delivery" if count == 1 else f"{count} deliveries"
