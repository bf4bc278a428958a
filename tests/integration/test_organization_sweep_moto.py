"""The hub's sweep on moto's accounts: the real sweeper handler and adapters, STS AssumeRole into each member's role
(moto gives the assumed role's account: its SageMaker jobs, its alarms, its metrics).

A finding whose event was lost in member A is found by the sweep and stops A's job through A's role; member B's job
of the same name is another job (its stall report and its per-job alarm are B's, its orphaned alarm is deleted in
B); the outsider's job is never looked at. With A's role refused, B is swept all the same and the sweep fails after
it. Every call made with a member's credentials is recorded: tests/infra/test_organization_sweeper.py checks that the
synthesized member role allows each of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from tests.faults import ACCESS_DENIED, refuse
from tests.helpers import NOW, rule_status
from tests.integration import test_organization_moto as base
from tests.integration.test_organization_moto import HUB, JOB, MEMBER_A, MEMBER_B, OUTSIDER, REGION, TABLE
from training_guard import contract
from training_guard.adapters.accounts import CredentialedClients, MemberAccess, MemberSessions
from training_guard.adapters.cloudwatch import CloudWatchAlarms, TrainingMetrics
from training_guard.adapters.sagemaker import SageMakerJobs
from training_guard.config.model import GuardConfig
from training_guard.domain.metric_guards import job_alarm_name
from training_guard.handlers import sweeper as sweeper_handler
from training_guard.services.responder import Responder
from training_guard.services.sweeper import OrganizationSweepIncomplete, Sweeper
from training_guard_local import cloudwatch_ext

CONFIG = GuardConfig.from_dict(
    {
        "metric_guards": [{"name": "loss-diverging", "metric": "train:loss", "threshold": 5, "action": "stop"}],
        "stall": {"minutes": 10},
        "organization": {"hub_account": HUB, "region": REGION, "members": [MEMBER_A, MEMBER_B]},
    }
)
ROLE = "arn:aws:iam::{}:role/TrainingGuardMember"
ORPHAN = job_alarm_name("ended-long-ago", "train:loss")
ALARM_TAG = {"training-guard:alarm:train:loss": "MAX above 5 3/3 stop"}

# Every action a member's sweep below makes with the member's credentials, as IAM names it.
MEMBER_SWEEP_ACTIONS = frozenset(
    {
        "sagemaker:ListTrainingJobs",
        "sagemaker:DescribeTrainingJob",
        "sagemaker:ListTags",
        "sagemaker:StopTrainingJob",
        "sagemaker:AddTags",
        "cloudwatch:DescribeAlarms",
        "cloudwatch:DescribeAlarmContributors",
        "cloudwatch:DeleteAlarms",
        "cloudwatch:PutMetricAlarm",
        "cloudwatch:GetMetricData",
    }
)


class Organization(base.Organization):
    """The hub of tests/integration/test_organization_moto.py with a sweeper, and every member call recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.member_calls: list[tuple[str, str]] = []  # (account, IAM action) of every call with a member's role
        assert CONFIG.organization is not None
        self.guard = Responder(
            CONFIG, self.guard.jobs, self.guard.ledger, self.guard.publisher, alarms=self.guard.alarms
        )
        sessions = MemberSessions(CONFIG.organization, sts=self.sts, partition="aws", session_factory=self.session)
        self.access = MemberAccess(sessions)
        cloudwatch = boto3.client("cloudwatch", region_name=REGION)
        self.sweeper = Sweeper(
            self.guard,
            SageMakerJobs(boto3.client("sagemaker", region_name=REGION)),
            CloudWatchAlarms(cloudwatch),
            TrainingMetrics(cloudwatch),
        )

    def session(self, **credentials: Any) -> CredentialedClients:
        """A member's credentials (made right after its AssumeRole), whose clients record every call they make."""
        account = self.assumed[-1].split(":")[4]
        calls = self.member_calls

        def record(model: Any, **_: Any) -> None:
            prefix = (
                model.service_model.signing_name if model.service_model.signing_name != "monitoring" else "cloudwatch"
            )
            calls.append((account, f"{prefix}:{model.name}"))

        return base.HookedClients(
            lambda made: made.meta.events.register("before-parameter-build", record), **credentials
        )

    def sweep(self) -> dict[str, Any]:
        return sweeper_handler.process(self.sweeper, now=NOW, account=HUB, region=REGION, members=self.access)

    def refuse_role_of(self, account: str) -> None:
        """STS refuses AssumeRole into this account's member role (its trust does not admit the hub)."""

        role = ROLE.format(account).replace(":", "%3A").replace("/", "%2F")
        refuse(self.sts, "AssumeRole", lambda request: ACCESS_DENIED if role in str(request.body) else None)

    def put_alarm(self, account: str, name: str) -> None:
        """An alarm in `account`, put with credentials of that account (a role assumed outside the hub's sessions)."""
        sts = boto3.client("sts", region_name=REGION)
        credentials = sts.assume_role(RoleArn=ROLE.format(account), RoleSessionName="test-set-up")["Credentials"]
        boto3.client(
            "cloudwatch",
            region_name=REGION,
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
        ).put_metric_alarm(
            AlarmName=name,
            Namespace=contract.SAGEMAKER_TRAINING_NAMESPACE,
            MetricName="train:loss",
            Dimensions=[{"Name": contract.JOB_DIMENSION, "Value": "ended-long-ago"}],
            Statistic="Maximum",
            Period=60,
            EvaluationPeriods=3,
            Threshold=5.0,
            ComparisonOperator="GreaterThanThreshold",
        )


@pytest.fixture
def org(monkeypatch: pytest.MonkeyPatch) -> Iterator[Organization]:
    with base.mocked_accounts(monkeypatch):
        cloudwatch_ext.install()
        organization = Organization()
        found = {"DebugRuleEvaluationStatuses": [rule_status("VanishingGradient", "IssuesFound", "condition met")]}
        organization.put_running_job(MEMBER_A, **found)  # its event was lost: only the sweep can find it
        organization.put_running_job(MEMBER_B, Tags={"team": "vision", **ALARM_TAG})
        organization.put_running_job(OUTSIDER, **found)
        organization.put_running_job(HUB)
        organization.put_alarm(MEMBER_B, ORPHAN)
        yield organization


def test_a_lost_finding_in_member_a_is_found_by_the_sweep_and_stopped_through_as_role(org: Organization) -> None:
    result = org.sweep()
    assert org.status(MEMBER_A) == "Stopping"
    assert {a: org.status(a) for a in (HUB, MEMBER_B, OUTSIDER)} == dict.fromkeys(
        (HUB, MEMBER_B, OUTSIDER), "InProgress"
    )
    assert org.tags(MEMBER_A)[contract.TAG_STOPPED_BY] == contract.STOPPED_BY_VALUE
    assert contract.TAG_STOPPED_BY not in org.tags(MEMBER_B)
    assert sorted(org.assumed) == [ROLE.format(MEMBER_A), ROLE.format(MEMBER_B)]
    stop = org.dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": f"stop#{MEMBER_A}/{JOB}"}})
    assert stop["Item"]["rule"]["S"] == "VanishingGradient"
    accounts = result["accounts"]
    assert [r["job"] for r in accounts[MEMBER_A]["reconciled"]] == [JOB]
    assert accounts[MEMBER_A]["account"] == MEMBER_A


def test_every_notification_of_the_sweep_names_the_account_it_is_about(org: Organization) -> None:
    org.sweep()
    notes = sorted((n["account"], n["kind"], n["outcome"]) for n in org.notifications())
    assert notes == [
        (HUB, "metric_stall", "notified"),  # declared train:loss, published nothing for 48 min
        (MEMBER_A, "issues_found", "stopped"),
        (MEMBER_B, "metric_stall", "notified"),
    ]


def test_member_bs_alarms_are_kept_in_b(org: Organization) -> None:
    result = org.sweep()
    assert result["accounts"][MEMBER_B]["orphaned_alarms_deleted"] == [ORPHAN]
    created = org.alarms_in(MEMBER_B)
    assert created == [job_alarm_name(JOB, "train:loss")]  # its per-job guard, made by the reconciliation, in B
    assert org.alarms_in(HUB) == []
    assert org.alarms_in(MEMBER_A) == []


def test_the_outsiders_job_is_never_looked_at(org: Organization) -> None:
    org.sweep()
    assert OUTSIDER not in {account for account, _ in org.member_calls}
    assert all(OUTSIDER not in arn for arn in org.assumed)
    assert org.status(OUTSIDER) == "InProgress"
    assert org.tags(OUTSIDER) == {"team": "vision", "project": "mnist"}


def test_with_as_role_refused_b_is_swept_and_the_sweep_fails_after_it(org: Organization) -> None:
    org.refuse_role_of(MEMBER_A)
    org.put_running_job(MEMBER_B, DebugRuleEvaluationStatuses=[rule_status("VanishingGradient", "IssuesFound", "x")])
    with pytest.raises(OrganizationSweepIncomplete) as incomplete:
        org.sweep()
    report = incomplete.value.report
    assert list(report.failed) == [MEMBER_A]
    assert "AccessDenied" in report.failed[MEMBER_A]
    assert ROLE.format(MEMBER_A) in report.failed[MEMBER_A]
    assert (org.status(MEMBER_A), org.status(MEMBER_B)) == ("InProgress", "Stopping")
    assert {account for account, _ in org.member_calls} == {MEMBER_B}


def test_the_member_calls_of_a_sweep_are_exactly_the_recorded_ones(org: Organization) -> None:
    """What tests/infra/test_organization_sweeper.py checks the member role against: a new call here fails there."""
    org.sweep()
    assert {action for _, action in org.member_calls} == MEMBER_SWEEP_ACTIONS
