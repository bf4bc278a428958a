"""The guard's customer-managed KMS key: topic, queues and table are encrypted with it."""

from __future__ import annotations

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

# AWS services that write into the guard's encrypted topic and queues on its behalf.
SERVICE_PRINCIPALS = (
    "events.amazonaws.com",  # EventBridge rule targets' dead-letter queue
    "sns.amazonaws.com",  # topic -> queue subscriptions
    "cloudwatch.amazonaws.com",  # alarm actions publishing to the topic
)


class GuardKey(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            description="Training Guard: notification topic, queues and state table",
            enable_key_rotation=True,
            pending_window=Duration.days(7),
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowAwsServicesOfThisAccount",
                principals=[iam.ServicePrincipal(p) for p in SERVICE_PRINCIPALS],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" means this key
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )
