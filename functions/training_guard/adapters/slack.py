"""Slack incoming webhooks as HTTPS+JSON with the standard library, and the retry rules every Slack call shares.

429, 5xx and timeouts are transient, other 4xx permanent (docs/design/chat-delivery.md); URLs are never logged.
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

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
CONNECTION_ERRORS = (URLError, ConnectionError, TimeoutError)  # retried as a 5xx is
# A webhook is a JSON POST (https://docs.slack.dev/messaging/sending-messages-using-incoming-webhooks)
_HEADERS = {"Content-Type": "application/json;charset=utf-8", "User-Agent": "training-guard"}
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


class Deadline:
    """The invocation's time left, shared by the sender and its retries (unbounded locally)."""

    def __init__(self) -> None:
        self.time_left: Callable[[], float] = lambda: math.inf

    def allows(self, wait: float) -> bool:
        return self.time_left() >= wait + ATTEMPT_SECONDS


# --- the retry rules (the webhook sender below and slack_app's WebClient handlers) --------------------------------
def retry_after(headers: Mapping[str, Any]) -> int:
    """A 429's Retry-After in whole seconds (header names in any case, a value or a list of them); 1 if unreadable."""
    values = {k.lower(): v for k, v in headers.items()}.get("retry-after") or ["1"]
    value = values[0] if isinstance(values, list | tuple) else values
    try:
        return int(value)
    except ValueError:
        return 1


def retries_rate_limit(status: int | None, wait: int, deadline: Deadline) -> bool:
    """A 429 is waited for when its Retry-After is short and the wait and one more attempt fit the time left."""
    return status == 429 and wait <= MAX_RETRY_AFTER_SECONDS and deadline.allows(wait)


def retries_server_error(status: int | None, deadline: Deadline) -> bool:
    return status is not None and 500 <= status < 600 and deadline.allows(MAX_BACKOFF_SECONDS)


def retries_connection_error(error: BaseException | None, deadline: Deadline) -> bool:
    return isinstance(error, CONNECTION_ERRORS) and deadline.allows(MAX_BACKOFF_SECONDS)


def backoff(attempt: int, factor: float) -> float:
    """The wait before retry `attempt` + 1 of a 5xx or a connection error: factor x 2^attempt, plus up to as much."""
    return factor * 2.0**attempt * (1 + random.random())  # noqa: S311 - jitter, not cryptography


@dataclass(frozen=True)
class Delivery:
    """One webhook post's result: delivered, or why not and whether a retry can help."""

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
        self._backoff = BACKOFF_FACTOR if backoff_factor is None else backoff_factor
        self._logger = _sdk_logger()
        self._min_interval = min_interval
        self._clock = clock
        self._sleep = sleep
        self._last_sent: dict[str, float] = {}

    def send(self, url: str, text: str, blocks: list[dict[str, Any]]) -> Delivery:
        self._pace(url)
        body = {"text": text, "blocks": blocks, "unfurl_links": False, "unfurl_media": False}
        try:
            status, answer = self._post(url, json.dumps(body).encode("utf-8"))
        except Exception as exc:  # noqa: BLE001 - connection errors after retries: transient
            return Delivery(ok=False, detail=f"{type(exc).__name__}: {_URL.sub('<webhook url>', str(exc))}")
        finally:
            self._last_sent[url] = self._clock()
        if status == 200:
            return Delivery(ok=True, detail="200")
        transient = status == 429 or status >= 500
        return Delivery(ok=False, permanent=not transient, detail=f"HTTP {status} {answer[:200]}")

    def _post(self, url: str, data: bytes) -> tuple[int, str]:
        """POST with up to MAX_RETRIES retries (429 after Retry-After, 5xx and connection errors after a back-off);
        the last answer's status and body, or the last connection error raised."""
        if not url.lower().startswith(("https://", "http://")):
            raise ValueError(f"Invalid URL detected: {url}")
        request = Request(url, data=data, headers=_HEADERS, method="POST")  # noqa: S310 - http(s) only, checked above
        attempt = 0
        while True:
            try:
                with urlopen(request, timeout=SEND_TIMEOUT_SECONDS) as response:  # noqa: S310 - as above
                    return response.status, response.read().decode(response.headers.get_content_charset() or "utf-8")
            except HTTPError as exc:
                answer = exc.read().decode(exc.headers.get_content_charset() or "utf-8")
                wait = self._wait(attempt, exc.code, exc.headers, None)
                if wait is None:
                    return exc.code, answer
            except Exception as exc:
                self._logger.error("Failed to send a request to Slack API server: %s", exc)  # redacted by its filter
                wait = self._wait(attempt, None, {}, exc)
                if wait is None:
                    raise
            time.sleep(wait)
            attempt += 1

    def _wait(self, attempt: int, status: int | None, headers: Any, error: Exception | None) -> float | None:
        """Seconds to wait before the next attempt; None: no retry."""
        if attempt >= MAX_RETRIES:
            return None
        if status == 429:
            wait = retry_after(dict(headers.items()))
            return wait + random.random() if retries_rate_limit(status, wait, self.deadline) else None  # noqa: S311
        if retries_server_error(status, self.deadline) or retries_connection_error(error, self.deadline):
            return backoff(attempt, self._backoff)
        return None

    def _pace(self, url: str) -> None:
        last = self._last_sent.get(url)
        if last is not None:
            wait = self._min_interval - (self._clock() - last)
            if wait > 0:
                self._sleep(wait)
