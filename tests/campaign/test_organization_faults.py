"""Campaign: AWS failing in one member account. One hub, two members and an outsider on moto's accounts
(credentials per account: the hub's own, each member's through STS AssumeRole into its member role).

The same fleet of jobs (the same names) runs in both members, the hub and the outsider. Each member's SageMaker
sends its events (1 or 2 copies each, shuffled within a job, jobs and accounts interleaved), the outsider's events
reach the hub bus too, and the sweeper runs every few deliveries; every stop SageMaker accepts is followed by its
"Stopping" state change event. Throttling and 5xx are injected, seeded, into member A's SageMaker calls only (on the
clients of A's sessions, tests/faults.py: what the SDK raises once its retries are spent, moto never reached); an event whose reaction still fails is retried as Lambda does (2 more attempts) and then
dead-lettered. At the end A recovers, the dead letters are redriven (README, Operate) and one more sweep runs.

Invariants, as set inclusions over what was observed:
- nothing of the faults reaches member B: none of B's events is dead-lettered, every sweep swept B, each of B's
  jobs got exactly the notifications its plan expects, once;
- exactly one stop per job that should stop, in each member, and none anywhere else (the hub's jobs of the same
  names, the outsider's, the members' other jobs);
- nothing acts in an account that is not configured: no role of another account is assumed, no call is made with
  another account's credentials, the outsider's jobs are never described, stopped or tagged;
- after A recovers and its dead letters are redriven, A's jobs too got exactly their notifications, once.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from tests import faults as aws_faults
from tests.campaign.streams import JobPlan, deliveries, plan_fleet
from tests.helpers import NOW
from tests.integration import test_organization_moto as base
from tests.integration.test_organization_moto import HUB, MEMBER_A, MEMBER_B, OUTSIDER, REGION
from training_guard.adapters.accounts import CredentialedClients, MemberAccess, MemberSessions
from training_guard.adapters.cloudwatch import CloudWatchAlarms, TrainingMetrics
from training_guard.adapters.sagemaker import SageMakerJobs
from training_guard.domain.errors import GuardError
from training_guard.handlers import job_events
from training_guard.handlers import sweeper as sweeper_handler
from training_guard.services.sweeper import OrganizationSweepIncomplete, Sweeper
from training_guard_local import cloudwatch_ext, sagemaker_ext

SEED = 16
JOBS = 24  # per account: six of each kind (stop, rule_error, failed, completed)
LAMBDA_ATTEMPTS = 3  # the first try and Lambda's 2 async retries
SWEEP_EVERY = 15  # deliveries between two sweeps
# The share of A's SageMaker calls that fail for the guard, after the SDK's own retries.
RATE = 0.24
MEMBERS = (MEMBER_A, MEMBER_B)


class Faults:
    """Seeded faults in front of moto, for the SageMaker clients of member A's sessions only."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.active = True
        self.injected: Counter[str] = Counter()

    def decide(self, request: Any) -> aws_faults.Fault | None:
        if not self.active or self.rng.random() >= RATE:
            return None
        target = request.headers.get("X-Amz-Target", b"")  # SageMaker.<operation>
        self.injected[(target.decode() if isinstance(target, bytes) else str(target)).split(".")[-1]] += 1
        return self.rng.choice(aws_faults.TRANSIENT)


class Observed:
    """Every call made with a member's credentials, and every stop SageMaker accepted, by account."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()  # (account, operation)
        self.stops: Counter[tuple[str, str]] = Counter()  # (account, job)
        self.stopping: list[tuple[str, str]] = []  # stops whose "Stopping" event SageMaker has yet to send

    def hook(self, events: Any, account: str) -> None:
        def before(model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
            self.calls[(account, model.name)] += 1
            context["tg_job"] = params.get("TrainingJobName")

        def after(http_response: Any, model: Any, context: dict[str, Any], **_: Any) -> None:
            if model.name == "StopTrainingJob" and http_response.status_code == 200:
                self.stops[(account, str(context["tg_job"]))] += 1
                self.stopping.append((account, str(context["tg_job"])))

        events.register("before-parameter-build.sagemaker", before)
        events.register("before-parameter-build.monitoring", before)
        events.register("after-call.sagemaker", after)


class Campaign(base.Organization):
    """The hub (tests/integration/test_organization_moto.py) with its sweeper, A's faults and every call observed."""

    def __init__(self, faults: Faults) -> None:
        super().__init__()
        assert base.CONFIG.organization is not None
        self.faults = faults
        self.observed = Observed()
        self.guard.sleep = lambda _seconds: None  # the busy wait, without waiting
        hub_sagemaker = boto3.client("sagemaker", region_name=REGION)
        self.observed.hook(hub_sagemaker.meta.events, HUB)
        self.guard.jobs = SageMakerJobs(hub_sagemaker)
        sessions = MemberSessions(base.CONFIG.organization, sts=self.sts, partition="aws", session_factory=self.session)
        self.access = MemberAccess(sessions)
        cloudwatch = boto3.client("cloudwatch", region_name=REGION)
        self.sweeper = Sweeper(self.guard, self.guard.jobs, CloudWatchAlarms(cloudwatch), TrainingMetrics(cloudwatch))

    def session(self, **credentials: Any) -> CredentialedClients:
        """A member's credentials, made right after its AssumeRole: its clients are observed, and A's SageMaker
        faulted."""
        account = self.assumed[-1].split(":")[4]

        def hook(made: Any) -> None:
            self.observed.hook(made.meta.events, account)
            if account == MEMBER_A:
                aws_faults.refuse(made, None, self.faults.decide)

        return base.HookedClients(hook, **credentials)

    def put_fleet(self, account: str, plans: list[JobPlan]) -> None:
        """The fleet's jobs in `account`, each in the state its last event reports (SageMaker's truth comes first)."""
        for plan in plans:
            sagemaker_ext.put_job(account, REGION, in_account(plan.events[-1], account)["detail"])

    def deliver(self, event: dict[str, Any]) -> Any:
        return job_events.process(event, self.guard, account=HUB, now=NOW, members=self.access)

    def sweep(self) -> dict[str, Any]:
        return sweeper_handler.process(self.sweeper, now=NOW, account=HUB, region=REGION, members=self.access)

    def notes(self) -> list[dict[str, Any]]:
        sqs = boto3.client("sqs", region_name=REGION)
        found: list[dict[str, Any]] = []
        while batch := sqs.receive_message(QueueUrl=self.inbox, MaxNumberOfMessages=10).get("Messages", []):
            found += [json.loads(m["Body"]) for m in batch]
            sqs.delete_message_batch(
                QueueUrl=self.inbox,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
            )
        return found


def in_account(event: dict[str, Any], account: str) -> dict[str, Any]:
    """The fleet's event as `account`'s SageMaker sends it."""
    copy: dict[str, Any] = json.loads(json.dumps(event))
    name = copy["detail"]["TrainingJobName"]
    copy.update(account=account, region=REGION, id=f"{account}-{copy['id']}")
    copy["detail"]["TrainingJobArn"] = f"arn:aws:sagemaker:{REGION}:{account}:training-job/{name}"
    return copy


@pytest.fixture
def campaign(monkeypatch: pytest.MonkeyPatch) -> Iterator[Campaign]:
    with base.mocked_accounts(monkeypatch):
        cloudwatch_ext.install()
        yield Campaign(Faults(SEED))


def test_faults_in_member_a_stay_in_a_and_every_job_is_stopped_exactly_once(
    campaign: Campaign, figures: dict[str, Any]
) -> None:
    plans = plan_fleet(JOBS, SEED)
    for account in (*MEMBERS, OUTSIDER):
        campaign.put_fleet(account, plans)
    for plan in plans:  # the hub's own jobs of the same names run on, with nothing found
        sagemaker_ext.put_job(HUB, REGION, in_account(plan.events[0], HUB)["detail"])
    rng = random.Random(SEED)
    streams = {account: deliveries(plans, seed=rng.randrange(2**32), max_copies=2) for account in (*MEMBERS, OUTSIDER)}
    stream = [in_account(event, account) for account, events in streams.items() for event in events]
    rng.shuffle(stream)
    by_name = {plan.name: plan for plan in plans}
    dead_letters: list[dict[str, Any]] = []
    ignored = lambda_retries = 0
    swept_b: list[bool] = []
    sweep_failures: Counter[str] = Counter()

    def invoke(event: dict[str, Any]) -> None:
        """One asynchronous invocation of the job-events function: Lambda's 3 attempts, then the dead-letter queue."""
        nonlocal ignored, lambda_retries
        for attempt in range(LAMBDA_ATTEMPTS):
            try:
                ignored += bool(campaign.deliver(event).ignored)
                return
            except GuardError:
                if attempt == LAMBDA_ATTEMPTS - 1:
                    dead_letters.append(event)
                else:
                    lambda_retries += 1

    def sagemaker_sends_stopping() -> None:
        """The state change event of every stop SageMaker accepted (the job now Stopping, its rules as they were)."""
        while campaign.observed.stopping:
            account, name = campaign.observed.stopping.pop(0)
            event = in_account(by_name[name].events[-1], account)
            event["detail"].update(TrainingJobStatus="Stopping", SecondaryStatus="Stopping")
            invoke(event)

    for n, event in enumerate(stream, start=1):
        invoke(event)
        sagemaker_sends_stopping()
        if n % SWEEP_EVERY == 0:
            try:
                accounts = campaign.sweep()["accounts"]
            except OrganizationSweepIncomplete as incomplete:
                accounts = incomplete.report.accounts
                sweep_failures.update(incomplete.report.failed.keys())
            swept_b.append(MEMBER_B in accounts)
            sagemaker_sends_stopping()
    dead_lettered = Counter(event["account"] for event in dead_letters)
    campaign.faults.active = False  # A recovers
    redriven = list(dead_letters)
    dead_letters.clear()
    for event in redriven:  # an operator redrives the dead-letter queue
        invoke(event)
        sagemaker_sends_stopping()
    final = campaign.sweep()  # raises if any account is still not swept
    sagemaker_sends_stopping()
    assert dead_letters == []
    notes = campaign.notes()

    # Nothing of the faults reaches B.
    assert campaign.faults.injected, "the campaign injected no fault"
    assert set(dead_lettered) <= {MEMBER_A}, dead_lettered
    assert set(sweep_failures) <= {MEMBER_A}
    assert all(swept_b)
    announced = Counter((n["account"], n["job"]["name"], n["kind"]) for n in notes)
    for plan in plans:
        for kind, count in plan.expected_notifications.items():
            assert announced[(MEMBER_B, plan.name, kind)] == count, (plan.name, kind)
            assert announced[(MEMBER_A, plan.name, kind)] == count, (plan.name, kind)  # after A recovered, redriven
    assert {a for a, _, _ in announced} <= set(MEMBERS)
    assert all(count == 1 for count in announced.values()), [k for k, c in announced.items() if c > 1]
    # Exactly one stop per job that should stop, in each member; none anywhere else.
    should_stop = {(account, p.name) for account in MEMBERS for p in plans if p.kind == "stop"}
    assert set(campaign.observed.stops) == should_stop
    assert all(count == 1 for count in campaign.observed.stops.values()), campaign.observed.stops
    for account, name in should_stop:
        assert sagemaker_ext.job_status(account, REGION, name) == "Stopping"
    # Nothing acts in an account that is not configured.
    assert {arn.split(":")[4] for arn in campaign.assumed} == set(MEMBERS)
    assert {account for account, _ in campaign.observed.calls} <= {HUB, *MEMBERS}
    assert all(sagemaker_ext.job_status(OUTSIDER, REGION, p.name) != "Stopping" for p in plans)
    assert ignored >= len(streams[OUTSIDER])
    assert set(final["accounts"]) == {HUB, *MEMBERS}
    figures.update(
        deliveries=len(stream),
        faults_injected=sum(campaign.faults.injected.values()),
        lambda_retries=lambda_retries,
        dead_lettered_in_a=dead_lettered[MEMBER_A],
        sweeps=len(swept_b) + 1,
        sweeps_failed_in_a=sweep_failures[MEMBER_A],
        stops=sum(campaign.observed.stops.values()),
        notifications=len(notes),
    )
