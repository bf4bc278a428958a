"""Lambda's asynchronous invocation on a virtual clock, for the time campaign (test_timeouts.py).

What Lambda does, as modelled here (AWS Lambda developer guide, "How Lambda handles errors and retries
with asynchronous invocation", https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html):
a function error, timeouts included, makes Lambda run the event two more times, one minute after the
first attempt and two minutes after the second; an event that has waited longer than the maximum event
age (60 s to 6 h, https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_lambda.EventInvokeConfigOptions.html;
the stack sets 2 h) is not run again. Either way it goes to the on-failure destination: here it is counted
as dead-lettered. An attempt stopped by its timeout runs none of its `except`/`finally` code: it
releases nothing (docs/domain.md §7).

How, on the emulation (moto) with the real handlers:
- a virtual clock: `training_guard.adapters.clock.utcnow` reads it, the context's remaining time follows it,
  and the responder's busy wait advances it instead of sleeping;
- botocore hooks on the guard's own clients (`wiring.root().client`) number every AWS
  call of an attempt. At call N a plan can kill the attempt, the call either never reaching AWS or
  after AWS acted on it (its response lost); make the call slow (the clock jumps; a call that outlasts
  the timeout is killed there); or start a duplicate delivery of the same event (SageMaker's duplicates,
  concurrent with the attempt) that runs to its end before call N goes on. A plan's `hazard` instead
  gives every call a chance to be the one where the attempt dies (the seeded fleet). On the unit tier
  (`fake_world.py`) `LambdaModel.call` runs the same steps around each port call that stands for an AWS call.
- a kill raises `Killed`, a BaseException as the runtime's stop is not an error the code handles, and
  makes every later AWS call of that attempt raise it again without reaching AWS: the responder's
  `except BaseException: release(...)` then has no effect, as after a real timeout. A killed call
  raises from `before-parameter-build`, so no request is sent and moto never sees it.

The model is sequential: an attempt runs to its end at one virtual instant, unless a call is slow or a
busy wait sleeps; a concurrent duplicate is started from inside an attempt's call. Retries and other
scheduled work run in the order of their virtual times (an item due while an attempt ran starts when it ends).
"""

from __future__ import annotations

import copy
import heapq
import itertools
import json
import random
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pytest

from training_guard import contract
from training_guard.adapters import clock as guard_clock
from training_guard.adapters.log_state import JOB_PREFIX as LOG_JOB_PREFIX
from training_guard.adapters.log_state import STATE_PREFIX as LOG_STATE_PREFIX
from training_guard.domain.errors import TransitionBusy
from training_guard.domain.mutes import KEY_PREFIX as MUTES_KEY_PREFIX
from training_guard.domain.pricing import PRICE_KEY_PREFIX
from training_guard.handlers import wiring
from training_guard_local.emulator import ACCOUNT, REGION, handler_output_to_stderr

# The event handlers' timeout (infra/components/functions.py DEFAULT_TIMEOUT).
EVENT_HANDLER_TIMEOUT_SECONDS = 30.0
# The sweeper's, for the default sweep_minutes = 5 (infra/components/metric_guards.py sweeper_timeout).
SWEEPER_TIMEOUT_SECONDS = 240.0
# Lambda's two retries of a failed asynchronous invocation: 1 min after the first attempt, 2 min after the second.
RETRY_DELAYS_SECONDS = (60.0, 120.0)
# The stack's maximum event age (infra/components/job_events.py EVENT_MAX_AGE, 2 h).
MAX_EVENT_AGE_SECONDS = 2 * 3600.0
SERVICES = ("sagemaker", "dynamodb", "sns", "cloudwatch", "sqs")  # every client the guard's functions use
_PK = contract.TABLE_PARTITION_KEY
_T = TypeVar("_T")


class Killed(BaseException):
    """The runtime stopped the attempt (its timeout, or a crash): none of its code runs any more."""


@dataclass(frozen=True)
class Kill:
    """Kill an attempt at its `step`-th AWS call (1-based)."""

    step: int
    effect: bool  # True: AWS acted on the call, the response never came back; False: it never reached AWS
    slow: bool = True  # True: the call hung until the timeout (the clock jumps to the deadline); False: a crash


@dataclass(frozen=True)
class AttemptPlan:
    kill: Kill | None = None
    duplicate_at: int | None = None  # start a duplicate delivery of the same event just before this call
    delays: Mapping[int, float] = field(default_factory=dict)  # step -> seconds the call takes
    delay_effect: bool = True  # a delay that outlasts the timeout: whether AWS acted before the kill
    # Chance that each call is where the attempt dies (timeout or crash, before or after AWS acted,
    # drawn by the model's seeded random): kills spread over the calls an attempt really makes.
    hazard: float = 0.0


NO_FAULT = AttemptPlan()


@dataclass(frozen=True)
class Function:
    name: str
    handler: Callable[[Any, Any], Any]
    timeout: float = EVENT_HANDLER_TIMEOUT_SECONDS
    retry_delays: tuple[float, ...] = RETRY_DELAYS_SECONDS
    max_event_age: float = MAX_EVENT_AGE_SECONDS


@dataclass
class Attempt:
    delivery: Delivery
    number: int  # 0: the first attempt; 1, 2: Lambda's retries
    started: datetime
    deadline: datetime
    plan: AttemptPlan
    calls: list[str] = field(default_factory=list)  # the step label of each AWS call, in order
    dead: bool = False
    killed_at: str | None = None
    outcome: str = ""
    published: set[str] = field(default_factory=set)  # transitions whose Publish SNS accepted
    completed: set[str] = field(default_factory=set)  # ledger keys this attempt marked done


@dataclass
class Delivery:
    """One asynchronous invocation: an event Lambda received, with its attempts."""

    number: int
    function: Function
    event: Any
    queued_at: datetime
    concurrent: bool = False  # a duplicate started while another attempt of the same event ran
    attempts: list[Attempt] = field(default_factory=list)
    result: Any = None
    dead_lettered: bool = False
    claimed: set[str] = field(default_factory=set)  # ledger keys its attempts claimed (PutItem succeeded)


@dataclass
class Observed:
    """What the hooks saw reach AWS, and what the model did."""

    attempts: int = 0
    retries: int = 0
    calls: int = 0
    kills: Counter[str] = field(default_factory=Counter)  # by step label
    stops: Counter[str] = field(default_factory=Counter)  # StopTrainingJob calls SageMaker accepted, per job
    publishes: Counter[str] = field(default_factory=Counter)  # Publish calls SNS accepted, per transition
    takeovers: int = 0  # claims granted over another attempt's expired lease
    busy_waits: int = 0  # polls of the responder's busy wait
    busy: int = 0  # attempts that gave up with TransitionBusy
    concurrent_duplicates: int = 0
    # Transitions an attempt published and was then killed before marking done (how often): the retry
    # that takes the transition over cannot know that SNS accepted the first publish, and publishes again.
    exposed: Counter[str] = field(default_factory=Counter)
    ledger: dict[str, str] = field(default_factory=dict)  # the ledger's keys as the accepted calls left them


class VirtualClock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def utcnow(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def at_least(self, when: datetime) -> None:
        self.now = max(self.now, when)


class Context:
    """The Lambda context the handlers and Powertools read; the remaining time follows the clock."""

    function_version = "$LATEST"
    memory_limit_in_mb = 256

    def __init__(self, clock: VirtualClock, attempt: Attempt) -> None:
        self._clock = clock
        self._deadline = attempt.deadline
        self.function_name = attempt.delivery.function.name
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"
        self.aws_request_id = f"delivery-{attempt.delivery.number}-attempt-{attempt.number}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - self._clock.now).total_seconds() * 1000))


FIRST_STOP_WRITE = "PutItem stop record + lease"  # the stop's one write before StopTrainingJob


def step_label(operation: str, params: Mapping[str, Any]) -> str:
    """An AWS call named for what it does to the guard: `PutItem claim`, `DeleteItem release`, ..."""
    if operation not in ("PutItem", "UpdateItem", "DeleteItem", "GetItem"):
        return operation
    key = _ledger_key(params)
    if key.startswith(PRICE_KEY_PREFIX):  # the state table's cache of list prices
        return f"{operation} price"
    if key.startswith("meta#"):  # the state table's flags (the mutes' markers written once)
        return f"{operation} flag"
    if key.startswith(MUTES_KEY_PREFIX):  # the job's mutes (snoozes, exemptions), read once per event
        return f"{operation} mutes"
    if key.startswith(LOG_STATE_PREFIX):  # the log path: a stream's rule state
        return f"{operation} log state"
    if key.startswith(LOG_JOB_PREFIX):  # ... and its job's streams and problems reported
        return f"{operation} log job"
    if key.startswith("stop#"):
        return _stop_item_label(operation, params)
    return {"PutItem": "PutItem claim", "UpdateItem": "UpdateItem complete", "DeleteItem": "DeleteItem release"}.get(
        operation, operation
    )


def _stop_item_label(operation: str, params: Mapping[str, Any]) -> str:
    """A call on a job's stop item: its record (the stop's one write, the longer way's), its mutes' marker, ..."""
    if operation == "PutItem" and "lease_until" in (params.get("Item") or {}):
        return FIRST_STOP_WRITE
    if operation != "UpdateItem":
        return {"DeleteItem": "DeleteItem drop stop record"}.get(operation, f"{operation} stop record")
    expression = str(params.get("UpdateExpression"))
    names = set((params.get("ExpressionAttributeNames") or {}).values())
    if expression == "REMOVE lease_until":
        return "UpdateItem release stop lease"
    labels = {
        "stopped_at": "UpdateItem stop record",
        "in_force_until": "UpdateItem mute marker",
    }
    for name, label in labels.items():
        if name in names:
            return label
    if expression.startswith("REMOVE"):
        return "UpdateItem drop stop record"
    if "ADD" in expression:
        return "UpdateItem fold"
    return "UpdateItem record spend" if "spend_avoided_usd" in expression else "UpdateItem confirm stop"


def _ledger_key(params: Mapping[str, Any]) -> str:
    item = params.get("Item") or params.get("Key") or {}
    return str(item.get(_PK, {}).get("S", ""))


def published_transition(params: Mapping[str, Any]) -> str:
    """The transition key of a notification, from its Publish request (the `sqs` body is the document)."""
    document = json.loads(json.loads(params["Message"])["sqs"])
    return str(document["transition"])


class LambdaModel:
    def __init__(
        self,
        clock: VirtualClock,
        *,
        planner: Callable[[Delivery, int], AttemptPlan] | None = None,
        jitter_seconds: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.clock = clock
        self.planner = planner or (lambda delivery, number: NO_FAULT)
        self.jitter_seconds = jitter_seconds
        self.rng = random.Random(seed)
        self.observed = Observed()
        self.deliveries: list[Delivery] = []
        self.on_stop: Callable[[str], None] | None = None  # told of every stop SageMaker accepted
        self._queue: list[tuple[datetime, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._stack: list[Attempt] = []

    # --- set-up ----------------------------------------------------------------------------------
    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Hook the guard's clients and its clock (inside an active Emulation)."""
        monkeypatch.setattr(guard_clock, "utcnow", self.clock.utcnow)
        for service in SERVICES:
            events = wiring.root().client(service).meta.events
            events.register_first(f"before-parameter-build.{service}", self._before_call)
            events.register_first(f"after-call.{service}", self._after_call)

    # --- driving -----------------------------------------------------------------------------------
    def schedule(self, at: datetime, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (at, next(self._seq), action))

    def invoke(self, function: Function, event: Any, *, at: datetime) -> Delivery:
        """An asynchronous invocation of `function` with `event`, queued at `at`."""
        delivery = Delivery(len(self.deliveries), function, event, queued_at=at)
        self.deliveries.append(delivery)
        self.schedule(at, lambda: self._attempt(delivery, 0))
        return delivery

    def run(self, until: datetime | None = None) -> None:
        """Everything scheduled (retries included), in the order of its virtual time."""
        while self._queue and (until is None or self._queue[0][0] <= until):
            at, _, action = heapq.heappop(self._queue)
            self.clock.at_least(at)
            action()

    @property
    def current(self) -> Attempt | None:
        return self._stack[-1] if self._stack else None

    # --- attempts ----------------------------------------------------------------------------------
    def _attempt(self, delivery: Delivery, number: int) -> None:
        now = self.clock.now
        attempt = Attempt(
            delivery,
            number,
            started=now,
            deadline=now + timedelta(seconds=delivery.function.timeout),
            plan=self.planner(delivery, number),
        )
        delivery.attempts.append(attempt)
        self.observed.attempts += 1
        self._stack.append(attempt)
        try:
            with handler_output_to_stderr():
                delivery.result = delivery.function.handler(delivery.event, Context(self.clock, attempt))
            attempt.outcome = "ok"
        except Killed:
            attempt.outcome = f"killed at {attempt.killed_at}"
            self.observed.exposed.update(attempt.published - attempt.completed)
        except TransitionBusy as exc:
            attempt.outcome = f"busy: {exc}"
            self.observed.busy += 1
        except Exception as exc:  # noqa: BLE001 - any function error: Lambda retries it, as the model must
            attempt.outcome = f"error: {type(exc).__name__}: {exc}"
        finally:
            self._stack.pop()
        if attempt.outcome != "ok":
            self._failed(delivery, attempt)

    def _failed(self, delivery: Delivery, attempt: Attempt) -> None:
        delays = delivery.function.retry_delays
        if attempt.number < len(delays):
            jitter = self.rng.uniform(-self.jitter_seconds, self.jitter_seconds)
            at = self.clock.now + timedelta(seconds=delays[attempt.number] + jitter)
            if (at - delivery.queued_at).total_seconds() <= delivery.function.max_event_age:
                self.observed.retries += 1
                self.schedule(at, lambda: self._attempt(delivery, attempt.number + 1))
                return
        delivery.dead_lettered = True

    def _duplicate(self, of: Attempt) -> None:
        """SageMaker sent the event twice: the second delivery runs now, while `of` is inside a call."""
        self.observed.concurrent_duplicates += 1
        original = of.delivery
        duplicate = Delivery(
            len(self.deliveries), original.function, copy.deepcopy(original.event), self.clock.now, concurrent=True
        )
        self.deliveries.append(duplicate)
        self._attempt(duplicate, 0)

    def _kill(self, attempt: Attempt, label: str) -> None:
        attempt.dead = True
        attempt.killed_at = label
        self.observed.kills[label] += 1
        raise Killed(label)

    def sleep(self, seconds: float) -> None:
        """The responder's busy wait (`Emulation(sleep=model.sleep)`): virtual time passes; the timeout may strike."""
        self.observed.busy_waits += 1
        self.clock.advance(seconds)
        attempt = self.current
        if attempt is not None and self.clock.now >= attempt.deadline:
            self.clock.now = attempt.deadline
            self._kill(attempt, "busy wait")

    # --- hooks -------------------------------------------------------------------------------------
    def call(
        self, label: str, act: Callable[[], _T], *, accepted: Callable[[_T], bool] = lambda _: True, subject: str = ""
    ) -> _T:
        """One AWS call the unit tier's fakes stand for (`act`), under the plan: the same hooks as a botocore call.

        `accepted`: whether AWS would have accepted it (a conditional write's condition held); `subject`: the job a
        StopTrainingJob stops, the transition a Publish announces, the ledger key a ledger call writes."""
        attempt = self.current
        if attempt is None:
            return act()
        kill_after = self._before(attempt, label)
        try:
            result = act()
        except Exception:  # refused (a condition failed): it changed nothing at AWS
            if kill_after:
                self._kill(attempt, label)
            raise
        if accepted(result):
            self._accepted(attempt, label, subject)
        if kill_after:
            self._kill(attempt, label)
        return result

    def _before_call(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        attempt = self.current
        if attempt is None:
            return  # not inside an attempt (set-up through the guard's clients)
        label = step_label(model.name, params)
        context.update(tg_attempt=attempt, tg_label=label, tg_params=params, tg_kill_after=self._before(attempt, label))

    def _before(self, attempt: Attempt, label: str) -> bool:
        """Number the call, run the plan's duplicate, delay or kill; True: kill the attempt once AWS acted."""
        if attempt.dead:
            raise Killed(f"after the kill: {label}")  # a dead attempt's call never reaches AWS
        attempt.calls.append(label)
        step = len(attempt.calls)
        self.observed.calls += 1
        if attempt.plan.duplicate_at == step:
            self._duplicate(attempt)
        kill = attempt.plan.kill if attempt.plan.kill and attempt.plan.kill.step == step else None
        if kill is None and attempt.plan.hazard and self.rng.random() < attempt.plan.hazard:
            kill = Kill(step, effect=self.rng.random() < 0.5, slow=self.rng.random() < 0.5)
        delay = attempt.plan.delays.get(step, 0.0)
        if delay:
            self.clock.advance(delay)
        if self.clock.now >= attempt.deadline:  # this call (or the duplicate's wait) outlasted the timeout
            kill = Kill(step, effect=attempt.plan.delay_effect if delay else False, slow=True)
        if kill is None:
            return False
        if kill.slow:
            self.clock.now = max(self.clock.now, attempt.deadline)
        if not kill.effect:
            self._kill(attempt, label)
        return True

    def _after_call(self, http_response: Any, model: Any, context: dict[str, Any], **_: Any) -> None:
        attempt: Attempt | None = context.get("tg_attempt")
        if attempt is None:
            return
        params: dict[str, Any] = context["tg_params"]
        label: str = context["tg_label"]
        if http_response.status_code < 300:
            if model.name == "StopTrainingJob":
                subject = str(params["TrainingJobName"])
            elif model.name == "Publish":
                subject = published_transition(params)
            else:
                subject = _ledger_key(params)
            self._accepted(attempt, label, subject)
        if context.get("tg_kill_after"):
            self._kill(attempt, label)

    def _accepted(self, attempt: Attempt, label: str, subject: str) -> None:
        """What AWS accepted: stops, notifications and the ledger's claims as they happened."""
        if label == "StopTrainingJob":
            self.observed.stops[subject] += 1
            if self.on_stop is not None:
                self.on_stop(subject)
        elif label == "Publish":
            self.observed.publishes[subject] += 1
            attempt.published.add(subject)
        elif label == "UpdateItem complete":
            attempt.completed.add(subject)
            self.observed.ledger[subject] = "done"
        elif label == "DeleteItem release":
            self.observed.ledger.pop(subject, None)
        elif label == "PutItem claim":
            attempt.delivery.claimed.add(subject)
            if self.observed.ledger.get(subject) == "in_progress":  # granted over an expired lease
                self.observed.takeovers += 1
            self.observed.ledger[subject] = "in_progress"
