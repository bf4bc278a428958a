"""Metric guards: fleet alarms (Metrics Insights), alarm-events routing, and the scheduled sweeper."""

from __future__ import annotations

from aws_cdk import CfnResource, Duration
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
from training_guard.config.model import COMPARISONS, GuardConfig, MetricGuard
from training_guard.domain.metric_guards import fleet_alarm_name, insights_query

# A sweep must end before the next one is scheduled: at most 4 minutes and a minute less than the
# interval, but never under the functions' default 30 s (a 1-minute sweep gets 30 s).
SWEEPER_MAX_TIMEOUT = Duration.minutes(4)
SWEEPER_MIN_TIMEOUT = Duration.seconds(30)
# Reads of alarms, granted on "*": DescribeAlarms answers a name-prefix query (the per-job alarms)
# and DescribeAlarmContributors reads a fleet alarm's contributors in ALARM. The service
# authorization reference lists the `alarm` resource type for DescribeAlarms, but not how a prefix
# query (no alarm named in the request) is authorized against it; CloudWatch's permissions reference
# grants its actions on "*" and warns that a narrower DescribeAlarms scope silently returns less. A
# read that silently returns less hides an alarm from the sweeper, so these reads are not narrowed.
# https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/permissions-reference-cw.html
# https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html
ALARM_READ_ACTIONS = ("cloudwatch:DescribeAlarms", "cloudwatch:DescribeAlarmContributors")
# No resource-level permissions exist for these two (IAM service authorization reference).
UNSCOPED_READ_ACTIONS = ("sagemaker:ListTrainingJobs", "cloudwatch:GetMetricData")


def sweeper_timeout(sweep_minutes: int) -> Duration:
    """Strictly shorter than the schedule interval, so one sweep never overlaps the next."""
    seconds = min(SWEEPER_MAX_TIMEOUT.to_seconds(), sweep_minutes * 60 - 60)
    return Duration.seconds(max(SWEEPER_MIN_TIMEOUT.to_seconds(), seconds))


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
        environment = responder_environment(table, topic, self.dead_letters)
        grants = {
            "key": key,
            "table": table,
            "topic": topic,
            "dead_letters": self.dead_letters,
            "stop_requires_tag": config.stop_requires_tag,
        }

        self.alarm_handler = GuardFunction(
            self,
            "AlarmEvents",
            handler="training_guard.handlers.alarm_events.handler",
            description="Training Guard: reacts to its metric guards' alarms",
            config=config,
            key=key,
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
            description="Training Guard: orphaned alarms, lost events, stalled jobs, budgets, idle GPUs",
            config=config,
            key=key,
            environment=environment,
            timeout=sweeper_timeout(config.sweep_minutes),
            # No reserved concurrency: a reservation must leave 100 unreserved executions, so it makes
            # the stack fail to create in accounts with a concurrency quota of 10. Nothing depends on
            # one sweep at a time: the ledger makes every stop, alarm and announcement idempotent, and
            # the timeout ends a sweep before the next is scheduled.
        )
        grant_responder(self.sweeper, **grants)  # type: ignore[arg-type]
        role = self.sweeper.role
        role.add_to_policy(
            iam.PolicyStatement(
                sid="KeepPerJobAlarms", actions=list(JOB_ALARM_ACTIONS), resources=[job_alarm_arn_pattern(self)]
            )
        )
        role.add_to_policy(iam.PolicyStatement(sid="ReadAlarms", actions=list(ALARM_READ_ACTIONS), resources=["*"]))
        # cfn-lint's IAM action list (from the service authorization reference) predates the
        # DescribeAlarmContributors API, so it warns W3037 "unknown action" on this policy only.
        policy = role.node.find_child("DefaultPolicy").node.default_child
        assert isinstance(policy, CfnResource)
        policy.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3037"]}})
        role.add_to_policy(
            iam.PolicyStatement(sid="ListRunningJobsAndMetrics", actions=list(UNSCOPED_READ_ACTIONS), resources=["*"])
        )
        # Once per table, the mutes an earlier version wrote get their markers (adapters/mutes.mark_once): a Scan.
        role.add_to_policy(
            iam.PolicyStatement(sid="MarkMutesOnce", actions=["dynamodb:Scan"], resources=[table.table_arn])
        )
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Training Guard sweep",
            schedule=events.Schedule.rate(Duration.minutes(config.sweep_minutes)),
        )
        self.schedule.add_target(event_target(self.sweeper, self.dead_letters))
