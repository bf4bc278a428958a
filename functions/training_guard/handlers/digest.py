"""Weekly digest Lambda, on its schedule: the last seven days' totals to the topic, once per ISO week (digest.py)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger

from training_guard.adapters import activity, clock
from training_guard.adapters.ledger import DynamoLedger
from training_guard.adapters.sns import SnsPublisher
from training_guard.domain.events import parse_time
from training_guard.handlers import wiring
from training_guard.services.digest import WeeklyDigest

logger = Logger()


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    root = wiring.root()
    settings = root.settings
    if not settings.config.digest.enabled:  # the stack deploys no schedule then; a manual invocation says why
        logger.info("digest disabled", extra={"setting": "digest.enabled"})
        return {"sent": False, "skipped": "digest.enabled is false"}
    now = clock.utcnow()
    receipt = weekly_digest(root, lease_seconds=wiring.lease(context)).send(
        scheduled_time(event) or now, now=now, account=wiring.account_of(context), region=wiring.region_of(context)
    )
    logger.info("digest sent" if receipt.sent else "digest not sent", extra={"receipt": asdict(receipt)})
    return asdict(receipt)


def weekly_digest(root: wiring.Root, *, lease_seconds: int) -> WeeklyDigest:
    """The digest's parts: the state table (stop records, the week's marker), the guard's metrics, the topic."""
    settings = root.settings
    dynamodb, cloudwatch = root.client("dynamodb"), root.client("cloudwatch")
    config = settings.config
    return WeeklyDigest(
        marker=DynamoLedger(dynamodb, settings.table),
        publisher=SnsPublisher(root.client("sns"), settings.topic_arn),
        read_stops=lambda since: activity.scan_stops(dynamodb, settings.table, since=since),
        read_metrics=lambda since, until: activity.read_metrics(cloudwatch, since=since, until=until),
        # Remembered as long as a handled transition: far beyond the week it names (a week never recurs).
        marker_ttl_seconds=config.dedup_ttl_days * 86400,
        lease_seconds=lease_seconds,
        dry_run=config.dry_run,
    )


def scheduled_time(event: Any) -> datetime | None:
    """The time of the scheduled event (EventBridge's `time`, the same on every retry of it), or None."""
    return parse_time(event.get("time")) if isinstance(event, dict) else None
