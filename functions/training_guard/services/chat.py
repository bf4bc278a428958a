"""Deliver notification documents to Slack: each (transition, webhook) at most once.

Outcomes, Slack app mode threads and card-only updates: docs/design/chat-delivery.md."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from training_guard.config.model import GuardConfig, OrganizationConfig, SlackConfig
from training_guard.domain import credentials
from training_guard.domain.accounts import scoped
from training_guard.render import slack_messages
from training_guard.render.charts import Chart, chart_for, graph_link
from training_guard.services.once import Held, once
from training_guard.services.ports import Claim, LedgerPort
from training_guard.services.threads import ParentBusy, ThreadStorePort, Waiting, open_thread, thread_key

# Local runs only: longer than the notifier's timeout. In Lambda the handler sets the lease (leases.lease_for).
CLAIM_LEASE_SECONDS = 180
# Routed as the stop it was folded into (messages._SEVERITY), not as the folded change (info).
CARD_ONLY_SEVERITY = "critical"
# About two retries of the stop's delivery (6-minute visibility timeout, infra/components/chat.py).
CARD_WAIT_SECONDS = 15 * 60


class WebhookUrls(Protocol):
    def url(self, webhook: str) -> str: ...


class Sender(Protocol):
    def send(self, url: str, text: str, blocks: list[dict[str, Any]]) -> Any: ...


class Parker(Protocol):
    def park(self, body: str, reason: str) -> None: ...


class Posted(Protocol):
    @property
    def ts(self) -> str: ...


class SlackAppPort(Protocol):
    def post_parent(self, channel: str, text: str, blocks: Any) -> Posted: ...

    def reply(self, channel: str, thread_ts: str, text: str, blocks: Any) -> Posted: ...

    def update(self, channel: str, ts: str, text: str, blocks: Any) -> None: ...

    def upload_png(
        self, channel: str, thread_ts: str, png: bytes, *, filename: str, title: str, alt_text: str
    ) -> str: ...


class ChartsPort(Protocol):
    def png(self, widget: Mapping[str, Any]) -> bytes: ...


@dataclass
class AppMode:
    """What app mode delivers with; `bot` is made when first needed (its token is read from its secret)."""

    bot: Callable[[], SlackAppPort]
    threads: ThreadStorePort
    waiting: Waiting
    failure: type[Exception]
    charts: ChartsPort | None = None
    holder: Callable[[], str] = field(default=lambda: uuid.uuid4().hex)


class Budget(Protocol):
    def allows(self, wait: float) -> bool: ...


# `training-guard doctor` finds messages parked for want of a URL by this text.
NOT_CONFIGURED = "does not hold a webhook URL yet"


class NotConfigured(Exception):
    """A webhook's secret holds no usable URL yet: permanent until an operator acts."""

    def __init__(self, webhook: str, secret_id: str) -> None:
        self.reason = f"webhook {webhook!r}: secret {secret_id} {NOT_CONFIGURED}"
        self.remedy = (
            f"set it with aws secretsmanager put-secret-value --secret-id {secret_id} "
            "--secret-string 'https://hooks.slack.com/...'"
        )
        super().__init__(f"{self.reason}; {self.remedy}")


def check_url(webhook: str, secret_id: str, value: str) -> str:
    """The URL a webhook's secret holds; NotConfigured while it holds a placeholder, nothing, or no https URL."""
    if credentials.webhook_url_problem(value) is None:
        return value.strip()
    raise NotConfigured(webhook, secret_id)


DELIVERED = "delivered"


def account_of(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def delivery_key(transition: str, webhook: str) -> str:
    """The ledger item of one delivery to one webhook or app channel (read by `training-guard test-notification`)."""
    return f"c#{transition}#{webhook}"


def chart_key(transition: str, channel: str) -> str:
    return f"c#{transition}#{channel}#chart"


@dataclass(frozen=True)
class _Message:
    text: str
    blocks: list[dict[str, Any]]
    transition: str
    targets: list[str]
    doc: Mapping[str, Any] | None = None  # None: a self-monitoring alarm
    member: str | None = None  # None: the hub's own job

    @property
    def card_only(self) -> bool:
        return self.doc is not None and slack_messages.is_card_only(self.doc)


@dataclass
class MessageResult:
    account: str | None = None
    delivered: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    transient: list[str] = field(default_factory=list)
    permanent: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    not_configured: list[str] = field(default_factory=list)  # also in `permanent`

    @property
    def retry(self) -> bool:
        return bool(self.transient or self.busy or self.deferred)


class ChatDelivery:
    def __init__(
        self,
        slack: SlackConfig,
        urls: WebhookUrls,
        sender: Sender,
        ledger: LedgerPort,
        parker: Parker,
        *,
        ttl_seconds: int,
        lease_seconds: int = CLAIM_LEASE_SECONDS,
        budget: Budget | None = None,
        organization: OrganizationConfig | None = None,
        config: GuardConfig | None = None,
        app: AppMode | None = None,
    ) -> None:
        """`organization` routes by organizational unit, `config` draws graphs (None: neither); `app`: app mode's."""
        if slack.app_mode and app is None:
            raise ValueError("slack.mode is app: the delivery needs the app's bot and thread records")
        self.config = config
        self.app = app
        self.budget = budget
        self.slack = slack
        self.organization = organization
        self.urls = urls
        self.sender = sender
        self.ledger = ledger
        self.parker = parker
        self.ttl_seconds = ttl_seconds
        self.lease_seconds = lease_seconds

    def _read(self, body: str, result: MessageResult) -> _Message:
        """One message as it is sent. Raises ValueError, KeyError or TypeError when it cannot be rendered."""
        payload = json.loads(body)
        if slack_messages.is_alarm_notification(payload):
            text, blocks = slack_messages.render_alarm(payload)
            result.account = account_of(payload.get("AWSAccountId"))
            targets = self._route(slack_messages.alarm_severity(payload), {}, result.account)
            return _Message(text, blocks, slack_messages.alarm_key(payload), targets)
        doc = slack_messages.check_document(payload)
        result.account = account_of(doc.get("account"))
        member = (
            result.account if self.organization is not None and result.account in self.organization.members else None
        )
        if self.slack.app_mode:
            # A member's job has no picture (charts.py): its reply links the graph, as webhook mode does.
            links = self._graph_link(doc, member) if member is not None else {}
            text, blocks = slack_messages.render(doc, actions=self._buttons(doc, member), extra_links=links)
        else:
            text, blocks = slack_messages.render(doc, extra_links=self._graph_link(doc, member))
        transition = str(doc.get("transition") or hashlib.sha256(body.encode()).hexdigest()[:32])
        if member is not None:
            # Two members' jobs of the same name share a transition key; their deliveries are two.
            transition = scoped(member, transition)
        if slack_messages.is_card_only(doc) and not self.slack.app_mode:
            # Sent while the guard was in app mode, read after it left it: webhooks have no card to update.
            return _Message(text, blocks, transition, [], doc, member)
        if slack_messages.is_test(doc):
            # A test checks every webhook, whatever the routing says.
            return _Message(text, blocks, transition, list(self.slack.targets), doc, member)
        tags = doc["job"].get("tags") or {}
        severity = CARD_ONLY_SEVERITY if slack_messages.is_card_only(doc) else str(doc["severity"])
        targets = self._route(severity, tags if isinstance(tags, Mapping) else {}, result.account)
        return _Message(text, blocks, transition, targets, doc, member)

    def _buttons(self, doc: Mapping[str, Any], member: str | None) -> list[dict[str, Any]]:
        if slack_messages.is_test(doc) or doc.get("kind") == slack_messages.DIGEST_KIND:
            return []
        return slack_messages.buttons(doc, account=member)

    def _chart(self, doc: Mapping[str, Any] | None) -> Chart | None:
        return chart_for(doc, self.config) if doc is not None and self.config is not None else None

    def _graph_link(self, doc: Mapping[str, Any], member: str | None) -> dict[str, str]:
        chart = self._chart(doc)
        return graph_link(chart, member) if chart is not None else {}

    def _route(self, severity: str, tags: Mapping[str, str], account: str | None) -> list[str]:
        unit = self.organization.unit_of(account) if self.organization is not None else None
        return self.slack.route(severity, tags, account=account, unit=unit)

    def deliver(self, body: str, *, now: datetime) -> MessageResult:
        result = MessageResult()
        try:
            message = self._read(body, result)
        except (ValueError, KeyError, TypeError) as exc:
            result.errors.append(f"unusable message: {exc}")
            self.parker.park(body, f"unusable message: {exc}")
            return result
        reasons: list[str] = []
        remedies: list[str] = []
        for target in message.targets:
            if self.budget is not None and not self.budget.allows(0):
                # A timeout would fail the whole batch; not started, the message comes back alone.
                result.deferred.append(target)
                continue
            key = delivery_key(message.transition, target)
            if self.app is not None:
                posted = self._post_app(message, target, key=key, now=now, result=result, reasons=reasons)
                if posted and not message.card_only:
                    self._chart_once(message, target, now=now, result=result, reasons=reasons)
                continue
            with self._once(key, now) as held:
                if held.state is Claim.DONE:
                    result.skipped.append(target)
                    continue
                if held.state is Claim.BUSY:
                    # Not a duplicate yet: the holder may time out before it sends.
                    result.busy.append(target)
                    continue
                try:
                    delivery = self.sender.send(self.urls.url(target), message.text, message.blocks)
                except NotConfigured as exc:
                    held.release()
                    result.permanent.append(target)
                    result.not_configured.append(target)
                    result.errors.append(str(exc))
                    reasons.append(exc.reason)
                    remedies.append(exc.remedy)
                    continue
                if not delivery.ok:
                    held.release()
                    result.errors.append(f"webhook {target!r}: {delivery.detail}")
                    reasons.append(result.errors[-1])
                    (result.permanent if delivery.permanent else result.transient).append(target)
                    continue
            result.delivered.append(target)
        if result.permanent and not result.transient:
            # Reasons first: the dead-letter queue keeps 256 characters (redrive skips delivered webhooks).
            self.parker.park(body, "; ".join(reasons + remedies))
        return result

    def _post_app(
        self, message: _Message, name: str, *, key: str, now: datetime, result: MessageResult, reasons: list[str]
    ) -> bool:
        """Claim and post one (transition, channel): True when delivered, now or before."""
        assert self.app is not None
        with self._once(key, now) as held:
            if held.state is Claim.DONE:
                return True
            if held.state is Claim.BUSY:
                result.busy.append(name)
                return False
            try:
                stale_card = self._send_app(message, name, now)
            except ParentBusy:
                held.release()
                result.busy.append(name)
                return False
            except self.app.failure as exc:
                held.release()
                self._failed(name, exc, result, reasons)
                return False
        result.delivered.append(name)
        if stale_card is not None:
            # Reported, not retried: the reply is posted, and the next notification sets the card right.
            result.errors.append(f"channel {name!r}: the card was not updated: {stale_card}")
        return True

    def _send_app(self, message: _Message, name: str, now: datetime) -> str | None:
        """The message in its job's thread; returns why the card was not updated, if it was not."""
        assert self.app is not None
        bot = self.app.bot()
        channel = self.slack.channel_id(name)
        doc = message.doc
        if doc is None or slack_messages.is_test(doc) or doc.get("kind") == slack_messages.DIGEST_KIND:
            bot.post_parent(channel, message.text, message.blocks)
            return None
        if message.card_only:
            self._card_only(bot, doc, channel, message.member, now)
            return None
        thread = self._thread(bot, doc, channel, message.member, now)
        bot.reply(channel, thread.ts, message.text, message.blocks)
        if thread.created:
            return None
        version = slack_messages.card_version(doc)
        if not self.app.threads.advance_card(self._thread_key(doc, channel, message.member), version):
            return None  # an older notification than the card shows, or the same one: the card stays
        card_text, card_blocks = self._card(doc, message.member)
        try:
            bot.update(channel, thread.ts, card_text, card_blocks)
        except self.app.failure as exc:
            return str(exc)
        return None

    def _card_only(
        self, bot: SlackAppPort, doc: Mapping[str, Any], channel: str, member: str | None, now: datetime
    ) -> None:
        """The job's card shows `doc` unless it shows something newer. Raises `ParentBusy` while there is no card."""
        assert self.app is not None
        key = self._thread_key(doc, channel, member)
        record = self.app.threads.read(key)
        version = slack_messages.card_version(doc)
        if record is None or record.ts is None:
            if now.timestamp() * 1000 - version < CARD_WAIT_SECONDS * 1000:
                raise ParentBusy(key)  # the stop's delivery (or its parent) may still be on its way
            return
        # Updated before the version is raised, so that a failed update is tried again.
        if record.card_version >= version:
            return
        card_text, card_blocks = self._card(doc, member)
        bot.update(channel, record.ts, card_text, card_blocks)
        self.app.threads.advance_card(key, version)

    @staticmethod
    def _card(doc: Mapping[str, Any], member: str | None) -> tuple[str, list[dict[str, Any]]]:
        """The job's card, with the thread's only Stop now (gone once the card shows the job ended)."""
        return slack_messages.render_card(doc, actions=slack_messages.stop_button(doc, account=member))

    def _thread_key(self, doc: Mapping[str, Any], channel: str, member: str | None) -> str:
        return thread_key(str(doc["job"]["name"]), channel, member)

    def _thread(
        self, bot: SlackAppPort, doc: Mapping[str, Any], channel: str, member: str | None, now: datetime
    ) -> Any:
        assert self.app is not None
        card_text, card_blocks = self._card(doc, member)
        return open_thread(
            self.app.threads,
            self._thread_key(doc, channel, member),
            post_parent=lambda: bot.post_parent(channel, card_text, card_blocks).ts,
            holder=self.app.holder(),
            now=now,
            lease_seconds=self.lease_seconds,
            ttl_seconds=self.ttl_seconds,
            card_version=slack_messages.card_version(doc),
            waiting=self.app.waiting,
        )

    def _chart_once(
        self, message: _Message, name: str, *, now: datetime, result: MessageResult, reasons: list[str]
    ) -> None:
        """The metric's graph into the job's thread, once per (transition, channel), after the reply."""
        assert self.app is not None
        # A member's metrics are in its own account (charts.py).
        chart = self._chart(message.doc) if message.member is None else None
        if chart is None or self.app.charts is None or message.doc is None:
            if name not in result.delivered:
                result.skipped.append(name)
            return
        key = chart_key(message.transition, name)
        with self._once(key, now) as held:
            if held.state is Claim.DONE:
                if name not in result.delivered:
                    result.skipped.append(name)
                return
            if held.state is Claim.BUSY:
                result.busy.append(name)
                return
            try:
                channel = self.slack.channel_id(name)
                png = self.app.charts.png(chart.widget)
                bot = self.app.bot()
                thread = self._thread(bot, message.doc, channel, message.member, now)
                bot.upload_png(
                    channel, thread.ts, png, filename=chart.filename, title=chart.title, alt_text=chart.alt_text
                )
            except ParentBusy:
                held.release()
                result.busy.append(name)
                return
            except self.app.failure as exc:
                held.release()
                self._failed(name, exc, result, reasons)
                return
        if name not in result.delivered:
            result.delivered.append(name)

    def _once(self, key: str, now: datetime) -> AbstractContextManager[Held]:
        return once(
            self.ledger, key, now=now, lease_seconds=self.lease_seconds, ttl_seconds=self.ttl_seconds, outcome=DELIVERED
        )

    def _failed(self, name: str, exc: BaseException, result: MessageResult, reasons: list[str]) -> None:
        permanent = bool(getattr(exc, "permanent", False))
        result.errors.append(f"channel {name!r}: {exc}")
        reasons.append(result.errors[-1])
        (result.permanent if permanent else result.transient).append(name)
        if getattr(exc, "error", None) == credentials.NOT_CONFIGURED_ERROR:
            result.not_configured.append(name)
