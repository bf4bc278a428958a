"""`training-guard doctor` against the synthesized stack deployed on moto, whole and broken on purpose.

Each broken deployment must fail exactly the check it breaks, with the fix that repairs it; where the fix is
a command the guard can run here, the test runs it and the doctor passes again. Most tests share one deployment,
put back after each (`healthy`, `stack`); those that need their own come first in the file (`own`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from infra import outputs
from tests.integration.alarm_actions import AlarmActions
from tests.integration.deployed import CONFIG, EMAIL, REGION, STACK, WEBHOOKS, Deployment, deployed, notifier
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard_local import cli, doctor
from training_guard_local.preflight import FAIL, OK, WARN, Check
from training_guard_local.slack_listener import SlackListener

pytestmark = pytest.mark.integration

URL = "https://hooks.slack.com/services/T0TEST/B0TEST/do-not-print-me"


def put_urls(stack: Deployment, url: Callable[[str], str] = lambda _: URL) -> None:
    """What the operator does after the first deploy: the webhook URLs in their secrets."""
    for webhook in WEBHOOKS:
        stack.client("secretsmanager").put_secret_value(
            SecretId=stack.outputs[outputs.slack_secret(webhook)], SecretString=url(webhook)
        )


_SHARED: list[Deployment] = []  # the shared deployment while it stands (one moto account holds one stack)


@contextmanager
def own(config: GuardConfig = CONFIG, *, set_up: bool = False) -> Iterator[Deployment]:
    """A deployment of the test's own, made and torn down before the shared one stands (pytest runs a file's tests in
    order); `set_up`: with its webhook URLs set, as the shared one."""
    assert not _SHARED, "a test with its own deployment runs before the shared one is made: move it up the file"
    with deployed(config) as deployment:
        if set_up:
            put_urls(deployment)
        yield deployment


@dataclass(frozen=True)
class State:
    """What the tests on the shared deployment change in AWS, as read back from it (and the queues, emptied)."""

    rules: dict[str, str]
    secrets: dict[str, str]
    topic_policy: str
    key_policy: str
    layers: dict[str, list[str]]
    alarms: dict[str, tuple[str, str]]


def state_of(stack: Deployment) -> State:
    topic = stack.client("sns").get_topic_attributes(TopicArn=stack.outputs[outputs.TOPIC_ARN])["Attributes"]
    key = stack.client("kms").get_key_policy(KeyId=topic["KmsMasterKeyId"], PolicyName="default")["Policy"]
    functions = stack.client("lambda").get_paginator("list_functions").paginate().build_full_result()["Functions"]
    alarms = stack.client("cloudwatch").get_paginator("describe_alarms").paginate().build_full_result()
    return State(
        rules={r["Name"]: r["State"] for r in stack.client("events").list_rules()["Rules"]},
        secrets={
            secret: stack.client("secretsmanager").get_secret_value(SecretId=secret)["SecretString"]
            for secret in (stack.outputs[outputs.slack_secret(webhook)] for webhook in WEBHOOKS)
        },
        topic_policy=topic["Policy"],
        key_policy=key,
        layers={f["FunctionName"]: [layer["Arn"] for layer in f.get("Layers", [])] for f in functions},
        alarms={a["AlarmName"]: (a["StateValue"], a["StateReason"]) for a in alarms["MetricAlarms"]},
    )


def put_back(stack: Deployment, healthy: State) -> None:
    """Every change `state_of` sees, undone; every queue emptied."""
    now = state_of(stack)
    events, secrets, cloudwatch = stack.client("events"), stack.client("secretsmanager"), stack.client("cloudwatch")
    for rule in [r for r, state in healthy.rules.items() if now.rules.get(r) != state]:
        (events.enable_rule if healthy.rules[rule] == "ENABLED" else events.disable_rule)(Name=rule)
    for secret in [s for s, value in healthy.secrets.items() if now.secrets[s] != value]:
        secrets.put_secret_value(SecretId=secret, SecretString=healthy.secrets[secret])
    if now.topic_policy != healthy.topic_policy:
        stack.client("sns").set_topic_attributes(
            TopicArn=stack.outputs[outputs.TOPIC_ARN], AttributeName="Policy", AttributeValue=healthy.topic_policy
        )
    if now.key_policy != healthy.key_policy:
        key = stack.client("sns").get_topic_attributes(TopicArn=stack.outputs[outputs.TOPIC_ARN])["Attributes"]
        stack.client("kms").put_key_policy(KeyId=key["KmsMasterKeyId"], PolicyName="default", Policy=healthy.key_policy)
    for name in [n for n, layers in healthy.layers.items() if now.layers[n] != layers]:
        stack.client("lambda").update_function_configuration(FunctionName=name, Layers=healthy.layers[name])
    for alarm in [a for a, state in healthy.alarms.items() if now.alarms[a] != state]:
        value, reason = healthy.alarms[alarm]
        cloudwatch.set_alarm_state(AlarmName=alarm, StateValue=value, StateReason=reason)
    sqs = stack.client("sqs")
    for queue in resources(stack, "AWS::SQS::Queue"):
        # received and deleted, not purged (SQS allows one purge of a queue a minute); the tests and the doctor
        # receive with no visibility timeout, so nothing is in flight (the shared deployment's end checks it)
        while got := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages"):
            for message in got:
                sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])


def resources(stack: Deployment, kind: str) -> list[str]:
    return [stack.refs[logical] for logical, r in stack.template["Resources"].items() if r["Type"] == kind]


def queued(stack: Deployment) -> dict[str, int]:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    counts = {}
    for queue in resources(stack, "AWS::SQS::Queue"):
        got = stack.client("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=names)["Attributes"]
        counts[queue] = sum(int(got[name]) for name in names)
    return counts


@pytest.fixture(scope="module")
def healthy() -> Iterator[tuple[Deployment, State]]:
    """The shared deployment (standing the stack up costs twice examining it): the synthesized stack with its
    webhook URLs set, and its state; at the end, checked to be as it was made (a change no test put back would fail
    the tests after it, but might not)."""
    with deployed(CONFIG) as deployment:
        put_urls(deployment)
        state = state_of(deployment)
        _SHARED.append(deployment)
        try:
            yield deployment, state
            assert (state_of(deployment), set(queued(deployment).values())) == (state, {0})
        finally:
            _SHARED.clear()


@pytest.fixture
def stack(healthy: tuple[Deployment, State]) -> Iterator[Deployment]:
    """A healthy deployment: a view of the shared one, with its own outputs and stack status (what the
    CloudFormation stand-in answers) and the shared clients; what the test changed in AWS is put back after it."""
    shared, state = healthy
    clients = {k: v for k, v in shared.clients.items() if k != "stand-in"}  # the stand-in answers for its view
    yield replace(shared, outputs=dict(shared.outputs), clients=clients)
    put_back(shared, state)
    assert state_of(shared) == state, "a change the put-back does not undo: the next test would see it"


def alone(stack: Deployment) -> Deployment:
    """The view with clients of its own, for a test that registers event handlers on them."""
    stack.clients.clear()
    return stack


def examine(stack: Deployment, **kwargs: Any) -> doctor.Report:
    # Past the notifier's secret cache window, unless a test says otherwise.
    kwargs.setdefault("now", datetime.now(UTC) + timedelta(seconds=doctor.SECRET_CACHE_SECONDS + 1))
    return doctor.examine(stack.aws(), STACK, **kwargs)


def by_name(report: doctor.Report) -> dict[str, Check]:
    return {c.name: c for c in report.checks}


def failed(report: doctor.Report) -> list[str]:
    return [c.name for c in report.checks if c.status == FAIL]


# --- broken on purpose: each way returns the fix (or its telling part) the failed check must name -----------


def disable_sweep(stack: Deployment) -> str:
    stack.client("events").disable_rule(Name=stack.outputs[outputs.SWEEP_SCHEDULE_RULE])
    return f"aws events enable-rule --region {REGION} --name {stack.outputs[outputs.SWEEP_SCHEDULE_RULE]}"


def placeholder_again(stack: Deployment) -> str:
    secret = stack.outputs[outputs.slack_secret("on-call")]
    stack.client("secretsmanager").put_secret_value(SecretId=secret, SecretString=contract.WEBHOOK_PLACEHOLDER)
    return f"put-secret-value --region {REGION} --secret-id {secret} "


def unconfirmed_email(stack: Deployment) -> str:
    stack.pending(EMAIL)
    return (
        f"aws sns subscribe --region {REGION} --topic-arn {stack.outputs[outputs.TOPIC_ARN]} --protocol email "
        f"--notification-endpoint {EMAIL}"
    )


def job_event_dead_letters(stack: Deployment) -> str:
    url = stack.outputs[outputs.JOB_EVENTS_DEAD_LETTERS]
    stack.client("sqs").send_message(QueueUrl=url, MessageBody=json.dumps({"detail-type": "x"}))
    return (
        f"AWS_REGION={REGION} training-guard redrive --dead-letters {url} "
        f"--function {stack.outputs[outputs.JOB_EVENTS_FUNCTION]}"
    )


def failed_sweep(stack: Deployment) -> str:
    url = stack.outputs[outputs.METRIC_GUARDS_DEAD_LETTERS]
    record = {"requestContext": {"condition": "RetriesExhausted"}, "requestPayload": {"detail-type": "Scheduled Event"}}
    stack.client("sqs").send_message(QueueUrl=url, MessageBody=json.dumps(record))
    return f"--function {stack.outputs[outputs.ALARM_EVENTS_FUNCTION]}"


def undelivered_by_sns(stack: Deployment) -> str:
    url = stack.outputs[outputs.SUBSCRIPTIONS_DEAD_LETTERS]
    stack.client("sqs").send_message(QueueUrl=url, MessageBody="{}")
    chat = stack.client("sqs").get_queue_attributes(
        QueueUrl=stack.outputs[outputs.CHAT_QUEUE], AttributeNames=["QueueArn"]
    )
    return f"--destination-arn {chat['Attributes']['QueueArn']}"


def policy_without_cloudwatch(stack: Deployment) -> str:
    sns = stack.client("sns")
    topic = stack.outputs[outputs.TOPIC_ARN]
    policy = json.loads(sns.get_topic_attributes(TopicArn=topic)["Attributes"]["Policy"])
    policy["Statement"] = [s for s in policy["Statement"] if s["Effect"] != "Allow"]
    sns.set_topic_attributes(TopicArn=topic, AttributeName="Policy", AttributeValue=json.dumps(policy))
    return f"aws sns set-topic-attributes --region {REGION} --topic-arn {topic} --attribute-name Policy"


def errors_lately(stack: Deployment) -> str:
    name = stack.outputs[outputs.SWEEPER_FUNCTION]
    stack.client("cloudwatch").put_metric_data(
        Namespace="AWS/Lambda",
        MetricData=[
            {
                "MetricName": "Errors",
                "Dimensions": [{"Name": "FunctionName", "Value": name}],
                "Value": 3,
                "Timestamp": datetime.now(UTC) - timedelta(hours=2),
            }
        ],
    )
    return f"aws logs tail /aws/lambda/{name} --region {REGION} --since 24h"


def throttled_lately(stack: Deployment) -> str:
    name = stack.outputs[outputs.JOB_EVENTS_FUNCTION]
    stack.client("cloudwatch").put_metric_data(
        Namespace="AWS/Lambda",
        MetricData=[{"MetricName": "Throttles", "Dimensions": [{"Name": "FunctionName", "Value": name}], "Value": 1}],
    )
    return "servicequotas/home/services/lambda/quotas/L-B99A9384"


def without_powertools(stack: Deployment) -> str:
    lam = stack.client("lambda")
    name = stack.outputs[outputs.ALARM_EVENTS_FUNCTION]
    layers = [layer["Arn"] for layer in lam.get_function_configuration(FunctionName=name)["Layers"]]
    lam.update_function_configuration(FunctionName=name, Layers=[a for a in layers if "Powertools" not in a])
    return "make deploy"


def own_alarm_firing(stack: Deployment) -> str:
    stack.client("cloudwatch").set_alarm_state(
        AlarmName="TrainingGuard-self-JobEventsErrors", StateValue="ALARM", StateReason="Threshold Crossed"
    )
    return "The JobEvents function failed."


def older_deployment(stack: Deployment) -> str:
    del stack.outputs[outputs.CHAT_QUEUE]
    return "make deploy"


def not_deployed(stack: Deployment) -> str:
    stack.exists = False
    return "deploy it: make deploy"


def rolled_back(stack: Deployment) -> str:
    stack.status = "ROLLBACK_COMPLETE"
    return f"aws cloudformation describe-stack-events --region {REGION} --stack-name {STACK}"


# --- deployments of their own (before the shared one stands) -----------------------------------------------


def test_a_fresh_deployment_fails_only_on_the_webhook_urls_not_yet_put() -> None:
    with own() as stack:
        report = examine(stack)
    assert failed(report) == ["slack-secret:default", "slack-secret:on-call"]
    check = by_name(report)["slack-secret:on-call"]
    assert "still holds the placeholder" in check.message
    assert check.fix == (
        f"aws secretsmanager put-secret-value --region {REGION} --secret-id TrainingGuard/slack/on-call "
        "--secret-string 'https://hooks.slack.com/services/...'"
    )


def test_a_guard_without_slack_needs_no_chat_outputs_nor_secrets() -> None:
    with own(GuardConfig()) as stack:
        report = examine(stack)
    assert report.exit_code == 0, doctor.render(report)
    names = {c.name for c in report.checks}
    assert not any(n.startswith(("slack-secret:", "subscription:chat", "dead-letters:chat")) for n in names)
    assert "function:slack-notifier" not in names


def test_errors_older_than_the_window_are_not_counted() -> None:
    with own(set_up=True) as stack:
        errors_lately(stack)
        assert failed(examine(stack, hours=1)) == []
        assert failed(examine(stack, hours=3)) == ["function:sweeper"]


@pytest.mark.parametrize(
    ("break_it", "check"),
    [
        (unconfirmed_email, f"e-mail:{EMAIL}"),
        (errors_lately, "function:sweeper"),
        (throttled_lately, "function:job-events"),
    ],
)
def test_a_deployment_broken_for_good_fails_that_check_with_its_fix(
    break_it: Callable[[Deployment], str], check: str
) -> None:
    """Metric data cannot be deleted, and `pending` changes moto's own record: each on a deployment of its own."""
    with own(set_up=True) as stack:
        only_that_check_fails(stack, break_it, check)


# --- part 6: what waited for the webhook URL is found and delivered ------------------------------------------


def test_messages_parked_before_the_url_was_set_are_found_and_delivered_by_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with SlackListener() as slack, own() as stack, notifier(stack, monkeypatch) as pump:
        sns = stack.client("sns")
        for severity in ("info", "critical"):  # one to default, one to on-call (by_severity)
            sns.publish(TopicArn=stack.outputs[outputs.TOPIC_ARN], Message=document(severity))
        pump()
        chat_dead_letters = stack.outputs[outputs.CHAT_DEAD_LETTERS]
        before = examine(stack)
        assert failed(before) == ["slack-secret:default", "slack-secret:on-call", "dead-letters:chat"]
        chat = by_name(before)["dead-letters:chat"]
        assert chat.message == (
            "2 messages waiting for a webhook URL (TrainingGuard/slack/default, TrainingGuard/slack/on-call)"
        )
        assert chat.fix.startswith(
            "put the webhook URL in TrainingGuard/slack/default, TrainingGuard/slack/on-call first"
        )
        assert examine(stack, fix=True).fixed == [
            "not redriven: TrainingGuard/slack/default, TrainingGuard/slack/on-call hold(s) no URL yet"
        ]

        put_urls(stack, slack.url)
        just_now = examine(stack, now=datetime.now(UTC))
        assert failed(just_now) == ["dead-letters:chat"]
        assert by_name(just_now)["dead-letters:chat"].fix.startswith("after ")  # a warm notifier's cache
        ready = examine(stack)
        assert by_name(ready)["dead-letters:chat"].fix.startswith(
            f"training-guard doctor --fix --region {REGION} (or: "
        )

        fixed = examine(stack, fix=True)
        assert fixed.fixed == [f"redriven 2 chat message(s) to {stack.outputs[outputs.CHAT_QUEUE]}"]
        assert by_name(fixed)["dead-letters:chat"].status == OK
        assert fixed.exit_code == 0
        pump(fresh=True)
        received = sorted(r.path.rsplit("/", 1)[1] for r in slack.received())
        assert received == ["default-secret-token", "on-call-secret-token"]
        assert stack.client("sqs").receive_message(QueueUrl=chat_dead_letters).get("Messages", []) == []
        assert failed(examine(stack)) == []


def document(severity: str) -> str:
    """A notification document as the guard publishes it (the chat subscription is raw)."""
    return json.dumps(
        {
            "schema": contract.NOTIFICATION_SCHEMA,
            "kind": "job_failed",
            "outcome": "notified",
            "severity": severity,
            "title": f"Training job demo-{severity} failed",
            "reason": "notifications.failed = true",
            "transition": f"t#demo-{severity}#job#status#Failed",
            "job": {"name": f"demo-{severity}", "status": "Failed", "tags": {}},
        }
    )


# --- a healthy deployment ------------------------------------------------------------------------------


def test_the_synthesized_stack_deployed_and_set_up_passes_every_check(stack: Deployment) -> None:
    report = examine(stack)
    checks = by_name(report)
    assert report.exit_code == 0, doctor.render(report)
    assert [c.name for c in report.checks if c.status != OK] == []
    assert set(checks) == {
        "stack",
        "outputs",
        "rule:job-events",
        "rule:alarm-events",
        "rule:sweep",
        "function:job-events",
        "function:alarm-events",
        "function:sweeper",
        "function:slack-notifier",
        "function:log-events",
        "rule:log-stall-check",
        "log-subscription",
        "powertools-layer",
        "slack-secret:default",
        "slack-secret:on-call",
        "topic-policy",
        f"e-mail:{EMAIL}",
        "subscription:chat",
        "q-developer",
        "dead-letters:job-events",
        "dead-letters:metric-guards",
        "dead-letters:chat",
        "dead-letters:subscriptions",
        "alarms",
        "metric-guard-caps",
    }
    assert checks["metric-guard-caps"].message == "1 fleet alarm within CloudWatch's caps"
    # the layer check compared each function with the layer CloudFormation resolved for the stack
    assert "AWSLambdaPowertoolsPythonV3-python313-arm64" in checks["powertools-layer"].message
    assert checks["topic-policy"].message == "CloudWatch may publish for the guard's 22 alarm(s)"  # 5 the log rules'


def test_the_command_prints_a_checklist_and_exits_0_or_1(
    stack: Deployment, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(doctor, "connect", lambda environ, region: stack.aws())
    assert cli.main(["doctor", "--region", REGION]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"Training Guard doctor: stack {STACK} in {REGION} (account 123456789012)"
    assert "✓  rule:job-events" in out
    assert out.rstrip().endswith("doctor: healthy (25 checks, 0 warning(s))")  # 3 of them the log rules'

    stack.client("events").disable_rule(Name=stack.outputs[outputs.JOB_EVENTS_RULE])
    assert cli.main(["doctor", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["exit_code"] == 1
    [rule] = [c for c in document["checks"] if c["status"] == FAIL]
    assert rule["name"] == "rule:job-events"
    assert rule["fix"] == f"aws events enable-rule --region {REGION} --name {stack.outputs[outputs.JOB_EVENTS_RULE]}"


def test_a_secret_value_is_never_shown(stack: Deployment) -> None:
    stack.client("secretsmanager").put_secret_value(
        SecretId=stack.outputs[outputs.slack_secret("default")], SecretString="hooks.slack.com/services/no-scheme"
    )
    report = examine(stack)
    assert failed(report) == ["slack-secret:default"]
    assert "is not an https:// URL" in by_name(report)["slack-secret:default"].message
    for text in (doctor.render(report), doctor.as_json(report)):
        assert "no-scheme" not in text
        assert "do-not-print-me" not in text


# --- broken on purpose, and put back after: exactly the check broken fails, with its fix ---------------------


@pytest.mark.parametrize(
    ("break_it", "check"),
    [
        (disable_sweep, "rule:sweep"),
        (placeholder_again, "slack-secret:on-call"),
        (job_event_dead_letters, "dead-letters:job-events"),
        (failed_sweep, "dead-letters:metric-guards"),
        (undelivered_by_sns, "dead-letters:subscriptions"),
        (policy_without_cloudwatch, "topic-policy"),
        (without_powertools, "powertools-layer"),
        (own_alarm_firing, "alarm:JobEventsErrors"),
        (older_deployment, "outputs"),
        (not_deployed, "stack"),
        (rolled_back, "stack"),
    ],
)
def test_a_broken_deployment_fails_that_check_with_its_fix(
    stack: Deployment, break_it: Callable[[Deployment], str], check: str
) -> None:
    only_that_check_fails(stack, break_it, check)


def only_that_check_fails(stack: Deployment, break_it: Callable[[Deployment], str], check: str) -> None:
    fix = break_it(stack)
    report = examine(stack)
    assert report.exit_code == 1
    assert failed(report) == [check], doctor.render(report)
    assert fix in by_name(report)[check].fix
    assert f"fix: {by_name(report)[check].fix}" in doctor.render(report)


def test_the_topic_policy_fix_restores_what_the_alarms_need(stack: Deployment) -> None:
    policy_without_cloudwatch(stack)
    fix = by_name(examine(stack))["topic-policy"].fix
    policy = fix.split("--attribute-value '", 1)[1].rstrip("'")
    stack.client("sns").set_topic_attributes(
        TopicArn=stack.outputs[outputs.TOPIC_ARN], AttributeName="Policy", AttributeValue=policy
    )
    assert by_name(examine(stack))["topic-policy"].status == OK
    # and the TLS-only Deny the stack put there is kept
    assert any(s["Effect"] == "Deny" for s in json.loads(policy)["Statement"])


def test_an_allow_for_other_alarms_only_is_not_enough(stack: Deployment) -> None:
    sns = stack.client("sns")
    topic = stack.outputs[outputs.TOPIC_ARN]
    policy = json.loads(sns.get_topic_attributes(TopicArn=topic)["Attributes"]["Policy"])
    for statement in policy["Statement"]:
        if statement["Effect"] == "Allow":
            statement["Condition"]["ArnLike"]["aws:SourceArn"] = statement["Condition"]["ArnLike"][
                "aws:SourceArn"
            ].replace("TrainingGuard-self-", "SomeoneElse-")
    sns.set_topic_attributes(TopicArn=topic, AttributeName="Policy", AttributeValue=json.dumps(policy))
    assert failed(examine(stack)) == ["topic-policy"]


def test_a_metric_guard_in_alarm_is_a_warning_not_a_failure(stack: Deployment) -> None:
    stack.client("cloudwatch").set_alarm_state(
        AlarmName="training-guard-loss-diverging", StateValue="ALARM", StateReason="a job breaches"
    )
    report = examine(stack)
    assert report.exit_code == 0
    check = by_name(report)["metric-guards"]
    assert (check.status, check.message.split(":")[0]) == (WARN, "in ALARM")
    assert "training-guard-loss-diverging" in check.message


def test_a_fleet_alarm_with_100_plus_contributors_in_alarm_is_a_warning_naming_the_cap(stack: Deployment) -> None:
    stack.client("cloudwatch").set_alarm_state(
        AlarmName="training-guard-loss-diverging",
        StateValue="ALARM",
        StateReason="Threshold Crossed: 100+ time series evaluated to ALARM.",  # CloudWatch's wording past the cap
    )
    report = examine(stack)
    check = by_name(report)["metric-guard-caps"]
    assert report.exit_code == 0
    assert check.status == WARN
    assert check.message.startswith("training-guard-loss-diverging has 100+ contributors in ALARM")
    assert "the sweeper judges them itself" in check.message
    assert "job_prefix" in check.fix


# --- usage errors: one line, exit 2, never a traceback --------------------------------------------------------


def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for key in (
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AMAZON_REGION",
        "AMAZON_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata lookups for credentials


# No region, no credentials, a profile that does not exist: tests/integration/test_cli_faults.py, for every command.


def test_hours_out_of_range_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor", "--hours", "0"]) == 2
    assert capsys.readouterr().err == f"training-guard doctor: --hours must be between 1 and {doctor.MAX_HOURS}\n"


def test_a_terminal_that_cannot_show_the_marks_gets_plain_ones() -> None:
    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    utf8_out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    assert doctor.symbols(ascii_out) == doctor.ASCII_SYMBOLS
    assert doctor.symbols(utf8_out) == doctor.SYMBOLS
    report = doctor.Report(STACK, REGION, checks=[Check("stack", FAIL, "no stack", "make deploy")])
    doctor.render(report, doctor.symbols(ascii_out)).encode("ascii")  # raises if a mark is not ASCII


# --- credentials that may not read everything --------------------------------------------------------------


def refuse(aws: Any, service: str, operation: str) -> None:
    """The call answers AccessDenied, as it does for credentials without the permission."""

    def denied(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        error = {"Code": "AccessDenied", "Message": f"not authorized to perform {operation}"}
        return AWSResponse("https://example.invalid/", 403, {}, None), {
            "Error": error,
            "ResponseMetadata": {"HTTPStatusCode": 403},
        }

    aws.client(service).meta.events.register_first(f"before-call.{service}.{operation}", denied)


def test_a_refused_read_is_a_warning_and_the_other_checks_still_run(stack: Deployment) -> None:
    aws = alone(stack).aws()
    refuse(aws, "cloudwatch", "GetMetricData")
    report = doctor.examine(aws, STACK)
    checks = by_name(report)
    assert checks["functions"] == Check("functions", WARN, "could not read it: AccessDenied on GetMetricData", "")
    assert not any(name.startswith("function:") for name in checks)
    assert report.exit_code == 0
    assert checks["topic-policy"].status == OK  # read with the same (cloudwatch) client, other operations


def test_credentials_that_may_not_read_the_stack_are_a_usage_error(
    stack: Deployment, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    aws = alone(stack).aws()
    refuse(aws, "cloudformation", "DescribeStacks")
    monkeypatch.setattr(doctor, "connect", lambda environ, region: aws)
    assert cli.main(["doctor"]) == 2
    assert capsys.readouterr().err == (
        "training-guard doctor: DescribeStacks was refused (AccessDenied): the credentials cannot read the stack\n"
    )


# --- --self-alarm: one of the guard's own alarms forced to ALARM, its notification confirmed ------------------


def chat_messages(stack: Deployment) -> list[dict[str, Any]]:
    sqs = stack.client("sqs")
    got = sqs.receive_message(QueueUrl=stack.outputs[outputs.CHAT_QUEUE], MaxNumberOfMessages=10, VisibilityTimeout=0)
    bodies = [json.loads(m["Body"]) for m in got.get("Messages", [])]
    # raw delivery (the body is the message) or the SNS envelope
    return [json.loads(b["Message"]) if b.get("Type") == "Notification" else b for b in bodies]


def self_alarm_check(stack: Deployment) -> Check:
    report = examine(stack, self_alarm=partial(doctor.check_self_alarm, sleep=lambda _s: None))
    return by_name(report)["self-alarm"]


def test_self_alarm_forces_an_own_alarm_confirms_its_publish_and_sets_it_back(stack: Deployment) -> None:
    AlarmActions(alone(stack))
    check = self_alarm_check(stack)
    alarm = "TrainingGuard-self-AlarmEventsErrors"  # the first in name order
    assert check.status == OK, check
    assert check.message.startswith(f"{alarm} forced to ALARM published to the topic (Successfully executed action")
    [state] = stack.client("cloudwatch").describe_alarms(AlarmNames=[alarm])["MetricAlarms"]
    assert state["StateValue"] == "OK"
    # the chat path received both notifications: the forced ALARM and the OK that set it back
    assert [(m["AlarmName"], m["NewStateValue"]) for m in chat_messages(stack)] == [(alarm, "ALARM"), (alarm, "OK")]


def test_self_alarm_fails_when_the_key_lets_cloudwatch_in_only_with_a_source_account(stack: Deployment) -> None:
    """The key policy the guard shipped before: CloudWatch sends KMS no aws:SourceAccount (the SNS key guide shows
    the grant without a condition), so the alarm's publish is refused and nothing arrives."""
    kms = stack.client("kms")
    key = stack.client("sns").get_topic_attributes(TopicArn=stack.outputs[outputs.TOPIC_ARN])["Attributes"][
        "KmsMasterKeyId"
    ]
    policy = json.loads(kms.get_key_policy(KeyId=key, PolicyName="default")["Policy"])
    for statement in policy["Statement"]:
        if "cloudwatch.amazonaws.com" in json.dumps(statement.get("Principal")):
            statement["Condition"] = {"StringEquals": {"aws:SourceAccount": "123456789012"}}
    kms.put_key_policy(KeyId=key, PolicyName="default", Policy=json.dumps(policy))
    AlarmActions(alone(stack))
    check = self_alarm_check(stack)
    assert check.status == FAIL
    assert "does not have authorization to access the SNS topic encryption key" in check.message
    assert "kms:GenerateDataKey*" in check.fix
    assert chat_messages(stack) == []


def test_self_alarm_warns_when_no_action_is_recorded_in_time(stack: Deployment) -> None:
    AlarmActions(alone(stack)).history_off = True
    waits: list[float] = []
    report = examine(stack, self_alarm=partial(doctor.check_self_alarm, sleep=waits.append, wait_seconds=6))
    check = by_name(report)["self-alarm"]
    assert check.status == WARN
    assert "no action recorded in its history within 6 s" in check.message
    assert waits == [doctor.SELF_ALARM_POLL_SECONDS] * 3
    assert "describe-alarm-history" in check.fix


def test_self_alarm_runs_only_when_asked(stack: Deployment) -> None:
    assert "self-alarm" not in by_name(examine(stack))
