"""The notification topic: one message per transition, encrypted, TLS-only.

Every subscription has a dead-letter queue, so a notification SNS cannot deliver (a bouncing
address, a deleted queue) is kept rather than lost.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.queues import DeadLetterQueue
from training_guard.contract import self_alarm_prefix

CLOUDWATCH_PRINCIPAL = "cloudwatch.amazonaws.com"
PUBLISH_ACTION = "sns:Publish"


class Alerting(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey, emails: tuple[str, ...]) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self._key = key
        self._dead_letters: sqs.IQueue | None = None
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="Training Guard",
            master_key=key,
            enforce_ssl=True,
        )
        # A topic policy replaces SNS's default policy, so the TLS-only policy above would let no
        # AWS service publish. The guard's own alarms publish with CloudWatch's service principal,
        # which sends aws:SourceArn (the alarm) and aws:SourceAccount; this is AWS's documented form.
        # (The functions publish with their roles, allowed by their identity policies.)
        # https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Notify_Users_Alarm_Changes.html
        self.alarm_arns = stack.format_arn(
            service="cloudwatch",
            resource="alarm",
            resource_name=f"{self_alarm_prefix(stack.stack_name)}*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="GuardAlarmsPublish",
                principals=[iam.ServicePrincipal(CLOUDWATCH_PRINCIPAL)],
                actions=[PUBLISH_ACTION],
                resources=[self.topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {"aws:SourceArn": self.alarm_arns},
                },
            )
        )
        for email in emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email, dead_letter_queue=self.dead_letters))

    @property
    def created_dead_letters(self) -> sqs.IQueue | None:
        """The subscriptions' dead-letter queue if a subscription created it, else None."""
        return self._dead_letters

    @property
    def dead_letters(self) -> sqs.IQueue:
        """The subscriptions' dead-letter queue, created with the first subscription."""
        if self._dead_letters is None:
            self._dead_letters = DeadLetterQueue(self, "DeadLetters", key=self._key).queue
        return self._dead_letters
