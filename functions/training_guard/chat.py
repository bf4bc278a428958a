"""Deliver notification documents to Slack: each (transition, webhook) at most once.

SNS -> SQS delivery is at-least-once and one notification can go to several webhooks. Each
(transition, webhook) pair is claimed in the same ledger as the guard's reactions before it is
sent, so a redelivered or retried message reaches only the channels that have not had it.

Outcome per message: every target delivered -> done; a transient failure (429 beyond the budget,
5xx, timeouts) -> the message goes back to the queue (batch item failure) and SQS moves it to the
dead-letter queue after its receive limit; only permanent failures (revoked webhook, 4xx, a secret
with no URL in it) -> the message is parked in the dead-letter queue at once, with the reason.
Nothing is dropped.

Routing (`SlackConfig.route`): by the job's team tag, by the account the notification is about (the document's
`account`; with an organization, the account's own webhook or its organizational unit's), and by severity. A
self-monitoring alarm is about the hub's own account (its `AWSAccountId`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from training_guard import slack_messages
from training_guard.accounts import scoped
from training_guard.config import OrganizationConfig, SlackConfig
from training_guard.ports import Claim, LedgerPort

# Without an invocation to measure (local runs): longer than the notifier's timeout. In Lambda the
# handler sets the lease from the invocation's remaining time (leases.lease_for).
CLAIM_LEASE_SECONDS = 180
_LOOPBACK_PREFIXES = ("http://127.0.0.1:", "http://localhost:", "http://[::1]:")


class WebhookUrls(Protocol):
    def url(self, webhook: str) -> str: ...


class Sender(Protocol):
    def send(self, url: str, text: str, blocks: list[dict[str, Any]]) -> Any: ...


class Parker(Protocol):
    def park(self, body: str, reason: str) -> None: ...


class Budget(Protocol):
    def allows(self, wait: float) -> bool:
        """Whether one more send (after waiting `wait` seconds) fits in the invocation's time left."""
        ...


# In the reason a message parked for want of a URL carries: `training-guard doctor` finds those by it.
NOT_CONFIGURED = "does not hold a webhook URL yet"


class NotConfigured(Exception):
    """A webhook's secret holds no usable URL yet (a permanent failure until an operator acts)."""

    def __init__(self, webhook: str, secret_id: str) -> None:
        self.reason = f"webhook {webhook!r}: secret {secret_id} {NOT_CONFIGURED}"
        self.remedy = (
            f"set it with aws secretsmanager put-secret-value --secret-id {secret_id} "
            "--secret-string 'https://hooks.slack.com/...'"
        )
        super().__init__(f"{self.reason}; {self.remedy}")


def check_url(webhook: str, secret_id: str, value: str) -> str:
    url = value.strip()
    if url.startswith("https://") or url.startswith(_LOOPBACK_PREFIXES):
        return url
    raise NotConfigured(webhook, secret_id)


DELIVERED = "delivered"  # the outcome the ledger records for a message Slack took


def account_of(value: object) -> str | None:
    """The account a message names (a document's `account`, an alarm's `AWSAccountId`): only a text is one."""
    return value if isinstance(value, str) and value else None


def delivery_key(transition: str, webhook: str) -> str:
    """The ledger item of one message's delivery to one webhook (`training-guard test-notification` reads it)."""
    return f"c#{transition}#{webhook}"


@dataclass
class MessageResult:
    account: str | None = None  # the account the message is about, as it was routed (None: it names none)
    delivered: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already delivered (a duplicate)
    busy: list[str] = field(default_factory=list)  # another attempt is delivering it: retried later
    deferred: list[str] = field(default_factory=list)  # too little time left in this invocation: retried later
    transient: list[str] = field(default_factory=list)
    permanent: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

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
        budget: Budget | None = None,
        organization: OrganizationConfig | None = None,
    ) -> None:
        """`organization`: where a notification's account is routed by its organizational unit (None: no units)."""
        self.budget = budget
        self.slack = slack
        self.organization = organization
        self.urls = urls
        self.sender = sender
        self.ledger = ledger
        self.parker = parker
        self.ttl_seconds = ttl_seconds
        self.lease_seconds = CLAIM_LEASE_SECONDS

    def _read(self, body: str, result: MessageResult) -> tuple[str, list[dict[str, Any]], str, list[str]]:
        """(fallback text, blocks, transition, webhooks) of one message, its account noted on `result`;
        ValueError, KeyError or TypeError when it is not one the notifier can render."""
        payload = json.loads(body)
        if slack_messages.is_alarm_notification(payload):
            text, blocks = slack_messages.render_alarm(payload)
            result.account = account_of(payload.get("AWSAccountId"))
            targets = self._route(slack_messages.alarm_severity(payload), {}, result.account)
            return text, blocks, slack_messages.alarm_key(payload), targets
        doc = slack_messages.check_document(payload)
        text, blocks = slack_messages.render(doc)
        result.account = account_of(doc.get("account"))
        transition = str(doc.get("transition") or hashlib.sha256(body.encode()).hexdigest()[:32])
        if self.organization is not None and result.account in self.organization.members:
            # A transition's key names the job, not the account: two members' jobs of the same name have the same
            # one. Their deliveries are two, as their ledger keys are (accounts.AccountLedger; the hub's stay as
            # they were, and so do a single-account guard's).
            transition = scoped(result.account, transition)
        if slack_messages.is_test(doc):
            # A test notification checks every webhook, whatever the routing and the minimum severity say.
            return text, blocks, transition, list(self.slack.webhooks)
        tags = doc["job"].get("tags") or {}
        targets = self._route(str(doc["severity"]), tags if isinstance(tags, Mapping) else {}, result.account)
        return text, blocks, transition, targets

    def _route(self, severity: str, tags: Mapping[str, str], account: str | None) -> list[str]:
        """The webhooks of a notification about `account`: its own route, or its organizational unit's."""
        unit = self.organization.unit_of(account) if self.organization is not None else None
        return self.slack.route(severity, tags, account=account, unit=unit)

    def deliver(self, body: str, *, now: datetime) -> MessageResult:
        result = MessageResult()
        try:
            text, blocks, transition, targets = self._read(body, result)
        except (ValueError, KeyError, TypeError) as exc:
            result.errors.append(f"unusable message: {exc}")
            self.parker.park(body, f"unusable message: {exc}")
            return result
        reasons: list[str] = []  # why each webhook failed, as the dead-letter queue keeps it
        remedies: list[str] = []
        for webhook in targets:
            if self.budget is not None and not self.budget.allows(0):
                # Not started rather than cut off by the function's timeout (which would count as an
                # error and return the whole batch): the message comes back after its visibility timeout.
                result.deferred.append(webhook)
                continue
            key = delivery_key(transition, webhook)
            claim = self.ledger.claim(key, now=now, lease_seconds=self.lease_seconds)
            if claim is Claim.DONE:
                result.skipped.append(webhook)
                continue
            if claim is Claim.BUSY:
                # Not a duplicate yet: the holder may time out before it sends. The message comes back
                # after the queue's visibility timeout, by when the holder's lease has run out.
                result.busy.append(webhook)
                continue
            try:
                delivery = self.sender.send(self.urls.url(webhook), text, blocks)
            except NotConfigured as exc:
                self.ledger.release(key)
                result.permanent.append(webhook)
                result.errors.append(str(exc))
                reasons.append(exc.reason)
                remedies.append(exc.remedy)
                continue
            except BaseException:
                self.ledger.release(key)
                raise
            if delivery.ok:
                self.ledger.complete(key, now=now, ttl_seconds=self.ttl_seconds, outcome=DELIVERED)
                result.delivered.append(webhook)
                continue
            self.ledger.release(key)
            result.errors.append(f"webhook {webhook!r}: {delivery.detail}")
            reasons.append(result.errors[-1])
            (result.permanent if delivery.permanent else result.transient).append(webhook)
        if result.permanent and not result.transient:
            # Retrying cannot help; keep the message for an operator (redrive skips delivered webhooks).
            # Every webhook's reason first, what to do after: the dead-letter queue keeps 256 characters of it.
            self.parker.park(body, "; ".join(reasons + remedies))
        return result
