"""CloudWatch: the guard's alarms (per-job alarms, alarms still firing) and the training metrics' datapoints."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from training_guard import contract
from training_guard.adapters.clients import error_code
from training_guard.domain.errors import ActionFailed
from training_guard.domain.metric_guards import AlarmObservation, FleetAlarmState, JobAlarmSpec, job_of_dimensions

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_cloudwatch.literals import ComparisonOperatorType, StatisticType
    from mypy_boto3_cloudwatch.type_defs import MetricDataQueryTypeDef

# The APIs' batch caps (docs/limits.md).
DELETE_BATCH = 100
DESCRIBE_BATCH = 100
METRIC_DATA_BATCH = 500


class CloudWatchAlarms:
    def __init__(self, client: CloudWatchClient) -> None:
        self._client = client

    def put_job_alarm(self, spec: JobAlarmSpec) -> None:
        try:
            self._client.put_metric_alarm(
                AlarmName=spec.alarm_name,
                AlarmDescription=f"Training Guard per-job guard for {spec.job}: {spec.describe()}",
                Namespace=contract.SAGEMAKER_TRAINING_NAMESPACE,
                MetricName=spec.metric,
                Dimensions=[{"Name": contract.JOB_DIMENSION, "Value": spec.job}],
                Statistic=cast("StatisticType", spec.cloudwatch_statistic),  # from a closed table of names
                Period=60,
                EvaluationPeriods=spec.periods,
                DatapointsToAlarm=spec.datapoints,
                Threshold=spec.threshold,
                ComparisonOperator=cast("ComparisonOperatorType", spec.comparison_operator),
                TreatMissingData="notBreaching",  # a quiet job is the sweeper's stall check's concern
                ActionsEnabled=True,
                Tags=[{"Key": "training-guard:job", "Value": spec.job}],
            )
        except ClientError as exc:
            raise ActionFailed(f"PutMetricAlarm {spec.alarm_name}", exc) from exc

    def job_alarm_names(self, job: str | None = None) -> list[str]:
        prefix = contract.JOB_ALARM_PREFIX + (f"{job}-" if job else "")
        names: list[str] = []
        try:
            for page in self._client.get_paginator("describe_alarms").paginate(
                AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm"]
            ):
                names += [a["AlarmName"] for a in page.get("MetricAlarms", [])]
        except ClientError as exc:
            raise ActionFailed(f"DescribeAlarms {prefix}", exc) from exc
        return names

    def firing_job_alarms(self) -> list[AlarmObservation]:
        firing: list[AlarmObservation] = []
        try:
            for page in self._client.get_paginator("describe_alarms").paginate(
                AlarmNamePrefix=contract.JOB_ALARM_PREFIX, AlarmTypes=["MetricAlarm"], StateValue="ALARM"
            ):
                # StateValue filters on AWS; moto ignores it beside a name prefix, so check again.
                for alarm in (a for a in page.get("MetricAlarms", []) if a.get("StateValue") == "ALARM"):
                    dimensions = {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])}
                    firing.append(
                        _observation(
                            alarm["AlarmName"],
                            dimensions,
                            alarm.get("StateReason"),
                            alarm.get("StateUpdatedTimestamp"),
                            metric=alarm.get("MetricName"),
                        )
                    )
        except ClientError as exc:
            raise ActionFailed(f"DescribeAlarms {contract.JOB_ALARM_PREFIX} in ALARM", exc) from exc
        return firing

    def firing_contributors(self, alarm_name: str) -> list[AlarmObservation]:
        """Contributors in ALARM of a multi-time-series alarm (botocore has no paginator for it: NextToken by hand)."""
        firing: list[AlarmObservation] = []
        request: dict[str, Any] = {"AlarmName": alarm_name}
        # Recent (2025): a botocore without it must fail as an AWS call does (the sweep goes on, its alarm fires).
        describe = getattr(self._client, "describe_alarm_contributors", None)
        if describe is None:
            missing = RuntimeError("this runtime's botocore does not know DescribeAlarmContributors")
            raise ActionFailed(f"DescribeAlarmContributors {alarm_name}", missing)
        try:
            while True:
                page = describe(**request)
                for contributor in page.get("AlarmContributors", []):
                    firing.append(
                        _observation(
                            alarm_name,
                            contributor.get("ContributorAttributes") or {},
                            contributor.get("StateReason"),
                            contributor.get("StateTransitionedTimestamp"),
                            contributor=True,
                        )
                    )
                if not page.get("NextToken"):
                    return firing
                request["NextToken"] = page["NextToken"]
        except ClientError as exc:
            # The botocore model names this code for an unknown alarm: not deployed (yet), so nothing fires.
            if error_code(exc) == "ResourceNotFoundException":
                return firing
            raise ActionFailed(f"DescribeAlarmContributors {alarm_name}", exc) from exc

    def fleet_alarm_states(self, names: Sequence[str]) -> dict[str, FleetAlarmState]:
        """DescribeAlarms by name (at most 100 names a call), every page: EvaluationState says PARTIAL_DATA."""
        states: dict[str, FleetAlarmState] = {}
        for start in range(0, len(names), DESCRIBE_BATCH):
            batch = list(names[start : start + DESCRIBE_BATCH])
            try:
                for page in self._client.get_paginator("describe_alarms").paginate(
                    AlarmNames=batch, AlarmTypes=["MetricAlarm"]
                ):
                    for alarm in page.get("MetricAlarms", []):
                        states[alarm["AlarmName"]] = FleetAlarmState(
                            name=alarm["AlarmName"],
                            state=alarm.get("StateValue"),
                            reason=str(alarm.get("StateReason") or ""),
                            evaluation_state=alarm.get("EvaluationState"),
                        )
            except ClientError as exc:
                raise ActionFailed(f"DescribeAlarms {batch[0]}...", exc) from exc
        return states

    def delete_alarms(self, names: Sequence[str]) -> None:
        for start in range(0, len(names), DELETE_BATCH):
            batch = list(names[start : start + DELETE_BATCH])
            try:
                self._client.delete_alarms(AlarmNames=batch)
            except ClientError as exc:
                if error_code(exc) != "ResourceNotFound":  # already gone: that is the goal
                    raise ActionFailed(f"DeleteAlarms {batch[0]}...", exc) from exc


class TrainingMetrics:
    def __init__(self, client: CloudWatchClient) -> None:
        self._client = client

    def jobs_with_datapoints(
        self, series: Iterable[tuple[str, str]], *, since: datetime, until: datetime, period_seconds: int = 60
    ) -> set[str]:
        """Of the (job, metric) series, the jobs that published a datapoint in the window; one call per 500 series."""
        # Long windows take a longer period: 1-minute data is kept for 15 days, hourly aggregates for 455.
        queries = list(series)
        seen: set[str] = set()
        for start in range(0, len(queries), METRIC_DATA_BATCH):
            batch = queries[start : start + METRIC_DATA_BATCH]
            ids = {f"q{i}": job for i, (job, _) in enumerate(batch)}
            request: list[MetricDataQueryTypeDef] = [
                {
                    "Id": query_id,
                    "MetricStat": {
                        "Metric": {
                            "Namespace": contract.SAGEMAKER_TRAINING_NAMESPACE,
                            "MetricName": metric,
                            "Dimensions": [{"Name": contract.JOB_DIMENSION, "Value": job}],
                        },
                        "Period": period_seconds,
                        "Stat": "SampleCount",
                    },
                    "ReturnData": True,
                }
                for query_id, (job, metric) in zip(ids, batch, strict=True)
            ]
            try:
                pages = self._client.get_paginator("get_metric_data").paginate(
                    MetricDataQueries=request, StartTime=since, EndTime=until + timedelta(minutes=1)
                )
                for page in pages:
                    for result in page.get("MetricDataResults", []):
                        if result.get("Values"):
                            seen.add(ids[result["Id"]])
            except ClientError as exc:
                raise ActionFailed("GetMetricData", exc) from exc
        return seen

    def host_averages(
        self, hosts: Sequence[str], *, metric: str, since: datetime, until: datetime
    ) -> dict[str, list[tuple[datetime, float]]]:
        return self.series_values(
            contract.HOST_DIMENSION, hosts, metric=metric, statistic="Average", since=since, until=until
        )

    def series_values(
        self, dimension: str, values: Sequence[str], *, metric: str, statistic: str, since: datetime, until: datetime
    ) -> dict[str, list[tuple[datetime, float]]]:
        """One-minute datapoints per dimension value, one GetMetricData call per 500 values, every page read (a
        series' datapoints can span pages). Values without a datapoint are left out."""
        found: dict[str, list[tuple[datetime, float]]] = {}
        for start in range(0, len(values), METRIC_DATA_BATCH):
            batch = list(values[start : start + METRIC_DATA_BATCH])
            ids = {f"h{i}": value for i, value in enumerate(batch)}
            request: list[MetricDataQueryTypeDef] = [
                {
                    "Id": query_id,
                    "MetricStat": {
                        "Metric": {
                            "Namespace": contract.SAGEMAKER_TRAINING_NAMESPACE,
                            "MetricName": metric,
                            "Dimensions": [{"Name": dimension, "Value": value}],
                        },
                        "Period": 60,
                        "Stat": statistic,
                    },
                    "ReturnData": True,
                }
                for query_id, value in ids.items()
            ]
            try:
                pages = self._client.get_paginator("get_metric_data").paginate(
                    MetricDataQueries=request, StartTime=since, EndTime=until
                )
                for page in pages:
                    for result in page.get("MetricDataResults", []):
                        points = list(zip(result.get("Timestamps", []), result.get("Values", []), strict=False))
                        if points:
                            found.setdefault(ids[result["Id"]], []).extend(points)
            except ClientError as exc:
                raise ActionFailed("GetMetricData", exc) from exc
        return found


def _observation(
    alarm_name: str,
    dimensions: dict[str, Any],
    reason: Any,
    at: Any,
    *,
    metric: str | None = None,
    contributor: bool = False,
) -> AlarmObservation:
    """An alarm (or contributor) found in ALARM by the sweeper, in the shape its state-change event gives."""
    return AlarmObservation(
        event_id="",
        account=None,
        region=None,
        time=at if isinstance(at, datetime) else None,
        alarm_name=alarm_name,
        state="ALARM",
        reason=str(reason or "")[:1024],
        job=job_of_dimensions(dimensions),
        metric=metric,
        contributor=contributor,
    )


class MetricCharts:
    """GetMetricWidgetImage: the PNG CloudWatch draws for a metric widget (charts.py builds it), 20 transactions a
    second (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricWidgetImage.html)."""

    def __init__(self, client: CloudWatchClient) -> None:
        self._client = client

    def png(self, widget: Mapping[str, Any]) -> bytes:
        try:
            response = self._client.get_metric_widget_image(
                MetricWidget=json.dumps(widget, separators=(",", ":")), OutputFormat="png"
            )
        except ClientError as exc:
            raise ActionFailed("draw the metric's graph (GetMetricWidgetImage)", exc) from exc
        return bytes(response["MetricWidgetImage"])
