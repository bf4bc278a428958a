"""What moto's CloudWatch lacks for the guard: `DescribeAlarmContributors`.

moto 5.2 has no Metrics Insights evaluation and raises NotImplementedError on
`DescribeAlarmContributors`. For the emulation only, a fleet guard's contributors in ALARM are set
by hand (`set_contributors`) and listed by the API with AWS's shapes: `AlarmContributors` with
`ContributorId`, `ContributorAttributes`, `StateReason`, `StateTransitionedTimestamp`; an alarm the
emulation knows nothing of raises `ResourceNotFoundException`, the code the botocore model names.

The answer is given through botocore's events in front of moto (answers.py), which is not touched. `install()` is
idempotent; a client answers so if made from a session `answers.install` was given (the emulation's).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from moto.cloudwatch.models import cloudwatch_backends

from training_guard_local import answers

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


def _describe_alarm_contributors(call: answers.Call, model: Any) -> answers.Reply:
    name = call.params.get("AlarmName")
    known = _CONTRIBUTORS.get((call.account, call.region), {})
    if name not in known and name not in cloudwatch_backends[call.account][call.region].alarms:
        return answers.refusal(model, "ResourceNotFoundException", "Unknown")  # moto's words: AWS's are not published
    return answers.reply(model, {"AlarmContributors": known.get(str(name), [])})


def install(session: Any = None) -> None:
    """Answer `DescribeAlarmContributors` in front of moto (idempotent; `answers.install`)."""
    answers.install(session)
    answers.answer("cloudwatch", "DescribeAlarmContributors", _describe_alarm_contributors)
