"""The Training Guard stack: composes one construct per capability. Environment-agnostic."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import outputs
from infra.components.alerting import Alerting
from infra.components.chat import ChatDelivery, QDeveloperTeamsChannel
from infra.components.digest import WeeklyDigest
from infra.components.encryption import GuardKey
from infra.components.job_events import JobEvents
from infra.components.log_rules import LogRules
from infra.components.log_rules import enabled as log_rules_enabled
from infra.components.metric_guards import MetricGuards
from infra.components.monitoring import Monitoring
from infra.components.slack_app import SlackApp
from infra.components.state import GuardState
from infra.nag import acknowledge_findings
from training_guard import contract
from training_guard.config.model import ConfigError, GuardConfig


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
        # Slack app mode: the app's secrets, its interactivity endpoint and the click worker (before the notifier,
        # which posts with the same bot token).
        self.slack_app = (
            SlackApp(self, "SlackApp", config=config, key=key, table=self.state.table, topic=self.alerting.topic)
            if config.slack.app_mode and config.slack.enabled
            else None
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
                bot_token_secret_name=self.slack_app.bot_token_secret_name if self.slack_app else None,
                bot_token=self.slack_app.bot_token if self.slack_app else None,
            )
            if config.slack.enabled
            else None
        )
        if self.chat is not None and self.slack_app is not None:
            # The job's end, folded into the guard's stop, still updates its Slack card: from the one function that
            # sees a job end (the sweeper reconciles running jobs only; the alarm function and the click worker see
            # findings and clicks, never the lifecycle change that is shown on the card).
            self.chat.accept_card_updates(self.job_events.handler)
        # Q Developer in a Microsoft Teams channel: subscribed to the topic with or without Slack.
        self.teams = (
            QDeveloperTeamsChannel(
                self, "QDeveloperTeams", settings=config.q_developer_teams, topic=self.alerting.topic
            )
            if config.q_developer_teams is not None
            else None
        )
        # The weekly digest (on by default): without digest.enabled, neither its function nor its schedule.
        self.digest = (
            WeeklyDigest(self, "Digest", config=config, key=key, table=self.state.table, topic=self.alerting.topic)
            if config.digest.enabled
            else None
        )
        # The log-rules wing (on by default): the training log group's lines, read as they are written.
        self.log_rules = (
            LogRules(self, "LogRules", config=config, key=key, table=self.state.table, topic=self.alerting.topic)
            if log_rules_enabled(config)
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
        if self.slack_app:
            functions["SlackInteractions"] = self.slack_app.endpoint.function
            functions["SlackClickWorker"] = self.slack_app.worker.function
            queues["SlackClicks"] = self.slack_app.dead_letters
        if self.digest:
            functions["Digest"] = self.digest.handler.function
            queues["Digest"] = self.digest.dead_letters
        if self.log_rules:
            functions["LogEvents"] = self.log_rules.handler.function
            queues["LogRules"] = self.log_rules.dead_letters
        # E-mail subscriptions have one too, with or without Slack.
        if self.alerting.created_dead_letters is not None:
            queues["Subscriptions"] = self.alerting.created_dead_letters
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            topic=self.alerting.topic,
            functions=functions,
            dead_letter_queues=queues,
            watch_secrets=bool(self.chat or self.slack_app),
            dashboard=config.dashboard,
            log_subscription=contract.LOG_SUBSCRIPTION_FILTER_NAME if self.log_rules else None,
        )
        self._outputs()
        if self.log_rules:
            self._log_rules_outputs(self.log_rules)
        acknowledge_findings(self)

    def _outputs(self) -> None:
        """Every value a runbook or `training-guard doctor` needs, under the keys of infra/outputs.py.

        Each is a reference to its resource (Ref or the construct's attribute), never a spelled-out
        name: the output is what CloudFormation created. Ref of an EventBridge rule on the default
        bus is its name; Ref of a queue is its URL; Ref of a function, table or dashboard is its name.
        https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-events-rule.html
        https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-sqs-queue.html
        """

        def output(key: str, value: str, description: str) -> None:
            CfnOutput(self, key, value=value, description=description)

        output(outputs.TOPIC_ARN, self.alerting.topic.topic_arn, "The notification topic (subscribe more here)")
        if self.monitoring.dashboard is not None:
            output(outputs.DASHBOARD_NAME, self.monitoring.dashboard.dashboard_name, "The guard's activity dashboard")
        output(outputs.STATE_TABLE_NAME, self.state.table.table_name, "Transitions handled and the stop audit")
        functions = {
            outputs.JOB_EVENTS_FUNCTION: (self.job_events.handler, "reacts to training job state changes"),
            outputs.ALARM_EVENTS_FUNCTION: (self.metric_guards.alarm_handler, "reacts to metric guard alarms"),
            outputs.SWEEPER_FUNCTION: (self.metric_guards.sweeper, "the scheduled sweep"),
        }
        if self.chat:
            functions[outputs.SLACK_NOTIFIER_FUNCTION] = (self.chat.notifier, "delivers to Slack")
        if self.slack_app:
            functions[outputs.SLACK_INTERACTIONS_FUNCTION] = (self.slack_app.endpoint, "answers Slack's button clicks")
            functions[outputs.SLACK_CLICK_WORKER_FUNCTION] = (self.slack_app.worker, "acts on Slack's button clicks")
        for key, (function, what) in functions.items():
            output(key, function.function.function_name, f"The function that {what}")
        output(outputs.JOB_EVENTS_RULE, self.job_events.rule.rule_name, "The rule for training job state changes")
        output(outputs.ALARM_EVENTS_RULE, self.metric_guards.rule.rule_name, "The rule for the guard's alarms")
        output(outputs.SWEEP_SCHEDULE_RULE, self.metric_guards.schedule.rule_name, "The sweeper's schedule")
        queues: dict[str, tuple[sqs.IQueue, str]] = {
            outputs.JOB_EVENTS_DEAD_LETTERS: (self.job_events.dead_letters, "job events the guard could not handle"),
            outputs.METRIC_GUARDS_DEAD_LETTERS: (
                self.metric_guards.dead_letters,
                "alarm events and sweeps the guard could not handle",
            ),
        }
        if self.chat:
            queues[outputs.CHAT_QUEUE] = (self.chat.queue, "notifications waiting for the Slack notifier")
            queues[outputs.CHAT_DEAD_LETTERS] = (self.chat.dead_letters, "notifications Slack did not take")
        if self.slack_app:
            queues[outputs.SLACK_CLICK_QUEUE] = (self.slack_app.clicks, "Slack button clicks waiting for the worker")
            queues[outputs.SLACK_CLICK_DEAD_LETTERS] = (self.slack_app.dead_letters, "Slack button clicks not acted on")
        subscriptions = self.alerting.created_dead_letters
        if subscriptions is not None:
            queues[outputs.SUBSCRIPTIONS_DEAD_LETTERS] = (subscriptions, "notifications SNS could not deliver")
        for key, (queue, what) in queues.items():
            output(key, queue.queue_url, f"Queue URL: {what}")
        if self.chat:
            keys: dict[str, str] = {}
            for name, secret_name in self.chat.secret_names.items():
                key = outputs.slack_secret(name)
                if key in keys:
                    raise ConfigError(
                        [
                            f"slack.webhooks: {keys[key]!r} and {name!r} differ only in '-', so their secrets would "
                            f"share the stack output {key}; rename one"
                        ],
                        "the stack's outputs",
                    )
                keys[key] = name
                output(key, secret_name, f"The secret holding Slack webhook {name!r} (put its URL here)")
        if self.slack_app:
            app = self.slack_app
            output(
                outputs.SLACK_INTERACTIVITY_URL,
                app.url.url,
                "The Slack app's interactivity request URL (paste it into the app manifest)",
            )
            output(outputs.SLACK_BOT_TOKEN_SECRET, app.bot_token_secret_name, "The secret holding the bot token")
            output(outputs.SLACK_SIGNING_SECRET, app.signing_secret_name, "The secret holding the signing secret")

    def _log_rules_outputs(self, wing: LogRules) -> None:
        """The log rules' function, dead letters, stall check and what the deploy did to the subscription."""
        CfnOutput(
            self,
            outputs.LOG_EVENTS_FUNCTION,
            value=wing.handler.function.function_name,
            description="The function that applies the log rules to training logs",
        )
        CfnOutput(
            self,
            outputs.LOG_RULES_DEAD_LETTERS,
            value=wing.dead_letters.queue_url,
            description="Queue URL: log deliveries and stall checks the guard could not handle",
        )
        if wing.schedule is not None:
            CfnOutput(
                self,
                outputs.LOG_STALL_CHECK_RULE,
                value=wing.schedule.rule_name,
                description="The log rules' stall check",
            )
        CfnOutput(
            self,
            outputs.LOG_SUBSCRIPTION_STATUS,
            value=wing.status,
            description=(
                f"The log rules' subscription to {contract.TRAINING_LOG_GROUP}: subscribed, updated or not-subscribed "
                "(the group holds two filters of others: see the custom resource's status reason)"
            ),
        )
