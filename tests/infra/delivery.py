"""The delivery graph of a synthesized template, and whether AWS lets each delivery through.

An edge is one AWS service (or one function's role) writing into one resource. It is allowed when
no statement explicitly denies it, a statement of the receiver's resource policy (or, for a role,
its identity policy) allows it, and, when the receiver is encrypted with a KMS key of the stack,
the key lets the same sender use it. An Allow counts only if every condition key it tests is one
the sender is documented to send: a condition on a key AWS does not send denies, silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

PARTITION, REGION, ACCOUNT = "aws", "eu-west-1", "111122223333"
ROLE = "role"  # sender kind: a function's execution role (same account)
PUBLIC = "*"  # sender kind: anyone, through a function URL whose auth type is NONE
FUNCTION_URL = "function-url"
# A NONE function URL answers only when the function's resource-based policy grants the public both actions: "your
# function's resource-based policy is always in effect and must grant public access", and "starting in October 2025,
# new function URLs will require both lambda:InvokeFunctionUrl and lambda:InvokeFunction permissions"
# (https://docs.aws.amazon.com/lambda/latest/dg/urls-auth.html).
FUNCTION_URL_ACTIONS = ("lambda:InvokeFunctionUrl", "lambda:InvokeFunction")

# What each service sends in the request context when it delivers, per receiving service; a key
# not listed is absent, so a condition on it fails. Every request is over TLS.
SENT: dict[tuple[str, str], tuple[frozenset[str], str]] = {
    ("cloudwatch.amazonaws.com", "sns"): (
        frozenset({"aws:sourcearn", "aws:sourceaccount"}),
        "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Notify_Users_Alarm_Changes.html",
    ),
    ("cloudwatch.amazonaws.com", "kms"): (  # documented without any condition
        frozenset(),
        "https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services",
    ),
    ("events.amazonaws.com", "sqs"): (
        frozenset({"aws:sourcearn"}),
        "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html#eb-dlq-perms",
    ),
    ("events.amazonaws.com", "lambda"): (
        frozenset({"aws:sourcearn"}),
        "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-lambda-permissions",
    ),
    ("events.amazonaws.com", "kms"): (  # documented without any condition
        frozenset(),
        "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html#compatibility-with-aws-services",
    ),
    ("sns.amazonaws.com", "sqs"): (
        frozenset({"aws:sourcearn"}),
        "https://docs.aws.amazon.com/sns/latest/dg/sns-access-policy-use-cases.html",
    ),
    ("sns.amazonaws.com", "kms"): (
        frozenset({"aws:sourcearn", "aws:sourceaccount"}),
        "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html",
    ),
    # A subscription's delivery to a Lambda function: the user guide grants it with --source-arn (the log group's ARN
    # with ":*", CDK issue 7328) and --source-account.
    (f"logs.{REGION}.amazonaws.com", "lambda"): (
        frozenset({"aws:sourcearn", "aws:sourceaccount"}),
        "https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/SubscriptionFilters.html#LambdaFunctionExample",
    ),
    (f"logs.{REGION}.amazonaws.com", "kms"): (
        frozenset({"kms:encryptioncontext:aws:logs:arn"}),
        "https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html",
    ),
}
ARN = {  # resource type -> ARN of a resource whose physical name is its logical id
    "AWS::SNS::Topic": "arn:{p}:sns:{r}:{a}:{id}",
    "AWS::SQS::Queue": "arn:{p}:sqs:{r}:{a}:{id}",
    "AWS::Lambda::Function": "arn:{p}:lambda:{r}:{a}:function:{id}",
    "AWS::Events::Rule": "arn:{p}:events:{r}:{a}:rule/{id}",
    "AWS::KMS::Key": "arn:{p}:kms:{r}:{a}:key/{id}",
    "AWS::IAM::Role": "arn:{p}:iam::{a}:role/{id}",
    "AWS::Logs::LogGroup": "arn:{p}:logs:{r}:{a}:log-group:{id}",
    "AWS::DynamoDB::Table": "arn:{p}:dynamodb:{r}:{a}:table/{id}",
    "AWS::SecretsManager::Secret": "arn:{p}:secretsmanager:{r}:{a}:secret:{id}",
}
PSEUDO = {
    "AWS::Partition": PARTITION,
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::URLSuffix": "amazonaws.com",
}


@dataclass(frozen=True)
class Edge:
    sender: str  # a service principal, or "role:<logical id>"
    receiver: str  # logical id
    action: str
    via: str  # what makes the delivery: "alarm action of X", "target of rule Y", ...
    context: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __str__(self) -> str:
        return f"{self.sender} -> {self.receiver} ({self.via})"


class Template:
    def __init__(self, template: dict[str, Any]) -> None:
        self.resources: dict[str, dict[str, Any]] = template["Resources"]

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.resources.items() if v["Type"] == kind}

    def arn(self, logical_id: str) -> str:
        resource = self.resources[logical_id]
        if resource["Type"] == "AWS::CloudWatch::Alarm":
            return f"arn:{PARTITION}:cloudwatch:{REGION}:{ACCOUNT}:alarm:{resource['Properties']['AlarmName']}"
        return ARN[resource["Type"]].format(p=PARTITION, r=REGION, a=ACCOUNT, id=logical_id)

    def resolve(self, value: Any) -> Any:
        """Intrinsics to strings: a Ref to a topic or a GetAtt Arn is that resource's ARN."""
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if "Ref" in value:
            ref = value["Ref"]
            if ref in PSEUDO:
                return PSEUDO[ref]
            kind = self.resources[ref]["Type"]
            return self.arn(ref) if kind in ("AWS::SNS::Topic", "AWS::SecretsManager::Secret") else ref
        if "Fn::GetAtt" in value:
            logical_id, attribute = value["Fn::GetAtt"]
            return self.arn(logical_id) if attribute == "Arn" else logical_id
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(str(self.resolve(p)) for p in parts)
        if "Fn::Sub" in value:
            return re.sub(r"\$\{([^}]+)\}", lambda m: str(self.resolve({"Ref": m.group(1)})), value["Fn::Sub"])
        return {k: self.resolve(v) for k, v in value.items()}

    def target(self, value: Any) -> str:
        """The logical id an ARN-valued property points at."""
        return str(value["Fn::GetAtt"][0] if "Fn::GetAtt" in value else value["Ref"])

    def key_of(self, logical_id: str) -> str | None:
        props = self.resources[logical_id]["Properties"]
        key = props.get("KmsMasterKeyId") or props.get("KmsKeyId")
        return self.target(key) if isinstance(key, dict) else None


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _condition_holds(operator: str, key: str, expected: Any, context: dict[str, str]) -> bool:
    op = operator.removesuffix("IfExists")
    if key.lower() not in context:
        return operator.endswith("IfExists")
    actual, values = context[key.lower()], [str(v) for v in _listed(expected)]
    if op in ("StringEquals", "ArnEquals"):
        return actual in values
    if op in ("StringLike", "ArnLike"):
        return any(fnmatchcase(actual, v) for v in values)
    if op == "Bool":
        return actual.lower() in (v.lower() for v in values)
    if op == "StringNotEquals":
        return actual not in values
    raise NotImplementedError(f"condition operator {operator}")


def judge(
    statements: list[dict[str, Any]], principal: str, action: str, resource: str, context: dict[str, str]
) -> tuple[bool, str]:
    """(allowed, why not) for one request against one policy: explicit Deny wins, then any Allow."""
    allowed, unmet = False, []
    for statement in statements:
        who = statement.get("Principal", "*")
        principals = ["*"] if who == "*" else [p for v in who.values() for p in _listed(v)]
        # the account root as principal delegates to the account's own IAM policies
        same_account = f"arn:{PARTITION}:iam::{ACCOUNT}:root" in principals and principal.startswith(
            f"arn:{PARTITION}:iam::{ACCOUNT}:"
        )
        if not ({"*", principal} & set(principals) or same_account):
            continue
        if not any(fnmatchcase(action.lower(), a.lower()) for a in _listed(statement["Action"])):
            continue
        if not any(r == "*" or fnmatchcase(resource, r) for r in _listed(statement.get("Resource", "*"))):
            continue
        failed = [
            (op, key)
            for op, tests in statement.get("Condition", {}).items()
            for key, expected in tests.items()
            if not _condition_holds(op, key, expected, context)
        ]
        if statement["Effect"] == "Deny" and not failed:
            return False, f"explicitly denied by statement {statement.get('Sid', '(no Sid)')}"
        if statement["Effect"] == "Allow":
            allowed = allowed or not failed
            unmet += [
                f"{op} {key}" + ("" if key.lower() in context else " (a key the sender does not send)")
                for op, key in failed
            ]
    if allowed:
        return True, ""
    return False, f"no Allow for {action}" + (f"; unmet conditions: {', '.join(unmet)}" if unmet else "")


def edges(t: Template) -> list[Edge]:
    found: list[Edge] = []
    for alarm_id, alarm in t.of_type("AWS::CloudWatch::Alarm").items():
        props, context = alarm["Properties"], {"aws:sourcearn": t.arn(alarm_id), "aws:sourceaccount": ACCOUNT}
        for action in (
            props.get("AlarmActions", []) + props.get("OKActions", []) + props.get("InsufficientDataActions", [])
        ):
            via = f"alarm action of {props['AlarmName']}"
            found.append(Edge("cloudwatch.amazonaws.com", t.target(action), "sns:Publish", via, context))
    for rule_id, rule in t.of_type("AWS::Events::Rule").items():
        context = {"aws:sourcearn": t.arn(rule_id), "aws:sourceaccount": ACCOUNT}
        for target in rule["Properties"].get("Targets", []):
            receiver = t.target(target["Arn"])
            action = {
                "AWS::Lambda::Function": "lambda:InvokeFunction",
                "AWS::SQS::Queue": "sqs:SendMessage",
                "AWS::SNS::Topic": "sns:Publish",
            }[t.resources[receiver]["Type"]]
            found.append(Edge("events.amazonaws.com", receiver, action, f"target of rule {rule_id}", context))
            if "DeadLetterConfig" in target:
                dlq, via = t.target(target["DeadLetterConfig"]["Arn"]), f"dead-letter queue of rule {rule_id}"
                found.append(Edge("events.amazonaws.com", dlq, "sqs:SendMessage", via, context))
    for subscription in t.of_type("AWS::SNS::Subscription").values():
        props = subscription["Properties"]
        topic = t.target(props["TopicArn"])
        context = {"aws:sourcearn": t.arn(topic), "aws:sourceaccount": ACCOUNT}
        if props["Protocol"] == "sqs":
            via = f"sqs subscription of {topic}"
            found.append(Edge("sns.amazonaws.com", t.target(props["Endpoint"]), "sqs:SendMessage", via, context))
        if "RedrivePolicy" in props:
            dlq, via = t.target(props["RedrivePolicy"]["deadLetterTargetArn"]), f"{props['Protocol']} subscription DLQ"
            found.append(Edge("sns.amazonaws.com", dlq, "sqs:SendMessage", f"{via} of {topic}", context))
    channels = {
        **t.of_type("AWS::Chatbot::SlackChannelConfiguration"),
        **t.of_type("AWS::Chatbot::MicrosoftTeamsChannelConfiguration"),
    }
    for channel_id, channel in channels.items():
        for topic in channel["Properties"].get("SnsTopicArns", []):  # AWS-owned receiver: nothing to allow
            found.append(Edge("sns.amazonaws.com", channel_id, "chatbot", f"Q Developer channel on {t.target(topic)}"))
    for group_id in t.of_type("AWS::Logs::LogGroup"):
        if t.key_of(group_id):
            context = {"kms:encryptioncontext:aws:logs:arn": t.arn(group_id)}
            found.append(Edge(f"logs.{REGION}.amazonaws.com", group_id, "logs", "encrypted log group", context))
    return list(
        dict.fromkeys(found + role_edges(t) + url_edges(t) + subscription_edges(t))
    )  # an alarm's ALARM and OK actions are one edge


def subscription_edges(t: Template) -> list[Edge]:
    """The log rules' subscription (a custom resource puts the filter): CloudWatch Logs invokes its destination."""
    found = []
    for subscription in t.of_type("Custom::TrainingGuardLogSubscription").values():
        props = subscription["Properties"]
        group = f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{props['LogGroupName']}:*"
        context = {"aws:sourcearn": group, "aws:sourceaccount": ACCOUNT}
        via = f"subscription filter {props['FilterName']} on {props['LogGroupName']}"
        receiver = t.target(props["DestinationArn"])
        found.append(Edge(f"logs.{REGION}.amazonaws.com", receiver, "lambda:InvokeFunction", via, context))
    return found


def url_edges(t: Template) -> list[Edge]:
    """Anyone on the internet, through a function URL of auth type NONE (the request's signature is checked in code)."""
    return [
        Edge(PUBLIC, t.target(url["Properties"]["TargetFunctionArn"]), FUNCTION_URL, "function URL (auth type NONE)")
        for url in t.of_type("AWS::Lambda::Url").values()
        if url["Properties"].get("AuthType") == "NONE"
    ]


def role_edges(t: Template) -> list[Edge]:
    """Functions deliver with their execution role: destinations, DLQs, queue polling and their grants."""
    found: list[Edge] = []
    role_of = {fn_id: t.target(fn["Properties"]["Role"]) for fn_id, fn in t.of_type("AWS::Lambda::Function").items()}
    for config in t.of_type("AWS::Lambda::EventInvokeConfig").values():
        fn_id = t.target(config["Properties"]["FunctionName"])
        if on_failure := config["Properties"].get("DestinationConfig", {}).get("OnFailure"):
            queue, via = t.target(on_failure["Destination"]), f"on-failure destination of {fn_id}"
            found.append(Edge(f"{ROLE}:{role_of[fn_id]}", queue, "sqs:SendMessage", via))
    for fn_id, fn in t.of_type("AWS::Lambda::Function").items():
        if dlq := fn["Properties"].get("DeadLetterConfig", {}).get("TargetArn"):
            found.append(Edge(f"{ROLE}:{role_of[fn_id]}", t.target(dlq), "sqs:SendMessage", f"DLQ of {fn_id}"))
    for mapping in t.of_type("AWS::Lambda::EventSourceMapping").values():
        fn_id, queue = (
            t.target(mapping["Properties"]["FunctionName"]),
            t.target(mapping["Properties"]["EventSourceArn"]),
        )
        found.append(Edge(f"{ROLE}:{role_of[fn_id]}", queue, "sqs:ReceiveMessage", f"event source of {fn_id}"))
    arns = {t.arn(r): r for r in (*t.of_type("AWS::SQS::Queue"), *t.of_type("AWS::SNS::Topic"))}
    for role_id in set(role_of.values()):
        for statement in identity_statements(t, role_id):
            for action in {"sns:Publish", "sqs:SendMessage"} & set(_listed(statement["Action"])):
                for resource in _listed(statement["Resource"]):
                    if resource in arns:
                        found.append(Edge(f"{ROLE}:{role_id}", arns[resource], action, "granted to its function"))
    return found


def identity_statements(t: Template, role_id: str) -> list[dict[str, Any]]:
    return [
        s
        for p in t.of_type("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in t.resolve(p["Properties"]["PolicyDocument"]["Statement"])
    ]


def resource_statements(t: Template, receiver: str) -> list[dict[str, Any]]:
    kind = t.resources[receiver]["Type"]
    if kind == "AWS::Lambda::Function":
        statements = []
        for permission in t.of_type("AWS::Lambda::Permission").values():
            props = permission["Properties"]
            if t.target(props["FunctionName"]) == receiver:
                conditions: dict[str, Any] = {}
                if "SourceArn" in props:
                    conditions["ArnLike"] = {"aws:SourceArn": t.resolve(props["SourceArn"])}
                if "SourceAccount" in props:
                    conditions["StringEquals"] = {"aws:SourceAccount": t.resolve(props["SourceAccount"])}
                statements.append(
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": t.resolve(props["Principal"])},
                        "Action": props["Action"],
                        "Resource": t.arn(receiver),
                        "Condition": conditions,
                    }
                )
        return statements
    policy_type, attached = {
        "AWS::SNS::Topic": ("AWS::SNS::TopicPolicy", "Topics"),
        "AWS::SQS::Queue": ("AWS::SQS::QueuePolicy", "Queues"),
    }[kind]
    return [
        s
        for p in t.of_type(policy_type).values()
        if {"Ref": receiver} in p["Properties"][attached]
        for s in t.resolve(p["Properties"]["PolicyDocument"]["Statement"])
    ]


def check(t: Template, edge: Edge) -> list[str]:
    """What stops this delivery, as sentences naming sender, receiver and what is missing."""
    if edge.action == "chatbot":
        return []
    if edge.action == FUNCTION_URL:
        return _check_function_url(t, edge)
    if edge.sender.startswith(f"{ROLE}:"):
        return _check_role(t, edge)
    service, key, tls = edge.action.split(":")[0], t.key_of(edge.receiver), {"aws:securetransport": "true"}
    problems = []
    if service != "logs":  # CloudWatch Logs writes into its own log group: only the key matters
        ok, why = judge(
            resource_statements(t, edge.receiver),
            edge.sender,
            edge.action,
            t.arn(edge.receiver),
            _sent(edge, service) | tls,
        )
        problems += [] if ok else [f"{edge}: {service} resource policy: {why}"]
    if key:
        for action in ("kms:GenerateDataKey", "kms:Decrypt"):
            ok, why = judge(key_statements(t, key), edge.sender, action, t.arn(key), _sent(edge, "kms") | tls)
            problems += [] if ok else [f"{edge}: key {key} policy: {why}"]
    return problems


def _check_function_url(t: Template, edge: Edge) -> list[str]:
    granted = set()
    for permission in t.of_type("AWS::Lambda::Permission").values():
        props = permission["Properties"]
        if t.target(props["FunctionName"]) != edge.receiver or props.get("Principal") != PUBLIC:
            continue
        if props["Action"] == "lambda:InvokeFunctionUrl" and props.get("FunctionUrlAuthType") == "NONE":
            granted.add(props["Action"])
        if props["Action"] == "lambda:InvokeFunction" and props.get("InvokedViaFunctionUrl", True) is True:
            granted.add(props["Action"])
    return [
        f"{edge}: the function's resource policy does not grant the public {action}"
        for action in FUNCTION_URL_ACTIONS
        if action not in granted
    ]


def _sent(edge: Edge, service: str) -> dict[str, str]:
    """The request context the sender really sends to this service (SENT, with its doc per row)."""
    if (edge.sender, service) not in SENT:
        raise KeyError(f"no documented request context for {edge.sender} -> {service}: add a row to SENT")
    keys, _doc = SENT[(edge.sender, service)]
    return {k: v for k, v in edge.context.items() if k in keys}


def _check_role(t: Template, edge: Edge) -> list[str]:
    """Same account: the role's identity policy allows, the resource policy must not deny, and the
    role needs the key (its policy, and a key policy that delegates to IAM)."""
    role_id = edge.sender.split(":", 1)[1]
    role, identity, tls = t.arn(role_id), identity_statements(t, role_id), {"aws:securetransport": "true"}
    problems = []
    ok, why = judge(identity, role, edge.action, t.arn(edge.receiver), tls)
    problems += [] if ok else [f"{edge}: role policy: {why}"]
    _, why = judge(resource_statements(t, edge.receiver), role, edge.action, t.arn(edge.receiver), tls)
    problems += [f"{edge}: resource policy: {why}"] if why.startswith("explicitly denied") else []
    if key := t.key_of(edge.receiver):
        actions = ["kms:Decrypt"] if edge.action == "sqs:ReceiveMessage" else ["kms:GenerateDataKey", "kms:Decrypt"]
        for action in actions:
            for where, statements in (("role policy", identity), (f"key {key} policy", key_statements(t, key))):
                ok, why = judge(statements, role, action, t.arn(key), tls)
                problems += [] if ok else [f"{edge}: {where}: {why}"]
    return problems


def key_statements(t: Template, key: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = t.resolve(t.resources[key]["Properties"]["KeyPolicy"]["Statement"])
    return statements


def problems(template: dict[str, Any]) -> list[str]:
    t = Template(template)
    return [problem for edge in edges(t) for problem in check(t, edge)]
