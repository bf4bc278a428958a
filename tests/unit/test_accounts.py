"""Acting in member accounts: which events a guard accepts, the member role it assumes (built only for configured
members), sessions cached until shortly before they expire, and a ledger per account."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

import boto3
import pytest
from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import ClientError, EndpointConnectionError

from tests.fakes import FakeAlarms, FakeJobs, FakeLedger, FakePublisher, FakeTrainingMetrics
from tests.helpers import NOW, load_event
from training_guard import contract
from training_guard.adapters import receipts
from training_guard.adapters.accounts import (
    REFRESH_MARGIN_SECONDS,
    SESSION_NAME,
    AccountLedger,
    CredentialedClients,
    MemberAccess,
    MemberSessions,
)
from training_guard.adapters.clients import RETRY_CONFIG
from training_guard.config.model import GuardConfig, OrganizationConfig
from training_guard.domain import accounts
from training_guard.domain.accounts import NotAMember, member_role_arn
from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import parse_job
from training_guard.handlers import alarm_events, job_events
from training_guard.services.ports import Claim, StopRecord
from training_guard.services.responder import Responder, responder_in
from training_guard.services.sweeper import Sweeper

if TYPE_CHECKING:
    from mypy_boto3_sts import STSClient

HUB = "111122223333"
MEMBER_A = "444455556666"
MEMBER_B = "777788889999"
OUTSIDER = "999999999999"  # another account of the organization: its events reach the hub bus too
ORG = OrganizationConfig(hub_account=HUB, region="eu-west-1", members=(MEMBER_A, MEMBER_B))
HUB_CONFIG = GuardConfig(organization=ORG)
JOB = "pytorch-mnist-lr01-2026-11-30-02-10-00-123"


# --- which events a guard accepts ------------------------------------------------------------------------------


def test_a_single_account_guard_accepts_only_its_own_account() -> None:
    config = GuardConfig()
    assert accounts.accepts(config, "123456789012", "123456789012")
    assert not accounts.accepts(config, "123456789012", MEMBER_A)
    assert not accounts.accepts(config, "123456789012", None)
    assert accounts.accepts(config, None, MEMBER_A)  # no Lambda context (a local run): as before


def test_a_hub_accepts_exactly_itself_and_the_configured_members_whatever_its_own_account() -> None:
    for own in (HUB, None):
        assert [accounts.accepts(HUB_CONFIG, own, a) for a in (HUB, MEMBER_A, MEMBER_B)] == [True] * 3
        assert [accounts.accepts(HUB_CONFIG, own, a) for a in (OUTSIDER, None, "")] == [False] * 3


def test_only_a_members_event_is_acted_on_through_a_role() -> None:
    assert accounts.is_member(HUB_CONFIG, HUB, MEMBER_A)
    assert not accounts.is_member(HUB_CONFIG, HUB, HUB)
    assert not accounts.is_member(HUB_CONFIG, HUB, OUTSIDER)
    assert not accounts.is_member(GuardConfig(), HUB, MEMBER_A)


# --- the member role --------------------------------------------------------------------------------------------


def test_the_member_role_arn_is_built_from_the_configuration() -> None:
    assert member_role_arn(ORG, MEMBER_A, "aws") == f"arn:aws:iam::{MEMBER_A}:role/TrainingGuardMember"
    renamed = OrganizationConfig(hub_account=HUB, region="cn-north-1", members=(MEMBER_B,), member_role_name="Guard")
    assert member_role_arn(renamed, MEMBER_B, "aws-cn") == f"arn:aws-cn:iam::{MEMBER_B}:role/Guard"


@pytest.mark.parametrize("account", [OUTSIDER, HUB, None, "", f"{MEMBER_A}:role/x"])
def test_no_role_arn_exists_for_an_account_that_is_not_a_configured_member(account: str | None) -> None:
    with pytest.raises(NotAMember, match="not a configured member"):
        member_role_arn(ORG, account, "aws")


class FakeSts:
    """AssumeRole answers with credentials that expire `lifetime` after the call."""

    def __init__(self, clock: list[float], lifetime: timedelta = timedelta(hours=1)) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self.calls: list[dict[str, Any]] = []
        self.fail: Exception | None = None

    def assume_role(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request)
        if self.fail:
            raise self.fail
        n = len(self.calls)
        expires = datetime.fromtimestamp(self.clock[0], UTC) + self.lifetime
        return {
            "Credentials": {
                "AccessKeyId": f"ASIA{n}",
                "SecretAccessKey": "secret",
                "SessionToken": f"token-{n}",
                "Expiration": expires,
            }
        }


class FakeSession:
    def __init__(self, **credentials: Any) -> None:
        self.credentials = credentials
        self.made: list[str] = []

    def client(self, service: str, config: Any = None) -> tuple[str, str, str]:
        self.made.append(service)
        return (service, self.credentials["aws_access_key_id"], self.credentials["region_name"])


def sessions(clock: list[float], sts: FakeSts) -> MemberSessions:
    return MemberSessions(
        ORG, sts=cast("STSClient", sts), partition="aws", now=lambda: clock[0], session_factory=FakeSession
    )


def test_the_hub_assumes_the_configured_role_of_the_events_account_in_the_configured_region() -> None:
    clock = [NOW.timestamp()]
    sts = FakeSts(clock)
    assert sessions(clock, sts).client(MEMBER_A, "sagemaker") == ("sagemaker", "ASIA1", "eu-west-1")
    assert sts.calls == [
        {"RoleArn": f"arn:aws:iam::{MEMBER_A}:role/TrainingGuardMember", "RoleSessionName": SESSION_NAME}
    ]


def test_an_account_that_is_not_a_member_is_refused_before_sts_is_asked() -> None:
    clock = [NOW.timestamp()]
    sts = FakeSts(clock)
    with pytest.raises(NotAMember):
        sessions(clock, sts).client(OUTSIDER, "sagemaker")
    assert sts.calls == []


def test_a_session_is_kept_per_account_until_shortly_before_it_expires() -> None:
    clock = [NOW.timestamp()]
    sts = FakeSts(clock)
    held = sessions(clock, sts)
    first = held.client(MEMBER_A, "sagemaker")
    assert held.client(MEMBER_A, "sagemaker") is first  # the same client, no second AssumeRole
    held.client(MEMBER_A, "cloudwatch")
    held.client(MEMBER_B, "sagemaker")
    assert [c["RoleArn"].split(":")[4] for c in sts.calls] == [MEMBER_A, MEMBER_B]
    clock[0] += 3600 - REFRESH_MARGIN_SECONDS - 1  # still valid for longer than any invocation
    assert held.client(MEMBER_A, "sagemaker") is first
    clock[0] += 1  # now within the margin: a new session before these credentials expire
    renewed = held.client(MEMBER_A, "sagemaker")
    assert renewed == ("sagemaker", "ASIA3", "eu-west-1")
    assert len(sts.calls) == 3


def test_a_refused_assume_role_is_an_action_failure_that_propagates() -> None:
    clock = [NOW.timestamp()]
    sts = FakeSts(clock)
    sts.fail = ClientError({"Error": {"Code": "AccessDenied", "Message": "not authorized"}}, "AssumeRole")
    with pytest.raises(ActionFailed, match=f"AssumeRole arn:aws:iam::{MEMBER_A}:role/TrainingGuardMember failed"):
        sessions(clock, sts).client(MEMBER_A, "sagemaker")


def test_sts_out_of_reach_is_an_action_failure_too() -> None:
    """Not only a refusal: a connection that fails is a BotoCoreError, which the sweep of the other members (and
    Lambda's retry of an event) must see as the guard's own failure, naming the role."""
    clock = [NOW.timestamp()]
    sts = FakeSts(clock)
    sts.fail = EndpointConnectionError(endpoint_url="https://sts.eu-west-1.amazonaws.com")
    with pytest.raises(ActionFailed, match=f"AssumeRole arn:aws:iam::{MEMBER_A}:role/TrainingGuardMember failed"):
        sessions(clock, sts).client(MEMBER_A, "sagemaker")


# --- a ledger per account ---------------------------------------------------------------------------------------


def test_the_same_job_name_in_two_accounts_is_two_jobs_in_the_ledger() -> None:
    shared = FakeLedger()
    a, b = AccountLedger(shared, MEMBER_A), AccountLedger(shared, MEMBER_B)
    key = f"t#{JOB}#debugger#VanishingGradient#IssuesFound"
    assert a.claim(key, now=NOW, lease_seconds=60) is Claim.GRANTED
    a.complete(key, now=NOW, ttl_seconds=60, outcome="stopped")
    assert b.claim(key, now=NOW, lease_seconds=60) is Claim.GRANTED  # not a duplicate of A's
    assert a.claim(key, now=NOW, lease_seconds=60) is Claim.DONE
    assert set(shared.items) == {f"{MEMBER_A}/{key}", f"{MEMBER_B}/{key}"}


def test_stop_records_carry_the_account_and_read_back_without_it() -> None:
    shared = FakeLedger()
    a, b = AccountLedger(shared, MEMBER_A), AccountLedger(shared, MEMBER_B)
    record = StopRecord(job=JOB, rule="VanishingGradient", reason="r", at=NOW, event_id="e1")
    assert a.claim_stop(record, ttl_seconds=60).granted
    assert b.get_stop(JOB) is None
    assert b.claim_stop(record, ttl_seconds=60).granted  # B's job of the same name is stopped on its own
    assert set(shared.stops) == {f"{MEMBER_A}/{JOB}", f"{MEMBER_B}/{JOB}"}
    again = a.claim_stop(record, ttl_seconds=60)
    assert again.previous is not None
    assert again.previous.job == JOB
    a.confirm_stop(JOB)
    assert a.fold(JOB, "t#later")
    held = a.get_stop(JOB)
    assert held is not None
    assert held.job == JOB
    assert held.confirmed
    assert shared.stops[f"{MEMBER_A}/{JOB}"].folded == (f"{MEMBER_A}/t#later",)
    b.drop_stop(JOB)
    assert b.get_stop(JOB) is None
    assert a.get_stop(JOB) is not None


# --- the responder that acts in the event's account ---------------------------------------------------------------


class FakeMembers:
    """MemberAccess with fake jobs per account (what the member roles would see)."""

    def __init__(self, jobs: dict[str, FakeJobs]) -> None:
        self.jobs = jobs
        self.asked: list[str] = []

    def responder_for(self, base: Responder, account: str) -> Responder:
        self.asked.append(account)
        return base.acting(jobs=self.jobs[account], ledger=AccountLedger(base.ledger, account), account_scope=account)


def running_job(account: str) -> FakeJobs:
    detail = load_event("vanishing_gradient_issues_found")["detail"]
    detail["TrainingJobArn"] = f"arn:aws:sagemaker:eu-west-1:{account}:training-job/{JOB}"
    job = parse_job(detail)
    return FakeJobs(jobs={JOB: job})


def event_from(account: str) -> dict[str, Any]:
    event = load_event("vanishing_gradient_issues_found")
    event["account"] = account
    event["region"] = "eu-west-1"
    event["detail"]["TrainingJobArn"] = f"arn:aws:sagemaker:eu-west-1:{account}:training-job/{JOB}"
    return event


def hub_guard(hub_jobs: FakeJobs | None = None) -> tuple[Responder, FakeLedger, FakePublisher]:
    ledger, publisher = FakeLedger(), FakePublisher()
    return Responder(HUB_CONFIG, hub_jobs or FakeJobs(), ledger, publisher, alarms=FakeAlarms()), ledger, publisher


def test_a_members_finding_stops_the_job_in_that_member_only() -> None:
    guard, ledger, publisher = hub_guard(hub_jobs=running_job(HUB))
    members = FakeMembers({MEMBER_A: running_job(MEMBER_A), MEMBER_B: running_job(MEMBER_B)})
    receipt = job_events.process(event_from(MEMBER_A), guard, account=HUB, now=NOW, members=members)
    assert receipt.stopped
    assert members.asked == [MEMBER_A]
    assert members.jobs[MEMBER_A].stop_calls == [JOB]
    assert members.jobs[MEMBER_B].stop_calls == []
    assert guard.jobs.stop_calls == []  # type: ignore[attr-defined]  # the hub's own job of the same name
    [note] = publisher.published
    assert note.account == MEMBER_A
    assert set(ledger.stops) == {f"{MEMBER_A}/{JOB}"}


def test_the_hubs_own_event_is_handled_with_its_own_credentials_and_unscoped_records() -> None:
    guard, ledger, _ = hub_guard(hub_jobs=running_job(HUB))
    members = FakeMembers({})
    receipt = job_events.process(event_from(HUB), guard, account=HUB, now=NOW, members=members)
    assert receipt.stopped
    assert members.asked == []
    assert guard.jobs.stop_calls == [JOB]  # type: ignore[attr-defined]
    assert set(ledger.stops) == {JOB}  # a single-account guard's key: turning it into a hub keeps its history


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    seen: list[tuple[str, float]] = []

    def add_metric(*, name: str, unit: MetricUnit, value: float) -> None:
        seen.append((name, value))

    monkeypatch.setattr(receipts.metrics, "add_metric", add_metric)
    return seen


def test_an_event_claiming_a_non_member_account_is_ignored_and_counted(counted: list[tuple[str, float]]) -> None:
    guard, ledger, publisher = hub_guard(hub_jobs=running_job(HUB))
    members = FakeMembers({OUTSIDER: running_job(OUTSIDER)})
    receipt = job_events.process(event_from(OUTSIDER), guard, account=HUB, now=NOW, members=members)
    assert receipt.ignored == f"event from account {OUTSIDER}, not a member of this guard's organization"
    assert not receipt.stopped
    assert members.asked == []
    assert members.jobs[OUTSIDER].stop_calls == []
    assert publisher.published == []
    assert ledger.items == {}
    assert (contract.Metric.EVENTS_FROM_OTHER_ACCOUNTS, 1) in counted


def test_a_non_members_alarm_is_ignored_and_counted(counted: list[tuple[str, float]]) -> None:
    guard, _, publisher = hub_guard()
    alarm = load_event("alarms/contributor_train_loss")
    alarm["account"] = OUTSIDER
    members = FakeMembers({})
    receipt = alarm_events.process(alarm, guard, account=HUB, now=NOW, members=members)
    assert receipt.ignored == f"event from account {OUTSIDER}, not a member of this guard's organization"
    assert members.asked == []
    assert publisher.published == []
    assert (contract.Metric.EVENTS_FROM_OTHER_ACCOUNTS, 1) in counted


def test_a_members_alarm_is_handled_through_that_members_role() -> None:
    config = GuardConfig.from_dict(
        {
            "metric_guards": [{"name": "loss-diverging", "metric": "train:loss", "threshold": 5, "action": "stop"}],
            "organization": {"hub_account": HUB, "region": "eu-west-1", "members": [MEMBER_A, MEMBER_B]},
        }
    )
    alarm = load_event("alarms/contributor_train_loss")
    alarm["account"] = MEMBER_B
    job = alarm_job(alarm)
    members = FakeMembers({MEMBER_B: FakeJobs(jobs={job.name: job})})
    guard = Responder(config, FakeJobs(), FakeLedger(), FakePublisher())
    receipt = alarm_events.process(alarm, guard, account=HUB, now=NOW, members=members)
    assert members.asked == [MEMBER_B]
    assert receipt.stopped
    assert members.jobs[MEMBER_B].stop_calls == [job.name]


def alarm_job(alarm: dict[str, Any]) -> Any:
    from training_guard.domain.metric_guards import parse_alarm_event

    name = parse_alarm_event(alarm).job
    detail = load_event("vanishing_gradient_issues_found")["detail"]
    detail.update(TrainingJobName=name, TrainingJobArn=f"arn:aws:sagemaker:eu-west-1:{MEMBER_B}:training-job/{name}")
    detail.pop("DebugRuleEvaluationStatuses", None)
    return parse_job(detail)


def test_a_single_account_guard_still_ignores_another_account_with_the_same_words(
    counted: list[tuple[str, float]],
) -> None:
    guard = Responder(GuardConfig(), running_job("123456789012"), FakeLedger(), FakePublisher())
    receipt = job_events.process(event_from(OUTSIDER), guard, account="123456789012", now=NOW)
    assert receipt.ignored == f"event from account {OUTSIDER}"
    assert (contract.Metric.EVENTS_FROM_OTHER_ACCOUNTS, 1) in counted


def test_member_access_swaps_the_members_clients_and_ledger_and_leaves_the_hubs_responder_alone() -> None:
    clock = [NOW.timestamp()]
    access = MemberAccess(sessions(clock, FakeSts(clock)))
    guard, ledger, publisher = hub_guard()
    acting = access.responder_for(guard, MEMBER_A)
    assert acting.jobs._client == ("sagemaker", "ASIA1", "eu-west-1")  # type: ignore[attr-defined]
    assert acting.alarms._client == ("cloudwatch", "ASIA1", "eu-west-1")  # type: ignore[union-attr]
    assert isinstance(acting.ledger, AccountLedger)
    assert acting.ledger.inner is ledger
    assert acting.publisher is publisher
    assert acting.config is guard.config
    assert isinstance(guard.jobs, FakeJobs)
    assert guard.ledger is ledger


def test_member_access_makes_a_sweeper_of_the_members_clients_sharing_what_was_said_per_account() -> None:
    clock = [NOW.timestamp()]
    sts = FakeSts(clock)
    access = MemberAccess(sessions(clock, sts))
    guard, ledger, publisher = hub_guard()
    hub = Sweeper(guard, guard.jobs, FakeAlarms(), FakeTrainingMetrics())
    a = access.sweeper_for(hub, MEMBER_A)
    assert a.jobs._client == ("sagemaker", "ASIA1", "eu-west-1")  # type: ignore[attr-defined]
    assert a.alarms._client == ("cloudwatch", "ASIA1", "eu-west-1")  # type: ignore[attr-defined]
    assert a.metrics._client == ("cloudwatch", "ASIA1", "eu-west-1")  # type: ignore[attr-defined]
    assert a.responder.jobs._client == ("sagemaker", "ASIA1", "eu-west-1")  # type: ignore[attr-defined]
    assert isinstance(a.responder.ledger, AccountLedger)
    assert (a.responder.ledger.inner, a.responder.ledger.account) == (ledger, MEMBER_A)
    assert a.responder.publisher is publisher
    # What was said once about A's jobs is remembered for A's next sweep, and is not B's.
    a._said.add("said")
    assert "said" in access.sweeper_for(hub, MEMBER_A)._said
    assert "said" not in access.sweeper_for(hub, MEMBER_B)._said
    assert "said" not in hub._said
    assert [c["RoleArn"].split(":")[4] for c in sts.calls] == [MEMBER_A, MEMBER_B]
    assert hub.responder is guard  # the hub's own sweeper is left alone
    assert guard.ledger is ledger


def test_member_access_makes_no_sweeper_for_an_account_that_is_not_configured() -> None:
    clock = [NOW.timestamp()]
    sts = FakeSts(clock)
    guard, _, _ = hub_guard()
    hub = Sweeper(guard, guard.jobs, FakeAlarms(), FakeTrainingMetrics())
    with pytest.raises(NotAMember):
        MemberAccess(sessions(clock, sts)).sweeper_for(hub, OUTSIDER)
    assert sts.calls == []


def test_responder_in_keeps_the_guard_for_its_own_account_and_single_account_guards() -> None:
    clock = [NOW.timestamp()]
    access = MemberAccess(sessions(clock, FakeSts(clock)))
    guard, _, _ = hub_guard()
    assert responder_in(guard, HUB, HUB, access) is guard
    assert responder_in(guard, HUB, MEMBER_A, access) is not guard
    single = Responder(GuardConfig(), FakeJobs(), FakeLedger(), FakePublisher())
    assert responder_in(single, HUB, MEMBER_A, access) is single
    assert responder_in(guard, HUB, None, access) is guard
    # a guard deployed in a member account acts on that account's own events itself, never through a role
    assert responder_in(guard, MEMBER_A, MEMBER_A, access) is guard


def _hub_root(monkeypatch: pytest.MonkeyPatch, organization: OrganizationConfig, region: str = "eu-west-1") -> Any:
    from training_guard import contract
    from training_guard.handlers import wiring

    monkeypatch.setenv("AWS_DEFAULT_REGION", region)
    monkeypatch.setenv(contract.ENV_CONFIG, GuardConfig(organization=organization).to_json())
    monkeypatch.setenv(contract.ENV_TABLE, "training-guard-state")
    monkeypatch.setenv(contract.ENV_TOPIC_ARN, f"arn:aws:sns:{region}:{HUB}:training-guard")
    return wiring.Root()


def test_a_root_keeps_its_member_sessions_and_a_new_root_starts_without_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new container (the emulation's next run) must not reuse a session assumed by an earlier one."""
    root = _hub_root(monkeypatch, ORG)
    first = root.members
    assert first is not None
    assert root.members is first
    assert _hub_root(monkeypatch, ORG).members is not first


def test_a_hub_whose_organization_names_units_gets_its_member_access(monkeypatch: pytest.MonkeyPatch) -> None:
    """`account_units` is a map: a cache keyed on the organization raised TypeError at such a hub's first event."""
    units = OrganizationConfig(
        hub_account=HUB, region="eu-west-1", members=(MEMBER_A,), account_units={MEMBER_A: "ou-ab12-cdef3456"}
    )
    root = _hub_root(monkeypatch, units)
    assert root.members is not None
    assert root.members is root.members
    assert root.members.sessions.organization == units


def test_a_guard_without_an_organization_has_no_member_access(monkeypatch: pytest.MonkeyPatch) -> None:
    from training_guard import contract
    from training_guard.handlers import wiring

    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv(contract.ENV_CONFIG, GuardConfig().to_json())
    monkeypatch.setenv(contract.ENV_TABLE, "training-guard-state")
    monkeypatch.setenv(contract.ENV_TOPIC_ARN, f"arn:aws:sns:eu-west-1:{HUB}:training-guard")
    assert wiring.Root().members is None


def test_a_member_event_without_member_access_fails_and_is_not_handled_as_the_hubs() -> None:
    guard, _, _ = hub_guard()
    with pytest.raises(ActionFailed, match=f"^act in member account {MEMBER_A} failed: no member access was given$"):
        responder_in(guard, HUB, MEMBER_A, None)


def test_a_members_clients_carry_its_credentials_and_region_without_a_boto3_session_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", boto3.Session())  # put back after the test

    def no_session(*_: Any, **__: Any) -> Any:
        raise AssertionError("a boto3 Session of its own loads every service model again")

    monkeypatch.setattr(boto3.session, "Session", no_session)
    monkeypatch.setattr(boto3, "Session", no_session)
    member = CredentialedClients(
        aws_access_key_id="ASIA1", aws_secret_access_key="secret", aws_session_token="token", region_name="eu-west-1"
    )
    made = member.client("sagemaker", config=RETRY_CONFIG)
    credentials = made._request_signer._credentials
    assert (credentials.access_key, credentials.secret_key, credentials.token) == ("ASIA1", "secret", "token")
    assert made.meta.region_name == "eu-west-1"
    assert made.meta.config.retries == RETRY_CONFIG.retries


@pytest.mark.parametrize(("region", "partition"), [("eu-west-1", "aws"), ("cn-north-1", "aws-cn")])
def test_the_member_roles_are_in_the_partition_of_the_hubs_region(
    monkeypatch: pytest.MonkeyPatch, region: str, partition: str
) -> None:
    root = _hub_root(monkeypatch, ORG, region)
    assert root.members is not None
    assert root.members.sessions.role_arn(MEMBER_A).startswith(f"arn:{partition}:iam::{MEMBER_A}:role/")


def test_a_stop_click_on_a_card_of_an_account_no_longer_served_stops_nothing() -> None:
    """A member taken out of the configuration after its card was posted: the hub's own job of that name is safe."""
    from training_guard.handlers.wiring import ResponderStops
    from training_guard.render.slack_actions import Act, Click

    guard, _, _ = hub_guard(hub_jobs=running_job(HUB))
    members = FakeMembers({MEMBER_A: running_job(MEMBER_A)})
    stops = ResponderStops(guard, own_account=HUB, region="eu-west-1", members=members)
    former = "999988887777"
    said = stops.stop(Click(Act.STOP, JOB, "U1", account=former), now=NOW)
    assert said == f"not stopped: {JOB} is in account {former}, which this guard does not serve"
    assert guard.jobs.stop_calls == []  # type: ignore[attr-defined]
    assert members.asked == []
    stops.stop(Click(Act.STOP, JOB, "U1", account=MEMBER_A), now=NOW)  # a member's card still acts there
    assert members.jobs[MEMBER_A].stop_calls == [JOB]
    stops.stop(Click(Act.STOP, JOB, "U1", account=HUB), now=NOW)  # and the guard's own
    assert guard.jobs.stop_calls == [JOB]  # type: ignore[attr-defined]
