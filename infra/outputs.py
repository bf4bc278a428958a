"""The stack's output keys: one definition shared by the stack, the README's runbooks and `training-guard doctor`.

Every value a runbook or the doctor needs is an output, so nobody has to look a physical name up in the console.
"""

from __future__ import annotations

TOPIC_ARN = "NotificationTopicArn"
DASHBOARD_NAME = "DashboardName"
STATE_TABLE_NAME = "StateTableName"

JOB_EVENTS_FUNCTION = "JobEventsFunctionName"
ALARM_EVENTS_FUNCTION = "AlarmEventsFunctionName"
SWEEPER_FUNCTION = "SweeperFunctionName"
SLACK_NOTIFIER_FUNCTION = "SlackNotifierFunctionName"  # only with Slack configured
SLACK_INTERACTIONS_FUNCTION = "SlackInteractionsFunctionName"  # only in Slack app mode
SLACK_CLICK_WORKER_FUNCTION = "SlackClickWorkerFunctionName"  # only in Slack app mode
LOG_EVENTS_FUNCTION = "LogEventsFunctionName"  # only with log_rules.enabled

JOB_EVENTS_RULE = "JobEventsRuleName"
ALARM_EVENTS_RULE = "AlarmEventsRuleName"
SWEEP_SCHEDULE_RULE = "SweepScheduleRuleName"
LOG_STALL_CHECK_RULE = "LogStallCheckRuleName"  # only with log_rules.enabled and the stalled rule not ignored

JOB_EVENTS_DEAD_LETTERS = "JobEventsDeadLetterQueueUrl"
METRIC_GUARDS_DEAD_LETTERS = "MetricGuardsDeadLetterQueueUrl"
CHAT_QUEUE = "ChatQueueUrl"  # only with Slack configured
CHAT_DEAD_LETTERS = "ChatDeadLetterQueueUrl"  # only with Slack configured
SLACK_CLICK_QUEUE = "SlackClickQueueUrl"  # only in Slack app mode
SLACK_CLICK_DEAD_LETTERS = "SlackClickDeadLetterQueueUrl"  # only in Slack app mode
LOG_RULES_DEAD_LETTERS = "LogRulesDeadLetterQueueUrl"  # only with log_rules.enabled
SUBSCRIPTIONS_DEAD_LETTERS = "SubscriptionsDeadLetterQueueUrl"  # only when the topic has a subscription with one

# The log rules' subscription after the deploy: subscribed, updated or not-subscribed (adapters/log_subscription).
LOG_SUBSCRIPTION_STATUS = "LogSubscriptionStatus"  # only with log_rules.enabled

# Slack app mode: the interactivity request URL (the function URL) for the app manifest, and the app's secrets.
SLACK_INTERACTIVITY_URL = "SlackInteractivityUrl"
SLACK_BOT_TOKEN_SECRET = "SlackBotTokenSecretName"  # noqa: S105 - an output key
SLACK_SIGNING_SECRET = "SlackSigningSecretName"  # noqa: S105 - an output key
SLACK_SECRET_PREFIX = "SlackWebhookSecret"  # noqa: S105 - an output key, not a secret; + the webhook's name without dashes, one per webhook


def slack_secret(webhook: str) -> str:
    """The output key of a Slack webhook's secret name."""
    return SLACK_SECRET_PREFIX + webhook.replace("-", "")
