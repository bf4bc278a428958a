"""Slack app mode in the synthesized template: the app's secrets, the function URL and who may call it, the click
queue with its dead-letter queue and alarm, each role statement by statement, the delivery graph, the outputs, and
webhook mode's template without any of it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from infra import outputs
from infra.components import slack_app
from tests.infra import delivery
from tests.infra.conftest import Synth, expected_rows, statement_rows
from training_guard import contract

APP = {
    "slack": {
        "mode": "app",
        "webhooks": None,  # the shipped cdk.json names a webhook: app mode removes it
        "app": {"channels": {"default": "C0ALERTS", "ops": "C0OPS"}, "allowed_users": ["U0ALICE", "U0BOB"]},
    },
    "metric_guards": [{"name": "loss-high", "metric": "train:loss", "threshold": 5}],
}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    config = tmp_path_factory.mktemp("config") / "app.json"
    config.write_text(json.dumps(APP))
    return Synth(tmp_path_factory.mktemp("app"), {"config": str(config)})


def getatt(logical_id: str, attribute: str = "Arn") -> dict[str, list[str]]:
    return {"Fn::GetAtt": [logical_id, attribute]}


def role_statements(synth: Synth, role_part: str) -> list[dict[str, Any]]:
    [policy] = [p for k, p in synth.resources("AWS::IAM::Policy").items() if role_part in k]
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def test_the_function_url_is_public_and_both_invoke_permissions_are_granted(app: Synth) -> None:
    fn_id, _ = app.one("AWS::Lambda::Function", "SlackAppInteractions")
    url_id, url = app.one("AWS::Lambda::Url")
    assert url["Properties"] == {"AuthType": "NONE", "TargetFunctionArn": getatt(fn_id)}
    skips = url["Metadata"]["checkov"]["skip"]
    assert skips == [{"id": "CKV_AWS_258", "comment": slack_app.FUNCTION_URL_REASON}]
    permissions = sorted(
        (
            p["Properties"]
            for p in app.resources("AWS::Lambda::Permission").values()
            if p["Properties"]["Principal"] == "*"
        ),
        key=lambda p: p["Action"],
    )
    assert permissions == [
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": getatt(fn_id),
            "InvokedViaFunctionUrl": True,
            "Principal": "*",
        },
        {
            "Action": "lambda:InvokeFunctionUrl",
            "FunctionName": getatt(fn_id),
            "FunctionUrlAuthType": "NONE",
            "Principal": "*",
        },
    ]
    assert app.json["Outputs"][outputs.SLACK_INTERACTIVITY_URL]["Value"] == getatt(url_id, "FunctionUrl")


def test_the_endpoint_is_sized_so_that_a_cold_acknowledgement_holds_slacks_3_seconds(app: Synth) -> None:
    """bench/ack_model.py: at the default 256 MB the imports alone eat the budget; 1024 MB leaves 1.45 s."""
    from bench import ack_model

    _, function = app.one("AWS::Lambda::Function", "SlackAppInteractions")
    assert function["Properties"]["MemorySize"] == slack_app.INTERACTION_MEMORY_MB == 1024
    assert function["Properties"]["Timeout"] == 10
    rows = {r.memory_mb: r for r in ack_model.model(import_ms=234.0, first_call_ms=20.5)}  # docs/benchmarks.md
    assert rows[1024].headroom_ms >= ack_model.REQUIRED_HEADROOM_MS
    smallest = ack_model.smallest_that_holds(list(rows.values()))
    assert smallest is not None
    assert smallest <= slack_app.INTERACTION_MEMORY_MB
    _, worker = app.one("AWS::Lambda::Function", "SlackAppClickWorker")
    assert worker["Properties"]["MemorySize"] == 256  # acts later, from the queue: no 3 s to meet


def test_the_apps_secrets_are_created_as_placeholders_encrypted_with_the_guards_key(app: Synth) -> None:
    key_id, _ = app.one("AWS::KMS::Key")
    _, token = app.one("AWS::SecretsManager::Secret", "BotToken")
    _, signing = app.one("AWS::SecretsManager::Secret", "SigningSecret")
    assert token["Properties"]["SecretString"] == contract.BOT_TOKEN_PLACEHOLDER
    assert signing["Properties"]["SecretString"] == contract.SIGNING_SECRET_PLACEHOLDER
    assert token["Properties"]["KmsKeyId"] == getatt(key_id) == signing["Properties"]["KmsKeyId"]
    assert app.json["Outputs"][outputs.SLACK_BOT_TOKEN_SECRET]["Value"] == "TrainingGuard/slack/slack-app-bot-token"
    assert not app.resources("AWS::SecretsManager::Secret").keys() - {
        app.one("AWS::SecretsManager::Secret", "BotToken")[0],
        app.one("AWS::SecretsManager::Secret", "SigningSecret")[0],
    }  # no webhook secret in app mode


def test_the_click_queue_is_encrypted_redrives_to_its_dead_letter_queue_which_alarms(app: Synth) -> None:
    key_id, _ = app.one("AWS::KMS::Key")
    queue_id, queue = app.one("AWS::SQS::Queue", "SlackAppClicks")
    dlq_id, dlq = app.one("AWS::SQS::Queue", "SlackAppClickDeadLetters")
    assert queue["Properties"]["KmsMasterKeyId"] == getatt(key_id) == dlq["Properties"]["KmsMasterKeyId"]
    assert queue["Properties"]["RedrivePolicy"] == {
        "deadLetterTargetArn": getatt(dlq_id),
        "maxReceiveCount": slack_app.CLICK_MAX_RECEIVES,
    }
    assert queue["Properties"]["VisibilityTimeout"] == 360
    worker_id, _ = app.one("AWS::Lambda::Function", "SlackAppClickWorker")
    [mapping] = [
        m["Properties"]
        for m in app.resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == getatt(queue_id)
    ]
    assert mapping["FunctionName"] == {"Ref": worker_id}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    _, alarm = app.one("AWS::CloudWatch::Alarm", "SlackClicksDeadLetters")
    [dimension] = alarm["Properties"]["Dimensions"]
    assert dimension["Value"] == getatt(dlq_id, "QueueName")


def test_the_endpoints_role_may_read_its_secret_write_replay_markers_and_queue_clicks_only(app: Synth) -> None:
    key_id, _ = app.one("AWS::KMS::Key")
    table_id, _ = app.one("AWS::DynamoDB::Table")
    queue_id, _ = app.one("AWS::SQS::Queue", "SlackAppClicks")
    secret_id, _ = app.one("AWS::SecretsManager::Secret", "SigningSecret")
    logs_id, _ = app.one("AWS::Logs::LogGroup", "SlackAppInteractions")
    statements = role_statements(app, "SlackAppInteractionsRole")
    assert statement_rows(statements) == expected_rows(
        [
            ("WriteOwnLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], getatt(logs_id)),
            (None, ["xray:PutTelemetryRecords", "xray:PutTraceSegments"], "*"),
            ("ReadSigningSecret", "secretsmanager:GetSecretValue", {"Ref": secret_id}),
            ("RecordRequestsAgainstReplays", "dynamodb:PutItem", getatt(table_id)),
            ("QueueClicks", "sqs:SendMessage", getatt(queue_id)),
            ("UseGuardKey", ["kms:Decrypt", "kms:GenerateDataKey"], getatt(key_id)),
        ]
    )
    [replays] = [s for s in statements if s.get("Sid") == "RecordRequestsAgainstReplays"]
    assert replays["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["slack-request#*"]}}


def test_the_workers_role_is_the_responders_with_its_tags_and_the_bot_token(app: Synth) -> None:
    key_id, _ = app.one("AWS::KMS::Key")
    table_id, _ = app.one("AWS::DynamoDB::Table")
    topic_id, _ = app.one("AWS::SNS::Topic")
    queue_id, _ = app.one("AWS::SQS::Queue", "SlackAppClicks")
    dlq_id, _ = app.one("AWS::SQS::Queue", "SlackAppClickDeadLetters")
    token_id, _ = app.one("AWS::SecretsManager::Secret", "BotToken")
    logs_id, _ = app.one("AWS::Logs::LogGroup", "SlackAppClickWorker")
    jobs = {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":sagemaker:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":training-job/*",
            ],
        ]
    }
    assert statement_rows(role_statements(app, "SlackAppClickWorkerRole")) == expected_rows(
        [
            ("WriteOwnLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], getatt(logs_id)),
            (None, ["xray:PutTelemetryRecords", "xray:PutTraceSegments"], "*"),
            (
                "ObserveStopAndAttributeTrainingJobs",
                [
                    "sagemaker:AddTags",
                    "sagemaker:DescribeTrainingJob",
                    "sagemaker:ListTags",
                    "sagemaker:StopTrainingJob",
                ],
                jobs,
            ),
            (
                "TransitionLedger",
                ["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
                getatt(table_id),
            ),
            ("DeadLetterFailedEvents", "sqs:SendMessage", getatt(dlq_id)),
            ("PublishNotifications", "sns:Publish", {"Ref": topic_id}),
            ("UseGuardKey", ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey"], getatt(key_id)),
            ("ReadListPrices", "pricing:GetProducts", "*"),
            ("ReadBotToken", "secretsmanager:GetSecretValue", {"Ref": token_id}),
            (
                None,
                [
                    "sqs:ChangeMessageVisibility",
                    "sqs:DeleteMessage",
                    "sqs:GetQueueAttributes",
                    "sqs:GetQueueUrl",
                    "sqs:ReceiveMessage",
                ],
                getatt(queue_id),
            ),
            (None, "kms:Decrypt", getatt(key_id)),
        ]
    )


def test_the_function_that_folds_a_jobs_end_may_hand_its_card_update_to_the_chat_queue(app: Synth) -> None:
    function = "JobEventsHandler"
    chat_id, _ = app.one("AWS::SQS::Queue", "ChatQueue")
    key_id, _ = app.one("AWS::KMS::Key")
    rows = statement_rows(role_statements(app, f"{function}Role"))
    assert ("HandCardUpdatesToTheNotifier", "sqs:SendMessage", getatt(chat_id)) in rows
    # the queue is encrypted with the guard's key, which the responder's role already uses to send
    assert (
        "UseGuardKey",
        ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey"],
        getatt(key_id),
    ) in rows
    _, fn = app.one("AWS::Lambda::Function", function)
    assert fn["Properties"]["Environment"]["Variables"][contract.ENV_CHAT_QUEUE_URL] == {"Ref": chat_id}
    assert delivery.problems(app.json) == []


def test_no_other_function_sends_to_the_chat_queue_and_webhook_mode_none(app: Synth, synth: Synth) -> None:
    for template in (app, synth):
        chat_id, _ = template.one("AWS::SQS::Queue", "ChatQueue")
        senders = [
            name
            for name, policy in template.resources("AWS::IAM::Policy").items()
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            if statement["Resource"] == getatt(chat_id) and "sqs:SendMessage" in statement["Action"]
        ]
        assert len(senders) == (1 if template is app else 0)
        assert all(s.startswith("JobEventsHandlerRole") for s in senders)
        envs = [
            name
            for name, fn in template.resources("AWS::Lambda::Function").items()
            if contract.ENV_CHAT_QUEUE_URL in fn["Properties"].get("Environment", {}).get("Variables", {})
        ]
        assert len(envs) == len(senders)


def test_the_notifier_in_app_mode_reads_the_bot_token_and_draws_graphs_instead_of_reading_webhooks(app: Synth) -> None:
    token_id, _ = app.one("AWS::SecretsManager::Secret", "BotToken")
    rows = statement_rows(role_statements(app, "ChatNotifierRole"))
    assert ("ReadBotToken", "secretsmanager:GetSecretValue", {"Ref": token_id}) in rows
    assert ("DrawMetricGraphs", "cloudwatch:GetMetricWidgetImage", "*") in rows
    assert not [r for r in rows if r[0] == "ReadWebhookUrls"]
    _, notifier = app.one("AWS::Lambda::Function", "ChatNotifier")
    env = notifier["Properties"]["Environment"]["Variables"]
    assert env[contract.ENV_SLACK_BOT_TOKEN_SECRET] == "TrainingGuard/slack/slack-app-bot-token"
    assert contract.ENV_WEBHOOK_SECRETS not in env


def test_the_endpoint_reads_no_configuration_and_knows_the_allowed_users(app: Synth) -> None:
    _, fn = app.one("AWS::Lambda::Function", "SlackAppInteractions")
    env = fn["Properties"]["Environment"]["Variables"]
    assert env[contract.ENV_SLACK_ALLOWED_USERS] == "U0ALICE,U0BOB"
    assert env[contract.ENV_SLACK_SIGNING_SECRET] == "TrainingGuard/slack/slack-app-signing-secret"
    assert fn["Properties"]["Timeout"] == 10


def test_every_delivery_of_app_mode_is_allowed_the_function_url_included(app: Synth) -> None:
    assert delivery.problems(app.json) == []
    fn_id, _ = app.one("AWS::Lambda::Function", "SlackAppInteractions")
    edges = delivery.edges(delivery.Template(app.json))
    assert delivery.Edge(delivery.PUBLIC, fn_id, delivery.FUNCTION_URL, "function URL (auth type NONE)") in edges
    queue_id, _ = app.one("AWS::SQS::Queue", "SlackAppClicks")
    assert {(e.sender.split(":")[0], e.receiver, e.action) for e in edges} >= {
        ("role", queue_id, "sqs:SendMessage"),
        ("role", queue_id, "sqs:ReceiveMessage"),
    }


@pytest.mark.parametrize("action", ["lambda:InvokeFunction", "lambda:InvokeFunctionUrl"])
def test_a_function_url_without_either_permission_is_reported(app: Synth, action: str) -> None:
    template = copy.deepcopy(app.json)
    for key in [
        k
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::Lambda::Permission"
        and r["Properties"]["Action"] == action
        and r["Properties"]["Principal"] == "*"
    ]:
        del template["Resources"][key]
    [problem] = delivery.problems(template)
    assert problem.endswith(f"does not grant the public {action}")


def test_webhook_mode_has_no_app_resources_and_its_notifier_reads_webhooks(synth: Synth) -> None:
    assert synth.resources("AWS::Lambda::Url") == {}
    assert not [k for k in synth.json["Resources"] if k.startswith("SlackApp")]
    assert not {
        outputs.SLACK_INTERACTIVITY_URL,
        outputs.SLACK_BOT_TOKEN_SECRET,
        outputs.SLACK_SIGNING_SECRET,
        outputs.SLACK_CLICK_QUEUE,
    } & set(synth.json["Outputs"])
    rows = statement_rows(role_statements(synth, "ChatNotifierRole"))
    assert [r[0] for r in rows if r[0]] == [
        "WriteOwnLogs",
        "ParkUndeliverable",
        "ReadWebhookUrls",
        "DeliveryLedger",
        "UseGuardKey",
    ]
    _, notifier = synth.one("AWS::Lambda::Function", "ChatNotifier")
    env = notifier["Properties"]["Environment"]["Variables"]
    assert contract.ENV_WEBHOOK_SECRETS in env
    assert contract.ENV_SLACK_BOT_TOKEN_SECRET not in env
    assert notifier["Properties"]["Description"] == "Training Guard: delivers notifications to Slack webhooks"


TEAM, TENANT = "74361522-da01-538d-aa2e-ac7918c6bb92", "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"
TEAMS_CHANNEL = "19%3ab6ef35dc342d56ba5654e6fc6d25a071%40thread.tacv2"


@pytest.fixture(scope="module")
def teams(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    config = tmp_path_factory.mktemp("config") / "teams.json"
    settings = {"team_id": TEAM, "teams_channel_id": TEAMS_CHANNEL, "teams_tenant_id": TENANT}
    config.write_text(json.dumps({"slack": None, "q_developer_teams": settings}))
    return Synth(tmp_path_factory.mktemp("teams"), {"config": str(config)})


def test_a_teams_channel_is_subscribed_to_the_topic_with_the_read_only_guardrail(teams: Synth) -> None:
    topic_id, _ = teams.one("AWS::SNS::Topic")
    role_id, role = teams.one("AWS::IAM::Role", "QDeveloperTeams")
    policy_id, policy = teams.one("AWS::IAM::ManagedPolicy", "QDeveloperTeams")
    _, channel = teams.one("AWS::Chatbot::MicrosoftTeamsChannelConfiguration")
    assert channel["Properties"] == {
        "ConfigurationName": "TrainingGuard-teams-notifications",
        "TeamId": TEAM,
        "TeamsChannelId": TEAMS_CHANNEL,
        "TeamsTenantId": TENANT,
        "IamRoleArn": getatt(role_id),
        "SnsTopicArns": [{"Ref": topic_id}],
        "GuardrailPolicies": [{"Ref": policy_id}],
        "LoggingLevel": "ERROR",
        "UserRoleRequired": False,
    }
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "chatbot.amazonaws.com"
    }
    assert role["Properties"]["ManagedPolicyArns"] == [{"Ref": policy_id}]
    assert [s["Sid"] for s in policy["Properties"]["PolicyDocument"]["Statement"]] == [
        "ReadTrainingJobs",
        "ReadTrainingLogs",
    ]
    assert delivery.problems(teams.json) == []
    edges = delivery.edges(delivery.Template(teams.json))
    assert [e.action for e in edges if e.receiver.startswith("QDeveloperTeams")] == ["chatbot"]


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"team_id": "team-1"}, "q_developer_teams.team_id: must be a team ID (a UUID)"),
        ({"teams_channel_id": "19:abc@thread.tacv2"}, "q_developer_teams.teams_channel_id: must be a Teams channel ID"),
        ({"teams_tenant_id": None}, "q_developer_teams.teams_tenant_id: must be a non-empty string"),
    ],
)
def test_bad_teams_settings_name_the_field(settings: dict[str, Any], problem: str) -> None:
    from training_guard.config.model import ConfigError, GuardConfig

    good = {"team_id": TEAM, "teams_channel_id": TEAMS_CHANNEL, "teams_tenant_id": TENANT}
    with pytest.raises(ConfigError) as raised:
        GuardConfig.from_dict({"q_developer_teams": {**good, **settings}})
    assert any(p.startswith(problem) for p in raised.value.problems), raised.value.problems
