"""The CloudWatch adapter's reads of alarms still firing, against botocore's Stubber (the real API shapes)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.stub import Stubber

from training_guard import contract
from training_guard.adapters.cloudwatch import CloudWatchAlarms, TrainingMetrics
from training_guard.domain.errors import ActionFailed

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient


AT = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)


def cloudwatch() -> CloudWatchClient:
    made: CloudWatchClient = boto3.client(
        "cloudwatch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    return made


def stubbed() -> tuple[CloudWatchAlarms, Stubber]:
    client = cloudwatch()
    return CloudWatchAlarms(client), Stubber(client)


def test_contributors_in_alarm_are_read_across_pages_and_resolved_to_jobs() -> None:
    alarms, stub = stubbed()
    first = {
        "AlarmContributors": [
            {
                "ContributorId": "c1",
                "ContributorAttributes": {"TrainingJobName": "job-a"},
                "StateReason": "Threshold Crossed: 3 datapoints",
                "StateTransitionedTimestamp": AT,
            }
        ],
        "NextToken": "page-2",
    }
    second = {
        "AlarmContributors": [
            {
                "ContributorId": "c2",
                "ContributorAttributes": {"Host": "job-b/algo-2"},
                "StateReason": "Threshold Crossed",
                "StateTransitionedTimestamp": AT,
            }
        ]
    }
    stub.add_response("describe_alarm_contributors", first, {"AlarmName": "training-guard-loss"})
    stub.add_response(
        "describe_alarm_contributors", second, {"AlarmName": "training-guard-loss", "NextToken": "page-2"}
    )
    with stub:
        firing = alarms.firing_contributors("training-guard-loss")
    assert [(a.job, a.state, a.contributor, a.alarm_name) for a in firing] == [
        ("job-a", "ALARM", True, "training-guard-loss"),
        ("job-b", "ALARM", True, "training-guard-loss"),
    ]
    assert firing[0].reason == "Threshold Crossed: 3 datapoints"
    assert firing[0].time == AT
    assert firing[0].guard_name == "loss"


def test_an_alarm_not_deployed_has_no_contributors_but_other_errors_raise() -> None:
    alarms, stub = stubbed()
    stub.add_client_error("describe_alarm_contributors", "ResourceNotFoundException")
    stub.add_client_error("describe_alarm_contributors", "AccessDenied")
    with stub:
        assert alarms.firing_contributors("training-guard-loss") == []
        with pytest.raises(ActionFailed, match="DescribeAlarmContributors training-guard-loss"):
            alarms.firing_contributors("training-guard-loss")


def test_per_job_alarms_in_alarm_are_asked_for_by_state_and_checked_again() -> None:
    alarms, stub = stubbed()

    def alarm(name: str, state: str) -> dict[str, object]:
        return {
            "AlarmName": name,
            "StateValue": state,
            "StateReason": "Threshold Crossed",
            "StateUpdatedTimestamp": AT,
            "MetricName": "train:loss",
            "Dimensions": [{"Name": "TrainingJobName", "Value": "job-a"}],
        }

    stub.add_response(
        "describe_alarms",
        {"MetricAlarms": [alarm("training-guard-job-job-a-1", "ALARM"), alarm("training-guard-job-job-a-2", "OK")]},
        {"AlarmNamePrefix": contract.JOB_ALARM_PREFIX, "AlarmTypes": ["MetricAlarm"], "StateValue": "ALARM"},
    )
    with stub:
        [firing] = alarms.firing_job_alarms()
    assert (firing.alarm_name, firing.job, firing.metric, firing.guard_name) == (
        "training-guard-job-job-a-1",
        "job-a",
        "train:loss",
        None,
    )


def test_the_long_look_back_asks_for_hourly_datapoints() -> None:
    client = cloudwatch()
    metrics, stub = TrainingMetrics(client), Stubber(client)
    expected = {
        "MetricDataQueries": [
            {
                "Id": "q0",
                "MetricStat": {
                    "Metric": {
                        "Namespace": contract.SAGEMAKER_TRAINING_NAMESPACE,
                        "MetricName": "train:loss",
                        "Dimensions": [{"Name": contract.JOB_DIMENSION, "Value": "job-a"}],
                    },
                    "Period": 3600,
                    "Stat": "SampleCount",
                },
                "ReturnData": True,
            }
        ],
        "StartTime": AT,
        "EndTime": datetime(2026, 11, 30, 4, 1, tzinfo=UTC),
    }
    stub.add_response("get_metric_data", {"MetricDataResults": [{"Id": "q0", "Values": [3.0]}]}, expected)
    with stub:
        seen = metrics.jobs_with_datapoints(
            [("job-a", "train:loss")], since=AT, until=datetime(2026, 11, 30, 4, 0, tzinfo=UTC), period_seconds=3600
        )
    assert seen == {"job-a"}


def gpu_query(query_id: str, host: str) -> dict[str, object]:
    return {
        "Id": query_id,
        "MetricStat": {
            "Metric": {
                "Namespace": contract.SAGEMAKER_TRAINING_NAMESPACE,
                "MetricName": "GPUUtilization",
                "Dimensions": [{"Name": contract.HOST_DIMENSION, "Value": host}],
            },
            "Period": 60,
            "Stat": "Average",
        },
        "ReturnData": True,
    }


def test_host_averages_ask_one_minute_averages_per_host_and_read_every_page() -> None:
    client = cloudwatch()
    metrics, stub = TrainingMetrics(client), Stubber(client)
    since, until = datetime(2026, 11, 30, 2, 40, tzinfo=UTC), AT
    minute = datetime(2026, 11, 30, 2, 59, tzinfo=UTC)
    earlier = datetime(2026, 11, 30, 2, 58, tzinfo=UTC)
    request = {
        "MetricDataQueries": [gpu_query("h0", "job-a/algo-1"), gpu_query("h1", "job-a/algo-2")],
        "StartTime": since,
        "EndTime": until,
    }
    first = {"MetricDataResults": [{"Id": "h0", "Timestamps": [minute], "Values": [40.0]}], "NextToken": "p2"}
    second = {
        "MetricDataResults": [
            {"Id": "h0", "Timestamps": [earlier], "Values": [30.0]},
            {"Id": "h1", "Timestamps": [], "Values": []},
        ]
    }
    stub.add_response("get_metric_data", first, request)
    stub.add_response("get_metric_data", second, {**request, "NextToken": "p2"})
    with stub:
        found = metrics.host_averages(
            ["job-a/algo-1", "job-a/algo-2"], metric="GPUUtilization", since=since, until=until
        )
    assert found == {"job-a/algo-1": [(minute, 40.0), (earlier, 30.0)]}  # a host without datapoints is left out


def test_host_averages_fail_as_an_action_that_failed() -> None:
    client = cloudwatch()
    metrics, stub = TrainingMetrics(client), Stubber(client)
    stub.add_client_error("get_metric_data", "Throttling", "Rate exceeded")
    with stub, pytest.raises(ActionFailed, match="GetMetricData"):
        metrics.host_averages(["job-a/algo-1"], metric="GPUUtilization", since=AT, until=AT)


def loss_query(query_id: str, job: str) -> dict[str, object]:
    return {
        "Id": query_id,
        "MetricStat": {
            "Metric": {
                "Namespace": contract.SAGEMAKER_TRAINING_NAMESPACE,
                "MetricName": "train:loss",
                "Dimensions": [{"Name": contract.JOB_DIMENSION, "Value": job}],
            },
            "Period": 60,
            "Stat": "Maximum",
        },
        "ReturnData": True,
    }


def test_501_series_are_read_in_two_get_metric_data_requests_of_500_and_1() -> None:
    """GetMetricData takes at most 500 queries: the sweeper's own judgement of job 501 needs a second request."""
    client = cloudwatch()
    metrics, stub = TrainingMetrics(client), Stubber(client)
    jobs = [f"job-{n}" for n in range(1, 502)]
    since = datetime(2026, 11, 30, 2, 52, tzinfo=UTC)
    first = {
        "MetricDataQueries": [loss_query(f"h{i}", j) for i, j in enumerate(jobs[:500])],
        "StartTime": since,
        "EndTime": AT,
    }
    second = {"MetricDataQueries": [loss_query("h0", "job-501")], "StartTime": since, "EndTime": AT}
    minute = datetime(2026, 11, 30, 2, 58, tzinfo=UTC)
    stub.add_response("get_metric_data", {"MetricDataResults": []}, first)
    stub.add_response(
        "get_metric_data", {"MetricDataResults": [{"Id": "h0", "Timestamps": [minute], "Values": [9.0]}]}, second
    )
    with stub:
        found = metrics.series_values(
            contract.JOB_DIMENSION, jobs, metric="train:loss", statistic="Maximum", since=since, until=AT
        )
    stub.assert_no_pending_responses()
    assert found == {"job-501": [(minute, 9.0)]}


def test_fleet_alarm_states_read_the_evaluation_state_by_name_100_at_a_time() -> None:
    alarms, stub = stubbed()
    names = [f"training-guard-g{n}" for n in range(101)]
    partial = {
        "MetricAlarms": [
            {
                "AlarmName": "training-guard-g0",
                "StateValue": "ALARM",
                "StateReason": "Threshold Crossed: 100+ time series evaluated to ALARM.",
                "EvaluationState": "PARTIAL_DATA",
            }
        ]
    }
    stub.add_response("describe_alarms", partial, {"AlarmNames": names[:100], "AlarmTypes": ["MetricAlarm"]})
    stub.add_response(
        "describe_alarms", {"MetricAlarms": []}, {"AlarmNames": names[100:], "AlarmTypes": ["MetricAlarm"]}
    )
    with stub:
        states = alarms.fleet_alarm_states(names)
    stub.assert_no_pending_responses()
    [state] = states.values()
    assert (state.name, state.state, state.evaluation_state) == ("training-guard-g0", "ALARM", "PARTIAL_DATA")
    assert "100+" in state.reason
