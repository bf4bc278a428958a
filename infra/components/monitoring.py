"""Self-monitoring: the guard alarms on its own failures and shows its activity on a dashboard."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components import names
from training_guard import contract
from training_guard.contract import self_alarm_prefix

PERIOD = Duration.minutes(5)
# Powertools Metrics adds it from POWERTOOLS_SERVICE_NAME (set by GuardFunction).
SERVICE_DIMENSION = {contract.SERVICE_DIMENSION: contract.SERVICE_NAME}
REACTION_METRICS = tuple(
    f"{contract.OUTCOME_METRIC_PREFIX}{outcome}" for outcome in ("stopped", "would_stop", "deferred", "notified")
)
DELIVERY_METRICS = (
    contract.Metric.NOTIFICATIONS_PUBLISHED,
    contract.Metric.NOTIFICATIONS_FOLDED,  # recorded, folded into a stop the guard made (one job, one story)
    contract.Metric.DUPLICATE_TRANSITIONS,
    contract.Metric.SLACK_DELIVERED,
    contract.Metric.SLACK_FAILED,
)
SWEEP_METRICS = (
    contract.Metric.RUNNING_JOBS,
    contract.Metric.RECONCILED,
    contract.Metric.STALLED_JOBS,
    contract.Metric.ORPHANED_ALARMS_DELETED,
    contract.FLEET_ALARMS_OVER_CAP_METRIC,
)
# Spend avoided by the guard's stops: one metric, SpendAvoidedUSD, with the stopping rule as a dimension
# (handlers/receipts.SpendMeter). Rules are only known at run time, so the dashboard asks Metrics Insights,
# which groups by a dimension and serves dashboards up to two weeks of data
# (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-buildquery.html);
# SCHEMA() keeps exactly the metrics with these dimensions, no "Other" group
# (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-troubleshooting.html).
_SPEND_SOURCE = f'SCHEMA("{contract.GUARD_METRICS_NAMESPACE}", {contract.RULE_DIMENSION}, {contract.SERVICE_DIMENSION})'
# Metrics Insights, not SQL, built from the contract's constants only.
SPEND_AVOIDED_PER_DAY_QUERY = f"SELECT SUM({contract.SPEND_AVOIDED_METRIC}) FROM {_SPEND_SOURCE}"  # noqa: S608
SPEND_AVOIDED_PER_RULE_QUERY = (
    f"SELECT SUM({contract.SPEND_AVOIDED_METRIC}) FROM {_SPEND_SOURCE} "  # noqa: S608
    f"GROUP BY {contract.RULE_DIMENSION} ORDER BY SUM() DESC"
)
DAY = Duration.days(1)
# CloudWatch Logs' own metrics of a subscription's delivery (namespace AWS/Logs, dimensions LogGroupName,
# DestinationType, FilterName; https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/CloudWatch-Logs-Monitoring-CloudWatch-Metrics.html).
# Asked by Metrics Insights on the group and the filter's name: the alarm needs no DestinationType value, which the page
# does not spell, and counts whatever dimension set CloudWatch Logs publishes them under.
LOG_DELIVERY_METRICS = ("DeliveryErrors", "DeliveryThrottling")


def log_delivery_query(metric: str, filter_name: str) -> str:
    """Metrics Insights, not SQL: the contract's group and the guard's filter name only."""
    return (
        f'SELECT SUM({metric}) FROM "AWS/Logs" '  # noqa: S608
        f"WHERE LogGroupName = '{contract.TRAINING_LOG_GROUP}' AND FilterName = '{filter_name}'"
    )


SECRET_NOT_SET_ALARM = "SlackSecretNotSet"  # noqa: S105 - an alarm name


def guard_metric(name: str) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=contract.GUARD_METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map=SERVICE_DIMENSION,
        statistic="Sum",
        period=PERIOD,
    )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        topic: sns.ITopic,
        functions: Mapping[str, lambda_.IFunction],
        dead_letter_queues: Mapping[str, sqs.IQueue],
        watch_secrets: bool = False,
        dashboard: bool = False,
        log_subscription: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self).stack_name
        notify = actions.SnsAction(topic)
        self.alarms: list[cloudwatch.Alarm] = []

        def alarm(name: str, metric: cloudwatch.IMetric, description: str) -> None:
            created = cloudwatch.Alarm(
                self,
                name,
                alarm_name=f"{self_alarm_prefix(stack)}{name}",
                alarm_description=description,
                metric=metric,
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            created.add_alarm_action(notify)
            created.add_ok_action(notify)
            self.alarms.append(created)

        for name, function in functions.items():
            alarm(
                f"{name}Errors",
                function.metric_errors(period=PERIOD, statistic="Sum"),
                f"The {name} function failed. Lambda retries it; what still fails goes to its dead-letter "
                "queue. Read the function's log group for the error.",
            )
            alarm(
                f"{name}Throttles",
                function.metric_throttles(period=PERIOD, statistic="Sum"),
                f"The {name} function was throttled (account concurrency). Events are retried for up to 2 hours.",
            )
        for name, queue in dead_letter_queues.items():
            alarm(
                f"{name}DeadLetters",
                queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                f"The {name} dead-letter queue holds messages the guard could not handle. Read their reason, "
                "fix the cause, then redrive them (README, Operate).",
            )

        if watch_secrets:
            alarm(
                SECRET_NOT_SET_ALARM,
                guard_metric(contract.SECRET_NOT_SET_METRIC),
                "Slack was refused for want of a secret: a click answered 503, or a message parked because a Slack "
                "secret holds the stack's placeholder, nothing, or no credential. `training-guard doctor` names the "
                "secret and the put-secret-value command that sets it.",
            )
        alarm(
            "FleetAlarmsOverCap",
            guard_metric(contract.FLEET_ALARMS_OVER_CAP_METRIC),
            "A metric guard's Metrics Insights alarm is over a CloudWatch cap (100 contributors in ALARM, or "
            "PARTIAL_DATA past 500 series): breaching jobs may get no alarm event. The sweeper judges them itself, "
            "once a sweep instead of every minute; `training-guard doctor` names the guard (docs/limits.md).",
        )

        if log_subscription:
            alarm(
                "LogDeliveryErrors",
                cloudwatch.MathExpression(
                    expression=log_delivery_query("DeliveryErrors", log_subscription), period=PERIOD, label=""
                ),
                "CloudWatch Logs could not deliver training log lines to the log rules. After a non-retryable error "
                "(AccessDenied, ResourceNotFound) it disables the subscription for up to 10 minutes and skips those "
                "lines: check the LogEvents function's resource policy and that it exists (README, log rules).",
            )
            alarm(
                "LogDeliveryThrottling",
                cloudwatch.MathExpression(
                    expression=log_delivery_query("DeliveryThrottling", log_subscription), period=PERIOD, label=""
                ),
                "CloudWatch Logs was throttled delivering training log lines to the log rules (account concurrency). "
                "It retries for up to 24 hours; the rules see those lines late.",
            )

        self.dashboard = self._dashboard(stack, functions, dead_letter_queues) if dashboard else None

    def _dashboard(
        self, stack: str, functions: Mapping[str, lambda_.IFunction], dead_letter_queues: Mapping[str, sqs.IQueue]
    ) -> cloudwatch.Dashboard:
        board = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=names.dashboard_name(stack))
        board.add_widgets(
            cloudwatch.GraphWidget(
                title="Reactions (stops, would-have-stopped, deferred, notified)",
                left=[guard_metric(m) for m in REACTION_METRICS],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Notifications and de-duplication", left=[guard_metric(m) for m in DELIVERY_METRICS], width=12
            ),
            cloudwatch.GraphWidget(
                title="Function errors",
                left=[f.metric_errors(period=PERIOD, label=n) for n, f in functions.items()],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Function duration p99 (ms)",
                left=[f.metric_duration(period=PERIOD, statistic="p99", label=n) for n, f in functions.items()],
                width=8,
            ),
            cloudwatch.SingleValueWidget(
                title="Dead letters waiting",
                metrics=[
                    q.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum", label=n)
                    for n, q in dead_letter_queues.items()
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(title="Sweeper", left=[guard_metric(m) for m in SWEEP_METRICS], width=24),
            cloudwatch.GraphWidget(
                title="Spend avoided by stops per day (USD at list price, up to)",
                left=[
                    cloudwatch.MathExpression(
                        expression=SPEND_AVOIDED_PER_DAY_QUERY, period=DAY, label="Spend avoided (USD)"
                    )
                ],
                view=cloudwatch.GraphWidgetView.BAR,
                period=DAY,
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Spend avoided by stops per rule (USD at list price, up to; the time range shown)",
                left=[cloudwatch.MathExpression(expression=SPEND_AVOIDED_PER_RULE_QUERY, period=DAY, label="")],
                view=cloudwatch.GraphWidgetView.BAR,
                set_period_to_time_range=True,
                width=12,
            ),
        )
        return board
