"""The weekly digest's week and numbers: seven days ending at the scheduled hour, and the totals' document.

The window, and why consecutive digests tile time: docs/design/digest.md."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from training_guard import contract
from training_guard.config.frozen import frozen
from training_guard.domain.values import iso

if TYPE_CHECKING:
    from training_guard.domain.totals import Totals

WINDOW: Final = timedelta(days=7)
TOP: Final = 5  # rules and guards, and job prefixes, named in the digest (as many as the report's text shows)
KEY_PREFIX: Final = f"{contract.DIGEST_KIND}#"  # the state table's marker: digest#<ISO week>
SENT: Final = "sent"
# The last instant of a window that ends at `until` (totals.compute counts both ends; the next week starts there).
JUST_BEFORE: Final = timedelta(microseconds=1)


@frozen
class Week:
    """Seven days ending at a digest's scheduled hour (excluded), named by the ISO week of that hour."""

    label: str  # "2026-W49"
    since: datetime
    until: datetime

    @property
    def key(self) -> str:
        return f"{KEY_PREFIX}{self.label}"


def week_of(scheduled: datetime) -> Week:
    until = scheduled.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    year, number, _ = until.isocalendar()
    return Week(label=f"{year}-W{number:02d}", since=until - WINDOW, until=until)


def document(result: Totals, week: Week, warnings: Sequence[str] = ()) -> dict[str, Any]:
    """The notification's `digest` object: the totals, the first TOP rules and prefixes, and how many in all."""
    # A busy week's full lists are `training-guard report`'s: one SNS message holds 256 KB.
    totals = result.as_dict()
    return {
        "week": week.label,
        "since": iso(week.since),
        "until": iso(week.until),  # excluded: the next week's digest starts here
        "stops": totals["stops"],
        "unconfirmed_stops": totals["unconfirmed_stops"],
        "would_stop": totals["would_stop"],
        "spend_avoided": {k: totals["spend_avoided"][k] for k in ("usd", "known", "unknown")},
        "spend_so_far": totals["spend_so_far"],
        "outcomes": totals["outcomes"],
        "rules": totals["rules"][:TOP],
        "rules_total": len(totals["rules"]),
        "prefixes": totals["prefixes"][:TOP],
        "prefixes_total": len(totals["prefixes"]),
        "days": totals["days"],
        "warnings": list(warnings),
    }
