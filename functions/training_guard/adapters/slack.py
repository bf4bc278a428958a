"""Slack incoming webhooks through slack_sdk's WebhookClient and its retry handlers.

429, 5xx and timeouts are transient, other 4xx permanent (docs/design/chat-delivery.md); URLs are never logged.
"""

from __future__ import annotations

import logging
import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.error import URLError

from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.http_retry.builtin_interval_calculators import BackoffRetryIntervalCalculator
from slack_sdk.http_retry.jitter import Jitter
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.webhook import WebhookClient

SEND_TIMEOUT_SECONDS = 10
MAX_RETRIES = 3
BACKOFF_FACTOR = 0.5  # retries after about 0.5, 1 and 2 s (plus up to as much jitter)
# Slack answers a rate limit with 429 and Retry-After in seconds (https://docs.slack.dev/apis/web-api/rate-limits);
# a longer back-off than this: the queue redelivers later instead.
MAX_RETRY_AFTER_SECONDS = 10
# chat.postMessage "generally allows posting one message per second per channel" (https://docs.slack.dev/apis/web-api/rate-limits).
MIN_INTERVAL_SECONDS = 1.0
# Longest back-off before a retry of a 5xx or a connection error: the last interval, doubled by jitter.
MAX_BACKOFF_SECONDS = 2 * BACKOFF_FACTOR * 2 ** (MAX_RETRIES - 1)
# One attempt at most (pacing, the HTTP timeout): started only with this much time left, since a timed-out
# notifier returns its whole batch to the queue.
ATTEMPT_SECONDS = MIN_INTERVAL_SECONDS + SEND_TIMEOUT_SECONDS + 1.0
_URL = re.compile(r"https?://\S+")


class _RedactUrls(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = _URL.sub("<webhook url>", record.getMessage())
        record.args = None
        return True


def _sdk_logger() -> logging.Logger:
    logger = logging.getLogger("training_guard.slack_sdk")
    logger.setLevel(logging.WARNING)  # slack_sdk writes URLs at INFO/DEBUG: never emit those
    if not any(isinstance(f, _RedactUrls) for f in logger.filters):
        logger.addFilter(_RedactUrls())
    return logger


# `_can_retry` is slack_sdk's extension point despite the underscore
# (https://docs.slack.dev/tools/python-slack-sdk/reference/http_retry/handler.html); test_slack_retry.py pins it.
class Deadline:
    """The invocation's time left, shared by the sender and its retry handlers (unbounded locally)."""

    def __init__(self) -> None:
        self.time_left: Callable[[], float] = lambda: math.inf

    def allows(self, wait: float) -> bool:
        return self.time_left() >= wait + ATTEMPT_SECONDS


class _WithDeadline:
    """A retry handler that also holds the invocation's deadline (slack_sdk's handlers take kwargs)."""

    def __init__(self, *, deadline: Deadline, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deadline = deadline


class _BoundedRateLimitHandler(_WithDeadline, RateLimitErrorRetryHandler):
    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is None or response.status_code != 429:
            return False
        values = {k.lower(): v for k, v in response.headers.items()}.get("retry-after") or ["1"]
        try:
            wait = int(values[0])
        except ValueError:
            wait = 1
        return wait <= MAX_RETRY_AFTER_SECONDS and self.deadline.allows(wait)


class _AllServerErrorsHandler(_WithDeadline, ServerErrorRetryHandler):
    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is not None and 500 <= response.status_code < 600 and self.deadline.allows(MAX_BACKOFF_SECONDS)


class _ConnectionErrorHandler(_WithDeadline, ConnectionErrorRetryHandler):
    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        retry = super()._can_retry(state=state, request=request, response=response, error=error)
        return retry and self.deadline.allows(MAX_BACKOFF_SECONDS)


class _ProportionalJitter(Jitter):
    """Up to one more interval of random delay (slack_sdk's default adds up to a whole second)."""

    def recalculate(self, duration: float) -> float:
        return duration * (1 + random.random())  # noqa: S311 - jitter, not cryptography


def retry_handlers(backoff_factor: float, deadline: Deadline | None = None) -> list[Any]:
    interval = BackoffRetryIntervalCalculator(backoff_factor=backoff_factor, jitter=_ProportionalJitter())
    deadline = deadline or Deadline()
    return [
        _BoundedRateLimitHandler(max_retry_count=MAX_RETRIES, deadline=deadline),
        _AllServerErrorsHandler(max_retry_count=MAX_RETRIES, interval_calculator=interval, deadline=deadline),
        _ConnectionErrorHandler(
            max_retry_count=MAX_RETRIES,
            interval_calculator=interval,
            error_types=[URLError, ConnectionError, TimeoutError],
            deadline=deadline,
        ),
    ]


@dataclass(frozen=True)
class Delivery:
    ok: bool
    permanent: bool = False  # True: retrying the same request cannot succeed
    detail: str = ""  # status and Slack's error text; never the URL


class WebhookSender:
    def __init__(
        self,
        *,
        deadline: Deadline | None = None,
        backoff_factor: float | None = None,
        min_interval: float = MIN_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.deadline = deadline or Deadline()
        self._handlers = retry_handlers(BACKOFF_FACTOR if backoff_factor is None else backoff_factor, self.deadline)
        self._logger = _sdk_logger()
        self._min_interval = min_interval
        self._clock = clock
        self._sleep = sleep
        self._last_sent: dict[str, float] = {}

    def send(self, url: str, text: str, blocks: list[dict[str, Any]]) -> Delivery:
        self._pace(url)
        client = WebhookClient(url, timeout=SEND_TIMEOUT_SECONDS, logger=self._logger, retry_handlers=self._handlers)
        try:
            response = client.send(text=text, blocks=blocks, unfurl_links=False, unfurl_media=False)
        except Exception as exc:  # noqa: BLE001 - connection errors after retries: transient
            return Delivery(ok=False, detail=f"{type(exc).__name__}: {_URL.sub('<webhook url>', str(exc))}")
        finally:
            self._last_sent[url] = self._clock()
        if response.status_code == 200:
            return Delivery(ok=True, detail="200")
        body = (response.body or "")[:200]
        transient = response.status_code == 429 or response.status_code >= 500
        return Delivery(ok=False, permanent=not transient, detail=f"HTTP {response.status_code} {body}")

    def _pace(self, url: str) -> None:
        last = self._last_sent.get(url)
        if last is not None:
            wait = self._min_interval - (self._clock() - last)
            if wait > 0:
                self._sleep(wait)
