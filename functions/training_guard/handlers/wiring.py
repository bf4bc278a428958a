"""The composition root of every function: settings, clients, adapters and services, built once per container.

Each builder imports what it builds, so no function pays at cold start for another's libraries (`reset()` forgets)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from training_guard.adapters.clients import client
from training_guard.domain.leases import lease_for

if TYPE_CHECKING:
    from datetime import datetime

    from mypy_boto3_pricing import PricingClient

    from training_guard.adapters.interactions import SigningSecret
    from training_guard.adapters.log_state import DynamoLogState
    from training_guard.adapters.mutes import DynamoMutes
    from training_guard.adapters.price_list import PriceList
    from training_guard.adapters.slack import Deadline
    from training_guard.adapters.slack_app import BotFromSecret
    from training_guard.adapters.sqs import DeadLetterParker
    from training_guard.adapters.threads import DynamoThreads
    from training_guard.config.settings import Settings
    from training_guard.render.slack_actions import Click
    from training_guard.services.chat import ChatDelivery
    from training_guard.services.clicks import ClickWorker, Interactions
    from training_guard.services.log_watch import LogWatch
    from training_guard.services.responder import Responder
    from training_guard.services.sweeper import Sweeper


@cache
def settings() -> Settings:
    from training_guard.config.settings import Settings

    return Settings.from_env()


@cache
def parker() -> DeadLetterParker | None:
    """Where the event handlers park unusable events at once (None: they raise instead)."""
    from training_guard.adapters.sqs import DeadLetterParker

    url = settings().dead_letter_queue_url
    return DeadLetterParker(client("sqs"), url) if url else None


def pricing_client() -> PricingClient:
    # A seam: moto has no Price List API, so the integration tests and the emulation replace this function.
    from training_guard.adapters.price_list import pricing_client as real

    return real()


@cache
def price_list() -> PriceList:
    """List prices, one per execution environment: its memory and client live as long as the container."""
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
    from training_guard.adapters.receipts import SpendMeter
    from training_guard.adapters.sagemaker import SageMakerJobs
    from training_guard.adapters.sns import SnsPublisher
    from training_guard.adapters.sqs import CardUpdates
    from training_guard.services.responder import Responder

    settings_ = settings()
    organization = settings_.config.organization
    cards = CardUpdates(client("sqs"), settings_.chat_queue_url) if settings_.chat_queue_url else None
    return Responder(
        settings_.config,
        jobs=SageMakerJobs(client("sagemaker")),
        ledger=DynamoLedger(client("dynamodb"), settings_.table),
        publisher=SnsPublisher(
            client("sns"), settings_.topic_arn, members=organization.members if organization is not None else ()
        ),
        alarms=CloudWatchAlarms(client("cloudwatch")),
        prices=price_list(),
        meter=SpendMeter(),
        mutes=mutes(),
        cards=cards,
    )


@cache
def mutes() -> DynamoMutes:
    from training_guard.adapters.mutes import DynamoMutes

    return DynamoMutes(client("dynamodb"), settings().table)


@cache
def log_states() -> DynamoLogState:
    """Each training log stream's rule state, in the state table (kept as long as the ledger's transitions)."""
    from training_guard.adapters.log_state import DynamoLogState

    settings_ = settings()
    return DynamoLogState(client("dynamodb"), settings_.table, ttl_seconds=settings_.config.dedup_ttl_days * 86400)


@cache
def log_watch() -> LogWatch:
    """The log-rules wing: subscription deliveries and the stall check, through the one responder."""
    from training_guard.services.log_watch import LogWatch

    return LogWatch(responder(), log_states())


@cache
def sweeper() -> Sweeper:
    from training_guard.adapters.cloudwatch import CloudWatchAlarms, TrainingMetrics
    from training_guard.adapters.sagemaker import SageMakerJobs
    from training_guard.services.sweeper import Sweeper

    cloudwatch = client("cloudwatch")
    return Sweeper(
        responder(), SageMakerJobs(client("sagemaker")), CloudWatchAlarms(cloudwatch), TrainingMetrics(cloudwatch)
    )


@cache
def chat_deadline() -> Deadline:
    from training_guard.adapters.slack import Deadline

    return Deadline()


@cache
def delivery() -> ChatDelivery:
    from training_guard.adapters.ledger import DynamoLedger
    from training_guard.adapters.secrets import Secrets, SecretWebhookUrls
    from training_guard.adapters.slack import WebhookSender
    from training_guard.adapters.sqs import DeadLetterParker
    from training_guard.config.settings import ChatSettings
    from training_guard.services.chat import ChatDelivery

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
        config=settings_.config,
        app=app_mode() if settings_.config.slack.app_mode else None,
    )


@cache
def slack_app() -> BotFromSecret:
    """Slack app mode's bot: its token read from its secret (cached like the webhook URLs), a client per token."""
    from training_guard.adapters.secrets import Secrets
    from training_guard.adapters.slack_app import SLACK_API_URL, BotFromSecret
    from training_guard.config.settings import BotSettings

    bot = BotSettings.from_env()
    return BotFromSecret(
        Secrets(client("secretsmanager")).get,
        bot.bot_token_secret,
        base_url=bot.slack_api_url or SLACK_API_URL,
        deadline=chat_deadline(),
    )


@cache
def threads() -> DynamoThreads:
    from training_guard.adapters.threads import DynamoThreads
    from training_guard.config.settings import ChatSettings

    return DynamoThreads(client("dynamodb"), ChatSettings.from_env().table)


def app_mode() -> Any:
    """What the notifier delivers with in app mode (chat.AppMode)."""
    from training_guard.adapters.cloudwatch import MetricCharts
    from training_guard.adapters.slack_app import SlackAppError
    from training_guard.services.chat import AppMode
    from training_guard.services.threads import Waiting

    return AppMode(
        bot=slack_app(),
        threads=threads(),
        waiting=Waiting(monotonic=time.monotonic, sleep=time.sleep, time_left=lambda: chat_deadline().time_left()),
        failure=SlackAppError,
        charts=MetricCharts(client("cloudwatch")),
    )


@cache
def signing_secret() -> SigningSecret:
    from training_guard.adapters.interactions import SigningSecret
    from training_guard.config.settings import InteractionSettings

    return SigningSecret(client("secretsmanager"), InteractionSettings.from_env().signing_secret)


@cache
def interactions() -> Interactions:
    """The interactivity endpoint's acknowledgement: boto3 and the light modules only (no configuration file)."""
    from training_guard.adapters.interactions import ClickQueue, ReplayMarkers
    from training_guard.config.settings import InteractionSettings
    from training_guard.services.clicks import Interactions

    settings_ = InteractionSettings.from_env()
    return Interactions(
        signing_secret=signing_secret(),
        replay=ReplayMarkers(client("dynamodb"), settings_.table),
        queue=ClickQueue(client("sqs"), settings_.click_queue_url),
        allowed_users=settings_.allowed_users,
    )


@cache
def click_worker() -> ClickWorker:
    """What acts on a click: the responder's one path to a stop, the mutes, the bot's thread, the response_url."""
    from training_guard.adapters.interactions import ResponseUrl
    from training_guard.adapters.slack_app import ThreadSay
    from training_guard.services.clicks import ClickWorker

    return ClickWorker(
        mutes=mutes(),
        stopper=ResponderStops(responder(), own_account=None, region=None),
        say=ThreadSay(slack_app()),
        respond=ResponseUrl(),
    )


def click_worker_for(context: Any) -> ClickWorker:
    """The click worker for one invocation: a stopper with its lease, account and region, none set on shared parts."""
    from training_guard.services.clicks import ClickWorker

    kept = click_worker()
    stopper = ResponderStops(
        responder().acting(lease_seconds=lease(context)), own_account=account_of(context), region=region_of(context)
    )
    return ClickWorker(mutes=kept.mutes, stopper=stopper, say=kept.say, respond=kept.respond)


def lease(context: Any) -> int:
    """The lease of this invocation's claims in seconds: its remaining time plus margin (`leases.lease_for`)."""
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
    from training_guard.adapters.accounts import forget_member_access

    client.cache_clear()
    for built in (
        settings,
        parker,
        price_list,
        responder,
        sweeper,
        chat_deadline,
        delivery,
        mutes,
        slack_app,
        threads,
        signing_secret,
        interactions,
        click_worker,
        log_states,
        log_watch,
    ):
        built.cache_clear()
    forget_member_access()


class ResponderStops:
    """Stop now through `Responder.stop_requested`, in the job's account (the guard's own, or a member's)."""

    def __init__(self, responder: Responder, *, own_account: str | None, region: str | None) -> None:
        self._responder = responder  # the invocation's: its lease
        self.own_account = own_account
        self.region = region

    def stop(self, click: Click, *, now: datetime) -> str:
        from training_guard.adapters.accounts import responder_in

        guard = responder_in(self._responder, self.own_account, click.account)
        return guard.stop_requested(
            click.job,
            by=click.by,
            rule=click.rule,
            request_id=f"slack-{click.action_ts or int(now.timestamp())}",
            region=self.region,
            now=now,
            account=self.own_account,
        )
