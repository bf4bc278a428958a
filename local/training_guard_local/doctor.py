"""`training-guard doctor`: is the deployed guard healthy? One line per check, and the fix for each failure.

Reads the stack with the user's own credentials and changes nothing (unless `--fix` is given, which only
hands back to Slack the messages that waited for a webhook URL). Every value it needs comes from the
stack's outputs (`infra.outputs`), so it works on any account, region and stack name. The checks, in order:
the stack and its outputs; the event rules enabled; each function active, without errors or throttles
lately, and with the Powertools layer; each Slack webhook secret holding a URL (never shown); the topic
policy letting the guard's own alarms publish; e-mail subscriptions confirmed; every dead-letter queue
empty (or the exact redrive command); the guard's alarms in ALARM.

Exit 0 when nothing failed (warnings allowed), 1 when a check failed, 2 for a usage error (no region,
no credentials): one line, never a traceback.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from infra import outputs
from training_guard import contract
from training_guard.contract import self_alarm_prefix
from training_guard.domain import credentials, metric_guards
from training_guard.services.chat import NOT_CONFIGURED
from training_guard_local.inputs import EXIT_FAILED, EXIT_OK, UsageError
from training_guard_local.preflight import (
    FAIL,
    LAMBDA_CONCURRENCY_QUOTA_CODE,
    OK,
    WARN,
    WEBHOOK_URL_EXAMPLE,
    Aws,
    Check,
    resolve_region,
)

DEFAULT_STACK: Final = "TrainingGuard"  # infra.app.STACK_NAME (the tools do not import the CDK app; a test pins it)
DEFAULT_HOURS: Final = 24
# CloudWatch keeps datapoints of 1-minute periods for 15 days; the doctor counts over at most that.
# (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricData.html)
MAX_HOURS: Final = 15 * 24
# Dead letters are read, never taken: ReceiveMessage with a visibility timeout of 0 leaves each message visible
# ("the duration (in seconds) that the received messages are hidden from subsequent retrieve requests";
# https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/sqs/aws.sdk.kotlin.services.sqs.model/-receive-message-request/visibility-timeout.html).
# At most this many are read per queue, to show why they failed.
PEEK_MAX_MESSAGES: Final = 100
# The notifier reads a webhook's secret through a cache this old at most (adapters/secrets.py CACHE_SECONDS, pinned
# by a test): a URL put less than this long ago may not be used yet by a warm notifier.
SECRET_CACHE_SECONDS: Final = 300
# ListSubscriptionsByTopic shows an unconfirmed subscription with this in place of its ARN
# (https://docs.aws.amazon.com/sns/latest/dg/SendMessageToHttp.confirm.html).
PENDING_CONFIRMATION: Final = "PendingConfirmation"
# Amazon Q Developer (AWS Chatbot) subscribes itself over HTTPS to the topics of a channel configuration, at
# https://global.sns-api.chatbot.amazonaws.com (the endpoint public configurations subscribe, e.g.
# https://github.com/koki-develop/qiita-lgtm-ranking terraform/modules/aws/sns.tf).
Q_DEVELOPER_HOST_SUFFIX: Final = ".chatbot.amazonaws.com"
# The public layer's name: arn:aws:lambda:{region}:017000801446:layer:AWSLambdaPowertoolsPythonV3-{python}-{arch}:N
# (https://github.com/aws-powertools/powertools-lambda-python docs/index.md).
POWERTOOLS_LAYER_MARK: Final = ":layer:AWSLambdaPowertoolsPython"
POWERTOOLS_PARAMETER_PREFIX: Final = "/aws/service/powertools/"

# (output key, label) of each function; the notifier exists only with Slack configured.
FUNCTIONS: Final = (
    (outputs.JOB_EVENTS_FUNCTION, "job-events"),
    (outputs.ALARM_EVENTS_FUNCTION, "alarm-events"),
    (outputs.SWEEPER_FUNCTION, "sweeper"),
    (outputs.SLACK_NOTIFIER_FUNCTION, "slack-notifier"),
    (outputs.LOG_EVENTS_FUNCTION, "log-events"),  # only with log_rules.enabled
)
# (output key, label, what is lost while the rule is disabled)
RULES: Final = (
    (outputs.JOB_EVENTS_RULE, "job-events", "no training-job state change reaches the guard"),
    (outputs.ALARM_EVENTS_RULE, "alarm-events", "no metric guard's alarm reaches the guard"),
    (outputs.SWEEP_SCHEDULE_RULE, "sweep", "nothing sweeps (orphaned alarms, lost events, stalled jobs)"),
    (outputs.LOG_STALL_CHECK_RULE, "log-stall-check", "the log rules see no stalled job"),
)
BASE_OUTPUTS: Final = (
    outputs.TOPIC_ARN,
    outputs.STATE_TABLE_NAME,
    outputs.JOB_EVENTS_FUNCTION,
    outputs.ALARM_EVENTS_FUNCTION,
    outputs.SWEEPER_FUNCTION,
    outputs.JOB_EVENTS_RULE,
    outputs.ALARM_EVENTS_RULE,
    outputs.SWEEP_SCHEDULE_RULE,
    outputs.JOB_EVENTS_DEAD_LETTERS,
    outputs.METRIC_GUARDS_DEAD_LETTERS,
)
SLACK_OUTPUTS: Final = (
    outputs.SLACK_NOTIFIER_FUNCTION,
    outputs.CHAT_QUEUE,
    outputs.CHAT_DEAD_LETTERS,
    outputs.SUBSCRIPTIONS_DEAD_LETTERS,
)

SYMBOLS: Final = {OK: "✓", FAIL: "✗", WARN: "!"}
ASCII_SYMBOLS: Final = {OK: "ok", FAIL: "x", WARN: "!"}


# --- the deployed stack, as its outputs describe it -------------------------------------------------------


@dataclass(frozen=True)
class Stack:
    name: str
    region: str
    account: str
    caller: str
    status: str
    outputs: Mapping[str, str]
    parameters: Sequence[Mapping[str, Any]] = ()

    def output(self, key: str) -> str | None:
        return self.outputs.get(key) or None

    @property
    def slack(self) -> bool:
        return outputs.CHAT_DEAD_LETTERS in self.outputs or any(
            k.startswith(outputs.SLACK_SECRET_PREFIX) for k in self.outputs
        )

    def secret_ids(self) -> list[str]:
        return sorted(v for k, v in self.outputs.items() if k.startswith(outputs.SLACK_SECRET_PREFIX))

    def required_outputs(self) -> tuple[str, ...]:
        return BASE_OUTPUTS + (SLACK_OUTPUTS if self.slack else ())

    def powertools_layers(self) -> set[str]:
        """The layer ARNs CloudFormation resolved from the Powertools SSM parameters (`ResolvedValue`,
        https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_Parameter.html)."""
        return {
            str(p["ResolvedValue"])
            for p in self.parameters
            if str(p.get("ParameterValue", "")).startswith(POWERTOOLS_PARAMETER_PREFIX) and p.get("ResolvedValue")
        }

    def webhook_of(self, secret_id: str, named: Mapping[str, str] | None = None) -> str:
        """The webhook a secret belongs to: as the notifier names it, or from the secret's name."""
        for webhook, sid in (named or {}).items():
            if sid == secret_id:
                return webhook
        prefix = f"{self.name}/slack/"
        if secret_id.startswith(prefix):
            return secret_id[len(prefix) :]
        keys = [k for k, v in self.outputs.items() if v == secret_id and k.startswith(outputs.SLACK_SECRET_PREFIX)]
        return keys[0][len(outputs.SLACK_SECRET_PREFIX) :] if keys else secret_id

    def cli(self, command: str) -> str:
        """A `training-guard` command for this stack's region (the redrive command reads the region from the
        environment)."""
        return f"AWS_REGION={self.region} training-guard {command}"


def connect(environ: Mapping[str, str], region: str | None) -> Aws:
    """Clients for the region asked for (--region, else what the AWS CLI would use). No region: a usage error."""
    from botocore.exceptions import NoRegionError, ProfileNotFound

    from training_guard_local.sessions import new_session

    try:
        session = new_session()
    except ProfileNotFound as exc:
        raise UsageError(
            f"{exc}: set AWS_PROFILE to a profile of ~/.aws/config (aws configure list-profiles)"
        ) from None
    source = "--region"
    if not region:
        region, source = resolve_region(environ, session.region_name)
    if not region:
        raise UsageError(
            "no AWS region: name the guard's region with --region REGION (or export AWS_REGION=REGION, "
            "or set one in the profile: aws configure set region REGION)"
        ) from NoRegionError()  # the class (cli's exit status) of what happened
    return Aws(region, source, lambda service: session.client(service, region_name=region))


_CREDENTIALS_HINT = (
    "choose credentials with AWS_PROFILE=NAME (aws configure --profile NAME, or aws sso login --profile NAME)"
)


def identify(aws: Aws) -> Mapping[str, str]:
    """STS GetCallerIdentity, which needs no permission: no usable credentials is a usage error."""
    try:
        identity: Mapping[str, str] = aws.client("sts").get_caller_identity()
    except (NoCredentialsError, PartialCredentialsError):
        raise UsageError(f"no AWS credentials found: {_CREDENTIALS_HINT}") from None
    except ClientError as exc:
        raise UsageError(f"the AWS credentials were refused ({error_code(exc)}): {_CREDENTIALS_HINT}") from None
    except BotoCoreError as exc:  # an expired SSO token, no network, a broken profile
        raise UsageError(f"cannot use the AWS credentials: {exc}") from None
    return identity


def read_stack(aws: Aws, name: str) -> Stack | None:
    """The stack as DescribeStacks reports it; None when there is no such stack in the region."""
    identity = identify(aws)
    try:
        response = aws.client("cloudformation").describe_stacks(StackName=name)
    except ClientError as exc:
        if error_code(exc) == "ValidationError" and "does not exist" in str(exc):
            return None
        raise
    [found] = response["Stacks"]
    return Stack(
        name=name,
        region=str(aws.region),
        account=identity["Account"],
        caller=identity["Arn"],
        status=found["StackStatus"],
        outputs={o["OutputKey"]: o["OutputValue"] for o in found.get("Outputs") or []},
        parameters=tuple(found.get("Parameters") or ()),
    )


# --- the checks ------------------------------------------------------------------------------------------


def check_stack(stack: Stack) -> Check:
    status = stack.status
    events = f"aws cloudformation describe-stack-events --region {stack.region} --stack-name {stack.name}"
    if status.endswith("_IN_PROGRESS"):
        return Check("stack", WARN, f"{status}: a deployment is under way", "run the doctor again when it is done")
    if status == "UPDATE_ROLLBACK_COMPLETE":
        return Check(
            "stack",
            WARN,
            f"{status}: the last update failed and was rolled back; the version before it runs",
            f"see why: {events}",
        )
    if status.endswith("_FAILED") or status.startswith(("ROLLBACK", "DELETE")):
        return Check(
            "stack", FAIL, f"{status}: the guard is not (fully) deployed", f"see why: {events}; then make deploy"
        )
    return Check("stack", OK, f"{status}, account {stack.account}, region {stack.region}")


def check_outputs(stack: Stack) -> Check:
    missing = [k for k in stack.required_outputs() if not stack.output(k)]
    if missing:
        return Check(
            "outputs",
            FAIL,
            f"missing {', '.join(missing)}: the stack was deployed by an older version of the guard",
            "deploy this version: make deploy",
        )
    return Check("outputs", OK, f"{len(stack.outputs)} outputs, every one the doctor needs")


def check_rules(events: Any, stack: Stack) -> list[Check]:
    checks = []
    for key, label, lost in RULES:
        name = stack.output(key)
        if name is None:
            continue
        check = f"rule:{label}"
        try:
            state = events.describe_rule(Name=name)["State"]
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                checks.append(Check(check, FAIL, f"{name} does not exist: {lost}", "deploy again: make deploy"))
                continue
            checks.append(_unreadable(check, name, exc))
            continue
        if state == "ENABLED":
            checks.append(Check(check, OK, f"{name} is enabled"))
        else:
            checks.append(
                Check(
                    check,
                    FAIL,
                    f"{name} is {state}: {lost}",
                    f"aws events enable-rule --region {stack.region} --name {name}",
                )
            )
    return checks


@dataclass
class Function:
    label: str
    name: str
    configuration: Mapping[str, Any] = field(default_factory=dict)
    missing: bool = False

    @property
    def log_group(self) -> str:
        logging = self.configuration.get("LoggingConfig") or {}
        return str(logging.get("LogGroup") or f"/aws/lambda/{self.name}")

    @property
    def layers(self) -> list[str]:
        return [str(layer["Arn"]) for layer in self.configuration.get("Layers") or []]

    def webhook_secrets(self) -> dict[str, str]:
        """The notifier's webhook -> secret map, when the API shows its environment."""
        variables = (self.configuration.get("Environment") or {}).get("Variables") or {}
        try:
            named = json.loads(variables.get(contract.ENV_WEBHOOK_SECRETS) or "{}")
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in named.items()} if isinstance(named, dict) else {}


def read_functions(lambda_client: Any, stack: Stack) -> tuple[list[Function], list[Check]]:
    found: list[Function] = []
    problems: list[Check] = []
    for key, label in FUNCTIONS:
        name = stack.output(key)
        if name is None:
            continue
        try:
            found.append(Function(label, name, lambda_client.get_function_configuration(FunctionName=name)))
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                found.append(Function(label, name, missing=True))
            else:
                problems.append(_unreadable(f"function:{label}", name, exc))
    return found, problems


def check_functions(
    cloudwatch: Any, stack: Stack, functions: Sequence[Function], *, hours: int, now: datetime
) -> list[Check]:
    """Each function active, and its Errors and Throttles (AWS/Lambda, Sum) over the last `hours`
    (https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html)."""
    present = [f for f in functions if not f.missing]
    sums = _lambda_sums(cloudwatch, [f.name for f in present], hours=hours, now=now) if present else {}
    checks = []
    for function in functions:
        check = f"function:{function.label}"
        if function.missing:
            checks.append(Check(check, FAIL, f"{function.name} does not exist", "deploy again: make deploy"))
            continue
        state = function.configuration.get("State", "Active")
        if state not in ("Active", "Pending"):
            reason = function.configuration.get("StateReason") or ""
            checks.append(
                Check(check, FAIL, f"{function.name} is {state}: {reason}".rstrip(": "), "deploy again: make deploy")
            )
            continue
        errors, throttles = sums.get((function.name, "Errors"), 0), sums.get((function.name, "Throttles"), 0)
        if errors:
            checks.append(
                Check(
                    check,
                    FAIL,
                    f"{_count(errors, 'error')} in the last {hours} h ({function.name})",
                    f"read them: aws logs tail {function.log_group} --region {stack.region} --since {hours}h",
                )
            )
        elif throttles:
            checks.append(
                Check(
                    check,
                    FAIL,
                    f"{_count(throttles, 'throttle')} in the last {hours} h ({function.name}): the account's "
                    "concurrency ran out",
                    "request a higher 'Concurrent executions' quota: "
                    f"https://{stack.region}.console.aws.amazon.com/servicequotas/home/services/lambda/quotas/"
                    f"{LAMBDA_CONCURRENCY_QUOTA_CODE}",
                )
            )
        else:
            checks.append(Check(check, OK, f"{state}, no errors or throttles in the last {hours} h"))
    return checks


def _lambda_sums(cloudwatch: Any, names: Sequence[str], *, hours: int, now: datetime) -> dict[tuple[str, str], float]:
    # One GetMetricData call: 2 queries per function, well under its 500 queries per call.
    queries, index = [], {}
    for i, name in enumerate(names):
        for metric in ("Errors", "Throttles"):
            query_id = f"m{i}{metric.lower()}"
            index[query_id] = (name, metric)
            queries.append(
                {
                    "Id": query_id,
                    "MetricStat": {
                        "Metric": {
                            "Namespace": "AWS/Lambda",
                            "MetricName": metric,
                            "Dimensions": [{"Name": "FunctionName", "Value": name}],
                        },
                        "Period": hours * 3600,
                        "Stat": "Sum",
                    },
                    "ReturnData": True,
                }
            )
    sums: dict[tuple[str, str], float] = {}
    token = None
    while True:
        kwargs: dict[str, Any] = {
            "MetricDataQueries": queries,
            "StartTime": now - timedelta(hours=hours),
            "EndTime": now,
        }
        if token:
            kwargs["NextToken"] = token
        response = cloudwatch.get_metric_data(**kwargs)
        for result in response.get("MetricDataResults", []):
            key = index[result["Id"]]
            sums[key] = sums.get(key, 0) + sum(result.get("Values") or [])
        token = response.get("NextToken")
        if not token:
            return sums


def check_layers(stack: Stack, functions: Sequence[Function]) -> Check:
    present = [f for f in functions if not f.missing and f.configuration]
    expected = stack.powertools_layers()
    if expected:
        without = [f.label for f in present if not expected & set(f.layers)]
        named = ", ".join(sorted(expected))
        if without:
            return Check(
                "powertools-layer",
                FAIL,
                f"{', '.join(without)} do(es) not use the Powertools layer the stack resolved ({named}): "
                "the function fails at its first import",
                "deploy again: make deploy",
            )
        return Check("powertools-layer", OK, f"every function uses {named}")
    without = [f.label for f in present if not any(POWERTOOLS_LAYER_MARK in arn for arn in f.layers)]
    if without:
        return Check(
            "powertools-layer",
            WARN,
            f"{', '.join(without)}: no layer named like Powertools (with powertools_layer_arn, check it is "
            "the Powertools layer for arm64 and Python 3.13)",
        )
    return Check("powertools-layer", OK, "every function uses a Powertools layer")


@dataclass(frozen=True)
class SecretState:
    secret_id: str
    webhook: str
    ready: bool  # holds a usable webhook URL
    changed: datetime | None = None


def check_secrets(secrets: Any, stack: Stack, named: Mapping[str, str]) -> tuple[list[Check], list[SecretState]]:
    """Secrets Manager GetSecretValue on each webhook's secret, compared with the placeholder the stack writes
    (contract.WEBHOOK_PLACEHOLDER) and the notifier's own rule for a URL. The value never leaves this function."""
    checks, states = [], []
    for sid in stack.secret_ids():
        webhook = stack.webhook_of(sid, named)
        check = f"slack-secret:{webhook}"
        put = (
            f"aws secretsmanager put-secret-value --region {stack.region} --secret-id {sid} "
            f"--secret-string '{WEBHOOK_URL_EXAMPLE}'"
        )
        try:
            value = secrets.get_secret_value(SecretId=sid).get("SecretString")
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                checks.append(
                    Check(
                        check,
                        FAIL,
                        f"{sid} does not exist: messages for '{webhook}' wait in the chat dead-letter queue",
                        f"create it: aws secretsmanager create-secret --region {stack.region} --name {sid} "
                        f"--secret-string '{WEBHOOK_URL_EXAMPLE}'",
                    )
                )
                states.append(SecretState(sid, webhook, ready=False))
                continue
            checks.append(_unreadable(check, sid, exc))
            continue
        problem = _secret_problem(webhook, sid, value)
        if problem:
            checks.append(
                Check(check, FAIL, f"{sid} {problem}: Slack messages wait in the chat dead-letter queue", put)
            )
            states.append(SecretState(sid, webhook, ready=False))
            continue
        checks.append(Check(check, OK, f"{sid} holds a webhook URL"))
        states.append(SecretState(sid, webhook, ready=True, changed=_last_changed(secrets, sid)))
    return checks, states


# The app's two secrets: what each refusal costs while the secret holds no credential.
APP_SECRETS = (
    (outputs.SLACK_SIGNING_SECRET, credentials.SIGNING_SECRET, "every click is refused (HTTP 503)"),
    (outputs.SLACK_BOT_TOKEN_SECRET, credentials.BOT_TOKEN, "app-mode messages wait in the chat dead-letter queue"),
)


def check_app_secrets(secrets: Any, stack: Stack) -> list[Check]:
    """Slack app mode's signing secret and bot token, judged as the functions judge them (credentials.py): a
    placeholder, an empty value or a published example is no credential. The value never leaves this function."""
    checks = []
    for output, kind, cost in APP_SECRETS:
        sid = stack.output(output)
        if sid is None:
            continue
        check = f"slack-app-secret:{kind}"
        put = credentials.put_secret_command(sid, kind, stack.region)
        try:
            value = secrets.get_secret_value(SecretId=sid).get("SecretString")
        except ClientError as exc:
            checks.append(_unreadable(check, sid, exc))
            continue
        problem = "holds binary data" if value is None else credentials.PROBLEMS[kind](value)
        if problem:
            checks.append(Check(check, FAIL, f"{sid} {problem}: {cost}", put))
        else:
            checks.append(Check(check, OK, f"{sid} holds a {credentials.WORDS[kind]}"))
    return checks


def _secret_problem(webhook: str, secret_id: str, value: str | None) -> str:
    if value is None:
        return "holds binary data, not a webhook URL"
    if value == contract.WEBHOOK_PLACEHOLDER:
        return "still holds the placeholder the stack put in it"
    return credentials.webhook_url_problem(value) or ""  # the notifier's own rule (check_url uses it)


def _last_changed(secrets: Any, secret_id: str) -> datetime | None:
    try:
        changed = secrets.describe_secret(SecretId=secret_id).get("LastChangedDate")
    except ClientError:
        return None
    return changed if isinstance(changed, datetime) else None


def check_topic_policy(sns: Any, cloudwatch: Any, stack: Stack) -> Check:
    """The topic's policy must let CloudWatch publish for the guard's own alarms: a topic policy replaces the
    default one, and without this Allow the alarms' notifications fail silently
    (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Notify_Users_Alarm_Changes.html)."""
    topic = stack.output(outputs.TOPIC_ARN)
    if topic is None:
        return _skipped("topic-policy", outputs.TOPIC_ARN)
    try:
        policy = json.loads(sns.get_topic_attributes(TopicArn=topic)["Attributes"].get("Policy") or "{}")
        alarms = _alarm_arns(cloudwatch, self_alarm_prefix(stack.name))
    except ClientError as exc:
        return _unreadable("topic-policy", topic, exc)
    probe = f"arn:aws:cloudwatch:{stack.region}:{stack.account}:alarm:{self_alarm_prefix(stack.name)}probe"
    refused = [arn for arn in alarms or [probe] if not _allows_alarm(policy, topic, arn, stack.account)]
    if not refused:
        return Check("topic-policy", OK, f"CloudWatch may publish for the guard's {len(alarms)} alarm(s)")
    statement = {
        "Sid": "GuardAlarmsPublish",
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Action": "sns:Publish",
        "Resource": topic,
        "Condition": {
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {
                "aws:SourceArn": f"arn:aws:cloudwatch:{stack.region}:{stack.account}:alarm:"
                f"{self_alarm_prefix(stack.name)}*"
            },
        },
    }
    fixed = dict(policy) or {"Version": "2012-10-17", "Statement": []}
    fixed["Statement"] = [s for s in _statements(policy) if s.get("Sid") != "GuardAlarmsPublish"] + [statement]
    return Check(
        "topic-policy",
        FAIL,
        "the topic's policy does not let CloudWatch publish for the guard's alarms: their notifications fail "
        "silently (only the alarm history shows it)",
        "deploy this version (make deploy); if the policy was changed outside CloudFormation, put the statement "
        f"back: aws sns set-topic-attributes --region {stack.region} --topic-arn {topic} --attribute-name Policy "
        f"--attribute-value '{json.dumps(fixed, separators=(',', ':'))}'",
    )


def _statements(policy: Mapping[str, Any]) -> list[dict[str, Any]]:
    statements = policy.get("Statement") or []
    return [s for s in (statements if isinstance(statements, list) else [statements]) if isinstance(s, dict)]


def _as_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)] if value is not None else []


def _allows_alarm(policy: Mapping[str, Any], topic: str, alarm_arn: str, account: str) -> bool:
    """Whether one Allow statement lets CloudWatch publish to the topic for this alarm: its principal, action,
    resource and the aws:SourceArn / aws:SourceAccount conditions it sets. Not a policy evaluator: other
    conditions are taken as unmet, and an explicit Deny is not looked for (the stack's only Deny is TLS)."""
    for s in _statements(policy):
        principal = s.get("Principal")
        services = _as_list(principal.get("Service")) if isinstance(principal, dict) else []
        if s.get("Effect") != "Allow" or "cloudwatch.amazonaws.com" not in services:
            continue
        if not any(
            fnmatch.fnmatchcase(a.lower(), "sns:publish") or a in ("*", "sns:*") for a in _as_list(s.get("Action"))
        ):
            continue
        if not any(fnmatch.fnmatchcase(topic, r) for r in _as_list(s.get("Resource"))):
            continue
        if _conditions_hold(s.get("Condition") or {}, alarm_arn, account):
            return True
    return False


def _conditions_hold(conditions: Mapping[str, Any], alarm_arn: str, account: str) -> bool:
    context = {"aws:sourcearn": alarm_arn, "aws:sourceaccount": account}
    for operator, tests in conditions.items():
        if not isinstance(tests, dict):
            return False
        for key, values in tests.items():
            actual = context.get(key.lower())
            if actual is None:
                return False
            if operator in ("ArnLike", "StringLike"):
                matched = any(fnmatch.fnmatchcase(actual, v) for v in _as_list(values))
            elif operator in ("ArnEquals", "StringEquals"):
                matched = actual in _as_list(values)
            else:
                return False
            if not matched:
                return False
    return True


def _alarm_arns(cloudwatch: Any, prefix: str, state: str | None = None) -> list[str]:
    return [a["AlarmArn"] for a in _alarms(cloudwatch, prefix, state)]


def _alarms(cloudwatch: Any, prefix: str, state: str | None = None) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    kwargs: dict[str, Any] = {"AlarmNamePrefix": prefix}
    if state:
        kwargs["StateValue"] = state
    for page in cloudwatch.get_paginator("describe_alarms").paginate(**kwargs):
        found += page.get("MetricAlarms", []) + page.get("CompositeAlarms", [])
    # Filtered here as well: moto (the tests' emulation) ignores StateValue beside a name prefix.
    return [a for a in found if state is None or a.get("StateValue") == state]


def subscriptions(sns: Any, topic: str) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    for page in sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=topic):
        found += page.get("Subscriptions", [])
    return found


def is_q_developer(subscription: Mapping[str, Any]) -> bool:
    endpoint = str(subscription.get("Endpoint") or "")
    host = endpoint.split("://", 1)[-1].split("/", 1)[0]
    return subscription.get("Protocol") == "https" and host.endswith(Q_DEVELOPER_HOST_SUFFIX)


def check_subscriptions(sns: Any, sqs: Any, stack: Stack) -> list[Check]:
    topic = stack.output(outputs.TOPIC_ARN)
    if topic is None:
        return [_skipped("subscriptions", outputs.TOPIC_ARN)]
    try:
        found = subscriptions(sns, topic)
    except ClientError as exc:
        return [_unreadable("subscriptions", topic, exc)]
    checks = []
    for sub in found:
        if sub.get("Protocol") not in ("email", "email-json", "sms"):
            continue
        who = str(sub.get("Endpoint"))
        check = f"{'sms' if sub['Protocol'] == 'sms' else 'e-mail'}:{who}"
        if sub.get("SubscriptionArn") == PENDING_CONFIRMATION:
            checks.append(
                Check(
                    check,
                    FAIL,
                    f"{who} has not confirmed the subscription: SNS sends it nothing",
                    f"{who} follows the link in the 'AWS Notification - Subscription Confirmation' message; when "
                    "the link has expired (after two days), ask for a new one: aws sns subscribe --region "
                    f"{stack.region} --topic-arn {topic} --protocol {sub['Protocol']} --notification-endpoint {who}",
                )
            )
        else:
            checks.append(Check(check, OK, "confirmed"))
    chat_queue = stack.output(outputs.CHAT_QUEUE)
    if stack.slack and chat_queue:
        try:
            arn = sqs.get_queue_attributes(QueueUrl=chat_queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        except ClientError as exc:
            checks.append(_unreadable("subscription:chat", chat_queue, exc))
        else:
            if any(s.get("Protocol") == "sqs" and s.get("Endpoint") == arn for s in found):
                checks.append(Check("subscription:chat", OK, "the chat queue is subscribed to the topic"))
            else:
                checks.append(
                    Check(
                        "subscription:chat",
                        FAIL,
                        "the chat queue is not subscribed to the topic: Slack gets nothing",
                        "deploy again: make deploy",
                    )
                )
    if any(is_q_developer(s) for s in found):
        checks.append(Check("q-developer", OK, "Amazon Q Developer is subscribed to the topic"))
    return checks


# --- dead letters -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Letter:
    message_id: str
    why: str
    body: str


def peek(sqs: Any, queue_url: str, *, limit: int = PEEK_MAX_MESSAGES) -> list[Letter]:
    """Up to `limit` messages of a queue, read without taking them (each stays visible)."""
    from training_guard_local import redrive

    seen: dict[str, Letter] = {}
    for _ in range(limit // 10 + 1):
        batch = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0, MessageAttributeNames=["All"]
        ).get("Messages", [])
        fresh = [m for m in batch if m["MessageId"] not in seen]
        if not fresh:
            break
        for message in fresh:
            letter = redrive.read(message)
            seen[letter.message_id] = Letter(letter.message_id, letter.why, message.get("Body", ""))
        if len(seen) >= limit:
            break
    return list(seen.values())


def _waiting(sqs: Any, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return sum(int(v) for v in attributes.values())


@dataclass
class ChatWait:
    """Messages in the chat dead-letter queue that waited only for a webhook URL (issue 12, part 6)."""

    waiting: int = 0  # messages parked for want of a URL
    secrets: set[str] = field(default_factory=set)  # whose secrets they waited for
    blocked: list[str] = field(default_factory=list)  # of those, secrets that still hold no URL
    cooling: datetime | None = None  # a URL put so recently that a warm notifier may not use it before this time


def check_dead_letters(
    sqs: Any,
    stack: Stack,
    secret_states: Sequence[SecretState],
    *,
    now: datetime,
) -> tuple[list[Check], ChatWait]:
    functions = {label: stack.output(key) for key, label in FUNCTIONS}
    chat_queue = stack.output(outputs.CHAT_QUEUE)
    queues = (
        (outputs.JOB_EVENTS_DEAD_LETTERS, "job-events", "training-job events the guard could not handle"),
        (outputs.METRIC_GUARDS_DEAD_LETTERS, "metric-guards", "alarm events and sweeps that failed"),
        (outputs.CHAT_DEAD_LETTERS, "chat", "Slack messages not delivered"),
        (outputs.SUBSCRIPTIONS_DEAD_LETTERS, "subscriptions", "notifications SNS could not deliver to a subscriber"),
    )
    checks = []
    wait = ChatWait()
    for key, label, holds in queues:
        url = stack.output(key)
        check = f"dead-letters:{label}"
        if url is None:
            continue
        try:
            count = _waiting(sqs, url)
            letters = peek(sqs, url) if count else []
        except ClientError as exc:
            checks.append(_unreadable(check, url, exc))
            continue
        if not count:
            checks.append(Check(check, OK, "empty"))
            continue
        first = next((letter.why for letter in letters if letter.why), "")
        why = f"; first: {first[:200]}" if first else ""
        message = f"{_count(count, 'message')} waiting: {holds}{why}"
        if label == "job-events":
            fix = _redrive_fix(stack.cli(f"redrive --dead-letters {url} --function {functions['job-events']}"))
        elif label == "metric-guards":
            sweeps = sum(_is_sweep(letter.body) for letter in letters)
            fix = _redrive_fix(stack.cli(f"redrive --dead-letters {url} --function {functions['alarm-events']}"))
            if sweeps:
                message += f" ({_count(sweeps, 'failed sweep')} among them: the next sweep does that work again)"
        elif label == "chat":
            wait = _chat_wait(letters, secret_states, now=now)
            fix = _chat_fix(stack, wait, stack.cli(f"redrive --dead-letters {url} --queue {chat_queue}"))
            if wait.waiting and wait.waiting == len(letters):
                message = f"{_count(count, 'message')} waiting for a webhook URL ({', '.join(sorted(wait.secrets))})"
            elif wait.waiting:
                message += f" ({wait.waiting} of them waited for a webhook URL)"
        else:
            fix = _subscription_fix(sqs, stack, url)
        checks.append(Check(check, FAIL, message, fix))
    return checks, wait


def _chat_fix(stack: Stack, wait: ChatWait, redrive: str) -> str:
    if not wait.waiting:
        return _redrive_fix(redrive)
    doctor = "training-guard doctor --fix" + ("" if stack.name == DEFAULT_STACK else f" --stack {stack.name}")
    doctor += f" --region {stack.region}"
    if wait.blocked:
        return (
            f"put the webhook URL in {', '.join(wait.blocked)} first (the slack-secret line says how); then: {doctor}"
        )
    if wait.cooling:
        # The notifier reads a secret through a cache (adapters/secrets.py): a warm one may still hold the old value.
        when = f"{wait.cooling:%H:%M:%S} UTC"
        return f"after {when}, when no notifier holds the old value any more: {doctor} (or: {redrive})"
    return f"{doctor} (or: {redrive})"


def _redrive_fix(command: str) -> str:
    return f"fix the cause they name, then (see them first with --dry-run): {command}"


def _subscription_fix(sqs: Any, stack: Stack, url: str) -> str:
    """SNS's own dead letters have no source queue to go back to (SQS's redrive moves messages "to a source queue"
    by default, or to a queue named as the destination:
    https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-configure-dead-letter-queue-redrive.html)."""
    read = (
        f"aws sqs receive-message --region {stack.region} --queue-url {url} --max-number-of-messages 10 "
        "--visibility-timeout 0 --message-attribute-names All"
    )
    chat_queue = stack.output(outputs.CHAT_QUEUE)
    if chat_queue is None:
        return f"read them: {read}"
    return (
        f"read them: {read}; those for the chat queue go back to it with: aws sqs start-message-move-task "
        f"--region {stack.region} --source-arn {_queue_arn(sqs, url)} --destination-arn {_queue_arn(sqs, chat_queue)}"
    )


def _is_sweep(body: str) -> bool:
    """A failed sweep: the scheduled event itself, or a Lambda failure record of the sweeper."""
    try:
        data = json.loads(body)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    event = data.get("requestPayload", data)
    return isinstance(event, dict) and event.get("detail-type") == "Scheduled Event"


def _chat_wait(letters: Iterable[Letter], states: Sequence[SecretState], *, now: datetime) -> ChatWait:
    wait = ChatWait()
    for letter in letters:
        waited = {s.secret_id for s in states if f"secret {s.secret_id} {NOT_CONFIGURED}" in letter.why}
        if waited:
            wait.waiting += 1
            wait.secrets |= waited
    for state in states:
        if state.secret_id not in wait.secrets:
            continue
        if not state.ready:
            wait.blocked.append(state.secret_id)
        elif state.changed is not None:
            usable = state.changed.astimezone(UTC) + timedelta(seconds=SECRET_CACHE_SECONDS)
            if usable > now and (wait.cooling is None or usable > wait.cooling):
                wait.cooling = usable
    return wait


def _queue_arn(sqs: Any, url: str) -> str:
    return str(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])


def check_alarms(cloudwatch: Any, stack: Stack) -> list[Check]:
    try:
        own = _alarms(cloudwatch, self_alarm_prefix(stack.name), "ALARM")
        guards = _alarms(cloudwatch, contract.ALARM_NAME_PREFIX, "ALARM")
    except ClientError as exc:
        return [_unreadable("alarms", self_alarm_prefix(stack.name) + "*", exc)]
    prefix = self_alarm_prefix(stack.name)
    checks = [
        Check(
            f"alarm:{str(a['AlarmName']).removeprefix(prefix)}",
            FAIL,
            f"in ALARM since {_when(a.get('StateUpdatedTimestamp'))}: {a.get('StateReason', '')}"[:300],
            str(a.get("AlarmDescription") or "read the alarm's description in the CloudWatch console"),
        )
        for a in own
    ]
    if not own:
        checks.append(
            Check("alarms", OK, f"none of the guard's own alarms ({self_alarm_prefix(stack.name)}*) in ALARM")
        )
    if guards:
        names = ", ".join(sorted(str(a["AlarmName"]) for a in guards))
        checks.append(
            Check(
                "metric-guards",
                WARN,
                f"in ALARM: {names}: a job breaches them (the guard acts on each job as configured)",
                f"which jobs: aws cloudwatch describe-alarm-contributors --region {stack.region} --alarm-name NAME",
            )
        )
    return checks


def check_fleet_caps(cloudwatch: Any) -> list[Check]:
    """The metric guards' Metrics Insights alarms against CloudWatch's caps (metric_guards.over_cap): past one, a
    breaching job may get no event and the sweeper judges the guard's jobs itself, once a sweep."""
    fleet = [
        a
        for a in _alarms(cloudwatch, contract.ALARM_NAME_PREFIX)
        if not str(a["AlarmName"]).startswith(contract.JOB_ALARM_PREFIX) and a.get("Metrics")
    ]
    if not fleet:
        return []
    capped = []
    for alarm in fleet:
        if alarm.get("EvaluationState") == metric_guards.PARTIAL_DATA:
            capped.append(f"{alarm['AlarmName']} evaluates partial data (over 500 series or 10,000 metrics)")
        elif listed := metric_guards.CAPPED_REASON.search(str(alarm.get("StateReason") or "")):
            capped.append(
                f"{alarm['AlarmName']} has {listed.group(1)}+ contributors in ALARM (CloudWatch lists only part)"
            )
    if not capped:
        return [Check("metric-guard-caps", OK, f"{_count(len(fleet), 'fleet alarm')} within CloudWatch's caps")]
    return [
        Check(
            "metric-guard-caps",
            WARN,
            "; ".join(capped) + ": breaching jobs past the cap get no alarm event; the sweeper judges them "
            "itself, once a sweep (docs/limits.md)",
            "split the guard with job_prefix or job_tag so that each alarm sees at most 500 jobs (or hosts)",
        )
    ]


# How long `--self-alarm` waits for CloudWatch to record the alarm's action, and how often it looks (a choice: alarm
# actions run within seconds of the state change; a minute leaves room without keeping the operator long).
SELF_ALARM_WAIT_SECONDS: Final = 60.0
SELF_ALARM_POLL_SECONDS: Final = 2.0
SELF_ALARM_REASON: Final = "training-guard doctor --self-alarm: a test of the alarm's notification, set back at once"
# The alarm history's action items say "Successfully executed action <arn>" or "Failed to execute action <arn>.
# Received error: ..." (https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger).
_ACTION_FAILED = "Failed to execute action"


def check_self_alarm(
    cloudwatch: Any,
    stack: Stack,
    *,
    wait_seconds: float = SELF_ALARM_WAIT_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Check:
    """`--self-alarm`: force one of the guard's own alarms to ALARM (SetAlarmState), read its history until
    CloudWatch records the publish to the topic (or its failure: a key or topic policy that refuses CloudWatch
    fails silently otherwise), then set it back to OK. The topic's subscribers get both notifications."""
    name = "self-alarm"
    topic = stack.output(outputs.TOPIC_ARN)
    if topic is None:
        return _skipped(name, outputs.TOPIC_ARN)
    candidates = [
        a
        for a in _alarms(cloudwatch, self_alarm_prefix(stack.name))
        if a.get("StateValue") == "OK" and topic in a.get("AlarmActions", [])
    ]
    if not candidates:
        return Check(
            name, WARN, f"no alarm {self_alarm_prefix(stack.name)}* in OK with the topic as its action: not tested"
        )
    alarm = str(sorted(candidates, key=lambda a: str(a["AlarmName"]))[0]["AlarmName"])
    started = clock() - timedelta(seconds=1)
    cloudwatch.set_alarm_state(AlarmName=alarm, StateValue="ALARM", StateReason=SELF_ALARM_REASON)
    try:
        action = _action_on(cloudwatch, alarm, topic, since=started, wait_seconds=wait_seconds, sleep=sleep)
    finally:
        cloudwatch.set_alarm_state(AlarmName=alarm, StateValue="OK", StateReason=SELF_ALARM_REASON)
    if action is None:
        return Check(
            name,
            WARN,
            f"{alarm} forced to ALARM and back: no action recorded in its history within {wait_seconds:g} s",
            f"look again later: aws cloudwatch describe-alarm-history --region {stack.region} --alarm-name {alarm} "
            "--history-item-type Action",
        )
    if action.startswith(_ACTION_FAILED):
        return Check(
            name,
            FAIL,
            f"{alarm} could not publish to the topic: {action}"[:400],
            "the key policy must let cloudwatch.amazonaws.com use the key (kms:Decrypt, kms:GenerateDataKey*) and "
            "the topic policy let the alarm publish: make deploy (the topic-policy line says more)",
        )
    return Check(name, OK, f"{alarm} forced to ALARM published to the topic ({action}); set back to OK")


def _action_on(
    cloudwatch: Any, alarm: str, topic: str, *, since: datetime, wait_seconds: float, sleep: Callable[[float], None]
) -> str | None:
    """The summary of the first action on `topic` the alarm's history records after `since`, or None in time."""
    waited = 0.0
    while True:
        items = cloudwatch.describe_alarm_history(
            AlarmName=alarm, HistoryItemType="Action", StartDate=since, ScanBy="TimestampAscending"
        ).get("AlarmHistoryItems", [])
        for item in items:
            summary = str(item.get("HistorySummary") or "")
            if topic in summary or topic in str(item.get("HistoryData") or ""):
                return summary
        if waited >= wait_seconds:
            return None
        sleep(SELF_ALARM_POLL_SECONDS)
        waited += SELF_ALARM_POLL_SECONDS


def check_log_subscription(logs: Any, stack: Stack) -> list[Check]:
    """The log rules read the training log group only while the guard's filter on it sends to their function: the
    group's filters as they are now, not as the deploy left them (docs/design/log-subscription.md)."""
    function = stack.output(outputs.LOG_EVENTS_FUNCTION)
    if function is None:  # log_rules.enabled is false: nothing to read
        return []
    check, group, ours = "log-subscription", contract.TRAINING_LOG_GROUP, contract.LOG_SUBSCRIPTION_FILTER_NAME
    deploy = "deploy again: make deploy (the subscription is put at every deploy)"
    try:
        found = logs.describe_subscription_filters(logGroupName=group)["subscriptionFilters"]
    except ClientError as exc:
        if error_code(exc) != "ResourceNotFoundException":
            raise
        return [Check(check, FAIL, f"no log group {group}: the log rules read nothing", deploy)]
    filters = {str(f["filterName"]): str(f.get("destinationArn", "")) for f in found}
    if ours not in filters:
        others = sorted(filters)
        if len(others) >= 2:
            free = (
                f"aws logs delete-subscription-filter --region {stack.region} --log-group-name {group} "
                "--filter-name NAME"
            )
            return [
                Check(
                    check,
                    FAIL,
                    f"not subscribed: {group} holds 2 subscription filters of others ({', '.join(others)}), "
                    "CloudWatch Logs' limit; the log rules read nothing",
                    f"free one ({free}), then make deploy",
                )
            ]
        return [Check(check, FAIL, f"no filter {ours} on {group}: the log rules read nothing", deploy)]
    if not filters[ours].endswith(f":function:{function}"):
        return [Check(check, FAIL, f"{ours} on {group} sends to {filters[ours]}, not to {function}", deploy)]
    return [Check(check, OK, f"{ours} sends {group} to {function}")]


# --- putting it together ---------------------------------------------------------------------------------


@dataclass
class Report:
    stack: str
    region: str | None
    account: str | None = None
    checks: list[Check] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if any(c.status == FAIL for c in self.checks) else EXIT_OK


def examine(
    aws: Aws,
    stack_name: str,
    *,
    hours: int = DEFAULT_HOURS,
    fix: bool = False,
    now: datetime | None = None,
    self_alarm: Callable[[Any, Stack], Check] | None = None,
) -> Report:
    """Every check against the stack; with `fix`, the chat messages that waited for a URL are handed back."""
    now = now or datetime.now(UTC)
    report = Report(stack_name, aws.region)
    stack = read_stack(aws, stack_name)
    if stack is None:
        report.checks.append(
            Check(
                "stack",
                FAIL,
                f"no stack {stack_name} in {aws.region}",
                "deploy it: make deploy (or name it: training-guard doctor --stack NAME --region REGION)",
            )
        )
        return report
    report.account = stack.account
    client = aws.client
    report.checks += [check_stack(stack), check_outputs(stack)]
    report.checks += check_rules(client("events"), stack)
    functions, problems = _guard(lambda: read_functions(client("lambda"), stack), "functions", ([], []))
    report.checks += problems
    cloudwatch = client("cloudwatch")
    report.checks += _guard(
        lambda: check_functions(cloudwatch, stack, functions, hours=hours, now=now), "functions", []
    )
    if functions:
        report.checks.append(check_layers(stack, functions))
    named: dict[str, str] = next((f.webhook_secrets() for f in functions if f.label == "slack-notifier"), {})
    secret_checks, states = _guard(
        lambda: check_secrets(client("secretsmanager"), stack, named), "slack-secrets", ([], [])
    )
    report.checks += secret_checks
    report.checks += _guard(lambda: check_app_secrets(client("secretsmanager"), stack), "slack-app-secrets", [])
    sqs = client("sqs")
    report.checks.append(check_topic_policy(client("sns"), cloudwatch, stack))
    report.checks += check_subscriptions(client("sns"), sqs, stack)
    dead_letters, wait = _guard(
        lambda: check_dead_letters(sqs, stack, states, now=now), "dead-letters", ([], ChatWait())
    )
    report.checks += dead_letters
    report.checks += check_alarms(cloudwatch, stack)
    report.checks += _guard(lambda: check_log_subscription(client("logs"), stack), "log-subscription", [])
    report.checks += _guard(lambda: check_fleet_caps(cloudwatch), "metric-guard-caps", [])
    if self_alarm is not None:  # `--self-alarm`: changes an alarm's state, so only when asked
        report.checks += _guard(lambda: [self_alarm(cloudwatch, stack)], "self-alarm", [])
    if fix:
        report.fixed += redrive_waiting(sqs, stack, wait, report)
    return report


def redrive_waiting(sqs: Any, stack: Stack, wait: ChatWait, report: Report) -> list[str]:
    """`--fix`: hand the chat dead letters back to the chat queue, once every secret they waited for holds a URL
    (with training_guard_local.redrive: the notifier skips a webhook that already had a message)."""
    from training_guard_local import redrive

    dead_letters, queue = stack.output(outputs.CHAT_DEAD_LETTERS), stack.output(outputs.CHAT_QUEUE)
    if not wait.waiting or dead_letters is None or queue is None:
        return []
    if wait.blocked or wait.cooling:
        why = (
            f"{', '.join(wait.blocked)} hold(s) no URL yet"
            if wait.blocked
            else f"wait until {wait.cooling:%H:%M:%S} UTC"
        )
        return [f"not redriven: {why}"]
    count = redrive.redrive(sqs, dead_letters, redrive.to_queue(sqs, queue), say=lambda _: None)
    index = next(i for i, c in enumerate(report.checks) if c.name == "dead-letters:chat")
    report.checks[index] = Check("dead-letters:chat", OK, f"{_count(count, 'message')} handed back to the chat queue")
    return [f"redriven {count} chat message(s) to {queue}"]


def _guard(run: Callable[[], Any], name: str, empty: Any) -> Any:
    """A check that could not read what it needs (no permission) reports that, and the others still run."""
    try:
        return run()
    except ClientError as exc:
        unreadable = _unreadable(name, "", exc)
        if isinstance(empty, tuple):
            first = [*list(empty[0]), unreadable]
            return (first, *empty[1:])
        return [*empty, unreadable]


# --- output ----------------------------------------------------------------------------------------------


def symbols(stream: Any) -> Mapping[str, str]:
    """✓ ✗ ! where the terminal can show them (a C locale cannot): never a UnicodeEncodeError."""
    try:
        "".join(SYMBOLS.values()).encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return ASCII_SYMBOLS
    return SYMBOLS


def render(report: Report, marks: Mapping[str, str] = SYMBOLS) -> str:
    lines = [
        f"Training Guard doctor: stack {report.stack} in {report.region}"
        + (f" (account {report.account})" if report.account else "")
    ]
    width = max((len(c.name) for c in report.checks), default=0)
    for c in report.checks:
        lines.append(f"{marks[c.status]:<2} {c.name:<{width}}  {c.message}")
        if c.fix and c.status != OK:
            lines.append(f"   {'':<{width}}  fix: {c.fix}")
    lines += [f"   {line}" for line in report.fixed]
    failed = sum(c.status == FAIL for c in report.checks)
    warned = sum(c.status == WARN for c in report.checks)
    if failed:
        lines.append(f"doctor: {failed} failed, {warned} warning(s): each failure has its fix above")
    else:
        lines.append(f"doctor: healthy ({len(report.checks)} checks, {warned} warning(s))")
    return "\n".join(lines)


def as_json(report: Report) -> str:
    return json.dumps(
        {
            "stack": report.stack,
            "region": report.region,
            "account": report.account,
            "exit_code": report.exit_code,
            "checks": [asdict(c) for c in report.checks],
            "fixed": report.fixed,
        },
        ensure_ascii=False,
    )


# --- the command ------------------------------------------------------------------------------------------


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stack", default=DEFAULT_STACK, metavar="NAME", help=f"the stack's name (default {DEFAULT_STACK})"
    )
    parser.add_argument(
        "--region", metavar="REGION", help="the stack's region (default: AWS_REGION, then the profile's)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON document instead of text")


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Register the sub-command on the CLI's sub-parsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "doctor",
        help="check that the deployed guard is healthy, with the fix for each problem (uses your AWS credentials)",
        description=(
            "Reads the deployed stack and checks, one line each: the stack and its outputs, the event rules "
            "enabled, each function's recent errors and throttles and its Powertools layer, the Slack webhook "
            "secrets (never their values), the topic policy for the guard's alarms, e-mail subscriptions "
            "confirmed, the dead-letter queues empty (with the redrive command when not) and the alarms in "
            "ALARM. Read-only unless --fix. Exit 1 if a check failed, 2 without a region or credentials."
        ),
    )
    add_stack_arguments(parser)
    parser.add_argument(
        "--hours",
        type=int,
        default=DEFAULT_HOURS,
        help=f"how far back to count errors and throttles (default {DEFAULT_HOURS})",
    )
    parser.add_argument(
        "--fix",
        action="store_true",
        help="hand the Slack messages that waited for a webhook URL back to the chat queue (once every URL is set)",
    )
    parser.add_argument(
        "--self-alarm",
        action="store_true",
        help="force one of the guard's own alarms to ALARM and back, and check that CloudWatch published it to "
        "the topic (its subscribers get the two notifications)",
    )
    parser.set_defaults(run=_run)
    return parser


def _run(args: argparse.Namespace) -> int:
    if not 1 <= args.hours <= MAX_HOURS:
        raise UsageError(f"--hours must be between 1 and {MAX_HOURS}")
    try:
        report = examine(
            connect(os.environ, args.region),
            args.stack,
            hours=args.hours,
            fix=args.fix,
            self_alarm=check_self_alarm if args.self_alarm else None,
        )
    except ClientError as exc:  # DescribeStacks itself refused: nothing else can be read either
        raise UsageError(refused(exc)) from None
    print(as_json(report) if args.json else render(report, symbols(sys.stdout)), flush=True)
    return report.exit_code


# --- small helpers -------------------------------------------------------------------------------------------


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code") or exc)


def refused(exc: ClientError) -> str:
    operation = getattr(exc, "operation_name", "") or "a call"
    return f"{operation} was refused ({error_code(exc)}): the credentials cannot read the stack"


def _unreadable(name: str, what: str, exc: ClientError) -> Check:
    operation = getattr(exc, "operation_name", "") or "the call"
    return Check(name, WARN, f"could not read {what or 'it'}: {error_code(exc)} on {operation}".replace("  ", " "), "")


def _skipped(name: str, output: str) -> Check:
    return Check(name, WARN, f"not checked: the stack has no output {output}")


def _count(n: float, noun: str) -> str:
    n = int(n)
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _when(value: Any) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if isinstance(value, datetime) else "?"
