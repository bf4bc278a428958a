"""Redriving dead letters: the original event is recovered and handed on, then deleted."""

from __future__ import annotations

import json
from typing import Any

from botocore.stub import Stubber

from tests.helpers import load_event
from training_guard.config.model import GuardConfig
from training_guard_local import redrive
from training_guard_local.emulator import Emulation


def lambda_record(event: dict[str, Any]) -> str:
    """What Lambda sends to an on-failure destination after the function's retries."""
    return json.dumps(
        {
            "version": "1.0",
            "timestamp": "2026-11-30T03:00:00.000Z",
            "requestContext": {
                "requestId": "r-1",
                "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:f:$LATEST",
                "condition": "RetriesExhausted",
                "approximateInvokeCount": 3,
            },
            "requestPayload": event,
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "responsePayload": {
                "errorMessage": "sns:Publish to arn:... failed: AccessDenied",
                "errorType": "ActionFailed",
            },
        }
    )


def test_events_go_back_to_their_function_and_chat_messages_to_their_queue() -> None:
    event = load_event("vanishing_gradient_issues_found")
    with Emulation(GuardConfig()) as aws:
        sqs = aws.client("sqs")
        dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
        chat = sqs.create_queue(QueueName="chat")["QueueUrl"]
        sqs.send_message(QueueUrl=dlq, MessageBody=lambda_record(event))
        sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps(event))  # from the rule's target DLQ
        lambda_client = aws.client("lambda")
        stubber = Stubber(lambda_client)
        for _ in range(2):
            stubber.add_response(
                "invoke",
                {"StatusCode": 202},
                {"FunctionName": "job-events", "InvocationType": "Event", "Payload": json.dumps(event).encode()},
            )
        lines: list[str] = []
        with stubber:
            assert redrive.redrive(sqs, dlq, redrive.to_function(lambda_client, "job-events"), say=lines.append) == 2
        stubber.assert_no_pending_responses()
        assert sqs.receive_message(QueueUrl=dlq).get("Messages", []) == []
        assert any("RetriesExhausted: ActionFailed sns:Publish" in line for line in lines)

        sqs.send_message(
            QueueUrl=dlq,
            MessageBody='{"schema": "training-guard.notification/1"}',
            MessageAttributes={
                "reason": {"DataType": "String", "StringValue": "webhook 'default': HTTP 404 no_service"}
            },
        )
        shown: list[str] = []
        assert redrive.redrive(sqs, dlq, redrive.to_queue(sqs, chat), dry_run=True, say=shown.append) == 1
        assert shown[0].endswith("webhook 'default': HTTP 404 no_service")
        assert len(sqs.receive_message(QueueUrl=dlq).get("Messages", [])) == 1  # a dry run keeps it
        assert sqs.receive_message(QueueUrl=chat).get("Messages", []) == []


def test_reading_a_dead_letter_recovers_the_event_and_the_reason() -> None:
    event = load_event("failed")
    letter = redrive.read({"MessageId": "m", "ReceiptHandle": "h", "Body": lambda_record(event)})
    assert json.loads(letter.payload) == event
    assert letter.why == "RetriesExhausted: ActionFailed sns:Publish to arn:... failed: AccessDenied"
    plain = redrive.read({"MessageId": "m", "ReceiptHandle": "h", "Body": "not json"})
    assert (plain.payload, plain.why) == ("not json", "no reason recorded")
