"""Deliver notification documents to Slack: each (transition, webhook) at most once.

Slack app mode is a wing, reached through `AppModePort` (slack_app_delivery.py): docs/design/chat-delivery.md."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
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

# Local runs only: longer than the notifier's timeout. In Lambda the handler sets the lease (leases.lease_for).
CLAIM_LEASE_SECONDS = 180
# Routed as the stop it was folded into (messages._SEVERITY), not as the folded change (info).
CARD_ONLY_SEVERITY = "critical"


class WebhookUrls(Protocol):
    def url(self, webhook: str) -> str: ...


class Sender(Protocol):
    def send(self, url: str, text: str, blocks: list[dict[str, Any]]) -> Any: ...


class Parker(Protocol):
    def park(self, body: str, reason: str) -> None: ...


class Budget(Protocol):
    def allows(self, wait: float) -> bool: ...


class AppModePort(Protocol):
    """Slack app mode, a wing beside this core (services/slack_app_delivery.py), built by the composition root."""

    def buttons(self, doc: Mapping[str, Any], member: str | None) -> list[dict[str, Any]]:
        """The guard's buttons on a message about `doc`'s job (none on a test or a digest)."""
        ...

    def deliver(
        self,
        chat: ChatDelivery,
        message: Message,
        name: str,
        *,
        now: datetime,
        result: MessageResult,
        reasons: list[str],
    ) -> None:
        """`message` into channel `name` once (its job's thread, card and graph); the outcome into `result`."""
        ...


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


@dataclass(frozen=True)
class Message:
    """One message as it is sent: its words, its transition and its targets, and the document it was rendered from."""

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
        app: AppModePort | None = None,
    ) -> None:
        """`organization` routes by organizational unit, `config` draws graphs (None: neither); `app`: app mode's."""
        if slack.app_mode and app is None:
            raise ValueError("slack.mode is app: the delivery needs the app's bot and thread records")
        if app is not None and not slack.app_mode:
            raise ValueError("slack.mode is webhook: the delivery takes no app")
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

    def _read(self, body: str, result: MessageResult) -> Message:
        """One message as it is sent. Raises ValueError, KeyError or TypeError when it cannot be rendered."""
        payload = json.loads(body)
        if slack_messages.is_alarm_notification(payload):
            text, blocks = slack_messages.render_alarm(payload)
            result.account = account_of(payload.get("AWSAccountId"))
            targets = self._route(slack_messages.alarm_severity(payload), {}, result.account)
            return Message(text, blocks, slack_messages.alarm_key(payload), targets)
        doc = slack_messages.check_document(payload)
        result.account = account_of(doc.get("account"))
        member = (
            result.account if self.organization is not None and result.account in self.organization.members else None
        )
        if self.app is not None:  # slack.mode app (the constructor holds it)
            # A member's job has no picture (charts.py): its reply links the graph, as webhook mode does.
            links = self._graph_link(doc, member) if member is not None else {}
            text, blocks = slack_messages.render(doc, actions=self.app.buttons(doc, member), extra_links=links)
        else:
            text, blocks = slack_messages.render(doc, extra_links=self._graph_link(doc, member))
        transition = str(doc.get("transition") or hashlib.sha256(body.encode()).hexdigest()[:32])
        if member is not None:
            # Two members' jobs of the same name share a transition key; their deliveries are two.
            transition = scoped(member, transition)
        if slack_messages.is_card_only(doc) and not self.slack.app_mode:
            # Sent while the guard was in app mode, read after it left it: webhooks have no card to update.
            return Message(text, blocks, transition, [], doc, member)
        if slack_messages.is_test(doc):
            # A test checks every webhook, whatever the routing says.
            return Message(text, blocks, transition, list(self.slack.targets), doc, member)
        tags = doc["job"].get("tags") or {}
        severity = CARD_ONLY_SEVERITY if slack_messages.is_card_only(doc) else str(doc["severity"])
        targets = self._route(severity, tags if isinstance(tags, Mapping) else {}, result.account)
        return Message(text, blocks, transition, targets, doc, member)

    def chart(self, doc: Mapping[str, Any] | None) -> Chart | None:
        """The graph of a metric guard's firing, when the document has one and a configuration draws it."""
        return chart_for(doc, self.config) if doc is not None and self.config is not None else None

    def _graph_link(self, doc: Mapping[str, Any], member: str | None) -> dict[str, str]:
        chart = self.chart(doc)
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
            if self.app is not None:
                self.app.deliver(self, message, target, now=now, result=result, reasons=reasons)
                continue
            with self.claim(delivery_key(message.transition, target), now) as held:
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

    def claim(self, key: str, now: datetime) -> AbstractContextManager[Held]:
        """Deliver once per `key` (services/once.py): with this invocation's lease, recorded as delivered."""
        return once(
            self.ledger, key, now=now, lease_seconds=self.lease_seconds, ttl_seconds=self.ttl_seconds, outcome=DELIVERED
        )
