"""The limits moto enforces, met by the real handlers in the emulated account.

moto refuses a DynamoDB partition key over 2048 bytes and an item over about 400 KB, and an SNS
message over 262,144 characters (the guard's SNS body is ASCII, so characters are bytes). Everything
else moto lets through; tests/unit/test_limits.py measures those limits against the requests.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.helpers import load_event
from tests.unit.test_limits import (
    DYNAMODB_PARTITION_KEY_MAX_BYTES,
    JOB_NAME_MAX,
    RULE_NAME_MAX,
    STATUS_DETAILS_MAX,
    largest_event,
)
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard_local.emulator import TABLE, Emulation

NAME = "j" * JOB_NAME_MAX
RULE = "\U0001d400" * RULE_NAME_MAX  # 256 letters of four bytes each (MATHEMATICAL BOLD CAPITAL A)


def longest_names_event() -> dict[str, Any]:
    event = load_event("vanishing_gradient_issues_found")
    event["detail"].update(
        TrainingJobName=NAME,
        TrainingJobArn=f"arn:aws:sagemaker:{event['region']}:{event['account']}:training-job/{NAME}",
        DebugRuleEvaluationStatuses=[
            {
                "RuleConfigurationName": RULE,
                "RuleEvaluationStatus": "IssuesFound",
                "StatusDetails": "d" * STATUS_DETAILS_MAX,
            }
        ],
        ProfilerRuleEvaluationStatuses=[],
    )
    return event


def keys(aws: Emulation) -> list[str]:
    items = aws.client("dynamodb").scan(TableName=TABLE)["Items"]
    return [item[contract.TABLE_PARTITION_KEY]["S"] for item in items]


def test_a_stop_at_the_longest_names_is_recorded_attributed_and_announced(aws: Emulation) -> None:
    """Partition keys at most 2048 bytes, items at most 400 KB (moto enforces both):
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html. The longest job name
    (63) and a rule name of 256 four-byte letters make a transition key of 1,111 bytes (1,120 deferred)."""
    receipt = aws.deliver(longest_names_event())
    assert receipt["stopped"] is True
    assert aws.job_status(NAME) == "Stopping"
    written = keys(aws)
    assert f"stop#{NAME}" in written
    assert max(len(k.encode()) for k in written) <= DYNAMODB_PARTITION_KEY_MAX_BYTES
    stop = aws.client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": f"stop#{NAME}"}})["Item"]
    assert stop["rule"]["S"] == RULE
    assert aws.job_tags(NAME)[contract.TAG_STOP_RULE] == RULE  # 256 letters: a legal tag value as it is
    [note] = aws.notifications()
    assert (note["outcome"], note["rule"]["name"]) == ("stopped", RULE)


def test_a_deferred_stop_at_the_longest_names_is_recorded(
    emulation_with: Callable[[GuardConfig], Emulation],
) -> None:
    """The longest key the guard writes: a deferred transition (its key ends in `#deferred`), against
    DynamoDB's 2048-byte partition keys. https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html"""
    aws = emulation_with(GuardConfig(min_training_minutes=10_000))
    aws.deliver(longest_names_event())
    [deferred] = [k for k in keys(aws) if k.endswith("#deferred")]
    assert len(deferred.encode()) <= DYNAMODB_PARTITION_KEY_MAX_BYTES
    assert [n["outcome"] for n in aws.notifications()] == ["deferred"]


def test_the_largest_ascii_notification_is_published(aws: Emulation) -> None:
    """SNS: 256 KiB a message by default (https://docs.aws.amazon.com/sns/latest/dg/large-message-payloads.md).
    The largest body the guard builds from ASCII text (50 unreadable per-job guard tags) goes through."""
    aws.deliver(largest_event("x", guard_tags=True))
    [note] = aws.notifications()
    assert note["kind"] == "guard_tag_invalid"
    assert len(note["job"]["tags"]) == 50


def test_the_largest_notification_with_letters_outside_ascii_is_published(aws: Emulation) -> None:
    """The same with the letters SageMaker's tag pattern allows (\\p{L}:
    https://docs.aws.amazon.com/sagemaker/latest/dg/API_Tag.html) against SNS's 256 KiB
    (https://docs.aws.amazon.com/sns/latest/dg/large-message-payloads.md)."""
    aws.deliver(largest_event("あ", guard_tags=True))
    [note] = aws.notifications()
    assert json.dumps(note, ensure_ascii=False).count("あ") > 0
