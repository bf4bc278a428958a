"""CloudWatch executing an alarm's SNS action, which moto does not do (its alarms never act, and it has no
`DescribeAlarmHistory`): a stand-in on the deployed stack's CloudWatch client for `doctor --self-alarm`.

On `SetAlarmState`, each SNS action of the new state is judged as AWS would judge it, from the deployed
policies and what CloudWatch sends (`tests/infra/delivery.py` `SENT`, each row with its page): the topic's key
policy must let `cloudwatch.amazonaws.com` use the key, the topic policy must let the alarm publish. Allowed, the
message is published on moto's SNS (so the chat queue receives it) and the history says "Successfully executed
action <arn>"; refused, it says "Failed to execute action <arn>. Received error: ..." in the wording of AWS's
knowledge-center articles (https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger,
https://repost.aws/knowledge-center/cloudwatch-configure-alarm-sns).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from botocore.awsrequest import AWSResponse

from tests.infra.delivery import SENT, judge
from tests.integration.deployed import ACCOUNT, Deployment

CLOUDWATCH = "cloudwatch.amazonaws.com"
KEY_REFUSED = 'Received error: "CloudWatch Alarms does not have authorization to access the SNS topic encryption key."'


class AlarmActions:
    def __init__(self, stack: Deployment) -> None:
        self.stack = stack
        self.history: list[dict[str, Any]] = []
        self.history_off = False  # True: CloudWatch has not yet recorded the action (it never appears)
        self._asked: dict[str, Any] = {}
        self._history_asked: dict[str, Any] = {}
        events = stack.client("cloudwatch").meta.events
        events.register("provide-client-params.cloudwatch.SetAlarmState", self._remember)
        events.register("provide-client-params.cloudwatch.DescribeAlarmHistory", self._remember_history)
        events.register("after-call.cloudwatch.SetAlarmState", self._act)
        events.register("before-call.cloudwatch.DescribeAlarmHistory", self._describe_history)

    def _remember(self, params: dict[str, Any], **_: Any) -> None:
        self._asked = dict(params)

    def _remember_history(self, params: dict[str, Any], **_: Any) -> None:
        self._history_asked = dict(params)

    def _act(self, **_: Any) -> None:
        name, state = self._asked["AlarmName"], self._asked["StateValue"]
        [alarm] = self.stack.client("cloudwatch").describe_alarms(AlarmNames=[name])["MetricAlarms"]
        actions = {"ALARM": "AlarmActions", "OK": "OKActions"}.get(state, "InsufficientDataActions")
        for topic in alarm.get(actions, []):
            refused = self._refused(alarm["AlarmArn"], topic)
            if refused:
                summary = f"Failed to execute action {topic}. {refused}"
            else:
                message = {"AlarmName": name, "NewStateValue": state, "NewStateReason": self._asked["StateReason"]}
                self.stack.client("sns").publish(TopicArn=topic, Message=json.dumps(message))
                summary = f"Successfully executed action {topic}"
            self.history.append(
                {
                    "AlarmName": name,
                    "AlarmType": "MetricAlarm",
                    "Timestamp": datetime.now(UTC),
                    "HistoryItemType": "Action",
                    "HistorySummary": summary,
                    "HistoryData": json.dumps({"actionState": "Failed" if refused else "Succeeded"}),
                }
            )

    def _refused(self, alarm_arn: str, topic: str) -> str:
        """Why AWS would refuse CloudWatch's publish for this alarm ("" when it would not)."""
        sns, kms = self.stack.client("sns"), self.stack.client("kms")
        attributes = sns.get_topic_attributes(TopicArn=topic)["Attributes"]
        policy = json.loads(attributes.get("Policy") or "{}")
        context = dict.fromkeys(SENT[CLOUDWATCH, "sns"][0], "")
        context.update({"aws:sourcearn": alarm_arn, "aws:sourceaccount": ACCOUNT})
        allowed, why = judge(policy.get("Statement", []), CLOUDWATCH, "sns:Publish", topic, context)
        if not allowed:
            return f'Received error: "Resource: {alarm_arn} is not authorized to perform: SNS:Publish ({why})"'
        key = attributes.get("KmsMasterKeyId")
        if key:
            key_policy = json.loads(kms.get_key_policy(KeyId=key, PolicyName="default")["Policy"])
            sent = {
                k: {"aws:sourcearn": alarm_arn, "aws:sourceaccount": ACCOUNT}[k] for k in SENT[(CLOUDWATCH, "kms")][0]
            }
            for action in ("kms:GenerateDataKey", "kms:Decrypt"):
                allowed, _ = judge(key_policy.get("Statement", []), CLOUDWATCH, action, "*", sent)
                if not allowed:
                    return KEY_REFUSED
        return ""

    def _describe_history(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        """DescribeAlarmHistory from the actions recorded (a before-call handler's answer is the response)."""
        asked = self._history_asked
        items = (
            []
            if self.history_off
            else [
                h
                for h in self.history
                if h["AlarmName"] == asked.get("AlarmName")
                and h["HistoryItemType"] == asked.get("HistoryItemType", h["HistoryItemType"])
                and h["Timestamp"] >= asked.get("StartDate", h["Timestamp"])
            ]
        )
        response = AWSResponse("https://monitoring.amazonaws.com/", 200, {}, None)
        return response, {"AlarmHistoryItems": items, "ResponseMetadata": {"HTTPStatusCode": 200}}
