"""`training-guard preflight`: every check's ok / warn / fail path, with botocore's Stubber (no network)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import (
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
)
from botocore.stub import Stubber

from training_guard import contract
from training_guard.domain import credentials
from training_guard_local import cli, preflight
from training_guard_local.preflight import FAIL, OK, WARN, Aws, Check, Plan, WebhookSecret

REGION = "eu-west-1"
ACCOUNT = "123456789012"
ARN = f"arn:aws:iam::{ACCOUNT}:user/alice"
# A test input, not the stack's parameter (that one is pinned by the infra-marked test below).
PARAMETER = "/aws/service/powertools/python/arm64/python3.13/9.9.9"
LAYER_ARN = f"arn:aws:lambda:{REGION}:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:99"
WEBHOOK_URL = "https://hooks.slack.com/services/T000/B000/very-secret-token"
NOT_A_URL = "hunter2-not-a-url"
ROOT = Path(__file__).resolve().parents[2]

STACK_SECRET = WebhookSecret("default", "TrainingGuard/slack/default", created_by_stack=True)
OWN_SECRET = WebhookSecret("vision", "teams/vision/slack", created_by_stack=False)


def client(service: str) -> Any:
    return boto3.client(service, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture
def stubbed() -> Iterator[Callable[[str], tuple[Any, Stubber]]]:
    made: list[Stubber] = []

    def make(service: str) -> tuple[Any, Stubber]:
        c = client(service)
        stub = Stubber(c)
        stub.activate()
        made.append(stub)
        return c, stub

    yield make
    for stub in made:
        stub.assert_no_pending_responses()
        stub.deactivate()


def aws_with(clients: dict[str, Any], region: str | None = REGION) -> Aws:
    def factory(service: str) -> Any:
        return clients[service]  # KeyError: a check asked for a client it should not use

    return Aws(region, "AWS_REGION" if region else "", factory)


def no_clients(service: str) -> Any:
    raise AssertionError(f"no {service} client may be created")


def which_all(name: str) -> str | None:
    return f"/usr/bin/{name}"


def node(version: str) -> Callable[[str], str]:
    return lambda _path: f"{version}\n"


# --- region -------------------------------------------------------------------------------------


def test_the_region_comes_from_the_variables_the_cdk_cli_reads_in_its_order() -> None:
    assert preflight.resolve_region({"AWS_DEFAULT_REGION": "us-west-2", "AWS_REGION": REGION}, "ap-south-1") == (
        REGION,
        "AWS_REGION",
    )
    assert preflight.resolve_region({"AWS_DEFAULT_REGION": "us-west-2"}, "ap-south-1") == (
        "us-west-2",
        "AWS_DEFAULT_REGION",
    )
    assert preflight.resolve_region({"AWS_PROFILE": "ml-prod"}, "ap-south-1") == ("ap-south-1", "profile ml-prod")
    assert preflight.resolve_region({}, None) == (None, "")


# --- credentials --------------------------------------------------------------------------------


def test_credentials_ok_names_the_account_the_identity_and_the_region(stubbed) -> None:
    sts, stub = stubbed("sts")
    stub.add_response("get_caller_identity", {"Account": ACCOUNT, "Arn": ARN, "UserId": "AIDAEXAMPLE"}, {})
    check = preflight.check_credentials(aws_with({"sts": sts}))
    assert check.status == OK
    assert check.message == f"account {ACCOUNT} as {ARN}, region {REGION} (from AWS_REGION)"


def test_no_region_fails_with_the_fix_and_calls_nothing() -> None:
    check = preflight.check_credentials(Aws(None, "", no_clients))
    assert check.status == FAIL
    assert "us-east-1" in check.message  # what the CDK CLI would do instead
    assert "export AWS_REGION=" in check.fix
    assert "aws configure set region" in check.fix


def test_no_region_and_no_credentials_are_both_reported_with_both_fixes() -> None:
    check = preflight.check_credentials(Aws(None, "", no_clients, has_credentials=lambda: False))
    assert (check.status, check.message) == (FAIL, "no AWS credentials found and no AWS region set")
    assert "AWS_PROFILE=NAME" in check.fix
    assert "export AWS_REGION=" in check.fix

    # credentials that cannot be used: said, never a traceback
    def partial() -> bool:
        raise PartialCredentialsError(provider="env", cred_var="AWS_SECRET_ACCESS_KEY")

    check = preflight.check_credentials(Aws(None, "", no_clients, has_credentials=partial))
    assert check.status == FAIL
    assert check.message.startswith("no AWS region set, and cannot use the credentials: Partial credentials found")
    assert "export AWS_REGION=" in check.fix
    # credentials found (or not asked): the region alone is missing
    assert preflight.check_credentials(Aws(None, "", no_clients, has_credentials=lambda: True)).message.startswith(
        "no AWS region set: "
    )


def test_connect_asks_boto3s_chain_for_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance metadata probe: nothing leaves the process
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    aws = preflight.connect({})
    assert aws.has_credentials is not None
    assert aws.has_credentials() is False
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    assert preflight.connect({}).has_credentials() is True  # type: ignore[misc]


def test_no_credentials_fails_with_the_cdk_hint() -> None:
    class NoCredentials:
        def get_caller_identity(self) -> Any:
            raise NoCredentialsError

    check = preflight.check_credentials(aws_with({"sts": NoCredentials()}))
    assert check.status == FAIL
    assert check.message == f"no AWS credentials found (region {REGION})"
    assert "Unable to resolve AWS account to use" in check.fix
    assert "AWS_PROFILE=" in check.fix
    assert "aws configure" in check.fix


@pytest.mark.parametrize(
    "error",
    [
        EndpointConnectionError(endpoint_url="https://sts.eu-west-1.amazonaws.com/"),
        ConnectTimeoutError(endpoint_url="https://sts.eu-west-1.amazonaws.com/"),
        ReadTimeoutError(endpoint_url="https://sts.eu-west-1.amazonaws.com/"),
    ],
)
def test_no_network_says_the_network_not_the_credentials(error: Exception) -> None:
    class Unreachable:
        def get_caller_identity(self) -> Any:
            raise error

    check = preflight.check_credentials(aws_with({"sts": Unreachable()}))
    assert check.status == FAIL
    assert check.message.startswith("the network is unreachable: ")
    assert "network connection" in check.fix
    assert "credentials" not in check.fix
    assert "Unable to resolve AWS account" not in check.fix


def test_refused_credentials_fail_with_the_error_code(stubbed) -> None:
    sts, stub = stubbed("sts")
    stub.add_client_error("get_caller_identity", service_error_code="ExpiredToken", http_status_code=403)
    check = preflight.check_credentials(aws_with({"sts": sts}))
    assert check.status == FAIL
    assert check.message == "the credentials were refused: ExpiredToken"


def test_a_missing_profile_fails_without_calling_aws() -> None:
    check = preflight.check_credentials(
        Aws(None, "", no_clients, problem="The config profile (nope) could not be found")
    )
    assert check.status == FAIL
    assert check.message == "The config profile (nope) could not be found"


# --- Powertools layer parameter -----------------------------------------------------------------


def test_the_layer_parameter_is_read_by_its_exact_name(stubbed) -> None:
    ssm, stub = stubbed("ssm")
    stub.add_response(
        "get_parameter",
        {"Parameter": {"Name": PARAMETER, "Type": "String", "Value": LAYER_ARN}},
        {"Name": PARAMETER},
    )
    check = preflight.check_powertools_layer(ssm, REGION, PARAMETER)
    assert check.status == OK
    assert check.message == f"{PARAMETER} in {REGION} -> {LAYER_ARN}"


def test_a_region_without_the_layer_fails_naming_region_parameter_and_fix(stubbed) -> None:
    ssm, stub = stubbed("ssm")
    stub.add_client_error("get_parameter", service_error_code="ParameterNotFound", http_status_code=400)
    check = preflight.check_powertools_layer(ssm, "me-central-1", PARAMETER)
    assert check.status == FAIL
    assert check.message.startswith(f"{PARAMETER} does not exist in me-central-1")
    assert preflight.POWERTOOLS_LAYERS_PAGE in check.fix
    assert "powertools_layer_arn" in check.fix


def test_a_configured_layer_arn_replaces_the_parameter_and_must_be_in_the_deploy_region() -> None:
    arn = "arn:aws:lambda:me-central-1:123456789012:layer:powertools-python:3"
    assert preflight.check_layer_arn(arn, "me-central-1").status == OK
    elsewhere = preflight.check_layer_arn(arn, "eu-west-1")
    assert elsewhere.status == FAIL
    assert "is in me-central-1, the deploy goes to eu-west-1" in elsewhere.message


def test_an_unreadable_layer_parameter_is_a_warning(stubbed) -> None:
    ssm, stub = stubbed("ssm")
    stub.add_client_error("get_parameter", service_error_code="AccessDeniedException", http_status_code=400)
    check = preflight.check_powertools_layer(ssm, REGION, PARAMETER)
    assert check.status == WARN
    assert check.message.endswith("AccessDeniedException")


@pytest.mark.parametrize(("region", "partition"), [("cn-north-1", "aws-cn"), ("us-gov-east-1", "aws-us-gov")])
def test_a_region_of_another_partition_fails_instead_of_the_layer_check(stubbed, region: str, partition: str) -> None:
    sts, sts_stub = stubbed("sts")
    sts_stub.add_response("get_caller_identity", {"Account": ACCOUNT, "Arn": ARN, "UserId": "AIDAEXAMPLE"}, {})
    lam, lam_stub = stubbed("lambda")
    lam_stub.add_response("get_account_settings", settings(1000, 1000), {})
    # no ssm client: neither the layer parameter nor a layer ARN can make the guard run there
    aws = Aws(region, "AWS_REGION", {"sts": sts, "lambda": lam}.__getitem__)
    no_webhooks = Plan(source="cdk.json", layer_parameter=PARAMETER, secrets=())
    checks = preflight.run_checks(no_webhooks, aws, which=which_all, version_of=node("v22.0.0"))
    [wrong] = [c for c in checks if c.name == "partition"]
    assert wrong.status == FAIL
    assert f"region {region} is in the {partition} partition" in wrong.message
    assert "deploy to a region of the aws partition" in wrong.fix
    assert "powertools-layer" not in [c.name for c in checks]
    assert preflight.exit_code(checks) == 1


def test_aws_partition_regions_pass_the_partition_check() -> None:
    assert preflight.check_partition("eu-west-1") is None
    assert preflight.check_partition("me-central-1") is None  # the layer check says what is missing there


# --- Lambda concurrency -------------------------------------------------------------------------


def settings(total: int, unreserved: int) -> dict[str, Any]:
    return {"AccountLimit": {"ConcurrentExecutions": total, "UnreservedConcurrentExecutions": unreserved}}


def test_the_default_account_concurrency_is_ok(stubbed) -> None:
    lam, stub = stubbed("lambda")
    stub.add_response("get_account_settings", settings(1000, 1000), {})
    check = preflight.check_concurrency(lam, REGION)
    assert check.status == OK
    assert check.message == f"account quota 1000 concurrent executions, 1000 unreserved, in {REGION}"


def test_a_new_account_quota_of_10_warns_with_the_service_quotas_link(stubbed) -> None:
    lam, stub = stubbed("lambda")
    stub.add_response("get_account_settings", settings(10, 10), {})
    check = preflight.check_concurrency(lam, REGION)
    assert check.status == WARN
    assert "account quota 10 concurrent executions, 10 unreserved" in check.message
    assert check.fix.endswith(
        f"https://{REGION}.console.aws.amazon.com/servicequotas/home/services/lambda/quotas/L-B99A9384"
    )


@pytest.mark.parametrize(("unreserved", "status"), [(99, WARN), (100, OK)])
def test_the_warning_threshold_is_lambdas_minimum_unreserved_pool(stubbed, unreserved: int, status: str) -> None:
    lam, stub = stubbed("lambda")
    stub.add_response("get_account_settings", settings(1000, unreserved), {})
    assert preflight.check_concurrency(lam, REGION).status == status


def test_unreadable_account_settings_are_a_warning(stubbed) -> None:
    lam, stub = stubbed("lambda")
    stub.add_client_error("get_account_settings", service_error_code="AccessDeniedException", http_status_code=403)
    check = preflight.check_concurrency(lam, REGION)
    assert check.status == WARN
    assert check.message.endswith("AccessDeniedException")


# --- Slack webhook secrets ----------------------------------------------------------------------


def secret_value(stub: Stubber, secret: WebhookSecret, value: str) -> None:
    stub.add_response(
        "get_secret_value",
        {"ARN": f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{secret.secret_id}-AbCdEf", "SecretString": value},
        {"SecretId": secret.secret_id},
    )


def test_a_stack_secret_that_does_not_exist_yet_says_what_to_do_after_the_deploy(stubbed) -> None:
    sm, stub = stubbed("secretsmanager")
    stub.add_client_error("get_secret_value", service_error_code="ResourceNotFoundException", http_status_code=400)
    check = preflight.check_slack_secret(sm, REGION, STACK_SECRET)
    assert check.name == "slack-secret:default"
    assert check.status == WARN
    assert "this deploy creates it" in check.message
    assert check.fix == (
        "after the deploy, put the webhook URL in it: aws secretsmanager put-secret-value "
        f"--region {REGION} --secret-id TrainingGuard/slack/default "
        "--secret-string 'https://hooks.slack.com/services/...'"
    )


def test_a_configured_secret_that_does_not_exist_is_not_created_by_the_stack(stubbed) -> None:
    sm, stub = stubbed("secretsmanager")
    stub.add_client_error("get_secret_value", service_error_code="ResourceNotFoundException", http_status_code=400)
    check = preflight.check_slack_secret(sm, REGION, OWN_SECRET)
    assert check.status == WARN
    assert "the stack does not create it" in check.message
    assert "aws secretsmanager create-secret" in check.fix
    assert "--name teams/vision/slack" in check.fix


def test_a_secret_still_holding_the_placeholder_warns_with_the_put_command(stubbed) -> None:
    sm, stub = stubbed("secretsmanager")
    secret_value(stub, STACK_SECRET, contract.WEBHOOK_PLACEHOLDER)
    check = preflight.check_slack_secret(sm, REGION, STACK_SECRET)
    assert check.status == WARN
    assert "still holds the placeholder" in check.message
    assert "aws secretsmanager put-secret-value" in check.fix


APP_SIGNING = WebhookSecret("app-signing-secret", "TrainingGuard/slack/signing", True, credentials.SIGNING_SECRET)
APP_BOT = WebhookSecret("app-bot-token", "TrainingGuard/slack/bot", True, credentials.BOT_TOKEN)


@pytest.mark.parametrize(
    "value", [contract.SIGNING_SECRET_PLACEHOLDER, " ", credentials.SLACK_EXAMPLE_SIGNING_SECRET, "short"]
)
def test_an_app_signing_secret_that_is_no_credential_warns_that_clicks_are_refused(stubbed, value: str) -> None:
    sm, stub = stubbed("secretsmanager")
    secret_value(stub, APP_SIGNING, value)
    check = preflight.check_slack_secret(sm, REGION, APP_SIGNING)
    assert (check.name, check.status) == ("slack-secret:app-signing-secret", WARN)
    assert check.message.endswith("every Slack click is refused with HTTP 503 until it is set")
    assert check.fix == (
        f"put it in: aws secretsmanager put-secret-value --region {REGION} --secret-id TrainingGuard/slack/signing "
        "--secret-string '<signing secret>'"
    )
    assert value.strip() == "" or value not in check.message + check.fix


def test_app_secrets_holding_credentials_are_ok(stubbed) -> None:
    sm, stub = stubbed("secretsmanager")
    secret_value(stub, APP_SIGNING, secrets.token_hex(16))
    secret_value(stub, APP_BOT, f"{credentials.BOT_TOKEN_PREFIX}{secrets.token_hex(12)}")
    assert preflight.check_slack_secret(sm, REGION, APP_SIGNING).status == OK
    assert preflight.check_slack_secret(sm, REGION, APP_BOT).status == OK


def test_a_secret_holding_a_url_is_ok_and_the_url_is_not_reported(stubbed) -> None:
    sm, stub = stubbed("secretsmanager")
    secret_value(stub, STACK_SECRET, WEBHOOK_URL)
    check = preflight.check_slack_secret(sm, REGION, STACK_SECRET)
    assert check == Check("slack-secret:default", OK, "TrainingGuard/slack/default holds a webhook URL")


def test_a_secret_holding_something_else_warns_without_showing_it(stubbed) -> None:
    sm, stub = stubbed("secretsmanager")
    secret_value(stub, OWN_SECRET, NOT_A_URL)
    check = preflight.check_slack_secret(sm, REGION, OWN_SECRET)
    assert check.status == WARN
    assert check.message == "teams/vision/slack is not an https:// URL"
    assert NOT_A_URL not in check.fix


@pytest.mark.parametrize("code", ["AccessDeniedException", "DecryptionFailure", "InvalidRequestException"])
def test_an_unreadable_secret_is_a_warning_naming_the_error(stubbed, code: str) -> None:
    sm, stub = stubbed("secretsmanager")
    stub.add_client_error("get_secret_value", service_error_code=code, http_status_code=400)
    check = preflight.check_slack_secret(sm, REGION, STACK_SECRET)
    assert check.status == WARN
    assert code in check.message


# --- workstation --------------------------------------------------------------------------------


def test_the_aws_cli_missing_is_a_warning() -> None:
    assert preflight.check_aws_cli(lambda _name: None).status == WARN
    assert preflight.check_aws_cli(which_all) == Check("aws-cli", OK, "/usr/bin/aws")


@pytest.mark.parametrize(
    ("version", "status"),
    [("v20.20.2", FAIL), ("v18.20.0", FAIL), ("v22.0.0", OK), ("v24.3.1", OK), ("not a version", WARN)],
)
def test_node_22_or_newer_is_required(version: str, status: str) -> None:
    check = preflight.check_node(which_all, node(version))
    assert check.status == status
    if status == FAIL:
        assert check.fix.startswith("install Node.js 22 or newer")
        assert preflight.NODE_VERSIONS_PAGE in check.fix


def test_node_missing_fails() -> None:
    check = preflight.check_node(lambda _name: None, node("v22.0.0"))
    assert check.status == FAIL
    assert check.message == "Node.js is not on PATH: the CDK CLI runs on it"


# --- all together -------------------------------------------------------------------------------

PLAN = Plan("cdk.json context 'training-guard', stack TrainingGuard", PARAMETER, (STACK_SECRET, OWN_SECRET))


def healthy_account(stubbed, *, own_secret_value: str | None = WEBHOOK_URL) -> Aws:
    """STS, SSM and Lambda answering as in a ready account; Secrets Manager only if a value is given."""
    sts, sts_stub = stubbed("sts")
    sts_stub.add_response("get_caller_identity", {"Account": ACCOUNT, "Arn": ARN, "UserId": "AIDAEXAMPLE"}, {})
    ssm, ssm_stub = stubbed("ssm")
    ssm_stub.add_response("get_parameter", {"Parameter": {"Name": PARAMETER, "Value": LAYER_ARN}}, {"Name": PARAMETER})
    lam, lam_stub = stubbed("lambda")
    lam_stub.add_response("get_account_settings", settings(1000, 1000), {})
    clients = {"sts": sts, "ssm": ssm, "lambda": lam}
    if own_secret_value is not None:
        sm, sm_stub = stubbed("secretsmanager")
        secret_value(sm_stub, STACK_SECRET, WEBHOOK_URL)
        secret_value(sm_stub, OWN_SECRET, own_secret_value)
        clients["secretsmanager"] = sm
    return aws_with(clients)


def test_the_checks_run_in_order_and_a_healthy_account_exits_0(stubbed) -> None:
    checks = preflight.run_checks(PLAN, healthy_account(stubbed), which=which_all, version_of=node("v22.12.0"))
    assert [c.name for c in checks] == [
        "configuration",
        "credentials",
        "powertools-layer",
        "lambda-concurrency",
        "slack-secret:default",
        "slack-secret:vision",
        "aws-cli",
        "nodejs",
    ]
    assert {c.status for c in checks} == {OK}
    assert preflight.exit_code(checks) == 0
    assert preflight.render(checks).splitlines()[-1] == "preflight: ready to deploy (0 warning(s))"


def test_warnings_alone_exit_0_and_any_failure_exits_1(stubbed) -> None:
    checks = preflight.run_checks(PLAN, healthy_account(stubbed), which=lambda _n: None, version_of=node("v22.0.0"))
    # no `aws` and no `node` on PATH: the CLI is a warning, Node.js a failure
    assert [(c.name, c.status) for c in checks[-2:]] == [("aws-cli", WARN), ("nodejs", FAIL)]
    assert preflight.exit_code(checks) == 1
    assert preflight.exit_code([c for c in checks if c.name != "nodejs"]) == 0


def test_without_a_region_no_aws_call_is_made_and_the_run_fails() -> None:
    checks = preflight.run_checks(PLAN, Aws(None, "", no_clients), which=which_all, version_of=node("v22.0.0"))
    by_name = {c.name: c for c in checks}
    assert by_name["credentials"].status == FAIL
    for name in ("powertools-layer", "lambda-concurrency", "slack-secrets"):
        assert by_name[name] == Check(name, WARN, "not checked: needs working credentials and a region")
    assert preflight.exit_code(checks) == 1


def test_a_configuration_error_fails_and_skips_what_needs_the_configuration(stubbed) -> None:
    sts, sts_stub = stubbed("sts")
    sts_stub.add_response("get_caller_identity", {"Account": ACCOUNT, "Arn": ARN, "UserId": "AIDAEXAMPLE"}, {})
    lam, lam_stub = stubbed("lambda")
    lam_stub.add_response("get_account_settings", settings(1000, 1000), {})
    bad = Check("configuration", FAIL, "rules.actions.X: must be one of stop, notify, ignore")
    checks = preflight.run_checks(
        bad, aws_with({"sts": sts, "lambda": lam}), which=which_all, version_of=node("v22.0.0")
    )
    assert checks[0] == bad
    assert [c.name for c in checks if c.message.startswith("not checked")] == ["powertools-layer", "slack-secrets"]
    assert preflight.exit_code(checks) == 1


def test_no_webhook_configured_is_one_ok_line_and_no_secret_is_read(stubbed) -> None:
    aws = healthy_account(stubbed, own_secret_value=None)  # no Secrets Manager client to hand out
    checks = preflight.run_checks(Plan(PLAN.source, PARAMETER, ()), aws, which=which_all, version_of=node("v22.0.0"))
    assert Check("slack-secrets", OK, "no Slack webhooks configured") in checks


@pytest.mark.parametrize("value", [WEBHOOK_URL, NOT_A_URL])
def test_no_secret_value_is_ever_printed(stubbed, value: str) -> None:
    checks = preflight.run_checks(
        PLAN, healthy_account(stubbed, own_secret_value=value), which=which_all, version_of=node("v22.0.0")
    )
    text, document = preflight.render(checks), preflight.as_json(checks)
    for secret in (WEBHOOK_URL, NOT_A_URL, "very-secret-token", "hunter2"):
        assert secret not in text
        assert secret not in document


def test_each_check_is_one_line_with_its_fix() -> None:
    checks = [
        Check("credentials", FAIL, "no AWS region set", "export AWS_REGION=<region>"),
        Check("nodejs", OK, "Node.js v22.0.0", "never shown for ok"),
    ]
    lines = preflight.render(checks).splitlines()
    assert lines == [
        "FAIL  credentials  no AWS region set -- fix: export AWS_REGION=<region>",
        "ok    nodejs       Node.js v22.0.0",
        "preflight: 1 failed, 0 warning(s): fix the failures before deploying",
    ]


# --- the command --------------------------------------------------------------------------------


def test_the_command_prints_json_and_exits_1_on_a_failure(monkeypatch, capsys) -> None:
    seen: list[str | None] = []

    def fake_gather(config_file: str | None) -> list[Check]:
        seen.append(config_file)
        return [Check("credentials", FAIL, "no AWS region set", "export AWS_REGION=<region>")]

    monkeypatch.setattr(preflight, "gather", fake_gather)
    assert cli.main(["preflight", "--json", "--config", "configs/prod.json"]) == 1
    assert seen == ["configs/prod.json"]
    document = json.loads(capsys.readouterr().out)
    assert document == {
        "exit_code": 1,
        "checks": [
            {
                "name": "credentials",
                "status": "fail",
                "message": "no AWS region set",
                "fix": "export AWS_REGION=<region>",
            }
        ],
    }


def test_the_command_exits_0_when_nothing_fails(monkeypatch, capsys) -> None:
    monkeypatch.setattr(preflight, "gather", lambda _config: [Check("aws-cli", WARN, "not on PATH")])
    assert cli.main(["preflight"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "WARN  aws-cli  not on PATH"


# --- the organization's StackSet: who may create it ------------------------------------------------------------

HUB = "111122223333"
MANAGEMENT = "999988887777"


def organization_answers(stubbed, management: str = MANAGEMENT) -> tuple[Any, Stubber]:
    org, stub = stubbed("organizations")
    stub.add_response(
        "describe_organization", {"Organization": {"Id": "o-a1b2c3d4e5", "MasterAccountId": management}}, {}
    )
    return org, stub


def trusted_access(stubbed, call_as: str, status: str = "ENABLED") -> Any:
    cfn, stub = stubbed("cloudformation")
    stub.add_response("describe_organizations_access", {"Status": status}, {"CallAs": call_as})
    return cfn


def test_call_as_self_from_a_hub_that_is_not_the_management_account_fails_with_the_delegated_admin_fix(
    stubbed,
) -> None:
    """The example as it shipped: CloudFormation refuses SELF from any account but the management account."""
    org, _ = organization_answers(stubbed)
    cfn, _ = stubbed("cloudformation")  # not asked: the first failure decides
    [check] = preflight.check_stack_set(org, cfn, HUB, preflight.StackSetPlan(HUB, "SELF"))
    assert check.status == FAIL
    assert f"only from the management account ({MANAGEMENT}); the hub {HUB} is not it" in check.message
    assert 'stack_set_call_as to "DELEGATED_ADMIN"' in check.fix
    assert (
        "aws organizations register-delegated-administrator --service-principal "
        f"member.org.stacksets.cloudformation.amazonaws.com --account-id {HUB}"
    ) in check.fix


def test_a_registered_delegated_administrator_with_trusted_access_passes(stubbed) -> None:
    org, stub = organization_answers(stubbed)
    stub.add_response(
        "list_delegated_administrators",
        {"DelegatedAdministrators": [{"Id": HUB}]},
        {"ServicePrincipal": "member.org.stacksets.cloudformation.amazonaws.com"},
    )
    cfn = trusted_access(stubbed, "DELEGATED_ADMIN")
    checks = preflight.check_stack_set(org, cfn, HUB, preflight.StackSetPlan(HUB, "DELEGATED_ADMIN"))
    assert [(c.name, c.status) for c in checks] == [("stack-set-delegated-admin", OK), ("stack-set-trusted-access", OK)]


def test_delegated_admin_not_registered_fails_with_the_register_command(stubbed) -> None:
    org, stub = organization_answers(stubbed)
    stub.add_client_error("list_delegated_administrators", service_error_code="AccessDeniedException")
    cfn = trusted_access(stubbed, "DELEGATED_ADMIN")
    checks = preflight.check_stack_set(org, cfn, HUB, preflight.StackSetPlan(HUB, "DELEGATED_ADMIN"))
    assert checks[0].status == FAIL
    assert "register-delegated-administrator" in checks[0].fix


def test_delegated_admin_from_the_management_account_fails_naming_self(stubbed) -> None:
    org, _ = organization_answers(stubbed, management=HUB)
    cfn, _ = stubbed("cloudformation")
    [check] = preflight.check_stack_set(org, cfn, HUB, preflight.StackSetPlan(HUB, "DELEGATED_ADMIN"))
    assert (check.status, check.fix) == (FAIL, 'set organization.stack_set_call_as to "SELF"')


def test_self_from_the_management_account_needs_trusted_access(stubbed) -> None:
    org, _ = organization_answers(stubbed, management=HUB)
    cfn = trusted_access(stubbed, "SELF", status="DISABLED")
    [check] = preflight.check_stack_set(org, cfn, HUB, preflight.StackSetPlan(HUB, "SELF"))
    assert check.status == FAIL
    assert check.fix == "from the management account: aws cloudformation activate-organizations-access"


def test_credentials_of_another_account_than_the_hub_fail_before_asking_organizations(stubbed) -> None:
    org, _ = stubbed("organizations")
    cfn, _ = stubbed("cloudformation")
    [check] = preflight.check_stack_set(org, cfn, "444455556666", preflight.StackSetPlan(HUB, "DELEGATED_ADMIN"))
    assert check.status == FAIL
    assert "the configuration's hub_account is 111122223333" in check.message


@pytest.mark.infra
def test_the_organization_example_plans_a_stack_set_created_by_a_delegated_administrator() -> None:
    plan = preflight.load_plan(str(ROOT / "configs" / "organization.json"), ROOT)
    assert isinstance(plan, Plan)
    assert plan.stack_set == preflight.StackSetPlan("111122223333", "DELEGATED_ADMIN")


def test_a_webhook_secret_holding_the_docs_example_url_is_not_taken_for_a_url(stubbed) -> None:
    sm, stub = stubbed("secretsmanager")
    secret_value(stub, STACK_SECRET, "https://hooks.slack.com/services/T.../B.../...")
    check = preflight.check_slack_secret(sm, REGION, STACK_SECRET)
    assert check.status == WARN
    assert check.message == "TrainingGuard/slack/default holds an example with parts left out, not a webhook URL"
