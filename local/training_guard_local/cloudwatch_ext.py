"""What moto's CloudWatch lacks for the guard: `DescribeAlarmContributors`.

moto 5.2 has no Metrics Insights evaluation and raises NotImplementedError on
`DescribeAlarmContributors`. For the emulation only, a fleet guard's contributors in ALARM are set
by hand (`set_contributors`) and listed by the API with AWS's shapes: `AlarmContributors` with
`ContributorId`, `ContributorAttributes`, `StateReason`, `StateTransitionedTimestamp`; an alarm the
emulation knows nothing of raises `ResourceNotFoundException`, the code the botocore model names.

`install()` is idempotent and must run before the first CloudWatch call of a mocked session.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from moto.cloudwatch import responses as cw_responses
from moto.cloudwatch.exceptions import ResourceNotFoundException
from moto.core.responses import ActionResult

# (account, region) -> alarm name -> contributors in ALARM
_CONTRIBUTORS: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}


def set_contributors(
    account: str, region: str, alarm_name: str, contributors: list[Mapping[str, str]], *, reason: str = ""
) -> None:
    """The contributors (their dimensions) of a fleet alarm that are in ALARM now; [] for none."""
    now = datetime.now(UTC)
    _CONTRIBUTORS.setdefault((account, region), {})[alarm_name] = [
        {
            "ContributorId": hashlib.sha256(repr(sorted(c.items())).encode()).hexdigest()[:16],
            "ContributorAttributes": dict(c),
            "StateReason": reason or "Threshold Crossed",
            "StateTransitionedTimestamp": now,
        }
        for c in contributors
    ]


def reset() -> None:
    _CONTRIBUTORS.clear()


def _describe_alarm_contributors(self: Any) -> ActionResult:
    name = self._get_param("AlarmName")
    backend: Any = self.cloudwatch_backend
    known = _CONTRIBUTORS.get((backend.account_id, backend.region_name), {})
    if name not in known and name not in backend.alarms:
        raise ResourceNotFoundException()
    return ActionResult({"AlarmContributors": known.get(name, [])})


def install() -> None:
    """Teach moto's CloudWatch `DescribeAlarmContributors` (idempotent)."""
    cw_responses.CloudWatchResponse.describe_alarm_contributors = _describe_alarm_contributors  # type: ignore[attr-defined]
