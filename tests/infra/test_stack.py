"""The synthesized template, asserted resource by resource."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from infra.components import encryption, functions, job_events, metric_guards
from infra.nag import ACKNOWLEDGED
from tests.helpers import NOW
from tests.infra.conftest import Synth, cfn_lint, expected_rows, shipped_context, statement_rows, unordered
from training_guard import contract
from training_guard.adapters.price_list import PriceList
from training_guard.config.model import GuardConfig

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_pricing import PricingClient


def getatt(logical_id: str) -> dict[str, list[str]]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def scoped_arn(service: str, resource: str) -> dict[str, Any]:
    """The ARN pattern format_arn builds for this account and region."""
    return {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                f":{service}:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                resource,
            ],
        ]
    }


def job_alarms_arn() -> dict[str, Any]:
    return scoped_arn("cloudwatch", ":alarm:training-guard-job-*")


def training_jobs_arn() -> dict[str, Any]:
    return scoped_arn("sagemaker", ":training-job/*")


def test_rule_matches_exactly_the_contract_pattern_and_targets_the_function(synth: Synth) -> None:
    _, rule = synth.one("AWS::Events::Rule", "JobEvents")
    fn_id, _ = synth.one("AWS::Lambda::Function", "JobEvents")
    dlq_id, _ = synth.one("AWS::SQS::Queue", "JobEventsDeadLetters")
    props = rule["Properties"]
    assert props["EventPattern"] == contract.JOB_EVENTS_PATTERN
    assert props["State"] == "ENABLED"
    [target] = props["Targets"]
    assert target["Arn"] == getatt(fn_id)
    assert target["DeadLetterConfig"] == {"Arn": getatt(dlq_id)}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 8, "MaximumEventAgeInSeconds": 7200}


def test_function_failures_retry_twice_then_land_in_the_dead_letter_queue(synth: Synth) -> None:
    _, config = synth.one("AWS::Lambda::EventInvokeConfig", "JobEvents")
    dlq_id, _ = synth.one("AWS::SQS::Queue", "JobEventsDeadLetters")
    assert config["Properties"]["MaximumRetryAttempts"] == job_events.FUNCTION_RETRY_ATTEMPTS == 2
    assert config["Properties"]["MaximumEventAgeInSeconds"] == 7200
    assert config["Properties"]["DestinationConfig"] == {"OnFailure": {"Destination": getatt(dlq_id)}}


def test_eventbridge_may_invoke_the_function_only_from_the_rule(synth: Synth) -> None:
    _, permission = synth.one("AWS::Lambda::Permission", "JobEvents")
    rule_id, _ = synth.one("AWS::Events::Rule", "JobEvents")
    props = permission["Properties"]
    assert props["Action"] == "lambda:InvokeFunction"
    assert props["Principal"] == "events.amazonaws.com"
    assert props["SourceArn"] == getatt(rule_id)


def _role_statements(synth: Synth) -> list[dict[str, Any]]:
    _, policy = synth.one("AWS::IAM::Policy", "JobEventsHandler")
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def test_job_events_role_has_exactly_the_permissions_it_needs(synth: Synth) -> None:
    log_id, _ = synth.one("AWS::Logs::LogGroup", "JobEvents")
    table_id, _ = synth.one("AWS::DynamoDB::Table")
    topic_id, _ = synth.one("AWS::SNS::Topic")
    key_id, _ = synth.one("AWS::KMS::Key")
    dlq_id, _ = synth.one("AWS::SQS::Queue", "JobEventsDeadLetters")
    training_jobs = {
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
    actual = statement_rows(_role_statements(synth))
    assert all(s["Effect"] == "Allow" for s in _role_statements(synth))
    assert actual == expected_rows(
        [
            ("WriteOwnLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], getatt(log_id)),
            (None, ["xray:PutTraceSegments", "xray:PutTelemetryRecords"], "*"),
            (
                "ObserveStopAndAttributeTrainingJobs",
                [
                    "sagemaker:DescribeTrainingJob",
                    "sagemaker:StopTrainingJob",
                    "sagemaker:AddTags",
                    "sagemaker:ListTags",
                ],
                training_jobs,
            ),
            ("TransitionLedger", list(job_events.LEDGER_ACTIONS), getatt(table_id)),
            ("DeadLetterFailedEvents", "sqs:SendMessage", getatt(dlq_id)),
            ("PublishNotifications", "sns:Publish", {"Ref": topic_id}),
            ("UseGuardKey", list(job_events.KEY_ACTIONS), getatt(key_id)),
            ("ReadListPrices", "pricing:GetProducts", "*"),
            ("KeepPerJobAlarms", list(job_events.JOB_ALARM_ACTIONS), job_alarms_arn()),
        ]
    )
    assert job_events.JOB_EVENTS_ACTIONS == (
        "sagemaker:DescribeTrainingJob",
        "sagemaker:StopTrainingJob",
        "sagemaker:AddTags",
    )


def test_no_managed_policies_and_no_sagemaker_wildcards(synth: Synth) -> None:
    for role in synth.resources("AWS::IAM::Role").values():
        assert "ManagedPolicyArns" not in role["Properties"]
    for policy in synth.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert not any(a.endswith("*") and a.startswith(("sagemaker", "dynamodb", "sns", "sqs")) for a in actions)
            if statement["Resource"] == "*":
                # only actions that have no resource-level permissions
                assert set(actions) <= {
                    "xray:PutTraceSegments",
                    "xray:PutTelemetryRecords",
                    "pricing:GetProducts",  # no resource type: list_awspricelist.html
                    *metric_guards.UNSCOPED_READ_ACTIONS,
                    *metric_guards.ALARM_READ_ACTIONS,
                }


def test_function_runtime_architecture_layer_and_configuration(synth: Synth) -> None:
    _, fn = synth.one("AWS::Lambda::Function", "JobEvents")
    props = fn["Properties"]
    assert props["Runtime"] == "python3.13"  # the bundler compiles bytecode for this version
    assert props["Architectures"] == ["arm64"]
    assert props["Handler"] == "training_guard.handlers.job_events.handler"
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert props["Timeout"] == 30
    env = props["Environment"]["Variables"]
    assert contract.ENV_CONFIG not in env  # the configuration ships in a layer (4 KB of environment)
    assert synth.shipped_config("JobEvents") == GuardConfig.from_dict(shipped_context()["training-guard"])
    dlq_id, _ = synth.one("AWS::SQS::Queue", "JobEventsDeadLetters")
    assert env[contract.ENV_REJECTED_EVENTS_QUEUE_URL] == {"Ref": dlq_id}  # unusable events are parked there
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == contract.GUARD_METRICS_NAMESPACE
    # Lambda extracts layers in order; these two share no path (/opt/python, /opt/training-guard), so the
    # order CDK gives them (sorted, with the feature flag @aws-cdk/aws-lambda:recognizeLayerVersion) is moot.
    layer_versions = synth.resources("AWS::Lambda::LayerVersion")
    [config_layer] = [layer for layer in props["Layers"] if layer.get("Ref") in layer_versions]
    [powertools] = [layer for layer in props["Layers"] if layer is not config_layer]
    parameter = synth.json["Parameters"][powertools["Ref"]]
    assert parameter["Type"] == "AWS::SSM::Parameter::Value<String>"
    assert parameter["Default"] == functions.POWERTOOLS_LAYER_PARAMETER
    assert parameter["Default"] == "/aws/service/powertools/python/arm64/python3.13/3.37.0"


def test_powertools_layer_version_matches_the_pinned_dependency() -> None:
    from importlib import metadata

    assert metadata.version("aws-lambda-powertools") == functions.POWERTOOLS_VERSION


def test_function_environments_are_encrypted_with_the_guard_key(synth: Synth) -> None:
    key_id, _ = synth.one("AWS::KMS::Key")
    for fn in synth.resources("AWS::Lambda::Function").values():
        assert fn["Properties"]["KmsKeyArn"] == getatt(key_id)


def test_every_checkov_skip_is_in_the_template_with_its_reason(synth: Synth) -> None:
    for fn in synth.resources("AWS::Lambda::Function").values():
        skips = fn["Metadata"]["checkov"]["skip"]
        assert [s["id"] for s in skips] == ["CKV_AWS_116", "CKV_AWS_117", "CKV_AWS_115"]
        assert all(len(s["comment"]) > 60 for s in skips)


def test_log_groups_keep_a_year(synth: Synth) -> None:
    groups = synth.resources("AWS::Logs::LogGroup")
    assert len(groups) == len(synth.resources("AWS::Lambda::Function"))  # one per function
    assert all(group["Properties"]["RetentionInDays"] == 365 for group in groups.values())


def test_state_table_has_the_contract_key_ttl_recovery_and_the_guard_key(synth: Synth) -> None:
    _, table = synth.one("AWS::DynamoDB::Table")
    key_id, _ = synth.one("AWS::KMS::Key")
    props = table["Properties"]
    assert props["KeySchema"] == [{"AttributeName": contract.TABLE_PARTITION_KEY, "KeyType": "HASH"}]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["TimeToLiveSpecification"] == {"AttributeName": contract.TABLE_TTL_ATTRIBUTE, "Enabled": True}
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["SSESpecification"] == {"KMSMasterKeyId": getatt(key_id), "SSEEnabled": True, "SSEType": "KMS"}
    assert table["DeletionPolicy"] == "Retain"


def _denies_insecure_transport(policy: dict[str, Any]) -> bool:
    return any(
        s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    )


def test_topic_is_encrypted_and_tls_only(synth: Synth) -> None:
    topic_id, topic = synth.one("AWS::SNS::Topic")
    key_id, _ = synth.one("AWS::KMS::Key")
    assert topic["Properties"]["KmsMasterKeyId"] == getatt(key_id)
    _, policy = synth.one("AWS::SNS::TopicPolicy")
    assert policy["Properties"]["Topics"] == [{"Ref": topic_id}]
    assert _denies_insecure_transport(policy)


def test_dead_letter_queue_is_encrypted_tls_only_and_keeps_14_days(synth: Synth) -> None:
    dlq_id, dlq = synth.one("AWS::SQS::Queue", "JobEventsDeadLetters")
    key_id, _ = synth.one("AWS::KMS::Key")
    assert dlq["Properties"]["KmsMasterKeyId"] == getatt(key_id)
    assert dlq["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    [policy] = [
        p for p in synth.resources("AWS::SQS::QueuePolicy").values() if p["Properties"]["Queues"] == [{"Ref": dlq_id}]
    ]
    assert _denies_insecure_transport(policy)
    rule_id, _ = synth.one("AWS::Events::Rule", "JobEvents")
    [send] = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    assert send["Principal"] == {"Service": "events.amazonaws.com"}
    assert send["Action"] == "sqs:SendMessage"
    assert send["Resource"] == getatt(dlq_id)
    assert send["Condition"] == {"ArnEquals": {"aws:SourceArn": getatt(rule_id)}}


def _key_statements(synth: Synth) -> dict[str, dict[str, Any]]:
    _, key = synth.one("AWS::KMS::Key")
    return {s["Sid"]: s for s in key["Properties"]["KeyPolicy"]["Statement"] if "Sid" in s}


def test_key_rotates_and_lets_only_this_accounts_services_use_it(synth: Synth) -> None:
    _, key = synth.one("AWS::KMS::Key")
    assert key["Properties"]["EnableKeyRotation"] is True
    service = _key_statements(synth)[encryption.SID_CONDITIONED_SERVICES]
    assert service["Principal"] == {"Service": "sns.amazonaws.com"}
    assert service["Action"] == list(encryption.SERVICE_WRITE_ACTIONS) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert service["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


def test_cloudwatch_alarms_may_use_the_key_in_the_documented_form_without_a_condition(synth: Synth) -> None:
    # The SNS key guide and AWS's article on alarms with an encrypted topic grant cloudwatch.amazonaws.com
    # kms:Decrypt and kms:GenerateDataKey* with no condition; the topic policy limits which alarms may publish.
    cloudwatch = _key_statements(synth)[encryption.SID_CLOUDWATCH]
    assert cloudwatch["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert cloudwatch["Action"] == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert (cloudwatch["Effect"], cloudwatch["Resource"]) == ("Allow", "*")
    assert "Condition" not in cloudwatch
    others = [s for sid, s in _key_statements(synth).items() if sid != encryption.SID_CLOUDWATCH]
    assert not [s for s in others if "cloudwatch.amazonaws.com" in json.dumps(s.get("Principal"))]


def test_eventbridge_may_write_its_encrypted_dead_letters_without_a_condition(synth: Synth) -> None:
    # AWS documents this grant with no condition; one EventBridge does not send denies the write,
    # and the failed event is lost without a trace.
    events = _key_statements(synth)[encryption.SID_EVENTBRIDGE]
    assert events["Principal"] == {"Service": "events.amazonaws.com"}
    assert events["Action"] == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert events["Effect"] == "Allow"
    assert "Condition" not in events


def test_log_groups_are_encrypted_with_the_guard_key_which_cloudwatch_logs_may_use(synth: Synth) -> None:
    key_id, _ = synth.one("AWS::KMS::Key")
    for group in synth.resources("AWS::Logs::LogGroup").values():
        assert group["Properties"]["KmsKeyId"] == getatt(key_id)
    logs = _key_statements(synth)[encryption.SID_LOGS]
    assert logs["Principal"] == {"Service": {"Fn::Join": ["", ["logs.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]}}
    assert unordered(logs["Action"]) == unordered(list(encryption.LOGS_ACTIONS))
    assert logs["Condition"] == {"ArnLike": {encryption.LOGS_CONTEXT_KEY: scoped_arn("logs", ":log-group:*")}}


def test_the_topic_lets_the_guards_own_alarms_publish_and_nothing_else_of_cloudwatch(synth: Synth) -> None:
    topic_id, _ = synth.one("AWS::SNS::Topic")
    _, policy = synth.one("AWS::SNS::TopicPolicy")
    [allow] = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert allow["Action"] == "sns:Publish"
    assert allow["Resource"] == {"Ref": topic_id}
    assert allow["Condition"] == {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        "ArnLike": {"aws:SourceArn": scoped_arn("cloudwatch", ":alarm:TrainingGuard-self-*")},
    }
    # every alarm that publishes to the topic is named so that the condition matches it
    publishers = [
        a["Properties"]["AlarmName"]
        for a in synth.resources("AWS::CloudWatch::Alarm").values()
        if {"Ref": topic_id} in a["Properties"].get("AlarmActions", []) + a["Properties"].get("OKActions", [])
    ]
    assert (
        len(publishers) == 22
    )  # 6 functions x (errors, throttles) + 6 dead-letter queues + SlackSecretNotSet + FleetAlarmsOverCap
    # + the log rules' LogDeliveryErrors and LogDeliveryThrottling
    assert all(name.startswith(contract.self_alarm_prefix(synth.artifact_id)) for name in publishers)


def test_stack_is_environment_agnostic_and_has_no_asset_parameters(synth: Synth) -> None:
    assert set(synth.json["Parameters"]) == {
        "BootstrapVersion",
        next(k for k in synth.json["Parameters"] if k.startswith("SsmParameterValueawsservicepowertools")),
    }
    # the cloud assembly's own record of the target: no account, no region (what a token account and region write)
    manifest = json.loads((synth.outdir / "manifest.json").read_text())
    assert manifest["artifacts"][synth.artifact_id]["environment"] == "aws://unknown-account/unknown-region"


def test_cdk_nag_has_no_open_findings_and_no_stale_acknowledgments(synth: Synth) -> None:
    report = synth.report()
    plugins = {p["pluginName"]: p for p in report["pluginReports"]}
    assert set(plugins) == {"AwsSolutions", "Serverless"}
    for plugin in plugins.values():
        assert plugin["violations"] == []
        assert plugin["conclusion"] == "success"
    used = {v["acknowledgedId"] for p in plugins.values() for v in p.get("suppressedViolations", [])}
    assert used == set(ACKNOWLEDGED), "every acknowledgment must still be needed"
    assert all(len(reason) > 40 for reason in ACKNOWLEDGED.values())


def test_cfn_lint_finds_nothing(synth: Synth) -> None:
    assert cfn_lint(synth.outdir / f"{synth.artifact_id}.template.json") == []


def test_cfn_lint_finds_a_broken_template(synth: Synth, tmp_path: Path) -> None:
    """The linter the test above relies on finds a defect: the stack's table alone (linting the whole stack again
    costs seconds), with a billing mode DynamoDB does not have."""
    table_id, table = synth.one("AWS::DynamoDB::Table")
    broken = copy.deepcopy(table)
    broken["Properties"]["BillingMode"] = "FREE"
    (tmp_path / "broken.json").write_text(json.dumps({"Resources": {table_id: broken}}))
    findings = cfn_lint(tmp_path / "broken.json", keep=False)
    assert any("'FREE' is not one of ['PAY_PER_REQUEST', 'PROVISIONED']" in f for f in findings), findings


def test_the_price_cache_is_read_and_written_within_the_ledgers_statement(synth: Synth) -> None:
    """Every DynamoDB call the Price List adapter makes, on the table the ledger statement names."""
    calls: list[str] = []

    class Table:
        def get_item(self, **request: Any) -> dict[str, Any]:
            calls.append("dynamodb:GetItem")
            return {}

        def put_item(self, **request: Any) -> dict[str, Any]:
            calls.append("dynamodb:PutItem")
            return {}

    class Pricing:
        def get_products(self, **request: Any) -> dict[str, Any]:
            product = {
                "product": {"attributes": {"instanceName": "ml.m5.large"}, "sku": "TESTSKU"},
                "terms": {"OnDemand": {"T": {"priceDimensions": {"R": {"unit": "Hrs", "pricePerUnit": {"USD": "1"}}}}}},
            }
            return {"PriceList": [json.dumps(product)]}

    PriceList(
        cast("PricingClient", Pricing()), dynamodb=cast("DynamoDBClient", Table()), table="t", memory={}
    ).hourly_price("us-east-1", "ml.m5.large", now=NOW)
    assert calls == ["dynamodb:GetItem", "dynamodb:PutItem"]
    table_id, _ = synth.one("AWS::DynamoDB::Table")
    [ledger] = [s for s in _role_statements(synth) if s.get("Sid") == "TransitionLedger"]
    assert set(calls) <= set(ledger["Action"])
    assert ledger["Resource"] == getatt(table_id)


def test_the_nag_acknowledgment_of_resource_star_names_the_price_list_and_why() -> None:
    reason = ACKNOWLEDGED["AwsSolutions::AwsSolutions-IAM5[Resource::*]"]
    assert "pricing:GetProducts" in reason
    assert "https://docs.aws.amazon.com/service-authorization/latest/reference/list_awspricelist.html" in reason
