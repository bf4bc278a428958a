"""What the guard did, read for its totals: the stop records of the state table and the guard's outcome metrics.

Shared by `training-guard report` and the weekly digest; a refused call raises `ActionFailed` with its `ClientError`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from training_guard import contract
from training_guard.domain import totals
from training_guard.domain.errors import ActionFailed
from training_guard.domain.totals import StopEntry

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_dynamodb import DynamoDBClient

# Hourly sums, kept 455 days, within one GetMetricData's caps (docs/limits.md; a test pins the report's longest
# window under them); StartTime inclusive, EndTime exclusive (GetMetricData's API reference).
METRIC_PERIOD_SECONDS: Final = 3600
METRIC_QUERIES_MAX: Final = 500
METRIC_DATAPOINTS_MAX: Final = 100_800
# A Scan reads at most 1 MB per request, filtering after reading (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Scan.html).
# A day early: stopped_at compares as text, right only within one UTC offset; totals.compute applies the exact window.
SCAN_MARGIN: Final = timedelta(days=1)
# The attributes the totals read from a stop record (`folded`, which can be long, is not one of them).
STOP_ATTRIBUTES: Final = (
    contract.TABLE_PARTITION_KEY,
    "job",
    "rule",
    "reason",
    "stopped_at",
    "confirmed",
    "spend_avoided_usd",
    "spend_so_far_usd",
    "price_source",
    "instance_types",
)

# (items read so far, stop records found so far), after each page but the last
PageCallback = Callable[[int, int], None]


def scan_stops(
    dynamodb: DynamoDBClient,
    table: str,
    *,
    since: datetime,
    page_size: int | None = None,
    on_page: PageCallback | None = None,
) -> list[StopEntry]:
    """Every stop record of the table stopped at `since` or later (a day's margin: SCAN_MARGIN), all pages."""
    names = {f"#{name}": name for name in STOP_ATTRIBUTES}  # every name through a placeholder: none is reserved
    request: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": f"begins_with(#{contract.TABLE_PARTITION_KEY}, :stop) AND #stopped_at >= :from",
        "ProjectionExpression": ", ".join(names),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {
            ":stop": {"S": totals.STOP_KEY_PREFIX},
            ":from": {"S": (since - SCAN_MARGIN).astimezone(UTC).isoformat()},
        },
    }
    if page_size:
        request["Limit"] = page_size
    found: list[StopEntry] = []
    read = 0
    while True:
        try:
            page = dynamodb.scan(**request)
        except ClientError as exc:
            raise ActionFailed(f"dynamodb:Scan of {table}", exc) from exc
        read += int(page.get("ScannedCount", 0))
        found += [s for s in (StopEntry.from_item(item) for item in page.get("Items", [])) if s is not None]
        if not page.get("LastEvaluatedKey"):
            return found
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        if on_page is not None:
            on_page(read, len(found))


def metric_queries() -> list[dict[str, Any]]:
    dimensions = [{"Name": k, "Value": v} for k, v in totals.SERVICE_DIMENSION.items()]
    return [
        {
            "Id": f"m{i}",
            "Label": name,
            "MetricStat": {
                "Metric": {"Namespace": contract.GUARD_METRICS_NAMESPACE, "MetricName": name, "Dimensions": dimensions},
                "Period": METRIC_PERIOD_SECONDS,
                "Stat": "Sum",
            },
            "ReturnData": True,
        }
        for i, name in enumerate(totals.METRICS)
    ]


def read_metrics(
    cloudwatch: CloudWatchClient, *, since: datetime, until: datetime
) -> dict[str, list[tuple[datetime, float]]]:
    """Hourly sums of every guard metric the totals use, from the hour `since` falls in to the end of `until`'s."""
    queries = metric_queries()
    labels = {q["Id"]: q["Label"] for q in queries}
    start = since.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    end = until.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    request: dict[str, Any] = {"MetricDataQueries": queries, "StartTime": start, "EndTime": end}
    series: dict[str, list[tuple[datetime, float]]] = {name: [] for name in totals.METRICS}
    while True:
        try:
            page = cloudwatch.get_metric_data(**request)
        except ClientError as exc:
            raise ActionFailed("cloudwatch:GetMetricData of the guard's metrics", exc) from exc
        for result in page.get("MetricDataResults", []):
            name = labels.get(result.get("Id", ""))
            if name is not None:
                series[name] += [
                    (_utc(t), float(v)) for t, v in zip(result["Timestamps"], result["Values"], strict=True)
                ]
        if not page.get("NextToken"):
            return series
        request["NextToken"] = page["NextToken"]


def client_error(exc: ActionFailed) -> ClientError | None:
    cause = exc.__cause__
    return cause if isinstance(cause, ClientError) else None


def _utc(moment: datetime) -> datetime:
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
