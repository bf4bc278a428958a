"""The log-rules wing in the template: the function and exactly who may invoke it, its permissions, the subscription's
custom resource, the stall check's schedule, the dead-letter queue and the alarms on the subscription's delivery."""

from __future__ import annotations

import copy
import importlib
import re
from typing import Any

import botocore.session
import pytest

from infra.components import job_events, log_rules, monitoring
from tests.infra import delivery
from tests.infra.conftest import ConfigSynth, Synth, expected_rows, statement_rows, synthesized
from tests.infra.test_stack import getatt, scoped_arn, training_jobs_arn
from training_guard import contract
from training_guard.config.model import ConfigError, GuardConfig, LogRules

FUNCTION = "LogRulesHandler"
SUBSCRIBER = "LogRulesSubscriber"
RESOURCE = "Custom::TrainingGuardLogSubscription"
TRAINING_GROUP_ARN = scoped_arn("logs", ":log-group:/aws/sagemaker/TrainingJobs:*")
TRAINING_GROUP_BARE_ARN = scoped_arn("logs", ":log-group:/aws/sagemaker/TrainingJobs")


def statements(synth: Synth, role_path: str) -> list[dict[str, Any]]:
    _, policy = synth.one("AWS::IAM::Policy", role_path)
    found: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def test_only_cloudwatch_logs_of_this_account_delivering_the_training_group_may_invoke_the_function(
    synth: Synth,
) -> None:
    fn_id, _ = synth.one("AWS::Lambda::Function", FUNCTION)
    permissions = [
        p["Properties"]
        for p in synth.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == getatt(fn_id)
    ]
    [logs] = [p for p in permissions if p["Principal"] != "events.amazonaws.com"]
    assert logs == {
        "Action": "lambda:InvokeFunction",
        "FunctionName": getatt(fn_id),
        # CloudWatch Logs' regional principal, as the user guide's Lambda example grants it (docs/limits.md)
        "Principal": {"Fn::Join": ["", ["logs.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]},
        "SourceAccount": {"Ref": "AWS::AccountId"},
        "SourceArn": TRAINING_GROUP_ARN,
    }
    # the only other invoker is the stall check's rule
    [events] = [p for p in permissions if p["Principal"] == "events.amazonaws.com"]
    rule_id, _ = synth.one("AWS::Events::Rule", "LogRulesStallCheck")
    assert events["SourceArn"] == getatt(rule_id)
    assert len(permissions) == 2


def test_the_function_is_a_responder_that_may_also_list_running_jobs_and_nothing_else(synth: Synth) -> None:
    log_id, _ = synth.one("AWS::Logs::LogGroup", FUNCTION)
    table_id, _ = synth.one("AWS::DynamoDB::Table")
    dlq_id, _ = synth.one("AWS::SQS::Queue", "LogRulesDeadLetters")
    topic_id, _ = synth.one("AWS::SNS::Topic")
    key_id, _ = synth.one("AWS::KMS::Key")
    assert all(s["Effect"] == "Allow" and "Condition" not in s for s in statements(synth, FUNCTION))
    assert statement_rows(statements(synth, FUNCTION)) == expected_rows(
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
                training_jobs_arn(),
            ),
            # the stream states (GetItem, conditional PutItem, UpdateItem) and the ledger share the state table
            ("TransitionLedger", list(job_events.LEDGER_ACTIONS), getatt(table_id)),
            ("DeadLetterFailedEvents", "sqs:SendMessage", getatt(dlq_id)),
            ("PublishNotifications", "sns:Publish", {"Ref": topic_id}),
            ("UseGuardKey", list(job_events.KEY_ACTIONS), getatt(key_id)),
            ("ReadListPrices", "pricing:GetProducts", "*"),
            ("ListRunningJobs", "sagemaker:ListTrainingJobs", "*"),
        ]
    )
    assert set(job_events.LEDGER_ACTIONS) >= {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}


def test_with_stop_opt_in_the_log_rules_stop_only_tagged_jobs_like_every_responder(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    tag = "team:may-stop"
    synth = synthesized(ConfigSynth, {"stop_requires_tag": tag}, tmp_path_factory.mktemp("opt-in"))
    found = {s.get("Sid"): s for s in statements(synth, FUNCTION)}
    assert found["StopOptedInTrainingJobs"] == {
        "Action": "sagemaker:StopTrainingJob",
        "Effect": "Allow",
        "Resource": training_jobs_arn(),
        "Sid": "StopOptedInTrainingJobs",
        "Condition": {contract.STOP_OPT_IN_OPERATOR: {f"aws:ResourceTag/{tag}": contract.STOP_OPT_IN_VALUE}},
    }
    assert "sagemaker:StopTrainingJob" not in found["ObserveStopAndAttributeTrainingJobs"]["Action"]


def test_asynchronous_failures_retry_twice_then_land_in_the_wings_dead_letter_queue(synth: Synth) -> None:
    fn_id, fn = synth.one("AWS::Lambda::Function", FUNCTION)
    dlq_id, dlq = synth.one("AWS::SQS::Queue", "LogRulesDeadLetters")
    [config] = [
        c["Properties"]
        for c in synth.resources("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": fn_id}
    ]
    assert config["DestinationConfig"] == {"OnFailure": {"Destination": getatt(dlq_id)}}
    assert (config["MaximumRetryAttempts"], config["MaximumEventAgeInSeconds"]) == (2, 7200)
    assert dlq["Properties"]["MessageRetentionPeriod"] == 14 * 86400
    assert "KmsMasterKeyId" in dlq["Properties"]
    assert fn["Properties"]["Handler"] == "training_guard.handlers.log_events.handler"
    assert fn["Properties"]["Environment"]["Variables"][contract.ENV_REJECTED_EVENTS_QUEUE_URL] == {"Ref": dlq_id}
    assert "ReservedConcurrentExecutions" not in fn["Properties"]  # the others' policy (CKV_AWS_115)


def test_the_subscription_is_the_guards_one_filter_on_the_training_group_only(synth: Synth) -> None:
    fn_id, _ = synth.one("AWS::Lambda::Function", FUNCTION)
    subscriber_id, subscriber = synth.one("AWS::Lambda::Function", SUBSCRIBER)
    permission_id, _ = synth.one("AWS::Lambda::Permission", "LogRulesCloudWatchLogsInvoke")
    _, resource = synth.one(RESOURCE)
    assert resource["Properties"] == {
        "ServiceToken": getatt(subscriber_id),
        "ServiceTimeout": "300",
        "LogGroupName": contract.TRAINING_LOG_GROUP,
        "FilterName": contract.LOG_SUBSCRIPTION_FILTER_NAME,
        "FilterPattern": contract.LOG_FILTER_PATTERN,
        "DestinationArn": getatt(fn_id),
    }
    # the permission exists before the filter is put (CloudWatch Logs checks it then)
    assert permission_id in resource["DependsOn"]
    assert subscriber["Properties"]["Handler"] == "training_guard.handlers.log_subscription.handler"
    # no AWS::Logs::SubscriptionFilter (it fails on a missing group and would take a name over); no other group
    assert not synth.resources("AWS::Logs::SubscriptionFilter")
    assert len(synth.resources(RESOURCE)) == 1


def test_the_subscriber_may_touch_the_training_group_and_no_other(synth: Synth) -> None:
    log_id, _ = synth.one("AWS::Logs::LogGroup", SUBSCRIBER)
    assert statement_rows(statements(synth, SUBSCRIBER)) == expected_rows(
        [
            ("WriteOwnLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], getatt(log_id)),
            (None, ["xray:PutTraceSegments", "xray:PutTelemetryRecords"], "*"),
            (
                "SubscribeTrainingLogGroup",
                [
                    "logs:CreateLogGroup",
                    "logs:DescribeSubscriptionFilters",
                    "logs:PutSubscriptionFilter",
                    "logs:DeleteSubscriptionFilter",
                ],
                [TRAINING_GROUP_BARE_ARN, TRAINING_GROUP_ARN],
            ),
        ]
    )
    # no PutAccountPolicy, no retention change, no logs:* of any kind beyond these
    actions = {
        a
        for s in statements(synth, SUBSCRIBER)
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert not {a for a in actions if a.startswith("logs:")} - {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        *log_rules.SUBSCRIPTION_ACTIONS,
    }


def test_the_stall_check_runs_the_same_function_on_the_sweep_schedule(synth: Synth) -> None:
    fn_id, _ = synth.one("AWS::Lambda::Function", FUNCTION)
    dlq_id, _ = synth.one("AWS::SQS::Queue", "LogRulesDeadLetters")
    _, rule = synth.one("AWS::Events::Rule", "LogRulesStallCheck")
    assert rule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"  # sweep_minutes' default
    [target] = rule["Properties"]["Targets"]
    assert target["Arn"] == getatt(fn_id)
    assert target["DeadLetterConfig"] == {"Arn": getatt(dlq_id)}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 8, "MaximumEventAgeInSeconds": 7200}
    _, fn = synth.one("AWS::Lambda::Function", FUNCTION)
    assert fn["Properties"]["Timeout"] < 5 * 60  # one check ends before the next is scheduled


def test_the_subscriptions_delivery_errors_and_throttling_alarm_to_the_topic(synth: Synth) -> None:
    topic_id, _ = synth.one("AWS::SNS::Topic")
    alarms = {a["Properties"]["AlarmName"]: a["Properties"] for a in synth.resources("AWS::CloudWatch::Alarm").values()}
    for metric in ("DeliveryErrors", "DeliveryThrottling"):
        alarm = alarms[f"{contract.self_alarm_prefix('TrainingGuard')}Log{metric}"]
        [query] = alarm["Metrics"]
        assert query["Expression"] == (
            f'SELECT SUM({metric}) FROM "AWS/Logs" '  # noqa: S608 - Metrics Insights
            "WHERE LogGroupName = '/aws/sagemaker/TrainingJobs' AND FilterName = 'training-guard-log-rules'"
        )
        assert (query["Period"], query["ReturnData"]) == (300, True)
        assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["EvaluationPeriods"]) == (
            1,
            "GreaterThanOrEqualToThreshold",
            1,
        )
        assert alarm["TreatMissingData"] == "notBreaching"
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]
        assert alarm["OKActions"] == [{"Ref": topic_id}]
    assert monitoring.LOG_DELIVERY_METRICS == ("DeliveryErrors", "DeliveryThrottling")
    # the function and its dead letters are watched like every other
    fn_id, _ = synth.one("AWS::Lambda::Function", FUNCTION)
    assert alarms["TrainingGuard-self-LogEventsErrors"]["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": fn_id}}
    ]
    assert alarms["TrainingGuard-self-LogRulesDeadLetters"]["MetricName"] == "ApproximateNumberOfMessagesVisible"


def test_the_stall_check_follows_sweep_minutes(tmp_path_factory: pytest.TempPathFactory) -> None:
    synth = synthesized(ConfigSynth, {"sweep_minutes": 10}, tmp_path_factory.mktemp("ten"))
    _, rule = synth.one("AWS::Events::Rule", "LogRulesStallCheck")
    assert rule["Properties"]["ScheduleExpression"] == "rate(10 minutes)"


# --- the filter pattern, at CloudWatch Logs' limits -----------------------------------------------------------


def api_max_pattern_chars() -> int:
    """PutSubscriptionFilter's filterPattern maximum, read from botocore's copy of the API model."""
    model = botocore.session.get_session().get_service_model("logs")
    shape = model.operation_model("PutSubscriptionFilter").input_shape.members["filterPattern"]
    maximum: int = shape.metadata["max"]
    return maximum


def test_the_default_pattern_is_one_regex_in_cloudwatch_logs_dialect() -> None:
    assert log_rules.filter_pattern_problems(contract.LOG_FILTER_PATTERN) == []
    assert contract.LOG_FILTER_PATTERN.count("%") == 2
    assert log_rules.FILTER_PATTERN_MAX_CHARS == api_max_pattern_chars() == 1024


@pytest.mark.parametrize(
    ("pattern", "complaint"),
    [
        ("x" * 1024, None),
        ("x" * 1025, "1025 characters"),
        ("%loss% %nan%", None),  # two regexes: the limit
        ("%loss% %nan% %inf%", "3 regular expressions"),
        ("%(loss|nan)%", "'(' ')'"),
        ("%loss nan%", "' '"),
        ("%loss", "unclosed"),
        ("%%", "empty"),
        ("", None),  # every line
        ("?loss ?nan", None),  # terms, no regex
    ],
)
def test_a_pattern_cloudwatch_logs_would_refuse_is_refused_at_synth(pattern: str, complaint: str | None) -> None:
    problems = log_rules.filter_pattern_problems(pattern)
    if complaint is None:
        assert problems == []
    else:
        [problem] = problems
        assert problem.startswith("log_rules.filter_pattern: ")
        assert complaint in problem


def test_the_default_pattern_selects_the_common_formats_and_skips_chatter() -> None:
    """CloudWatch Logs' regex dialect is a subset of Python's: the same pattern, searched anywhere in the line and
    case-sensitive (the pattern syntax page), tells the lines that reach the function from those that cost nothing."""
    regex = re.compile(contract.LOG_FILTER_PATTERN.strip("%"))
    delivered = [
        "{'loss': 0.6931, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}",  # Hugging Face Trainer
        "{'eval_loss': 0.41, 'eval_runtime': 1.2, 'epoch': 1.0}",
        "1875/1875 [==============================] - 3s 2ms/step - loss: 0.2984 - accuracy: 0.9137",  # Keras
        "Epoch 0: 100%|##########| 10/10 [00:01<00:00, 7.14it/s, v_num=0, train_loss=0.812]",  # Lightning
        "[0]#011train-rmse:8.10331#011validation-rmse:8.21063",  # SageMaker XGBoost
        "[10]#011valid_0's l2: 0.31",  # LightGBM
        "#quality_metric: host=algo-1, epoch=0, validation mse_objective <loss>=0.59",  # built-in algorithm
        "step 120 metric=nan",
        "step 121 grad=-inf",
        "Loss is NaN, stopping training",
    ]
    skipped = [
        "2026-12-05 10:00:01 INFO Downloading data from s3://bucket/train",
        "Invoking script with the following command: /opt/conda/bin/python train.py --epochs 10",
        "[2026-12-05 10:00:02.123 algo-1:42 INFO utils.py:27] RULE_JOB_STOP_SIGNAL_FILENAME: None",
        "Training seconds: 312",
    ]
    assert [line for line in delivered if not regex.search(line)] == []
    assert [line for line in skipped if regex.search(line)] == []


def rules(**settings: Any) -> LogRules:
    """`log_rules` of a configuration file holding these settings."""
    return GuardConfig.from_dict({"log_rules": settings}).log_rules


def test_the_configuration_decides_the_pattern_and_the_stall_check() -> None:
    assert log_rules.WingSettings.of(GuardConfig()) == log_rules.WingSettings()
    # a pattern set is used as it is ("%.%": every line that is not empty; the configuration refuses "")
    assert log_rules.effective_filter_pattern(rules(filter_pattern="%.%")) == "%.%"
    assert log_rules.filter_pattern_problems("%.%") == []
    nccl = {"name": "NCCL-timeout", "regex": "NCCL.*[Tt]imeout", "action": "stop"}
    assert log_rules.effective_filter_pattern(rules(filter_pattern="?loss ?NaN", patterns=[nccl])) == "?loss ?NaN"
    # a user's regex rule may match any line: every line is delivered unless the pattern is set
    assert log_rules.effective_filter_pattern(rules(patterns=[nccl])) == ""
    # a configured metric the default would miss widens it; one it already selects, or one it cannot spell, does not
    widened = log_rules.effective_filter_pattern(rules(loss_metric="perplexity", validation_metric="val_loss"))
    assert widened == contract.LOG_FILTER_PATTERN[:-1] + "|perplexity%"
    assert log_rules.filter_pattern_problems(widened) == []
    assert log_rules.effective_filter_pattern(rules(loss_metric="train:ppl")) == contract.LOG_FILTER_PATTERN
    ignored = GuardConfig.from_dict({"log_rules": {"stalled": {"action": "ignore"}}})
    assert not log_rules.WingSettings.of(ignored).stall_check
    assert not log_rules.WingSettings.of(GuardConfig.from_dict({"log_rules": {"enabled": False}})).enabled


def kinds(template: dict[str, Any]) -> list[str]:
    return [r["Type"] for r in template["Resources"].values()]


def test_with_the_stalled_rule_ignored_there_is_no_schedule(tmp_path_factory: pytest.TempPathFactory) -> None:
    document = {"log_rules": {"stalled": {"action": "ignore"}}}
    template = synthesized(ConfigSynth, document, tmp_path_factory.mktemp("stall-ignored")).json
    assert not [k for k in template["Resources"] if k.startswith("LogRulesStallCheck")]
    assert RESOURCE in kinds(template)  # the subscription stays
    assert "LogStallCheckRuleName" not in template["Outputs"]


def test_with_the_wing_disabled_nothing_of_it_is_deployed(tmp_path_factory: pytest.TempPathFactory) -> None:
    template = synthesized(ConfigSynth, {"log_rules": {"enabled": False}}, tmp_path_factory.mktemp("off")).json
    assert not [k for k in template["Resources"] if k.startswith("LogRules") or "LogDelivery" in k]
    assert RESOURCE not in kinds(template)
    assert not [k for k in template["Outputs"] if k.startswith("Log")]


def test_a_configured_pattern_feeds_the_subscription_and_a_bad_one_fails_the_synth(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    document = {"log_rules": {"filter_pattern": "?loss ?NaN"}}
    template = synthesized(ConfigSynth, document, tmp_path_factory.mktemp("pattern")).json
    [resource] = [r for r in template["Resources"].values() if r["Type"] == RESOURCE]
    assert resource["Properties"]["FilterPattern"] == "?loss ?NaN"
    with pytest.raises(ConfigError) as refused:
        ConfigSynth(tmp_path_factory.mktemp("bad"), {"log_rules": {"filter_pattern": "%(loss|nan)%"}})
    assert refused.value.problems[0].startswith("log_rules.filter_pattern: %(loss|nan)% uses '(' ')'")


# --- the delivery, as AWS decides it (tests/infra/delivery.py) ------------------------------------------------


def subscription_problems(synth: Synth, damage: Any = None) -> list[str]:
    template = copy.deepcopy(synth.json)
    if damage:
        [permission] = [
            r["Properties"] for k, r in template["Resources"].items() if k.startswith("LogRulesCloudWatchLogsInvoke")
        ]
        damage(template, permission)
    return [p for p in delivery.problems(template) if "subscription filter" in p]


def test_cloudwatch_logs_may_deliver_the_training_group_to_the_function(synth: Synth) -> None:
    edges = [e for e in delivery.edges(delivery.Template(synth.json)) if e.via.startswith("subscription filter")]
    fn_id, _ = synth.one("AWS::Lambda::Function", FUNCTION)
    assert [(e.sender, e.receiver, e.action) for e in edges] == [
        (f"logs.{delivery.REGION}.amazonaws.com", fn_id, "lambda:InvokeFunction")
    ]
    assert subscription_problems(synth) == []


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(
            lambda t, p: t["Resources"].pop(next(k for k in t["Resources"] if "CloudWatchLogsInvoke" in k)),
            id="no permission",
        ),
        pytest.param(lambda t, p: p.update(SourceAccount="444455556666"), id="another account"),
        pytest.param(
            lambda t, p: p.update(SourceArn=p["SourceArn"]["Fn::Join"][1][-1].replace("TrainingJobs", "Other")),
            id="another group",
        ),
    ],
)
def test_a_permission_that_does_not_admit_the_training_group_of_this_account_is_reported(
    synth: Synth, damage: Any
) -> None:
    [problem] = subscription_problems(synth, damage)
    assert "lambda resource policy: no Allow for lambda:InvokeFunction" in problem


def test_the_functions_handlers_exist_in_the_package(synth: Synth) -> None:
    """The template names handlers by module path: a renamed module would deploy and fail at every invocation."""
    for path in (FUNCTION, SUBSCRIBER):
        _, fn = synth.one("AWS::Lambda::Function", path)
        module, _, name = fn["Properties"]["Handler"].rpartition(".")
        assert callable(getattr(importlib.import_module(module), name))
