"""One hub, two members and an outsider on moto's multi-account emulation: the real job-events and alarm-events
handlers, the real adapters, STS AssumeRole into each member's role (moto gives the assumed role's account: its
SageMaker jobs, its alarms). A stop in member A goes through A's role and touches nothing of member B, of the hub
or of the outsider; an event claiming the outsider's account is ignored before any role is assumed."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest

from tests.helpers import NOW, load_event, rule_status
from training_guard import contract
from training_guard.adapters.accounts import CredentialedClients, MemberAccess, MemberSessions
from training_guard.adapters.cloudwatch import CloudWatchAlarms
from training_guard.adapters.ledger import DynamoLedger
from training_guard.adapters.sagemaker import SageMakerJobs
from training_guard.adapters.sns import SnsPublisher
from training_guard.config.model import GuardConfig
from training_guard.handlers import alarm_events, job_events
from training_guard.services.responder import Responder
from training_guard_local import sagemaker_ext
from training_guard_local.emulator import mock_aws_kept_session

REGION = "eu-west-1"
HUB = "123456789012"  # moto's own account: the hub's credentials
MEMBER_A = "444455556666"
MEMBER_B = "777788889999"
OUTSIDER = "999999999999"
TABLE = "training-guard-state"
JOB = "pytorch-mnist-lr01-2026-11-30-02-10-00-123"
CONFIG = GuardConfig.from_dict(
    {
        "metric_guards": [{"name": "loss-diverging", "metric": "train:loss", "threshold": 5, "action": "stop"}],
        "organization": {
            "hub_account": HUB,
            "region": REGION,
            "members": [MEMBER_A, MEMBER_B],
            "organization_id": "o-a1b2c3d4e5",
        },
    }
)


class HookedClients(CredentialedClients):
    """A member's clients (the guard's own kind), each handed to `hook` as it is made: to record or fault its calls."""

    def __init__(self, hook: Callable[[Any], None], **credentials: Any) -> None:
        super().__init__(**credentials)
        self._hook = hook

    def client(self, service: str, config: Any = None) -> Any:
        made = super().client(service, config)
        self._hook(made)
        return made


class Organization:
    """The hub's resources, the member sessions, and what each account's SageMaker looks like."""

    def __init__(self) -> None:
        self.sts = boto3.client("sts", region_name=REGION)
        self.assumed: list[str] = []
        self.sts.meta.events.register(
            "provide-client-params.sts.AssumeRole", lambda params, **_: self.assumed.append(params["RoleArn"])
        )
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": contract.TABLE_PARTITION_KEY, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": contract.TABLE_PARTITION_KEY, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        sns = boto3.client("sns", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        self.topic = sns.create_topic(Name="training-guard")["TopicArn"]
        self.inbox = sqs.create_queue(QueueName="notifications")["QueueUrl"]
        inbox_arn = sqs.get_queue_attributes(QueueUrl=self.inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(
            TopicArn=self.topic, Protocol="sqs", Endpoint=inbox_arn, Attributes={"RawMessageDelivery": "true"}
        )
        self.dynamodb = dynamodb
        self.access = MemberAccess(MemberSessions(CONFIG.organization, sts=self.sts, partition="aws"))  # type: ignore[arg-type]
        self.guard = Responder(
            CONFIG,
            SageMakerJobs(boto3.client("sagemaker", region_name=REGION)),
            DynamoLedger(dynamodb, TABLE),
            SnsPublisher(sns, self.topic),
            alarms=CloudWatchAlarms(boto3.client("cloudwatch", region_name=REGION)),
        )

    def put_running_job(self, account: str, **detail: Any) -> None:
        base = load_event("vanishing_gradient_issues_found")["detail"]
        base.update(
            {
                "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{account}:training-job/{JOB}",
                "DebugRuleEvaluationStatuses": [rule_status("VanishingGradient", "InProgress")],
                **detail,
            }
        )
        sagemaker_ext.put_job(account, REGION, base)

    def event(self, account: str, *rules: dict[str, Any]) -> dict[str, Any]:
        event = load_event("vanishing_gradient_issues_found")
        event["account"] = account
        event["region"] = REGION
        event["detail"]["TrainingJobArn"] = f"arn:aws:sagemaker:{REGION}:{account}:training-job/{JOB}"
        if rules:
            event["detail"]["DebugRuleEvaluationStatuses"] = list(rules)
        return event

    def deliver(self, event: dict[str, Any]) -> Any:
        return job_events.process(event, self.guard, account=HUB, now=NOW, members=self.access)

    def status(self, account: str) -> str | None:
        return sagemaker_ext.job_status(account, REGION, JOB)

    def tags(self, account: str) -> dict[str, str]:
        from moto.sagemaker import models

        job = models.sagemaker_backends[account][REGION].training_jobs[JOB]
        return {t["Key"]: t["Value"] for t in job.tags}

    def notifications(self) -> list[dict[str, Any]]:
        sqs = boto3.client("sqs", region_name=REGION)
        messages = sqs.receive_message(QueueUrl=self.inbox, MaxNumberOfMessages=10).get("Messages", [])
        return [json.loads(m["Body"]) for m in messages]

    def alarms_in(self, account: str) -> list[str]:
        from moto.cloudwatch import models

        return sorted(models.cloudwatch_backends[account][REGION].alarms)


@contextmanager
def mocked_accounts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto's accounts with the hub's credentials (moto's own account) and SageMaker's stops taught."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("MOTO_ACCOUNT_ID", raising=False)
    with mock_aws_kept_session():
        sagemaker_ext.install()
        yield


@pytest.fixture
def org(monkeypatch: pytest.MonkeyPatch) -> Iterator[Organization]:
    with mocked_accounts(monkeypatch):
        organization = Organization()
        for account in (HUB, MEMBER_A, MEMBER_B, OUTSIDER):
            organization.put_running_job(account)  # the same job name in every account
        yield organization


def test_a_stop_in_member_a_goes_through_as_role_and_touches_nothing_else(org: Organization) -> None:
    receipt = org.deliver(org.event(MEMBER_A, rule_status("VanishingGradient", "IssuesFound")))
    assert receipt.stopped
    assert org.assumed == [f"arn:aws:iam::{MEMBER_A}:role/TrainingGuardMember"]
    assert org.status(MEMBER_A) == "Stopping"
    assert {a: org.status(a) for a in (HUB, MEMBER_B, OUTSIDER)} == dict.fromkeys(
        (HUB, MEMBER_B, OUTSIDER), "InProgress"
    )
    assert org.tags(MEMBER_A)[contract.TAG_STOPPED_BY] == contract.STOPPED_BY_VALUE
    assert contract.TAG_STOPPED_BY not in org.tags(MEMBER_B)
    [note] = org.notifications()
    assert (note["account"], note["kind"], note["outcome"]) == (MEMBER_A, "issues_found", "stopped")
    stop = org.dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": f"stop#{MEMBER_A}/{JOB}"}})
    assert stop["Item"]["rule"]["S"] == "VanishingGradient"


def test_member_bs_job_of_the_same_name_is_another_job(org: Organization) -> None:
    org.deliver(org.event(MEMBER_A, rule_status("VanishingGradient", "IssuesFound")))
    # B's job has the same name and the same transition: another account's, so not a duplicate of A's.
    receipt = org.deliver(org.event(MEMBER_B, rule_status("VanishingGradient", "IssuesFound")))
    assert receipt.stopped
    assert receipt.duplicates == 0
    assert org.assumed == [
        f"arn:aws:iam::{MEMBER_A}:role/TrainingGuardMember",
        f"arn:aws:iam::{MEMBER_B}:role/TrainingGuardMember",
    ]
    assert (org.status(MEMBER_A), org.status(MEMBER_B), org.status(HUB)) == ("Stopping", "Stopping", "InProgress")


def test_while_a_is_stopped_bs_rule_error_is_notified_and_b_runs_on(org: Organization) -> None:
    org.deliver(org.event(MEMBER_A, rule_status("VanishingGradient", "IssuesFound")))
    receipt = org.deliver(org.event(MEMBER_B, rule_status("ExplodingTensor", "Error", "No debugging data")))
    assert receipt.notifications == ["rule_error"]
    assert not receipt.stopped
    assert (org.status(MEMBER_A), org.status(MEMBER_B)) == ("Stopping", "InProgress")
    assert [(n["account"], n["kind"]) for n in org.notifications()] == [
        (MEMBER_A, "issues_found"),
        (MEMBER_B, "rule_error"),
    ]


def test_an_outsiders_event_is_ignored_before_any_role_is_assumed(org: Organization) -> None:
    receipt = org.deliver(org.event(OUTSIDER, rule_status("VanishingGradient", "IssuesFound")))
    assert receipt.ignored == f"event from account {OUTSIDER}, not a member of this guard's organization"
    assert org.assumed == []
    assert org.status(OUTSIDER) == "InProgress"
    assert org.notifications() == []
    assert org.dynamodb.scan(TableName=TABLE)["Items"] == []


def test_the_hubs_own_job_is_stopped_with_the_hubs_credentials(org: Organization) -> None:
    receipt = org.deliver(org.event(HUB, rule_status("VanishingGradient", "IssuesFound")))
    assert receipt.stopped
    assert org.assumed == []
    assert (org.status(HUB), org.status(MEMBER_A)) == ("Stopping", "InProgress")
    assert "Item" in org.dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": f"stop#{JOB}"}})


def test_a_members_per_job_alarms_are_created_in_that_member(org: Organization) -> None:
    tags = {"team": "vision", "training-guard:alarm:train:loss": "MAX above 5 3/3 stop"}
    org.put_running_job(MEMBER_B, Tags=tags)
    event = org.event(MEMBER_B, rule_status("VanishingGradient", "InProgress"))
    event["detail"]["Tags"] = tags
    receipt = org.deliver(event)
    assert receipt.alarms_created
    assert org.alarms_in(MEMBER_B) == receipt.alarms_created
    assert org.alarms_in(HUB) == []
    assert org.alarms_in(MEMBER_A) == []


def test_a_members_metric_guard_alarm_stops_that_members_job(org: Organization) -> None:
    alarm = load_event("alarms/contributor_train_loss")
    alarm["account"] = MEMBER_A
    alarm["region"] = REGION
    job = alarm_job_name(alarm)
    org_job = load_event("vanishing_gradient_issues_found")["detail"]
    org_job.update(TrainingJobName=job, TrainingJobArn=f"arn:aws:sagemaker:{REGION}:{MEMBER_A}:training-job/{job}")
    org_job.pop("DebugRuleEvaluationStatuses")
    sagemaker_ext.put_job(MEMBER_A, REGION, org_job)
    receipt = alarm_events.process(alarm, org.guard, account=HUB, now=NOW, members=org.access)
    assert receipt.stopped
    assert org.assumed == [f"arn:aws:iam::{MEMBER_A}:role/TrainingGuardMember"]
    assert sagemaker_ext.job_status(MEMBER_A, REGION, job) == "Stopping"


def alarm_job_name(alarm: dict[str, Any]) -> str:
    from training_guard.domain.metric_guards import parse_alarm_event

    name = parse_alarm_event(alarm).job
    assert name
    return name
