"""The log path on the emulation (moto): real gzip + base64 deliveries through the real handler, the state table's
items, one stop however the deliveries repeat, reorder or come from several hosts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tests.helpers import NOW
from tests.log_deliveries import MNIST_DEFINITIONS, document, events, mnist_lines, subscription
from training_guard import contract
from training_guard.adapters.log_state import ITEM_MAX_BYTES, DynamoLogState, job_key, state_document, state_key
from training_guard.config.model import GuardConfig
from training_guard.domain.log_rules import LogEvent, StreamState
from training_guard.handlers import wiring
from training_guard_local import sagemaker_ext
from training_guard_local.emulator import ACCOUNT, REGION, TABLE, Emulation, handler_output_to_stderr

JOB = "mnist-lr01-2026-11-30-02-10-00-000"
T0_MS = int((NOW - timedelta(hours=1)).timestamp() * 1000)


def stream(host: int = 1) -> str:
    return f"{JOB}/algo-{host}-1764468600"


@pytest.fixture
def aws() -> Iterator[Emulation]:
    with Emulation(GuardConfig()) as emulation:
        emulation.put_job(job_detail(JOB))
        yield emulation


def job_detail(name: str) -> dict[str, Any]:
    """The job as SageMaker describes it: running, with the seed's MetricDefinitions."""
    return {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name}",
        "TrainingJobStatus": "InProgress",
        "SecondaryStatus": "Training",
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-cpu-py311",
            "TrainingInputMode": "File",
            "MetricDefinitions": [{"Name": n, "Regex": r} for n, r in MNIST_DEFINITIONS],
        },
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 3, "VolumeSizeInGB": 30},
        "Tags": {"team": "vision"},
    }


def deliver(aws: Emulation, doc: dict[str, Any]) -> dict[str, Any]:
    with handler_output_to_stderr():
        from training_guard.handlers import log_events
    return aws.invoke(log_events.handler, subscription(doc), aws.context("training-guard-log-events"), at=NOW)


def delivery(lines: list[str], *, first: int = 0, host: int = 1) -> dict[str, Any]:
    return document(stream(host), events(lines, t0_ms=T0_MS, first=first, stream_id=host), owner=ACCOUNT)


def item(aws: Emulation, key: str) -> dict[str, Any]:
    return dict(aws.client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": key}}).get("Item") or {})


def stops() -> int:
    return len(sagemaker_ext.stop_calls(job=JOB))


def test_the_seeds_diverging_job_is_stopped_from_its_log_and_its_state_kept(aws: Emulation) -> None:
    receipt = deliver(aws, delivery(mnist_lines()))
    assert receipt["firings"]
    assert stops() == 1
    assert aws.job_status(JOB) == "Stopping"
    [note] = aws.notifications()
    assert (note["kind"], note["outcome"]) == ("log_rule", "stopped")
    assert note["transition"] == f"t#{JOB}#log#{receipt['firings'][0]}#IssuesFound"
    assert aws.job_tags(JOB)[contract.TAG_STOP_RULE] == receipt["firings"][0]
    saved = item(aws, state_key(stream()))
    assert saved["version"] == {"N": "1"}
    assert (saved["job"]["S"], saved["stream"]["S"]) == (JOB, stream())
    ttl_days = GuardConfig().dedup_ttl_days
    assert int(saved[contract.TABLE_TTL_ATTRIBUTE]["N"]) == int(NOW.timestamp()) + ttl_days * 86400
    assert item(aws, job_key(JOB))["streams"] == {"SS": [stream()]}


def test_the_same_delivery_twice_stops_once(aws: Emulation) -> None:
    doc = delivery(mnist_lines())
    deliver(aws, doc)
    again = deliver(aws, doc)
    assert stops() == 1
    assert len(aws.notifications()) == 1
    assert item(aws, state_key(stream()))["version"] == {"N": "1"}  # nothing new: not written again
    assert again["findings"]["outcomes"] == [] or again["findings"]["duplicates"] >= 1


def test_two_batches_out_of_order_stop_once(aws: Emulation) -> None:
    lines = mnist_lines()
    later = delivery(lines[20:], first=20)  # the climb and the nan, delivered first
    deliver(aws, later)
    deliver(aws, delivery(lines[:20]))
    deliver(aws, later)
    assert stops() == 1
    notes = aws.notifications()
    assert [n["outcome"] for n in notes].count("stopped") == 1
    assert len({n["transition"] for n in notes}) == len(notes)  # each rule's finding announced once


def test_a_job_on_three_hosts_is_stopped_once_and_each_streams_state_kept(aws: Emulation) -> None:
    lines = mnist_lines()
    receipts = [deliver(aws, delivery(lines, host=host)) for host in (1, 2, 3)]
    assert all(r["firings"] for r in receipts)
    assert stops() == 1
    [note] = aws.notifications()
    assert note["outcome"] == "stopped"
    assert item(aws, job_key(JOB))["streams"] == {"SS": [stream(1), stream(2), stream(3)]}
    assert all(item(aws, state_key(stream(h)))["version"] == {"N": "1"} for h in (1, 2, 3))


def test_a_malformed_delivery_is_parked_with_its_reason(aws: Emulation) -> None:
    with handler_output_to_stderr():
        from training_guard.handlers import log_events
    event = {"awslogs": {"data": "H4sIAAAAAAAA/wMAAAAAAAAAAAA="}}  # gzip of nothing: no JSON inside
    result = aws.invoke(log_events.handler, event, aws.context("training-guard-log-events"), at=NOW)
    assert str(result["rejected"]).startswith("awslogs.data does not hold JSON")
    [parked] = aws.events_dead_letters()
    assert json.loads(parked["body"]) == event
    assert parked["reason"].startswith("unusable event: awslogs.data does not hold JSON")


def test_the_scheduled_stall_check_reads_the_streams_of_running_jobs(aws: Emulation) -> None:
    deliver(aws, delivery(mnist_lines()[:5]))
    with handler_output_to_stderr():
        from training_guard.handlers import log_events
    scheduled = {"source": "aws.events", "detail-type": "Scheduled Event", "id": "stall-1", "time": NOW.isoformat()}
    later = NOW + timedelta(days=1)
    result = aws.invoke(log_events.handler, scheduled, aws.context("training-guard-log-events"), at=later)
    assert result["checked"] == 1
    assert result["stalled"] == [stream()]
    assert [n["kind"] for n in aws.notifications()] == ["log_rule"]


# --- the adapter against DynamoDB's semantics ----------------------------------------------------------------
def states(aws: Emulation) -> DynamoLogState:
    return DynamoLogState(wiring.root().client("dynamodb"), TABLE, ttl_seconds=86400)


def test_a_save_on_a_stale_version_is_refused_and_nothing_overwritten(aws: Emulation) -> None:
    store = states(aws)
    first, _ = _folded(mnist_lines()[:5])
    assert store.get(stream()) == (None, 0)
    assert store.put(JOB, stream(), first, version=0, now=NOW)
    assert not store.put(JOB, stream(), first, version=0, now=NOW)  # a second "first" save: refused
    got, version = store.get(stream())
    assert version == 1
    assert got is not None
    assert got.to_json() == first.to_json()
    assert store.put(JOB, stream(), first, version=1, now=NOW)
    assert not store.put(JOB, stream(), first, version=1, now=NOW)
    assert store.get(stream())[1] == 2
    assert store.streams(JOB) == [stream()]


def test_a_problem_is_reported_once_per_job(aws: Emulation) -> None:
    store = states(aws)
    assert store.first_report(JOB, "definitions", now=NOW)
    assert not store.first_report(JOB, "definitions", now=NOW)
    assert store.first_report(JOB, "line", now=NOW)
    assert store.first_report("other-job", "definitions", now=NOW)
    assert item(aws, job_key(JOB))["reported"] == {"SS": ["definitions", "line"]}


def test_a_member_accounts_stream_has_its_own_item() -> None:
    assert state_key(stream(), "210987654321") == f"logstate#210987654321/{stream()}"
    assert job_key(JOB, "210987654321") != job_key(JOB)


def _folded(lines: list[str]) -> tuple[StreamState, list[Any]]:
    from training_guard.domain.log_lines import LineReader
    from training_guard.domain.log_rules import evaluate

    return evaluate(
        None, events(lines, t0_ms=T0_MS), reader=LineReader(MNIST_DEFINITIONS), rules=GuardConfig().log_rules
    )


def _largest_state(name_chars: int) -> StreamState:
    """A stream's state at its bound: the rules' windows at their configured maxima, 40 definitions (SageMaker's
    most) whose names have `name_chars` characters, 3,000 lines (the longest window is 2,000 points) of which
    300 share each millisecond (ids kept), a
    training and a validation loss, a capture that is not a number."""
    import dataclasses

    from training_guard.config.model import (
        MAX_LOG_WINDOW,
        LogLossNotDecreasingRule,
        LogOverfitRule,
        LogRules,
    )
    from training_guard.domain.log_lines import LineReader
    from training_guard.domain.log_rules import evaluate

    rules = dataclasses.replace(
        LogRules(),
        loss_not_decreasing=LogLossNotDecreasingRule(num_steps=MAX_LOG_WINDOW),
        overfit=LogOverfitRule(patience=MAX_LOG_WINDOW),
    )
    names = [f"{n:02d}" + "m" * (name_chars - 2) for n in range(40)]
    reader = LineReader(tuple((name, rf"{name}=(\S+)") for name in names))
    state = None
    for block in range(3):
        logged = [
            LogEvent(
                id=f"{i:056d}",
                timestamp_ms=T0_MS + i // 300,
                message=f"{{'loss': {3.0 - 1e-4 * i + (i % 7) * 1e-5!r}, 'eval_loss': {2.0 + (i % 5) * 1e-3!r}}} "
                + " ".join(f"{name}={0.5 + (i % 11) * 1e-3!r}" for name in names)
                + (" 00" + "m" * (name_chars - 2) + "=cat" if i == 17 else ""),
            )
            for i in range(block * 1000, (block + 1) * 1000)
        ]
        state, _ = evaluate(state, logged, reader=reader, rules=rules)
    assert state is not None
    return state


def item_bytes(stream_name: str, state: StreamState) -> int:
    """The item's size as DynamoDB counts it: names and values in UTF-8, numbers about one byte per two digits."""
    strings = {"pk": state_key(stream_name), "job": JOB, "stream": stream_name, "state": state_document(state)}
    return sum(len(k) + len(v.encode()) for k, v in strings.items()) + len("version") + 21 + len("expires_at") + 21


def test_the_largest_state_fits_a_dynamodb_item(aws: Emulation) -> None:
    """400 KB a DynamoDB item; the state at its bound (names of 255 characters, MetricDefinition's most) is far under."""
    state = _largest_state(name_chars=255)
    size = item_bytes(stream(), state)
    assert size < ITEM_MAX_BYTES // 4, size
    assert states(aws).put(JOB, stream(), state, version=0, now=NOW)  # DynamoDB (moto) takes it whole
    assert states(aws).get(stream())[0] is not None


def test_a_log_whose_keys_are_10_kb_long_still_fits_a_dynamodb_item() -> None:
    """64 names are remembered whatever their length: a log printing dicts with 10 KB keys would make the state
    larger than an item, and its save would fail at every delivery (reported to the log rules' owner)."""
    from training_guard.domain.log_lines import LineReader
    from training_guard.domain.log_rules import evaluate

    logged = [
        LogEvent(id=f"{i:056d}", timestamp_ms=T0_MS + i, message=f"{{'k{i}{'x' * 10_000}': 1.0, 'loss': 1.0}}")
        for i in range(100)
    ]
    state, _ = evaluate(None, logged, reader=LineReader(()), rules=GuardConfig().log_rules)
    assert item_bytes(stream(), state) < ITEM_MAX_BYTES
