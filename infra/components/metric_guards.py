"""Metric guards: fleet alarms (Metrics Insights), alarm-events routing, and the scheduled sweeper."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.components.functions import GuardFunction
from infra.components.job_events import (
    JOB_ALARM_ACTIONS,
    event_target,
    grant_responder,
    job_alarm_arn_pattern,
    responder_environment,
)
from infra.components.queues import DeadLetterQueue
from training_guard import contract
from training_guard.config import COMPARISONS, GuardConfig, MetricGuard
from training_guard.metrics import fleet_alarm_name, insights_query

SWEEPER_TIMEOUT = Duration.minutes(5)
SWEEP_ACTIONS = ("cloudwatch:DescribeAlarms",)
# No resource-level permissions exist for these two (IAM service authorization reference).
UNSCOPED_READ_ACTIONS = ("sagemaker:ListTrainingJobs", "cloudwatch:GetMetricData")


class FleetAlarm(Construct):
    """One Metrics Insights multi-time-series alarm: every job (or host) is a contributor."""

    def __init__(self, scope: Construct, construct_id: str, *, guard: MetricGuard) -> None:
        super().__init__(scope, construct_id)
        self.alarm = cloudwatch.CfnAlarm(
            self,
            "Alarm",
            alarm_name=fleet_alarm_name(guard),
            alarm_description=f"Training Guard: {guard.describe()}",
            metrics=[
                cloudwatch.CfnAlarm.MetricDataQueryProperty(
                    id="q", expression=insights_query(guard), period=60, return_data=True
                )
            ],
            comparison_operator=COMPARISONS[guard.comparison],
            threshold=guard.threshold,
            evaluation_periods=guard.periods,
            datapoints_to_alarm=guard.datapoints,
            treat_missing_data="notBreaching",
            # No alarm actions: each contributor's state change reaches the guard through EventBridge.
            actions_enabled=True,
        )


class MetricGuards(Construct):
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
        self.alarms = [FleetAlarm(self, f"Guard-{g.name}", guard=g).alarm for g in config.metric_guards]
        self.dead_letters = DeadLetterQueue(self, "DeadLetters", key=key).queue
        environment = responder_environment(config, table, topic, self.dead_letters)
        grants = {
            "key": key,
            "table": table,
            "topic": topic,
            "dead_letters": self.dead_letters,
            "read_tags": True,
            "stop_requires_tag": config.stop_requires_tag,
        }

        self.alarm_handler = GuardFunction(
            self,
            "AlarmEvents",
            handler="training_guard.handlers.alarm_events.handler",
            description="Training Guard: reacts to its metric guards' alarms",
            environment=environment,
        )
        grant_responder(self.alarm_handler, **grants)  # type: ignore[arg-type]
        self.rule = events.Rule(
            self,
            "AlarmRule",
            description="Training Guard alarm (and alarm contributor) state changes",
            event_pattern=events.EventPattern(
                source=[contract.CLOUDWATCH_EVENT_SOURCE],
                detail_type=[contract.ALARM_STATE_CHANGE, contract.ALARM_CONTRIBUTOR_STATE_CHANGE],
                detail={"alarmName": [{"prefix": contract.ALARM_NAME_PREFIX}]},
            ),
        )
        self.rule.add_target(event_target(self.alarm_handler, self.dead_letters))

        self.sweeper = GuardFunction(
            self,
            "Sweeper",
            handler="training_guard.handlers.sweeper.handler",
            description="Training Guard: orphaned alarms, lost events, stalled jobs",
            environment=environment,
            timeout=SWEEPER_TIMEOUT,
            reserved_concurrency=1,  # one sweep at a time
        )
        grant_responder(self.sweeper, **grants)  # type: ignore[arg-type]
        role = self.sweeper.role
        role.add_to_policy(
            iam.PolicyStatement(
                sid="KeepPerJobAlarms",
                actions=[*JOB_ALARM_ACTIONS, *SWEEP_ACTIONS],
                resources=[job_alarm_arn_pattern(self)],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(sid="ListRunningJobsAndMetrics", actions=list(UNSCOPED_READ_ACTIONS), resources=["*"])
        )
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Training Guard sweep",
            schedule=events.Schedule.rate(Duration.minutes(config.sweep_minutes)),
        )
        self.schedule.add_target(event_target(self.sweeper, self.dead_letters))
