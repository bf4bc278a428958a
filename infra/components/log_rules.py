"""The log-rules wing: its function, CloudWatch Logs' permission to invoke it, the subscription on the training log
group (a custom resource: docs/design/log-subscription.md), the stall check's schedule."""

from __future__ import annotations

import re
from dataclasses import dataclass

from aws_cdk import ArnFormat, Aws, CustomResource, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.components.encryption import logs_principal
from infra.components.functions import GuardFunction
from infra.components.job_events import event_target, grant_responder, responder_environment
from infra.components.metric_guards import sweeper_timeout
from infra.components.queues import DeadLetterQueue
from training_guard import contract
from training_guard.config.model import ConfigError, GuardConfig, LogAction
from training_guard.domain.log_filter import default_filter_pattern, effective_filter_pattern

LOG_EVENTS_HANDLER = "training_guard.handlers.log_events.handler"
SUBSCRIPTION_HANDLER = "training_guard.handlers.log_subscription.handler"
SUBSCRIPTION_RESOURCE_TYPE = "Custom::TrainingGuardLogSubscription"
# Reads with no resource-level permission (service authorization reference, SageMaker AI): the stall check lists the
# running jobs whose streams it asks about.
STALL_CHECK_ACTIONS = ("sagemaker:ListTrainingJobs",)
SUBSCRIPTION_ACTIONS = (
    "logs:CreateLogGroup",
    "logs:DescribeSubscriptionFilters",
    "logs:PutSubscriptionFilter",
    "logs:DeleteSubscriptionFilter",
)
# The custom resource answers within seconds; without an answer CloudFormation would wait an hour by default.
# https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-cloudformation-customresource.html
SUBSCRIPTION_SERVICE_TIMEOUT = Duration.minutes(5)
SUBSCRIPTION_TIMEOUT = Duration.seconds(60)

# CloudWatch Logs' filter pattern limits (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/FilterAndPatternSyntax.html;
# https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutSubscriptionFilter.html): at most 1024
# characters; at most 2 regular expressions in one pattern; a regex (between % signs) only of letters, digits, the
# symbols _ # = @ / ; , - and the operators ^ $ ? [ ] { } | \ * + . (no parentheses, nothing multi-byte).
FILTER_PATTERN_MAX_CHARS = 1024
REGEX_PER_PATTERN_MAX = 2
_REGEX = re.compile(r"%([^%]*)%")
_REGEX_ALLOWED = re.compile(r"[A-Za-z0-9_#=@/;,\-^$?\[\]{}|\\*+.]*")


def filter_pattern_problems(pattern: str) -> list[str]:
    """What CloudWatch Logs would refuse in a subscription filter pattern, one line each naming the fix."""
    where = "log_rules.filter_pattern"
    problems = []
    if len(pattern) > FILTER_PATTERN_MAX_CHARS:
        problems.append(
            f"{where}: {len(pattern)} characters, over CloudWatch Logs' {FILTER_PATTERN_MAX_CHARS}; shorten it"
        )
    regexes = _REGEX.findall(pattern)
    if len(regexes) > REGEX_PER_PATTERN_MAX:
        problems.append(
            f"{where}: {len(regexes)} regular expressions (%...%), over CloudWatch Logs' {REGEX_PER_PATTERN_MAX} a "
            "pattern; join them with | inside one"
        )
    if pattern.count("%") % 2:
        problems.append(f"{where}: an unclosed %...% regular expression; close it or remove the %")
    for regex in regexes:
        if not regex:
            problems.append(f"{where}: an empty %% regular expression; remove it")
        elif not _REGEX_ALLOWED.fullmatch(regex):
            bad = sorted({c for c in regex if not _REGEX_ALLOWED.fullmatch(c)})
            problems.append(
                f"{where}: %{regex}% uses {' '.join(repr(c) for c in bad)}, which CloudWatch Logs' regex dialect "
                "refuses (letters, digits, _ # = @ / ; , - and ^ $ ? [ ] {} | \\ * + . only; no parentheses)"
            )
    return problems


@dataclass(frozen=True)
class WingSettings:
    """What the infrastructure reads of `GuardConfig.log_rules`."""

    enabled: bool = True
    filter_pattern: str = contract.LOG_FILTER_PATTERN
    stall_check: bool = True  # log_rules.stalled.action is not "ignore"

    @classmethod
    def of(cls, config: GuardConfig) -> WingSettings:
        rules = config.log_rules
        return cls(
            enabled=rules.enabled,
            filter_pattern=effective_filter_pattern(rules),
            stall_check=rules.stalled.action is not LogAction.IGNORE,
        )


def training_log_group_arn(scope: Construct) -> str:
    """The training log group's ARN as CloudWatch Logs names the source of a delivery (with the `:*` suffix)."""
    return Stack.of(scope).format_arn(
        service="logs",
        resource="log-group",
        resource_name=f"{contract.TRAINING_LOG_GROUP}:*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


def training_log_group_arns(scope: Construct) -> list[str]:
    """The group as IAM names it for the subscription calls: with and without the `:*` suffix (CreateLogGroup and the
    filter calls authorize against the log-group resource; both spellings are in use)."""
    bare = Stack.of(scope).format_arn(
        service="logs",
        resource="log-group",
        resource_name=contract.TRAINING_LOG_GROUP,
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
    return [bare, training_log_group_arn(scope)]


class LogRules(Construct):
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
        wing = WingSettings.of(config)
        problems = filter_pattern_problems(wing.filter_pattern)
        if problems:
            raise ConfigError(problems, "log_rules")
        self.filter_pattern = wing.filter_pattern
        self.dead_letters = DeadLetterQueue(self, "DeadLetters", key=key).queue
        self.handler = GuardFunction(
            self,
            "Handler",
            handler=LOG_EVENTS_HANDLER,
            description="Training Guard: applies the log rules to training log lines, and the stall check",
            config=config,
            key=key,
            environment=responder_environment(table, topic, self.dead_letters),
            # The scheduled stall check must end before the next one, like the sweep it is scheduled with.
            timeout=sweeper_timeout(config.sweep_minutes),
        )
        grant_responder(
            self.handler,
            key=key,
            table=table,
            topic=topic,
            dead_letters=self.dead_letters,
            stop_requires_tag=config.stop_requires_tag,
        )
        self.handler.role.add_to_policy(
            iam.PolicyStatement(sid="ListRunningJobs", actions=list(STALL_CHECK_ACTIONS), resources=["*"])
        )
        # Exactly CloudWatch Logs delivering the training log group of this account (the function's resource policy).
        self.permission = lambda_.CfnPermission(
            self,
            "CloudWatchLogsInvoke",
            action="lambda:InvokeFunction",
            function_name=self.handler.function.function_arn,
            principal=logs_principal(),
            source_account=Aws.ACCOUNT_ID,
            source_arn=training_log_group_arn(self),
        )

        self.subscriber = GuardFunction(
            self,
            "Subscriber",
            handler=SUBSCRIPTION_HANDLER,
            description="Training Guard: subscribes the log rules to the training log group at deploy time",
            config=config,
            key=key,
            environment={},
            timeout=SUBSCRIPTION_TIMEOUT,
            memory_size=128,
        )
        self.subscriber.role.add_to_policy(
            iam.PolicyStatement(
                sid="SubscribeTrainingLogGroup",
                actions=list(SUBSCRIPTION_ACTIONS),
                resources=training_log_group_arns(self),
            )
        )
        self.subscription = CustomResource(
            self,
            "Subscription",
            service_token=self.subscriber.function.function_arn,
            resource_type=SUBSCRIPTION_RESOURCE_TYPE,
            service_timeout=SUBSCRIPTION_SERVICE_TIMEOUT,
            properties={
                "LogGroupName": contract.TRAINING_LOG_GROUP,
                "FilterName": contract.LOG_SUBSCRIPTION_FILTER_NAME,
                "FilterPattern": wing.filter_pattern,
                "DestinationArn": self.handler.function.function_arn,
            },
        )
        # CloudWatch Logs checks it may invoke the function when the filter is put.
        self.subscription.node.add_dependency(self.permission)
        self.subscription.node.add_dependency(self.subscriber.role)

        self.schedule: events.Rule | None = None
        if wing.stall_check:
            self.schedule = events.Rule(
                self,
                "StallCheck",
                description="Training Guard log rules: the stall check (StalledTrainingRule)",
                schedule=events.Schedule.rate(Duration.minutes(config.sweep_minutes)),
            )
            self.schedule.add_target(event_target(self.handler, self.dead_letters))

    @property
    def status(self) -> str:
        """The subscription's status after the deploy (adapters.log_subscription.Status), for the stack output."""
        return self.subscription.get_att_string("Status")


def enabled(config: GuardConfig) -> bool:
    return WingSettings.of(config).enabled


__all__ = [
    "LogRules",
    "WingSettings",
    "default_filter_pattern",
    "effective_filter_pattern",
    "enabled",
    "filter_pattern_problems",
    "training_log_group_arn",
]
