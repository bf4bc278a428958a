"""The weekly digest: the last seven days' totals, as `training-guard report` counts them, in one notification.

Once a week (configuration `digest`: weekday and hour, UTC) the digest function computes `training_guard.totals`
over the seven days before the scheduled hour and publishes one notification of kind `digest` to the topic: the
document (schema `training-guard.notification/1`, with a `digest` object of numbers), prose for e-mail, a block
message for Slack (slack_messages.render_digest) and a custom notification for Amazon Q Developer.

The week: the window ends at the scheduled hour (the scheduled event's `time`, taken to its hour) and starts seven
days earlier, so that consecutive digests tile time: a stop at 09:00:00 on the digest's day counts in the digest
that starts then, never in two. The ISO week of its end names it (`2026-W49`).

Exactly once per week: a digest is claimed in the state table under `digest#<ISO week>` before anything is read
(the ledger's conditional put, `adapters/ledger.py`), completed once published, and released when anything fails,
so that Lambda's retry sends it. A second invocation in the same week (a duplicate delivery, which Lambda's
asynchronous queue allows, https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html, or a
schedule changed mid-week) finds it done, or being sent, and publishes nothing.

Light on purpose: the Slack notifier renders a digest with the text functions of this module and must not load the
policy (tests/unit/test_import_weight.py), so the modules that do (totals, messages) are imported where a digest is
composed and sent, not at the top.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Protocol

from training_guard import contract

if TYPE_CHECKING:
    from training_guard.messages import Notification
    from training_guard.ports import Claim
    from training_guard.totals import StopEntry, Totals

WINDOW: Final = timedelta(days=7)
TOP: Final = 5  # rules and guards, and job prefixes, named in the digest (as many as the report's text shows)
KEY_PREFIX: Final = f"{contract.DIGEST_KIND}#"  # the state table's marker: digest#<ISO week>
SENT: Final = "sent"  # the marker's outcome once published
# The last instant of a window that ends at `until` (totals.compute counts both ends; the next week starts there).
_JUST_BEFORE: Final = timedelta(microseconds=1)


# --- the week ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Week:
    """Seven days ending at a digest's scheduled hour (excluded), named by the ISO week of that hour."""

    label: str  # "2026-W49"
    since: datetime
    until: datetime

    @property
    def key(self) -> str:
        """The marker of this week's digest in the state table, and its notification's transition."""
        return f"{KEY_PREFIX}{self.label}"


def week_of(scheduled: datetime) -> Week:
    until = scheduled.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    year, number, _ = until.isocalendar()
    return Week(label=f"{year}-W{number:02d}", since=until - WINDOW, until=until)


# --- the document --------------------------------------------------------------------------------------------------


def document(result: Totals, week: Week, warnings: Sequence[str] = ()) -> dict[str, Any]:
    """The notification's `digest` object: the totals' numbers, the first TOP rules and prefixes and how many there
    are in all (a busy week's full lists are `training-guard report`'s: one SNS message holds 256 KB)."""
    totals = result.as_dict()
    return {
        "week": week.label,
        "since": _iso(week.since),
        "until": _iso(week.until),  # excluded: the next week's digest starts here
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


# --- words: every channel says the same ------------------------------------------------------------------------------


def usd(amount: float) -> str:
    return f"${amount:,.2f}"


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def spend_text(spend: Mapping[str, Any], before: str = "", after: str = "") -> str:
    """A sum of known figures, with how many were unknown (never counted as $0)."""
    known, unknown = spend["known"], spend["unknown"]
    if known == 0 and unknown == 0:
        return "-"
    if known == 0:
        return f"unknown ({count(unknown, 'stop')} without a price)"
    text = f"{before}{usd(spend['usd'])}{after}"
    return text + (f", {unknown} of {known + unknown} unknown" if unknown else "")


def spend_cell(spend: Mapping[str, Any]) -> str:
    known, unknown = spend["known"], spend["unknown"]
    if not known:
        return "unknown" if unknown else "-"
    return usd(spend["usd"]) + (f" (+{unknown} unknown)" if unknown else "")


def window_text(digest: Mapping[str, Any]) -> str:
    return f"{_when(digest['since'])} to {_when(digest['until'])} UTC"


def facts(digest: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) of each total, in the order the report prints them."""
    stopped = count(digest["stops"], "job")
    if digest["unconfirmed_stops"]:
        stopped += f" ({count(digest['unconfirmed_stops'], 'stop attempt')} never confirmed by SageMaker, left out)"
    would = digest["would_stop"]
    rows = [
        ("Stopped", stopped),
        (
            "Would have stopped",
            f"{would} (not stopped: dry run, or the job's tags)"
            if would is not None
            else "unknown (the guard's metrics could not be read)",
        ),
        ("Spend avoided", spend_text(digest["spend_avoided"], "up to ", " at list price")),
        ("Spend at the stop", spend_text(digest["spend_so_far"])),
    ]
    outcomes = digest.get("outcomes") or {}
    others = [f"{k.replace('_', ' ')} {v}" for k, v in outcomes.items() if k not in ("stopped", "would_stop") and v]
    if others:
        rows.append(("Other outcomes", " · ".join(others)))
    return rows


def group_line(group: Mapping[str, Any]) -> str:
    """`VanishingGradient (rules): 2 stops, $200.75`"""
    name = f"{group['name']} ({group['kind']})" if group.get("kind") else str(group["name"])
    return f"{name}: {count(group['stops'], 'stop')}, {spend_cell(group['spend_avoided'])}"


def groups(digest: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """(title, lines) of the top rules and guards and the most-stopped job prefixes; the lines name how many more."""
    out = []
    for title, key in (("Top rules and guards", "rules"), ("Most-stopped job prefixes", "prefixes")):
        lines = [group_line(g) for g in digest[key]]
        more = digest[f"{key}_total"] - len(digest[key])
        if more > 0:
            lines.append(f"... {more} more (training-guard report lists them all)")
        out.append((title, lines or ["no stops"]))
    return out


def title(digest: Mapping[str, Any]) -> str:
    head = f"Weekly digest {digest['week']}"
    stops = digest["stops"]
    if not stops:
        would = digest["would_stop"]
        return f"{head}: no job stopped" + (f", {would} would have been" if would else "")
    avoided = digest["spend_avoided"]
    saved = f"up to {usd(avoided['usd'])} avoided" if avoided["known"] else "spend avoided unknown"
    return f"{head}: {count(stops, 'job')} stopped, {saved}"


def summary(digest: Mapping[str, Any]) -> str:
    """One line: the window and every total (the notification's reason)."""
    return f"{window_text(digest)}: " + "; ".join(f"{label.lower()} {text}" for label, text in facts(digest))


def email_text(digest: Mapping[str, Any], *, account: str | None, region: str | None, dry_run: bool) -> str:
    lines = [f"Training Guard weekly digest, {digest['week']}", window_text(digest), ""]
    lines += [f"  {label + ':':<20}{text}" for label, text in facts(digest)]
    for heading, rows in groups(digest):
        lines += ["", heading] + [f"  {row}" for row in rows]
    warnings = list(digest.get("warnings") or ())
    if warnings:
        lines += [""] + [f"Warning: {w}" for w in warnings]
    if dry_run:
        lines += ["", "The guard is in dry-run mode: it stops nothing."]
    lines += [
        "",
        f"Account:   {account or '-'}   Region: {region or '-'}",
        "",
        "Spend is estimated at list price, up to each job's maximum runtime; a figure without a price is counted "
        "apart, never as $0. `training-guard report --since 7d` shows the same totals with every rule and prefix.",
    ]
    return "\n".join(lines)


def markdown(digest: Mapping[str, Any]) -> str:
    """The body of the Amazon Q Developer custom notification (client-markdown)."""
    lines = [f"_{window_text(digest)}_"] + [f"*{label}:* {text}" for label, text in facts(digest)]
    for heading, rows in groups(digest):
        lines += [f"*{heading}:*"] + [f"• {row}" for row in rows]
    lines += [f"_Warning: {w}_" for w in digest.get("warnings") or ()]
    return "\n".join(lines)


def compose(
    result: Totals,
    week: Week,
    *,
    account: str | None,
    region: str | None,
    now: datetime,
    dry_run: bool,
    warnings: Sequence[str] = (),
) -> Notification:
    """The week's notification: kind `digest`, about no job (its document names the week where a job would be)."""
    from training_guard.events import TrainingJob
    from training_guard.messages import Notice, Notification, Outcome

    digest = document(result, week, warnings)
    return Notification(
        kind=Notice.DIGEST,
        outcome=Outcome.NOTIFIED,
        severity="info",
        title=title(digest),
        reason=summary(digest),
        # The document's schema has a job; this one names the week, so that Q Developer threads each digest apart.
        job=TrainingJob(name=f"training-guard-digest-{week.label}", status="Digest"),
        finding=None,
        account=account,
        region=region,
        event_id=week.key,
        time=now,
        dry_run=dry_run,
        transition=week.key,  # one Slack delivery per webhook and week, whatever SNS and SQS redeliver
        digest=digest,
    )


# --- sending it once a week ------------------------------------------------------------------------------------------


class MarkerPort(Protocol):
    """The ledger's exactly-once claim (adapters/ledger.DynamoLedger; tests.fakes.FakeLedger)."""

    def claim(self, key: str, *, now: datetime, lease_seconds: int) -> Claim: ...

    def complete(self, key: str, *, now: datetime, ttl_seconds: int, outcome: str) -> None: ...

    def release(self, key: str) -> None: ...


class PublisherPort(Protocol):
    def publish(self, notification: Notification) -> None: ...


@dataclass(frozen=True)
class DigestReceipt:
    week: str
    sent: bool
    skipped: str | None = None  # why nothing was sent
    stops: int | None = None
    would_stop: int | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class WeeklyDigest:
    """Reads the week's stop records and guard metrics, computes the totals and publishes them, once per week."""

    marker: MarkerPort
    publisher: PublisherPort
    read_stops: Callable[[datetime], Iterable[StopEntry]]  # every stop record stopped at this time or later
    read_metrics: Callable[[datetime, datetime], Mapping[str, Sequence[tuple[datetime, float]]]]
    marker_ttl_seconds: int
    lease_seconds: int
    dry_run: bool = False
    prefix_separator: str | None = None

    def send(self, scheduled: datetime, *, now: datetime, account: str | None, region: str | None) -> DigestReceipt:
        from training_guard.errors import ActionFailed
        from training_guard.ports import Claim
        from training_guard.totals import compute

        week = week_of(scheduled)
        claim = self.marker.claim(week.key, now=now, lease_seconds=self.lease_seconds)
        if claim is Claim.DONE:
            return DigestReceipt(week.label, sent=False, skipped="already sent this week")
        if claim is Claim.BUSY:
            # Another invocation is sending it; should it die, its own retry takes over once its lease has run out.
            return DigestReceipt(week.label, sent=False, skipped="being sent by another invocation")
        try:
            warnings: list[str] = []
            stops = self.read_stops(week.since)
            last = week.until - _JUST_BEFORE
            metrics: Mapping[str, Sequence[tuple[datetime, float]]] | None
            try:
                metrics = self.read_metrics(week.since, last)
            except ActionFailed as exc:
                # As the report does: the stops and spend still count; what only the metrics tell is unknown.
                metrics = None
                warnings.append(f"{exc}: would-have-stopped and the other outcomes are unknown")
            result = compute(stops, metrics, since=week.since, until=last, prefix_separator=self.prefix_separator)
            notification = compose(
                result, week, account=account, region=region, now=now, dry_run=self.dry_run, warnings=warnings
            )
            self.publisher.publish(notification)
        except BaseException:
            self.marker.release(week.key)  # not sent: Lambda's retry may claim it again
            raise
        self.marker.complete(week.key, now=now, ttl_seconds=self.marker_ttl_seconds, outcome=SENT)
        return DigestReceipt(week.label, sent=True, stops=result.stops, would_stop=result.would_stop, warnings=warnings)


# --- small helpers ----------------------------------------------------------------------------------------------------


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _when(text: str) -> str:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).strftime("%Y-%m-%d %H:%M")
