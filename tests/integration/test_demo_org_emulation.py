"""What the organization demo adds to the emulation: moto serving each request in the account of its credentials,
forwarding between accounts that keeps the event, AssumeRole that needs the role, the StopTrainingJob calls with the
credentials that signed them; and the scenario fields of a hub and its members, checked when loaded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from tests.helpers import load_event, rule_status
from training_guard.config.model import GuardConfig
from training_guard.domain.errors import ActionFailed
from training_guard_local import accounts_ext, sagemaker_ext
from training_guard_local import scenario as scenarios
from training_guard_local.demo import resolve, routes_from
from training_guard_local.emulator import ACCOUNT, REGION, Emulation

pytestmark = [
    pytest.mark.integration,
    # moto's STS model has no AccessDenied shape; the code reaches botocore all the same (asserted below)
    pytest.mark.filterwarnings("ignore:Exception\\(AccessDenied\\):UserWarning"),
]

MEMBER_A = "444455556666"
MEMBER_B = "777788889999"
JOB = "pytorch-mnist-lr01-2026-11-30-02-10-00"
ROLE_A = f"arn:aws:iam::{MEMBER_A}:role/TrainingGuardMember"
HUB_BUS = "training-guard-hub"
ORGANIZATION = {"hub_account": ACCOUNT, "region": REGION, "members": [MEMBER_A, MEMBER_B]}
CONFIG = GuardConfig.from_dict({"organization": ORGANIZATION})
TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "sts:AssumeRole"}
    ],
}


@pytest.fixture
def hub() -> Iterator[Emulation]:
    with Emulation(CONFIG, by_credentials=True) as emulation:
        yield emulation


def member_role(aws: Emulation, account: str) -> None:
    with aws.in_account(account):
        aws.client("iam").create_role(RoleName="TrainingGuardMember", AssumeRolePolicyDocument=json.dumps(TRUST))


def hub_queue_on_bus(aws: Emulation) -> str:
    """A rule on the hub bus that sends every SageMaker event to a queue of the hub's."""
    events, sqs = aws.client("events"), aws.client("sqs")
    events.create_event_bus(Name=HUB_BUS)
    url: str = sqs.create_queue(QueueName="hub-inbox")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="members", EventPattern=json.dumps({"source": ["aws.sagemaker"]}), EventBusName=HUB_BUS)
    events.put_targets(Rule="members", EventBusName=HUB_BUS, Targets=[{"Id": "inbox", "Arn": arn}])
    return url


def forward_from(aws: Emulation, account: str) -> None:
    """The member's forwarding rule on its default bus, to the hub bus."""
    with aws.in_account(account):
        events = aws.client("events")
        events.put_rule(Name="forward", EventPattern=json.dumps({"source": ["aws.sagemaker"]}))
        events.put_targets(
            Rule="forward",
            Targets=[
                {
                    "Id": "hub",
                    "Arn": f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{HUB_BUS}",
                    "RoleArn": f"arn:aws:iam::{account}:role/forwarding",
                }
            ],
        )


def put_event(aws: Emulation, account: str) -> None:
    with aws.in_account(account):
        aws.client("events").put_events(
            Entries=[
                {
                    "Source": "aws.sagemaker",
                    "DetailType": "SageMaker Training Job State Change",
                    "Detail": json.dumps({"TrainingJobName": JOB}),
                    "Resources": [f"arn:aws:sagemaker:{REGION}:{account}:training-job/{JOB}"],
                }
            ]
        )


def received(aws: Emulation, url: str) -> list[dict[str, Any]]:
    messages = aws.client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


def test_a_members_forwarded_event_reaches_the_hub_bus_with_the_members_account_and_resources(hub: Emulation) -> None:
    inbox = hub_queue_on_bus(hub)
    forward_from(hub, MEMBER_A)
    put_event(hub, MEMBER_A)
    [event] = received(hub, inbox)
    assert event["account"] == MEMBER_A
    assert event["resources"] == [f"arn:aws:sagemaker:{REGION}:{MEMBER_A}:training-job/{JOB}"]
    assert event["detail"] == {"TrainingJobName": JOB}


def test_without_the_extension_moto_makes_the_forwarded_event_the_hubs() -> None:
    """What accounts_ext corrects (and that it is in force only while installed)."""
    with Emulation(CONFIG) as aws:  # not by_credentials: moto's own forwarding
        inbox = hub_queue_on_bus(aws)
        forward_from(aws, MEMBER_A)
        put_event(aws, MEMBER_A)
        [event] = received(aws, inbox)
    assert "account" not in event  # moto's target input leaves it out
    assert event["resources"] == []  # and its forwarding drops them


def test_an_event_on_a_members_bus_without_a_forwarding_rule_never_reaches_the_hub(hub: Emulation) -> None:
    inbox = hub_queue_on_bus(hub)
    put_event(hub, MEMBER_B)  # B's member stack was never installed
    assert received(hub, inbox) == []


def test_a_put_naming_a_missing_bus_is_refused_whole_and_delivers_nothing(hub: Emulation) -> None:
    inbox = hub_queue_on_bus(hub)
    entry = {"Source": "aws.sagemaker", "DetailType": "SageMaker Training Job State Change", "Detail": "{}"}
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        hub.client("events").put_events(Entries=[{**entry, "EventBusName": HUB_BUS}, {**entry, "EventBusName": "nope"}])
    assert received(hub, inbox) == []


def test_assume_role_needs_the_role_in_its_account_and_then_acts_in_that_account(hub: Emulation) -> None:
    sts = boto3.client("sts", region_name=REGION)
    with pytest.raises(ClientError) as refused:
        sts.assume_role(RoleArn=ROLE_A, RoleSessionName="training-guard-hub")
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    member_role(hub, MEMBER_A)
    credentials = sts.assume_role(RoleArn=ROLE_A, RoleSessionName="training-guard-hub")["Credentials"]
    sagemaker_ext.put_job(
        MEMBER_A, REGION, load_event("vanishing_gradient_issues_found")["detail"] | {"TrainingJobName": JOB}
    )
    assumed = {
        "aws_access_key_id": credentials["AccessKeyId"],
        "aws_secret_access_key": credentials["SecretAccessKey"],
        "aws_session_token": credentials["SessionToken"],
        "region_name": REGION,
    }
    # The emulation's session (as the functions' member clients): its clients answer StopTrainingJob.
    assert boto3.client("sts", **assumed).get_caller_identity()["Account"] == MEMBER_A
    boto3.client("sagemaker", **assumed).stop_training_job(TrainingJobName=JOB)
    assert sagemaker_ext.job_status(MEMBER_A, REGION, JOB) == "Stopping"
    [call] = sagemaker_ext.stop_calls(MEMBER_A, REGION, JOB)
    assert accounts_ext.assumed_role_of(call.access_key) == ROLE_A
    assert accounts_ext.assumed_roles(MEMBER_A) == [ROLE_A]


def test_outside_the_extension_moto_hands_out_credentials_for_any_role(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MOTO_ACCOUNT_ID", raising=False)
    with mock_aws():
        sts = boto3.client("sts", region_name=REGION, aws_access_key_id="a", aws_secret_access_key="b")
        assert sts.assume_role(RoleArn=ROLE_A, RoleSessionName="training-guard-hub")["Credentials"]["AccessKeyId"]


def member_event() -> dict[str, Any]:
    event = load_event("vanishing_gradient_issues_found")
    event["account"] = MEMBER_A
    event["region"] = REGION
    event["detail"]["TrainingJobName"] = JOB
    event["detail"]["TrainingJobArn"] = f"arn:aws:sagemaker:{REGION}:{MEMBER_A}:training-job/{JOB}"
    event["detail"]["DebugRuleEvaluationStatuses"] = [rule_status("VanishingGradient", "IssuesFound")]
    return event


def test_the_hubs_handler_stops_a_members_job_only_through_the_members_role(hub: Emulation) -> None:
    event = member_event()
    for account in (ACCOUNT, MEMBER_A):  # the same job name in the hub and in A
        sagemaker_ext.put_job(account, REGION, event["detail"] | {"TrainingJobStatus": "InProgress"})
    with pytest.raises(ActionFailed, match="AssumeRole"):  # A's member stack is not there yet
        hub.deliver(event)
    assert sagemaker_ext.job_status(MEMBER_A, REGION, JOB) == "InProgress"
    member_role(hub, MEMBER_A)
    receipt = hub.deliver(event)
    assert receipt["stopped"]
    assert (sagemaker_ext.job_status(MEMBER_A, REGION, JOB), hub.job_status(JOB)) == ("Stopping", "InProgress")
    [call] = sagemaker_ext.stop_calls(job=JOB)
    assert (call.account, accounts_ext.assumed_role_of(call.access_key)) == (MEMBER_A, ROLE_A)


def test_the_hubs_own_stop_is_signed_with_the_hubs_credentials(hub: Emulation) -> None:
    event = member_event()
    event["account"] = ACCOUNT
    event["detail"]["TrainingJobArn"] = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{JOB}"
    assert hub.deliver(event)["stopped"]
    [call] = sagemaker_ext.stop_calls(job=JOB)
    assert call.account == ACCOUNT
    assert accounts_ext.assumed_role_of(call.access_key) is None
    assert accounts_ext.assumed_roles(MEMBER_A) == []


def test_a_hub_emulation_must_be_moto_s_default_account() -> None:
    with pytest.raises(ValueError, match="default account"):
        Emulation(CONFIG, by_credentials=True, account=MEMBER_A)


# --- the templates the demo installs ---------------------------------------------------------------------------
MEMBER_TEMPLATE: dict[str, Any] = {
    "Resources": {
        "Role": {"Type": "AWS::IAM::Role", "Properties": {"RoleName": "TrainingGuardMember"}},
        "Forwarder": {"Type": "AWS::IAM::Role", "Properties": {}},
        "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
    }
}


def test_template_values_are_resolved_as_cloudformation_makes_them_in_the_account() -> None:
    at = {"account": MEMBER_A, "region": REGION, "stack": "TrainingGuardMember"}
    joined = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":sagemaker:", {"Ref": "AWS::Region"}, ":",
                                {"Ref": "AWS::AccountId"}, ":training-job/*"]]}  # fmt: skip
    assert resolve(joined, MEMBER_TEMPLATE, **at) == f"arn:aws:sagemaker:{REGION}:{MEMBER_A}:training-job/*"
    assert resolve({"Fn::GetAtt": ["Role", "Arn"]}, MEMBER_TEMPLATE, **at) == ROLE_A
    assert resolve([{"Ref": "Forwarder"}], MEMBER_TEMPLATE, **at) == ["TrainingGuardMember-Forwarder"]
    with pytest.raises(ValueError, match="cannot resolve"):
        resolve({"Fn::GetAtt": ["Queue", "Arn"]}, MEMBER_TEMPLATE, **at)


def test_a_rule_on_the_stacks_own_bus_is_routed_to_that_bus_by_name() -> None:
    function = {
        "Type": "AWS::Lambda::Function",
        "Properties": {"Handler": "training_guard.handlers.job_events.handler"},
    }
    target = [{"Arn": {"Fn::GetAtt": ["Function", "Arn"]}, "Id": "Target0"}]
    template = {
        "Resources": {
            "Function": function,
            "Bus": {"Type": "AWS::Events::EventBus", "Properties": {"Name": HUB_BUS}},
            "Default": {"Type": "AWS::Events::Rule", "Properties": {"EventPattern": {"a": [1]}, "Targets": target}},
            "Members": {
                "Type": "AWS::Events::Rule",
                "Properties": {"EventPattern": {"b": [2]}, "EventBusName": {"Ref": "Bus"}, "Targets": target},
            },
        }
    }
    handler = "training_guard.handlers.job_events.handler"
    assert routes_from(template) == [
        ("Default", {"a": [1]}, handler, "default"),
        ("Members", {"b": [2]}, handler, HUB_BUS),
    ]


# --- the scenario fields ----------------------------------------------------------------------------------------
def scenario(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(scenarios.resolve("organization").read_text())
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value
    return data


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(scenarios.ScenarioError) as invalid:
        scenarios.parse(data)
    return invalid.value.problems


def test_the_shipped_organization_scenario_loads_with_its_accounts_and_expectations() -> None:
    loaded = scenarios.load(scenarios.resolve("organization"))
    assert loaded.config.organization is not None
    assert {key: job.account for key, job in loaded.jobs.items()} == {
        "resnet": None,
        "mnist-a": MEMBER_A,
        "mnist-b": MEMBER_B,
        "outsider": "999999999999",
    }
    assert loaded.expect["mnist-a"].stopped_via == ROLE_A
    assert loaded.expect["resnet"].stopped_via == scenarios.HUB_CREDENTIALS
    assert loaded.expect["outsider"].ignored_events == 2


def test_a_jobs_account_is_twelve_digits() -> None:
    assert problems(scenario(jobs__outsider__account="9999")) == [
        "jobs.outsider.account: an account ID is 12 digits, got '9999'"
    ]


def test_a_job_in_another_account_needs_an_organization() -> None:
    data = scenario()
    data["config"].pop("organization")
    data["config"]["slack"] = {"webhooks": {"default": {}}}
    found = problems(data)
    assert (
        f"jobs.mnist-a.account: the scenario's config guards one account ({ACCOUNT} here); jobs in other "
        "accounts need its organization section" in found
    )
    assert len(found) == 3  # mnist-a, mnist-b, outsider; the hub's own job has no account


def test_the_demos_hub_is_motos_default_account_in_the_emulations_region() -> None:
    data = scenario()
    data["config"]["organization"]["hub_account"] = "111122223333"
    data["config"]["organization"]["region"] = "eu-west-1"
    data["config"]["slack"]["by_account"] = {MEMBER_A: "research-a"}
    data["jobs"]["resnet"]["account"] = "111122223333"
    assert problems(data) == [
        f"organization.hub_account: the demo's hub is moto's default account {ACCOUNT} (whose credentials the "
        "emulation has), and the scenario's config names 111122223333",
        f"organization.region: the demo runs in {REGION}, and the scenario's config names eu-west-1",
    ]


def test_stopped_via_is_a_role_arn_or_hub_and_ignored_events_a_count() -> None:
    data = scenario()
    data["expect"]["mnist-a"]["stopped_via"] = "TrainingGuardMember"
    data["expect"]["outsider"]["ignored_events"] = -1
    assert problems(data) == [
        "expect.mnist-a.stopped_via: a role ARN (arn:aws:iam::<account>:role/<name>) or 'hub' (the hub's own "
        "credentials), got 'TrainingGuardMember'",
        "expect.outsider.ignored_events: must be a whole number from 0, got -1",
    ]
