"""The synthesized stack, deployed on moto: every resource of the template the guard's operator tools read.

`training-guard doctor` and `test-notification` read a deployed stack with the user's credentials. These
tests give them one made from the real template (synthesized the way `make demo` does it, with
`training_guard_local.demo.synthesize`): each resource is created on moto with its properties as
synthesized and its references resolved (`Ref`, `Fn::GetAtt`, `Fn::Join`, `Fn::Sub`), the outputs are
the template's own, resolved the same way. A resource type this module does not know fails the
deployment, so a new kind of resource in the stack is looked at here rather than silently left out.

What moto lacks, and what stands in for it (each said where it is done):
- CloudFormation: moto's needs packages the project does not install, so `DescribeStacks` is answered
  by a stand-in on the clients the tools are given (`Deployment.aws()`), from the template's outputs;
- the Powertools layer lives in another account and its SSM parameter under `/aws/service/` is
  reserved in moto: a same-named layer is published in the test account, and the stand-in returns the
  parameter with its `ResolvedValue` as CloudFormation does;
- Amazon Q Developer subscribes itself to the topic over HTTPS (`AWS::Chatbot::SlackChannelConfiguration`
  has no SNS subscription in the template): the deployment subscribes its endpoint the same way, and
  `QDeveloperInbox` records what SNS posts to it (moto would POST for real);
- an e-mail subscription is confirmed at once in moto: `pending(...)` makes one answer
  `PendingConfirmation` like an unconfirmed one.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import io
import json
import os
import re
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse

from infra import outputs
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard_local.emulator import kept_boto3_session, mock_aws_kept_session
from training_guard_local.preflight import Aws

ACCOUNT = "123456789012"  # moto's default account
REGION = "eu-west-1"  # not us-east-1, so that a region not passed through shows
STACK = "TrainingGuard"
# The public layer's name (https://github.com/aws-powertools/powertools-lambda-python docs/index.md:
# arn:aws:lambda:{region}:017000801446:layer:AWSLambdaPowertoolsPythonV3-{python_version}-arm64:N).
POWERTOOLS_LAYER_NAME = "AWSLambdaPowertoolsPythonV3-python313-arm64"
# Q Developer's (AWS Chatbot's) HTTPS endpoint on the topics it is configured with, as seen in public
# configurations (e.g. koki-develop/qiita-lgtm-ranking terraform/modules/aws/sns.tf).
Q_DEVELOPER_ENDPOINT = "https://global.sns-api.chatbot.amazonaws.com"

# A configuration that deploys every kind of resource the tools read: two webhooks (one name with a dash, which
# the outputs' keys drop), an e-mail, Q Developer and a metric guard.
EMAIL = "ml-oncall@example.com"
CONFIG = GuardConfig.from_dict(
    {
        "emails": [EMAIL],
        "slack": {
            "webhooks": {"default": {}, "on-call": {}},
            "default": "default",
            "by_severity": {"critical": "on-call"},
        },
        "q_developer": {"slack_workspace_id": "T0123ABCD", "slack_channel_id": "C0123ABCD"},
        "metric_guards": [{"name": "loss-diverging", "metric": "train:loss", "threshold": 5, "action": "stop"}],
    }
)
WEBHOOKS = ("default", "on-call")

# Resources the tools never read, and why they are left out.
NOT_DEPLOYED = {
    "AWS::IAM::Policy": "moto enforces no IAM policy",
    "AWS::IAM::ManagedPolicy": "moto enforces no IAM policy",
    "AWS::SQS::QueuePolicy": "moto enforces no resource policy",
    "AWS::Lambda::Permission": "moto enforces no resource policy",
    "AWS::Lambda::EventInvokeConfig": "the tests play the functions' deliveries themselves",
    "AWS::Lambda::EventSourceMapping": "the tests run the notifier on the chat queue themselves",
}
_ORDER = (
    "AWS::KMS::Key",
    "AWS::IAM::Role",
    "AWS::Logs::LogGroup",
    "AWS::DynamoDB::Table",
    "AWS::SQS::Queue",
    "AWS::SNS::Topic",
    "AWS::SNS::TopicPolicy",
    "AWS::SecretsManager::Secret",
    "AWS::Lambda::LayerVersion",
    "AWS::Lambda::Function",
    "AWS::Lambda::Url",
    "AWS::Events::Rule",
    "AWS::SNS::Subscription",
    "AWS::Chatbot::SlackChannelConfiguration",
    "AWS::CloudWatch::Alarm",
    "AWS::CloudWatch::Dashboard",
    "Custom::TrainingGuardLogSubscription",
)


_ROOT = Path(__file__).resolve().parents[2]
# What a synthesized template depends on: the CDK app, the code it bundles and reads, and how the demo synthesizes.
_TEMPLATE_INPUTS = ("infra", "functions/training_guard", "local/training_guard_local/demo.py")


@cache
def template_for(config_json: str) -> dict[str, Any]:
    """The stack's template for a configuration, synthesized as `make demo` does.

    Synthesis takes seconds, so the template is kept in the temporary folder under a digest of everything it
    depends on (the sources above, the CDK's versions, the configuration): each test worker and each later run
    with the same sources reads it instead, and any change to them synthesizes afresh."""
    digest = hashlib.sha256(config_json.encode())
    for package in ("aws-cdk-lib", "constructs"):
        digest.update(importlib.metadata.version(package).encode())
    for entry in _TEMPLATE_INPUTS:
        path = _ROOT / entry
        for source in sorted([path] if path.is_file() else path.rglob("*.py")):
            digest.update(str(source.relative_to(_ROOT)).encode() + source.read_bytes())
    cached = Path(tempfile.gettempdir()) / "training-guard-templates" / f"{digest.hexdigest()[:32]}.json"
    if cached.exists():
        template: dict[str, Any] = json.loads(cached.read_text(encoding="utf-8"))
        return template
    from training_guard_local.demo import synthesize
    from training_guard_local.scenario import Scenario

    config = GuardConfig.from_json(config_json, source="test configuration")
    template = synthesize(Scenario(name="deployed", config=config, jobs={}, steps=(), expect={}))
    cached.parent.mkdir(exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(template), encoding="utf-8")
    partial.replace(cached)  # atomic: a worker reading it never sees half a file
    return template


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("placeholder.py", "")
    return buffer.getvalue()


@functools.cache
def _kept_client(service: str, region: str) -> Any:
    """The clients standing a template up: kept for the process (a deployment makes a dozen, ~10 ms each) and never
    handed to a test, so no test's event handler is ever registered on one."""
    return kept_boto3_session().client(service, region_name=region)


@dataclass
class Deployment:
    template: dict[str, Any]
    config: GuardConfig
    stack: str = STACK
    region: str = REGION
    refs: dict[str, Any] = field(default_factory=dict)
    attrs: dict[tuple[str, str], Any] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    exists: bool = True  # False: DescribeStacks answers as for a stack never deployed
    status: str = "CREATE_COMPLETE"

    clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        """One client per service (making a client costs more than the calls it makes here)."""
        if service not in self.clients:
            self.clients[service] = boto3.client(service, region_name=self.region)
        return self.clients[service]

    def _deploying(self, service: str) -> Any:
        return _kept_client(service, self.region)

    # --- intrinsic functions ------------------------------------------------------------------------
    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (name, arg), *_ = value.items()
            if name == "Ref":
                return self._ref(arg)
            if name == "Fn::GetAtt":
                return self.attrs[(arg[0], arg[1])]
            if name == "Fn::Join":
                return arg[0].join(str(self.resolve(v)) for v in arg[1])
            if name == "Fn::Sub":
                return re.sub(r"\$\{([^}]+)\}", lambda m: str(self._ref(m.group(1))), arg)
            if name.startswith("Fn::"):
                raise NotImplementedError(f"deployed.py does not resolve {name}")
        return {k: self.resolve(v) for k, v in value.items()}

    def _ref(self, name: str) -> Any:
        pseudo = {
            "AWS::AccountId": ACCOUNT,
            "AWS::Region": self.region,
            "AWS::Partition": "aws",
            "AWS::StackName": self.stack,
            "AWS::URLSuffix": "amazonaws.com",
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        return self.refs[name]

    def _physical(self, logical: str, limit: int) -> str:
        return f"{self.stack}-{logical}"[:limit]

    # --- deploying ------------------------------------------------------------------------------------
    def deploy(self) -> Deployment:
        resources: dict[str, dict[str, Any]] = self.template["Resources"]
        unknown = {r["Type"] for r in resources.values()} - set(_ORDER) - set(NOT_DEPLOYED)
        if unknown:
            raise NotImplementedError(f"deployed.py does not deploy {sorted(unknown)}: add them")
        self._parameters()
        for kind in _ORDER:
            items = [(k, r) for k, r in resources.items() if r["Type"] == kind]
            if kind == "AWS::SQS::Queue":  # dead-letter queues before the queues that name them
                items.sort(key=lambda item: "RedrivePolicy" in item[1].get("Properties", {}))
            for logical, resource in items:
                getattr(self, "_" + kind.split("::", 1)[1].replace("::", "_").lower())(
                    logical, resource.get("Properties", {})
                )
        self.outputs = {k: str(self.resolve(v["Value"])) for k, v in self.template.get("Outputs", {}).items()}
        return self

    def _parameters(self) -> None:
        for name, parameter in self.template.get("Parameters", {}).items():
            default = str(parameter.get("Default", ""))
            if default.startswith("/aws/service/powertools/"):
                layer = self._deploying("lambda").publish_layer_version(
                    LayerName=POWERTOOLS_LAYER_NAME, Content={"ZipFile": _zip()}
                )
                self.parameters[name] = layer["LayerVersionArn"]
            elif default.startswith("/cdk-bootstrap/"):
                self.parameters[name] = "30"
            else:
                raise NotImplementedError(f"deployed.py does not know parameter {name} ({default})")

    def _kms_key(self, logical: str, props: dict[str, Any]) -> None:
        # With its policy: `doctor --self-alarm`'s stand-in judges CloudWatch's use of the key by it.
        policy = json.dumps(self.resolve(props["KeyPolicy"]))
        key = self._deploying("kms").create_key(Description=logical, Policy=policy)["KeyMetadata"]
        self.refs[logical] = key["KeyId"]
        self.attrs[(logical, "Arn")] = key["Arn"]

    def _iam_role(self, logical: str, props: dict[str, Any]) -> None:
        role = self._deploying("iam").create_role(
            RoleName=self._physical(logical, 64),
            AssumeRolePolicyDocument=json.dumps(self.resolve(props["AssumeRolePolicyDocument"])),
        )["Role"]
        self.refs[logical] = role["RoleName"]
        self.attrs[(logical, "Arn")] = role["Arn"]

    def _logs_loggroup(self, logical: str, props: dict[str, Any]) -> None:
        name = f"/aws/lambda/{self._physical(logical, 200)}"
        self._deploying("logs").create_log_group(logGroupName=name)
        self.refs[logical] = name
        self.attrs[(logical, "Arn")] = f"arn:aws:logs:{self.region}:{ACCOUNT}:log-group:{name}:*"

    def _dynamodb_table(self, logical: str, props: dict[str, Any]) -> None:
        name = self._physical(logical, 255)
        table = self._deploying("dynamodb").create_table(
            TableName=name,
            KeySchema=props["KeySchema"],
            AttributeDefinitions=props["AttributeDefinitions"],
            BillingMode=props["BillingMode"],
        )["TableDescription"]
        ttl = props.get("TimeToLiveSpecification")
        if ttl:
            self._deploying("dynamodb").update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
        self.refs[logical] = name
        self.attrs[(logical, "Arn")] = table["TableArn"]

    def _sqs_queue(self, logical: str, props: dict[str, Any]) -> None:
        attributes: dict[str, str] = {
            key: str(props[key]) for key in ("VisibilityTimeout", "MessageRetentionPeriod") if key in props
        }
        if "KmsMasterKeyId" in props:
            attributes["KmsMasterKeyId"] = str(self.resolve(props["KmsMasterKeyId"]))
        if "RedrivePolicy" in props:
            attributes["RedrivePolicy"] = json.dumps(self.resolve(props["RedrivePolicy"]))
        sqs = self._deploying("sqs")
        name = self._physical(logical, 80)
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.refs[logical] = url
        self.attrs.update({(logical, "Arn"): arn, (logical, "QueueName"): name, (logical, "QueueUrl"): url})

    def _sns_topic(self, logical: str, props: dict[str, Any]) -> None:
        attributes = {"DisplayName": props.get("DisplayName", "")}
        if "KmsMasterKeyId" in props:
            attributes["KmsMasterKeyId"] = str(self.resolve(props["KmsMasterKeyId"]))
        name = self._physical(logical, 256)
        arn = self._deploying("sns").create_topic(Name=name, Attributes=attributes)["TopicArn"]
        self.refs[logical] = arn
        self.attrs.update({(logical, "TopicArn"): arn, (logical, "TopicName"): name})

    def _sns_topicpolicy(self, logical: str, props: dict[str, Any]) -> None:
        policy = json.dumps(self.resolve(props["PolicyDocument"]))
        for topic in self.resolve(props["Topics"]):
            self._deploying("sns").set_topic_attributes(TopicArn=topic, AttributeName="Policy", AttributeValue=policy)

    def _secretsmanager_secret(self, logical: str, props: dict[str, Any]) -> None:
        secret = self._deploying("secretsmanager").create_secret(
            Name=props["Name"], SecretString=props["SecretString"], Description=props.get("Description", "")
        )
        self.refs[logical] = secret["ARN"]

    def _lambda_layerversion(self, logical: str, props: dict[str, Any]) -> None:
        layer = self._deploying("lambda").publish_layer_version(
            LayerName=self._physical(logical, 140), Content={"ZipFile": _zip()}
        )
        self.refs[logical] = layer["LayerVersionArn"]

    def _lambda_function(self, logical: str, props: dict[str, Any]) -> None:
        name = self._physical(logical, 64)
        extra: dict[str, Any] = {}
        if "LoggingConfig" in props:
            extra["LoggingConfig"] = self.resolve(props["LoggingConfig"])
        function = self._deploying("lambda").create_function(
            FunctionName=name,
            Role=self.resolve(props["Role"]),
            Runtime=props["Runtime"],
            Handler=props["Handler"],
            Code={"ZipFile": _zip()},
            Description=props.get("Description", ""),
            Timeout=props.get("Timeout", 3),
            MemorySize=props.get("MemorySize", 128),
            Architectures=props.get("Architectures", ["x86_64"]),
            Layers=self.resolve(props.get("Layers", [])),
            Environment={"Variables": self.resolve(props.get("Environment", {}).get("Variables", {}))},
            **extra,
        )
        self.refs[logical] = name
        self.attrs[(logical, "Arn")] = function["FunctionArn"]

    def _trainingguardlogsubscription(self, logical: str, props: dict[str, Any]) -> None:
        # The log rules' subscription, put by the custom resource's own code on moto's CloudWatch Logs.
        from training_guard.adapters.log_subscription import LogSubscriptions, Subscription

        plan = LogSubscriptions(self._deploying("logs")).subscribe(Subscription.from_properties(self.resolve(props)))
        self.refs[logical] = f"{props['LogGroupName']}|{props['FilterName']}"
        self.attrs.update({(logical, "Status"): plan.status.value, (logical, "Detail"): plan.detail})

    def _lambda_url(self, logical: str, props: dict[str, Any]) -> None:
        # The URL's address as Lambda makes it (https://<url-id>.lambda-url.<region>.on.aws/); moto serves none, the
        # tests call the handler with the URL's event shape themselves.
        function = self.resolve(props["TargetFunctionArn"])
        url_id = hashlib.sha256(str(function).encode()).hexdigest()[:32]
        self.attrs[(logical, "FunctionUrl")] = f"https://{url_id}.lambda-url.{self.region}.on.aws/"
        self.attrs[(logical, "FunctionArn")] = function
        self.refs[logical] = function

    def _events_rule(self, logical: str, props: dict[str, Any]) -> None:
        events = self._deploying("events")
        name = self._physical(logical, 64)
        rule: dict[str, Any] = {"Name": name, "State": props.get("State", "ENABLED")}
        if "EventPattern" in props:
            rule["EventPattern"] = json.dumps(props["EventPattern"])
        if "ScheduleExpression" in props:
            rule["ScheduleExpression"] = props["ScheduleExpression"]
        arn = events.put_rule(**rule, Description=props.get("Description", ""))["RuleArn"]
        events.put_targets(Rule=name, Targets=self.resolve(props.get("Targets", [])))
        self.refs[logical] = name
        self.attrs[(logical, "Arn")] = arn

    def _sns_subscription(self, logical: str, props: dict[str, Any]) -> None:
        attributes = {}
        if props.get("RawMessageDelivery"):
            attributes["RawMessageDelivery"] = "true"
        if "RedrivePolicy" in props:
            attributes["RedrivePolicy"] = json.dumps(self.resolve(props["RedrivePolicy"]))
        if "FilterPolicy" in props:
            attributes["FilterPolicy"] = json.dumps(props["FilterPolicy"])
        subscription = self._deploying("sns").subscribe(
            TopicArn=self.resolve(props["TopicArn"]),
            Protocol=props["Protocol"],
            Endpoint=self.resolve(props["Endpoint"]),
            Attributes=attributes,
            ReturnSubscriptionArn=True,
        )
        self.refs[logical] = subscription["SubscriptionArn"]

    def _chatbot_slackchannelconfiguration(self, logical: str, props: dict[str, Any]) -> None:
        # What the service does when the channel configuration is created: it subscribes itself.
        for topic in self.resolve(props["SnsTopicArns"]):
            self._deploying("sns").subscribe(TopicArn=topic, Protocol="https", Endpoint=Q_DEVELOPER_ENDPOINT)
        self.refs[logical] = f"arn:aws:chatbot::{ACCOUNT}:chat-configuration/slack-channel/{props['ConfigurationName']}"

    def _cloudwatch_alarm(self, logical: str, props: dict[str, Any]) -> None:
        keys = (
            "AlarmName",
            "AlarmDescription",
            "ActionsEnabled",
            "AlarmActions",
            "OKActions",
            "MetricName",
            "Namespace",
            "Statistic",
            "Period",
            "Dimensions",
            "Metrics",
            "EvaluationPeriods",
            "DatapointsToAlarm",
            "Threshold",
            "ComparisonOperator",
            "TreatMissingData",
        )
        alarm = {key: self.resolve(props[key]) for key in keys if key in props}
        self._deploying("cloudwatch").put_metric_alarm(**alarm)
        self.refs[logical] = alarm["AlarmName"]

    def _cloudwatch_dashboard(self, logical: str, props: dict[str, Any]) -> None:
        name = props.get("DashboardName") or self._physical(logical, 255)
        self._deploying("cloudwatch").put_dashboard(
            DashboardName=name, DashboardBody=self.resolve(props["DashboardBody"])
        )
        self.refs[logical] = name

    # --- reading back -----------------------------------------------------------------------------------
    def aws(self) -> Aws:
        """What the tools get from `connect()`: clients for the region, CloudFormation answered by the stand-in."""

        def client(service: str) -> Any:
            if service != "cloudformation":
                return self.client(service)
            if "stand-in" not in self.clients:
                made = boto3.client(service, region_name=self.region)
                made.meta.events.register("before-call.cloudformation.DescribeStacks", self._describe_stacks)
                self.clients["stand-in"] = made
            return self.clients["stand-in"]

        return Aws(self.region, "test", client)

    def _describe_stacks(self, params: Mapping[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        """DescribeStacks as CloudFormation answers it (a handler of before-call returns the response)."""
        body = params.get("body")  # the serialized request (query protocol): {"Action": ..., "StackName": ...}
        name = body.get("StackName") if isinstance(body, Mapping) else None
        if not self.exists or name != self.stack:
            error = {"Code": "ValidationError", "Message": f"Stack with id {name} does not exist"}
            return _response(400), {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}
        parameters = []
        for key, value in self.parameters.items():
            default = str(self.template["Parameters"][key]["Default"])
            parameters.append({"ParameterKey": key, "ParameterValue": default, "ResolvedValue": value})
        stack = {
            "StackName": self.stack,
            "StackId": f"arn:aws:cloudformation:{self.region}:{ACCOUNT}:stack/{self.stack}/0f0e0d0c",
            "StackStatus": self.status,
            "Description": self.template.get("Description", ""),
            "Parameters": parameters,
            "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in self.outputs.items()],
        }
        return _response(200), {"Stacks": [stack], "ResponseMetadata": {"HTTPStatusCode": 200}}

    # --- breaking it on purpose -------------------------------------------------------------------------
    def logical(self, kind: str, part: str = "") -> str:
        found = [k for k, r in self.template["Resources"].items() if r["Type"] == kind and part in k]
        assert len(found) == 1, f"expected one {kind} matching {part!r}, found {found}"
        return str(found[0])

    def pending(self, address: str) -> None:
        """Make an e-mail subscription answer as one whose confirmation link was never followed."""
        from moto.sns.models import sns_backends

        backend = sns_backends[ACCOUNT][self.region]
        [subscription] = [s for s in backend.subscriptions.values() if s.endpoint == address]
        subscription.arn = "PendingConfirmation"


def _response(status: int) -> AWSResponse:
    return AWSResponse("https://cloudformation.amazonaws.com/", status, {}, None)


@contextmanager
def deployed(config: GuardConfig, *, stack: str = STACK) -> Iterator[Deployment]:
    """`with deployed(config) as stack:` the synthesized template stood up on a fresh moto account."""
    template = template_for(config.to_json())
    with mock_aws_kept_session():
        yield Deployment(template, config, stack=stack).deploy()


@dataclass
class QDeveloperInbox:
    """What SNS posted to Q Developer's endpoint (moto POSTs https subscriptions for real)."""

    posts: list[dict[str, Any]] = field(default_factory=list)

    def post(self, url: str, json: dict[str, Any] | None = None, **_: Any) -> None:
        if url != Q_DEVELOPER_ENDPOINT:
            raise AssertionError(f"moto tried to POST to {url}")
        self.posts.append(json or {})

    def messages(self) -> list[dict[str, Any]]:
        return [dict(json.loads(post["Message"])) for post in self.posts]


def patch_https(monkeypatch: Any) -> QDeveloperInbox:
    import requests

    inbox = QDeveloperInbox()
    # moto's SNS posts an https subscription's messages with requests.post (moto/sns/models.py).
    monkeypatch.setattr(requests, "post", inbox.post)
    return inbox


@contextmanager
def notifier(stack: Deployment, monkeypatch: Any, *, min_interval: float = 0.0) -> Iterator[Callable[..., int]]:
    """The real Slack notifier handler on the stack's chat queue, as its event source mapping runs it.

    Its environment is the deployed function's (names, queue URL, secret names), but for the configuration file,
    which the stack ships in a layer: the test writes the same configuration where that variable points.
    `pump()` hands every waiting batch to the handler (at most 5, as the mapping's batch size), deletes what it
    did not report as failed and returns how many messages it handled; a failed message is received again on
    the next pump and, after its 5th receive, moved to the dead-letter queue by SQS as in AWS.
    """

    from training_guard_local.emulator import LambdaContext, handler_output_to_stderr

    name = stack.outputs[outputs.SLACK_NOTIFIER_FUNCTION]
    configuration = stack.client("lambda").get_function_configuration(FunctionName=name)
    with tempfile.TemporaryDirectory(prefix="training-guard-notifier-") as folder:
        config_file = f"{folder}/config.json"
        with open(config_file, "w", encoding="utf-8") as out:
            out.write(stack.config.to_json())
        environment = dict(configuration["Environment"]["Variables"])
        environment |= {
            contract.ENV_CONFIG_FILE: config_file,
            contract.ENV_SLACK_MIN_INTERVAL: str(min_interval),
            "AWS_REGION": stack.region,
            "AWS_DEFAULT_REGION": stack.region,
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "POWERTOOLS_METRICS_DISABLED": "true",
        }
        for key, value in environment.items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv(contract.ENV_CONFIG, raising=False)
        with handler_output_to_stderr():
            from training_guard.handlers import slack_notifier, wiring
        wiring.reset()
        sqs = stack.client("sqs")
        queue = stack.outputs[outputs.CHAT_QUEUE]
        context = LambdaContext(function_name=name, invoked_function_arn=configuration["FunctionArn"])

        def pump(*, fresh: bool = False) -> int:
            if fresh:
                # A notifier that holds no secret from before: the state of every warm one once its secrets cache
                # (adapters/secrets.py, 5 minutes) has run out.
                wiring.reset()
            handled = 0
            while True:
                batch = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=5, VisibilityTimeout=0).get(
                    "Messages", []
                )
                if not batch:
                    return handled
                records = [
                    {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"]} for m in batch
                ]
                with handler_output_to_stderr():
                    response = slack_notifier.handler({"Records": records}, context)
                failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
                for message in batch:
                    if message["MessageId"] not in failed:
                        sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
                handled += len(batch)
                if failed:
                    return handled  # the failed ones come back on the next pump

        try:
            yield pump
        finally:
            wiring.reset()
