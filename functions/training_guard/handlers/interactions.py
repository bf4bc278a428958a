"""Slack interactivity's entry points: the function URL's acknowledgement and the click queue's worker (clicks.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger

from training_guard.adapters import clock
from training_guard.handlers import wiring
from training_guard.render.slack_actions import NotAClick
from training_guard.services.clicks import ClickWorker

logger = Logger()


def process(event: Mapping[str, Any], worker: ClickWorker, *, now: datetime | None = None) -> dict[str, Any]:
    """An SQS batch of clicks: each acted on, the failed ones returned to the queue (partial batch response)."""
    failures: list[dict[str, str]] = []
    for record in event.get("Records", []):
        message_id = str(record.get("messageId", ""))
        try:
            done = worker.handle(str(record.get("body", "")), now=now or clock.utcnow())
        except (NotAClick, ValueError) as exc:
            logger.error("click dropped: unusable", extra={"message_id": message_id, "why": str(exc)})
            continue  # cannot succeed later; the message is deleted, the log says why
        except Exception:
            logger.exception("click failed", extra={"message_id": message_id})
            failures.append({"itemIdentifier": message_id})
            continue
        logger.info("click handled", extra={"message_id": message_id, "done": done})
    return {"batchItemFailures": failures}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return wiring.root().interactions.acknowledge(event)


def worker_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process(event, wiring.root().click_worker_for(context))
