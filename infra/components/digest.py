"""The weekly digest: a scheduled function that publishes the last seven days' totals to the topic.

Scheduled by an EventBridge rule, as the sweeper is (infra/components/metric_guards.py), at the configured weekday
and hour, UTC. Without `digest.enabled` the stack has neither the function nor its schedule (infra/stack.py).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.components.functions import GuardFunction
from infra.components.job_events import (
    EVENT_MAX_AGE,
    FUNCTION_RETRY_ATTEMPTS,
    KEY_ACTIONS,
    QueueDestination,
    event_target,
)
from infra.components.queues import DeadLetterQueue
from training_guard import contract
from training_guard.config.model import Digest, GuardConfig
from training_guard.domain.digest import KEY_PREFIX

# A digest is not urgent and reads the whole state table (a Scan returns at most 1 MB per request,
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Scan.html): more time than the reacting
# functions' 30 s. A longer timeout delays nothing but a retry's takeover of a dead attempt's claim, whose lease
# follows the invocation's remaining time (training_guard.domain.leases).
DIGEST_TIMEOUT = Duration.minutes(5)
# The stop records are keyed by job (`stop#<job>`) in a table without an index, so they are found by a Scan with a
# filter (adapters/activity.py), as `training-guard report` finds them. DynamoDB's item-level condition
# (dynamodb:LeadingKeys) names partition key values, which a Scan does not have: the read is granted on the table.
READ_ACTIONS = ("dynamodb:Scan",)
# The week's exactly-once marker, through the ledger's claim, completion and release (adapters/ledger.py), limited
# to the digest's own items: every partition key the request names must start with `digest#`. The IAM user guide's
# item-level example grants these actions with ForAllValues on dynamodb:LeadingKeys
# (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_examples_dynamodb_items.html).
MARKER_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
MARKER_CONDITION = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{KEY_PREFIX}*"]}}
# GetMetricData has no resource type in the service authorization reference, so a statement must name all
# resources (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html).
METRIC_ACTIONS = ("cloudwatch:GetMetricData",)


def schedule(digest: Digest) -> events.Schedule:
    """Weekly at the configured hour, UTC: `cron(0 <hour> ? * <weekday> *)`. EventBridge's cron takes a value in
    exactly one of day-of-month and day-of-week, and `?` in the other
    (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cron-expressions.html)."""
    return events.Schedule.cron(minute="0", hour=str(digest.hour_utc), week_day=digest.weekday.upper())


class WeeklyDigest(Construct):
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
            "Function",
            handler="training_guard.handlers.digest.handler",
            description="Training Guard: the weekly digest of stops, would-have-stopped and spend avoided",
            config=config,
            key=key,
            environment={contract.ENV_TABLE: table.table_name, contract.ENV_TOPIC_ARN: topic.topic_arn},
            timeout=DIGEST_TIMEOUT,
        )
        role = self.handler.role
        role.add_to_policy(
            iam.PolicyStatement(sid="ReadStopRecords", actions=list(READ_ACTIONS), resources=[table.table_arn])
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="MarkTheWeek",
                actions=list(MARKER_ACTIONS),
                resources=[table.table_arn],
                conditions=MARKER_CONDITION,
            )
        )
        role.add_to_policy(iam.PolicyStatement(sid="ReadGuardMetrics", actions=list(METRIC_ACTIONS), resources=["*"]))
        role.add_to_policy(
            iam.PolicyStatement(sid="PublishNotifications", actions=["sns:Publish"], resources=[topic.topic_arn])
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="UseGuardKey",  # the table's items and the topic's messages are encrypted with it
                actions=list(KEY_ACTIONS),
                resources=[key.key_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="DeadLetterFailedEvents", actions=["sqs:SendMessage"], resources=[self.dead_letters.queue_arn]
            )
        )
        self.handler.function.configure_async_invoke(
            retry_attempts=FUNCTION_RETRY_ATTEMPTS,
            max_event_age=EVENT_MAX_AGE,
            # jsii calls bind(scope, fn, options) positionally, unlike the typed stub.
            on_failure=QueueDestination(self.dead_letters),  # type: ignore[arg-type]
        )
        # "Weekly", not "Schedule": the sweeper's rule is the stack's one rule whose logical ID says Schedule.
        self.schedule = events.Rule(
            self, "Weekly", description="Training Guard weekly digest", schedule=schedule(config.digest)
        )
        self.schedule.add_target(event_target(self.handler, self.dead_letters))
