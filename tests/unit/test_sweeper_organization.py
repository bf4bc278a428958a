"""A hub's sweep over fakes: its own account, then each configured member in that member's account (its jobs, alarms
and metrics, its ledger keys, notifications naming it), one member's failure leaving the others swept, never an
account that is not configured, and members left for a later sweep when time runs short."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from aws_lambda_powertools.metrics import MetricUnit

from tests.fakes import FakeAlarms, FakeJobs, FakeLedger, FakePublisher, FakeTrainingMetrics
from tests.helpers import NOW, job_arn, running_job
from training_guard.adapters.accounts import AccountLedger
from training_guard.config.model import GuardConfig
from training_guard.domain.accounts import member_role_arn
from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import Finding, TrainingJob
from training_guard.domain.metric_guards import job_alarm_name
from training_guard.handlers import sweeper as sweeper_handler
from training_guard.services.responder import Responder
from training_guard.services.sweeper import (
    ACCOUNT_SWEEP_RESERVE_SECONDS,
    OrganizationSweepIncomplete,
    OrganizationSweepReport,
    Sweeper,
    SweepReport,
    member_order,
)

HUB = "111122223333"
MEMBER_A = "444455556666"
MEMBER_B = "777788889999"
OUTSIDER = "999999999999"
REGION = "eu-west-1"
ISSUES = Finding(name="VanishingGradient", source="debugger", status="IssuesFound")
LOST = "lost-event"  # a job whose finding's event was lost: the sweep's reconciliation acts on it


def hub_config(**settings: Any) -> GuardConfig:
    return GuardConfig.from_dict(
        {"organization": {"hub_account": HUB, "region": REGION, "members": [MEMBER_A, MEMBER_B]}, **settings}
    )


def job_in(account: str, name: str, **changes: Any) -> TrainingJob:
    return running_job(name, timedelta(minutes=30), arn=job_arn(name, account, REGION), **changes)


class Account:
    """One account's SageMaker, alarms and training metrics."""

    def __init__(self, *jobs: TrainingJob) -> None:
        self.jobs = FakeJobs(jobs={job.name: job for job in jobs})
        self.alarms = FakeAlarms()
        self.metrics = FakeTrainingMetrics()


class Members:
    """The hub's member access over fakes: what `adapters.accounts.MemberAccess.sweeper_for` does with clients."""

    def __init__(self, config: GuardConfig, accounts: dict[str, Account]) -> None:
        self.config = config
        self.accounts = accounts
        self.asked: list[str] = []
        self.refuse: dict[str, BaseException] = {}

    def sweeper_for(self, base: Sweeper, account: str) -> Sweeper:
        self.asked.append(account)
        assert self.config.organization is not None
        member_role_arn(self.config.organization, account, "aws")  # NotAMember for anything not configured
        if account in self.refuse:
            raise self.refuse[account]
        world = self.accounts[account]
        responder = base.responder.acting(
            jobs=world.jobs,
            alarms=world.alarms,
            ledger=AccountLedger(base.responder.ledger, account),
            account_scope=account,
        )
        return Sweeper(responder, world.jobs, world.alarms, world.metrics, said=base.said_in(account))


class Organization:
    """The hub (its own account's fakes, the shared ledger and topic) and its members."""

    def __init__(self, config: GuardConfig | None = None, **accounts: Account) -> None:
        self.config = config or hub_config()
        self.hub = accounts.pop("hub", Account())
        self.ledger = FakeLedger()
        self.publisher = FakePublisher()
        responder = Responder(
            self.config, self.hub.jobs, self.ledger, self.publisher, alarms=self.hub.alarms, sleep=lambda _: None
        )
        self.sweeper = Sweeper(responder, self.hub.jobs, self.hub.alarms, self.hub.metrics)
        worlds = {MEMBER_A: accounts.pop("a", Account()), MEMBER_B: accounts.pop("b", Account())}
        worlds[OUTSIDER] = accounts.pop("outsider", Account())
        self.members = Members(self.config, worlds)

    def account(self, account: str) -> Account:
        return self.hub if account == HUB else self.members.accounts[account]

    def sweep(self, **kwargs: Any) -> OrganizationSweepReport:
        return self.sweeper.sweep_organization(self.members, now=NOW, account=HUB, region=REGION, **kwargs)

    def published(self) -> list[tuple[str | None, str, str, str]]:
        return [(n.account, n.job.name, n.kind.value, n.outcome.value) for n in self.publisher.published]


def test_each_member_is_swept_in_its_own_account_after_the_hubs_own() -> None:
    org = Organization(
        hub=Account(job_in(HUB, LOST)),  # the same name in every account: three jobs
        a=Account(job_in(MEMBER_A, LOST, rules=(ISSUES,))),
        b=Account(job_in(MEMBER_B, LOST)),
        outsider=Account(job_in(OUTSIDER, LOST, rules=(ISSUES,))),
    )
    report = org.sweep()
    assert list(report.accounts) == [HUB, *member_order((MEMBER_A, MEMBER_B), NOW, 5)]
    assert {account: r.account for account, r in report.accounts.items()} == {a: a for a in report.accounts}
    assert all(r.running == 1 for r in report.reports)
    assert org.published() == [(MEMBER_A, LOST, "issues_found", "stopped")]
    assert [n.region for n in org.publisher.published] == [REGION]
    assert {a: org.account(a).jobs.stop_calls for a in (HUB, MEMBER_A, MEMBER_B, OUTSIDER)} == {
        HUB: [],
        MEMBER_A: [LOST],
        MEMBER_B: [],
        OUTSIDER: [],
    }
    assert set(org.ledger.stops) == {f"{MEMBER_A}/{LOST}"}  # the stop record carries the account
    [reconciled] = report.accounts[MEMBER_A].reconciled
    assert reconciled["job"] == LOST


def test_orphaned_alarms_are_found_and_deleted_in_their_own_account() -> None:
    orphan = job_alarm_name("ended", "train:loss")
    kept = job_alarm_name("runs", "train:loss")
    b = Account(job_in(MEMBER_B, "runs"))
    b.alarms.names = [orphan, kept]
    a = Account()
    a.alarms.names = [kept]  # A has no job "runs": its alarm of that name is A's orphan
    org = Organization(a=a, b=b)
    report = org.sweep()
    assert (b.alarms.deleted, a.alarms.deleted, org.hub.alarms.deleted) == ([orphan], [kept], [])
    assert report.accounts[MEMBER_B].orphaned_alarms_deleted == [orphan]


def test_only_the_configured_members_are_swept() -> None:
    org = Organization(outsider=Account(job_in(OUTSIDER, LOST, rules=(ISSUES,))))
    org.sweep()
    assert sorted(org.members.asked) == [MEMBER_A, MEMBER_B]
    assert org.members.accounts[OUTSIDER].jobs.describe_calls == []


@pytest.mark.parametrize(
    ("failure", "why"),
    [
        (
            ActionFailed(f"AssumeRole arn:aws:iam::{MEMBER_A}:role/TrainingGuardMember", RuntimeError("AccessDenied")),
            f"AssumeRole arn:aws:iam::{MEMBER_A}:role/TrainingGuardMember failed: AccessDenied",
        ),
        (RuntimeError("a bug"), "RuntimeError: a bug"),
    ],
)
def test_a_member_that_cannot_be_reached_is_reported_and_the_others_are_swept(failure: Exception, why: str) -> None:
    org = Organization(
        a=Account(job_in(MEMBER_A, LOST, rules=(ISSUES,))), b=Account(job_in(MEMBER_B, LOST, rules=(ISSUES,)))
    )
    org.members.refuse[MEMBER_A] = failure
    with pytest.raises(OrganizationSweepIncomplete) as incomplete:
        org.sweep()
    report = incomplete.value.report
    assert report.failed == {MEMBER_A: why}
    assert list(report.accounts) == [HUB, MEMBER_B]
    assert report.not_swept == [MEMBER_A]
    assert org.published() == [(MEMBER_B, LOST, "issues_found", "stopped")]  # B swept whatever came first
    assert str(incomplete.value) == f"1 of 3 account(s) not completely swept ({MEMBER_A}: {why})"


class Throttled(FakeJobs):
    def running(self) -> list[str]:
        raise ActionFailed("ListTrainingJobs", RuntimeError("ThrottlingException"))


def test_a_member_whose_jobs_cannot_be_listed_is_reported_and_the_others_are_swept() -> None:
    a = Account()
    a.jobs = Throttled()
    org = Organization(a=a, b=Account(job_in(MEMBER_B, LOST, rules=(ISSUES,))))
    with pytest.raises(OrganizationSweepIncomplete) as incomplete:
        org.sweep()
    assert incomplete.value.report.failed == {MEMBER_A: "ListTrainingJobs failed: ThrottlingException"}
    assert org.members.accounts[MEMBER_B].jobs.stop_calls == [LOST]


class FailingDescribe(FakeJobs):
    def describe(self, name: str) -> TrainingJob | None:
        raise ActionFailed(f"DescribeTrainingJob {name}", RuntimeError("throttled"))


def test_a_member_with_jobs_that_cannot_be_swept_keeps_its_report_naming_the_account() -> None:
    a = Account()
    a.jobs = FailingDescribe(jobs={"one": job_in(MEMBER_A, "one")})
    org = Organization(a=a, b=Account(job_in(MEMBER_B, LOST, rules=(ISSUES,))))
    with pytest.raises(OrganizationSweepIncomplete) as incomplete:
        org.sweep()
    report = incomplete.value.report
    assert report.accounts[MEMBER_A].failed == {"one": "DescribeTrainingJob one failed: throttled"}
    assert report.failed == {
        MEMBER_A: f"1 of 1 running job(s) in account {MEMBER_A} not swept (one: DescribeTrainingJob one failed: throttled)"
    }
    assert report.not_swept == []  # it was swept; only its job was not
    assert org.members.accounts[MEMBER_B].jobs.stop_calls == [LOST]


def test_the_hubs_own_failure_leaves_the_members_swept() -> None:
    hub = Account()
    hub.jobs = Throttled()
    org = Organization(hub=hub, a=Account(job_in(MEMBER_A, LOST, rules=(ISSUES,))))
    org.sweeper.jobs = hub.jobs
    with pytest.raises(OrganizationSweepIncomplete) as incomplete:
        org.sweep()
    assert list(incomplete.value.report.failed) == [HUB]
    assert org.members.accounts[MEMBER_A].jobs.stop_calls == [LOST]


def test_the_same_job_name_in_two_members_is_two_jobs_in_the_ledger_and_the_messages() -> None:
    org = Organization(
        a=Account(job_in(MEMBER_A, LOST, rules=(ISSUES,))), b=Account(job_in(MEMBER_B, LOST, rules=(ISSUES,)))
    )
    org.sweep()
    assert sorted(org.published()) == [
        (MEMBER_A, LOST, "issues_found", "stopped"),
        (MEMBER_B, LOST, "issues_found", "stopped"),
    ]
    assert set(org.ledger.stops) == {f"{MEMBER_A}/{LOST}", f"{MEMBER_B}/{LOST}"}
    # A second sweep finds both handled: nothing is announced twice.
    for account in (MEMBER_A, MEMBER_B):
        jobs = org.members.accounts[account].jobs
        jobs.jobs[LOST] = replace(jobs.jobs[LOST], status="InProgress")
    org.sweep()
    assert len(org.publisher.published) == 2


def test_what_is_said_once_is_said_once_per_account_not_once_per_job_name() -> None:
    """A budget that cannot be judged (no prices here) is said once for each job: A's and B's are two jobs."""
    org = Organization(
        hub_config(budgets=[{"max_usd": 100}]), a=Account(job_in(MEMBER_A, LOST)), b=Account(job_in(MEMBER_B, LOST))
    )
    first = org.sweep()
    assert {a: list(r.not_judged) for a, r in first.accounts.items()} == {HUB: [], MEMBER_A: [LOST], MEMBER_B: [LOST]}
    again = org.sweep()
    assert all(not r.not_judged for r in again.reports)


# --- time ---------------------------------------------------------------------------------------------------------


def test_members_are_taken_in_an_order_that_turns_with_every_sweep() -> None:
    members = ("a", "b", "c")
    orders = [member_order(members, NOW + timedelta(minutes=5 * n), 5) for n in range(4)]
    assert sorted(map(tuple, orders[:3])) == [("a", "b", "c"), ("b", "c", "a"), ("c", "a", "b")]
    assert orders[3] == orders[0]
    assert member_order((), NOW, 5) == []


class Stopwatch:
    """Time left in the invocation: `left` seconds, less `per_account` for every account swept."""

    def __init__(self, left: float, per_account: float = 0.0) -> None:
        self.left = left
        self.per_account = per_account

    def __call__(self) -> float:
        return self.left

    def spend(self, *_: Any, **__: Any) -> list[str]:
        """An account's first read (its alarms): the time its whole sweep takes."""
        self.left -= self.per_account
        return []


def test_with_too_little_time_left_members_are_left_for_a_later_sweep_and_the_hub_is_swept() -> None:
    org = Organization(
        hub=Account(job_in(HUB, LOST, rules=(ISSUES,))), a=Account(job_in(MEMBER_A, LOST, rules=(ISSUES,)))
    )
    with pytest.raises(OrganizationSweepIncomplete) as incomplete:
        org.sweep(time_left=Stopwatch(ACCOUNT_SWEEP_RESERVE_SECONDS - 1))
    report = incomplete.value.report
    assert list(report.accounts) == [HUB]
    assert report.deferred == member_order((MEMBER_A, MEMBER_B), NOW, 5)
    assert org.members.asked == []  # no role assumed for an account not swept
    assert str(incomplete.value).endswith(f"not started for want of time: {', '.join(report.deferred)})")


def test_a_member_is_not_started_with_less_than_twice_the_longest_account_sweep_left() -> None:
    clock = Stopwatch(100.0, per_account=40.0)  # each account's sweep takes 40 s of the 100 left
    org = Organization()
    for account in (HUB, MEMBER_A, MEMBER_B):
        world = org.account(account)
        world.alarms.job_alarm_names = clock.spend  # type: ignore[method-assign]
    with pytest.raises(OrganizationSweepIncomplete) as incomplete:
        org.sweep(time_left=clock)
    # The hub took 40 s; 60 s are left, less than twice 40: no member is started.
    assert incomplete.value.report.deferred == member_order((MEMBER_A, MEMBER_B), NOW, 5)
    clock.left, clock.per_account = 200.0, 40.0
    assert list(org.sweep(time_left=clock).accounts) == [HUB, *member_order((MEMBER_A, MEMBER_B), NOW, 5)]


# --- the handler --------------------------------------------------------------------------------------------------


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    seen: list[tuple[str, float]] = []

    def add_metric(*, name: str, unit: MetricUnit, value: float) -> None:
        seen.append((name, value))

    monkeypatch.setattr(sweeper_handler.metrics, "add_metric", add_metric)
    return seen


def test_the_handler_sweeps_the_organization_and_adds_the_accounts_up(counted: list[tuple[str, float]]) -> None:
    org = Organization(
        hub=Account(job_in(HUB, "h")),
        a=Account(job_in(MEMBER_A, LOST, rules=(ISSUES,))),
        b=Account(job_in(MEMBER_B, "b")),
    )
    result = sweeper_handler.process(org.sweeper, now=NOW, account=HUB, region=REGION, members=org.members)
    accounts: dict[str, Any] = result["accounts"]
    assert set(accounts) == {HUB, MEMBER_A, MEMBER_B}
    assert accounts[MEMBER_A]["account"] == MEMBER_A
    assert [r["job"] for r in accounts[MEMBER_A]["reconciled"]] == [LOST]
    assert (result["failed"], result["deferred"]) == ({}, [])
    assert ("RunningJobs", 3) in counted
    assert ("Reconciled", 1) in counted
    assert not [name for name, _ in counted if name == sweeper_handler.ACCOUNTS_NOT_SWEPT_METRIC]


def test_the_handler_counts_the_accounts_not_swept_and_fails_after_the_others(counted: list[tuple[str, float]]) -> None:
    org = Organization(b=Account(job_in(MEMBER_B, LOST, rules=(ISSUES,))))
    org.members.refuse[MEMBER_A] = ActionFailed("AssumeRole", RuntimeError("AccessDenied"))
    with pytest.raises(OrganizationSweepIncomplete):
        sweeper_handler.process(org.sweeper, now=NOW, account=HUB, region=REGION, members=org.members)
    assert (sweeper_handler.ACCOUNTS_NOT_SWEPT_METRIC, 1) in counted
    assert ("RunningJobs", 1) in counted  # B's job, counted although the sweep failed
    assert org.members.accounts[MEMBER_B].jobs.stop_calls == [LOST]


def test_a_single_account_guard_sweeps_its_own_account_as_before(counted: list[tuple[str, float]]) -> None:
    world = Account(job_in(HUB, LOST, rules=(ISSUES,)))
    responder = Responder(GuardConfig(), world.jobs, FakeLedger(), FakePublisher(), alarms=world.alarms)
    sweeper = Sweeper(responder, world.jobs, world.alarms, world.metrics)
    result = sweeper_handler.process(sweeper, now=NOW, account=HUB, region=REGION, members=None)
    assert set(result) == set(SweepReport.__dataclass_fields__)
    assert (result["account"], result["running"]) == (HUB, 1)
    assert world.jobs.stop_calls == [LOST]
    assert ("RunningJobs", 1) in counted


def test_an_idle_sweep_sends_no_metric(counted: list[tuple[str, float]]) -> None:
    # A custom metric is billed for each hour it is sent: an account with no job pays for none (docs/cost.md).
    world = Account()
    responder = Responder(GuardConfig(), world.jobs, FakeLedger(), FakePublisher(), alarms=world.alarms)
    sweeper = Sweeper(responder, world.jobs, world.alarms, world.metrics)
    result = sweeper_handler.process(sweeper, now=NOW, account=HUB, region=REGION, members=None)
    assert result["running"] == 0
    assert counted == []


def test_sweep_organization_needs_an_organization() -> None:
    world = Account()
    sweeper = Sweeper(
        Responder(GuardConfig(), world.jobs, FakeLedger(), FakePublisher()), world.jobs, world.alarms, world.metrics
    )
    with pytest.raises(ValueError, match="organization section"):
        sweeper.sweep_organization(Members(GuardConfig(), {}), now=NOW, account=HUB, region=REGION)
