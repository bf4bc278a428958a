"""No default is a credential: the Slack app-mode stack deployed on moto, its endpoint and click worker run as deployed,
and a Stop now or Exempt signed with the stack's placeholder, an empty secret or Slack's published example acts on
nothing; signed with the secret an operator put, it acts. StopTrainingJob calls are counted on the emulation."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from infra import outputs
from tests.integration.deployed import ACCOUNT, Deployment, deployed
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard.domain import credentials
from training_guard.render.slack_actions import Act, button
from training_guard_local import sagemaker_ext
from training_guard_local.emulator import LambdaContext, handler_output_to_stderr

pytestmark = pytest.mark.integration

ALLOWED = "U0OPERATOR"
CONFIG = GuardConfig.from_dict(
    {"slack": {"mode": "app", "app": {"channels": {"default": "C0TRAINING"}, "allowed_users": [ALLOWED]}}}
)


@pytest.fixture(scope="module")
def stack() -> Iterator[Deployment]:
    with deployed(CONFIG) as deployment:
        sagemaker_ext.install()
        yield deployment


def function_environment(stack: Deployment, output: str, folder: str) -> tuple[dict[str, str], LambdaContext]:
    name = stack.outputs[output]
    configuration = stack.client("lambda").get_function_configuration(FunctionName=name)
    config_file = Path(folder) / "config.json"
    config_file.write_text(stack.config.to_json(), encoding="utf-8")
    environment = dict(configuration["Environment"]["Variables"]) | {
        contract.ENV_CONFIG_FILE: str(config_file),
        "AWS_REGION": stack.region,
        "AWS_DEFAULT_REGION": stack.region,
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    return environment, LambdaContext(function_name=name, invoked_function_arn=configuration["FunctionArn"])


def click_request(act: Act, job: str, secret: str) -> dict[str, Any]:
    """A function URL event for a click on the guard's button, signed with `secret` as Slack signs."""
    payload = {
        "type": "block_actions",
        "user": {"id": ALLOWED},
        "team": {"id": "T0EMULATED"},
        "channel": {"id": "C0TRAINING"},
        "container": {"message_ts": "1700000000.000100", "thread_ts": "1700000000.000100"},
        "response_url": "https://hooks.slack.com/actions/T0EMULATED/1/abc",
        "actions": [{**button(act, label=act.value, job=job, rule="LossNotDecreasing"), "action_ts": str(time.time())}],
    }
    body = urlencode({"payload": json.dumps(payload)})
    timestamp = str(int(time.time()))
    base = f"v0:{timestamp}:{body}".encode()
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "requestContext": {"http": {"method": "POST"}},
        "headers": {"x-slack-request-timestamp": timestamp, "x-slack-signature": signature},
        "body": body,
        "isBase64Encoded": False,
    }


def press(
    stack: Deployment, monkeypatch: pytest.MonkeyPatch, act: Act, job: str, *, stored: str, signed_with: str
) -> int:
    """The signing secret holds `stored`; a click signed with `signed_with` reaches the endpoint, then whatever it
    queued reaches the worker. The endpoint's HTTP status."""
    secret_name = stack.outputs[outputs.SLACK_SIGNING_SECRET]
    stack.client("secretsmanager").put_secret_value(SecretId=secret_name, SecretString=stored)
    from training_guard.handlers import interactions, wiring

    with tempfile.TemporaryDirectory() as folder:
        environment, context = function_environment(stack, outputs.SLACK_INTERACTIONS_FUNCTION, folder)
        with monkeypatch.context() as env:
            for key, value in environment.items():
                env.setenv(key, value)
            wiring.reset()
            with handler_output_to_stderr():
                status = int(interactions.handler(click_request(act, job, signed_with), context)["statusCode"])
        queue = stack.outputs[outputs.SLACK_CLICK_QUEUE]
        sqs = stack.client("sqs")
        batch = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
        if batch:
            environment, context = function_environment(stack, outputs.SLACK_CLICK_WORKER_FUNCTION, folder)
            records = [{"messageId": m["MessageId"], "body": m["Body"]} for m in batch]
            with monkeypatch.context() as env:
                for key, value in environment.items():
                    env.setenv(key, value)
                wiring.reset()
                with handler_output_to_stderr():
                    # The thread's reply fails (no Slack here) after the stop or the mute: that is the worker's
                    # retry, not this test's subject.
                    interactions.worker_handler({"Records": records}, context)
            for message in batch:
                sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    wiring.reset()
    return status


def running(stack: Deployment) -> str:
    job = f"mnist-{uuid.uuid4().hex[:8]}"
    sagemaker_ext.put_job(
        ACCOUNT,
        stack.region,
        {"TrainingJobName": job, "TrainingJobStatus": "InProgress", "SecondaryStatus": "Training"},
    )
    return job


def exemption(stack: Deployment, job: str) -> dict[str, Any]:
    table = stack.outputs[outputs.STATE_TABLE_NAME]
    item = stack.client("dynamodb").get_item(TableName=table, Key={"pk": {"S": f"mutes#{job}"}})
    return dict(item.get("Item") or {})


NOT_CREDENTIALS = {
    "the stack's placeholder": contract.SIGNING_SECRET_PLACEHOLDER,
    "an empty secret": " ",
    "Slack's published example": credentials.SLACK_EXAMPLE_SIGNING_SECRET,
    "a short word": "hunter2",
}


@pytest.mark.parametrize("stored", NOT_CREDENTIALS.values(), ids=NOT_CREDENTIALS.keys())
@pytest.mark.parametrize("act", [Act.STOP, Act.EXEMPT])
def test_a_click_signed_with_a_secret_that_is_no_credential_acts_on_nothing(
    stack: Deployment, monkeypatch: pytest.MonkeyPatch, act: Act, stored: str
) -> None:
    job = running(stack)
    status = press(stack, monkeypatch, act, job, stored=stored, signed_with=stored)
    assert status == 503
    assert sagemaker_ext.stop_calls(job=job) == []
    assert sagemaker_ext.job_status(ACCOUNT, stack.region, job) == "InProgress"
    assert exemption(stack, job) == {}


@pytest.mark.parametrize("act", [Act.STOP, Act.EXEMPT])
def test_a_click_signed_with_the_secret_the_operator_put_acts(
    stack: Deployment, monkeypatch: pytest.MonkeyPatch, act: Act
) -> None:
    job = running(stack)
    real = secrets.token_hex(16)
    assert press(stack, monkeypatch, act, job, stored=real, signed_with=contract.SIGNING_SECRET_PLACEHOLDER) == 401
    assert sagemaker_ext.stop_calls(job=job) == []
    assert press(stack, monkeypatch, act, job, stored=real, signed_with=real) == 200
    if act is Act.STOP:
        assert len(sagemaker_ext.stop_calls(job=job)) == 1
        assert sagemaker_ext.job_status(ACCOUNT, stack.region, job) == "Stopping"
    else:
        assert sagemaker_ext.stop_calls(job=job) == []
        assert exemption(stack, job) != {}


# --- doctor names the unset secret and the command that sets it -------------------------------------------------


def app_secret_checks(stack: Deployment, *, signing: str, bot: str) -> dict[str, Any]:
    from training_guard_local import doctor

    client = stack.client("secretsmanager")
    client.put_secret_value(SecretId=stack.outputs[outputs.SLACK_SIGNING_SECRET], SecretString=signing)
    client.put_secret_value(SecretId=stack.outputs[outputs.SLACK_BOT_TOKEN_SECRET], SecretString=bot)
    report = doctor.examine(stack.aws(), stack.stack)
    return {c.name: c for c in report.checks if c.name.startswith("slack-app-secret:")}


def test_doctor_fails_each_app_secret_that_holds_no_credential_with_the_put_secret_value_command(
    stack: Deployment,
) -> None:
    signing_id = stack.outputs[outputs.SLACK_SIGNING_SECRET]
    bot_id = stack.outputs[outputs.SLACK_BOT_TOKEN_SECRET]
    checks = app_secret_checks(stack, signing=contract.SIGNING_SECRET_PLACEHOLDER, bot=contract.BOT_TOKEN_PLACEHOLDER)
    signing, bot = checks["slack-app-secret:signing_secret"], checks["slack-app-secret:bot_token"]
    assert (signing.status, bot.status) == ("fail", "fail")
    assert (
        signing.message
        == f"{signing_id} still holds a placeholder or a published example value: every click is refused (HTTP 503)"
    )
    assert signing.fix == (
        f"aws secretsmanager put-secret-value --region {stack.region} --secret-id {signing_id} "
        "--secret-string '<signing secret>'"
    )
    assert bot.fix.endswith(f"--secret-id {bot_id} --secret-string 'xoxb-...'")
    empty = app_secret_checks(stack, signing=" ", bot=f"{credentials.BOT_TOKEN_PREFIX}{secrets.token_hex(12)}")
    assert (
        empty["slack-app-secret:signing_secret"].message == f"{signing_id} is empty: every click is refused (HTTP 503)"
    )
    assert empty["slack-app-secret:bot_token"].status == "ok"
    ready = app_secret_checks(
        stack, signing=secrets.token_hex(16), bot=f"{credentials.BOT_TOKEN_PREFIX}{secrets.token_hex(12)}"
    )
    assert [c.status for c in ready.values()] == ["ok", "ok"]
