"""Names shared by the CDK app and the Lambda code, so that the two cannot drift. No I/O, no third-party import."""

from __future__ import annotations

from enum import StrEnum
from typing import Final

SAGEMAKER_EVENT_SOURCE: Final = "aws.sagemaker"
TRAINING_JOB_STATE_CHANGE: Final = "SageMaker Training Job State Change"

# Source and detail-type only: content checks happen in code, where they are tested and logged.
JOB_EVENTS_PATTERN: Final[dict[str, list[str]]] = {
    "source": [SAGEMAKER_EVENT_SOURCE],
    "detail-type": [TRAINING_JOB_STATE_CHANGE],
}

CLOUDWATCH_EVENT_SOURCE: Final = "aws.cloudwatch"
ALARM_STATE_CHANGE: Final = "CloudWatch Alarm State Change"
LOGS_SOURCE: Final = "aws.logs"
LOG_DELIVERY: Final = "CloudWatch Logs subscription delivery"
ALARM_CONTRIBUTOR_STATE_CHANGE: Final = "CloudWatch Alarm Contributor State Change"
ALARM_NAME_PREFIX: Final = "training-guard-"
JOB_ALARM_PREFIX: Final = f"{ALARM_NAME_PREFIX}job-"  # per-job alarms: training-guard-job-<job>-<n>
ALARM_EVENTS_PATTERN: Final[dict[str, object]] = {
    "source": [CLOUDWATCH_EVENT_SOURCE],
    "detail-type": [ALARM_STATE_CHANGE, ALARM_CONTRIBUTOR_STATE_CHANGE],
    "detail": {"alarmName": [{"prefix": ALARM_NAME_PREFIX}]},
}

ENV_CONFIG: Final = "TRAINING_GUARD_CONFIG"  # the validated GuardConfig, serialized as JSON
ENV_TABLE: Final = "TRAINING_GUARD_TABLE"
ENV_TOPIC_ARN: Final = "TRAINING_GUARD_TOPIC_ARN"
ENV_WEBHOOK_SECRETS: Final = "TRAINING_GUARD_WEBHOOK_SECRETS"
ENV_DEAD_LETTER_QUEUE_URL: Final = "TRAINING_GUARD_DEAD_LETTER_QUEUE_URL"
ENV_REJECTED_EVENTS_QUEUE_URL: Final = "TRAINING_GUARD_REJECTED_EVENTS_QUEUE_URL"
ENV_SLACK_MIN_INTERVAL: Final = "TRAINING_GUARD_SLACK_MIN_INTERVAL"  # seconds between posts to a webhook or channel
ENV_SLACK_BOT_TOKEN_SECRET: Final = "TRAINING_GUARD_SLACK_BOT_TOKEN_SECRET"  # noqa: S105 - a variable's name
ENV_SLACK_SIGNING_SECRET: Final = "TRAINING_GUARD_SLACK_SIGNING_SECRET"  # noqa: S105 - a variable's name
ENV_CLICK_QUEUE_URL: Final = "TRAINING_GUARD_CLICK_QUEUE_URL"
# Where the functions that fold a job's end into the stop send its card update (the topic's e-mail must not see it).
ENV_CHAT_QUEUE_URL: Final = "TRAINING_GUARD_CHAT_QUEUE_URL"
# slack.app.allowed_users, comma-separated: the acknowledgement reads no configuration file.
ENV_SLACK_ALLOWED_USERS: Final = "TRAINING_GUARD_SLACK_ALLOWED_USERS"
# The Slack Web API's base URL (unset: Slack's own); the local emulation points it at 127.0.0.1.
ENV_SLACK_API_URL: Final = "TRAINING_GUARD_SLACK_API_URL"
# The GuardConfig as a JSON file in a layer (Lambda allows 4 KB of environment); unset: ENV_CONFIG, inline JSON.
ENV_CONFIG_FILE: Final = "TRAINING_GUARD_CONFIG_FILE"

# Attribution written onto a job the guard stopped (SageMaker tag keys allow ':' and '-').
TAG_STOPPED_BY: Final = "training-guard:stopped-by"
TAG_STOP_REASON: Final = "training-guard:stop-reason"
TAG_STOP_RULE: Final = "training-guard:stop-rule"
TAG_STOPPED_AT: Final = "training-guard:stopped-at"
# What the stop avoided, "up to" (until MaxRuntimeInSeconds), in US dollars at list price: "45.67", or "unknown".
TAG_SPEND_AVOIDED: Final = "training-guard:spend-avoided-usd"
STOPPED_BY_VALUE: Final = "training-guard"
DEFAULT_EXEMPT_TAG: Final = "training-guard:exempt"
DEFAULT_NOTIFY_ONLY_TAG: Final = "training-guard:notify-only"
DEFAULT_BUDGET_TAG: Final = "training-guard:budget-usd"
# Opt-in stopping, shared with the IAM condition on StopTrainingJob: StringEquals is case-sensitive, so is the policy.
STOP_OPT_IN_VALUE: Final = "true"
STOP_OPT_IN_OPERATOR: Final = "StringEquals"


def stop_opted_in(tags: dict[str, str] | None, key: str) -> bool:
    return (tags or {}).get(key) == STOP_OPT_IN_VALUE


# AddTags takes at most 50 tags (docs/limits.md).
TAGS_PER_JOB_MAX: Final = 50
TAG_VALUE_MAX_CHARS: Final = 256

TABLE_PARTITION_KEY: Final = "pk"
TABLE_TTL_ATTRIBUTE: Final = "expires_at"  # epoch seconds, DynamoDB TTL
STOP_KEY_PREFIX: Final = "stop#"  # + the job (a member's: <account>/<job>): its stop record and its mutes' marker

GUARD_METRICS_NAMESPACE: Final = "TrainingGuard"
# Per stop: what it avoided, up to, in US dollars at list price (never when unknown), the stopping rule a dimension.
SPEND_AVOIDED_METRIC: Final = "SpendAvoidedUSD"
# Fleet guards whose Metrics Insights alarm was over a CloudWatch cap in a sweep (the sweeper judged their jobs).
FLEET_ALARMS_OVER_CAP_METRIC: Final = "FleetAlarmsOverCap"
RULE_DIMENSION: Final = "rule"


# The guard's own metrics: published by the handlers, graphed by the dashboard, read by the tests.
class Metric(StrEnum):
    EVENTS_HANDLED = "EventsHandled"
    EVENTS_REJECTED = "EventsRejected"
    UNRECORDED_TRANSITIONS = "UnrecordedTransitions"
    NOTIFICATIONS_PUBLISHED = "NotificationsPublished"
    NOTIFICATIONS_FOLDED = "NotificationsFolded"
    DUPLICATE_TRANSITIONS = "DuplicateTransitions"
    MESSAGES_RECEIVED = "MessagesReceived"
    SLACK_DELIVERED = "SlackDelivered"
    SLACK_FAILED = "SlackFailed"
    SWEEP_FAILURES = "SweepFailures"
    RUNNING_JOBS = "RunningJobs"
    STALLED_JOBS = "StalledJobs"
    RECONCILED = "Reconciled"
    ORPHANED_ALARMS_DELETED = "OrphanedAlarmsDeleted"
    EVENTS_FROM_OTHER_ACCOUNTS = "EventsFromOtherAccounts"
    # The log-rules wing's problems (once a job and problem), deliveries left to the retry (docs/design/log-path.md).
    LOG_RULE_PROBLEMS = "LogRuleProblems"
    LOG_DELIVERIES_UNFINISHED = "LogDeliveriesUnfinished"


# Refusals for want of a Slack secret (the endpoint's 503, a parked message): one self-alarm watches it.
SECRET_NOT_SET_METRIC: Final = "SecretNotSet"  # noqa: S105 - a metric name
SERVICE_DIMENSION: Final = "service"  # Powertools Metrics adds it from POWERTOOLS_SERVICE_NAME
SERVICE_NAME: Final = "training-guard"
OUTCOME_METRIC_PREFIX: Final = "Outcome_"  # + an outcome ("stopped", "would_stop", ...): one metric per outcome
SAGEMAKER_TRAINING_NAMESPACE: Final = "/aws/sagemaker/TrainingJobs"
# Instance metrics carry the dimension Host = "<job>/algo-<n>"; algorithm metrics TrainingJobName.
INSTANCE_METRICS: Final = frozenset(
    {"CPUUtilization", "MemoryUtilization", "GPUUtilization", "GPUMemoryUtilization", "DiskUtilization"}
)
JOB_DIMENSION: Final = "TrainingJobName"
HOST_DIMENSION: Final = "Host"
# Per-job guard tags: "training-guard:alarm:<metric>" = "<stat> <above|below> <threshold> [M/N] [notify|stop]"
JOB_ALARM_TAG_PREFIX: Final = "training-guard:alarm:"
TRAINING_LOG_GROUP: Final = "/aws/sagemaker/TrainingJobs"
RULE_JOB_LOG_GROUP: Final = "/aws/sagemaker/ProcessingJobs"
# The log-rules wing's filter on TRAINING_LOG_GROUP and its per-job tag ("off", "Divergence=notify loss=<metric>").
LOG_SUBSCRIPTION_FILTER_NAME: Final = "training-guard-log-rules"
LOG_RULES_TAG: Final = "training-guard:log-rules"
# The default filter pattern: only lines that may carry a loss or a non-finite value cost an invocation (limits.md).
LOG_FILTER_PATTERN: Final = "%[Ll]oss|LOSS|[Nn]a[Nn]|NAN|[Ii]nfinity|=-?inf|#011|[Ee]val|[Vv]alid|mse|mae|error%"

WEBHOOK_PLACEHOLDER: Final = "REPLACE-ME: put the Slack incoming webhook URL in this secret"
BOT_TOKEN_PLACEHOLDER: Final = "REPLACE-ME: put the Slack app's bot token (xoxb-...) in this secret"  # noqa: S105
SIGNING_SECRET_PLACEHOLDER: Final = "REPLACE-ME: put the Slack app's signing secret in this secret"  # noqa: S105
# Who stopped a job from a Slack button, in the stopped-by tag and the audit record: `slack:<user id>`.
STOPPED_BY_SLACK_PREFIX: Final = "slack:"


def stopped_by(rule: str) -> str:
    return rule if rule.startswith(STOPPED_BY_SLACK_PREFIX) else STOPPED_BY_VALUE


NOTIFICATION_SCHEMA: Final = "training-guard.notification/1"
# A notification document with this member set to true updates its job's Slack card only (no reply, no webhook).
CARD_ONLY: Final = "card_only"
# messages.Notice.DIGEST and the Slack notifier's renderer (which does not import messages) share this spelling.
DIGEST_KIND: Final = "digest"


def self_alarm_prefix(stack_name: str) -> str:
    """The name every self-monitoring alarm starts with (the topic lets them publish; doctor finds them by it). Not
    "training-guard-...": that prefix routes an alarm to the metric-guard handler."""
    return f"{stack_name}-self-"
