"""CloudWatch alarm state-change events, shaped like the ones EventBridge delivers.

The emulation cannot evaluate alarms (moto never does), so scenarios and tests say when an alarm
or one of its contributors goes to ALARM; these builders give the event CloudWatch would send.
Shapes follow the CloudWatch documentation's samples ("Alarm events and EventBridge").
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from training_guard import contract

ACCOUNT = "123456789012"
REGION = "us-east-1"


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}+0000"


def _envelope(
    detail_type: str, alarm_name: str, detail: dict[str, Any], *, at: datetime, account: str, region: str
) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": contract.CLOUDWATCH_EVENT_SOURCE,
        "account": account,
        "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [f"arn:aws:cloudwatch:{region}:{account}:alarm:{alarm_name}"],
        "detail": {"alarmName": alarm_name, **detail},
    }


def contributor_event(
    alarm_name: str,
    expression: str,
    attributes: dict[str, str],
    *,
    state: str = "ALARM",
    reason: str = "Threshold Crossed: 3 datapoints were greater than the threshold (5.0).",
    at: datetime | None = None,
    account: str = ACCOUNT,
    region: str = REGION,
) -> dict[str, Any]:
    """A Metrics Insights (multi-time-series) alarm contributor changed state."""
    at = at or datetime.now(UTC)
    detail = {
        "alarmContributor": {"id": uuid.uuid4().hex[:16], "attributes": attributes},
        "state": {"value": state, "reason": reason, "timestamp": _stamp(at)},
        "configuration": {
            "metrics": [{"id": "q", "expression": expression, "returnData": True, "period": 60}],
            "description": "Training Guard metric guard",
        },
    }
    return _envelope(contract.ALARM_CONTRIBUTOR_STATE_CHANGE, alarm_name, detail, at=at, account=account, region=region)


def metric_alarm_event(
    alarm_name: str,
    metric: str,
    dimensions: dict[str, str],
    *,
    state: str = "ALARM",
    previous: str = "OK",
    reason: str = "Threshold Crossed: 3 out of the last 3 datapoints were greater than the threshold (5.0).",
    stat: str = "Maximum",
    at: datetime | None = None,
    account: str = ACCOUNT,
    region: str = REGION,
) -> dict[str, Any]:
    """A single-metric alarm (a per-job guard) changed state."""
    at = at or datetime.now(UTC)
    detail = {
        "configuration": {
            "metrics": [
                {
                    "id": str(uuid.uuid4()),
                    "metricStat": {
                        "metric": {
                            "dimensions": dimensions,
                            "name": metric,
                            "namespace": contract.SAGEMAKER_TRAINING_NAMESPACE,
                        },
                        "period": 60,
                        "stat": stat,
                    },
                    "returnData": True,
                }
            ]
        },
        "previousState": {
            "reason": "Threshold Crossed: back under the threshold",
            "timestamp": _stamp(at),
            "value": previous,
        },
        "state": {"reason": reason, "timestamp": _stamp(at), "value": state},
    }
    return _envelope(contract.ALARM_STATE_CHANGE, alarm_name, detail, at=at, account=account, region=region)
