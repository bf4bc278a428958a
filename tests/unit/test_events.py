from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.helpers import event_names, load_event, with_detail
from training_guard.domain.events import DEBUGGER, PROFILER, EventError, parse_event, parse_time


@pytest.mark.parametrize("name", event_names())
def test_every_recorded_event_parses(name: str) -> None:
    event = load_event(name)
    parsed = parse_event(event)
    assert parsed.job.name == event["detail"]["TrainingJobName"]
    assert parsed.job.status == event["detail"]["TrainingJobStatus"]


def test_job_name_comes_from_the_detail_not_the_arn() -> None:
    # AWS's own sample: the ARN ends in "kmeans-1", the job is named by a UUID.
    parsed = parse_event(load_event("aws_sample_completed"))
    assert parsed.job.name == "89c96cc8-dded-4739-afcc-6f1dc936701d"
    assert parsed.job.arn is not None
    assert parsed.job.arn.endswith("/kmeans-1")


def test_numeric_string_millisecond_timestamps_are_read() -> None:
    parsed = parse_event(load_event("aws_sample_completed"))
    assert parsed.job.creation_time == datetime(2020, 3, 10, 9, 18, 9, 50000, tzinfo=UTC)
    assert parsed.time == datetime(2018, 10, 6, 12, 26, 13, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1583831889050, datetime(2020, 3, 10, 9, 18, 9, 50000, tzinfo=UTC)),
        (1583831889050.0, datetime(2020, 3, 10, 9, 18, 9, 50000, tzinfo=UTC)),
        ("1583831889050", datetime(2020, 3, 10, 9, 18, 9, 50000, tzinfo=UTC)),
        (1583831889, datetime(2020, 3, 10, 9, 18, 9, tzinfo=UTC)),  # epoch seconds (the API's form)
        ("2026-11-30T02:15:05Z", datetime(2026, 11, 30, 2, 15, 5, tzinfo=UTC)),
        ("2026-11-30T02:15:05.123+00:00", datetime(2026, 11, 30, 2, 15, 5, 123000, tzinfo=UTC)),
        (datetime(2026, 1, 1), datetime(2026, 1, 1, tzinfo=UTC)),
        (None, None),
        ("", None),
        ("yesterday", None),
        (True, None),
        (-5, None),
        (float("nan"), None),
        (float("inf"), None),
        (10**30, None),
        ([], None),
    ],
)
def test_timestamps_in_every_shape_seen(value: Any, expected: datetime | None) -> None:
    assert parse_time(value) == expected


def test_null_timestamps_and_missing_optional_fields_are_tolerated() -> None:
    event = load_event("spot_interrupted")
    for key in ("Tags", "FailureReason", "ResourceConfig", "AlgorithmSpecification"):
        event["detail"].pop(key, None)
    job = parse_event(event).job
    assert job.training_start_time is None
    assert job.last_modified_time is None
    assert job.tags == {}
    assert job.instance_type is None
    assert job.rules is None


def test_absent_rule_lists_mean_unknown_but_empty_lists_mean_none() -> None:
    assert parse_event(load_event("in_progress_no_rule_lists")).job.rules is None
    profiler = parse_event(load_event("profiler_issues_found")).job
    assert profiler.rules is not None
    assert [(r.name, r.source, r.status) for r in profiler.rules] == [("LowGPUUtilization", PROFILER, "IssuesFound")]


def test_rule_statuses_keep_details_and_the_rule_job() -> None:
    job = parse_event(load_event("vanishing_gradient_issues_found")).job
    assert job.rules is not None
    found = [r for r in job.rules if r.status == "IssuesFound"]
    assert len(found) == 1
    assert found[0].name == "VanishingGradient"
    assert found[0].source == DEBUGGER
    assert found[0].details is not None
    assert found[0].details.startswith("RuleEvaluationConditionMet")
    assert found[0].evaluation_job_arn is not None
    assert ":processing-job/" in found[0].evaluation_job_arn


def test_malformed_rule_entries_are_skipped_not_fatal() -> None:
    event = with_detail(
        load_event("rule_error"),
        DebugRuleEvaluationStatuses=[None, 7, {"RuleConfigurationName": "X"}, {"RuleEvaluationStatus": "Error"}],
        ProfilerRuleEvaluationStatuses="oops",
    )
    assert parse_event(event).job.rules == ()


def test_tags_as_a_map_or_as_key_value_pairs() -> None:
    as_map = parse_event(load_event("exempt_issues_found")).job.tags
    as_list = parse_event(
        with_detail(load_event("exempt_issues_found"), Tags=[{"Key": "training-guard:exempt", "Value": "true"}])
    ).job.tags
    assert as_map["training-guard:exempt"] == as_list["training-guard:exempt"] == "true"


def test_overlong_free_text_is_truncated() -> None:
    event = with_detail(load_event("failed"), FailureReason="x" * 100_000)
    reason = parse_event(event).job.failure_reason
    assert reason is not None
    assert len(reason) == 4096


def _broken(mutate: Any) -> Any:
    event = load_event("vanishing_gradient_issues_found")
    return mutate(event)


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (_broken(lambda e: [e]), "event must be a JSON object"),
        (_broken(lambda e: {**e, "source": "my.app"}), "not a training job state change"),
        (_broken(lambda e: {**e, "detail-type": "SageMaker Endpoint State Change"}), "not a training job state change"),
        (_broken(lambda e: {k: v for k, v in e.items() if k != "detail"}), "no 'detail' object"),
        (_broken(lambda e: {**e, "detail": "string"}), "no 'detail' object"),
        (_broken(lambda e: with_detail(e, TrainingJobName="")), "detail.TrainingJobName is missing"),
        (_broken(lambda e: with_detail(e, TrainingJobName=None)), "detail.TrainingJobName is missing"),
        (_broken(lambda e: with_detail(e, TrainingJobStatus=5)), "detail.TrainingJobStatus is missing"),
    ],
)
def test_broken_copies_are_rejected_with_a_reason(broken: Any, message: str) -> None:
    with pytest.raises(EventError, match=message):
        parse_event(broken)


def test_the_start_of_training_is_the_latest_entry_into_the_training_status() -> None:
    from training_guard.domain.events import parse_job

    job = parse_job(
        {
            "TrainingJobName": "spot-1",
            "TrainingJobStatus": "InProgress",
            "SecondaryStatusTransitions": [
                {"Status": "Starting", "StartTime": 1764468000000},
                {"Status": "Training", "StartTime": 1764468600000},
                {"Status": "Interrupted", "StartTime": 1764470400000},
                {"Status": "Training", "StartTime": "2025-11-30T03:00:00Z"},
                {"Status": "Training", "StartTime": None},
                "not a transition",
            ],
        }
    )
    assert job.training_phase_start is not None
    assert job.training_phase_start.isoformat() == "2025-11-30T03:00:00+00:00"
    assert parse_job({"TrainingJobName": "a", "TrainingJobStatus": "InProgress"}).training_phase_start is None


@pytest.mark.parametrize(
    ("count", "expected"),
    [(2, 2), ("2", 2), ("\u00b2", None), ("\uff12", None), ("\u0662", None), ("9" * 5000, None), (True, None)],
)
def test_an_instance_count_is_read_from_ascii_digits_only(count: Any, expected: int | None) -> None:
    """str.isdigit() accepts "²" and digits of other scripts, which int() refuses, and int() refuses 5,000 digits:
    such a count is unknown, not an unhandled error (the bad-input campaign found both)."""
    event = load_event("vanishing_gradient_issues_found")
    event["detail"]["ResourceConfig"] = {**event["detail"].get("ResourceConfig", {}), "InstanceCount": count}
    assert parse_event(event).job.instance_count == expected
