"""Routing of training-job state changes to the job-events function, with retries and a DLQ."""

from __future__ import annotations

import jsii
from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.functions import GuardFunction
from infra.components.queues import DeadLetterQueue
from training_guard import contract
from training_guard.config.model import GuardConfig

# SageMaker may send several events per change and EventBridge retries delivery for up to a day
# by default; a reaction older than 2 hours is no longer useful as a stop, so it goes to the DLQ.
EVENT_MAX_AGE = Duration.hours(2)
EVENT_RETRY_ATTEMPTS = 8
# Lambda's own retries of a failed asynchronous invocation (throttled AWS calls, a failed publish).
FUNCTION_RETRY_ATTEMPTS = 2

JOB_EVENTS_ACTIONS = ("sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob", "sagemaker:AddTags")
# Every responder reads a job's tags with ListTags when what it has carries none (an event without `Tags`,
# DescribeTrainingJob, an alarm): without it that read is AccessDenied, retried, then dead-lettered.
# ListTags takes the training-job resource type (service authorization reference, SageMaker AI:
# https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsagemakerai.html).
JOB_TAG_READ_ACTIONS = ("sagemaker:ListTags",)
JOB_ALARM_ACTIONS = ("cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms", "cloudwatch:TagResource")
LEDGER_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
KEY_ACTIONS = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey")
# List prices for the spend in notifications and stop records. The Price List API supports no resource-level
# permissions: its actions have no resource type, so the statement must name all resources ("*")
# (https://docs.aws.amazon.com/service-authorization/latest/reference/list_awspricelist.html). Its cache is
# the state table's price# items, read and written under the ledger's statement (GetItem, PutItem).
PRICE_LIST_ACTIONS = ("pricing:GetProducts",)


def training_job_arn_pattern(scope: Construct) -> str:
    """Every training job of this account and region (job names are only known at run time)."""
    return Stack.of(scope).format_arn(
        service="sagemaker", resource="training-job", resource_name="*", arn_format=ArnFormat.SLASH_RESOURCE_NAME
    )


@jsii.implements(lambda_.IDestination)
class QueueDestination:
    """An on-failure destination without CDK's broad grant (the role gets sqs:SendMessage only)."""

    def __init__(self, queue: sqs.IQueue) -> None:
        self.queue = queue

    def bind(self, scope: Construct, fn: lambda_.IFunction, options: object = None) -> lambda_.DestinationConfig:
        return lambda_.DestinationConfig(destination=self.queue.queue_arn)


def job_alarm_arn_pattern(scope: Construct) -> str:
    """The per-job alarms the guard creates and deletes (named training-guard-job-...)."""
    return Stack.of(scope).format_arn(
        service="cloudwatch",
        resource="alarm",
        resource_name=f"{contract.JOB_ALARM_PREFIX}*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


def grant_responder(
    function: GuardFunction,
    *,
    key: kms.IKey,
    table: dynamodb.ITable,
    topic: sns.ITopic,
    dead_letters: sqs.IQueue,
    stop_requires_tag: str | None = None,
) -> None:
    """What every function that reacts to a job needs: observe, stop and attribute jobs, the ledger (and the
    price cache in the same table), the topic, the key, list prices, and its dead-letter queue. One grant,
    three functions."""
    role = function.role
    actions = [*JOB_EVENTS_ACTIONS, *JOB_TAG_READ_ACTIONS]
    jobs = training_job_arn_pattern(function)
    if stop_requires_tag:
        # IAM itself refuses to stop a job without the opt-in tag, whatever the code does.
        actions.remove("sagemaker:StopTrainingJob")
        role.add_to_policy(
            iam.PolicyStatement(
                sid="StopOptedInTrainingJobs",
                actions=["sagemaker:StopTrainingJob"],
                resources=[jobs],
                conditions={
                    contract.STOP_OPT_IN_OPERATOR: {f"aws:ResourceTag/{stop_requires_tag}": contract.STOP_OPT_IN_VALUE}
                },
            )
        )
    role.add_to_policy(
        iam.PolicyStatement(sid="ObserveStopAndAttributeTrainingJobs", actions=actions, resources=[jobs])
    )
    role.add_to_policy(
        iam.PolicyStatement(sid="TransitionLedger", actions=list(LEDGER_ACTIONS), resources=[table.table_arn])
    )
    role.add_to_policy(
        iam.PolicyStatement(
            sid="DeadLetterFailedEvents", actions=["sqs:SendMessage"], resources=[dead_letters.queue_arn]
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(sid="PublishNotifications", actions=["sns:Publish"], resources=[topic.topic_arn])
    )
    role.add_to_policy(
        iam.PolicyStatement(
            sid="UseGuardKey",  # table items, topic messages and dead letters are encrypted with it
            actions=list(KEY_ACTIONS),
            resources=[key.key_arn],
        )
    )
    role.add_to_policy(iam.PolicyStatement(sid="ReadListPrices", actions=list(PRICE_LIST_ACTIONS), resources=["*"]))
    function.function.configure_async_invoke(
        retry_attempts=FUNCTION_RETRY_ATTEMPTS,
        max_event_age=EVENT_MAX_AGE,
        # jsii calls bind(scope, fn, options) positionally, unlike the typed stub.
        on_failure=QueueDestination(dead_letters),  # type: ignore[arg-type]
    )


def event_target(function: GuardFunction, dead_letters: sqs.IQueue) -> targets.LambdaFunction:
    """An EventBridge target with bounded retries and the same dead-letter queue."""
    return targets.LambdaFunction(
        function.function,
        dead_letter_queue=dead_letters,
        retry_attempts=EVENT_RETRY_ATTEMPTS,
        max_event_age=EVENT_MAX_AGE,
    )


def responder_environment(table: dynamodb.ITable, topic: sns.ITopic, dead_letters: sqs.IQueue) -> dict[str, str]:
    """The configuration is not here: GuardFunction ships it in a layer (Lambda allows 4 KB of environment)."""
    return {
        contract.ENV_TABLE: table.table_name,
        contract.ENV_TOPIC_ARN: topic.topic_arn,
        contract.ENV_REJECTED_EVENTS_QUEUE_URL: dead_letters.queue_url,
    }


class JobEvents(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: GuardConfig,
        key: kms.IKey,
        table: dynamodb.ITable,
        topic: sns.ITopic,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letters = DeadLetterQueue(self, "DeadLetters", key=key).queue
        self.handler = GuardFunction(
            self,
            "Handler",
            handler="training_guard.handlers.job_events.handler",
            description="Training Guard: reacts to SageMaker training job state changes",
            config=config,
            key=key,
            environment=responder_environment(table, topic, self.dead_letters),
        )
        grant_responder(
            self.handler,
            key=key,
            table=table,
            topic=topic,
            dead_letters=self.dead_letters,
            stop_requires_tag=config.stop_requires_tag,
        )
        if config.per_job_alarms:
            self.handler.role.add_to_policy(
                iam.PolicyStatement(
                    sid="KeepPerJobAlarms", actions=list(JOB_ALARM_ACTIONS), resources=[job_alarm_arn_pattern(self)]
                )
            )

        self.rule = events.Rule(
            self,
            "Rule",
            description="SageMaker training job state changes -> Training Guard",
            event_pattern=events.EventPattern(
                source=contract.JOB_EVENTS_PATTERN["source"],
                detail_type=contract.JOB_EVENTS_PATTERN["detail-type"],
            ),
        )
        self.rule.add_target(event_target(self.handler, self.dead_letters))


__all__ = ["JobEvents", "training_job_arn_pattern"]
