"""The real job-events handler against moto: DynamoDB ledger, SNS topic, SageMaker extension."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from tests.helpers import EVENTS_DIR, NOW, load_event, rule_status, with_detail
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard.domain.events import EventError
from training_guard.domain.pricing import get_products_filters
from training_guard.handlers import wiring
from training_guard_local.emulator import TABLE, Emulation

JOB = "pytorch-mnist-lr01-2026-11-30-02-10-00-123"


def test_issues_found_delivered_three_times_stops_once_and_notifies_once(aws: Emulation) -> None:
    event = load_event("vanishing_gradient_issues_found")
    receipts = [aws.deliver(event) for _ in range(3)]
    assert [r["stopped"] for r in receipts] == [True, False, False]
    assert aws.job_status(JOB) == "Stopping"
    notes = aws.notifications()
    assert [(n["kind"], n["outcome"]) for n in notes] == [("issues_found", "stopped")]
    assert notes[0]["schema"] == contract.NOTIFICATION_SCHEMA


def test_the_stop_is_attributed_by_tags_and_an_audit_record(aws: Emulation) -> None:
    aws.deliver(load_event("vanishing_gradient_issues_found"))
    tags = aws.job_tags(JOB)
    assert tags[contract.TAG_STOPPED_BY] == contract.STOPPED_BY_VALUE
    assert tags[contract.TAG_STOP_RULE] == "VanishingGradient"
    assert tags["team"] == "vision"  # the job's own tags are untouched
    item = aws.client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": f"stop#{JOB}"}})["Item"]
    assert item["rule"]["S"] == "VanishingGradient"
    assert item["stopped_by"]["S"] == "training-guard"
    assert int(item[contract.TABLE_TTL_ATTRIBUTE]["N"]) > 0


def test_transitions_are_recorded_done_with_a_ttl(aws: Emulation) -> None:
    aws.deliver(load_event("vanishing_gradient_issues_found"))
    key = f"t#{JOB}#debugger#VanishingGradient#IssuesFound"
    item = aws.client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": key}})["Item"]
    assert item["state"]["S"] == "done"
    assert item["outcome"]["S"] == "stopped"
    assert "lease_until" not in item
    assert int(item[contract.TABLE_TTL_ATTRIBUTE]["N"]) > 0


def test_rule_error_notifies_and_never_stops(aws: Emulation) -> None:
    receipt = aws.deliver(load_event("rule_error"))
    assert receipt["stopped"] is False
    assert aws.job_status(JOB) == "InProgress"
    assert [n["kind"] for n in aws.notifications()] == ["rule_error"]


def test_stop_race_is_reported_not_retried(aws: Emulation) -> None:
    event = load_event("vanishing_gradient_issues_found")
    aws.put_job(event["detail"])
    aws.client("sagemaker").stop_training_job(TrainingJobName=JOB)  # a person was faster
    receipt = aws.deliver(event)
    assert receipt["stopped"] is False
    assert receipt["outcomes"] == ["already_ended"]
    assert contract.TAG_STOPPED_BY not in aws.job_tags(JOB)


def test_event_without_rule_lists_falls_back_to_describe(aws: Emulation) -> None:
    described = with_detail(
        load_event("in_progress_no_rule_lists"),
        DebugRuleEvaluationStatuses=[rule_status("VanishingGradient", "IssuesFound")],
    )
    aws.put_job(described["detail"])  # what SageMaker knows; the event does not carry it
    receipt = aws.deliver(load_event("in_progress_no_rule_lists"))
    assert receipt["described"] is True
    assert receipt["stopped"] is True
    assert aws.job_status(JOB) == "Stopping"


def test_out_of_order_events_are_harmless(aws: Emulation) -> None:
    finding = load_event("vanishing_gradient_issues_found")
    stopped = with_detail(finding, TrainingJobStatus="Stopped", SecondaryStatus="Stopped")
    aws.deliver(finding)
    aws.finish_stopping(JOB)
    aws.deliver(stopped)
    aws.deliver(finding)  # a stale duplicate after the job stopped
    notes = aws.notifications()
    # the job's end is the guard's stop already announced: folded into it
    assert [n["kind"] for n in notes] == ["issues_found"]


def test_dry_run_stops_nothing_and_says_so(emulation_with: Callable[[GuardConfig], Emulation]) -> None:
    aws = emulation_with(GuardConfig(dry_run=True))
    receipt = aws.deliver(load_event("vanishing_gradient_issues_found"))
    assert receipt["stopped"] is False
    assert aws.job_status(JOB) == "InProgress"
    [note] = aws.notifications()
    assert (note["outcome"], note["dry_run"]) == ("would_stop", True)
    assert note["title"].startswith("Would have stopped")


def test_exempt_job_is_not_stopped(aws: Emulation) -> None:
    aws.deliver(load_event("exempt_issues_found"))
    assert aws.job_status(JOB) == "InProgress"
    [note] = aws.notifications()
    assert note["outcome"] == "would_stop"
    assert "exemption tag" in note["reason"]


def test_an_unusable_event_is_parked_in_the_dead_letter_queue_at_once_with_its_reason(aws: Emulation) -> None:
    broken = with_detail(load_event("failed"), TrainingJobName=None)
    receipt = aws.deliver(broken)  # no exception: retrying cannot help, so Lambda does not retry it
    assert receipt["rejected"] == "detail.TrainingJobName is missing or empty"
    [parked] = aws.events_dead_letters()
    assert parked["reason"] == "unusable event: detail.TrainingJobName is missing or empty"
    assert json.loads(parked["body"]) == broken
    assert aws.notifications() == []


def test_without_a_dead_letter_queue_an_unusable_event_raises_for_lambdas_retries() -> None:
    from tests.fakes import FakeJobs, FakeLedger, FakePublisher
    from training_guard.handlers.job_events import process
    from training_guard.services.responder import Responder

    guard = Responder(GuardConfig(), FakeJobs(), FakeLedger(), FakePublisher())
    with pytest.raises(EventError, match="TrainingJobName is missing"):
        process(with_detail(load_event("failed"), TrainingJobName=None), guard, account=None)


def test_event_from_another_account_is_ignored(aws: Emulation) -> None:
    spoofed = {**load_event("vanishing_gradient_issues_found"), "account": "999999999999"}
    receipt = aws.deliver(spoofed)
    assert receipt["ignored"] == "event from account 999999999999"
    assert aws.job_status(JOB) == "InProgress"
    assert aws.notifications() == []


def test_email_subscribers_get_prose_and_machines_get_json(aws: Emulation) -> None:
    sns = aws.client("sns")
    sqs = aws.client("sqs")
    url = sqs.create_queue(QueueName="wrapped")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=aws.topic_arn, Protocol="sqs", Endpoint=arn)  # not raw: the SNS envelope
    aws.deliver(load_event("failed"))
    envelope = json.loads(sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"])
    assert envelope["Subject"] == f"Training Guard: Training job {JOB} failed"
    assert json.loads(envelope["Message"])["kind"] == "job_failed"
    assert envelope["MessageAttributes"]["severity"]["Value"] == "critical"


def test_what_follows_the_guards_stop_is_folded_into_it_on_every_channel(aws: Emulation) -> None:
    """The diverging job through the real handler: a rule error, the stop, a second finding while it stops, the
    Stopped change with one more rule error. Two messages, not five: everything fans out from the one SNS publish
    (e-mail, the chat queue, Amazon Q Developer), so nothing folded reaches any channel."""
    sqs = aws.client("sqs")
    url = sqs.create_queue(QueueName="every-subscriber")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    aws.client("sns").subscribe(TopicArn=aws.topic_arn, Protocol="sqs", Endpoint=arn)
    finding = load_event("vanishing_gradient_issues_found")
    statuses = finding["detail"]["DebugRuleEvaluationStatuses"]
    before = with_detail(finding, DebugRuleEvaluationStatuses=[rule_status("ExplodingTensor", "Error", "no data")])
    stopping = with_detail(
        finding,
        TrainingJobStatus="Stopping",
        SecondaryStatus="Stopping",
        DebugRuleEvaluationStatuses=[*statuses[:2], rule_status("WeightUpdateRatio", "IssuesFound")],
    )
    stopped = with_detail(
        stopping,
        TrainingJobStatus="Stopped",
        SecondaryStatus="Stopped",
        DebugRuleEvaluationStatuses=[
            *stopping["detail"]["DebugRuleEvaluationStatuses"],
            rule_status("LossNotDecreasing", "Error"),
        ],
    )
    aws.put_job(before["detail"])
    receipts = [aws.deliver(before), aws.deliver(finding), aws.deliver(stopping)]
    aws.finish_stopping(JOB)
    receipts += [aws.deliver(stopped), aws.deliver(stopped)]  # and SageMaker repeats itself
    assert [(n["kind"], n["outcome"]) for n in aws.notifications()] == [
        ("rule_error", "notified"),
        ("issues_found", "stopped"),
    ]
    assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]) == 2
    folded = [
        f"t#{JOB}#debugger#WeightUpdateRatio#IssuesFound",
        f"t#{JOB}#debugger#LossNotDecreasing#Error",
        f"t#{JOB}#job#status#Stopped",
    ]
    assert [k for r in receipts for k in r["folded"]] == folded
    assert receipts[-1]["duplicates"] == 4  # the repeat: every transition of the event done, folded ones too
    dynamodb = aws.client("dynamodb")
    for transition in folded:
        item = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": transition}})["Item"]
        assert (item["state"]["S"], item["outcome"]["S"]) == ("done", "folded")
    record = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": f"stop#{JOB}"}})["Item"]
    assert record["confirmed"] == {"BOOL": True}
    assert sorted(record["folded"]["SS"]) == sorted(folded)


def test_in_slack_app_mode_the_folded_end_goes_to_the_chat_queue_alone_as_a_card_update(
    emulation_with: Callable[[GuardConfig], Emulation],
) -> None:
    """The job's "stopped" change after the guard's stop: folded (no SNS publish: e-mail and Q Developer see
    nothing), and handed to the chat queue straight, card-only, for the notifier to update the job's card."""
    app = {"mode": "app", "webhooks": None, "app": {"channels": {"default": "C0ALERTS"}, "allowed_users": ["U0A"]}}
    aws = emulation_with(GuardConfig.from_dict({"slack": app}))
    sqs = aws.client("sqs")
    url = sqs.create_queue(QueueName="every-subscriber")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    aws.client("sns").subscribe(
        TopicArn=aws.topic_arn, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"}
    )
    finding = load_event("vanishing_gradient_issues_found")
    aws.deliver(finding)
    aws.finish_stopping(JOB)
    receipt = aws.deliver(with_detail(finding, TrainingJobStatus="Stopped", SecondaryStatus="Stopped"))
    assert (receipt["folded"], receipt["card_problems"]) == ([f"t#{JOB}#job#status#Stopped"], [])
    published = [json.loads(m["Body"]) for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]]
    assert [(d["kind"], d.get(contract.CARD_ONLY)) for d in published] == [("issues_found", None)]
    chat = [
        json.loads(m["Body"])
        for m in sqs.receive_message(QueueUrl=aws.chat_queue_url, MaxNumberOfMessages=10)["Messages"]
    ]
    assert sorted((d["kind"], d.get(contract.CARD_ONLY, False)) for d in chat) == [
        ("issues_found", False),
        ("job_stopped", True),
    ]
    [card] = [d for d in chat if d.get(contract.CARD_ONLY)]
    assert (card["job"]["status"], card["transition"]) == ("Stopped", f"t#{JOB}#job#status#Stopped")
    assert card["reason"].startswith("by Training Guard at ")


def test_a_card_update_the_queue_refuses_is_reported_not_raised(
    emulation_with: Callable[[GuardConfig], Emulation], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = {"mode": "app", "webhooks": None, "app": {"channels": {"default": "C0ALERTS"}, "allowed_users": ["U0A"]}}
    aws = emulation_with(GuardConfig.from_dict({"slack": app}))
    finding = load_event("vanishing_gradient_issues_found")
    aws.deliver(finding)
    aws.finish_stopping(JOB)
    aws.client("sqs").delete_queue(QueueUrl=aws.chat_queue_url)  # e.g. a queue its role may not send to
    receipt = aws.deliver(with_detail(finding, TrainingJobStatus="Stopped", SecondaryStatus="Stopped"))
    [problem] = receipt["card_problems"]
    assert problem.startswith(f"t#{JOB}#job#status#Stopped: sqs:SendMessage of a card update to ")
    assert "NonExistentQueue" in problem
    item = aws.client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": f"t#{JOB}#job#status#Stopped"}})
    assert item["Item"]["outcome"]["S"] == "folded"


# --- spend ------------------------------------------------------------------------------------------------
def stubbed_price_list(aws: Emulation, recording: str, instance_type: str) -> Stubber:
    """moto has no Price List API: the functions get a pricing client that plays a recorded GetProducts answer
    (tests/events/pricing/), checked against the request the guard must make."""
    pricing = boto3.client("pricing", region_name="us-east-1")
    stub = Stubber(pricing)
    pages: list[dict[str, Any]] = json.loads((EVENTS_DIR / "pricing" / f"{recording}.json").read_text())
    token: str | None = None
    for page in pages:
        request = {
            "ServiceCode": "AmazonSageMaker",
            "Filters": get_products_filters("us-east-1", instance_type),
            "FormatVersion": "aws_v1",
            "MaxResults": 100,
        }
        if token:
            request["NextToken"] = token
        stub.add_response("get_products", page, request)
        token = page.get("NextToken")
    aws.price_with(lambda: pricing)
    return stub


G5 = {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30}
G5_RATE = 2 * 1.515  # two instances at the recorded answer's 1.515 USD/h
RAN, LEFT = 2910, 86400 - 2910  # started 02:11:30, delivered at 03:00:00, max runtime a day


def test_a_stop_is_announced_recorded_and_tagged_with_its_spend_from_the_price_list_api(
    aws: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub = stubbed_price_list(aws, "get_products_ml_g5_2xlarge_us_east_1_two_pages", "ml.g5.2xlarge")
    with stub:
        receipt = aws.deliver(with_detail(load_event("vanishing_gradient_issues_found"), ResourceConfig=G5), at=NOW)
    stub.assert_no_pending_responses()  # both pages read
    assert receipt["stopped"] is True
    so_far, avoided = round(G5_RATE * RAN / 3600, 2), round(G5_RATE * LEFT / 3600, 2)
    assert (so_far, avoided) == (2.45, 70.27)
    [note] = aws.notifications()
    spend = note["spend"]
    assert (spend["so_far_usd"], spend["avoided_usd"], spend["avoided_label"]) == (so_far, avoided, "up to")
    assert spend["price_source"] == "AWS Price List API (2026-08-20)"
    assert [(p["usd_per_hour"], p["reference"]) for p in spend["prices"]] == [(1.515, "TESTSKUG52XL0001")]
    assert receipt["spend"] == spend
    dynamodb = aws.client("dynamodb")
    record = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": f"stop#{JOB}"}})["Item"]
    assert record["spend_avoided_usd"] == {"N": "70.27"}
    assert record["spend_so_far_usd"] == {"N": "2.45"}
    assert record["price_source"] == {"S": "AWS Price List API (2026-08-20)"}
    assert record["instance_types"] == {"L": [{"S": "ml.g5.2xlarge"}]}
    assert aws.job_tags(JOB)[contract.TAG_SPEND_AVOIDED] == "70.27"
    cached = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "price#us-east-1#ml.g5.2xlarge"}})["Item"]
    assert cached["usd_per_hour"] == {"N": "1.515"}


def test_a_new_container_prices_from_the_state_tables_cache_without_asking_the_api(
    aws: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub = stubbed_price_list(aws, "get_products_ml_g5_2xlarge_us_east_1_two_pages", "ml.g5.2xlarge")
    with stub:
        aws.deliver(with_detail(load_event("rule_error"), ResourceConfig=G5), at=NOW)
    wiring.root().price_list.forget()  # as a new container: nothing in memory, the client not asked again
    error = with_detail(load_event("rule_error"), ResourceConfig=G5)
    error["detail"]["DebugRuleEvaluationStatuses"] = [rule_status("LossNotDecreasing", "Error", "no data")]
    with stub:  # no response left: a call to the API would fail the test
        aws.deliver(error, at=NOW)
    first, second = aws.notifications()
    assert first["spend"]["so_far_usd"] == second["spend"]["so_far_usd"] == round(G5_RATE * RAN / 3600, 2)
    assert second["spend"]["price_source"] == "AWS Price List API (2026-08-20)"
    assert second["spend"]["avoided_label"] is None  # a rule error stops nothing


def test_without_a_reachable_price_list_the_stop_goes_ahead_with_its_spend_unknown(aws: Emulation) -> None:
    """moto answers GetProducts with a 404: the guard stops, announces and records the stop all the same."""
    receipt = aws.deliver(load_event("vanishing_gradient_issues_found"), at=NOW)  # ml.p3.2xlarge: not in the table
    assert receipt["stopped"] is True
    [note] = aws.notifications()
    assert (note["spend"]["so_far_usd"], note["spend"]["avoided_usd"]) == (None, None)
    assert any("GetProducts ml.p3.2xlarge in us-east-1 failed" in p for p in receipt["price_problems"])
    record = aws.client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": f"stop#{JOB}"}})["Item"]
    assert record["spend_avoided_usd"] == {"NULL": True}
    assert aws.job_tags(JOB)[contract.TAG_SPEND_AVOIDED] == "unknown"
