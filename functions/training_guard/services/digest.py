"""The weekly digest, sent exactly once per ISO week (docs/design/digest.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from training_guard.config.frozen import frozen
from training_guard.domain.digest import JUST_BEFORE, SENT, Week, document, week_of
from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import TrainingJob
from training_guard.domain.outcome import Outcome
from training_guard.domain.totals import StopEntry, Totals, compute
from training_guard.render.digest import summary, title
from training_guard.render.messages import Notice, Notification
from training_guard.services.once import Marks, once
from training_guard.services.ports import Claim


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


class PublisherPort(Protocol):
    def publish(self, notification: Notification) -> None: ...


@frozen
class DigestReceipt:
    week: str
    sent: bool
    skipped: str | None = None
    stops: int | None = None
    would_stop: int | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class WeeklyDigest:
    """Reads the week's stop records and guard metrics, computes the totals and publishes them, once per week."""

    marker: Marks
    publisher: PublisherPort
    read_stops: Callable[[datetime], Iterable[StopEntry]]
    read_metrics: Callable[[datetime, datetime], Mapping[str, Sequence[tuple[datetime, float]]]]
    marker_ttl_seconds: int
    lease_seconds: int
    dry_run: bool = False
    prefix_separator: str | None = None

    def send(self, scheduled: datetime, *, now: datetime, account: str | None, region: str | None) -> DigestReceipt:
        week = week_of(scheduled)
        with once(
            self.marker,
            week.key,
            now=now,
            lease_seconds=self.lease_seconds,
            ttl_seconds=self.marker_ttl_seconds,
            outcome=SENT,
        ) as held:
            if held.state is Claim.DONE:
                return DigestReceipt(week.label, sent=False, skipped="already sent this week")
            if held.state is Claim.BUSY:
                # Another invocation is sending it; its retry takes over once its lease runs out.
                return DigestReceipt(week.label, sent=False, skipped="being sent by another invocation")
            warnings: list[str] = []
            stops = self.read_stops(week.since)
            last = week.until - JUST_BEFORE
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
        return DigestReceipt(week.label, sent=True, stops=result.stops, would_stop=result.would_stop, warnings=warnings)
