"""Every place where an AWS service delivers into the guard's resources is allowed, as AWS decides it.

moto enforces no resource policy and no key policy; this walks the synthesized template instead:
alarm actions, rule targets and their dead-letter queues, subscriptions and theirs, the functions'
on-failure destinations and queue polling, the Q Developer channel and the encrypted log groups.
The evaluator (tests/infra/delivery.py) is proven on copies of the template broken on purpose.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from infra.components import encryption
from tests.infra import delivery
from tests.infra.conftest import Synth

FULL = {
    "emails": ["ml-oncall@example.com"],
    "slack": {"webhooks": {"default": {}, "on-call": {}, "vision": {"secret_name": "teams/vision/slack"}}},
    "q_developer": {"slack_workspace_id": "T0123ABCD", "slack_channel_id": "C0123ABCD"},
    "metric_guards": [{"name": "loss-diverging", "metric": "train:loss", "threshold": 5, "action": "stop"}],
    "stall": {"minutes": 30},
}


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    config = tmp_path_factory.mktemp("config") / "full.json"
    config.write_text(json.dumps(FULL))
    return Synth(tmp_path_factory.mktemp("full"), {"config": str(config)})


def one(template: dict[str, Any], kind: str, path_part: str = "") -> dict[str, Any]:
    resources: list[dict[str, Any]] = [
        r for k, r in template["Resources"].items() if r["Type"] == kind and path_part in k
    ]
    [resource] = resources
    return resource


def broken(full: Synth, damage: Callable[[dict[str, Any]], None]) -> list[str]:
    template = copy.deepcopy(full.json)
    damage(template)
    return delivery.problems(template)


def edges_of(full: Synth) -> list[delivery.Edge]:
    return delivery.edges(delivery.Template(full.json))


def test_every_delivery_of_the_shipped_stack_is_allowed(synth: Synth) -> None:
    assert delivery.problems(synth.json) == []


def test_every_delivery_of_a_full_configuration_is_allowed(full: Synth) -> None:
    assert delivery.problems(full.json) == []


def test_the_graph_has_every_kind_of_delivery(full: Synth) -> None:
    found = {(e.sender.split(":")[0], e.action, e.via.split(" of ")[0]) for e in edges_of(full)}
    assert found >= {
        ("cloudwatch.amazonaws.com", "sns:Publish", "alarm action"),  # self-monitoring alarms -> topic
        ("events.amazonaws.com", "lambda:InvokeFunction", "target"),  # rules -> functions
        ("events.amazonaws.com", "sqs:SendMessage", "dead-letter queue"),  # rules' target DLQs
        ("sns.amazonaws.com", "sqs:SendMessage", "sqs subscription"),  # topic -> chat queue
        ("sns.amazonaws.com", "sqs:SendMessage", "sqs subscription DLQ"),
        ("sns.amazonaws.com", "sqs:SendMessage", "email subscription DLQ"),
        ("sns.amazonaws.com", "chatbot", "Q Developer channel on AlertingTopic08189029"),
        (delivery.ROLE, "sqs:SendMessage", "on-failure destination"),  # functions' async failures
        (delivery.ROLE, "sqs:ReceiveMessage", "event source"),  # the notifier polls the chat queue
        (delivery.ROLE, "sns:Publish", "granted to its function"),  # responders publish notifications
        (f"logs.{delivery.REGION}.amazonaws.com", "logs", "encrypted log group"),
        # the training log group's subscription -> the log rules' function
        (
            f"logs.{delivery.REGION}.amazonaws.com",
            "lambda:InvokeFunction",
            "subscription filter training-guard-log-rules on /aws/sagemaker/TrainingJobs",
        ),
    }
    alarms = [e for e in edges_of(full) if e.sender == "cloudwatch.amazonaws.com"]
    assert (
        len(alarms) == 22
    )  # 6 functions x (errors, throttles) + 6 dead-letter queues + SlackSecretNotSet + FleetAlarmsOverCap
    # + the log rules' LogDeliveryErrors and LogDeliveryThrottling


def test_every_sender_has_a_documented_request_context() -> None:
    for (sender, service), (keys, doc) in delivery.SENT.items():
        assert doc.startswith("https://docs.aws.amazon.com/"), (sender, service)
        assert all(k == k.lower() for k in keys)
    assert delivery.SENT[("events.amazonaws.com", "kms")][0] == frozenset()  # no condition is documented


def test_a_topic_policy_without_the_cloudwatch_allow_is_reported_for_every_alarm(full: Synth) -> None:
    def drop_cloudwatch_allow(template: dict[str, Any]) -> None:
        document = one(template, "AWS::SNS::TopicPolicy")["Properties"]["PolicyDocument"]
        document["Statement"] = [s for s in document["Statement"] if s["Effect"] == "Deny"]

    problems = broken(full, drop_cloudwatch_allow)
    assert len(problems) == 22
    assert all(p.startswith("cloudwatch.amazonaws.com -> AlertingTopic") for p in problems)
    assert (
        "cloudwatch.amazonaws.com -> AlertingTopic08189029 (alarm action of TrainingGuard-self-JobEventsErrors): "
        "sns resource policy: no Allow for sns:Publish"
    ) in problems


def test_a_condition_on_the_eventbridge_key_grant_is_reported_for_every_rule_dead_letter_queue(full: Synth) -> None:
    def condition_events_grant(template: dict[str, Any]) -> None:
        statements = one(template, "AWS::KMS::Key")["Properties"]["KeyPolicy"]["Statement"]
        [grant] = [s for s in statements if s.get("Sid") == encryption.SID_EVENTBRIDGE]
        grant["Condition"] = {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}

    problems = broken(full, condition_events_grant)
    rules = {e.via for e in edges_of(full) if e.via.startswith("dead-letter queue of rule")}
    assert len(rules) == 5  # job events, alarm events, the sweeper's and the stall check's schedules, the digest's
    assert len(problems) == 2 * len(rules)  # kms:GenerateDataKey and kms:Decrypt each
    assert all(p.startswith("events.amazonaws.com -> ") and "dead-letter queue of rule" in p for p in problems)
    assert all(
        p.endswith("unmet conditions: StringEquals aws:SourceAccount (a key the sender does not send)")
        for p in problems
    )


def test_a_missing_queue_policy_is_reported_for_the_subscription_that_needs_it(full: Synth) -> None:
    chat_queue = next(k for k in full.resources("AWS::SQS::Queue") if k.startswith("ChatQueue"))

    def drop_chat_queue_policy(template: dict[str, Any]) -> None:
        template["Resources"] = {
            k: r
            for k, r in template["Resources"].items()
            if not (r["Type"] == "AWS::SQS::QueuePolicy" and {"Ref": chat_queue} in r["Properties"]["Queues"])
        }

    assert broken(full, drop_chat_queue_policy) == [
        f"sns.amazonaws.com -> {chat_queue} (sqs subscription of AlertingTopic08189029): "
        "sqs resource policy: no Allow for sqs:SendMessage"
    ]


def test_an_explicit_deny_wins_over_every_allow_of_every_sender(full: Synth) -> None:
    def deny_all(template: dict[str, Any]) -> None:
        document = one(template, "AWS::SNS::TopicPolicy")["Properties"]["PolicyDocument"]
        document["Statement"].append(
            {"Sid": "DenyAll", "Effect": "Deny", "Principal": "*", "Action": "*", "Resource": "*"}
        )

    problems = broken(full, deny_all)
    to_topic = [e for e in edges_of(full) if e.receiver.startswith("AlertingTopic") and e.action == "sns:Publish"]
    assert len(problems) == len(to_topic) > 12  # the alarms and every function that publishes
    assert all(p.endswith("explicitly denied by statement DenyAll") for p in problems)
    assert any(p.startswith("role:JobEventsHandlerRole") for p in problems)


def test_a_role_without_the_key_cannot_write_its_encrypted_dead_letters(full: Synth) -> None:
    def drop_key_grant(template: dict[str, Any]) -> None:
        for policy in template["Resources"].values():
            if policy["Type"] == "AWS::IAM::Policy" and "JobEventsHandler" in json.dumps(policy["Properties"]["Roles"]):
                statements = policy["Properties"]["PolicyDocument"]["Statement"]
                statements[:] = [s for s in statements if s.get("Sid") != "UseGuardKey"]

    problems = broken(full, drop_key_grant)
    assert problems
    assert all(p.startswith("role:JobEventsHandlerRole") and "role policy: no Allow for kms:" in p for p in problems)
