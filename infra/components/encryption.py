"""The guard's customer-managed KMS key: topic, queues, table, secrets and log groups are encrypted with it.

Each AWS service that writes into something encrypted with the key is granted exactly the form
AWS documents for it, no stricter: a condition the service does not send makes KMS refuse the
write, and the event is lost without an error anyone sees.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

# What a service needs to write into an encrypted topic or queue.
# https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html#compatibility-with-aws-services
# https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services
SERVICE_WRITE_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey*")

# Services that document the confused-deputy conditions for this grant; they get aws:SourceAccount.
# sns: topic -> queue subscriptions (the SQS key guide lists SNS among the services that send the
#   source keys with SSE queues).
CONDITIONED_SERVICE_PRINCIPALS = ("sns.amazonaws.com",)
# CloudWatch alarm actions publishing to the encrypted topic. The SNS key guide ("Enable compatibility between
# event sources from AWS services and encrypted topics") and AWS's knowledge-center article for alarms on an
# encrypted topic both show this grant to cloudwatch.amazonaws.com with no condition; CloudWatch documents
# aws:SourceArn/aws:SourceAccount for the topic policy only (which keeps them: SNS Publish is limited to the guard's
# own alarms). A condition CloudWatch does not send to KMS would silence every self-alarm.
# https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services
# https://repost.aws/knowledge-center/cloudwatch-configure-alarm-sns
CLOUDWATCH_PRINCIPAL = "cloudwatch.amazonaws.com"
# EventBridge writing into its rule targets' encrypted dead-letter queues. The SQS key guide shows
# this grant without any condition, and the SNS key guide says aws:SourceAccount / aws:SourceArn are
# not supported for EventBridge writing to encrypted destinations: the documented form, no condition.
# https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html#compatibility-with-aws-services
# https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html
EVENTBRIDGE_PRINCIPAL = "events.amazonaws.com"

# CloudWatch Logs encrypting the functions' log groups, limited by the encryption context to log
# groups of this account and region.
# https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html
LOGS_ACTIONS = ("kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*")
LOGS_CONTEXT_KEY = "kms:EncryptionContext:aws:logs:arn"

SID_CONDITIONED_SERVICES = "AllowAwsServicesOfThisAccount"
SID_EVENTBRIDGE = "AllowEventBridgeDeadLetters"
SID_CLOUDWATCH = "AllowCloudWatchAlarmActions"
SID_LOGS = "AllowCloudWatchLogsOfThisAccount"


def logs_principal() -> str:
    """CloudWatch Logs' regional service principal (logs.<region>.amazonaws.com)."""
    return f"logs.{Aws.REGION}.amazonaws.com"


class GuardKey(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.key = kms.Key(
            self,
            "Key",
            description="Training Guard: notification topic, queues, state table, secrets and logs",
            enable_key_rotation=True,
            pending_window=Duration.days(7),
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid=SID_CONDITIONED_SERVICES,
                principals=[iam.ServicePrincipal(p) for p in CONDITIONED_SERVICE_PRINCIPALS],
                actions=list(SERVICE_WRITE_ACTIONS),
                resources=["*"],  # in a key policy, "*" means this key
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid=SID_CLOUDWATCH,
                principals=[iam.ServicePrincipal(CLOUDWATCH_PRINCIPAL)],
                actions=list(SERVICE_WRITE_ACTIONS),
                resources=["*"],
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid=SID_EVENTBRIDGE,
                principals=[iam.ServicePrincipal(EVENTBRIDGE_PRINCIPAL)],
                actions=list(SERVICE_WRITE_ACTIONS),
                resources=["*"],
            )
        )
        log_groups = stack.format_arn(
            service="logs", resource="log-group", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid=SID_LOGS,
                principals=[iam.ServicePrincipal(logs_principal())],
                actions=list(LOGS_ACTIONS),
                resources=["*"],
                conditions={"ArnLike": {LOGS_CONTEXT_KEY: log_groups}},
            )
        )
