"""Chat delivery: SNS topic -> chat queue -> Slack notifier -> webhooks; and Amazon Q Developer."""

from __future__ import annotations

import json

from aws_cdk import Acknowledgment, ArnFormat, Duration, SecretValue, Stack, Validations
from aws_cdk import aws_chatbot as chatbot
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components import names
from infra.components.functions import GuardFunction
from infra.components.job_events import KEY_ACTIONS, LEDGER_ACTIONS, training_job_arn_pattern
from infra.components.queues import DeadLetterQueue, encrypted_queue
from training_guard import contract
from training_guard.config.model import GuardConfig, QDeveloperConfig, QDeveloperTeamsConfig

NOTIFIER_TIMEOUT = Duration.seconds(60)
# SQS visibility must exceed the function timeout several times over (AWS recommends 6x).
CHAT_VISIBILITY = Duration.seconds(6 * 60)
CHAT_MAX_RECEIVES = 5  # then SQS moves the message to the chat dead-letter queue
CHAT_BATCH_SIZE = 5
# Two concurrent notifiers at most (the event source mapping minimum): with one message per
# second per webhook in each, Slack's ~1 msg/s per webhook limit is met and 429s are honoured.
CHAT_MAX_CONCURRENCY = 2
WEBHOOK_READ_ACTIONS = ("secretsmanager:GetSecretValue",)
# App mode: a firing metric guard's graph. GetMetricWidgetImage has no resource type in the service authorization
# reference, so a statement must name all resources
# (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatch.html).
GRAPH_ACTIONS = ("cloudwatch:GetMetricWidgetImage",)


def webhook_secret_name(stack: Stack, webhook: str) -> str:
    return names.webhook_secret_name(stack.stack_name, webhook)


class ChatDelivery(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: GuardConfig,
        key: kms.IKey,
        table: dynamodb.ITable,
        topic: sns.ITopic,
        subscription_dead_letters: sqs.IQueue,
        bot_token_secret_name: str | None = None,
        bot_token: secretsmanager.ISecret | None = None,
    ) -> None:
        """`bot_token` (and its literal name): app mode's secret (infra/components/slack_app.py); None: webhooks."""
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.dead_letters = DeadLetterQueue(self, "DeadLetters", key=key).queue
        self.queue = encrypted_queue(
            self,
            "Queue",
            key=key,
            visibility_timeout=CHAT_VISIBILITY,
            retention_period=Duration.days(4),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letters, max_receive_count=CHAT_MAX_RECEIVES),
        )
        topic.add_subscription(
            subscriptions.SqsSubscription(
                self.queue, raw_message_delivery=True, dead_letter_queue=subscription_dead_letters
            )
        )

        self.secrets: dict[str, secretsmanager.ISecret] = {}
        # The literal name of each secret, for the outputs and the notifier's environment. A created
        # secret's `secret_name` attribute is a deploy-time expression that re-splits its ARN at "-";
        # the literal needs no parsing and reads the same in synth, diff and the console.
        self.secret_names: dict[str, str] = {}
        for name, hook in config.slack.webhooks.items():
            self.secret_names[name] = hook.secret_name or webhook_secret_name(stack, name)
            if hook.secret_name:
                self.secrets[name] = secretsmanager.Secret.from_secret_name_v2(
                    self, f"Webhook-{name}", hook.secret_name
                )
            else:
                self.secrets[name] = secretsmanager.Secret(
                    self,
                    f"Webhook-{name}",
                    secret_name=self.secret_names[name],
                    description=f"Training Guard: Slack incoming webhook URL for '{name}' (put the URL here)",
                    # Not a secret: a marker the notifier recognises and reports until replaced.
                    secret_string_value=SecretValue.unsafe_plain_text(contract.WEBHOOK_PLACEHOLDER),
                    encryption_key=key,
                )

        environment = {
            contract.ENV_TABLE: table.table_name,
            # Secret names, not ARNs: known at synth, so the 4 KB environment limit is checked
            # exactly, and 20 webhooks fit. GetSecretValue's SecretId is "the ARN or name".
            # https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html
            contract.ENV_WEBHOOK_SECRETS: json.dumps(self.secret_names, separators=(",", ":")),
            contract.ENV_DEAD_LETTER_QUEUE_URL: self.dead_letters.queue_url,
        }
        if bot_token is not None and bot_token_secret_name is not None:
            del environment[contract.ENV_WEBHOOK_SECRETS]
            environment[contract.ENV_SLACK_BOT_TOKEN_SECRET] = bot_token_secret_name
        self.notifier = GuardFunction(
            self,
            "Notifier",
            handler="training_guard.handlers.slack_notifier.handler",
            description="Training Guard: delivers notifications to Slack "
            + ("(app mode: one thread per job)" if bot_token is not None else "webhooks"),
            config=config,
            key=key,
            environment=environment,
            timeout=NOTIFIER_TIMEOUT,
        )
        role = self.notifier.role
        # (consuming the chat queue is granted by the SQS event source below)
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ParkUndeliverable", actions=["sqs:SendMessage"], resources=[self.dead_letters.queue_arn]
            )
        )
        if self.secrets:
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="ReadWebhookUrls",
                    actions=list(WEBHOOK_READ_ACTIONS),
                    resources=[_secret_arn_pattern(secret) for secret in self.secrets.values()],
                )
            )
        if bot_token is not None:
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="ReadBotToken", actions=list(WEBHOOK_READ_ACTIONS), resources=[_secret_arn_pattern(bot_token)]
                )
            )
            role.add_to_policy(
                iam.PolicyStatement(sid="DrawMetricGraphs", actions=list(GRAPH_ACTIONS), resources=["*"])
            )
        role.add_to_policy(
            iam.PolicyStatement(sid="DeliveryLedger", actions=list(LEDGER_ACTIONS), resources=[table.table_arn])
        )
        role.add_to_policy(iam.PolicyStatement(sid="UseGuardKey", actions=list(KEY_ACTIONS), resources=[key.key_arn]))
        self.notifier.function.add_event_source(
            event_sources.SqsEventSource(
                self.queue,
                batch_size=CHAT_BATCH_SIZE,
                report_batch_item_failures=True,
                max_concurrency=CHAT_MAX_CONCURRENCY,
            )
        )

        self.q_developer = (
            QDeveloperChannel(self, "QDeveloper", settings=config.q_developer, topic=topic)
            if config.q_developer
            else None
        )

    def accept_card_updates(self, function: GuardFunction) -> None:
        """Slack app mode: `function` (a responder) hands the job's end, folded into the guard's stop, to this queue as
        a card-only update (chat.py): sent straight here, not through the topic, whose e-mail and Q Developer
        subscribers must not see it. The queue is encrypted with the guard's key, which the responders already use
        (UseGuardKey); its queue policy grants the topic, and a role of the same account needs only its own policy."""
        function.function.add_environment(contract.ENV_CHAT_QUEUE_URL, self.queue.queue_url)
        function.role.add_to_policy(
            iam.PolicyStatement(
                sid="HandCardUpdatesToTheNotifier", actions=["sqs:SendMessage"], resources=[self.queue.queue_arn]
            )
        )


def _secret_arn_pattern(secret: secretsmanager.ISecret) -> str:
    """A secret's ARN; for one referenced by name, its ARN with the random 6-character suffix open."""
    if secret.secret_full_arn is None:
        return f"{secret.secret_arn}-??????"
    return secret.secret_arn


def guardrail_role(scope: Construct) -> tuple[iam.ManagedPolicy, iam.Role]:
    """The channel's guardrail policy (read training jobs and their logs, nothing else) and the role Q Developer
    assumes, limited by it. Without explicit guardrails a channel's permissions default to AdministratorAccess."""
    stack = Stack.of(scope)
    training_logs = stack.format_arn(
        service="logs",
        resource="log-group",
        resource_name=f"{contract.TRAINING_LOG_GROUP}:*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
    guardrail = iam.ManagedPolicy(
        scope,
        "Guardrail",
        description="Training Guard chat channel: read training jobs and their logs, nothing else",
        statements=[
            iam.PolicyStatement(
                sid="ReadTrainingJobs",
                actions=["sagemaker:DescribeTrainingJob"],
                resources=[training_job_arn_pattern(scope)],
            ),
            iam.PolicyStatement(
                sid="ReadTrainingLogs",
                actions=["logs:FilterLogEvents", "logs:GetLogEvents"],
                resources=[training_logs],
            ),
        ],
    )
    role = iam.Role(
        scope,
        "Role",
        assumed_by=iam.ServicePrincipal("chatbot.amazonaws.com"),
        description="Training Guard chat channel role (limited by the guardrail policy)",
        managed_policies=[guardrail],
    )
    Validations.of(guardrail).acknowledge(
        Acknowledgment(
            id="AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:"
            "<AWS::AccountId>:log-group:/aws/sagemaker/TrainingJobs:*]",
            reason="Reading a training job's logs needs its log streams; SageMaker names one stream "
            "per job and host, so the guardrail allows the streams of the training log group only.",
        )
    )
    return guardrail, role


class QDeveloperChannel(Construct):
    """A Slack channel configuration subscribed to the topic, with read-only guardrails.

    Without explicit guardrails a channel's permissions default to AdministratorAccess; this
    one may only read training jobs and their logs, for people in the channel asking about them.
    """

    def __init__(self, scope: Construct, construct_id: str, *, settings: QDeveloperConfig, topic: sns.ITopic) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.guardrail, self.role = guardrail_role(self)
        self.channel = chatbot.SlackChannelConfiguration(
            self,
            "Channel",
            slack_channel_configuration_name=f"{stack.stack_name}-notifications",
            slack_workspace_id=settings.slack_workspace_id,
            slack_channel_id=settings.slack_channel_id,
            notification_topics=[topic],
            guardrail_policies=[self.guardrail],
            role=self.role,
            logging_level=chatbot.LoggingLevel.ERROR,
            user_role_required=False,
        )


class QDeveloperTeamsChannel(Construct):
    """A Microsoft Teams channel configuration subscribed to the topic, with the Slack channel's guardrails.

    AWS::Chatbot::MicrosoftTeamsChannelConfiguration (ConfigurationName, TeamId, TeamsChannelId, TeamsTenantId,
    IamRoleArn, SnsTopicArns, GuardrailPolicies, LoggingLevel, UserRoleRequired;
    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-chatbot-microsoftteamschannelconfiguration.html).
    The team and tenant IDs come from the one-time authorization of Teams in Q Developer's console. CDK has no L2
    construct for it: the L1, with the same guardrail policy and role as the Slack channel.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: QDeveloperTeamsConfig, topic: sns.ITopic
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.guardrail, self.role = guardrail_role(self)
        self.channel = chatbot.CfnMicrosoftTeamsChannelConfiguration(
            self,
            "Channel",
            configuration_name=f"{stack.stack_name}-teams-notifications",
            team_id=settings.team_id,
            teams_channel_id=settings.teams_channel_id,
            teams_tenant_id=settings.teams_tenant_id,
            iam_role_arn=self.role.role_arn,
            sns_topic_arns=[topic.topic_arn],
            guardrail_policies=[self.guardrail.managed_policy_arn],
            logging_level="ERROR",
            user_role_required=False,
        )
