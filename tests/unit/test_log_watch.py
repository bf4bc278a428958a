"""The log path's service: a subscription delivery folded into its stream's state, each new firing stopped once through
the responder before the state is saved; duplicates, conflicts, timeouts, unreadable jobs and lines, the stall check."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.fakes import FakeJobs, FakeLedger, FakePublisher
from tests.helpers import NOW
from tests.log_deliveries import FakeLogStates, Killed
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard.domain import log_rules, policy
from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import EventError, TrainingJob
from training_guard.domain.log_rules import Firing, LogEvent, StreamState
from training_guard.handlers import log_events
from training_guard.services import log_watch
from training_guard.services.log_watch import (
    ACT_RESERVE_SECONDS,
    CHUNK_EVENTS,
    JOB_CACHE_SECONDS,
    JOBS_CACHED,
    SAVE_ATTEMPTS,
    SAVE_RESERVE_SECONDS,
    Delivery,
    DeliveryUnfinished,
    Invocation,
    LogWatch,
    StateConflict,
    decode,
)
from training_guard.services.responder import Responder

ACCOUNT = "123456789012"
REGION = "eu-west-1"
JOB = "mnist-lr01-2026-12-05-21-00-00-000"
ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{JOB}"
STREAM = f"{JOB}/algo-1-1764968400"
DEFINITIONS = (("train:loss", r"loss: (\S+)"),)
T0_MS = int(NOW.timestamp() * 1000) - 3_600_000  # the job's first line, an hour before NOW
HEALTHY = [f"step {i} loss: {3.0 - 0.05 * i:.4f}" for i in range(40)]  # falls by more than every delta
INVOCATION = Invocation(ACCOUNT, REGION)


@dataclass
class World:
    config: GuardConfig = field(default_factory=GuardConfig)
    jobs: FakeJobs = field(default_factory=FakeJobs)
    ledger: FakeLedger = field(default_factory=FakeLedger)
    publisher: FakePublisher = field(default_factory=FakePublisher)
    states: FakeLogStates = field(default_factory=FakeLogStates)
    seconds: float = 0.0  # the execution environment's monotonic clock

    def __post_init__(self) -> None:
        self.add_job(JOB)
        self.guard = Responder(self.config, self.jobs, self.ledger, self.publisher)
        self.watch = LogWatch(self.guard, self.states, monotonic=lambda: self.seconds)

    def add_job(self, name: str, definitions: tuple[tuple[str, str], ...] = DEFINITIONS) -> None:
        arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name}"
        self.jobs.jobs[name] = TrainingJob(
            name=name,
            status="InProgress",
            arn=arn,
            secondary_status="Training",
            training_start_time=NOW - timedelta(hours=1),
            metric_definitions=definitions,
        )
        self.jobs.tags_by_arn[arn] = {}

    def deliver(
        self, delivery: Delivery, *, invocation: Invocation = INVOCATION, now: datetime = NOW
    ) -> log_watch.LogReceipt:
        return self.watch.deliver(delivery, now=now, invocation=invocation)

    def log_notes(self) -> list[tuple[str, str]]:
        return [(n.finding.name if n.finding else "", n.outcome.value) for n in self.publisher.published]


def batch(
    lines: Sequence[str], *, first: int = 0, stream: str = STREAM, group: str = contract.TRAINING_LOG_GROUP
) -> Delivery:
    """Lines `first`, `first + 1`, ... of a stream, one second apart, with ids as CloudWatch Logs gives them."""
    events = tuple(
        LogEvent(id=f"{37_000_000 + first + i:056d}", timestamp_ms=T0_MS + 1000 * (first + i), message=line)
        for i, line in enumerate(lines)
    )
    return Delivery(ACCOUNT, group, stream, events)


def subscription(delivery: Delivery, *, message_type: str = "DATA_MESSAGE") -> dict[str, Any]:
    """The delivery as Lambda receives it: base64 of gzip of CloudWatch Logs' JSON document."""
    doc = {
        "messageType": message_type,
        "owner": delivery.owner,
        "logGroup": delivery.group,
        "logStream": delivery.stream,
        "subscriptionFilters": [contract.LOG_SUBSCRIPTION_FILTER_NAME],
        "logEvents": [{"id": e.id, "timestamp": e.timestamp_ms, "message": e.message} for e in delivery.events],
    }
    return {"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(doc).encode())).decode()}}


def diverging() -> list[str]:
    """A healthy start, then a NaN loss at line 31 (index 30)."""
    return [*HEALTHY[:30], "step 30 loss: nan", *HEALTHY[31:]]


def firing(rule: str = "Divergence", action: str = "stop", event: LogEvent | None = None) -> Firing:
    return Firing(
        rule=rule,
        metric="train:loss",
        value=9.1,
        line=31,
        event_id=event.id if event else "e",
        timestamp_ms=event.timestamp_ms if event else T0_MS,
        action=action,
        setting=f"log_rules.{rule.lower()}",
        reader="MetricDefinitions",
        detail="loss 9.1 is 4.2x its best 2.17",
    )


# --- decoding the delivery ------------------------------------------------------------------------------
def test_a_real_subscription_document_decodes_to_its_stream_and_events() -> None:
    sent = batch(HEALTHY[:3])
    assert decode(subscription(sent)) == sent
    assert sent.job == JOB
    assert sent.event_id == f"{STREAM}#{sent.events[0].id}"


def test_a_control_message_is_ignored() -> None:
    control = decode(subscription(batch([]), message_type="CONTROL_MESSAGE"))
    assert control.control
    receipt = World().deliver(control)
    assert receipt.ignored == "CloudWatch Logs' control message (checking the destination)"


@pytest.mark.parametrize(
    ("event", "says"),
    [
        ({"source": "aws.events"}, 'no "awslogs.data" text'),
        ({"awslogs": {"data": "not base64!"}}, "awslogs.data is not base64 of gzip"),
        ({"awslogs": {"data": base64.b64encode(b"plain").decode()}}, "awslogs.data is not base64 of gzip"),
        ({"awslogs": {"data": base64.b64encode(gzip.compress(b"{no")).decode()}}, "does not hold JSON"),
        ({"awslogs": {"data": base64.b64encode(gzip.compress(b"[]")).decode()}}, "not a JSON object"),
    ],
)
def test_a_payload_that_is_not_a_delivery_says_what_is_wrong(event: dict[str, Any], says: str) -> None:
    with pytest.raises(EventError, match=says):
        decode(event)


@pytest.mark.parametrize(
    ("change", "field_"),
    [
        (lambda d: d.pop("logStream"), "awslogs.data.logStream"),
        (lambda d: d.update(logEvents={}), "awslogs.data.logEvents"),
        (lambda d: d["logEvents"][1].update(timestamp="1764968400000"), r"awslogs.data.logEvents\[1\].timestamp"),
        (lambda d: d["logEvents"][0].pop("id"), r"awslogs.data.logEvents\[0\].id"),
        (lambda d: d["logEvents"][2].update(message=None), r"awslogs.data.logEvents\[2\].message"),
    ],
)
def test_a_broken_document_names_its_field(change: Callable[[dict[str, Any]], Any], field_: str) -> None:
    data = subscription(batch(HEALTHY[:3]))["awslogs"]["data"]
    doc = json.loads(gzip.decompress(base64.b64decode(data)))
    change(doc)
    with pytest.raises(EventError, match=field_):
        decode({"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(doc).encode())).decode()}})


@pytest.mark.parametrize(
    ("delivery", "why"),
    [
        (batch(HEALTHY, group="/aws/lambda/other"), "log group /aws/lambda/other is not /aws/sagemaker/TrainingJobs"),
        (batch(HEALTHY, stream="no-slash-here"), "log stream no-slash-here is not a training job's"),
        (batch(HEALTHY, stream="bad_name/algo-1-1"), "log stream bad_name/algo-1-1 is not a training job's"),
    ],
)
def test_a_stream_that_is_not_a_training_jobs_is_ignored_unread(delivery: Delivery, why: str) -> None:
    world = World()
    receipt = world.deliver(delivery)
    assert receipt.ignored is not None
    assert receipt.ignored.startswith(why)
    assert world.jobs.describe_calls == []
    assert world.states.items == {}


def test_a_job_outside_the_selection_is_ignored_unread() -> None:
    world = World(config=GuardConfig.from_dict({"jobs": {"exclude_prefixes": ["mnist-"]}}))
    receipt = world.deliver(batch(diverging()))
    assert receipt.ignored == policy.selection_reason(JOB, world.config)
    assert (world.jobs.describe_calls, world.jobs.stop_calls, world.states.items) == ([], [], {})


# --- a firing stops the job once, before the state is saved -------------------------------------------------
def test_a_nan_loss_stops_the_job_once_and_the_state_is_saved_after_the_stop() -> None:
    world = World()
    order: list[str] = []
    world.states.before_put = lambda: order.append(f"save after {len(world.jobs.stop_calls)} stop(s)")
    receipt = world.deliver(batch(diverging()))
    assert world.jobs.stop_calls == [JOB]
    assert order == ["save after 1 stop(s)"]
    assert receipt.firings == ["NaN"]
    assert receipt.findings is not None
    assert receipt.findings.outcomes == ["stopped"]
    assert (receipt.events, receipt.evaluated, receipt.left) == (40, 40, 0)
    [note] = world.publisher.published
    assert (note.kind, note.transition) == (policy.Kind.LOG_RULE, f"t#{JOB}#log#NaN#IssuesFound")
    assert note.event_id == f"{STREAM}#{batch(diverging()).events[0].id}"
    assert world.ledger.stops[JOB].rule == "NaN"
    assert world.states.items[STREAM][1] == 1


def test_a_healthy_stream_stops_nothing_and_saves_its_state() -> None:
    world = World()
    receipt = world.deliver(batch(HEALTHY))
    assert (receipt.firings, world.jobs.stop_calls, world.publisher.published) == ([], [], [])
    assert world.states.puts == 1


def test_the_same_delivery_twice_stops_once_and_writes_once() -> None:
    world = World()
    first = world.deliver(batch(diverging()))
    again = world.deliver(batch(diverging()))
    assert world.jobs.stop_calls == [JOB]
    assert first.firings == ["NaN"]
    assert again.firings == []  # the state has it: no firing, so no claim at all
    assert world.states.puts == 1  # nothing new folded: no write
    assert len(world.publisher.published) == 1


def test_a_timeout_before_the_save_refolds_the_batch_on_retry_and_the_ledger_keeps_the_stop_once() -> None:
    world = World()
    world.states.kill_put = True
    with pytest.raises(Killed):
        world.deliver(batch(diverging()))
    assert world.jobs.stop_calls == [JOB]  # the stop came first
    assert world.states.items == {}  # ... and the state was never saved
    world.states.kill_put = False
    retry = world.deliver(batch(diverging()))
    assert retry.firings == ["NaN"]  # folded again from the old state: the same firing
    assert retry.findings is not None
    assert retry.findings.duplicates == 1  # ... which the ledger knows as done
    assert world.jobs.stop_calls == [JOB]
    assert len(world.publisher.published) == 1
    assert world.states.items[STREAM][1] == 1


def test_a_save_lost_to_a_concurrent_delivery_is_folded_again_on_its_state() -> None:
    world = World()
    earlier = batch(HEALTHY[:10])

    def concurrent() -> None:  # another delivery of the same stream (its first lines) saves in between
        world.deliver(earlier)

    world.states.before_put = concurrent
    receipt = world.deliver(batch(diverging()[10:], first=10))
    assert receipt.conflicts == 1
    assert receipt.firings == ["NaN", "NaN"]  # folded again on the other's state: fired again, stopped once
    assert receipt.findings is not None
    assert receipt.findings.duplicates == 1
    assert world.jobs.stop_calls == [JOB]
    assert len(world.publisher.published) == 1
    assert world.states.items[STREAM][1] == 2  # the other delivery's save, then this one's on top


def test_saves_lost_every_time_fail_the_invocation_for_lambdas_retry() -> None:
    world = World()
    real_put = world.states.put
    calls: list[int] = []

    def always_late(*args: Any, **kwargs: Any) -> bool:
        calls.append(1)
        return False

    world.states.put = always_late  # type: ignore[method-assign]
    with pytest.raises(StateConflict, match=f"{SAVE_ATTEMPTS} saves lost"):
        world.deliver(batch(diverging()))
    assert len(calls) == SAVE_ATTEMPTS
    assert world.jobs.stop_calls == [JOB]
    world.states.put = real_put  # type: ignore[method-assign]
    world.deliver(batch(diverging()))
    assert world.jobs.stop_calls == [JOB]


def test_three_hosts_that_each_see_the_nan_stop_the_job_once_with_one_notification() -> None:
    world = World()
    receipts = [world.deliver(batch(diverging(), stream=f"{JOB}/algo-{n}-1764968400")) for n in (1, 2, 3)]
    assert [r.firings for r in receipts] == [["NaN"]] * 3  # each stream's own state fires
    assert world.jobs.stop_calls == [JOB]
    assert len(world.publisher.published) == 1
    assert sum(r.findings.duplicates for r in receipts if r.findings) == 2
    assert len(world.states.items) == 3


# --- the deadline --------------------------------------------------------------------------------------
def clock_of(values: Iterator[float]) -> Invocation:
    return Invocation(ACCOUNT, REGION, lambda: next(values))


def test_time_running_out_saves_what_was_folded_and_leaves_the_rest_to_the_retry() -> None:
    world = World()
    lines = [f"step {i} loss: {100 - 0.05 * i:.4f}" for i in range(CHUNK_EVENTS * 2 + 100)]
    lines[CHUNK_EVENTS * 2 + 50] = "step 1050 loss: nan"
    delivery = batch(lines)
    plenty, short = 60.0, SAVE_RESERVE_SECONDS - 0.1
    with pytest.raises(DeliveryUnfinished, match=f"{CHUNK_EVENTS * 2} of {len(lines)} events folded and saved"):
        world.deliver(delivery, invocation=clock_of(iter([30.0, plenty, plenty, short])))
    assert world.jobs.stop_calls == []
    assert world.states.items[STREAM][1] == 1  # saved for the two chunks folded
    retry = world.deliver(delivery)
    assert retry.firings == ["NaN"]
    assert world.jobs.stop_calls == [JOB]


def test_too_little_time_for_a_firings_stop_leaves_its_chunk_unsaved_for_the_retry() -> None:
    world = World()
    delivery = batch(diverging())
    just_short = ACT_RESERVE_SECONDS + SAVE_RESERVE_SECONDS - 0.1
    with pytest.raises(DeliveryUnfinished, match=f"0 of {len(delivery.events)} events"):
        world.deliver(delivery, invocation=clock_of(iter([30.0, 60.0, just_short])))
    assert world.jobs.stop_calls == []
    assert world.states.items == {}  # never saved ahead of its stop
    assert world.deliver(delivery).firings == ["NaN"]
    assert world.jobs.stop_calls == [JOB]


# --- the job's definitions and tags ----------------------------------------------------------------------
def test_a_short_invocation_keeps_a_share_of_its_time_and_still_stops_the_job() -> None:
    world = World()
    ten_seconds = Invocation(ACCOUNT, REGION, lambda: 10.0)  # less than the reserves of a 30 s function
    assert world.deliver(batch(diverging()), invocation=ten_seconds).firings == ["NaN"]
    assert world.jobs.stop_calls == [JOB]
    world = World()
    with pytest.raises(DeliveryUnfinished):  # a third of 10 s for the stop, a sixth for the save: 5 s is short
        world.deliver(batch(diverging()), invocation=clock_of(iter([10.0, 10.0, 5.0 - 0.1])))
    assert world.jobs.stop_calls == []


def test_a_jobs_definitions_are_read_once_per_container_for_a_bounded_time() -> None:
    world = World()
    for first in (0, 10, 20):
        world.deliver(batch(HEALTHY[first : first + 10], first=first))
    assert world.jobs.describe_calls == [JOB]
    world.seconds += JOB_CACHE_SECONDS + 1
    world.deliver(batch(HEALTHY[30:], first=30))
    assert world.jobs.describe_calls == [JOB, JOB]


def test_the_cache_of_definitions_holds_a_bounded_number_of_jobs() -> None:
    world = World()
    names = [f"job-{n}" for n in range(JOBS_CACHED + 1)]
    for name in names:
        world.add_job(name)
        world.deliver(batch(HEALTHY[:1], stream=f"{name}/algo-1-1"))
    world.jobs.describe_calls.clear()
    world.deliver(batch(HEALTHY[1:2], first=1, stream=f"{names[-1]}/algo-1-1"))
    world.deliver(batch(HEALTHY[1:2], first=1, stream=f"{names[0]}/algo-1-1"))
    assert world.jobs.describe_calls == [names[0]]  # the oldest was forgotten, the newest kept


@dataclass
class FailingJobs(FakeJobs):
    describe_error: BaseException | None = None
    tags_error: BaseException | None = None

    def describe(self, name: str) -> TrainingJob | None:
        if self.describe_error is not None:
            self.describe_calls.append(name)
            raise self.describe_error
        return super().describe(name)

    def tags(self, arn: str) -> dict[str, str]:
        if self.tags_error is not None:
            raise self.tags_error
        return super().tags(arn)


def test_a_job_whose_definitions_cannot_be_read_is_reported_once_and_its_log_still_read() -> None:
    denied = ActionFailed(f"DescribeTrainingJob {JOB}", RuntimeError("AccessDeniedException"))
    world = World(jobs=FailingJobs(describe_error=denied))
    first = world.deliver(batch(HEALTHY[:20]))
    world.seconds += JOB_CACHE_SECONDS + 1  # asked again: still failing, not said again
    second = world.deliver(batch(HEALTHY[20:], first=20))
    assert [p.split(":")[0] for p in first.problems] == ["definitions"]
    assert "AccessDeniedException" in first.problems[0]
    assert second.problems == []
    assert world.states.items[STREAM][1] == 2  # both batches folded (with the built-in readers)


def test_unreadable_tags_are_reported_once_and_the_log_still_read() -> None:
    world = World(jobs=FailingJobs(tags_error=ActionFailed(f"ListTags {ARN}", RuntimeError("Throttling"))))
    first = world.deliver(batch(HEALTHY[:20]))
    assert [p.split(":")[0] for p in first.problems] == ["tags"]
    assert world.states.puts == 1


def test_a_bad_regex_in_the_definitions_is_reported_once_and_the_others_read() -> None:
    world = World()
    world.add_job(JOB, definitions=(("broken", "loss=([0-9"), *DEFINITIONS))
    receipt = world.deliver(batch(diverging()))
    assert [p.split(":")[0] for p in receipt.problems] == ["definitions"]
    assert "broken" in receipt.problems[0]
    assert world.jobs.stop_calls == [JOB]  # the usable definition still read the NaN
    again = world.deliver(batch(HEALTHY[:5], stream=f"{JOB}/algo-2-1"))
    assert again.problems == []


def test_a_line_the_rules_cannot_read_is_skipped_reported_once_and_the_others_folded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = log_rules.evaluate

    def choking(state: StreamState | None, events: Sequence[LogEvent], **kwargs: Any) -> Any:
        if any(e.message == "\x00garbage" for e in events):
            raise ValueError("cannot read this line")
        return real(state, events, **kwargs)

    monkeypatch.setattr(log_watch, "evaluate", choking)
    world = World()
    lines = diverging()
    lines[5] = "\x00garbage"
    receipt = world.deliver(batch(lines))
    assert [p.split(":")[0] for p in receipt.problems] == ["line"]
    assert "ValueError: cannot read this line" in receipt.problems[0]
    assert receipt.firings == ["NaN"]
    assert world.jobs.stop_calls == [JOB]
    lines[35] = "\x00garbage"
    assert world.deliver(batch(lines, stream=f"{JOB}/algo-2-1")).problems == []  # once per job


def test_captures_that_are_not_numbers_are_reported_once_per_job_with_the_first() -> None:
    world = World()
    lines = list(HEALTHY)
    lines[3] = "step 3 loss: cat"
    receipt = world.deliver(batch(lines))
    assert receipt.problems == ["unparsed: 1 capture(s) not a number, first: train:loss: step 3 loss: cat"]
    assert world.deliver(batch(lines, stream=f"{JOB}/algo-2-1")).problems == []


def test_an_unreadable_log_rules_tag_is_reported_once_and_the_configuration_applies() -> None:
    world = World()
    world.jobs.tags_by_arn[ARN] = {contract.LOG_RULES_TAG: "NaN=explode"}
    receipt = world.deliver(batch(diverging()))
    assert [p.split(":")[0] for p in receipt.problems] == ["tags"]
    assert "NaN=explode" in receipt.problems[0]
    assert world.jobs.stop_calls == [JOB]


def test_a_job_sagemaker_does_not_know_is_ignored() -> None:
    world = World()
    receipt = world.deliver(batch(HEALTHY, stream="gone/algo-1-1"))
    assert receipt.ignored == "training job gone does not exist"
    assert world.states.items == {}


# --- what a firing's action becomes ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("action", "outcome", "stops"),
    [("stop", "stopped", [JOB]), ("notify", "notified", []), ("dry_run", "would_stop", []), ("ignore", None, [])],
)
def test_a_firings_action_reaches_the_responder_as_stop_notify_or_dry_run(
    monkeypatch: pytest.MonkeyPatch, action: str, outcome: str | None, stops: list[str]
) -> None:
    real = log_rules.evaluate

    def fires(state: StreamState | None, events: Sequence[LogEvent], **kwargs: Any) -> Any:
        folded, _ = real(state, events, **kwargs)
        return folded, [firing("Divergence", action, events[-1])]

    monkeypatch.setattr(log_watch, "evaluate", fires)
    world = World()
    world.deliver(batch(HEALTHY))
    assert [n.outcome.value for n in world.publisher.published] == ([outcome] if outcome else [])
    assert world.jobs.stop_calls == stops
    for note in world.publisher.published:
        assert note.reason.startswith("log_rules.divergence")
        assert note.finding is not None
        # the decision names the line and the reader that saw it, besides the rule, metric, value and setting
        assert (note.finding.source, note.finding.details) == (
            policy.LOG_RULE,
            "loss 9.1 is 4.2x its best 2.17 (line 31, read by MetricDefinitions)",
        )


# --- the stall check -----------------------------------------------------------------------------------------
def test_the_stall_check_asks_each_running_jobs_streams_and_reports_a_stall_through_the_responder() -> None:
    world = World()
    world.add_job("quiet-job")
    world.deliver(batch(HEALTHY))
    world.deliver(batch(HEALTHY, stream="quiet-job/algo-1-1"))
    world.jobs.jobs["quiet-job"] = TrainingJob(name="quiet-job", status="Completed")  # ended: not asked
    report = world.watch.check_stalls(now=NOW + timedelta(days=1), invocation=INVOCATION)
    assert report.checked == 1
    assert report.stalled == [STREAM]
    [note] = world.publisher.published
    assert note.finding is not None
    assert (note.kind, note.finding.name) == (policy.Kind.LOG_RULE, "StalledTrainingRule")
    again = world.watch.check_stalls(now=NOW + timedelta(days=1, minutes=5), invocation=INVOCATION)
    assert (again.checked, again.stalled) == (1, [])  # marked in the stream's state: said once
    assert len(world.publisher.published) == 1
    assert "StalledTrainingRule" in json.dumps(world.states.items[STREAM][0]["fired"])


def test_a_stall_of_a_job_whose_tag_turns_the_log_rules_off_is_not_reported() -> None:
    world = World()
    world.deliver(batch(HEALTHY))
    world.jobs.tags_by_arn[ARN] = {contract.LOG_RULES_TAG: "off"}
    world.seconds += JOB_CACHE_SECONDS + 1  # the tag read again
    report = world.watch.check_stalls(now=NOW + timedelta(days=1), invocation=INVOCATION)
    assert (report.checked, report.stalled, world.publisher.published) == (1, [], [])


def test_a_stall_lost_to_a_deliverys_save_is_said_once_by_the_ledger() -> None:
    world = World()
    world.deliver(batch(HEALTHY))
    world.states.put = lambda *args, **kwargs: False  # type: ignore[method-assign]
    for minutes in (0, 5):
        world.watch.check_stalls(now=NOW + timedelta(days=1, minutes=minutes), invocation=INVOCATION)
    assert len(world.publisher.published) == 1


def test_a_fresh_stream_is_not_stalled_and_jobs_left_for_want_of_time_wait_for_the_next_check() -> None:
    world = World()
    world.deliver(batch(HEALTHY))
    soon = datetime.fromtimestamp(T0_MS / 1000 + 60, NOW.tzinfo)  # a minute after the first line
    assert world.watch.check_stalls(now=soon, invocation=INVOCATION).stalled == []
    short = Invocation(ACCOUNT, REGION, lambda: ACT_RESERVE_SECONDS - 1)
    assert world.watch.check_stalls(now=NOW + timedelta(days=1), invocation=short).not_checked == [JOB]
    assert world.publisher.published == []


# --- the handler's seam -------------------------------------------------------------------------------------
@dataclass
class FakeParker:
    parked: list[tuple[str, str]] = field(default_factory=list)

    def park(self, body: str, reason: str) -> None:
        self.parked.append((body, reason))


def test_the_handler_decodes_a_delivery_and_stops_the_job() -> None:
    world = World()
    result = log_events.process(subscription(batch(diverging())), world.watch, invocation=INVOCATION, now=NOW)
    assert result["firings"] == ["NaN"]
    assert world.jobs.stop_calls == [JOB]


def test_the_handler_parks_a_malformed_delivery_with_its_reason() -> None:
    world = World()
    parker = FakeParker()
    event = {"awslogs": {"data": "bm90IGd6aXA="}}
    result = log_events.process(event, world.watch, invocation=INVOCATION, now=NOW, dead_letters=parker)  # type: ignore[arg-type]
    assert str(result["rejected"]).startswith("awslogs.data is not base64 of gzip")
    [(body, reason)] = parker.parked
    assert json.loads(body) == event
    assert reason.startswith("unusable event: awslogs.data is not base64 of gzip")


def test_the_handler_ignores_a_delivery_from_another_account() -> None:
    world = World()
    delivery = Delivery("999999999999", contract.TRAINING_LOG_GROUP, STREAM, batch(diverging()).events)
    result = log_events.process(subscription(delivery), world.watch, invocation=INVOCATION, now=NOW)
    assert result["ignored"] == "event from account 999999999999"
    assert world.jobs.describe_calls == []


def test_the_handler_ignores_a_control_message_whatever_its_owner() -> None:
    world = World()
    control = Delivery("CloudwatchLogs", "", "", ())
    result = log_events.process(
        subscription(control, message_type="CONTROL_MESSAGE"), world.watch, invocation=INVOCATION, now=NOW
    )
    assert result["ignored"] == "CloudWatch Logs' control message (checking the destination)"


def test_a_scheduled_event_runs_the_stall_check() -> None:
    world = World()
    world.deliver(batch(HEALTHY))
    scheduled = {"source": "aws.events", "detail-type": "Scheduled Event", "id": "s-1", "time": "2026-12-01T03:00:00Z"}
    result = log_events.process(scheduled, world.watch, invocation=INVOCATION, now=NOW + timedelta(days=1))
    assert result["stalled"] == [STREAM]


def test_unfinished_deliveries_fail_the_invocation_so_that_lambda_retries_them() -> None:
    world = World()
    delivery = batch(diverging())
    draining = clock_of(iter([30.0, 30.0, 1.0]))  # 1 s left when the firing is reached
    with pytest.raises(DeliveryUnfinished):
        log_events.process(subscription(delivery), world.watch, invocation=draining, now=NOW)
    assert world.jobs.stop_calls == []


# --- an organization's hub: a member account's log ---------------------------------------------------------------
HUB, MEMBER = "111122223333", "444455556666"


@dataclass
class FakeMembers:
    """MemberAccess: the member's jobs and the hub's ledger scoped by the account (as adapters.accounts does)."""

    jobs: FakeJobs
    asked: list[str] = field(default_factory=list)

    def responder_for(self, base: Responder, account: str) -> Responder:
        from training_guard.adapters.accounts import AccountLedger

        self.asked.append(account)
        return base.acting(jobs=self.jobs, ledger=AccountLedger(base.ledger, account), account_scope=account)


def test_a_member_accounts_log_is_read_and_stopped_through_the_members_role_with_its_own_state() -> None:
    from training_guard.config.model import OrganizationConfig

    organization = OrganizationConfig(hub_account=HUB, region=REGION, members=(MEMBER,))
    world = World(config=GuardConfig(organization=organization))
    member_jobs = FakeJobs()
    member_jobs.jobs[JOB] = replace(world.jobs.jobs[JOB], arn=ARN.replace(ACCOUNT, MEMBER))
    members = FakeMembers(member_jobs)
    delivery = Delivery(MEMBER, contract.TRAINING_LOG_GROUP, STREAM, batch(diverging()).events)
    hub = Invocation(HUB, REGION)
    log_events.process(subscription(delivery), world.watch, invocation=hub, now=NOW, members=members)
    assert members.asked == [MEMBER]
    assert (member_jobs.stop_calls, world.jobs.stop_calls) == ([JOB], [])
    assert list(world.ledger.stops) == [f"{MEMBER}/{JOB}"]  # the hub's ledger, the member's key
    assert world.states.get(STREAM, account=MEMBER)[1] == 1
    assert world.states.get(STREAM) == (None, 0)  # not the hub's own stream of that name


def test_a_delivery_out_of_time_order_is_folded_in_time_across_its_chunks() -> None:
    # The loss falls to 0.5, then jumps to 8 (16x its best): Divergence. Delivered newest chunk first, an unsorted
    # fold would read the plateau first and then find the fall late, skipped by every order-dependent rule.
    world = World()
    falling = [f"step {i} loss: {3.0 - 2.5 * i / CHUNK_EVENTS:.4f}" for i in range(CHUNK_EVENTS)]
    climbed = [f"step {CHUNK_EVENTS + i} loss: {8.0 + 0.001 * (i % 3):.4f}" for i in range(CHUNK_EVENTS)]
    in_time = batch([*falling, *climbed])
    newest_first = replace(in_time, events=in_time.events[CHUNK_EVENTS:] + in_time.events[:CHUNK_EVENTS])
    receipt = world.deliver(newest_first)
    assert "Divergence" in receipt.firings
    assert world.jobs.stop_calls == [JOB]
    assert (receipt.events, receipt.evaluated, receipt.left) == (2 * CHUNK_EVENTS, 2 * CHUNK_EVENTS, 0)
