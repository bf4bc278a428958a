"""`training-guard preflight`: what `make deploy` checks in the account before `cdk deploy` runs.

moto checks none of this, and a real deploy either fails with an opaque CloudFormation error or
leaves a guard that silently does nothing. Each check is a function over an injected boto3 client
(or an injected `which` / version reader) and returns one `Check`; `run_checks` puts them in
order; `gather` is the only code that builds real clients and reads the CDK app's configuration.
A secret's value is read only to compare it, and never leaves `check_slack_secret`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final, Literal

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError, NoCredentialsError, PartialCredentialsError
from botocore.exceptions import ConnectionError as AwsConnectionError

from infra.partitions import SUPPORTED_PARTITIONS, partition_of
from training_guard import contract
from training_guard.config.model import ConfigError
from training_guard.domain.credentials import (
    BOT_TOKEN,
    PROBLEMS,
    SIGNING_SECRET,
    WEBHOOK_URL,
    WORDS,
    put_secret_command,
)

Status = Literal["ok", "warn", "fail"]
OK: Final = "ok"
WARN: Final = "warn"
FAIL: Final = "fail"

EXIT_OK = 0
EXIT_FAILED = 1

# The CDK CLI takes the region from these variables, in this order, then from the profile; with
# none it deploys to us-east-1 without saying so (AwsCliCompatible.region()):
# https://github.com/aws/aws-cdk-cli/blob/main/packages/@aws-cdk/toolkit-lib/lib/api/aws-auth/awscli-compatible.ts
REGION_VARIABLES: Final = ("AWS_REGION", "AMAZON_REGION", "AWS_DEFAULT_REGION", "AMAZON_DEFAULT_REGION")

# Powertools publishes its layer, and the SSM parameters naming it, region by region; the regions
# and parameter names are listed at
# https://docs.aws.amazon.com/powertools/python/latest/getting-started/install/
POWERTOOLS_LAYERS_PAGE: Final = "https://docs.aws.amazon.com/powertools/python/latest/getting-started/install/"

# Lambda keeps at least 100 executions unreserved for functions without reserved concurrency
# ("reserve up to the Unreserved account concurrency value ... minus 100"):
# https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html
# Below that the account runs on a reduced quota (default 1,000; "New AWS accounts have reduced
# concurrency ... quotas"): https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html
MIN_UNRESERVED_CONCURRENCY: Final = 100
DEFAULT_ACCOUNT_CONCURRENCY: Final = 1000
# Service Quotas code of Lambda "Concurrent executions" (as used with `aws service-quotas
# request-service-quota-increase --service-code lambda --quota-code L-B99A9384`:
# https://briankeating.net/blog/2025-03-07-understanding-aws-lambda-concurrent-execution-quota)
LAMBDA_CONCURRENCY_QUOTA_CODE: Final = "L-B99A9384"

# The AWS CDK supports Node.js 22.x and 24.x; its support for 20.x ended 2026-10-30:
# https://docs.aws.amazon.com/cdk/v2/guide/node-versions.html
MIN_NODE_MAJOR: Final = 22
NODE_VERSIONS_PAGE: Final = "https://docs.aws.amazon.com/cdk/v2/guide/node-versions.html"
AWS_CLI_INSTALL_PAGE: Final = "https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html"

WEBHOOK_URL_EXAMPLE: Final = "https://hooks.slack.com/services/..."

# A service-managed StackSet is created with CallAs SELF from the organization's management account, or with
# DELEGATED_ADMIN from an account the management account registered as a delegated administrator for StackSets
# (CreateStackSet, CallAs: https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_CreateStackSet.html;
# https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/stacksets-orgs-delegated-admin.html), and only once
# trusted access with Organizations is activated
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/stacksets-orgs-activate-trusted-access.html;
# DescribeOrganizationsAccess: https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DescribeOrganizationsAccess.html).
STACK_SETS_SERVICE_PRINCIPAL: Final = "member.org.stacksets.cloudformation.amazonaws.com"
STACK_SETS_DELEGATED_ADMIN_PAGE: Final = (
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/stacksets-orgs-delegated-admin.html"
)


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    message: str
    fix: str = ""


@dataclass(frozen=True)
class WebhookSecret:
    webhook: str  # the webhook's name, or the app's secret: "app-signing-secret", "app-bot-token"
    secret_id: str
    created_by_stack: bool  # False: the configuration names a secret the operator manages
    kind: str = WEBHOOK_URL  # what it must hold (credentials.py judges it)


@dataclass(frozen=True)
class StackSetPlan:
    """The service-managed StackSet the hub's stack creates (organization.organizational_units not empty)."""

    hub_account: str
    call_as: str  # organization.stack_set_call_as: SELF or DELEGATED_ADMIN


@dataclass(frozen=True)
class Plan:
    """What `cdk deploy` will deploy, as far as the checks need it."""

    source: str
    layer_parameter: str
    secrets: tuple[WebhookSecret, ...]
    layer_arn: str | None = None  # the configuration's powertools_layer_arn, used instead of the parameter
    stack_set: StackSetPlan | None = None  # the organization's StackSet, when the hub's stack creates one


@dataclass(frozen=True)
class Aws:
    """Access to the account: the region the CDK CLI would use and a client factory for it."""

    region: str | None
    region_source: str
    client: Callable[[str], Any]
    problem: str = ""  # e.g. the named profile does not exist
    # Whether boto3's provider chain finds credentials at all, asked only when no call can tell (no region)
    has_credentials: Callable[[], bool] | None = None


def resolve_region(environ: Mapping[str, str], profile_region: str | None) -> tuple[str | None, str]:
    """The region `cdk deploy` would use, and where it came from (None: the CDK would pick us-east-1)."""
    for variable in REGION_VARIABLES:
        if environ.get(variable):
            return environ[variable], variable
    if profile_region:
        profile = environ.get("AWS_PROFILE") or environ.get("AWS_DEFAULT_PROFILE") or "default"
        return profile_region, f"profile {profile}"
    return None, ""


# --- the checks ---------------------------------------------------------------------------------

_CREDENTIALS_FIX = (
    "`cdk deploy` would stop with 'Unable to resolve AWS account to use': choose credentials with "
    "AWS_PROFILE=NAME (set one up with `aws configure --profile NAME`, or `aws sso login --profile NAME`)"
)


def check_credentials(aws: Aws) -> Check:
    """STS GetCallerIdentity (needs no permission): the account the deploy would go to."""
    # https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html
    name = "credentials"
    if aws.problem:
        return Check(name, FAIL, aws.problem, _CREDENTIALS_FIX)
    if not aws.region:
        region_fix = (
            "set the region the guard belongs in: export AWS_REGION=<region> (or `region = <region>` in "
            "the profile: `aws configure set region <region> --profile NAME`)"
        )
        try:
            found = aws.has_credentials() if aws.has_credentials is not None else True
        except BotoCoreError as exc:  # partial keys, a failing credential_process, ...: as the call below says it
            return Check(
                name,
                FAIL,
                f"no AWS region set, and cannot use the credentials: {exc}",
                f"{_CREDENTIALS_FIX}; and {region_fix}",
            )
        if not found:  # both missing: both said at once
            return Check(
                name,
                FAIL,
                "no AWS credentials found and no AWS region set",
                f"{_CREDENTIALS_FIX}; and {region_fix}",
            )
        return Check(name, FAIL, "no AWS region set: `cdk deploy` would quietly deploy to us-east-1", region_fix)
    try:
        identity = aws.client("sts").get_caller_identity()
    except (NoCredentialsError, PartialCredentialsError):
        return Check(name, FAIL, f"no AWS credentials found (region {aws.region})", _CREDENTIALS_FIX)
    except ClientError as exc:
        return Check(name, FAIL, f"the credentials were refused: {_error_code(exc)}", _CREDENTIALS_FIX)
    except (AwsConnectionError, HTTPClientError) as exc:  # the credentials were never tried: nothing says they are bad
        return Check(
            name,
            FAIL,
            f"the network is unreachable: {exc}",
            "check the network connection, a proxy (HTTPS_PROXY) or AWS_ENDPOINT_URL, then run preflight again",
        )
    except BotoCoreError as exc:  # expired SSO token, a broken profile, ...
        return Check(name, FAIL, f"cannot use the credentials: {exc}", _CREDENTIALS_FIX)
    return Check(
        name,
        OK,
        f"account {identity['Account']} as {identity['Arn']}, region {aws.region} (from {aws.region_source})",
    )


def check_powertools_layer(ssm: Any, region: str, parameter: str) -> Check:
    """SSM GetParameter on the exact name the stack resolves at deploy time."""
    name = "powertools-layer"
    try:
        value = ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
    except ClientError as exc:
        # https://docs.aws.amazon.com/botocore/latest/reference/services/ssm/client/exceptions/ParameterNotFound.html
        if _error_code(exc) == "ParameterNotFound":
            return Check(
                name,
                FAIL,
                f"{parameter} does not exist in {region}: Powertools does not publish this layer version "
                "there, and CloudFormation would fail the deploy when it resolves the parameter",
                f"deploy to a region Powertools publishes to ({POWERTOOLS_LAYERS_PAGE}), or name a Powertools "
                f"layer version in {region} with the configuration's powertools_layer_arn",
            )
        return Check(name, WARN, f"could not read {parameter} in {region}: {_error_code(exc)}")
    return Check(name, OK, f"{parameter} in {region} -> {value}")


def check_partition(region: str) -> Check | None:
    """A failure when the region is in a partition the guard cannot run in (`make synth` refuses it too)."""
    partition = partition_of(region)
    if partition is None or partition in SUPPORTED_PARTITIONS:
        return None
    return Check(
        "partition",
        FAIL,
        f"region {region} is in the {partition} partition: the guard runs only in the aws partition (its Price "
        "List client signs in us-east-1, and the Powertools layer is not published there)",
        "deploy to a region of the aws partition (AWS_REGION=<region>, e.g. eu-west-1)",
    )


def check_layer_arn(arn: str, region: str) -> Check:
    """A configured layer must live in the region of the functions that use it."""
    name = "powertools-layer"
    layer_region = arn.split(":")[3]
    if layer_region != region:
        return Check(
            name,
            FAIL,
            f"powertools_layer_arn is in {layer_region}, the deploy goes to {region}: Lambda takes layers of its "
            "own region only",
            f"publish the Powertools layer in {region} and name that version",
        )
    return Check(name, OK, f"powertools_layer_arn {arn} (the configuration's, instead of the SSM parameter)")


def check_concurrency(lambda_client: Any, region: str) -> Check:
    """Lambda GetAccountSettings: the guard's functions share the account's unreserved executions."""
    # https://docs.aws.amazon.com/lambda/latest/api/API_GetAccountSettings.html
    name = "lambda-concurrency"
    try:
        limit = lambda_client.get_account_settings()["AccountLimit"]
    except ClientError as exc:
        return Check(name, WARN, f"could not read the account's Lambda settings in {region}: {_error_code(exc)}")
    total = int(limit["ConcurrentExecutions"])
    unreserved = int(limit["UnreservedConcurrentExecutions"])
    summary = f"account quota {total} concurrent executions, {unreserved} unreserved, in {region}"
    if unreserved >= MIN_UNRESERVED_CONCURRENCY:
        return Check(name, OK, summary)
    return Check(
        name,
        WARN,
        f"{summary}: the guard's functions share these with every other function, so a burst of job "
        f"events or a sweep can be throttled (the default quota is {DEFAULT_ACCOUNT_CONCURRENCY:,}; new "
        "accounts start lower and AWS raises it with use)",
        "request a higher 'Concurrent executions' quota: "
        f"https://{region}.console.aws.amazon.com/servicequotas/home/services/lambda/quotas/"
        f"{LAMBDA_CONCURRENCY_QUOTA_CODE}",
    )


# What the app's secrets cost while they hold no credential (the functions refuse them: credentials.py).
APP_SECRET_COST = {
    SIGNING_SECRET: "every Slack click is refused with HTTP 503 until it is set",
    BOT_TOKEN: "app-mode messages wait in the chat dead-letter queue until it is set",
}


def check_slack_secret(secrets: Any, region: str, secret: WebhookSecret) -> Check:
    """Secrets Manager GetSecretValue: does the webhook's secret hold a URL yet? Never reports the value."""
    # https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html
    name = f"slack-secret:{secret.webhook}"
    sid = secret.secret_id
    put = put_secret_command(sid, secret.kind, region)
    try:
        response = secrets.get_secret_value(SecretId=sid)
    except ClientError as exc:
        code = _error_code(exc)
        if code == "ResourceNotFoundException":
            if secret.created_by_stack:
                return Check(
                    name,
                    WARN,
                    f"{sid} does not exist yet: this deploy creates it holding a placeholder",
                    f"after the deploy, put the {WORDS[secret.kind]} in it: {put}",
                )
            return Check(
                name,
                WARN,
                f"{sid} (configured as secret_name) does not exist in {region}; the stack does not create it",
                f"create it: aws secretsmanager create-secret --region {region} --name {sid} "
                f"--secret-string '{WEBHOOK_URL_EXAMPLE}'",
            )
        if code == "InvalidRequestException":  # documented cause: the secret is scheduled for deletion
            return Check(
                name,
                WARN,
                f"{sid} cannot be read ({code}); a secret scheduled for deletion answers this way",
                f"if it was deleted: aws secretsmanager restore-secret --region {region} --secret-id {sid}",
            )
        return Check(name, WARN, f"could not read {sid}: {code}")
    value = response.get("SecretString")
    if secret.kind != WEBHOOK_URL:
        problem = "holds binary data" if value is None else PROBLEMS[secret.kind](value)
        if problem:
            return Check(name, WARN, f"{sid} {problem}: {APP_SECRET_COST[secret.kind]}", f"put it in: {put}")
        return Check(name, OK, f"{sid} holds a {WORDS[secret.kind]}")
    if value is None:
        return Check(name, WARN, f"{sid} holds binary data, not a webhook URL", f"put the URL as a string: {put}")
    if value == contract.WEBHOOK_PLACEHOLDER:
        return Check(
            name,
            WARN,
            f"{sid} still holds the placeholder: Slack messages wait in the chat dead-letter queue",
            f"put the webhook URL in it: {put}",
        )
    problem = PROBLEMS[WEBHOOK_URL](value)  # the notifier's own rule for a usable URL
    if problem:
        return Check(name, WARN, f"{sid} {problem}", f"put the webhook URL in it: {put}")
    return Check(name, OK, f"{sid} holds a webhook URL")


def check_stack_set(organizations: Any, cloudformation: Any, account: str, stack_set: StackSetPlan) -> list[Check]:
    """Whether CloudFormation will create the hub's service-managed StackSet from this account: the management
    account with `stack_set_call_as: SELF`, a registered delegated administrator with `DELEGATED_ADMIN`, and trusted
    access activated. Each check is one line with the command that fixes it."""
    name = "stack-set"
    register = (
        "from the management account: aws organizations register-delegated-administrator "
        f"--service-principal {STACK_SETS_SERVICE_PRINCIPAL} --account-id {account}"
    )
    checks: list[Check] = []
    if account != stack_set.hub_account:
        checks.append(
            Check(
                name,
                FAIL,
                f"these credentials are of account {account}, the configuration's hub_account is "
                f"{stack_set.hub_account}: the hub's stack (with the StackSet) goes to the hub",
                "deploy the hub with credentials of hub_account (AWS_PROFILE=...), or correct organization.hub_account",
            )
        )
        return checks
    try:
        management = organizations.describe_organization()["Organization"]["MasterAccountId"]
    except ClientError as exc:
        if _error_code(exc) == "AWSOrganizationsNotInUseException":
            return [
                Check(
                    name,
                    FAIL,
                    f"account {account} belongs to no organization: a StackSet has no OUs to deploy to",
                    "remove organization.organizational_units and deploy the member stack per account "
                    "(docs/organization.md, path 2)",
                )
            ]
        return [Check(name, WARN, f"could not read the organization: {_error_code(exc)}")]
    if stack_set.call_as == "SELF" and account != management:
        return [
            Check(
                name,
                FAIL,
                f"organization.stack_set_call_as is SELF, which CloudFormation accepts for a service-managed StackSet "
                f"only from the management account ({management}); the hub {account} is not it",
                f'set organization.stack_set_call_as to "DELEGATED_ADMIN" and register the hub, {register}; or make '
                f"the management account the hub ({STACK_SETS_DELEGATED_ADMIN_PAGE})",
            )
        ]
    if stack_set.call_as == "DELEGATED_ADMIN" and account == management:
        return [
            Check(
                name,
                FAIL,
                f"organization.stack_set_call_as is DELEGATED_ADMIN, but the hub {account} is the management account, "
                "which CloudFormation cannot register as a delegated administrator",
                'set organization.stack_set_call_as to "SELF"',
            )
        ]
    if stack_set.call_as == "DELEGATED_ADMIN":
        checks.append(_check_delegated_admin(organizations, account, register))
    checks.append(_check_trusted_access(cloudformation, stack_set.call_as))
    return checks


def _check_delegated_admin(organizations: Any, account: str, register: str) -> Check:
    name = "stack-set-delegated-admin"
    try:
        pages = organizations.get_paginator("list_delegated_administrators").paginate(
            ServicePrincipal=STACK_SETS_SERVICE_PRINCIPAL
        )
        admins = {a["Id"] for page in pages for a in page.get("DelegatedAdministrators", [])}
    except ClientError as exc:
        # Only the management account and delegated administrators may list them: refused, this one is neither.
        if _error_code(exc) == "AccessDeniedException":
            return Check(
                name,
                FAIL,
                f"account {account} may not list StackSets' delegated administrators: it is not one",
                register,
            )
        return Check(name, WARN, f"could not list StackSets' delegated administrators: {_error_code(exc)}")
    if account not in admins:
        return Check(name, FAIL, f"account {account} is not a delegated administrator for StackSets", register)
    return Check(name, OK, f"account {account} is a delegated administrator for StackSets")


def _check_trusted_access(cloudformation: Any, call_as: str) -> Check:
    name = "stack-set-trusted-access"
    try:
        status = cloudformation.describe_organizations_access(CallAs=call_as)["Status"]
    except ClientError as exc:
        return Check(name, WARN, f"could not read StackSets' trusted access: {_error_code(exc)}")
    if status != "ENABLED":
        return Check(
            name,
            FAIL,
            f"trusted access between StackSets and Organizations is {status}: service-managed StackSets cannot deploy",
            "from the management account: aws cloudformation activate-organizations-access",
        )
    return Check(name, OK, "trusted access between StackSets and Organizations is enabled")


def _stack_set_checks(aws: Aws, stack_set: StackSetPlan) -> list[Check]:
    try:
        account = str(aws.client("sts").get_caller_identity()["Account"])
    except (ClientError, BotoCoreError) as exc:
        return [not_checked("stack-set", f"the account is unknown ({exc})")]
    return check_stack_set(aws.client("organizations"), aws.client("cloudformation"), account, stack_set)


def check_aws_cli(which: Callable[[str], str | None]) -> Check:
    path = which("aws")
    if path is None:
        return Check(
            "aws-cli",
            WARN,
            "the AWS CLI is not on PATH: it is how you put the Slack webhook URL in its secret after the deploy",
            f"install it: {AWS_CLI_INSTALL_PAGE}",
        )
    return Check("aws-cli", OK, path)


def check_node(which: Callable[[str], str | None], version_of: Callable[[str], str]) -> Check:
    """The CDK CLI and jsii run on the `node` found on PATH."""
    name = "nodejs"
    fix = f"install Node.js {MIN_NODE_MAJOR} or newer and put it first on PATH ({NODE_VERSIONS_PAGE})"
    path = which("node")
    if path is None:
        return Check(name, FAIL, "Node.js is not on PATH: the CDK CLI runs on it", fix)
    try:
        version = version_of(path).strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return Check(name, FAIL, f"{path} --version failed: {exc}", fix)
    match = re.fullmatch(r"v?(\d+)\.\d+\.\d+\S*", version)
    if match is None:
        return Check(name, WARN, f"{path} reports an unrecognised version {version!r}")
    if int(match.group(1)) < MIN_NODE_MAJOR:
        return Check(
            name,
            FAIL,
            f"Node.js {version} ({path}): the AWS CDK no longer supports it (Node.js {MIN_NODE_MAJOR}+ needed)",
            fix,
        )
    return Check(name, OK, f"Node.js {version} ({path})")


def not_checked(name: str, why: str) -> Check:
    return Check(name, WARN, f"not checked: {why}")


def run_checks(
    plan: Plan | Check,
    aws: Aws,
    *,
    which: Callable[[str], str | None],
    version_of: Callable[[str], str],
) -> list[Check]:
    """Every check, in order: configuration, credentials, layer, concurrency, Slack secrets, AWS CLI, Node.js."""
    checks = [plan if isinstance(plan, Check) else Check("configuration", OK, plan.source)]
    credentials = check_credentials(aws)
    checks.append(credentials)
    no_plan = "the configuration could not be read"
    if credentials.status == FAIL or aws.region is None:
        why = "needs working credentials and a region"
        checks += [not_checked(n, why) for n in ("powertools-layer", "lambda-concurrency", "slack-secrets")]
    else:
        region = aws.region
        if (wrong_partition := check_partition(region)) is not None:
            checks.append(wrong_partition)  # no layer or layer ARN there can help
        elif isinstance(plan, Plan) and plan.layer_arn:
            checks.append(check_layer_arn(plan.layer_arn, region))
        elif isinstance(plan, Plan):
            checks.append(check_powertools_layer(aws.client("ssm"), region, plan.layer_parameter))
        else:
            checks.append(not_checked("powertools-layer", no_plan))
        checks.append(check_concurrency(aws.client("lambda"), region))
        if not isinstance(plan, Plan):
            checks.append(not_checked("slack-secrets", no_plan))
        elif not plan.secrets:
            checks.append(Check("slack-secrets", OK, "no Slack webhooks configured"))
        else:
            client = aws.client("secretsmanager")
            checks += [check_slack_secret(client, region, s) for s in plan.secrets]
        if isinstance(plan, Plan) and plan.stack_set is not None:
            checks += _stack_set_checks(aws, plan.stack_set)
    checks.append(check_aws_cli(which))
    checks.append(check_node(which, version_of))
    return checks


def exit_code(checks: Sequence[Check]) -> int:
    return EXIT_FAILED if any(c.status == FAIL for c in checks) else EXIT_OK


def render(checks: Sequence[Check]) -> str:
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        line = f"{c.status.upper() if c.status != OK else OK:<4}  {c.name:<{width}}  {c.message}"
        if c.fix and c.status != OK:
            line += f" -- fix: {c.fix}"
        lines.append(line)
    failed = sum(c.status == FAIL for c in checks)
    warned = sum(c.status == WARN for c in checks)
    if failed:
        lines.append(f"preflight: {failed} failed, {warned} warning(s): fix the failures before deploying")
    else:
        lines.append(f"preflight: ready to deploy ({warned} warning(s))")
    return "\n".join(lines)


def as_json(checks: Sequence[Check]) -> str:
    return json.dumps({"exit_code": exit_code(checks), "checks": [asdict(c) for c in checks]})


# --- adapters: the CDK app's configuration, real clients, the workstation ------------------------


def load_plan(config_file: str | None, project: Path) -> Plan | Check:
    """Read the configuration exactly as the CDK app will (`cdk.json` context, `-c config=FILE`).

    Imports the CDK app (jsii, so Node.js) for its loader, stack name and layer parameter.
    """
    name = "configuration"
    cdk_json = project / "cdk.json"
    try:
        context = dict(json.loads(cdk_json.read_text(encoding="utf-8")).get("context") or {})
    except (OSError, ValueError, AttributeError) as exc:
        return Check(name, FAIL, f"cannot read the CDK context from {cdk_json}: {exc}", "run from the project folder")
    from training_guard_local.cdk_run import quiet_node_banner

    quiet_node_banner()  # the nodejs check below says what the version means
    try:
        from aws_cdk import App, Stack

        from infra import guard_config
        from infra.app import STACK_NAME
        from infra.components.chat import webhook_secret_name
        from infra.components.functions import POWERTOOLS_LAYER_PARAMETER
    except Exception as exc:  # noqa: BLE001 - jsii without Node.js fails in several ways; reported, not raised
        return Check(name, FAIL, f"cannot load the CDK app: {type(exc).__name__}: {exc}", "see the nodejs check")
    if config_file:
        context[guard_config.FILE_CONTEXT_KEY] = config_file
    app = App(context=context)
    try:
        config = guard_config.load(app.node)
    except ConfigError as exc:
        return Check(name, FAIL, " ".join(str(exc).split()), "`make synth` shows the same error")
    stack = Stack(app, STACK_NAME)
    secrets = tuple(
        WebhookSecret(webhook, hook.secret_name or webhook_secret_name(stack, webhook), not hook.secret_name)
        for webhook, hook in config.slack.webhooks.items()
    )
    app_mode = config.slack.app
    if app_mode is not None:
        from infra.components.names import bot_token_secret_name, signing_secret_name

        secrets += (
            WebhookSecret(
                "app-signing-secret",
                app_mode.signing_secret_name or signing_secret_name(STACK_NAME),
                not app_mode.signing_secret_name,
                SIGNING_SECRET,
            ),
            WebhookSecret(
                "app-bot-token",
                app_mode.bot_token_secret_name or bot_token_secret_name(STACK_NAME),
                not app_mode.bot_token_secret_name,
                BOT_TOKEN,
            ),
        )
    source = f"-c config={config_file}" if config_file else f"cdk.json context {guard_config.CONTEXT_KEY!r}"
    organization = config.organization
    return Plan(
        source=f"{source}, stack {STACK_NAME}",
        layer_parameter=POWERTOOLS_LAYER_PARAMETER,
        secrets=secrets,
        layer_arn=config.powertools_layer_arn,
        stack_set=StackSetPlan(organization.hub_account, organization.stack_set_call_as)
        if organization is not None and organization.organizational_units
        else None,
    )


def connect(environ: Mapping[str, str]) -> Aws:
    """The region the CDK CLI would use, and clients for it (AWS_PROFILE honoured by boto3 itself)."""
    from botocore.exceptions import ProfileNotFound

    from training_guard_local.sessions import new_session

    try:
        session = new_session()
    except ProfileNotFound as exc:
        return Aws(None, "", _no_client, problem=str(exc))
    region, source = resolve_region(environ, session.region_name)
    return Aws(
        region,
        source,
        lambda service: session.client(service, region_name=region),
        has_credentials=lambda: session.get_credentials() is not None,
    )


def gather(
    config_file: str | None, *, project: Path | None = None, environ: Mapping[str, str] | None = None
) -> list[Check]:
    return run_checks(
        load_plan(config_file, project or Path.cwd()),
        connect(os.environ if environ is None else environ),
        which=shutil.which,
        version_of=_version_of,
    )


def main(config_file: str | None, *, json_output: bool) -> int:
    checks = gather(config_file)
    print(as_json(checks) if json_output else render(checks), flush=True)
    return exit_code(checks)


def _version_of(path: str) -> str:
    return subprocess.run([path, "--version"], capture_output=True, text=True, check=True, timeout=30).stdout  # noqa: S603 - a path from shutil.which


def _no_client(service: str) -> Any:
    raise RuntimeError(f"no AWS access to create a {service} client")


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code") or exc)
