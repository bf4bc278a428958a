"""Campaign: time. Lambda's timeouts and retries, and SageMaker's concurrent duplicates, on a virtual clock.

The real job-events, log-events and sweeper handlers run under a model of Lambda's asynchronous
invocation (`lambda_model.py`: a 30 s timeout that kills an attempt where it stands, running none of its
`except`/`finally` code; retries 1 and 2 minutes later; the maximum event age; then dead-lettered).
The every-call matrices run over the unit tier's fakes (`fake_world.py`: each port call is the one AWS call
its adapter makes); the emulation (moto) runs every scenario and a sample of the kills and duplicates, each
ending there as on the fakes, the seeded fleets, and the cases that turn on AWS's own behaviour.

- Every kill point: each AWS call of a reaction hangs until the timeout, never reaching AWS or after AWS
  acted on it, for each kind of event (a stop, one found by DescribeTrainingJob, a notify-only finding,
  a rule error, two rules at once, a finding for a job that had ended, the end of a job the guard
  stopped, a failure, a per-job alarm).
- A duplicate delivery started inside each call of an attempt, that attempt finishing or killed later.
- The retry timing, the maximum event age and a redrive; a dead-lettered transition taken over by the
  next sweep.
- A seeded fleet: random kills (timeouts and crashes), slow calls, concurrent duplicates, retries with
  jitter, the sweeper on its schedule (and killed too), SageMaker finishing the guard's stops.

The promise checked, as set relations over what reached AWS: a transition is acted on and announced
once, compared with the same event handled without faults (same notification, same outcome, at most one
effective `StopTrainingJob` per job, same tags and alarms); or its event was dead-lettered (redrivable).
A transition that follows the guard's own stop (a second rule's error in the stop's event, the "stopped"
change of the guard's stop) is folded into the stop: done with the outcome "folded", never announced, with
or without faults.
Nothing is left "in_progress" unless a dead-lettered delivery claimed it. One exception is tolerated,
counted and pinned by its own test: an attempt killed after SNS accepted its Publish and before the
ledger recorded it is announced once more, with the same transition id, by the retry that takes the
transition over. The defects the campaign found are tests at the end of the one-event section.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

import pytest

from tests.campaign.fake_world import FakeWorld
from tests.campaign.lambda_model import (
    FIRST_STOP_WRITE,
    NO_FAULT,
    SWEEPER_TIMEOUT_SECONDS,
    AttemptPlan,
    Delivery,
    Function,
    Kill,
    LambdaModel,
    VirtualClock,
)
from tests.campaign.streams import JobPlan, plan_fleet
from tests.helpers import NOW, load_event, readme_campaign_row, rule_status
from tests.log_deliveries import MNIST_DEFINITIONS, document, events, plan_log_fleet, subscription
from training_guard import contract
from training_guard.adapters import clock as guard_clock
from training_guard.adapters.log_state import state_key
from training_guard.config.model import Action, GuardConfig, RulePolicy
from training_guard.domain.policy import transition_key
from training_guard.handlers import wiring
from training_guard.services.log_watch import decode
from training_guard_local.emulator import ACCOUNT, REGION, TABLE, Emulation, handler_output_to_stderr

SEED = 10
CONFIG = GuardConfig(rules=RulePolicy(actions={"LossNotDecreasing": Action.NOTIFY}))
ALARM_TAGS = {"team": "vision", f"{contract.JOB_ALARM_TAG_PREFIX}train:loss": "max above 5"}
_ids = itertools.count()


def job_event(
    job: str, status: str, rules: list[dict[str, Any]] | None, *, tags: dict[str, str] | None = None, **detail: Any
) -> dict[str, Any]:
    """A state-change event of `job` (SageMaker's shape, from the recorded fixture)."""
    event = load_event("vanishing_gradient_issues_found")
    arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{job}"
    event["id"] = f"{job}-{status.lower()}-{next(_ids)}"
    event["resources"] = [arn]
    event["detail"].update(
        TrainingJobName=job,
        TrainingJobArn=arn,
        TrainingJobStatus=status,
        SecondaryStatus="Training" if status == "InProgress" else status,
        Tags=tags or {"team": "vision"},
        **detail,
    )
    if rules is None:
        event["detail"].pop("DebugRuleEvaluationStatuses")
    else:
        event["detail"]["DebugRuleEvaluationStatuses"] = rules
    return event


def issues_found(rule: str = "VanishingGradient") -> dict[str, Any]:
    return rule_status(rule, "IssuesFound", f"RuleEvaluationConditionMet: {rule} at step 500")


def _carries(delivery: Delivery, transition: str) -> bool:
    return transition in transitions_of(delivery.event)


def transitions_of(event: dict[str, Any]) -> set[str]:
    """The transitions an event of the campaign's fleet announces (for the dead-letter accounting)."""
    detail = event["detail"]
    job = detail["TrainingJobName"]
    keys = {
        transition_key(job, "debugger", r["RuleConfigurationName"], r["RuleEvaluationStatus"])
        for r in detail.get("DebugRuleEvaluationStatuses") or ()
        if r["RuleEvaluationStatus"] in ("IssuesFound", "Error")
    }
    if detail["TrainingJobStatus"] in ("Failed", "Stopped"):
        keys.add(transition_key(job, "job", "status", detail["TrainingJobStatus"]))
    return keys


class World(Protocol):
    """What the campaign asks of AWS: the emulation's answers (moto), or the unit tier's fakes' (`fake_world.py`)."""

    def put_job(self, detail: Mapping[str, Any]) -> None: ...

    def notifications(self) -> list[dict[str, Any]]: ...

    def job_status(self, name: str) -> str | None: ...

    def finish_stopping(self, name: str) -> bool: ...

    def job_tags(self, name: str) -> dict[str, str]: ...

    def alarm_names(self) -> list[str]: ...

    def ledger_item(self, key: str) -> tuple[str, str | None] | None:
        """(state, outcome) of a ledger key, None when there is no item."""
        ...

    def log_state_version(self, stream: str) -> int:
        """The version of the stream's saved state (0: never saved)."""
        ...


class EmulatedWorld:
    def __init__(self, aws: Emulation) -> None:
        self.aws = aws

    def put_job(self, detail: Mapping[str, Any]) -> None:
        self.aws.put_job(detail)

    def notifications(self) -> list[dict[str, Any]]:
        return self.aws.notifications()

    def job_status(self, name: str) -> str | None:
        return self.aws.job_status(name)

    def finish_stopping(self, name: str) -> bool:
        return self.aws.finish_stopping(name)

    def job_tags(self, name: str) -> dict[str, str]:
        return self.aws.job_tags(name)

    def alarm_names(self) -> list[str]:
        return self.aws.alarm_names()

    def ledger_item(self, key: str) -> tuple[str, str | None] | None:
        table = self.aws.client("dynamodb")
        item = table.get_item(TableName=TABLE, Key={contract.TABLE_PARTITION_KEY: {"S": key}}).get("Item")
        return None if item is None else (item["state"]["S"], item.get("outcome", {}).get("S"))

    def log_state_version(self, stream: str) -> int:
        key = {contract.TABLE_PARTITION_KEY: {"S": state_key(stream)}}
        got = self.aws.client("dynamodb").get_item(TableName=TABLE, Key=key)
        return int(got.get("Item", {}).get("version", {}).get("N", 0))


@dataclass
class Run:
    world: World
    clock: VirtualClock
    model: LambdaModel
    job_events: Function
    sweeper: Function
    log_events: Function

    @property
    def aws(self) -> Emulation:
        """The emulation, for the cases that run on moto only."""
        assert isinstance(self.world, EmulatedWorld), "a case of the emulation's tier"
        return self.world.aws

    def deliver(self, event: dict[str, Any], *, function: Function | None = None) -> Delivery:
        delivery = self.model.invoke(function or self.job_events, event, at=self.clock.now)
        self.model.run()
        return delivery

    def sweep(self) -> Delivery:
        return self.deliver({"source": "aws.events", "detail-type": "Scheduled Event"}, function=self.sweeper)


def _run(world: World, clock: VirtualClock, model: LambdaModel) -> Run:
    """The three functions the campaign invokes, over `world`."""
    with handler_output_to_stderr():  # the handlers' loggers bind stdout at their first import
        from training_guard.handlers import job_events, log_events, sweeper
    return Run(
        world,
        clock,
        model,
        Function("job-events", job_events.handler),
        Function("sweeper", sweeper.handler, timeout=SWEEPER_TIMEOUT_SECONDS),
        Function("log-events", log_events.handler),
    )


@contextlib.contextmanager
def emulated(monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    clock = VirtualClock(NOW)
    model = LambdaModel(clock, seed=SEED)
    with Emulation(CONFIG, sleep=model.sleep) as aws:
        model.install(monkeypatch)
        yield _run(EmulatedWorld(aws), clock, model)


@contextlib.contextmanager
def faked(monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    """The same handlers and model over the unit tier's fakes (`fake_world.py`): no AWS call, no moto."""
    clock = VirtualClock(NOW)
    model = LambdaModel(clock, seed=SEED)
    world = FakeWorld(model, CONFIG)
    # inside a case on the emulation too (its root and clock back at the end: the two tiers compared)
    with monkeypatch.context() as patched, world.installed():
        patched.setattr(guard_clock, "utcnow", clock.utcnow)
        yield _run(world, clock, model)


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    with emulated(monkeypatch) as run:
        yield run


@pytest.fixture
def unit_run(monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    with faked(monkeypatch) as run:
        yield run


# --- one event, one case ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    name: str
    prepare: Callable[[Run, str], dict[str, Any]]  # SageMaker's state (and history); returns the event
    outcomes: dict[str, str]  # what the fault-free run announces: kind -> outcome
    stops: int = 0
    alarms: int = 0
    folded: frozenset[str] = frozenset()  # the kinds the fault-free run folds into the guard's stop
    log_path: bool = False  # the event is a CloudWatch Logs subscription delivery (the log-events function)


def _stop(run: Run, job: str) -> dict[str, Any]:
    event = job_event(job, "InProgress", [issues_found()])
    run.world.put_job(event["detail"])
    return event


def _stop_described(run: Run, job: str) -> dict[str, Any]:
    run.world.put_job(job_event(job, "InProgress", [issues_found()])["detail"])
    return job_event(job, "InProgress", None)  # no rule lists: the guard asks DescribeTrainingJob


def _notify_only(run: Run, job: str) -> dict[str, Any]:
    event = job_event(job, "InProgress", [issues_found("LossNotDecreasing")])
    run.world.put_job(event["detail"])
    return event


def _rule_error(run: Run, job: str) -> dict[str, Any]:
    event = job_event(job, "InProgress", [rule_status("ExplodingTensor", "Error", "No debugging data was saved")])
    run.world.put_job(event["detail"])
    return event


def _two_rules(run: Run, job: str) -> dict[str, Any]:
    rules = [issues_found(), rule_status("ExplodingTensor", "Error", "No debugging data was saved")]
    event = job_event(job, "InProgress", rules)
    run.world.put_job(event["detail"])
    return event


def _late_finding(run: Run, job: str) -> dict[str, Any]:
    """The finding's event arrives after the job completed (SageMaker refuses the stop)."""
    event = job_event(job, "InProgress", [issues_found()])
    run.world.put_job(event["detail"])
    run.world.put_job(job_event(job, "Completed", [issues_found()])["detail"])
    return event


def _stopped_by_guard(run: Run, job: str) -> dict[str, Any]:
    run.deliver(_stop(run, job))
    assert run.world.finish_stopping(job)
    return job_event(job, "Stopped", [issues_found()])


def _failed(run: Run, job: str) -> dict[str, Any]:
    event = job_event(job, "Failed", [], FailureReason="AlgorithmError: CUDA out of memory")
    run.world.put_job(event["detail"])
    return event


def _job_alarm(run: Run, job: str) -> dict[str, Any]:
    event = job_event(job, "InProgress", [rule_status("VanishingGradient", "InProgress")], tags=ALARM_TAGS)
    run.world.put_job(event["detail"])
    return event


SCENARIOS = (
    Scenario("stop", _stop, {"issues_found": "stopped"}, stops=1),
    Scenario("stop-described", _stop_described, {"issues_found": "stopped"}, stops=1),
    Scenario("notify-only", _notify_only, {"issues_found": "notified"}),
    Scenario("rule-error", _rule_error, {"rule_error": "notified"}),
    # The rule error is decided after the stop took effect (the event lists it second): one message, the stop.
    Scenario("two-rules", _two_rules, {"issues_found": "stopped"}, stops=1, folded=frozenset({"rule_error"})),
    Scenario("late-finding", _late_finding, {"issues_found": "already_ended"}),
    # The end of a job the guard stopped is the stop already announced: no message at all.
    Scenario("stopped-by-guard", _stopped_by_guard, {}, folded=frozenset({"job_stopped"})),
    Scenario("failed", _failed, {"job_failed": "notified"}),
    Scenario("job-alarm", _job_alarm, {}, alarms=1),
)
SCENARIO = {s.name: s for s in SCENARIOS}


@dataclass
class Case:
    """What one event did to one job, observed at AWS after every retry ran."""

    job: str
    deliveries: list[Delivery]
    notes: list[dict[str, Any]]  # the notification documents SNS delivered
    stops: int  # StopTrainingJob calls SageMaker accepted (for this event)
    status: str | None
    attributed: bool  # the job carries the guard's stopped-by tag
    alarms: int
    ledger: dict[str, str | None]  # state of every key the deliveries claimed
    exposed: Counter[str]
    folded: set[str] = field(default_factory=set)  # claimed keys done with the outcome "folded"

    @property
    def dead_lettered(self) -> bool:
        return any(d.dead_lettered for d in self.deliveries)

    @property
    def claimed_by_dead(self) -> set[str]:
        return {key for d in self.deliveries if d.dead_lettered for key in d.claimed}

    def norm(self, key: str) -> str:
        return key.replace(f"#{self.job}#", "#{job}#")


def no_price_remembered() -> None:
    """The next delivery starts in a container that remembers no price (else the calls of a case would depend
    on the cases before it); moto has no Price List API, so each lookup reads the state table's cache, then
    falls back to the shipped table."""
    prices = wiring.root().price_list
    assert wiring.root().responder.prices is prices
    prices.forget()


def run_case(run: Run, scenario: Scenario, plan: AttemptPlan, *, function: Function | None = None) -> Case:
    """`scenario`'s event delivered once, its first attempt under `plan`, then Lambda's retries."""
    job = f"{scenario.name}-{next(_ids)}"
    event = scenario.prepare(run, job)
    run.world.notifications()  # what the preparation announced is not this case's
    stops_before = run.model.observed.stops[job]
    first = len(run.model.deliveries)
    run.model.planner = lambda delivery, number: plan if (delivery.number, number) == (first, 0) else NO_FAULT
    no_price_remembered()
    try:
        run.deliver(event, function=function or (run.log_events if scenario.log_path else None))
    finally:
        run.model.planner = lambda delivery, number: NO_FAULT
    return observe(run, job, run.model.deliveries[first:], stops_before)


def observe(run: Run, job: str, deliveries: list[Delivery], stops_before: int = 0) -> Case:
    notes = run.world.notifications()
    assert {n["job"]["name"] for n in notes} <= {job}
    keys = {key for d in deliveries for key in d.claimed}
    ledger: dict[str, str | None] = {}
    folded = set()
    for key in keys:
        item = run.world.ledger_item(key)
        ledger[key] = item[0] if item else None
        if item and item[1] == "folded":
            folded.add(key)
    return Case(
        job=job,
        deliveries=deliveries,
        notes=notes,
        stops=run.model.observed.stops[job] - stops_before,
        status=run.world.job_status(job),
        attributed=contract.TAG_STOPPED_BY in run.world.job_tags(job),
        alarms=sum(a.startswith(f"{contract.JOB_ALARM_PREFIX}{job}-") for a in run.world.alarm_names()),
        ledger=ledger,
        exposed=Counter({t: n for t, n in run.model.observed.exposed.items() if t.startswith(f"t#{job}#")}),
        folded=folded,
    )


def by_guard(note: dict[str, Any]) -> bool:
    return str(note["reason"]).startswith("by Training Guard")


def violations(case: Case, reference: Case) -> list[str]:
    """How `case` differs from the fault-free `reference`, beyond what a dead letter or the publish window allows."""
    found: list[str] = []
    dead = case.dead_lettered
    published = Counter(case.norm(n["transition"]) for n in case.notes)
    expected = {reference.norm(n["transition"]): (n["outcome"], by_guard(n)) for n in reference.notes}
    exposed = Counter({case.norm(t): n for t, n in case.exposed.items()})
    if case.stops > 1:
        found.append(f"StopTrainingJob took effect {case.stops} times")
    if not dead and case.stops != reference.stops:
        found.append(f"StopTrainingJob took effect {case.stops} times, without faults {reference.stops}")
    for transition in expected:
        if not (0 if dead else 1) <= published[transition] <= 1 + exposed[transition]:
            found.append(f"{transition} announced {published[transition]} times")
    for transition in published.keys() - expected.keys():
        found.append(f"{transition} announced, but not without faults")
    for note in case.notes:
        got, want = (note["outcome"], by_guard(note)), expected.get(case.norm(note["transition"]))
        if want is not None and got != want:
            found.append(f"{case.norm(note['transition'])} announced as {got}, without faults {want}")
    if case.attributed != reference.attributed:
        found.append(f"tagged stopped-by-guard: {case.attributed}, without faults {reference.attributed}")
    if not dead and (case.status, case.alarms) != (reference.status, reference.alarms):
        found.append(
            f"job {case.status} with {case.alarms} alarms, without faults {reference.status}, {reference.alarms}"
        )
    left = {k for k, state in case.ledger.items() if state == "in_progress"} - case.claimed_by_dead
    if left:
        found.append(f"left in progress with no dead letter: {sorted(case.norm(k) for k in left)}")
    folded = {case.norm(k) for k in case.folded}
    if not dead and folded != {reference.norm(k) for k in reference.folded}:
        found.append(f"folded {sorted(folded)}, without faults {sorted(reference.norm(k) for k in reference.folded)}")
    done = {case.norm(k) for k, state in case.ledger.items() if state == "done" and k.startswith("t#")}
    if done - published.keys() - folded:
        found.append(f"marked done, never announced nor folded: {sorted(done - published.keys() - folded)}")
    return found


def reference_of(run: Run, scenario: Scenario) -> Case:
    """The scenario without faults, checked against what it is meant to do (so no comparison is vacuous)."""
    reference = run_case(run, scenario, NO_FAULT)
    assert {n["kind"]: n["outcome"] for n in reference.notes} == scenario.outcomes, reference.notes
    assert len(reference.notes) == len(scenario.outcomes)
    assert (reference.stops, reference.alarms) == (scenario.stops, scenario.alarms)
    assert not reference.dead_lettered
    assert all(state == "done" for state in reference.ledger.values())
    assert {KINDS[k.rsplit("#", 1)[1]] for k in reference.folded} == scenario.folded
    assert len(reference.folded) == len(scenario.folded)
    return reference


def describe(kill: Kill, calls: list[str]) -> str:
    effect = "after AWS acted" if kill.effect else "before it reached AWS"
    return f"{'timeout' if kill.slow else 'crash'} at call {kill.step} ({calls[kill.step - 1]}) {effect}"


# Defects the campaign found, now fixed: (scenario, the killed call, whether AWS acted on it). The
# enumeration runs them like every other case; the tests below run exactly these, by name.
STOP_RECORD_TAKEN_FOR_A_STOP = {
    ("late-finding", FIRST_STOP_WRITE, True),
    ("late-finding", "StopTrainingJob", False),
    ("late-finding", "StopTrainingJob", True),
    ("late-finding", "DeleteItem drop stop record", False),
}
GUARD_STOP_SEEN_AS_ENDED = {
    ("stop-described", "StopTrainingJob", True),
    ("stop-described", "AddTags", False),
    ("stop-described", "AddTags", True),
    ("stop-described", "Publish", False),
    ("stop-described", "Publish", True),
    ("stop-described", "UpdateItem complete", False),
}
KNOWN_DEFECTS: frozenset[tuple[str, str, bool]] = frozenset()  # none left out of the enumeration


# Calls that change nothing at AWS. A read killed after AWS answered it leaves AWS as it was and its answer dies with
# the attempt, so it is the same case as the read killed before it reached AWS: reads are killed once, every other
# call before and after AWS acted on it.
READS = ("Get", "Describe", "List", "Query", "Scan", "BatchGet")


def effects(label: str) -> tuple[bool, ...]:
    return (False,) if label.startswith(READS) else (False, True)


def kill_cases(run: Run, scenario: Scenario, *, only: set[tuple[str, str, bool]] | None = None) -> dict[str, list[str]]:
    """Every call of the scenario's reaction killed before and after it took effect (a read once): what went wrong."""
    reference = reference_of(run, scenario)
    calls = reference.deliveries[0].attempts[0].calls
    failures: dict[str, list[str]] = {}
    points = [(step, effect) for step in range(1, len(calls) + 1) for effect in effects(calls[step - 1])]
    keys = {(scenario.name, calls[step - 1], effect) for step, effect in points}
    wanted = {key for key in only or () if key[0] == scenario.name}
    assert wanted <= keys, f"not a kill point of {scenario.name} (a read is killed once): {wanted - keys}"
    for step, effect in points:
        key = (scenario.name, calls[step - 1], effect)
        if (key not in only) if only is not None else (key in KNOWN_DEFECTS):
            continue
        kill = Kill(step, effect=effect)
        case = run_case(run, scenario, AttemptPlan(kill=kill))
        assert case.deliveries[0].attempts[0].killed_at == calls[step - 1]
        assert not case.dead_lettered, (key, "one kill costs one retry, never a dead letter")
        if found := violations(case, reference):
            failures[f"{scenario.name}: {describe(kill, calls)}"] = found
    return failures


def figures_of(run: Run) -> dict[str, Any]:
    seen = run.model.observed
    results = [d.result for d in run.model.deliveries if isinstance(d.result, dict)]
    return {
        "attempts": seen.attempts,
        "kills": sum(seen.kills.values()),
        "kills_by_step": dict(sorted(seen.kills.items())),
        "retries": seen.retries,
        "takeovers": seen.takeovers,
        "busy_waits": seen.busy_waits,
        "busy_retried": seen.busy,
        "concurrent_duplicates": seen.concurrent_duplicates,
        "duplicates_ignored": sum(int(r.get("duplicates", 0)) for r in results),
        "dead_lettered": sum(d.dead_lettered for d in run.model.deliveries),
        "stops": sum(seen.stops.values()),
        "notifications": sum(seen.publishes.values()),
        "announced_again": sum(seen.exposed.values()),
    }


def test_a_kill_at_any_call_of_any_reaction_loses_nothing_and_doubles_nothing(
    unit_run: Run, figures: dict[str, Any]
) -> None:
    """On the unit tier's fakes (the emulation runs a sample of these kills, and every scenario, to the same end)."""
    run = unit_run
    failures = {k: v for scenario in SCENARIOS for k, v in kill_cases(run, scenario).items()}
    assert not failures, failures
    seen = run.model.observed
    # every kind of call was killed, the retries took the transitions over, the publish window was hit
    assert {
        "DescribeTrainingJob",
        "GetItem mutes",
        "GetItem stop record",
        "PutItem claim",
        FIRST_STOP_WRITE,
        "StopTrainingJob",
        "DeleteItem drop stop record",
        "AddTags",
        "PutMetricAlarm",
        "UpdateItem confirm stop",
        "GetItem price",
        "UpdateItem record spend",
        "UpdateItem fold",
        "Publish",
        "UpdateItem complete",
    } <= set(seen.kills)
    assert seen.takeovers > 0
    assert seen.exposed
    figures.update(cases=sum(seen.kills.values()), **figures_of(run))
    shown = readme_campaign_row("time")
    assert (
        f"{figures['cases']} cases, {figures['kills']} kills, {figures['takeovers']} takeovers, 0 lost, "
        f"{figures['dead_lettered']} dead-lettered" in shown
    ), shown


CONCURRENT = ("stop", "rule-error", "stopped-by-guard")


def test_a_duplicate_inside_any_call_waits_retries_and_the_lease_hands_over(
    unit_run: Run, figures: dict[str, Any]
) -> None:
    """SageMaker's second delivery starts while the first attempt is inside call N: it finds the claim
    busy, waits, gives up and is retried; the first attempt finishes, or is killed at a later call and
    its lease runs out before the retries come. On the unit tier's fakes (the emulation runs a sample)."""
    run = unit_run
    failures: dict[str, list[str]] = {}
    cases = 0
    for scenario in (SCENARIO[name] for name in CONCURRENT):
        reference = reference_of(run, scenario)
        calls = reference.deliveries[0].attempts[0].calls
        for at in range(1, len(calls) + 1):
            # Before the claim (at=1) the duplicate wins and the first attempt finds the transition done.
            # Later, the first attempt is killed at the duplicate's call (before and after it acted; a read
            # once) or at a later one.
            kills = [Kill(at, effect=False)] + [
                Kill(step, effect=True)
                for step in range(at, len(calls) + 1)
                if step > at or True in effects(calls[at - 1])
            ]
            for kill in [None, *(kills if at > 1 else [])]:
                case = run_case(run, scenario, AttemptPlan(duplicate_at=at, kill=kill))
                cases += 1
                assert len(case.deliveries) >= 2
                assert case.deliveries[1].concurrent
                where = f"{scenario.name}: duplicate at call {at} ({calls[at - 1]})"
                where += f", then {describe(kill, calls)}" if kill else ""
                assert not case.dead_lettered, where
                if found := violations(case, reference):
                    failures[where] = found
    assert not failures, failures
    seen = run.model.observed
    assert seen.busy > 0
    assert seen.busy_waits > 0
    assert seen.takeovers > 0
    figures.update(cases=cases, **figures_of(run))
    shown = readme_campaign_row("time")
    assert (
        f"duplicates started inside every call: {cases} cases, {seen.busy_waits} busy waits, {seen.busy} busy "
        "deliveries retried, 0 lost" in shown
    ), shown


def _call_number(run: Run, name: str) -> int:
    """The number of the stop scenario's call `name` (1-based, as a Kill counts): by name, so a call added
    before it (a read of the mutes, say) does not move a kill to another call."""
    return reference_of(run, SCENARIO["stop"]).deliveries[0].attempts[0].calls.index(name) + 1


def test_lambda_retries_a_killed_event_one_then_two_minutes_later_then_dead_letters_it(run: Run) -> None:
    """The model itself: attempt times, and a kill that leaves the claim behind (no release ran)."""
    first_write = _call_number(run, FIRST_STOP_WRITE)
    run.model.planner = lambda delivery, number: AttemptPlan(kill=Kill(first_write, effect=True))
    start = run.clock.now
    delivery = run.deliver(_stop(run, "always-killed"))
    assert [(a.started - start).total_seconds() for a in delivery.attempts] == [0, 30 + 60, 30 + 60 + 30 + 120]
    # the first attempt's one write took effect; each retry's is refused (the record is there) and killed after
    assert [a.killed_at for a in delivery.attempts] == [FIRST_STOP_WRITE] * 3
    assert delivery.dead_lettered
    case = observe(run, "always-killed", [delivery])
    # the stop comes before the transition's claim: nothing claimed, the stop record waits, with its lease, for the
    # sweep or a redrive (tests below)
    assert case.ledger == {}
    assert run.model.observed.takeovers == 0
    assert run.aws.job_status("always-killed") == "InProgress"
    assert case.notes == []
    assert case.stops == 0


def test_an_event_past_its_maximum_age_is_dead_lettered_and_a_redrive_finishes_it(
    run: Run, figures: dict[str, Any]
) -> None:
    aged = Function("job-events", run.job_events.handler, max_event_age=120)  # the API's minimum is 60 s
    stop = _call_number(run, "StopTrainingJob")
    run.model.planner = lambda delivery, number: AttemptPlan(kill=Kill(stop, effect=True))  # after the stop
    event = _stop(run, "aged")
    delivery = run.deliver(event, function=aged)
    run.model.planner = lambda delivery, number: NO_FAULT
    # the second retry would start 240 s after the event was queued: past 120 s, Lambda drops it
    assert len(delivery.attempts) == 2
    assert delivery.dead_lettered
    dead = observe(run, "aged", [delivery])
    assert dead.stops == 1
    assert dead.notes == []
    assert dead.ledger == {}  # killed after its stop, before the transition's claim (the stop comes first)
    # `training-guard redrive` hands the event back: the lease ran out, the redrive takes it over
    redriven = observe(run, "aged", [run.deliver(copy.deepcopy(event))], stops_before=1)
    assert [(n["kind"], n["outcome"]) for n in redriven.notes] == [("issues_found", "stopped")]
    assert redriven.stops == 0
    assert redriven.attributed
    assert list(redriven.ledger.values()) == ["done"]
    figures.update(attempts=len(delivery.attempts) + 1, dead_lettered=1, redriven=1, stops=1, notifications=1)


def test_the_next_sweep_takes_over_a_transition_whose_event_was_dead_lettered(run: Run) -> None:
    first_write = _call_number(run, FIRST_STOP_WRITE)
    run.model.planner = lambda delivery, number: AttemptPlan(kill=Kill(first_write, effect=True, slow=False))
    delivery = run.deliver(_stop(run, "swept"))  # each attempt crashes after its claim and stop record write
    run.model.planner = lambda delivery, number: NO_FAULT
    assert delivery.dead_lettered
    assert run.aws.job_status("swept") == "InProgress"
    run.clock.advance(5 * 60)
    sweep = run.sweep()
    assert sweep.attempts[-1].outcome == "ok", sweep.attempts[-1].outcome
    assert sweep.result["reconciled"]
    case = observe(run, "swept", [delivery, sweep])
    assert [(n["kind"], n["outcome"]) for n in case.notes] == [("issues_found", "stopped")]
    assert case.stops == 1
    assert case.attributed
    assert set(case.ledger.values()) == {"done"}


# --- defects the campaign found, fixed (each failed before the fix) --------------------------------
def test_a_killed_stop_of_a_job_that_had_ended_is_not_announced_as_a_stop(run: Run) -> None:
    assert kill_cases(run, SCENARIO["late-finding"], only=STOP_RECORD_TAKEN_FOR_A_STOP) == {}


def test_a_retry_that_finds_the_guards_stop_under_way_announces_the_stop(run: Run) -> None:
    assert kill_cases(run, SCENARIO["stop-described"], only=GUARD_STOP_SEEN_AS_ENDED) == {}


def test_a_stopped_event_that_takes_a_killed_stop_over_announces_the_stop(run: Run) -> None:
    job = "stopped-before-the-retry"
    publish = reference_of(run, SCENARIO["stop"]).deliveries[0].attempts[0].calls.index("Publish") + 1
    first = len(run.model.deliveries)
    run.model.planner = lambda d, n: (
        AttemptPlan(kill=Kill(publish, effect=False)) if (d.number, n) == (first, 0) else NO_FAULT
    )
    no_price_remembered()  # as in the reference, whose calls numbered the kill
    run.model.invoke(run.job_events, _stop(run, job), at=run.clock.now)  # killed at Publish, after the stop

    def sagemaker_stops_it() -> None:  # 45 s after the kill: after the 40 s lease, before the 60 s retry
        assert run.aws.finish_stopping(job)
        run.model.invoke(run.job_events, job_event(job, "Stopped", [issues_found()]), at=run.clock.now)

    run.model.schedule(run.clock.now + timedelta(seconds=30 + 45), sagemaker_stops_it)
    run.model.run()
    [note] = run.aws.notifications()
    assert (note["kind"], note["outcome"]) == ("issues_found", "stopped"), note["reason"]
    # the lifecycle change read the stop record the takeover confirmed: folded into the stop it announced
    case = observe(run, job, run.model.deliveries[first:])
    assert {case.norm(k) for k in case.folded} == {"t#{job}#job#status#Stopped"}


def test_a_kill_between_publish_and_complete_is_announced_again_with_the_same_transition_id(run: Run) -> None:
    """The one window the ledger cannot close: SNS Publish and DynamoDB UpdateItem are not one transaction,
    and SNS standard topics take no idempotency key. An attempt killed after SNS accepted the notification and
    before the ledger recorded it is announced once more by the retry that takes the transition over: never
    more, and with the same transition id, which the Slack notifier claims per channel (so Slack shows it once;
    e-mail and Q Developer show it twice). Stated in SECURITY.md's known limits."""
    scenario = SCENARIO["stop"]
    calls = reference_of(run, scenario).deliveries[0].attempts[0].calls
    publish = calls.index("Publish") + 1
    for kill in (Kill(publish, effect=True), Kill(publish + 1, effect=False)):  # the complete never reached DynamoDB
        case = run_case(run, scenario, AttemptPlan(kill=kill))
        assert sum(case.exposed.values()) == 1, describe(kill, calls)
        assert len(case.notes) == 2, describe(kill, calls)
        assert len({n["transition"] for n in case.notes}) == 1
        assert case.stops == 1


# --- a seeded fleet ----------------------------------------------------------------------------------
MIX_JOBS = 40
HAZARD = {"job-events": 0.1, "sweeper": 0.01}  # chance that each call is where the attempt dies
P_SLOW = 0.15  # share of attempts with one slow call (2..45 s: some outlast the timeout)
P_DUPLICATE = 0.2  # share of first attempts during which a concurrent duplicate starts
JITTER_SECONDS = 10.0
SWEEP_SECONDS = 5 * 60  # CONFIG.sweep_minutes
QUIET_AFTER = timedelta(minutes=30)  # then no more faults: the last sweeps run clean (liveness, not safety)
KINDS = {"IssuesFound": "issues_found", "Error": "rule_error", "Failed": "job_failed", "Stopped": "job_stopped"}


@dataclass
class Fleet:
    run: Run
    rng: random.Random
    plans: list[JobPlan]
    stopped_events: set[str] = field(default_factory=set)
    sweeps: list[Delivery] = field(default_factory=list)
    start: datetime = NOW

    def emit(self, event: dict[str, Any]) -> None:
        """SageMaker changes the job's state and sends the event, 1 to 3 times."""
        self.run.aws.put_job(event["detail"])
        for _ in range(self.rng.randint(1, 3)):
            at = self.run.clock.now + timedelta(seconds=self.rng.uniform(0, 3))
            self.run.model.invoke(self.run.job_events, copy.deepcopy(event), at=at)

    def stopped(self, job: str) -> None:
        """SageMaker finishes a stop the guard made (SIGTERM, up to 120 s) and reports it."""
        if job in self.stopped_events:
            return
        self.stopped_events.add(job)

        def finish() -> None:
            assert self.run.aws.finish_stopping(job)
            self.emit(job_event(job, "Stopped", [issues_found()], tags={"team": "fleet"}))

        self.run.model.schedule(self.run.clock.now + timedelta(seconds=self.rng.uniform(30, 120)), finish)

    def plan(self, delivery: Delivery, number: int) -> AttemptPlan:
        if self.run.clock.now >= self.start + QUIET_AFTER:
            return NO_FAULT
        rng = self.rng
        duplicate = delivery.function is self.run.job_events and not delivery.concurrent and number == 0
        return AttemptPlan(
            hazard=HAZARD[delivery.function.name],
            duplicate_at=rng.randint(1, 4) if duplicate and rng.random() < P_DUPLICATE else None,
            delays={rng.randint(1, 6): rng.uniform(2, 45)} if rng.random() < P_SLOW else {},
            delay_effect=rng.random() < 0.5,
        )

    def play(self) -> None:
        model = self.run.model
        self.start = self.run.clock.now
        model.jitter_seconds = JITTER_SECONDS
        model.planner = self.plan
        model.on_stop = self.stopped
        for plan in self.plans:
            at = self.start + timedelta(seconds=self.rng.uniform(0, 600))
            for event in plan.events:
                model.schedule(at, functools.partial(self.emit, event))
                at += timedelta(seconds=self.rng.uniform(20, 240))
        horizon = QUIET_AFTER + timedelta(minutes=20)
        for second in range(0, int(horizon.total_seconds()), SWEEP_SECONDS):
            sweep = {"source": "aws.events", "detail-type": "Scheduled Event", "id": f"sweep-{second}"}
            self.sweeps.append(model.invoke(self.run.sweeper, sweep, at=self.start + timedelta(seconds=second)))
        model.run()

    def expected(self) -> dict[str, str]:
        """transition -> kind: what the fleet's events announce without faults."""
        out: dict[str, str] = {}
        for plan in self.plans:
            for transition in [t for event in plan.events for t in transitions_of(event)]:
                out[transition] = KINDS[transition.rsplit("#", 1)[1]]
        return out

    def folded(self) -> set[str]:
        """What the fleet's events fold into the guard's stops: the end of each job the guard stopped."""
        return {transition_key(p.name, "job", "status", "Stopped") for p in self.plans if p.kind == "stop"}


def test_a_seeded_fleet_under_kills_slow_calls_duplicates_retries_and_sweeps(run: Run, figures: dict[str, Any]) -> None:
    fleet = Fleet(run, random.Random(SEED), plan_fleet(MIX_JOBS, SEED))
    fleet.play()
    seen = run.model.observed
    notes = run.aws.notifications()
    published = Counter(n["transition"] for n in notes)
    assert published == seen.publishes  # the hooks saw exactly what SNS delivered
    dead = [d for d in run.model.deliveries if d.dead_lettered]
    dead_transitions = {t for d in dead if d.function is run.job_events for t in transitions_of(d.event)}
    expected = fleet.expected()
    items = run.aws.client("dynamodb").scan(TableName=TABLE)["Items"]
    states = {i[contract.TABLE_PARTITION_KEY]["S"]: i.get("state", {}).get("S") for i in items}
    folded = {i[contract.TABLE_PARTITION_KEY]["S"] for i in items if i.get("outcome", {}).get("S") == "folded"}

    # every job that should stop was stopped, exactly once (the sweeps recover what was dead-lettered)
    assert dict(seen.stops) == {p.name: 1 for p in fleet.plans if p.kind == "stop"}
    # nothing announced that should not be; once more only for each attempt killed in the publish window
    assert set(published) <= set(expected)
    assert all(n <= 1 + seen.exposed[t] for t, n in published.items())
    # every transition announced, unless its event was dead-lettered: findings on running jobs always
    # (the sweeper reconciles them), a job's end (failed) only if one delivery got through
    missing = set(expected) - set(published)
    assert missing <= dead_transitions
    assert {expected[t] for t in missing} <= {"job_failed", "issues_found"}
    # a finding goes unannounced only when every delivery of its job died and the job had ended by the next sweep
    # (the sweeper reconciles running jobs): the dead-letter queue holds it, and the redrive below announces it
    for transition in (t for t in missing if expected[t] == "issues_found"):
        job = transition.split("#")[1]
        assert run.aws.job_status(job) != "InProgress", transition
        carrying = [d for d in run.model.deliveries if d.function is run.job_events and _carries(d, transition)]
        assert carrying, transition
        assert all(d.dead_lettered for d in carrying), transition
    # a stop announced is the guard's; the end of a job it stopped is folded into that stop, never announced
    # (the Stopped event is read after the stop it reports was confirmed), unless that event was dead-lettered
    assert {n["job"]["name"] for n in notes if n["outcome"] == "stopped"} <= set(seen.stops)
    assert [n for n in notes if n["kind"] == "job_stopped"] == []
    assert folded <= fleet.folded()
    assert fleet.folded() - folded <= dead_transitions
    # ... and a finding it stopped a job for is announced "stopped", never "notified"
    misannounced = [n for n in notes if n["kind"] == "issues_found" and n["outcome"] != "stopped"]
    assert misannounced == []
    # nothing left in progress but what a dead-lettered delivery claimed (a redrive takes it over)
    assert {k for k, state in states.items() if state == "in_progress"} <= {k for d in dead for k in d.claimed}
    assert {k for k, state in states.items() if state == "done" and k.startswith("t#")} <= set(published) | folded
    # the fleet went through what the campaign is about (dead letters and busy waits have their own tests)
    assert seen.takeovers
    assert seen.concurrent_duplicates
    assert seen.retries
    assert any(a.killed_at for sweep in fleet.sweeps for a in sweep.attempts)
    # `training-guard redrive` hands the dead letters back: every finding is then announced, and nothing stops twice
    run.model.planner = lambda delivery, number: NO_FAULT
    run.clock.advance(3600)  # past every lease
    for delivery in [d for d in dead if d.function is run.job_events]:
        run.deliver(copy.deepcopy(delivery.event))
    after = Counter(n["transition"] for n in run.aws.notifications())  # what the redrive announced
    assert {t for t, kind in expected.items() if kind == "issues_found"} <= set(published) | set(after)
    assert not set(after) & set(published)  # nothing announced twice
    assert dict(seen.stops) == {p.name: 1 for p in fleet.plans if p.kind == "stop"}
    figures.update(
        jobs=len(fleet.plans),
        events=sum(len(p.events) for p in fleet.plans) + len(fleet.stopped_events),
        deliveries=sum(d.function is run.job_events for d in run.model.deliveries),
        sweeps=len(fleet.sweeps),
        virtual_minutes=round((run.clock.now - fleet.start).total_seconds() / 60),
        **figures_of(run),
        not_announced_after_dead_letter=len(missing),
        folded_into_the_guards_stop=len(folded),
        guard_stops_announced_notified=len(misannounced),
    )
    shown = readme_campaign_row("time")
    assert (
        f"a seeded fleet of {figures['jobs']} jobs over {figures['virtual_minutes']} virtual minutes: "
        f"{figures['kills']} kills, {figures['retries']} retries, {len(seen.stops)} stops (each once), "
        f"{figures['dead_lettered']} deliveries dead-lettered and no transition left unannounced" in shown
    ), shown
    assert not missing


# --- the log path: a subscription delivery of a training log ---------------------------------------------------
# The same kills, slow calls and concurrent copies on the log-events function: CloudWatch Logs delivers a stream's
# batch at least once, and the function folds it into the stream's state, stops through the responder, then saves
# the state (docs/design/log-path.md). Beyond the invariants above: every case ends with the stream's state saved
# (unless dead-lettered), so a redelivery finds it and fires nothing again.
LOG_T0 = NOW - timedelta(hours=1)


def _log_job(run: Run, job: str) -> None:
    run.world.put_job(
        {
            "TrainingJobName": job,
            "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{job}",
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Training",
            "AlgorithmSpecification": {
                "TrainingInputMode": "File",
                "MetricDefinitions": [{"Name": n, "Regex": r} for n, r in MNIST_DEFINITIONS],
            },
            "Tags": {"team": "vision"},
        }
    )


def _log_delivery(job: str, lines: list[str]) -> dict[str, Any]:
    logged = events(lines, t0_ms=int(LOG_T0.timestamp() * 1000))
    return subscription(document(f"{job}/algo-1-1764468600", logged, owner=ACCOUNT))


LOG_HEALTHY = [f"Train Epoch: 1 [{i}0000/60000] Train_loss={3.0 - 0.1 * i:.6f};" for i in range(10)]


def _log_stop(run: Run, job: str) -> dict[str, Any]:
    """A loss that falls, then reads nan: the NaN rule stops the job (no other rule fires)."""
    _log_job(run, job)
    return _log_delivery(job, [*LOG_HEALTHY, *["Train Epoch: 2 [0/60000] Train_loss=nan;"] * 3])


def _log_healthy(run: Run, job: str) -> dict[str, Any]:
    """The same job's first lines, while its loss still falls: nothing fires."""
    _log_job(run, job)
    return _log_delivery(job, LOG_HEALTHY)


LOG_SCENARIOS = (
    Scenario("log-stop", _log_stop, {"log_rule": "stopped"}, stops=1, log_path=True),
    Scenario("log-healthy", _log_healthy, {}, log_path=True),
)


def log_state_version(run: Run, job: str) -> int:
    """The version of the job's stream's saved state (0: never saved)."""
    return run.world.log_state_version(f"{job}/algo-1-1764468600")


def test_log_path_a_kill_at_any_call_loses_nothing_doubles_no_stop_and_saves_the_state(
    unit_run: Run, figures: dict[str, Any]
) -> None:
    """On the unit tier's fakes (the emulation runs a sample of these kills to the same end)."""
    run = unit_run
    failures: dict[str, list[str]] = {}
    cases = 0
    for scenario in LOG_SCENARIOS:
        reference = reference_of(run, scenario)
        assert log_state_version(run, reference.job) == 1
        calls = reference.deliveries[0].attempts[0].calls
        for step in range(1, len(calls) + 1):
            for effect in effects(calls[step - 1]):
                kill = Kill(step, effect=effect)
                case = run_case(run, scenario, AttemptPlan(kill=kill))
                cases += 1
                where = f"{scenario.name}: {describe(kill, calls)}"
                assert case.deliveries[0].attempts[0].killed_at == calls[step - 1], where
                assert not case.dead_lettered, where
                found = violations(case, reference)
                if log_state_version(run, case.job) < 1:
                    found.append("the stream's state was never saved")
                if found:
                    failures[where] = found
    assert not failures, failures
    killed = set(run.model.observed.kills)
    # the state read and its save, the stop path's every step: all killed, all survived
    assert {
        "GetItem log state",
        "PutItem log state",
        "UpdateItem log job",
        "DescribeTrainingJob",
        FIRST_STOP_WRITE,  # the stop's one write (claim, stop record, no mute)
        "StopTrainingJob",
        "Publish",
        "UpdateItem complete",
    } <= killed, killed
    figures.update(cases=cases, **figures_of(run))


def test_log_path_a_timeout_before_the_save_refolds_on_retry_and_the_ledger_keeps_the_stop_once(run: Run) -> None:
    scenario = LOG_SCENARIOS[0]
    calls = reference_of(run, scenario).deliveries[0].attempts[0].calls
    save = calls.index("PutItem log state") + 1
    case = run_case(run, scenario, AttemptPlan(kill=Kill(save, effect=False)))
    first, retry = case.deliveries[0].attempts
    assert first.killed_at == "PutItem log state"
    assert "StopTrainingJob" in first.calls  # the stop came before the save
    assert retry.outcome == "ok"
    assert "StopTrainingJob" not in retry.calls  # refolded, fired again: the ledger knew the stop was done
    assert case.deliveries[0].result["findings"]["duplicates"] >= 1
    assert case.stops == 1
    assert [n["outcome"] for n in case.notes] == ["stopped"]
    assert log_state_version(run, case.job) == 1


def test_log_path_a_slow_call_leaves_the_batch_to_the_retry_before_the_lambda_times_out(run: Run) -> None:
    """The first call hangs 20 s of the 30: too little left to stop and save (the reserves), so the attempt
    fails on its own, before Lambda's timeout would kill it where it stands; the retry stops the job once."""
    case = run_case(run, LOG_SCENARIOS[0], AttemptPlan(delays={1: 20.0}))
    first, retry = case.deliveries[0].attempts
    assert first.outcome.startswith("error: DeliveryUnfinished"), first.outcome
    assert first.killed_at is None
    assert "StopTrainingJob" not in first.calls
    assert retry.outcome == "ok"
    assert case.stops == 1
    assert [n["outcome"] for n in case.notes] == ["stopped"]


def test_log_path_a_concurrent_copy_of_the_delivery_inside_any_call_stops_once(
    unit_run: Run, figures: dict[str, Any]
) -> None:
    """CloudWatch Logs delivers the batch again while the first attempt is inside call N (both fold the same
    state; one save wins, the other folds again on it); the first attempt finishes, or is killed later. On the
    unit tier's fakes (the emulation runs a sample)."""
    run = unit_run
    failures: dict[str, list[str]] = {}
    cases = 0
    scenario = LOG_SCENARIOS[0]
    reference = reference_of(run, scenario)
    calls = reference.deliveries[0].attempts[0].calls
    for at in range(1, len(calls) + 1):
        for kill in [None, Kill(len(calls), effect=False), Kill(at, effect=True)]:
            case = run_case(run, scenario, AttemptPlan(duplicate_at=at, kill=kill))
            cases += 1
            where = f"duplicate at call {at} ({calls[at - 1]})" + (f", then {describe(kill, calls)}" if kill else "")
            assert case.deliveries[1].concurrent, where
            assert not case.dead_lettered, where
            found = violations(case, reference)
            if log_state_version(run, case.job) < 1:
                found.append("the stream's state was never saved")
            if found:
                failures[where] = found
    assert not failures, failures
    figures.update(cases=cases, **figures_of(run))


LOG_FLEET_JOBS = 24
LOG_HAZARD = 0.1  # chance that each call of a log delivery's attempt is where it dies


def test_log_path_a_seeded_fleet_under_kills_slow_calls_copies_and_retries(run: Run, figures: dict[str, Any]) -> None:
    """Jobs on 1-3 hosts, each batch delivered 1-3 times at random moments (so out of order), every attempt under
    random kills (timeouts and crashes, before or after AWS acted), slow calls and concurrent copies; then quiet."""
    rng = random.Random(SEED)
    t0_ms = int(LOG_T0.timestamp() * 1000)
    plans = plan_log_fleet(LOG_FLEET_JOBS, SEED, owner=ACCOUNT, t0_ms=t0_ms)
    for plan in plans:
        _log_job(run, plan.name)
    start = run.clock.now

    def plan_attempt(delivery: Delivery, number: int) -> AttemptPlan:
        if run.clock.now >= start + QUIET_AFTER:
            return NO_FAULT
        copy_now = not delivery.concurrent and number == 0 and rng.random() < P_DUPLICATE
        return AttemptPlan(
            hazard=LOG_HAZARD,
            duplicate_at=rng.randint(1, 6) if copy_now else None,
            delays={rng.randint(1, 8): rng.uniform(2, 45)} if rng.random() < P_SLOW else {},
            delay_effect=rng.random() < 0.5,
        )

    model = run.model
    model.jitter_seconds = JITTER_SECONDS
    model.planner = plan_attempt
    first = len(model.deliveries)
    for plan in plans:
        for doc in plan.batches:
            for _ in range(rng.randint(1, 3)):
                at = start + timedelta(seconds=rng.uniform(0, 600))
                model.invoke(run.log_events, subscription(copy.deepcopy(doc)), at=at)
    model.run()
    deliveries = model.deliveries[first:]
    seen = model.observed
    notes = run.aws.notifications()
    published = Counter(n["transition"] for n in notes)
    dead = [d for d in deliveries if d.dead_lettered]
    dead_jobs = {_job_of(d) for d in dead}
    items = run.aws.client("dynamodb").scan(TableName=TABLE)["Items"]
    states = {i[contract.TABLE_PARTITION_KEY]["S"]: i.get("state", {}).get("S") for i in items}

    # every job whose loss turned nan stopped once (unless every copy of its batches died), none healthy stopped
    for plan in plans:
        expected = 1 if plan.kind == "stop" else 0
        if plan.name in dead_jobs:
            assert seen.stops[plan.name] <= expected, plan.name
        else:
            assert seen.stops[plan.name] == expected, plan.name
    # a finding announced at most once, once more only for an attempt killed between its publish and its record
    assert all(n <= 1 + seen.exposed[t] for t, n in published.items())
    assert {n["job"]["name"] for n in notes if n["outcome"] == "stopped"} == {
        p.name for p in plans if seen.stops[p.name]
    }
    # nothing left in progress but what a dead-lettered delivery claimed; every stream's state saved
    assert {k for k, s in states.items() if s == "in_progress"} <= {k for d in dead for k in d.claimed}
    saved = {k.removeprefix("logstate#") for k in states if k.startswith("logstate#")}
    assert saved == {s for plan in plans for s in plan.streams}
    assert seen.retries
    assert seen.concurrent_duplicates
    figures.update(
        jobs=len(plans),
        streams=len(saved),
        deliveries=len(deliveries),
        **figures_of(run),
        unfinished=sum(a.outcome.startswith("error: DeliveryUnfinished") for d in deliveries for a in d.attempts),
    )


def _job_of(delivery: Delivery) -> str:
    return str(decode(delivery.event).job)


# --- the two tiers: the emulation ends as the fakes do -----------------------------------------------------------
# The every-call matrices above run on the unit tier's fakes (fake_world.py: each port call is the one AWS call its
# adapter makes). The emulation runs every scenario without faults and a sample of the kills and the duplicates, each
# checked against the promise; then the fakes run the same cases, and each must end the same: the same calls in every
# attempt, the same notifications, stops, tags, alarms, ledger and saved log state.
def trace(run: Run, case: Case) -> dict[str, Any]:
    """What a case did at AWS, told without its job's name (so two runs of it compare)."""

    def norm(text: str) -> str:
        return text.replace(case.job, "{job}")

    return {
        "attempts": [[(a.number, a.calls, norm(a.outcome)) for a in d.attempts] for d in case.deliveries],
        "notes": sorted((norm(n["transition"]), n["kind"], n["outcome"], by_guard(n)) for n in case.notes),
        "aws": (case.stops, case.status, case.attributed, case.alarms, case.dead_lettered),
        "ledger": sorted((norm(k), state, k in case.folded) for k, state in case.ledger.items()),
        "announced_again": sorted(norm(t) for t in case.exposed.elements()),
        "log_state_version": log_state_version(run, case.job),
    }


Sample = Callable[[Scenario, list[str]], list[AttemptPlan]]


def traces(run: Run, scenarios: tuple[Scenario, ...], sample: Sample) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Each scenario without faults, then under each plan `sample` draws from its calls: the traces, by case, and
    how each case broke the promise."""
    out: dict[str, Any] = {}
    failures: dict[str, list[str]] = {}
    for scenario in scenarios:
        reference = reference_of(run, scenario)
        calls = reference.deliveries[0].attempts[0].calls
        out[f"{scenario.name} without faults"] = trace(run, reference)
        for plan in sample(scenario, calls):
            case = run_case(run, scenario, plan)
            where = f"{scenario.name}: {plan}"
            out[where] = trace(run, case)
            found = violations(case, reference)
            if scenario.log_path and log_state_version(run, case.job) < 1 and not case.dead_lettered:
                found.append("the stream's state was never saved")
            if found:
                failures[where] = found
    return out, failures


def on_both_tiers(
    run: Run, monkeypatch: pytest.MonkeyPatch, scenarios: tuple[Scenario, ...], sample: Callable[[], Sample]
) -> int:
    """The cases on the emulation, then on the fakes: none breaks the promise, each ends the same on both."""
    emulated_traces, failures = traces(run, scenarios, sample())
    assert not failures, failures
    with faked(monkeypatch) as unit_run:
        unit_traces, _ = traces(unit_run, scenarios, sample())
    differ = {k: (v, unit_traces.get(k)) for k, v in emulated_traces.items() if unit_traces.get(k) != v}
    assert not differ, differ
    assert emulated_traces.keys() == unit_traces.keys()
    return len(emulated_traces)


def each_kind_of_kill() -> Sample:
    """Each kind of call killed once before and once after AWS acted (a read once), where a scenario first makes it."""
    seen: set[tuple[str, bool]] = set()

    def sample(scenario: Scenario, calls: list[str]) -> list[AttemptPlan]:
        plans = []
        for step, label in enumerate(calls, start=1):
            for effect in effects(label):
                if (label, effect) not in seen:
                    seen.add((label, effect))
                    plans.append(AttemptPlan(kill=Kill(step, effect=effect)))
        return plans

    return sample


def test_every_scenario_and_each_kind_of_kill_end_on_the_emulation_as_on_the_fakes(
    run: Run, monkeypatch: pytest.MonkeyPatch, figures: dict[str, Any]
) -> None:
    cases = on_both_tiers(run, monkeypatch, SCENARIOS + LOG_SCENARIOS, each_kind_of_kill)
    figures.update(cases=cases, **figures_of(run))


# Where a duplicate meets a conditional write held by the first attempt: its claims (a lease), the log state's save.
HELD = {
    "stop": ("PutItem stop record + lease", "PutItem claim"),
    "log-stop": ("GetItem log state", "PutItem log state"),
}


def duplicates_in_the_stop() -> Sample:
    """A duplicate inside each call of a stop; inside the calls that hold a write, the first attempt then finishing
    or killed at its last call (its lease runs out); the log path's at its state's read and save."""

    def sample(scenario: Scenario, calls: list[str]) -> list[AttemptPlan]:
        last = Kill(len(calls), effect=False)
        held = [calls.index(label) + 1 for label in HELD.get(scenario.name, ())]
        plans = [AttemptPlan(duplicate_at=at) for at in range(1, len(calls) + 1)] if scenario.name == "stop" else []
        return plans + [AttemptPlan(duplicate_at=at, kill=kill) for at in held for kill in (None, last)]

    return sample


def test_a_duplicate_inside_each_call_of_a_stop_ends_on_the_emulation_as_on_the_fakes(
    run: Run, monkeypatch: pytest.MonkeyPatch, figures: dict[str, Any]
) -> None:
    cases = on_both_tiers(run, monkeypatch, (SCENARIO["stop"], LOG_SCENARIOS[0]), duplicates_in_the_stop)
    figures.update(cases=cases, **figures_of(run))
