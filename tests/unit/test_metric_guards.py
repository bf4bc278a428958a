from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.helpers import EVENTS_DIR
from training_guard import contract
from training_guard.config.model import Action, ConfigError, GuardConfig
from training_guard.domain.events import EventError
from training_guard.domain.metric_guards import (
    MAX_JOB_ALARMS,
    fleet_alarm_name,
    insights_query,
    job_alarm_name,
    job_alarm_specs,
    job_of_host,
    parse_alarm_event,
)

JOB = "resnet50-no-debugger-2026-11-30-02-20-00-001"


def load_alarm(name: str) -> dict[str, Any]:
    import json

    data: dict[str, Any] = json.loads((EVENTS_DIR / "alarms" / f"{name}.json").read_text())
    return data


def guards(*specs: dict[str, Any]) -> GuardConfig:
    return GuardConfig.from_dict({"metric_guards": list(specs)})


def test_algorithm_metric_guard_is_one_query_grouped_by_job() -> None:
    [guard] = guards({"name": "loss-diverging", "metric": "train:loss", "threshold": 5, "action": "stop"}).metric_guards
    assert fleet_alarm_name(guard) == "training-guard-loss-diverging"
    assert insights_query(guard) == (
        'SELECT MAX("train:loss") FROM "/aws/sagemaker/TrainingJobs" GROUP BY TrainingJobName ORDER BY MAX() DESC'
    )


def test_instance_metric_guard_groups_by_host_and_orders_for_a_low_threshold() -> None:
    [guard] = guards(
        {"name": "idle-gpu", "metric": "GPUUtilization", "statistic": "avg", "comparison": "<", "threshold": 5}
    ).metric_guards
    assert insights_query(guard) == (
        'SELECT AVG("GPUUtilization") FROM "/aws/sagemaker/TrainingJobs" GROUP BY Host ORDER BY AVG() ASC'
    )


@pytest.mark.parametrize(
    ("host", "job"), [(f"{JOB}/algo-1", JOB), (f"{JOB}/algo-12", JOB), ("plain", "plain"), ("a/b/algo-3", "a/b")]
)
def test_host_dimension_resolves_to_the_job(host: str, job: str) -> None:
    assert job_of_host(host) == job


def test_contributor_event_names_guard_job_and_reason() -> None:
    alarm = parse_alarm_event(load_alarm("contributor_train_loss"))
    assert (alarm.guard_name, alarm.job, alarm.state, alarm.contributor) == ("loss-diverging", JOB, "ALARM", True)
    assert alarm.reason.startswith("Threshold Crossed: 1 datapoint was greater than the threshold (5.0)")
    assert alarm.time is not None


def test_host_contributor_resolves_the_job() -> None:
    alarm = parse_alarm_event(load_alarm("contributor_gpu_host"))
    assert (alarm.guard_name, alarm.job) == ("idle-gpu", JOB)


def test_single_metric_per_job_alarm_event() -> None:
    alarm = parse_alarm_event(load_alarm("per_job_train_loss"))
    assert alarm.guard_name is None
    assert (alarm.job, alarm.metric, alarm.contributor) == (JOB, "train:loss", False)
    assert alarm.alarm_name == job_alarm_name(JOB, "train:loss")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda e: {**e, "source": "aws.sagemaker"}, "not an alarm state change"),
        (lambda e: {**e, "detail-type": "CloudWatch Alarm Configuration Change"}, "not an alarm state change"),
        (lambda e: {**e, "detail": None}, "no 'detail' object"),
        (
            lambda e: {**e, "detail": {**e["detail"], "alarmName": "someone-elses-alarm"}},
            "not one of the guard's alarms",
        ),
        (lambda e: {**e, "detail": {**e["detail"], "state": {}}}, "detail.state.value is missing"),
        (lambda e: [e], "must be a JSON object"),
    ],
)
def test_broken_alarm_events_are_rejected_with_a_reason(mutate: Any, message: str) -> None:
    with pytest.raises(EventError, match=message):
        parse_alarm_event(mutate(load_alarm("contributor_train_loss")))


def test_contributor_without_known_dimension_names_no_job() -> None:
    event = load_alarm("contributor_train_loss")
    event["detail"]["alarmContributor"]["attributes"] = {"Other": "x"}
    assert parse_alarm_event(event).job is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("max above 5", ("MAX", ">", 5.0, 3, 3, Action.NOTIFY)),
        ("MAX above 5 3/5 stop", ("MAX", ">", 5.0, 3, 5, Action.STOP)),
        ("avg below 0.2 10/10", ("AVG", "<", 0.2, 10, 10, Action.NOTIFY)),
        ("min at-or-below -1e-3 notify", ("MIN", "<=", -0.001, 3, 3, Action.NOTIFY)),
        ("sum at-or-above 100 1/1 stop", ("SUM", ">=", 100.0, 1, 1, Action.STOP)),
    ],
)
def test_per_job_tag_grammar(value: str, expected: tuple[Any, ...]) -> None:
    [spec], problems = job_alarm_specs(JOB, {f"{contract.JOB_ALARM_TAG_PREFIX}train:loss": value})
    assert problems == []
    assert (spec.statistic, spec.comparison, spec.threshold, spec.datapoints, spec.periods, spec.action) == expected
    assert spec.alarm_name == job_alarm_name(JOB, "train:loss")


@pytest.mark.parametrize(
    ("metric", "value", "problem"),
    [
        ("train:loss", "max > 5", "expected '<avg|min|max|sum>"),
        ("train:loss", "max above five", "expected '<avg|min|max|sum>"),
        ("train:loss", "max above 5 6/5", "1 <= M <= N <= 180"),
        ("train:loss", "max above 5 0/5", "1 <= M <= N <= 180"),
        ("GPUUtilization", "avg below 5", "instance metrics are per host"),
        ("", "max above 5", "no metric after the prefix"),
    ],
)
def test_bad_per_job_tags_are_reported_not_alarmed(metric: str, value: str, problem: str) -> None:
    specs, problems = job_alarm_specs(JOB, {f"{contract.JOB_ALARM_TAG_PREFIX}{metric}": value})
    assert specs == []
    assert len(problems) == 1
    assert problem in problems[0]


def test_other_tags_are_not_guards_and_names_are_stable() -> None:
    assert job_alarm_specs(JOB, {"team": "vision", "training-guard:exempt": "true"}) == ([], [])
    assert job_alarm_name(JOB, "train:loss") == job_alarm_name(JOB, "train:loss")
    assert job_alarm_name(JOB, "train:loss") != job_alarm_name(JOB, "validation:loss")
    assert job_alarm_name(JOB, "train:loss").startswith(f"training-guard-job-{JOB}-")


@pytest.mark.parametrize(
    ("guard", "message"),
    [
        ({"name": "x", "metric": "m"}, "metric_guards[0].threshold: must be a number"),
        ({"name": "job-1", "metric": "m", "threshold": 1}, "reserved for per-job alarms"),
        (
            {"name": "x", "metric": "m", "threshold": 1, "statistic": "P99"},
            "metric_guards[0].statistic: must be one of",
        ),
        (
            {"name": "x", "metric": "m", "threshold": 1, "periods": 181},
            "metric_guards[0].periods: must be between 1 and 180",
        ),
        ({"name": "x", "metric": "m", "threshold": float("nan")}, "metric_guards[0].threshold: must be a number"),
    ],
)
def test_metric_guard_mistakes_name_the_field(guard: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        guards(guard)
    assert message in str(caught.value)


def test_duplicate_guard_names_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"metric_guards\[1\].name: duplicate guard name 'x'"):
        guards({"name": "x", "metric": "a", "threshold": 1}, {"name": "x", "metric": "b", "threshold": 1})


# --- what an observation carries ------------------------------------------------------------------------------
def test_an_observation_carries_the_event_id_account_and_region() -> None:
    alarm = parse_alarm_event(load_alarm("contributor_train_loss"))
    assert (alarm.event_id, alarm.account, alarm.region) == (
        "3f1c6a0e-9d7b-4f0e-b9f4-2a5d8c7e6b10",
        "123456789012",
        "us-east-1",
    )
    assert alarm.metric is None  # a contributor names its job; the metric is the fleet guard's


def test_missing_or_malformed_envelope_fields_become_empty_not_wrong() -> None:
    event = load_alarm("contributor_train_loss")
    for key in ("id", "account", "region"):
        del event[key]
    del event["detail"]["state"]["reason"]
    alarm = parse_alarm_event(event)
    assert (alarm.event_id, alarm.account, alarm.region, alarm.reason) == ("", None, None, "")
    malformed = {**load_alarm("contributor_train_loss"), "account": 123456789012, "region": ["us-east-1"]}
    assert (parse_alarm_event(malformed).account, parse_alarm_event(malformed).region) == (None, None)


def test_an_observation_takes_the_time_of_the_state_change_else_the_event_time() -> None:
    # CloudWatch's alarm events carry the evaluation time in detail.state.timestamp beside the envelope's
    # time (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-and-eventbridge.html).
    event = load_alarm("contributor_train_loss")
    event["time"] = "2026-11-30T02:41:30Z"  # delivered later than the state changed
    assert parse_alarm_event(event).time == datetime(2026, 11, 30, 2, 40, 4, 919000, tzinfo=UTC)
    del event["detail"]["state"]["timestamp"]
    assert parse_alarm_event(event).time == datetime(2026, 11, 30, 2, 41, 30, tzinfo=UTC)


def test_a_reason_is_cut_to_1024_characters() -> None:
    # CloudWatch writes at most 1023 (https://docs.aws.amazon.com/AmazonCloudWatch/latest/cli/cli-mon-set-alarm-state.html);
    # the cut bounds what a hand-made or replayed event can carry into the finding and the notification.
    event = load_alarm("contributor_train_loss")
    event["detail"]["state"]["reason"] = "x" * 5000
    assert parse_alarm_event(event).reason == "x" * 1024


@pytest.mark.parametrize(
    "configuration",
    [
        None,
        "metrics",
        {"metrics": None},
        {"metrics": {"metricStat": {}}},
        {"metrics": ["m"]},
        {"metrics": [{"metricStat": "s"}]},
        {"metrics": [{"metricStat": {"metric": "m"}}]},
        {"metrics": [{"metricStat": {"metric": {"name": "train:loss"}}}]},
        {"metrics": [{"metricStat": {"metric": {"name": "train:loss", "dimensions": ["TrainingJobName"]}}}]},
    ],
)
def test_a_single_metric_alarm_of_unexpected_shape_names_no_job(configuration: Any) -> None:
    event = load_alarm("per_job_train_loss")
    event["detail"]["configuration"] = configuration
    alarm = parse_alarm_event(event)
    assert (alarm.job, alarm.metric, alarm.state) == (None, None, "ALARM")


def test_a_metric_without_a_string_name_still_names_its_job() -> None:
    event = load_alarm("per_job_train_loss")
    event["detail"]["configuration"]["metrics"][0]["metricStat"]["metric"]["name"] = 7
    assert (parse_alarm_event(event).job, parse_alarm_event(event).metric) == (JOB, None)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda e: [e], "event must be a JSON object, got a list"),
        (
            lambda e: {**e, "source": "aws.sagemaker"},
            "not an alarm state change (source='aws.sagemaker', detail-type='CloudWatch Alarm Contributor State Change')",
        ),
        (lambda e: {**e, "detail": "x"}, "event has no 'detail' object"),
        (
            lambda e: {**e, "detail": {**e["detail"], "state": "ALARM"}},
            "alarm training-guard-loss-diverging: detail.state.value is missing",
        ),
    ],
)
def test_a_rejected_alarm_event_says_exactly_what_is_wrong(mutate: Any, message: str) -> None:
    with pytest.raises(EventError) as caught:
        parse_alarm_event(mutate(load_alarm("contributor_train_loss")))
    assert str(caught.value) == message


# --- per-job guard tags at their limits -----------------------------------------------------------------------------
def guard_tags(count: int) -> dict[str, str]:
    return {f"{contract.JOB_ALARM_TAG_PREFIX}metric-{i:02d}": "max above 5" for i in range(count)}


def test_a_job_gets_every_per_job_guard_up_to_the_maximum() -> None:
    specs, problems = job_alarm_specs(JOB, guard_tags(MAX_JOB_ALARMS))
    assert (len(specs), problems) == (MAX_JOB_ALARMS, [])


def test_guards_past_the_maximum_are_reported_and_the_first_ones_by_tag_key_created() -> None:
    tags = guard_tags(MAX_JOB_ALARMS + 1)
    specs, problems = job_alarm_specs(JOB, dict(reversed(tags.items())))
    assert [s.metric for s in specs] == [f"metric-{i:02d}" for i in range(MAX_JOB_ALARMS)]
    assert problems == [f"{MAX_JOB_ALARMS + 1} per-job guards; only the first {MAX_JOB_ALARMS} are created"]


def test_other_tags_sorting_before_the_guard_tags_do_not_hide_them() -> None:
    tags = {
        "Project": "vision",
        "aws:cloudformation:stack-name": "s",
        f"{contract.JOB_ALARM_TAG_PREFIX}train:loss": "max above 5",
    }
    specs, problems = job_alarm_specs(JOB, tags)
    assert ([s.metric for s in specs], problems) == (["train:loss"], [])


@pytest.mark.parametrize(("window", "accepted"), [("1/180", True), ("180/180", True), ("1/181", False)])
def test_a_per_job_guard_looks_back_at_most_180_minutes(window: str, accepted: bool) -> None:
    # Metrics Insights alarms evaluate only the latest 3 hours of data
    # (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-limits.html): the fleet guards' bound,
    # which the per-job guards share (README, metric guards).
    specs, problems = job_alarm_specs(JOB, {f"{contract.JOB_ALARM_TAG_PREFIX}train:loss": f"max above 5 {window}"})
    assert (len(specs) == 1, problems == []) == (accepted, accepted)


@pytest.mark.parametrize(
    ("metric", "value", "problem"),
    [
        (
            "train:loss",
            "max > 5",
            "expected '<avg|min|max|sum> <above|below|at-or-above|at-or-below> <number> [M/N] [notify|stop]'",
        ),
        ("train:loss", "max above 5 6/5", "M/N must satisfy 1 <= M <= N <= 180, got 6/5"),
        ("GPUUtilization", "avg below 5", "instance metrics are per host: use a fleet guard (metric_guards) for them"),
        ("", "max above 5", "no metric after the prefix"),
    ],
)
def test_a_bad_per_job_tag_is_reported_with_the_tag_and_what_is_wrong(metric: str, value: str, problem: str) -> None:
    key = f"{contract.JOB_ALARM_TAG_PREFIX}{metric}"
    assert job_alarm_specs(JOB, {key: value}) == ([], [f"tag {key}={value!r}: {problem}"])
