"""Slack app mode's delivery, a wing beside `chat.py`: the job's thread, its card, the reply, the graph's upload.

`chat.ChatDelivery` reaches it only through `chat.AppModePort`; `handlers/wiring.py` builds it (chat-delivery.md)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from training_guard.domain import credentials
from training_guard.render import slack_actions, slack_messages
from training_guard.services.chat import ChatDelivery, Message, MessageResult, delivery_key
from training_guard.services.ports import Claim
from training_guard.services.threads import ParentBusy, Thread, ThreadStorePort, Waiting, open_thread, thread_key

# About two retries of the stop's delivery (6-minute visibility timeout, infra/components/chat.py).
CARD_WAIT_SECONDS = 15 * 60


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


def chart_key(transition: str, channel: str) -> str:
    return f"c#{transition}#{channel}#chart"


@dataclass
class AppMode:
    """What app mode delivers with; `bot` is made when first needed (its token is read from its secret)."""

    bot: Callable[[], SlackAppPort]
    threads: ThreadStorePort
    waiting: Waiting
    failure: type[Exception]
    charts: ChartsPort | None = None
    holder: Callable[[], str] = field(default=lambda: uuid.uuid4().hex)

    def buttons(self, doc: Mapping[str, Any], member: str | None) -> list[dict[str, Any]]:
        if slack_messages.is_test(doc) or doc.get("kind") == slack_messages.DIGEST_KIND:
            return []
        return slack_actions.buttons(doc, account=member)

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
        """The reply (or card update) once per (transition, channel), then the graph once under its own key."""
        posted = self._post(chat, message, name, now=now, result=result, reasons=reasons)
        if posted and not message.card_only:
            self._chart_once(chat, message, name, now=now, result=result, reasons=reasons)

    def _post(
        self,
        chat: ChatDelivery,
        message: Message,
        name: str,
        *,
        now: datetime,
        result: MessageResult,
        reasons: list[str],
    ) -> bool:
        """Claim and post one (transition, channel): True when delivered, now or before."""
        with chat.claim(delivery_key(message.transition, name), now) as held:
            if held.state is Claim.DONE:
                return True
            if held.state is Claim.BUSY:
                result.busy.append(name)
                return False
            try:
                stale_card = self._send(chat, message, name, now)
            except ParentBusy:
                held.release()
                result.busy.append(name)
                return False
            except self.failure as exc:
                held.release()
                _failed(name, exc, result, reasons)
                return False
        result.delivered.append(name)
        if stale_card is not None:
            # Reported, not retried: the reply is posted, and the next notification sets the card right.
            result.errors.append(f"channel {name!r}: the card was not updated: {stale_card}")
        return True

    def _send(self, chat: ChatDelivery, message: Message, name: str, now: datetime) -> str | None:
        """The message in its job's thread; returns why the card was not updated, if it was not."""
        bot = self.bot()
        channel = chat.slack.channel_id(name)
        doc = message.doc
        if doc is None or slack_messages.is_test(doc) or doc.get("kind") == slack_messages.DIGEST_KIND:
            bot.post_parent(channel, message.text, message.blocks)
            return None
        if message.card_only:
            self._card_only(bot, doc, channel, message.member, now)
            return None
        thread = self._thread(chat, bot, doc, channel, message.member, now=now)
        bot.reply(channel, thread.ts, message.text, message.blocks)
        if thread.created:
            return None
        version = slack_messages.card_version(doc)
        if not self.threads.advance_card(_thread_key(doc, channel, message.member), version):
            return None  # an older notification than the card shows, or the same one: the card stays
        card_text, card_blocks = _card(doc, message.member)
        try:
            bot.update(channel, thread.ts, card_text, card_blocks)
        except self.failure as exc:
            return str(exc)
        return None

    def _card_only(
        self, bot: SlackAppPort, doc: Mapping[str, Any], channel: str, member: str | None, now: datetime
    ) -> None:
        """The job's card shows `doc` unless it shows something newer. Raises `ParentBusy` while there is no card."""
        key = _thread_key(doc, channel, member)
        record = self.threads.read(key)
        version = slack_messages.card_version(doc)
        if record is None or record.ts is None:
            if now.timestamp() * 1000 - version < CARD_WAIT_SECONDS * 1000:
                raise ParentBusy(key)  # the stop's delivery (or its parent) may still be on its way
            return
        # Updated before the version is raised, so that a failed update is tried again.
        if record.card_version >= version:
            return
        card_text, card_blocks = _card(doc, member)
        bot.update(channel, record.ts, card_text, card_blocks)
        self.threads.advance_card(key, version)

    def _thread(
        self,
        chat: ChatDelivery,
        bot: SlackAppPort,
        doc: Mapping[str, Any],
        channel: str,
        member: str | None,
        *,
        now: datetime,
    ) -> Thread:
        card_text, card_blocks = _card(doc, member)
        return open_thread(
            self.threads,
            _thread_key(doc, channel, member),
            post_parent=lambda: bot.post_parent(channel, card_text, card_blocks).ts,
            holder=self.holder(),
            now=now,
            lease_seconds=chat.lease_seconds,
            ttl_seconds=chat.ttl_seconds,
            card_version=slack_messages.card_version(doc),
            waiting=self.waiting,
        )

    def _chart_once(
        self,
        chat: ChatDelivery,
        message: Message,
        name: str,
        *,
        now: datetime,
        result: MessageResult,
        reasons: list[str],
    ) -> None:
        """The metric's graph into the job's thread, once per (transition, channel), after the reply."""
        # A member's metrics are in its own account (charts.py).
        chart = chat.chart(message.doc) if message.member is None else None
        if chart is None or self.charts is None or message.doc is None:
            if name not in result.delivered:
                result.skipped.append(name)
            return
        with chat.claim(chart_key(message.transition, name), now) as held:
            if held.state is Claim.DONE:
                if name not in result.delivered:
                    result.skipped.append(name)
                return
            if held.state is Claim.BUSY:
                result.busy.append(name)
                return
            try:
                channel = chat.slack.channel_id(name)
                png = self.charts.png(chart.widget)
                bot = self.bot()
                thread = self._thread(chat, bot, message.doc, channel, message.member, now=now)
                bot.upload_png(
                    channel, thread.ts, png, filename=chart.filename, title=chart.title, alt_text=chart.alt_text
                )
            except ParentBusy:
                held.release()
                result.busy.append(name)
                return
            except self.failure as exc:
                held.release()
                _failed(name, exc, result, reasons)
                return
        if name not in result.delivered:
            result.delivered.append(name)


def _card(doc: Mapping[str, Any], member: str | None) -> tuple[str, list[dict[str, Any]]]:
    """The job's card, with the thread's only Stop now (gone once the card shows the job ended)."""
    return slack_messages.render_card(doc, actions=slack_actions.stop_button(doc, account=member))


def _thread_key(doc: Mapping[str, Any], channel: str, member: str | None) -> str:
    return thread_key(str(doc["job"]["name"]), channel, member)


def _failed(name: str, exc: BaseException, result: MessageResult, reasons: list[str]) -> None:
    permanent = bool(getattr(exc, "permanent", False))
    result.errors.append(f"channel {name!r}: {exc}")
    reasons.append(result.errors[-1])
    (result.permanent if permanent else result.transient).append(name)
    if getattr(exc, "error", None) == credentials.NOT_CONFIGURED_ERROR:
        result.not_configured.append(name)
