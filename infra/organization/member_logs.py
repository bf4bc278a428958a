"""The hub's side of the members' log rules: a CloudWatch Logs destination members' filters send to, wrapping a Firehose
stream whose processor is the log-events function, and the subscriber's reach into each member's log role.

A subscription filter's Lambda destination must be in the filter's account; across accounts CloudWatch Logs delivers
only to a destination whose target is a Kinesis data stream or a Firehose stream
(https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutSubscriptionFilter.html). Firehose costs
by the GB ingested and nothing at rest; a Kinesis data stream costs by the hour. The function reads every record and
answers it Dropped, so the bucket receives only what failed (docs/design/log-subscription.md, "Members").
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, ArnFormat, Aws, CfnResource, Duration, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesisfirehose as firehose
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.components.encryption import logs_principal
from infra.components.log_rules import LogRules
from infra.components.queues import DEAD_LETTER_RETENTION
from infra.organization.names import LOG_DESTINATION_NAME, SUBSCRIBER, hub_role_name, member_log_role_name
from training_guard.config.model import OrganizationConfig

# Firehose's Lambda processor: the buffering interval hint ranges 0 to 900 seconds and the size hint 0.2 to 3 MB
# (https://docs.aws.amazon.com/firehose/latest/dev/data-transformation.html). 0 s hands each member's delivery on as
# it arrives, as CloudWatch Logs hands the hub's own to the function; 1 MB (the default) keeps an invocation's payload
# well inside Lambda's 6 MB synchronous limit (same page).
PROCESSOR_BUFFER_SECONDS = 0
PROCESSOR_BUFFER_MB = 1
# Firehose invokes again after a failed invocation (its default is 3, ProcessorParameter NumberOfRetries); then the
# records go to the bucket's error prefix. Folding is idempotent, so every retry is safe.
PROCESSOR_RETRIES = 3
FAILED_PREFIX = "failed/"
# A failed record waits in the bucket as long as a dead letter waits in a queue (DEAD_LETTER_RETENTION).
FAILED_RECORD_DAYS = DEAD_LETTER_RETENTION.to_days()
DESTINATION_POLICY_SID = "TrainingGuardMembers"
# The destination's role: CloudWatch Logs puts into the stream (the documented cross-account Firehose setup,
# https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/CreateFirehoseStreamDestination-Account.html).
FIREHOSE_PUT_ACTIONS = ("firehose:PutRecord", "firehose:PutRecordBatch")
# Firehose's role: invoke the processor, write the bucket (https://docs.aws.amazon.com/firehose/latest/dev/controlling-access.html).
PROCESSOR_ACTIONS = ("lambda:InvokeFunction", "lambda:GetFunctionConfiguration")
BUCKET_ACTIONS = (
    "s3:AbortMultipartUpload",
    "s3:GetBucketLocation",
    "s3:GetObject",
    "s3:ListBucket",
    "s3:ListBucketMultipartUploads",
    "s3:PutObject",
)
BUCKET_FINDINGS = {
    "AwsSolutions::AwsSolutions-S1": (
        "The bucket holds only members' log records Firehose could not hand to the log-events function, for "
        f"{FAILED_RECORD_DAYS} days; Firehose is its only writer (its role) and nobody reads it but an operator "
        "redriving them. CloudTrail's data events, not access logs, are the place to audit that."
    ),
}
FIREHOSE_ROLE_FINDINGS = {
    "AwsSolutions::AwsSolutions-IAM5[Resource::<MemberLogsFailedRecords1ED76C7D.Arn>/*]": (
        "Firehose names its objects itself (prefix, date and a random suffix): the statement reaches the objects of "
        "this one bucket only."
    ),
}
SUBSCRIBER_TIMEOUT = Duration.seconds(240)  # within the custom resource's 300 s ServiceTimeout (log_rules.py)


def destination_arn(scope: Construct, organization: OrganizationConfig) -> str:
    """The hub's destination as a member names it in its filter (the hub's account and the organization's region)."""
    return Stack.of(scope).format_arn(
        service="logs",
        region=organization.region,
        account=organization.hub_account,
        resource="destination",
        resource_name=LOG_DESTINATION_NAME,
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


def member_log_role_arn(scope: Construct, organization: OrganizationConfig, account: str) -> str:
    return Stack.of(scope).format_arn(
        service="iam",
        region="",
        account=account,
        resource="role",
        resource_name=member_log_role_name(organization),
        arn_format=ArnFormat.SLASH_RESOURCE_NAME,
    )


def destination_policy(organization: OrganizationConfig, arn: str) -> dict[str, object]:
    """Who may point a filter at the destination: the organization, or exactly the members."""
    statement: dict[str, object] = {
        "Sid": DESTINATION_POLICY_SID,
        "Effect": "Allow",
        "Action": "logs:PutSubscriptionFilter",
        "Resource": arn,
    }
    if organization.organization_id:
        statement["Principal"] = "*"
        statement["Condition"] = {"StringEquals": {"aws:PrincipalOrgID": organization.organization_id}}
    else:
        statement["Principal"] = {"AWS": list(organization.members)}
    return {"Version": "2012-10-17", "Statement": [statement]}


def source_condition(organization: OrganizationConfig) -> dict[str, object]:
    """CloudWatch Logs may assume the destination's role only for the organization's (or the members' and the hub's)
    log groups: aws:SourceOrgID / aws:SourceAccount, global keys of a service's request on an account's behalf
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html). The setup page lists
    aws:SourceArn per account; 100 such ARNs would pass IAM's 2,048 characters of a trust policy."""
    if organization.organization_id:
        return {"StringEquals": {"aws:SourceOrgID": organization.organization_id}}
    return {"StringEquals": {"aws:SourceAccount": [organization.hub_account, *organization.members]}}


class MemberLogs(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, organization: OrganizationConfig, wing: LogRules
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        function = wing.handler.function
        # Receives only the records Firehose could not hand to the function (the function drops every other one).
        self.bucket = s3.Bucket(
            self,
            "FailedRecords",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    expiration=Duration.days(FAILED_RECORD_DAYS),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
        )
        for rule, reason in BUCKET_FINDINGS.items():
            Validations.of(self.bucket).acknowledge(Acknowledgment(id=rule, reason=reason))
        self.firehose_role = iam.Role(
            self,
            "FirehoseRole",
            assumed_by=iam.ServicePrincipal(
                "firehose.amazonaws.com", conditions={"StringEquals": {"sts:ExternalId": Aws.ACCOUNT_ID}}
            ),
            description="Training Guard hub: Firehose hands members' log lines to the log-events function",
        )
        self.firehose_role.add_to_policy(
            iam.PolicyStatement(
                sid="InvokeTheLogEventsFunction",
                actions=list(PROCESSOR_ACTIONS),
                resources=[function.function_arn],  # the processor's LambdaArn, unqualified
            )
        )
        self.firehose_role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteFailedRecords",
                actions=list(BUCKET_ACTIONS),
                resources=[self.bucket.bucket_arn, self.bucket.arn_for_objects("*")],
            )
        )
        for rule, reason in FIREHOSE_ROLE_FINDINGS.items():
            Validations.of(self.firehose_role).acknowledge(Acknowledgment(id=rule, reason=reason))
        self.stream = firehose.CfnDeliveryStream(
            self,
            "Stream",
            delivery_stream_type="DirectPut",
            delivery_stream_encryption_configuration_input=firehose.CfnDeliveryStream.DeliveryStreamEncryptionConfigurationInputProperty(
                key_type="AWS_OWNED_CMK"
            ),
            extended_s3_destination_configuration=firehose.CfnDeliveryStream.ExtendedS3DestinationConfigurationProperty(
                bucket_arn=self.bucket.bucket_arn,
                role_arn=self.firehose_role.role_arn,
                prefix="delivered/",
                error_output_prefix=FAILED_PREFIX,
                compression_format="GZIP",
                processing_configuration=firehose.CfnDeliveryStream.ProcessingConfigurationProperty(
                    enabled=True,
                    processors=[
                        firehose.CfnDeliveryStream.ProcessorProperty(
                            type="Lambda",
                            parameters=[
                                _parameter("LambdaArn", function.function_arn),
                                _parameter("BufferIntervalInSeconds", str(PROCESSOR_BUFFER_SECONDS)),
                                _parameter("BufferSizeInMBs", str(PROCESSOR_BUFFER_MB)),
                                _parameter("NumberOfRetries", str(PROCESSOR_RETRIES)),
                            ],
                        )
                    ],
                ),
            ),
        )
        self.stream.node.add_dependency(self.firehose_role)

        self.destination_role = iam.Role(
            self,
            "DestinationRole",
            assumed_by=iam.ServicePrincipal(logs_principal(), conditions=source_condition(organization)),
            description="Training Guard hub: CloudWatch Logs puts members' log lines into the Firehose stream",
        )
        put = iam.Policy(
            self,
            "DestinationPolicy",
            roles=[self.destination_role],
            statements=[
                iam.PolicyStatement(
                    sid="PutIntoTheStream", actions=list(FIREHOSE_PUT_ACTIONS), resources=[self.stream.attr_arn]
                )
            ],
        )
        self.arn = stack.format_arn(
            service="logs",
            resource="destination",
            resource_name=LOG_DESTINATION_NAME,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.destination = logs.CfnDestination(
            self,
            "Destination",
            destination_name=LOG_DESTINATION_NAME,
            role_arn=self.destination_role.role_arn,
            target_arn=self.stream.attr_arn,
            destination_policy=stack.to_json_string(destination_policy(organization, self.arn)),
        )
        # CloudWatch Logs puts a test record into the stream when the destination is made.
        self.destination.node.add_dependency(put)

        self._subscribe_members(organization, wing)

    def _subscribe_members(self, organization: OrganizationConfig, wing: LogRules) -> None:
        """The subscription custom resource also puts the filter in every member, through the member's log role."""
        subscriber = wing.subscriber
        role = subscriber.role.node.default_child
        assert isinstance(role, iam.CfnRole)
        role.role_name = hub_role_name(organization, SUBSCRIBER)  # each member's log role trusts this ARN
        roles = [member_log_role_arn(self, organization, a) for a in organization.members]
        assume = iam.Policy(
            self,
            "SubscriberActInMembers",
            roles=[subscriber.role],
            statements=[iam.PolicyStatement(sid="SubscribeMembers", actions=["sts:AssumeRole"], resources=roles)],
        )
        function = subscriber.function.node.default_child
        assert isinstance(function, lambda_.CfnFunction)
        function.timeout = int(SUBSCRIBER_TIMEOUT.to_seconds())
        resource = wing.subscription.node.default_child
        assert isinstance(resource, CfnResource)
        resource.add_property_override("Members", list(organization.members))
        resource.add_property_override("MemberRoleName", member_log_role_name(organization))
        resource.add_property_override("MemberDestinationArn", self.arn)
        wing.subscription.node.add_dependency(self.destination, assume)


def _parameter(name: str, value: str) -> firehose.CfnDeliveryStream.ProcessorParameterProperty:
    return firehose.CfnDeliveryStream.ProcessorParameterProperty(parameter_name=name, parameter_value=value)
