"""The composition root of every function: typed settings, clients, adapters and services, built once
per execution environment and shared by the handlers, which keep only their entry points.

Each builder imports what it builds: one module serves four functions, and a function must not pay at
cold start for another's libraries (slack_sdk, the notifier's, costs the event handlers ~30-80 ms).
Tests and the local emulation replace what is built here by clearing the caches (`reset()`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from training_guard.adapters.clients import client
from training_guard.leases import lease_for

if TYPE_CHECKING:
    from training_guard.adapters.price_list import PriceList
    from training_guard.adapters.slack import Deadline
    from training_guard.adapters.sqs import DeadLetterParker
    from training_guard.chat import ChatDelivery
    from training_guard.responder import Responder
    from training_guard.settings import Settings
    from training_guard.sweeper import Sweeper


@cache
def settings() -> Settings:
    from training_guard.settings import Settings

    return Settings.from_env()


@cache
def parker() -> DeadLetterParker | None:
    """Where the event handlers park unusable events at once (None: they raise instead)."""
    from training_guard.adapters.sqs import DeadLetterParker

    url = settings().dead_letter_queue_url
    return DeadLetterParker(client("sqs"), url) if url else None


def pricing_client() -> Any:
    """The Price List API client (us-east-1, short timeouts), made when a price is first asked of the API.

    A seam: moto has no Price List API (it answers 404), so the integration tests and the local emulation
    replace this function with one that returns a stubbed client (botocore's Stubber with recorded answers).
    """
    from training_guard.adapters.price_list import pricing_client as real

    return real()


@cache
def price_list() -> PriceList:
    """List prices: this container's memory, the state table's cached items, then the Price List API.

    One per execution environment: its memory (and, on first use, its client) lives as long as the container.
    """
    from training_guard.adapters.price_list import PriceList

    return PriceList(
        # Looked up when first used, not now: a test or the emulation may replace pricing_client after this.
        pricing_factory=lambda: pricing_client(),  # noqa: PLW0108
        dynamodb=client("dynamodb"),
        table=settings().table,
        memory={},
    )


@cache
def responder() -> Responder:
    from training_guard.adapters.cloudwatch import CloudWatchAlarms
    from training_guard.adapters.ledger import DynamoLedger
    from training_guard.adapters.sagemaker import SageMakerJobs
    from training_guard.adapters.sns import SnsPublisher
    from training_guard.handlers.receipts import SpendMeter
    from training_guard.responder import Responder

    settings_ = settings()
    return Responder(
        settings_.config,
        jobs=SageMakerJobs(client("sagemaker")),
        ledger=DynamoLedger(client("dynamodb"), settings_.table),
        publisher=SnsPublisher(client("sns"), settings_.topic_arn),
        alarms=CloudWatchAlarms(client("cloudwatch")),
        prices=price_list(),
        meter=SpendMeter(),
    )


@cache
def sweeper() -> Sweeper:
    from training_guard.adapters.cloudwatch import CloudWatchAlarms, TrainingMetrics
    from training_guard.adapters.sagemaker import SageMakerJobs
    from training_guard.sweeper import Sweeper

    cloudwatch = client("cloudwatch")
    return Sweeper(
        responder(), SageMakerJobs(client("sagemaker")), CloudWatchAlarms(cloudwatch), TrainingMetrics(cloudwatch)
    )


@cache
def chat_deadline() -> Deadline:
    """The notifier's time budget, shared by the delivery loop and the Slack sender's retries."""
    from training_guard.adapters.slack import Deadline

    return Deadline()


@cache
def delivery() -> ChatDelivery:
    from training_guard.adapters.ledger import DynamoLedger
    from training_guard.adapters.secrets import Secrets, SecretWebhookUrls
    from training_guard.adapters.slack import WebhookSender
    from training_guard.adapters.sqs import DeadLetterParker
    from training_guard.chat import ChatDelivery
    from training_guard.settings import ChatSettings

    settings_ = ChatSettings.from_env()
    return ChatDelivery(
        settings_.config.slack,
        urls=SecretWebhookUrls(Secrets(client("secretsmanager")), settings_.webhook_secrets),
        sender=WebhookSender(deadline=chat_deadline(), min_interval=settings_.min_interval_seconds),
        ledger=DynamoLedger(client("dynamodb"), settings_.table),
        parker=DeadLetterParker(client("sqs"), settings_.dead_letter_queue_url),
        ttl_seconds=settings_.config.dedup_ttl_days * 86400,
        budget=chat_deadline(),
        organization=settings_.config.organization,
    )


def lease(context: Any) -> int:
    """The lease of this invocation's claims: its remaining time (plus margin), so that the retry of
    an attempt killed by its timeout finds the lease run out and takes the transition over."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return lease_for(remaining() if callable(remaining) else None)


def time_left(context: Any) -> Callable[[], float]:
    """Seconds left in this invocation, read when asked (unbounded without a Lambda context)."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return lambda: math.inf
    return lambda: remaining() / 1000


def account_of(context: Any) -> str | None:
    return _arn_part(context, 4)


def region_of(context: Any) -> str | None:
    return _arn_part(context, 3)


def _arn_part(context: Any, index: int) -> str | None:
    """A part of the invoked function's ARN (arn:aws:lambda:<region>:<account>:function:<name>)."""
    arn = getattr(context, "invoked_function_arn", "") or ""
    parts = arn.split(":")
    return parts[index] if len(parts) > index and parts[index] else None


def reset() -> None:
    """Forget everything built (the emulation changes the environment between runs)."""
    from training_guard.adapters.accounts import forget_member_access  # a hub's member sessions

    client.cache_clear()
    for built in (settings, parker, price_list, responder, sweeper, chat_deadline, delivery):
        built.cache_clear()
    forget_member_access()
