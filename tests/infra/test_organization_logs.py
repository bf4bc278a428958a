"""Members' training logs reach the hub's log rules: the hub's CloudWatch Logs destination (who may subscribe to it,
the role it puts into Firehose with), the Firehose stream whose processor is the log-events function, the bucket that
keeps only failed records, the subscriber reaching each member's log role, and that role in the member template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.organization.member_logs import (
    BUCKET_ACTIONS,
    FAILED_PREFIX,
    FIREHOSE_PUT_ACTIONS,
    PROCESSOR_ACTIONS,
    SUBSCRIBER_TIMEOUT,
)
from infra.organization.names import LOG_DESTINATION_NAME
from tests.infra.conftest import synthesized, unordered
from tests.infra.test_organization import HUB, MEMBERS, ORG_ID, REGION, OrgSynth, arn, example, here
from training_guard import contract

DESTINATION_ARN = here("logs", f":destination:{LOG_DESTINATION_NAME}")
SUBSCRIBER_ROLE = f"TrainingGuardHub-Subscriber-{REGION}"
LOG_ROLE = "TrainingGuardMember-Logs"


@pytest.fixture(scope="module")
def org(tmp_path_factory: pytest.TempPathFactory) -> OrgSynth:
    return synthesized(OrgSynth, example(), tmp_path_factory.mktemp("org"))


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> OrgSynth:
    return OrgSynth(tmp_path_factory.mktemp("listed-logs"), example(organization_id=None, organizational_units=[]))


def ref(synth: OrgSynth, kind: str, path_part: str) -> dict[str, str]:
    return {"Ref": synth.one(kind, path_part)[0]}


def att(synth: OrgSynth, kind: str, path_part: str, attribute: str = "Arn") -> dict[str, list[str]]:
    return {"Fn::GetAtt": [synth.one(kind, path_part)[0], attribute]}


def statements(synth: OrgSynth, role_path: str) -> list[dict[str, Any]]:
    role_id, _ = synth.one("AWS::IAM::Role", role_path)
    return [
        s
        for p in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def destination_policy(synth: OrgSynth) -> dict[str, Any]:
    _, destination = synth.one("AWS::Logs::Destination")
    policy = destination["Properties"]["DestinationPolicy"]
    # Stack.to_json_string: a Join of the document's text around the ARN's tokens; tokens compared as written.
    assert "Fn::Join" in policy
    return policy  # type: ignore[no-any-return]


def text_of(value: Any) -> str:
    """A joined string as text, each reference written ${Name}."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return "${" + str(value["Ref"]) + "}"
    separator, parts = value["Fn::Join"]
    return str(separator).join(text_of(p) for p in parts)


def test_the_destination_wraps_the_firehose_stream_with_its_own_role(org: OrgSynth) -> None:
    _, destination = org.one("AWS::Logs::Destination")
    assert destination["Properties"]["DestinationName"] == LOG_DESTINATION_NAME
    assert destination["Properties"]["TargetArn"] == att(org, "AWS::KinesisFirehose::DeliveryStream", "MemberLogs")
    assert destination["Properties"]["RoleArn"] == att(org, "AWS::IAM::Role", "MemberLogsDestinationRole")
    # CloudWatch Logs puts a test record when the destination is made: the role's policy comes first.
    assert org.one("AWS::IAM::Policy", "MemberLogsDestinationPolicy")[0] in destination["DependsOn"]


def test_only_the_organization_may_subscribe_to_the_destination(org: OrgSynth) -> None:
    text = text_of(destination_policy(org))
    assert text == (
        '{"Version":"2012-10-17","Statement":[{"Sid":"TrainingGuardMembers","Effect":"Allow",'
        '"Action":"logs:PutSubscriptionFilter","Resource":"arn:${AWS::Partition}:logs:${AWS::Region}:'
        '${AWS::AccountId}:destination:training-guard-member-logs","Principal":"*",'
        f'"Condition":{{"StringEquals":{{"aws:PrincipalOrgID":"{ORG_ID}"}}}}}}]}}'
    )


def test_without_an_organization_id_exactly_the_members_may_subscribe(listed: OrgSynth) -> None:
    text = text_of(destination_policy(listed))
    assert text.endswith(f'"Principal":{{"AWS":["{MEMBERS[0]}","{MEMBERS[1]}"]}}}}]}}')
    assert '"Action":"logs:PutSubscriptionFilter"' in text


def test_cloudwatch_logs_may_put_into_the_stream_only_for_the_organizations_groups(
    org: OrgSynth, listed: OrgSynth
) -> None:
    _, role = org.one("AWS::IAM::Role", "MemberLogsDestinationRole")
    [trust] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": {"Fn::Join": ["", ["logs.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]}}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceOrgID": ORG_ID}}
    _, role = listed.one("AWS::IAM::Role", "MemberLogsDestinationRole")
    [trust] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": [HUB, *MEMBERS]}}
    assert statements(org, "MemberLogsDestinationRole") == [
        {
            "Sid": "PutIntoTheStream",
            "Effect": "Allow",
            "Action": sorted(FIREHOSE_PUT_ACTIONS),
            "Resource": att(org, "AWS::KinesisFirehose::DeliveryStream", "MemberLogs"),
        }
    ]


def test_firehose_hands_every_record_to_the_log_events_function_at_once(org: OrgSynth) -> None:
    _, stream = org.one("AWS::KinesisFirehose::DeliveryStream")
    properties = stream["Properties"]
    assert properties["DeliveryStreamType"] == "DirectPut"
    assert properties["DeliveryStreamEncryptionConfigurationInput"] == {"KeyType": "AWS_OWNED_CMK"}
    s3 = properties["ExtendedS3DestinationConfiguration"]
    assert s3["BucketARN"] == att(org, "AWS::S3::Bucket", "MemberLogsFailedRecords")
    assert s3["RoleARN"] == att(org, "AWS::IAM::Role", "MemberLogsFirehoseRole")
    assert s3["ErrorOutputPrefix"] == FAILED_PREFIX
    function = att(org, "AWS::Lambda::Function", "LogRulesHandler")
    # Firehose supports a Lambda invocation of up to 5 minutes (the data transformation page).
    assert org.one("AWS::Lambda::Function", "LogRulesHandler")[1]["Properties"]["Timeout"] <= 300
    assert s3["ProcessingConfiguration"] == {
        "Enabled": True,
        "Processors": [
            {
                "Type": "Lambda",
                "Parameters": [
                    {"ParameterName": "LambdaArn", "ParameterValue": function},
                    {"ParameterName": "BufferIntervalInSeconds", "ParameterValue": "0"},
                    {"ParameterName": "BufferSizeInMBs", "ParameterValue": "1"},
                    {"ParameterName": "NumberOfRetries", "ParameterValue": "3"},
                ],
            }
        ],
    }


def test_firehoses_role_may_invoke_the_function_and_write_the_bucket_only(org: OrgSynth) -> None:
    _, role = org.one("AWS::IAM::Role", "MemberLogsFirehoseRole")
    [trust] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "firehose.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"sts:ExternalId": {"Ref": "AWS::AccountId"}}}
    bucket = att(org, "AWS::S3::Bucket", "MemberLogsFailedRecords")
    assert statements(org, "MemberLogsFirehoseRole") == [
        {
            "Sid": "InvokeTheLogEventsFunction",
            "Effect": "Allow",
            "Action": sorted(PROCESSOR_ACTIONS),
            "Resource": att(org, "AWS::Lambda::Function", "LogRulesHandler"),
        },
        {
            "Sid": "WriteFailedRecords",
            "Effect": "Allow",
            "Action": sorted(BUCKET_ACTIONS),
            "Resource": [bucket, {"Fn::Join": ["", [bucket, "/*"]]}],
        },
    ]


def test_the_bucket_is_private_encrypted_tls_only_and_forgets_failed_records_after_14_days(org: OrgSynth) -> None:
    bucket_id, bucket = org.one("AWS::S3::Bucket", "MemberLogsFailedRecords")
    properties = bucket["Properties"]
    assert properties["BucketEncryption"] == {
        "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    }
    assert properties["PublicAccessBlockConfiguration"] == dict.fromkeys(
        ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"), True
    )
    [rule] = properties["LifecycleConfiguration"]["Rules"]
    assert (rule["ExpirationInDays"], rule["Status"]) == (14, "Enabled")
    [policy] = [
        p for p in org.resources("AWS::S3::BucketPolicy").values() if p["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    [deny] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert (deny["Effect"], deny["Condition"]) == ("Deny", {"Bool": {"aws:SecureTransport": "false"}})


def test_the_subscriber_may_assume_exactly_the_members_log_roles(org: OrgSynth) -> None:
    _, role = org.one("AWS::IAM::Role", "LogRulesSubscriberRole")
    assert role["Properties"]["RoleName"] == SUBSCRIBER_ROLE
    assumes = [s for s in statements(org, "LogRulesSubscriberRole") if "sts:AssumeRole" in unordered(s["Action"])]
    assert assumes == [
        {
            "Sid": "SubscribeMembers",
            "Effect": "Allow",
            "Action": "sts:AssumeRole",
            "Resource": [arn(f":iam::{m}:role/{LOG_ROLE}") for m in MEMBERS],
        }
    ]


def test_the_subscription_puts_the_filter_in_every_member_after_the_destination_and_the_stackset(
    org: OrgSynth,
) -> None:
    resource_id, resource = org.one(contract_type(), "LogRulesSubscription")
    properties = resource["Properties"]
    assert properties["Members"] == list(MEMBERS)
    assert properties["MemberRoleName"] == LOG_ROLE
    assert properties["MemberDestinationArn"] == DESTINATION_ARN
    assert properties["LogGroupName"] == contract.TRAINING_LOG_GROUP
    depends = resource["DependsOn"]
    assert org.one("AWS::Logs::Destination")[0] in depends
    assert org.one("AWS::CloudFormation::StackSet")[0] in depends
    assert org.one("AWS::IAM::Policy", "SubscriberActInMembers")[0] in depends
    _, function = org.one("AWS::Lambda::Function", "LogRulesSubscriber")
    assert function["Properties"]["Timeout"] == SUBSCRIBER_TIMEOUT.to_seconds()
    assert "MemberLogSubscriptions" in org.json["Outputs"]
    assert resource_id


def contract_type() -> str:
    return "Custom::TrainingGuardLogSubscription"


# --- the member's side ------------------------------------------------------------------------------------------------


def test_the_members_log_role_is_trusted_only_by_the_hubs_subscriber(org: OrgSynth, listed: OrgSynth) -> None:
    _, role = org.member_one("AWS::IAM::Role", "LogAccess")
    assert role["Properties"]["RoleName"] == LOG_ROLE
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Effect": "Allow",
            "Principal": {"AWS": arn(f":iam::{HUB}:root")},
            "Action": "sts:AssumeRole",
            "Condition": {
                "ArnEquals": {"aws:PrincipalArn": [arn(f":iam::{HUB}:role/{SUBSCRIBER_ROLE}")]},
                "StringEquals": {"aws:PrincipalOrgID": ORG_ID},
            },
        }
    ]
    _, role = listed.member_one("AWS::IAM::Role", "LogAccess")
    [statement] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Condition"] == {"ArnEquals": {"aws:PrincipalArn": [arn(f":iam::{HUB}:role/{SUBSCRIBER_ROLE}")]}}


def test_the_members_log_role_may_only_subscribe_the_training_log_group(org: OrgSynth) -> None:
    role_id, _ = org.member_one("AWS::IAM::Role", "LogAccess")
    [policy] = [
        p for p in org.member_resources("AWS::IAM::Policy").values() if p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    group = f":log-group:{contract.TRAINING_LOG_GROUP}"
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Sid": "SubscribeTrainingLogGroup",
            "Effect": "Allow",
            "Action": [
                "logs:CreateLogGroup",
                "logs:DeleteSubscriptionFilter",
                "logs:DescribeSubscriptionFilters",
                "logs:PutSubscriptionFilter",
            ],
            "Resource": [here("logs", group), here("logs", f"{group}:*")],
        }
    ]


def test_without_log_rules_there_is_no_destination_no_log_role_and_the_log_function_acts_nowhere(
    tmp_path: Path,
) -> None:
    document = example()
    document["log_rules"] = {"enabled": False}
    synth = OrgSynth(tmp_path, document)
    for kind in ("AWS::Logs::Destination", "AWS::KinesisFirehose::DeliveryStream", "AWS::S3::Bucket"):
        assert synth.resources(kind) == {}
    assert not [k for k in synth.member["Resources"] if "LogAccess" in k]
    _, member_role = synth.member_one("AWS::IAM::Role", "HubAccess")
    assert "LogEvents" not in str(member_role["Properties"]["AssumeRolePolicyDocument"])
