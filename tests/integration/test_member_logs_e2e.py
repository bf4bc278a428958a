"""A member's training log lines reach the hub's log rules end to end on the emulation: the organization's templates
deployed on moto, the hub's custom resource putting the filter into each member through its log role, a job's lines
written in the member, routed filter -> the hub's destination -> its Firehose stream -> the real log-events function,
and the stop made in the member through its role (docs/design/log-subscription.md, "Members")."""

from __future__ import annotations

import importlib
import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard.handlers import log_subscription
from training_guard_local import accounts_ext, logs_ext, sagemaker_ext
from training_guard_local import scenario as scenarios
from training_guard_local.demo import resolve, role_name, synthesize_stacks
from training_guard_local.emulator import (
    ACCOUNT,
    LOG_EVENTS_FUNCTION,
    REGION,
    Emulation,
    function_arn,
    handler_output_to_stderr,
)

pytestmark = pytest.mark.integration

MEMBER_A, MEMBER_B = "444455556666", "777788889999"
HUB_STACK, MEMBER_STACK = "TrainingGuard", "TrainingGuardMember"
GROUP = contract.TRAINING_LOG_GROUP
LOGS = Path(__file__).resolve().parents[1] / "data" / "training_logs"
NAN_JOB, HEALTHY_JOB = "pytorch-mlp-nan-2026-12-06-01-00-00", "pytorch-mnist-2026-12-06-01-00-00"
SUBSCRIBER_FUNCTION = "training-guard-log-subscriber"


@pytest.fixture(scope="module")
def templates() -> tuple[GuardConfig, dict[str, Any], dict[str, Any]]:
    """The shipped organization scenario's hub and member templates (kept by the demo's template cache)."""
    scenario = scenarios.load(scenarios.resolve("organization"))
    hub, member = synthesize_stacks(scenario)
    assert member is not None
    return scenario.config, hub, member


def of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def target_of(value: Any) -> str:
    """The logical ID a `Fn::GetAtt [id, Arn]` names."""
    return str(value["Fn::GetAtt"][0])


def made(value: Any, template: dict[str, Any], arns: dict[str, str], *, account: str, stack: str) -> Any:
    """A template value as CloudFormation makes it: `Fn::GetAtt [id, Arn]` of a resource made here, then what the
    demo resolves (pseudo parameters, Fn::Join, roles)."""
    if isinstance(value, dict) and list(value) == ["Fn::GetAtt"] and value["Fn::GetAtt"][0] in arns:
        return arns[value["Fn::GetAtt"][0]]
    if isinstance(value, dict):
        value = {k: made(v, template, arns, account=account, stack=stack) for k, v in value.items()}
    elif isinstance(value, list):
        value = [made(v, template, arns, account=account, stack=stack) for v in value]
    return resolve(value, template, account=account, region=REGION, stack=stack)


def zipped() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("index.py", "")  # moto runs no code; the emulation runs the handler the template names
    return buffer.getvalue()


def deploy_hub(aws: Emulation, hub: dict[str, Any]) -> dict[str, str]:
    """The hub's part of the members' log path from its template: the log-events function (moto holds its handler),
    the bucket, the Firehose stream with its processor, the destination with its access policy. Returns the ARNs
    made, by logical ID."""
    [(stream_id, stream)] = of_type(hub, "AWS::KinesisFirehose::DeliveryStream").items()
    [(destination_id, destination)] = of_type(hub, "AWS::Logs::Destination").items()
    [(_, subscription)] = of_type(hub, "Custom::TrainingGuardLogSubscription").items()
    s3_config = stream["Properties"]["ExtendedS3DestinationConfiguration"]
    [processor] = s3_config["ProcessingConfiguration"]["Processors"]
    [function_id] = [
        target_of(p["ParameterValue"]) for p in processor["Parameters"] if p["ParameterName"] == "LambdaArn"
    ]
    arns: dict[str, str] = {}
    iam = aws.client("iam")
    for role_id in (
        target_of(hub["Resources"][function_id]["Properties"]["Role"]),
        target_of(s3_config["RoleARN"]),
        target_of(destination["Properties"]["RoleArn"]),
    ):
        props = hub["Resources"][role_id]["Properties"]
        trust = made(props["AssumeRolePolicyDocument"], hub, arns, account=ACCOUNT, stack=HUB_STACK)
        arns[role_id] = iam.create_role(
            RoleName=role_name(hub, role_id, HUB_STACK), AssumeRolePolicyDocument=json.dumps(trust)
        )["Role"]["Arn"]
    function = hub["Resources"][function_id]["Properties"]
    arns[function_id] = aws.client("lambda").create_function(
        FunctionName=LOG_EVENTS_FUNCTION,
        Runtime=function["Runtime"],
        Role=arns[target_of(function["Role"])],
        Handler=function["Handler"],
        Code={"ZipFile": zipped()},
    )["FunctionArn"]
    arns[target_of(subscription["Properties"]["ServiceToken"])] = function_arn(SUBSCRIBER_FUNCTION)
    bucket_id = target_of(s3_config["BucketARN"])
    bucket = f"{HUB_STACK}-{bucket_id}".lower()[:63]
    aws.client("s3").create_bucket(Bucket=bucket)
    arns[bucket_id] = f"arn:aws:s3:::{bucket}"
    arns[stream_id] = aws.client("firehose").create_delivery_stream(
        DeliveryStreamName=f"{HUB_STACK}-{stream_id}",
        DeliveryStreamType=stream["Properties"]["DeliveryStreamType"],
        ExtendedS3DestinationConfiguration=made(s3_config, hub, arns, account=ACCOUNT, stack=HUB_STACK),
    )["DeliveryStreamARN"]
    props = made(destination["Properties"], hub, arns, account=ACCOUNT, stack=HUB_STACK)
    logs = aws.client("logs")
    arns[destination_id] = logs.put_destination(
        destinationName=props["DestinationName"], targetArn=props["TargetArn"], roleArn=props["RoleArn"]
    )["destination"]["arn"]
    logs.put_destination_policy(destinationName=props["DestinationName"], accessPolicy=props["DestinationPolicy"])
    return arns


def deploy_member(aws: Emulation, member: dict[str, Any], account: str) -> None:
    """The member stack's roles and their policies, as the StackSet makes them in `account`."""
    with aws.in_account(account):
        iam = aws.client("iam")
        for role_id, role in of_type(member, "AWS::IAM::Role").items():
            trust = made(
                role["Properties"]["AssumeRolePolicyDocument"], member, {}, account=account, stack=MEMBER_STACK
            )
            iam.create_role(
                RoleName=role_name(member, role_id, MEMBER_STACK), AssumeRolePolicyDocument=json.dumps(trust)
            )
        for policy in of_type(member, "AWS::IAM::Policy").values():
            props = made(policy["Properties"], member, {}, account=account, stack=MEMBER_STACK)
            for role in props["Roles"]:
                iam.put_role_policy(
                    RoleName=role, PolicyName=props["PolicyName"], PolicyDocument=json.dumps(props["PolicyDocument"])
                )


def create_event(hub: dict[str, Any], arns: dict[str, str]) -> dict[str, Any]:
    """The custom resource's Create as CloudFormation sends it to the subscriber function."""
    [(logical_id, subscription)] = of_type(hub, "Custom::TrainingGuardLogSubscription").items()
    return {
        "RequestType": "Create",
        "ServiceToken": function_arn(SUBSCRIBER_FUNCTION),
        "ResponseURL": "https://cloudformation-custom-resource-response-useast1.s3.amazonaws.com/presigned",
        "StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{HUB_STACK}/1",
        "RequestId": "create-1",
        "LogicalResourceId": logical_id,
        "ResourceType": subscription["Type"],
        "ResourceProperties": made(subscription["Properties"], hub, arns, account=ACCOUNT, stack=HUB_STACK),
    }


@dataclass
class Organization:
    aws: Emulation
    routed: logs_ext.Destinations
    arns: dict[str, str]
    answered: dict[str, Any]  # the subscriber's answer to CloudFormation

    def handler(self, path: str) -> Any:
        module, function = path.rsplit(".", 1)
        with handler_output_to_stderr():
            return getattr(importlib.import_module(module), function)

    def write(self, account: str, job: str, log: str) -> None:
        """The job runs in `account` and writes its log, one PutLogEvents call, to its stream of the training group."""
        sagemaker_ext.put_job(account, REGION, running(job))
        now_ms = int(datetime.now(UTC).timestamp() * 1000)
        lines = [line for line in (LOGS / log).read_text(encoding="utf-8").splitlines() if line.strip()]
        stream = logs_ext.stream_name(job, epoch=now_ms // 1000 - len(lines))
        with self.aws.in_account(account):
            logs = self.aws.client("logs")
            logs.create_log_stream(logGroupName=GROUP, logStreamName=stream)
            events = [{"timestamp": now_ms - (len(lines) - i) * 1000, "message": line} for i, line in enumerate(lines)]
            logs.put_log_events(logGroupName=GROUP, logStreamName=stream, logEvents=events)

    def process(self, batch: logs_ext.FirehoseBatch) -> dict[str, Any]:
        """Firehose invokes its processor, the hub's log-events function, with the batch."""
        context = self.aws.context(LOG_EVENTS_FUNCTION)
        assert context.invoked_function_arn == batch.chain.function_arn
        return self.aws.invoke(self.handler(batch.chain.handler), batch.event, context)


def running(job: str) -> dict[str, Any]:
    return {
        "TrainingJobName": job,
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": "Training",
        "AlgorithmSpecification": {"TrainingInputMode": "File"},
        "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
    }


@pytest.fixture
def org(
    templates: tuple[GuardConfig, dict[str, Any], dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Organization]:
    config, hub, member = templates
    with Emulation(config, by_credentials=True) as aws:
        routed = aws.enter_context(logs_ext.Destinations())  # the destination chain, in front of moto
        arns = deploy_hub(aws, hub)
        for account in (MEMBER_A, MEMBER_B):
            deploy_member(aws, member, account)
        answers: list[dict[str, Any]] = []
        monkeypatch.setattr(log_subscription, "send_response", lambda url, document: answers.append(document))
        aws.invoke(log_subscription.handler, create_event(hub, arns), aws.context(SUBSCRIBER_FUNCTION))
        [answered] = answers
        yield Organization(aws, routed, arns, answered)


def member_filters(aws: Emulation, account: str) -> dict[str, str]:
    with aws.in_account(account):
        found = aws.client("logs").describe_subscription_filters(logGroupName=GROUP)["subscriptionFilters"]
    return {f["filterName"]: f["destinationArn"] for f in found}


def test_the_hubs_custom_resource_puts_the_filter_to_the_hubs_destination_in_each_member(org: Organization) -> None:
    destination = f"arn:aws:logs:{REGION}:{ACCOUNT}:destination:training-guard-member-logs"
    assert (org.answered["Status"], org.answered["Data"]["Status"]) == ("SUCCESS", "subscribed")
    assert org.answered["Data"]["Members"] == "2 of 2 members subscribed"
    for account in (MEMBER_A, MEMBER_B):
        assert member_filters(org.aws, account) == {contract.LOG_SUBSCRIPTION_FILTER_NAME: destination}
    # through each member's log role, the one role the subscriber assumed there
    for account in (MEMBER_A, MEMBER_B):
        assert accounts_ext.assumed_roles(account) == [f"arn:aws:iam::{account}:role/TrainingGuardMember-Logs"]


def test_a_members_nan_is_stopped_once_in_the_member_through_its_role_and_every_record_is_dropped(
    org: Organization,
) -> None:
    org.write(MEMBER_A, NAN_JOB, "pytorch_mlp_nan.log")
    org.write(MEMBER_B, HEALTHY_JOB, "pytorch_mnist_healthy.log")
    [batch] = org.routed.drain()
    stream_arn = f"arn:aws:firehose:{REGION}:{ACCOUNT}:deliverystream/{HUB_STACK}-"
    assert batch.chain.stream_arn.startswith(stream_arn)
    assert batch.chain.handler == logs_ext.LOG_EVENTS_HANDLER
    assert [(d["owner"], logs_ext.job_of(d["logStream"])) for d in batch.documents] == [
        (MEMBER_A, NAN_JOB),
        (MEMBER_B, HEALTHY_JOB),
    ]

    answer = org.process(batch)

    # recordId, result and data on every record, or Firehose counts it a failure
    assert answer == {"records": [{"recordId": r, "result": "Dropped", "data": ""} for r in batch.record_ids]}
    [stop] = sagemaker_ext.stop_calls()
    assert (stop.account, stop.job) == (MEMBER_A, NAN_JOB)
    assert accounts_ext.assumed_role_of(stop.access_key) == f"arn:aws:iam::{MEMBER_A}:role/TrainingGuardMember"
    assert sagemaker_ext.job_status(MEMBER_A, REGION, NAN_JOB) == "Stopping"
    assert sagemaker_ext.job_status(MEMBER_B, REGION, HEALTHY_JOB) == "InProgress"
    assert org.aws.events_dead_letters() == []
    stops = [
        (n["account"], n["job"]["name"], n["rule"]["name"])
        for n in org.aws.notifications()
        if n["outcome"] == "stopped"
    ]
    assert stops == [(MEMBER_A, NAN_JOB, "Divergence")]  # the loss at 7.7x its best, before its NaN

    # Firehose's retry of the same batch: folded again, nothing stopped twice
    assert org.process(batch) == answer
    assert sagemaker_ext.stop_calls() == [stop]
    assert org.aws.notifications() == []  # nor said twice
    assert org.routed.drain() == []


def test_only_the_lines_the_filter_pattern_selects_are_delivered(org: Organization) -> None:
    org.write(MEMBER_B, HEALTHY_JOB, "pytorch_mnist_healthy.log")
    [batch] = org.routed.drain()
    selects = logs_ext.matcher(contract.LOG_FILTER_PATTERN)
    lines = (LOGS / "pytorch_mnist_healthy.log").read_text(encoding="utf-8").splitlines()
    [doc] = batch.documents
    assert [e["message"] for e in doc["logEvents"]] == [line for line in lines if line.strip() and selects(line)]


def test_a_filter_to_a_destination_that_does_not_admit_the_account_is_refused(org: Organization) -> None:
    logs = org.aws.client("logs")
    logs.put_destination_policy(
        destinationName="training-guard-member-logs",
        accessPolicy=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Principal": {"AWS": [MEMBER_B]}, "Action": "logs:PutSubscriptionFilter"}
                ],
            }
        ),
    )
    destination = f"arn:aws:logs:{REGION}:{ACCOUNT}:destination:training-guard-member-logs"
    with org.aws.in_account(MEMBER_A), pytest.raises(ClientError) as refused:
        org.aws.client("logs").put_subscription_filter(
            logGroupName=GROUP, filterName="another", filterPattern="", destinationArn=destination
        )
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    with org.aws.in_account(MEMBER_A), pytest.raises(ClientError) as missing:
        org.aws.client("logs").put_subscription_filter(
            logGroupName=GROUP, filterName="another", filterPattern="", destinationArn=destination + "-gone"
        )
    assert missing.value.response["Error"] == {
        "Code": "ResourceNotFoundException",
        "Message": f"The specified destination does not exist: {destination}-gone",  # moto's says a log group
    }


def test_without_the_extension_moto_takes_the_destination_for_a_log_group(
    templates: tuple[GuardConfig, dict[str, Any], dict[str, Any]],
) -> None:
    """What logs_ext.Destinations answers instead of moto (and that moto is itself outside it)."""
    config, hub, _ = templates
    with Emulation(config, by_credentials=True) as aws:
        deploy_hub(aws, hub)
        with aws.in_account(MEMBER_A):
            logs = boto3.client("logs", region_name=REGION)
            logs.create_log_group(logGroupName=GROUP)
            with pytest.raises(ClientError) as refused:
                logs.put_subscription_filter(
                    logGroupName=GROUP,
                    filterName=contract.LOG_SUBSCRIPTION_FILTER_NAME,
                    filterPattern="",
                    destinationArn=f"arn:aws:logs:{REGION}:{ACCOUNT}:destination:training-guard-member-logs",
                )
    assert refused.value.response["Error"]["Code"] == "ResourceNotFoundException"
