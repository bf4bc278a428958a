"""The chat path in the synthesized template: queue, DLQs, event source, secrets, IAM, Q Developer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.components import chat
from tests.infra.conftest import ConfigSynth, Synth, expected_rows, statement_rows, synthesized
from training_guard import contract


def getatt(logical_id: str) -> dict[str, list[str]]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    config = tmp_path_factory.mktemp("config") / "guard.json"
    config.write_text(
        json.dumps(
            {
                "slack": {
                    "webhooks": {"default": {}, "on-call": {}, "vision": {"secret_name": "teams/vision/slack"}},
                    "team_tag": "team",
                },
                "q_developer": {"slack_workspace_id": "T0123ABCD", "slack_channel_id": "C0123ABCD"},
            }
        )
    )
    return Synth(tmp_path_factory.mktemp("routed"), {"config": str(config)})


def test_chat_queue_is_encrypted_and_redrives_to_its_dead_letter_queue(synth: Synth) -> None:
    queue_id, queue = synth.one("AWS::SQS::Queue", "ChatQueue")
    dlq_id, _ = synth.one("AWS::SQS::Queue", "ChatDeadLetters")
    key_id, _ = synth.one("AWS::KMS::Key")
    props = queue["Properties"]
    assert props["KmsMasterKeyId"] == getatt(key_id)
    assert props["VisibilityTimeout"] == 360  # 6 x the notifier's 60 s timeout
    assert props["RedrivePolicy"] == {"deadLetterTargetArn": getatt(dlq_id), "maxReceiveCount": 5}
    policies = [
        p for p in synth.resources("AWS::SQS::QueuePolicy").values() if p["Properties"]["Queues"] == [{"Ref": queue_id}]
    ]
    [policy] = policies
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
    )
    [allow] = [s for s in statements if s["Effect"] == "Allow"]
    topic_id, _ = synth.one("AWS::SNS::Topic")
    assert allow["Principal"] == {"Service": "sns.amazonaws.com"}
    assert allow["Action"] == "sqs:SendMessage"
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Ref": topic_id}}}


def test_topic_delivers_raw_documents_to_the_chat_queue_with_a_subscription_dlq(synth: Synth) -> None:
    queue_id, _ = synth.one("AWS::SQS::Queue", "ChatQueue")
    alerting_dlq, _ = synth.one("AWS::SQS::Queue", "AlertingDeadLetters")
    [subscription] = [
        s for s in synth.resources("AWS::SNS::Subscription").values() if s["Properties"]["Protocol"] == "sqs"
    ]
    props = subscription["Properties"]
    assert props["Endpoint"] == getatt(queue_id)
    assert props["RawMessageDelivery"] is True
    assert props["RedrivePolicy"] == {"deadLetterTargetArn": getatt(alerting_dlq)}


def test_notifier_consumes_in_small_batches_with_partial_failures_and_bounded_concurrency(synth: Synth) -> None:
    _, mapping = synth.one("AWS::Lambda::EventSourceMapping")
    queue_id, _ = synth.one("AWS::SQS::Queue", "ChatQueue")
    fn_id, fn = synth.one("AWS::Lambda::Function", "ChatNotifier")
    props = mapping["Properties"]
    assert props["EventSourceArn"] == getatt(queue_id)
    assert props["FunctionName"] == {"Ref": fn_id}
    assert props["BatchSize"] == chat.CHAT_BATCH_SIZE == 5
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["ScalingConfig"] == {"MaximumConcurrency": 2}
    assert fn["Properties"]["Handler"] == "training_guard.handlers.slack_notifier.handler"
    assert fn["Properties"]["Timeout"] == 60


def test_the_webhook_secret_is_created_with_a_placeholder_and_the_guard_key(synth: Synth) -> None:
    _, secret = synth.one("AWS::SecretsManager::Secret")
    key_id, _ = synth.one("AWS::KMS::Key")
    props = secret["Properties"]
    assert props["Name"] == "TrainingGuard/slack/default"
    assert props["SecretString"] == contract.WEBHOOK_PLACEHOLDER
    assert props["KmsKeyId"] == getatt(key_id)
    assert synth.json["Outputs"]["SlackWebhookSecretdefault"]["Value"]


def test_no_webhook_url_is_in_the_template_or_the_environment(synth: Synth) -> None:
    text = json.dumps(synth.json)
    assert "hooks.slack.com/services" not in text
    _, fn = synth.one("AWS::Lambda::Function", "ChatNotifier")
    env = fn["Properties"]["Environment"]["Variables"]
    _, secret = synth.one("AWS::SecretsManager::Secret")
    # the secret's name (GetSecretValue takes a name or an ARN), never its value
    assert json.loads(env[contract.ENV_WEBHOOK_SECRETS]) == {"default": secret["Properties"]["Name"]}


def _statements(synth: Synth, path_part: str) -> list[tuple[Any, Any, Any]]:
    _, policy = synth.one("AWS::IAM::Policy", path_part)
    return statement_rows(policy["Properties"]["PolicyDocument"]["Statement"])


def test_notifier_role_has_exactly_the_permissions_it_needs(synth: Synth) -> None:
    log_id, _ = synth.one("AWS::Logs::LogGroup", "ChatNotifier")
    queue_id, _ = synth.one("AWS::SQS::Queue", "ChatQueue")
    dlq_id, _ = synth.one("AWS::SQS::Queue", "ChatDeadLetters")
    secret_id, _ = synth.one("AWS::SecretsManager::Secret")
    table_id, _ = synth.one("AWS::DynamoDB::Table")
    key_id, _ = synth.one("AWS::KMS::Key")
    assert _statements(synth, "ChatNotifier") == expected_rows(
        [
            ("WriteOwnLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], getatt(log_id)),
            (None, ["xray:PutTraceSegments", "xray:PutTelemetryRecords"], "*"),
            ("ParkUndeliverable", "sqs:SendMessage", getatt(dlq_id)),
            ("ReadWebhookUrls", "secretsmanager:GetSecretValue", {"Ref": secret_id}),
            (
                "DeliveryLedger",
                ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
                getatt(table_id),
            ),
            ("UseGuardKey", ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"], getatt(key_id)),
            # added by the SQS event source: consume the chat queue and decrypt its messages
            (
                None,
                [
                    "sqs:ReceiveMessage",
                    "sqs:ChangeMessageVisibility",
                    "sqs:GetQueueUrl",
                    "sqs:DeleteMessage",
                    "sqs:GetQueueAttributes",
                ],
                getatt(queue_id),
            ),
            (None, "kms:Decrypt", getatt(key_id)),
        ]
    )


def test_the_outputs_name_each_webhook_secret_exactly(routed: Synth) -> None:
    # The literal names, not CDK's deploy-time re-split of the secret's ARN at "-" (a name with "-"
    # is where such parsing goes wrong).
    outputs = routed.json["Outputs"]
    assert outputs["SlackWebhookSecretoncall"]["Value"] == "TrainingGuard/slack/on-call"
    assert outputs["SlackWebhookSecretdefault"]["Value"] == "TrainingGuard/slack/default"
    assert outputs["SlackWebhookSecretvision"]["Value"] == "teams/vision/slack"


def test_a_webhook_secret_named_in_the_config_is_read_not_created(routed: Synth) -> None:
    created = sorted(s["Properties"]["Name"] for s in routed.resources("AWS::SecretsManager::Secret").values())
    assert created == ["TrainingGuard/slack/default", "TrainingGuard/slack/on-call"]
    [(_, _, resources)] = [s for s in _statements(routed, "ChatNotifier") if s[0] == "ReadWebhookUrls"]
    assert {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":secretsmanager:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":secret:teams/vision/slack-??????",
            ],
        ]
    } in resources


def test_q_developer_channel_is_subscribed_with_read_only_guardrails(routed: Synth) -> None:
    _, channel = routed.one("AWS::Chatbot::SlackChannelConfiguration")
    topic_id, _ = routed.one("AWS::SNS::Topic")
    policy_id, policy = routed.one("AWS::IAM::ManagedPolicy")
    props = channel["Properties"]
    assert (props["SlackWorkspaceId"], props["SlackChannelId"]) == ("T0123ABCD", "C0123ABCD")
    assert props["SnsTopicArns"] == [{"Ref": topic_id}]
    assert props["GuardrailPolicies"] == [{"Ref": policy_id}]
    assert props["UserRoleRequired"] is False
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert [(s["Sid"], s["Action"]) for s in statements] == [
        ("ReadTrainingJobs", "sagemaker:DescribeTrainingJob"),
        ("ReadTrainingLogs", ["logs:FilterLogEvents", "logs:GetLogEvents"]),
    ]
    assert "AdministratorAccess" not in json.dumps(routed.json)
    _, role = routed.one("AWS::IAM::Role", "QDeveloper")
    assert role["Properties"]["ManagedPolicyArns"] == [{"Ref": policy_id}]
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "chatbot.amazonaws.com"
    }


def test_without_slack_webhooks_there_is_no_chat_path(tmp_path: Path) -> None:
    # null: the built-in default, no webhook (cdk.json names one); test_outputs reads the same templates
    plain = synthesized(ConfigSynth, {"slack": None}, tmp_path)
    assert plain.resources("AWS::Lambda::EventSourceMapping") == {}
    assert plain.resources("AWS::SecretsManager::Secret") == {}


def test_a_card_only_update_gives_up_waiting_for_the_card_before_the_queue_would_dead_letter_it() -> None:
    """A card-only update waits for the job's card by coming back after the queue's visibility timeout (busy).
    It must stop waiting (training_guard.services.slack_app_delivery.CARD_WAIT_SECONDS) while it still has receives left, or a card that
    never comes would send it to the chat dead-letter queue and an operator's alarm."""
    from training_guard.services import slack_app_delivery as notifier

    visibility = chat.CHAT_VISIBILITY.to_seconds()
    # received at 0, v, 2v, ...: the first receive at or past the wait gives up, and is still within the limit
    last_receive = -(-notifier.CARD_WAIT_SECONDS // visibility) * visibility
    assert last_receive // visibility + 1 <= chat.CHAT_MAX_RECEIVES
    # and it waits long enough for the stop's own delivery to be retried at least twice
    assert 2 * visibility <= notifier.CARD_WAIT_SECONDS
