"""Slack app mode: the app's secrets, the interactivity endpoint (a function URL), the click queue and its worker.

Slack POSTs a button click to the request URL, the interaction function: it verifies, refuses replays, hands the
click to an encrypted queue and answers 200 at once (docs/design/slack-clicks.md says why a queue). The worker consumes
the queue: Stop now through the responder's one path to a stop, snoozes, mutes and exemptions into the state table,
the thread told what was done through the bot.

The function URL's auth type is NONE: Slack cannot sign a request with AWS credentials, and the request's own
signature (HMAC-SHA256 with the app's signing secret, within 5 minutes, checked before anything is done) is the
authentication. A NONE URL still needs the function's resource-based policy to allow the public: "your function's
resource-based policy is always in effect and must grant public access before your function URL can receive
requests", and since October 2025 a new function URL needs both lambda:InvokeFunctionUrl and lambda:InvokeFunction
(https://docs.aws.amazon.com/lambda/latest/dg/urls-auth.html). CDK's `add_function_url` adds both permissions
(tested in tests/infra/test_slack_app.py from the synthesized template).
"""

from __future__ import annotations

from aws_cdk import CfnResource, Duration, SecretValue, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components import names
from infra.components.functions import GuardFunction
from infra.components.job_events import grant_responder, responder_environment
from infra.components.queues import DeadLetterQueue, encrypted_queue
from training_guard import contract
from training_guard.adapters.interactions import REPLAY_PREFIX
from training_guard.config.model import GuardConfig

# The acknowledgement reads a secret, writes one item and sends one message: Slack waits 3 seconds for it.
INTERACTION_TIMEOUT = Duration.seconds(10)
# Its cold start must answer within Slack's 3 s with the secret read, the replay marker and the queued click. Modelled
# (bench/ack_model.py, docs/benchmarks.md "Slack acknowledgement on a cold start"): at the default 256 MB (a seventh
# of a vCPU) the imports alone take about 1.6 s and 0.14 s is left for the writes and the network; 512 MB leaves
# 1.0 s, just the wanted margin on imports timed on a faster core than Lambda's; 1024 MB leaves 1.45 s.
INTERACTION_MEMORY_MB = 1024
WORKER_TIMEOUT = Duration.seconds(60)
CLICK_VISIBILITY = Duration.seconds(6 * 60)  # 6 x the worker's timeout, as for the chat queue
CLICK_MAX_RECEIVES = 3  # a click is acted on within minutes or not at all: then its dead-letter queue
CLICK_RETENTION = Duration.hours(1)  # a click older than that is no longer what the person meant
CLICK_BATCH_SIZE = 1  # one click, one person waiting for its answer in the thread
SECRET_READ_ACTIONS = ("secretsmanager:GetSecretValue",)
# The acknowledgement writes its replay markers only: every partition key it names starts with `slack-request#`
# (item-level condition, https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_examples_dynamodb_items.html).
REPLAY_ACTIONS = ("dynamodb:PutItem",)
REPLAY_CONDITION = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{REPLAY_PREFIX}*"]}}
# The interaction function sends to the click queue, encrypted with the guard's key: SendMessage needs
# GenerateDataKey and Decrypt on the key (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/
# sqs-key-management.html); reading the signing secret, encrypted with the same key, needs Decrypt.
SENDER_KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")
FUNCTION_URL_REASON = (
    "The interactivity endpoint is a Lambda function URL with auth type NONE because Slack cannot sign requests "
    "with AWS credentials; every request is authenticated by its Slack signature (HMAC-SHA256 of the raw body with "
    "the app's signing secret, at most 5 minutes old, a replay refused) before anything is done, and only users in "
    "slack.app.allowed_users may act (services/clicks.py)."
)


def bot_token_secret_name(stack: Stack) -> str:
    return names.bot_token_secret_name(stack.stack_name)


def signing_secret_name(stack: Stack) -> str:
    return names.signing_secret_name(stack.stack_name)


class SlackApp(Construct):
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
        stack = Stack.of(self)
        app = config.slack.app
        assert app is not None, "SlackApp is built in app mode only"
        self.bot_token_secret_name = app.bot_token_secret_name or bot_token_secret_name(stack)
        self.signing_secret_name = app.signing_secret_name or signing_secret_name(stack)
        self.bot_token = self._secret(
            "BotToken",
            given=app.bot_token_secret_name,
            name=self.bot_token_secret_name,
            description="Training Guard: the Slack app's bot token (xoxb-..., put it here)",
            placeholder=contract.BOT_TOKEN_PLACEHOLDER,
            key=key,
        )
        self.signing_secret = self._secret(
            "SigningSecret",
            given=app.signing_secret_name,
            name=self.signing_secret_name,
            description="Training Guard: the Slack app's signing secret (put it here)",
            placeholder=contract.SIGNING_SECRET_PLACEHOLDER,
            key=key,
        )

        self.dead_letters = DeadLetterQueue(self, "ClickDeadLetters", key=key).queue
        self.clicks = encrypted_queue(
            self,
            "Clicks",
            key=key,
            visibility_timeout=CLICK_VISIBILITY,
            retention_period=CLICK_RETENTION,
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letters, max_receive_count=CLICK_MAX_RECEIVES),
        )

        self.endpoint = GuardFunction(
            self,
            "Interactions",
            handler="training_guard.handlers.interactions.handler",
            description="Training Guard: Slack's interactivity request URL (verify, acknowledge, queue the click)",
            config=config,
            key=key,
            environment={
                contract.ENV_TABLE: table.table_name,
                contract.ENV_SLACK_SIGNING_SECRET: self.signing_secret_name,
                contract.ENV_CLICK_QUEUE_URL: self.clicks.queue_url,
                contract.ENV_SLACK_ALLOWED_USERS: ",".join(app.allowed_users),
            },
            timeout=INTERACTION_TIMEOUT,
            memory_size=INTERACTION_MEMORY_MB,
        )
        role = self.endpoint.role
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadSigningSecret",
                actions=list(SECRET_READ_ACTIONS),
                resources=[_secret_arn_pattern(self.signing_secret)],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="RecordRequestsAgainstReplays",
                actions=list(REPLAY_ACTIONS),
                resources=[table.table_arn],
                conditions=REPLAY_CONDITION,
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(sid="QueueClicks", actions=["sqs:SendMessage"], resources=[self.clicks.queue_arn])
        )
        role.add_to_policy(
            iam.PolicyStatement(sid="UseGuardKey", actions=list(SENDER_KEY_ACTIONS), resources=[key.key_arn])
        )
        self.url = self.endpoint.function.add_function_url(auth_type=lambda_.FunctionUrlAuthType.NONE)
        cfn_url = self.url.node.default_child
        assert isinstance(cfn_url, CfnResource)
        cfn_url.add_metadata("checkov", {"skip": [{"id": "CKV_AWS_258", "comment": FUNCTION_URL_REASON}]})

        self.worker = GuardFunction(
            self,
            "ClickWorker",
            handler="training_guard.handlers.interactions.worker_handler",
            description="Training Guard: acts on Slack button clicks (stop, snooze, exempt, mute)",
            config=config,
            key=key,
            environment={
                **responder_environment(table, topic, self.dead_letters),
                contract.ENV_SLACK_BOT_TOKEN_SECRET: self.bot_token_secret_name,
            },
            timeout=WORKER_TIMEOUT,
        )
        # Stop now is the responder's stop: describe, read tags, stop, attribute, the ledger (whose item actions also
        # write the mutes, `mutes#<job>` items of the same table), the topic, the key, list prices.
        grant_responder(
            self.worker,
            key=key,
            table=table,
            topic=topic,
            dead_letters=self.dead_letters,
            stop_requires_tag=config.stop_requires_tag,
        )
        self.worker.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadBotToken", actions=list(SECRET_READ_ACTIONS), resources=[_secret_arn_pattern(self.bot_token)]
            )
        )
        self.worker.function.add_event_source(
            event_sources.SqsEventSource(self.clicks, batch_size=CLICK_BATCH_SIZE, report_batch_item_failures=True)
        )

    def _secret(
        self, construct_id: str, *, given: str | None, name: str, description: str, placeholder: str, key: kms.IKey
    ) -> secretsmanager.ISecret:
        if given:
            return secretsmanager.Secret.from_secret_name_v2(self, construct_id, given)
        return secretsmanager.Secret(
            self,
            construct_id,
            secret_name=name,
            description=description,
            # Not a secret: a marker the functions recognise and report until replaced.
            secret_string_value=SecretValue.unsafe_plain_text(placeholder),
            encryption_key=key,
        )


def _secret_arn_pattern(secret: secretsmanager.ISecret) -> str:
    """A secret's ARN; for one referenced by name, its ARN with the random 6-character suffix open."""
    if secret.secret_full_arn is None:
        return f"{secret.secret_arn}-??????"
    return secret.secret_arn
