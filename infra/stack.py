"""The Training Guard stack: composes one construct per capability. Environment-agnostic."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.alerting import Alerting
from infra.components.chat import ChatDelivery
from infra.components.encryption import GuardKey
from infra.components.job_events import JobEvents
from infra.components.metric_guards import MetricGuards
from infra.components.monitoring import Monitoring
from infra.components.state import GuardState
from infra.nag import acknowledge_findings
from training_guard.config import GuardConfig


class TrainingGuardStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: GuardConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        key = GuardKey(self, "Encryption").key
        self.state = GuardState(self, "State", key=key)
        self.alerting = Alerting(self, "Alerting", key=key, emails=config.emails)
        self.job_events = JobEvents(
            self, "JobEvents", config=config, key=key, table=self.state.table, topic=self.alerting.topic
        )
        self.metric_guards = MetricGuards(
            self, "MetricGuards", config=config, key=key, table=self.state.table, topic=self.alerting.topic
        )
        self.chat = (
            ChatDelivery(
                self,
                "Chat",
                config=config,
                key=key,
                table=self.state.table,
                topic=self.alerting.topic,
                subscription_dead_letters=self.alerting.dead_letters,
            )
            if config.slack.enabled
            else None
        )
        functions: dict[str, lambda_.IFunction] = {
            "JobEvents": self.job_events.handler.function,
            "AlarmEvents": self.metric_guards.alarm_handler.function,
            "Sweeper": self.metric_guards.sweeper.function,
        }
        queues: dict[str, sqs.IQueue] = {
            "JobEvents": self.job_events.dead_letters,
            "MetricGuards": self.metric_guards.dead_letters,
        }
        if self.chat:
            functions["SlackNotifier"] = self.chat.notifier.function
            queues["Chat"] = self.chat.dead_letters
            queues["Subscriptions"] = self.alerting.dead_letters
        self.monitoring = Monitoring(
            self, "Monitoring", topic=self.alerting.topic, functions=functions, dead_letter_queues=queues
        )
        CfnOutput(self, "NotificationTopicArn", value=self.alerting.topic.topic_arn)
        CfnOutput(self, "DashboardName", value=f"{self.stack_name}-activity")
        CfnOutput(self, "MetricGuardsDeadLetterQueueUrl", value=self.metric_guards.dead_letters.queue_url)
        if self.chat:
            CfnOutput(self, "ChatDeadLetterQueueUrl", value=self.chat.dead_letters.queue_url)
            for name, secret_name in self.chat.secret_names.items():
                CfnOutput(self, f"SlackWebhookSecret{name.replace('-', '')}", value=secret_name)
        CfnOutput(self, "StateTableName", value=self.state.table.table_name)
        CfnOutput(self, "JobEventsDeadLetterQueueUrl", value=self.job_events.dead_letters.queue_url)
        acknowledge_findings(self)
