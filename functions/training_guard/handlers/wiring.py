"""The composition root: one `Root` per execution environment builds what every function asks for.

Each part is built when first asked for, importing only what it needs (a function pays at cold start for its own
libraries only); per-invocation values (lease, deadline, account) are passed to `*_for(context)`, never set."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

from training_guard.adapters.clients import new_client
from training_guard.domain.leases import lease_for

if TYPE_CHECKING:
    from datetime import datetime

    from botocore.client import BaseClient
    from mypy_boto3_pricing import PricingClient

    from training_guard.adapters.accounts import MemberAccess
    from training_guard.adapters.clients import ClientFactory
    from training_guard.adapters.interactions import SigningSecret
    from training_guard.adapters.log_state import DynamoLogState
    from training_guard.adapters.mutes import DynamoMutes
    from training_guard.adapters.price_list import PriceList
    from training_guard.adapters.secrets import Secrets
    from training_guard.adapters.slack import Deadline
    from training_guard.adapters.slack_app import BotFromSecret
    from training_guard.adapters.sqs import DeadLetterParker
    from training_guard.adapters.threads import DynamoThreads
    from training_guard.config.settings import BotSettings, ChatSettings, Settings
    from training_guard.render.slack_actions import Click
    from training_guard.services.chat import ChatDelivery
    from training_guard.services.clicks import ClickWorker, Interactions
    from training_guard.services.log_watch import LogWatch
    from training_guard.services.responder import MemberAccessPort, Responder
    from training_guard.services.slack_app_delivery import AppMode
    from training_guard.services.sweeper import Sweeper


class Root:
    """Everything the functions use, made from one client factory (`clients`: the container's boto3, or the
    emulation's moto clients) and, for the Price List API, `pricing` (moto has none: the emulation plays records)."""

    def __init__(
        self,
        clients: ClientFactory | None = None,
        *,
        pricing: Callable[[], PricingClient] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`sleep`: how the responder waits for a claim another invocation holds (it counts the time waited itself)."""
        self._make = clients or new_client
        self._pricing = pricing
        self._sleep = sleep
        self._clients: dict[str, BaseClient] = {}
        self._webhook_pacing: dict[str, float] = {}
        self._bot_pacing: dict[str, float] = {}
        self.client = cast("ClientFactory", self._client)

    def _client(self, service: str) -> BaseClient:
        made = self._clients.get(service)
        if made is None:
            made = self._clients[service] = self._make(service)
        return made

    def pricing_client(self) -> PricingClient:
        if self._pricing is not None:
            return self._pricing()
        from training_guard.adapters.price_list import pricing_client

        return pricing_client()

    @cached_property
    def settings(self) -> Settings:
        from training_guard.config.settings import Settings

        return Settings.from_env()

    @cached_property
    def parker(self) -> DeadLetterParker | None:
        """Where the event handlers park unusable events at once (None: they raise instead)."""
        from training_guard.adapters.sqs import DeadLetterParker

        url = self.settings.dead_letter_queue_url
        return DeadLetterParker(self.client("sqs"), url) if url else None

    @cached_property
    def price_list(self) -> PriceList:
        from training_guard.adapters.price_list import PriceList

        return PriceList(
            pricing_factory=self.pricing_client,
            dynamodb=self.client("dynamodb"),
            table=self.settings.table,
            memory={},
        )

    @cached_property
    def responder(self) -> Responder:
        from training_guard.adapters.cloudwatch import CloudWatchAlarms
        from training_guard.adapters.ledger import DynamoLedger
        from training_guard.adapters.receipts import SpendMeter
        from training_guard.adapters.sagemaker import SageMakerJobs
        from training_guard.adapters.sns import SnsPublisher
        from training_guard.adapters.sqs import CardUpdates
        from training_guard.services.responder import Responder

        settings = self.settings
        organization = settings.config.organization
        cards = CardUpdates(self.client("sqs"), settings.chat_queue_url) if settings.chat_queue_url else None
        return Responder(
            settings.config,
            jobs=SageMakerJobs(self.client("sagemaker")),
            ledger=DynamoLedger(self.client("dynamodb"), settings.table),
            publisher=SnsPublisher(
                self.client("sns"), settings.topic_arn, members=organization.members if organization is not None else ()
            ),
            alarms=CloudWatchAlarms(self.client("cloudwatch")),
            prices=self.price_list,
            meter=SpendMeter(),
            mutes=self.mutes,
            cards=cards,
            sleep=self._sleep,
        )

    def responder_for(self, context: Any) -> Responder:
        return self.responder.acting(lease_seconds=lease(context))

    @cached_property
    def members(self) -> MemberAccess | None:
        """A hub's way into its members' accounts (None without an organization): its sessions outlive invocations."""
        organization = self.settings.config.organization
        if organization is None:
            return None
        from training_guard.adapters.accounts import MemberAccess, MemberSessions

        sts = self.client("sts")
        return MemberAccess(MemberSessions(organization, sts=sts, partition=sts.meta.partition))

    @cached_property
    def mutes(self) -> DynamoMutes:
        from training_guard.adapters.mutes import DynamoMutes

        return DynamoMutes(self.client("dynamodb"), self.settings.table)

    @cached_property
    def log_states(self) -> DynamoLogState:
        from training_guard.adapters.log_state import DynamoLogState

        settings = self.settings
        return DynamoLogState(
            self.client("dynamodb"), settings.table, ttl_seconds=settings.config.dedup_ttl_days * 86400
        )

    @cached_property
    def log_watch(self) -> LogWatch:
        """The log-rules wing; its jobs' definitions and tags are the container's (DescribeTrainingJob is throttled)."""
        from training_guard.services.log_watch import LogWatch

        return LogWatch(self.responder, self.log_states)

    def log_watch_for(self, context: Any) -> LogWatch:
        return self.log_watch.acting(self.responder_for(context))

    @cached_property
    def sweeper(self) -> Sweeper:
        from training_guard.adapters.cloudwatch import CloudWatchAlarms, TrainingMetrics
        from training_guard.adapters.sagemaker import SageMakerJobs
        from training_guard.services.sweeper import Sweeper

        cloudwatch = self.client("cloudwatch")
        return Sweeper(
            self.responder,
            SageMakerJobs(self.client("sagemaker")),
            CloudWatchAlarms(cloudwatch),
            TrainingMetrics(cloudwatch),
        )

    def sweeper_for(self, context: Any) -> Sweeper:
        return self.sweeper.acting(self.responder_for(context))

    @cached_property
    def chat_settings(self) -> ChatSettings:
        from training_guard.config.settings import ChatSettings

        return ChatSettings.from_env()

    @cached_property
    def secrets(self) -> Secrets:
        from training_guard.adapters.secrets import Secrets

        return Secrets(self.client("secretsmanager"))

    @cached_property
    def threads(self) -> DynamoThreads:
        from training_guard.adapters.threads import DynamoThreads

        return DynamoThreads(self.client("dynamodb"), self.chat_settings.table)

    def delivery_for(self, context: Any) -> ChatDelivery:
        """The notifier's delivery for one invocation: its deadline and claim lease its own."""
        from training_guard.adapters.ledger import DynamoLedger
        from training_guard.adapters.secrets import SecretWebhookUrls
        from training_guard.adapters.slack import WebhookSender
        from training_guard.adapters.sqs import DeadLetterParker
        from training_guard.services.chat import ChatDelivery

        settings = self.chat_settings
        deadline = deadline_of(context)
        return ChatDelivery(
            settings.config.slack,
            urls=SecretWebhookUrls(self.secrets, settings.webhook_secrets),
            sender=WebhookSender(
                deadline=deadline, min_interval=settings.min_interval_seconds, last_sent=self._webhook_pacing
            ),
            ledger=DynamoLedger(self.client("dynamodb"), settings.table),
            parker=DeadLetterParker(self.client("sqs"), settings.dead_letter_queue_url),
            ttl_seconds=settings.config.dedup_ttl_days * 86400,
            lease_seconds=lease(context),
            budget=deadline,
            organization=settings.config.organization,
            config=settings.config,
            app=self._app_mode(deadline) if settings.config.slack.app_mode else None,
        )

    @cached_property
    def bot_settings(self) -> BotSettings:
        from training_guard.config.settings import BotSettings

        return BotSettings.from_env()

    def bot(self, deadline: Deadline) -> BotFromSecret:
        from training_guard.adapters.slack_app import SLACK_API_URL, BotFromSecret

        bot = self.bot_settings
        return BotFromSecret(
            self.secrets.get,
            bot.bot_token_secret,
            base_url=bot.slack_api_url or SLACK_API_URL,
            deadline=deadline,
            min_interval=bot.min_interval_seconds,
            last_post=self._bot_pacing,
        )

    def _app_mode(self, deadline: Deadline) -> AppMode:
        from training_guard.adapters.cloudwatch import MetricCharts
        from training_guard.adapters.slack_app import SlackAppError
        from training_guard.services.slack_app_delivery import AppMode
        from training_guard.services.threads import Waiting

        return AppMode(
            bot=self.bot(deadline),
            threads=self.threads,
            waiting=Waiting(monotonic=time.monotonic, sleep=time.sleep, time_left=deadline.time_left),
            failure=SlackAppError,
            charts=MetricCharts(self.client("cloudwatch")),
        )

    @cached_property
    def signing_secret(self) -> SigningSecret:
        from training_guard.adapters.interactions import SigningSecret
        from training_guard.config.settings import InteractionSettings

        return SigningSecret(self.client("secretsmanager"), InteractionSettings.from_env().signing_secret)

    @cached_property
    def interactions(self) -> Interactions:
        """The interactivity endpoint's acknowledgement: boto3 and the light modules only (no configuration file)."""
        from training_guard.adapters.interactions import ClickQueue, ReplayMarkers
        from training_guard.config.settings import InteractionSettings
        from training_guard.services.clicks import Interactions

        settings = InteractionSettings.from_env()
        return Interactions(
            signing_secret=self.signing_secret,
            replay=ReplayMarkers(self.client("dynamodb"), settings.table),
            queue=ClickQueue(self.client("sqs"), settings.click_queue_url),
            allowed_users=settings.allowed_users,
        )

    def click_worker_for(self, context: Any) -> ClickWorker:
        """What acts on a click: the responder's one path to a stop, the mutes, the bot's thread, the response_url."""
        from training_guard.adapters.interactions import ResponseUrl
        from training_guard.adapters.slack_app import ThreadSay
        from training_guard.services.clicks import ClickWorker

        stopper = ResponderStops(
            self.responder_for(context),
            own_account=account_of(context),
            region=region_of(context),
            members=self.members,
        )
        return ClickWorker(
            mutes=self.mutes, stopper=stopper, say=ThreadSay(self.bot(deadline_of(context))), respond=ResponseUrl()
        )


_installed: Root | None = None


def root() -> Root:
    """This execution environment's root: the one installed, else the container's own (boto3), made once."""
    global _installed  # noqa: PLW0603 - the container's one root, as Lambda keeps module state between invocations
    if _installed is None:
        _installed = Root()
    return _installed


def install(made: Root | None) -> None:
    """Make `made` this environment's root (the emulation's moto clients, say); None: a new container's next time."""
    global _installed  # noqa: PLW0603 - see root()
    _installed = made


def reset() -> None:
    """Forget the root: the next invocation builds a new one from the environment, as a new container would."""
    install(None)


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


def deadline_of(context: Any) -> Deadline:
    from training_guard.adapters.slack import Deadline

    return Deadline(time_left(context))


def account_of(context: Any) -> str | None:
    return _arn_part(context, 4)


def region_of(context: Any) -> str | None:
    return _arn_part(context, 3)


def _arn_part(context: Any, index: int) -> str | None:
    """A part of the invoked function's ARN (arn:aws:lambda:<region>:<account>:function:<name>)."""
    arn = getattr(context, "invoked_function_arn", "") or ""
    parts = arn.split(":")
    return parts[index] if len(parts) > index and parts[index] else None


class ResponderStops:
    """Stop now through `Responder.stop_requested`, in the job's account (the guard's own, or a member's)."""

    def __init__(
        self, responder: Responder, *, own_account: str | None, region: str | None, members: MemberAccessPort | None
    ) -> None:
        self._responder = responder
        self.own_account = own_account
        self.region = region
        self._members = members

    def stop(self, click: Click, *, now: datetime) -> str:
        from training_guard.domain.accounts import is_member
        from training_guard.services.responder import responder_in

        own, account = self.own_account, click.account
        if own is not None and account not in (None, own) and not is_member(self._responder.config, own, account):
            # a card of an account this guard no longer serves: never the guard's own job of the same name
            return f"not stopped: {click.job} is in account {click.account}, which this guard does not serve"
        guard = responder_in(self._responder, self.own_account, click.account, self._members)
        return guard.stop_requested(
            click.job,
            by=click.by,
            rule=click.rule,
            request_id=f"slack-{click.action_ts or int(now.timestamp())}",
            region=self.region,
            now=now,
            account=self.own_account,
        )
