"""Every limit the guard relies on, exercised at the limit (docs/limits.md is the table of them).

Pure: fakes, botocore's Stubber (the real request shapes, nothing sent) and, for Slack's pacing, a
listener on 127.0.0.1. The limits SageMaker and CloudWatch state in their API models (the same
numbers as their API reference pages) are read from botocore's copy of those models; the others are
written once below, each with the page it comes from. The guard's own constants are imported.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.stub import Stubber

from tests.fakes import FakeAlarms, FakeJobs, FakeLedger, FakePrices, FakePublisher, FakeTrainingMetrics
from tests.helpers import NOW, load_event
from training_guard import contract
from training_guard.adapters.cloudwatch import DELETE_BATCH, METRIC_DATA_BATCH, CloudWatchAlarms, TrainingMetrics
from training_guard.adapters.ledger import DynamoLedger
from training_guard.adapters.sagemaker import SageMakerJobs
from training_guard.adapters.slack import MIN_INTERVAL_SECONDS, Delivery, WebhookSender
from training_guard.adapters.sns import SnsPublisher
from training_guard.config.model import GuardConfig, StallGuard, settings_of
from training_guard.domain import metric_guards
from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import TRAINING, TrainingJob, parse_event
from training_guard.domain.price_data import training_prices
from training_guard.domain.pricing import PriceQuote
from training_guard.render import slack_messages
from training_guard.render.messages import SUBJECT_MAX_CHARS
from training_guard.services.chat import ChatDelivery
from training_guard.services.ports import Claim, StopRecord, StopSpend
from training_guard.services.responder import AUDIT_RETENTION_SECONDS, Responder, attribution_tags, tag_value
from training_guard.services.sweeper import EVER_PUBLISHED_LOOKBACK, EVER_PUBLISHED_PERIOD_SECONDS, Sweeper
from training_guard_local.slack_listener import SlackListener

REGION = "us-east-1"
ACCOUNT = "123456789012"
TOPIC_ARN = f"arn:aws:sns:{REGION}:{ACCOUNT}:training-guard-notifications"

# --- Limits not in an API model, each from its page -------------------------------------------------
# A topic's default MaximumMessageSize: "the combined size of the message body and message attributes",
# else InvalidParameter. https://docs.aws.amazon.com/sns/latest/dg/large-message-payloads.md
SNS_MAX_MESSAGE_BYTES = 262_144
# "a maximum of 10 message attributes can be sent when Raw Message Delivery is enabled" (the chat queue's
# subscription is raw). https://docs.aws.amazon.com/sns/latest/dg/SNSMessageAttributes.html
SNS_RAW_DELIVERY_MAX_ATTRIBUTES = 10
# Item 400 KB (1 KB = 1024 bytes), partition key value 2048 bytes.
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html
DYNAMODB_ITEM_MAX_BYTES = 400 * 1024
DYNAMODB_PARTITION_KEY_MAX_BYTES = 2048
# "as many as 500 different metrics in a single request, with a total of as many as 100,800 data points";
# 1-minute data points are kept 15 days, 5-minute 63 days, hourly 455 days.
# https://docs.amazonaws.cn/en_us/AmazonCloudWatch/latest/APIReference/API_GetMetricData.md
GET_METRIC_DATA_MAX_QUERIES = 500
GET_METRIC_DATA_MAX_DATAPOINTS = 100_800
RETENTION_BY_PERIOD = {60: timedelta(days=15), 300: timedelta(days=63), 3600: timedelta(days=455)}
# "For alarms with a period of less than one hour (3,600 seconds), the total evaluation period can't be
# longer than one day (86,400 seconds)."
# https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/cloudwatch/aws.sdk.kotlin.services.cloudwatch.model/-put-metric-alarm-request/period.html
ALARM_MAX_EVALUATION_SECONDS_UNDER_AN_HOUR = 86_400
# SageMaker's tag pattern, `[\p{L}\p{Z}\p{N}_.:/=+\-@]*`. https://docs.aws.amazon.com/sagemaker/latest/dg/API_Tag.html
TAG_PUNCTUATION = frozenset("_.:/=+-@")


@cache
def _model(service: str) -> Any:
    return botocore.session.get_session().get_service_model(service)


def api_max(service: str, shape: str) -> int:
    """A maximum from the service's API model (botocore ships AWS's own model)."""
    return int(_model(service).shape_for(shape).metadata["max"])


def request_max(service: str, operation: str, member: str) -> int:
    return int(_model(service).operation_model(operation).input_shape.members[member].metadata["max"])


JOB_NAME_MAX = api_max("sagemaker", "TrainingJobName")  # 63
TUNING_JOB_NAME_MAX = api_max("sagemaker", "HyperParameterTuningJobName")
TAGS_MAX = api_max("sagemaker", "TagList")  # 50
TAG_KEY_MAX = api_max("sagemaker", "TagKey")  # 128
RULE_STATUSES_MAX = api_max("sagemaker", "DebugRuleEvaluationStatuses")  # 20, and 20 profiler statuses
RULE_NAME_MAX = api_max("sagemaker", "RuleConfigurationName")  # 256
STATUS_DETAILS_MAX = api_max("sagemaker", "StatusDetails")  # 1024
FAILURE_REASON_MAX = api_max("sagemaker", "FailureReason")  # 1024
INSTANCE_GROUPS_MAX = api_max("sagemaker", "InstanceGroups")  # 5
INSTANCE_GROUP_NAME_MAX = api_max("sagemaker", "InstanceGroupName")  # 64
# Five training instance types, for the five instance groups of the largest job (priced at made-up prices).
GROUP_TYPES = ("ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.48xlarge", "ml.trn1.32xlarge", "ml.m5.24xlarge")


def aws(service: str) -> Any:
    return boto3.client(service, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")


def capture(client: Any, operation: str) -> list[dict[str, Any]]:
    """The parameters of every `operation` call the client makes, as the caller passed them."""
    seen: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        seen.append(dict(params))

    client.meta.events.register(
        f"provide-client-params.{client.meta.service_model.service_id.hyphenize()}.{operation}", record
    )
    return seen


def sagemaker_tag_text(text: str) -> bool:
    return all(unicodedata.category(c)[0] in "LZN" or c in TAG_PUNCTUATION for c in text)


# --- The largest notification the guard builds -------------------------------------------------------


def largest_event(letter: str, *, guard_tags: bool) -> dict[str, Any]:
    """A state-change event with every field SageMaker bounds at its maximum, text made of `letter`.

    `guard_tags`: a running job whose 50 tags are all unreadable per-job guard tags (the longest
    reason the guard writes). Otherwise a failed job with 20 debugger and 20 profiler rules that found
    issues, 1024-character details and failure reason, and 50 tags (the most rule notifications).
    """
    event = load_event("vanishing_gradient_issues_found")
    detail = event["detail"]
    name = "j" * JOB_NAME_MAX
    detail["TrainingJobName"] = name
    detail["TrainingJobArn"] = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name}"
    detail["TuningJobArn"] = (
        f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:hyper-parameter-tuning-job/{'t' * TUNING_JOB_NAME_MAX}"
    )
    # The most a job's spend lists: five heterogeneous groups, each with its price and its source.
    detail["ResourceConfig"] = {
        "InstanceGroups": [
            {"InstanceGroupName": f"{i}{letter * (INSTANCE_GROUP_NAME_MAX - 1)}", "InstanceType": t, "InstanceCount": 1}
            for i, t in enumerate(GROUP_TYPES)
        ]
    }
    detail["EnableManagedSpotTraining"] = True
    prefix = contract.JOB_ALARM_TAG_PREFIX if guard_tags else ""
    detail["Tags"] = {
        f"{prefix}{i:02d}{letter * (TAG_KEY_MAX - len(prefix) - 2)}": letter * contract.TAG_VALUE_MAX_CHARS
        for i in range(TAGS_MAX)
    }
    if guard_tags:  # running: SageMaker gives a FailureReason only once a job failed
        detail["DebugRuleEvaluationStatuses"] = []
        detail["ProfilerRuleEvaluationStatuses"] = []
        return event
    detail["TrainingJobStatus"] = "Failed"
    detail["SecondaryStatus"] = "Failed"
    detail["FailureReason"] = letter * FAILURE_REASON_MAX

    def rules(kind: str) -> list[dict[str, Any]]:
        return [
            {
                "RuleConfigurationName": f"{kind}{i:02d}{letter * (RULE_NAME_MAX - 3)}",
                "RuleEvaluationJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:processing-job/{'p' * JOB_NAME_MAX}",
                "RuleEvaluationStatus": "IssuesFound",
                "StatusDetails": letter * STATUS_DETAILS_MAX,
                "LastModifiedTime": 1796004905123,
            }
            for i in range(RULE_STATUSES_MAX)
        ]

    detail["DebugRuleEvaluationStatuses"] = rules("d")
    detail["ProfilerRuleEvaluationStatuses"] = rules("p")
    return event


def published(event: dict[str, Any]) -> list[dict[str, Any]]:
    """Every Publish request the responder sends for `event` (through the real SnsPublisher)."""
    client = aws("sns")
    requests = capture(client, "Publish")
    stub = Stubber(client)
    for _ in range(2 * RULE_STATUSES_MAX + 2):
        stub.add_response("publish", {"MessageId": "m-1"})
    parsed = parse_event(event)
    jobs = FakeJobs(jobs={parsed.job.name: parsed.job})
    # Made-up prices with the longest source the shipped table names, so the spend object is at its largest.
    source = max((p.source for p in training_prices.TRAINING_PRICES), key=len)
    prices = FakePrices(
        quotes={(REGION, t): PriceQuote(t, REGION, 1.0, "table", "2026-09-22", source) for t in GROUP_TYPES}
    )
    guard = Responder(
        GuardConfig(), jobs, FakeLedger(), SnsPublisher(client, TOPIC_ARN), alarms=FakeAlarms(), prices=prices
    )
    with stub:
        guard.handle(parsed, now=NOW)
    return requests


def sns_bytes(request: Mapping[str, Any]) -> int:
    """What SNS checks against MaximumMessageSize: the body plus each attribute's name, type and value."""
    size = len(request["Message"].encode())
    for name, attribute in request.get("MessageAttributes", {}).items():
        size += len(name.encode()) + len(attribute["DataType"].encode()) + len(attribute["StringValue"].encode())
    return size


SCENARIOS = {
    "40 rule findings of a failed job": False,
    "50 unreadable per-job guard tags": True,
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_largest_ascii_notification_fits_in_one_sns_message(scenario: str) -> None:
    """SNS refuses a Publish over the topic's MaximumMessageSize (256 KiB by default), body and
    attributes together. https://docs.aws.amazon.com/sns/latest/dg/large-message-payloads.md
    Each with the largest spend object (five instance groups, each priced with the table's longest source).
    Measured: 40 rule findings 62,593 bytes; 50 unreadable guard tags 125,518 bytes, uncut."""
    requests = published(largest_event("x", guard_tags=SCENARIOS[scenario]))
    assert requests, "nothing was published"
    assert max(sns_bytes(r) for r in requests) <= SNS_MAX_MESSAGE_BYTES
    spend = json.loads(json.loads(requests[0]["Message"])["sqs"])["spend"]
    assert [p["instance_type"] for p in spend["prices"]] == list(GROUP_TYPES)  # whole, not cut
    assert spend["so_far_usd"] is not None
    for request in requests:
        assert len(request["Subject"]) <= SUBJECT_MAX_CHARS < 100
        assert len(request["MessageAttributes"]) <= SNS_RAW_DELIVERY_MAX_ATTRIBUTES


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_largest_notification_with_letters_outside_ascii_fits_in_one_sns_message(scenario: str) -> None:
    """The same notification when its text uses the letters SageMaker's tag pattern allows
    (\\p{L}: https://docs.aws.amazon.com/sagemaker/latest/dg/API_Tag.html), against SNS's 256 KiB
    (https://docs.aws.amazon.com/sns/latest/dg/large-message-payloads.md). Measured: 163,193 and 167,937 bytes."""
    requests = published(largest_event("あ", guard_tags=SCENARIOS[scenario]))
    assert max(sns_bytes(r) for r in requests) <= SNS_MAX_MESSAGE_BYTES


def test_the_largest_notification_renders_within_block_kit_limits() -> None:
    """Header 150 characters, section text 3000, at most 10 fields of 2000 each, button text 75, at most 50
    blocks a message (slack_messages._checked checks all but the last; Slack's Block Kit reference:
    https://docs.slack.dev/tools/node-slack-sdk/reference/web-api/interfaces/SectionBlock,
    https://docs.slack.dev/reference/block-kit/blocks)."""
    [request, *_] = published(largest_event("x", guard_tags=False))
    document = json.loads(json.loads(request["Message"])["sqs"])
    fallback, blocks = slack_messages.render(document)
    assert len(blocks) <= 50
    assert len(fallback) <= slack_messages.FALLBACK_MAX
    header = blocks[0]["text"]["text"]
    assert len(header) == slack_messages.HEADER_MAX  # cut, not refused
    for block in blocks:
        if block["type"] == "section":
            assert len(block.get("text", {}).get("text", "")) <= slack_messages.SECTION_MAX
            assert len(block.get("fields", [])) <= 10
            assert all(len(f["text"]) <= slack_messages.FIELD_MAX for f in block.get("fields", []))
        for element in block.get("elements", []):
            if element.get("type") == "button":
                assert len(element["text"]["text"]) <= slack_messages.BUTTON_TEXT_MAX


# --- SageMaker: rule statuses, tags ---------------------------------------------------------------------


def test_twenty_debugger_and_twenty_profiler_findings_stop_the_job_once_and_tell_one_story() -> None:
    """A job carries at most 20 debugger and 20 profiler rule statuses (DescribeTrainingJob,
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeTrainingJob.html): all 40 are
    decided, the job is stopped by one StopTrainingJob call, that stop is announced, and the other 39 are
    recorded, folded into the stop (each still a transition of the ledger and the stop record)."""
    event = largest_event("x", guard_tags=False)
    detail = event["detail"]
    detail.update(TrainingJobStatus="InProgress", SecondaryStatus="Training", Tags={})
    del detail["FailureReason"]
    parsed = parse_event(event)
    assert parsed.job.rules is not None
    assert len(parsed.job.rules) == 2 * RULE_STATUSES_MAX
    jobs, publisher = FakeJobs(jobs={parsed.job.name: parsed.job}), FakePublisher()
    receipt = Responder(GuardConfig(), jobs, FakeLedger(), publisher).handle(parsed, now=NOW)
    assert jobs.stop_calls == [parsed.job.name]
    assert receipt.stopped is True
    outcomes = [(n.finding.source if n.finding else "", n.outcome.value) for n in publisher.published]
    assert outcomes == [("debugger", "stopped")]
    assert len(receipt.folded) == 2 * RULE_STATUSES_MAX - 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a" * contract.TAG_VALUE_MAX_CHARS, "a" * contract.TAG_VALUE_MAX_CHARS),  # at the limit: kept whole
        ("a" * contract.TAG_VALUE_MAX_CHARS + "b", "a" * contract.TAG_VALUE_MAX_CHARS),  # one past: cut
        ("Ünïcødé 損失 Ⅻ ² _.:/=+-@", "Ünïcødé 損失 Ⅻ ² _.:/=+-@"),  # letters, numbers, the 8 marks: kept
        ('rule(1); "x" <b>&\n\u3000\ttail', "rule 1 x b tail"),  # anything else becomes one space
    ],
)
def test_attribution_tag_values_keep_to_sagemakers_pattern_and_256_characters(text: str, expected: str) -> None:
    """Tag values: at most 256 characters of `[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]`.
    https://docs.aws.amazon.com/sagemaker/latest/dg/API_Tag.html"""
    value = tag_value(text)
    assert value == expected
    assert sagemaker_tag_text(value)


def test_attribution_tags_of_the_longest_stop_are_legal_sagemaker_tags() -> None:
    """Keys at most 128 characters, values 256, both of SageMaker's tag pattern, for the longest job and
    rule names SageMaker allows. https://docs.aws.amazon.com/sagemaker/latest/dg/API_Tag.html"""
    rule = "R" * RULE_NAME_MAX
    record = StopRecord(
        job="j" * JOB_NAME_MAX, rule=rule, reason=f"rules.actions.{rule} = stop; (x)", at=NOW, event_id="e" * 36
    )
    for avoided in (10.0**12, 0.0, None):  # a trillion dollars, nothing, unknown
        tags = attribution_tags(record, StopSpend(avoided, None, None, ()))
        assert len(tags) == 5
        for key, value in tags.items():
            assert 1 <= len(key) <= TAG_KEY_MAX
            assert sagemaker_tag_text(key)
            assert len(value) <= contract.TAG_VALUE_MAX_CHARS
            assert sagemaker_tag_text(value)
        assert tags[contract.TAG_STOP_RULE] == rule[: contract.TAG_VALUE_MAX_CHARS]
    assert tags[contract.TAG_SPEND_AVOIDED] == "unknown"


class TagLimitedJobs(FakeJobs):
    """SageMaker counting a job's existing tags toward the 50 an AddTags may leave it with."""

    def tag(self, arn: str, tags: Mapping[str, str]) -> None:
        if len({**self.tags_by_arn.get(arn, {}), **tags}) > TAGS_MAX:
            raise ActionFailed(f"AddTags {arn}", RuntimeError(f"a resource may have at most {TAGS_MAX} tags"))
        super().tag(arn, tags)


def stop_a_job_with(user_tags: int) -> tuple[TagLimitedJobs, FakePublisher, Exception | None]:
    event = load_event("vanishing_gradient_issues_found")
    event["detail"]["Tags"] = {f"team-tag-{i:02d}": "x" for i in range(user_tags)}
    parsed = parse_event(event)
    assert parsed.job.arn is not None
    jobs = TagLimitedJobs(jobs={parsed.job.name: parsed.job}, tags_by_arn={parsed.job.arn: dict(parsed.job.tags)})
    publisher = FakePublisher()
    try:
        Responder(GuardConfig(), jobs, FakeLedger(), publisher).handle(parsed, now=NOW)
    except ActionFailed as exc:
        return jobs, publisher, exc
    return jobs, publisher, None


def test_a_job_whose_attribution_takes_it_to_fifty_tags_is_stopped_attributed_and_announced() -> None:
    """50 tags a job (AddTags' Tags: at most 50 items, https://docs.aws.amazon.com/sagemaker/latest/dg/API_AddTags.html):
    a job with 45 tags of its own ends at exactly 50 with the guard's five (the last the spend avoided)."""
    user_tags = TAGS_MAX - len(attribution_tags(StopRecord("j", "r", "why", NOW, "e"), StopSpend(1.0, 1.0, None)))
    assert user_tags == 45
    jobs, publisher, error = stop_a_job_with(user_tags)
    assert error is None
    [tags] = jobs.tags_by_arn.values()
    assert len(tags) == TAGS_MAX
    assert tags[contract.TAG_STOPPED_BY] == contract.STOPPED_BY_VALUE
    assert tags[contract.TAG_SPEND_AVOIDED] == "unknown"  # no price list in this world
    assert [(n.kind.value, n.outcome.value) for n in publisher.published] == [("issues_found", "stopped")]


def test_a_job_already_near_fifty_tags_is_still_announced_when_stopped() -> None:
    """Past the limit: 47 tags of its own and the guard's five make 52.
    https://docs.aws.amazon.com/sagemaker/latest/dg/API_AddTags.html"""
    jobs, publisher, error = stop_a_job_with(TAGS_MAX - 3)
    assert jobs.stop_calls  # the job was stopped either way
    assert error is None
    assert [(n.kind.value, n.outcome.value) for n in publisher.published] == [("issues_found", "stopped")]
    [tags] = jobs.tags_by_arn.values()
    assert len(tags) == TAGS_MAX  # the three most telling attribution tags fit
    assert [k for k in tags if k.startswith("training-guard:")] == [
        contract.TAG_STOPPED_BY,
        contract.TAG_STOP_RULE,
        contract.TAG_STOPPED_AT,
    ]


def test_a_job_with_fifty_tags_of_its_own_is_stopped_and_announced_without_attribution_tags() -> None:
    """No room at all: the audit record is the attribution. https://docs.aws.amazon.com/sagemaker/latest/dg/API_AddTags.html"""
    jobs, publisher, error = stop_a_job_with(TAGS_MAX)
    assert error is None
    assert jobs.stop_calls
    [tags] = jobs.tags_by_arn.values()
    assert not any(k.startswith("training-guard:") for k in tags)
    assert [(n.kind.value, n.outcome.value) for n in publisher.published] == [("issues_found", "stopped")]


def test_running_jobs_are_listed_100_a_page_through_pages_that_come_back_empty() -> None:
    """ListTrainingJobs takes at most 100 results a page, and with StatusEquals it first takes MaxResults jobs
    of any status and then filters them: a page may hold no running job yet carry a NextToken.
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ListTrainingJobs.html"""
    page_size = request_max("sagemaker", "ListTrainingJobs", "MaxResults")
    client = aws("sagemaker")
    stub = Stubber(client)
    asked = {"StatusEquals": "InProgress", "MaxResults": page_size}
    stub.add_response("list_training_jobs", {"TrainingJobSummaries": [], "NextToken": "t2"}, asked)
    summary = {
        "TrainingJobName": "late-job",
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/late-job",
        "CreationTime": NOW,
        "TrainingJobStatus": "InProgress",
    }
    stub.add_response("list_training_jobs", {"TrainingJobSummaries": [summary]}, {**asked, "NextToken": "t2"})
    with stub:
        assert SageMakerJobs(client).running() == ["late-job"]
    stub.assert_no_pending_responses()


# --- DynamoDB ------------------------------------------------------------------------------------------


class KeyRecordingLedger(FakeLedger):
    def __init__(self) -> None:
        super().__init__()
        self.claimed: list[str] = []

    def claim(self, key: str, *, now: datetime, lease_seconds: int) -> Claim:
        self.claimed.append(key)
        return super().claim(key, now=now, lease_seconds=lease_seconds)


def item_bytes(item: Mapping[str, Mapping[str, Any]]) -> int:
    """An item's size as DynamoDB counts it: UTF-8 attribute names plus values; a number about one byte
    per two significant digits plus one; a null or Boolean one byte; a list 3 bytes and one per element
    besides its elements. https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html"""
    return sum(len(name.encode()) + value_bytes(value) for name, value in item.items())


def value_bytes(value: Mapping[str, Any]) -> int:
    if "S" in value:
        return len(value["S"].encode())
    if "N" in value:
        return math.ceil(len(value["N"].strip("-").replace(".", "").strip("0")) / 2) + 1
    if "NULL" in value or "BOOL" in value:
        return 1
    if "L" in value:
        return 3 + sum(1 + value_bytes(v) for v in value["L"])
    raise AssertionError(f"no size rule for {value}")


def test_the_longest_keys_and_records_the_guard_writes_fit_dynamodb() -> None:
    """Partition key values at most 2048 bytes, items at most 400 KB
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html), for the longest job
    name, a rule name of 256 four-byte letters, a deferred stop, a stop and its Slack deliveries."""
    rule = "\U0001d400" * RULE_NAME_MAX  # MATHEMATICAL BOLD CAPITAL A: a letter, four bytes in UTF-8
    event = load_event("vanishing_gradient_issues_found")
    name = "j" * JOB_NAME_MAX
    event["detail"].update(
        TrainingJobName=name,
        DebugRuleEvaluationStatuses=[
            {
                "RuleConfigurationName": rule,
                "RuleEvaluationStatus": "IssuesFound",
                "StatusDetails": "d" * STATUS_DETAILS_MAX,
            }
        ],
        ProfilerRuleEvaluationStatuses=[],
    )
    parsed = parse_event(event)
    ledger, publisher = KeyRecordingLedger(), FakePublisher()
    jobs = FakeJobs(jobs={name: parsed.job})
    Responder(GuardConfig(min_training_minutes=10**4), jobs, ledger, publisher).handle(parsed, now=NOW)  # deferred
    Responder(GuardConfig(), jobs, ledger, publisher).handle(parsed, now=NOW)  # stopped
    assert [n.outcome.value for n in publisher.published] == ["deferred", "stopped"]

    webhook = "w" * 40  # the longest webhook name the configuration accepts
    chat_ledger = KeyRecordingLedger()

    class Ok:
        def send(self, url: str, text: str, blocks: list[dict[str, Any]]) -> Delivery:
            return Delivery(ok=True)

    class Url:
        def url(self, webhook: str) -> str:
            return "https://hooks.slack.example/x"

    slack = GuardConfig.from_dict({"slack": {"webhooks": {webhook: {}}, "default": webhook}}).slack
    chat = ChatDelivery(slack, Url(), Ok(), chat_ledger, parker=None, ttl_seconds=86400)  # type: ignore[arg-type]
    for note in publisher.published:
        assert chat.deliver(json.dumps(note.document()), now=NOW).delivered == [webhook]

    keys = ledger.claimed + chat_ledger.claimed
    assert any(k.endswith("#deferred") for k in keys)
    assert any(k.startswith("c#") for k in keys)
    longest = max(len(k.encode()) for k in keys)
    assert longest <= DYNAMODB_PARTITION_KEY_MAX_BYTES

    client = aws("dynamodb")
    items = capture(client, "PutItem")
    updates = capture(client, "UpdateItem")
    stub = Stubber(client)
    stub.add_response("put_item", {})
    stub.add_response("put_item", {})
    stub.add_response("update_item", {})
    dynamo = DynamoLedger(client, "training-guard-state")
    # The longest spend a stop records: five instance types, a price source naming each (made-up amounts).
    source = "; ".join(f"shipped price table ({t} 2026-09-22)" for t in GROUP_TYPES)
    with stub:
        dynamo.claim(max(keys, key=lambda k: len(k.encode())), now=NOW, lease_seconds=120)
        dynamo.claim_first_stop(
            ledger.stops[name], now=NOW, lease_seconds=120, ttl_seconds=AUDIT_RETENTION_SECONDS, check_mutes=True
        )
        dynamo.record_stop_spend(name, StopSpend(10.0**12, 10.0**12, source, GROUP_TYPES))
    [spent] = updates
    stop_item = dict(items[1]["Item"])
    assert stop_item[contract.TABLE_PARTITION_KEY]["S"] == f"stop#{name}"
    # the record as it is once the spend is added to it, and its mutes' marker and confirmation
    stop_item |= {k.lstrip(":"): v for k, v in spent["ExpressionAttributeValues"].items()}
    stop_item |= {"in_force_until": {"N": "253402300799"}, "confirmed": {"BOOL": True}}
    assert rule in stop_item["rule"]["S"]
    assert "lease_until" in stop_item
    assert all(item_bytes(i) <= DYNAMODB_ITEM_MAX_BYTES for i in [stop_item, *(i["Item"] for i in items)])
    assert all(
        len(i["Item"][contract.TABLE_PARTITION_KEY]["S"].encode()) <= DYNAMODB_PARTITION_KEY_MAX_BYTES for i in items
    )


# --- CloudWatch ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("names", "calls"), [(DELETE_BATCH, [DELETE_BATCH]), (DELETE_BATCH + 1, [DELETE_BATCH, 1])])
def test_alarms_are_deleted_at_most_100_names_a_call(names: int, calls: list[int]) -> None:
    """DeleteAlarms: "You can delete up to 100 alarms in one operation."
    https://docs.aws.amazon.com/goto/WebAPI/monitoring/DeleteAlarms"""
    assert request_max("cloudwatch", "DeleteAlarms", "AlarmNames") == DELETE_BATCH
    alarm_names = [f"{contract.JOB_ALARM_PREFIX}job-{i:03d}-0123abcd" for i in range(names)]
    client = aws("cloudwatch")
    stub = Stubber(client)
    start = 0
    for size in calls:
        stub.add_response("delete_alarms", {}, {"AlarmNames": alarm_names[start : start + size]})
        start += size
    with stub:
        CloudWatchAlarms(client).delete_alarms(alarm_names)
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("series", "calls"),
    [(METRIC_DATA_BATCH, [METRIC_DATA_BATCH]), (METRIC_DATA_BATCH + 1, [METRIC_DATA_BATCH, 1])],
)
def test_datapoints_are_read_at_most_500_queries_a_call(series: int, calls: list[int]) -> None:
    """GetMetricData retrieves "as many as 500 different metrics in a single request".
    https://docs.amazonaws.cn/en_us/AmazonCloudWatch/latest/APIReference/API_GetMetricData.md"""
    assert METRIC_DATA_BATCH == GET_METRIC_DATA_MAX_QUERIES
    client = aws("cloudwatch")
    requests = capture(client, "GetMetricData")
    stub = Stubber(client)
    for _ in calls:
        stub.add_response("get_metric_data", {"MetricDataResults": []})
    with stub:
        TrainingMetrics(client).jobs_with_datapoints(
            [(f"job-{i:03d}", "train:loss") for i in range(series)], since=NOW - timedelta(hours=1), until=NOW
        )
    assert [len(r["MetricDataQueries"]) for r in requests] == calls


def test_the_ever_published_look_back_over_500_series_reads_every_page() -> None:
    """28 days of hourly datapoints for 500 series is 336,000 datapoints, over GetMetricData's 100,800 a call:
    the rest comes with a NextToken, and a job whose datapoints are on a later page is still seen.
    https://docs.amazonaws.cn/en_us/AmazonCloudWatch/latest/APIReference/API_GetMetricData.md"""
    per_series = EVER_PUBLISHED_LOOKBACK // timedelta(seconds=EVER_PUBLISHED_PERIOD_SECONDS)
    assert per_series * METRIC_DATA_BATCH > GET_METRIC_DATA_MAX_DATAPOINTS
    client = aws("cloudwatch")
    requests = capture(client, "GetMetricData")
    stub = Stubber(client)
    stub.add_response("get_metric_data", {"MetricDataResults": [{"Id": "q0", "Values": []}], "NextToken": "page-2"})
    stub.add_response("get_metric_data", {"MetricDataResults": [{"Id": f"q{METRIC_DATA_BATCH - 1}", "Values": [1.0]}]})
    with stub:
        seen = TrainingMetrics(client).jobs_with_datapoints(
            [(f"job-{i:03d}", "train:loss") for i in range(METRIC_DATA_BATCH)],
            since=NOW - EVER_PUBLISHED_LOOKBACK,
            until=NOW,
            period_seconds=EVER_PUBLISHED_PERIOD_SECONDS,
        )
    assert seen == {f"job-{METRIC_DATA_BATCH - 1:03d}"}
    assert [r.get("NextToken") for r in requests] == [None, "page-2"]


def test_every_window_the_sweeper_reads_is_kept_by_cloudwatch_at_the_period_it_asks_for() -> None:
    """1-minute datapoints are kept 15 days, hourly ones 455 days
    (https://docs.amazonaws.cn/en_us/AmazonCloudWatch/latest/APIReference/API_GetMetricData.md): at the
    longest stall window the configuration accepts, and for a job training longer than 15 days."""
    [minutes] = [d.setting.maximum for d in settings_of(StallGuard) if d.name == "minutes"]
    assert minutes is not None
    job = TrainingJob(
        name="long-job",
        status="InProgress",
        secondary_status=TRAINING,
        training_phase_start=NOW - timedelta(days=30),
        metric_names=("train:loss",),
    )
    jobs, alarms, metrics = FakeJobs(jobs={job.name: job}), FakeAlarms(), FakeTrainingMetrics()
    config = replace(GuardConfig(), stall=StallGuard(minutes=minutes))
    responder = Responder(config, jobs, FakeLedger(), FakePublisher(), alarms=alarms)
    Sweeper(responder, jobs, alarms, metrics).sweep(now=NOW, account=ACCOUNT, region=REGION)
    [(_, since, until, period), (_, since_ever, until_ever, period_ever)] = metrics.reads
    assert (period, until - since) == (60, timedelta(minutes=minutes))
    assert until - since <= RETENTION_BY_PERIOD[period]
    assert until_ever - since_ever > RETENTION_BY_PERIOD[60]  # longer than 1-minute data lives...
    assert NOW - since_ever <= RETENTION_BY_PERIOD[period_ever]  # ...so it asks for a period kept that long


def test_a_per_job_alarm_at_the_longest_names_and_window_is_a_valid_put_metric_alarm() -> None:
    """PutMetricAlarm: AlarmName 255, AlarmDescription 1024, MetricName 255, tag values 256 (the API model);
    Period x EvaluationPeriods at most one day under an hour's period
    (https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/cloudwatch/aws.sdk.kotlin.services.cloudwatch.model/-put-metric-alarm-request/period.html).
    The longest job name, a metric filling SageMaker's 128-character tag key, 180 of 180 minutes."""
    metric = "m" * (TAG_KEY_MAX - len(contract.JOB_ALARM_TAG_PREFIX))
    specs, problems = metric_guards.job_alarm_specs(
        "j" * JOB_NAME_MAX,
        {contract.JOB_ALARM_TAG_PREFIX + metric: "max at-or-above -1.7976931348623157e+308 180/180 stop"},
    )
    assert problems == []
    client = aws("cloudwatch")
    requests = capture(client, "PutMetricAlarm")
    stub = Stubber(client)
    stub.add_response("put_metric_alarm", {})
    with stub:
        CloudWatchAlarms(client).put_job_alarm(specs[0])
    [request] = requests
    model = _model("cloudwatch").operation_model("PutMetricAlarm").input_shape.members
    for field in ("AlarmName", "AlarmDescription", "MetricName"):
        assert len(request[field]) <= int(model[field].metadata["max"]), field
    assert request["Period"] * request["EvaluationPeriods"] <= ALARM_MAX_EVALUATION_SECONDS_UNDER_AN_HOUR
    assert all(len(t["Value"]) <= api_max("cloudwatch", "TagValue") for t in request["Tags"])


# --- Slack ---------------------------------------------------------------------------------------------


def test_posts_to_one_webhook_are_paced_one_second_apart() -> None:
    """Incoming webhooks: about one message a second (https://docs.slack.dev/apis/web-api/rate-limits.md).
    A post 0.25 s after the last waits the remaining 0.75 s; one exactly a second later does not wait;
    another webhook does not wait for this one."""
    now, slept = [100.0], list[float]()
    sender = WebhookSender(min_interval=MIN_INTERVAL_SECONDS, clock=lambda: now[0], sleep=slept.append)
    with SlackListener() as slack:
        assert sender.send(slack.url("a"), "1", []).ok
        now[0] += 0.25
        assert sender.send(slack.url("a"), "2", []).ok
        assert slept == [pytest.approx(MIN_INTERVAL_SECONDS - 0.25)]
        now[0] += MIN_INTERVAL_SECONDS
        assert sender.send(slack.url("a"), "3", []).ok
        assert sender.send(slack.url("b"), "4", []).ok
        assert len(slept) == 1
        assert len(slack.received()) == 4


@pytest.mark.parametrize(
    ("hosts", "calls"),
    [(METRIC_DATA_BATCH, [METRIC_DATA_BATCH]), (METRIC_DATA_BATCH + 1, [METRIC_DATA_BATCH, 1])],
)
def test_gpu_hosts_are_read_at_most_500_queries_a_call(hosts: int, calls: list[int]) -> None:
    """GetMetricData retrieves "as many as 500 different metrics in a single request"; the idle-GPU check asks one
    metric per host. https://docs.amazonaws.cn/en_us/AmazonCloudWatch/latest/APIReference/API_GetMetricData.md"""
    client = aws("cloudwatch")
    requests = capture(client, "GetMetricData")
    stub = Stubber(client)
    for _ in calls:
        stub.add_response("get_metric_data", {"MetricDataResults": []})
    with stub:
        TrainingMetrics(client).host_averages(
            [f"job-{i:03d}/algo-1" for i in range(hosts)],
            metric="GPUUtilization",
            since=NOW - timedelta(minutes=20),
            until=NOW,
        )
    assert [len(r["MetricDataQueries"]) for r in requests] == calls
