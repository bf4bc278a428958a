"""Slack incoming webhooks as HTTPS+JSON with the standard library, and the retry rules every Slack call shares.

429, 5xx and timeouts are transient, other 4xx permanent (docs/design/chat-delivery.md); URLs are never logged."""

from __future__ import annotations

import json
import logging
import math
import random
import re
import time
from collections.abc import Callable, Mapping
from functools import partial
from http.client import RemoteDisconnected
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from training_guard.config.frozen import frozen

SEND_TIMEOUT_SECONDS = 10
MAX_RETRIES = 3
BACKOFF_FACTOR = 0.5  # retries after about 0.5, 1 and 2 s (plus up to as much jitter)
# Slack answers a rate limit with 429 and Retry-After (docs/limits.md); longer than this, the queue redelivers later.
MAX_RETRY_AFTER_SECONDS = 10
# chat.postMessage "generally allows posting one message per second per channel" (https://docs.slack.dev/apis/web-api/rate-limits).
MIN_INTERVAL_SECONDS = 1.0
# Longest back-off before a retry of a 5xx or a connection error: the last interval, doubled by jitter.
MAX_BACKOFF_SECONDS = 2 * BACKOFF_FACTOR * 2 ** (MAX_RETRIES - 1)
# One attempt at most (pacing, the HTTP timeout): started only with this much time left (a timeout fails the batch).
ATTEMPT_SECONDS = MIN_INTERVAL_SECONDS + SEND_TIMEOUT_SECONDS + 1.0
CONNECTION_ERRORS = (URLError, ConnectionError, TimeoutError)  # retried as a 5xx is
USER_AGENT = "training-guard"
# A webhook is a JSON POST (https://docs.slack.dev/messaging/sending-messages-using-incoming-webhooks)
JSON_HEADERS = {"Content-Type": "application/json;charset=utf-8", "User-Agent": USER_AGENT}
_URL = re.compile(r"https?://\S+")


class _RedactUrls(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = _URL.sub("<webhook url>", record.getMessage())
        record.args = None
        return True


def _sdk_logger() -> logging.Logger:
    logger = logging.getLogger("training_guard.slack_sdk")
    logger.setLevel(logging.WARNING)  # nothing below WARNING: URLs never reach the logs
    if not any(isinstance(f, _RedactUrls) for f in logger.filters):
        logger.addFilter(_RedactUrls())
    return logger


class Deadline:
    """One invocation's time left, shared by its sender and their retries (unbounded locally)."""

    __slots__ = ("time_left",)

    def __init__(self, time_left: Callable[[], float] = lambda: math.inf) -> None:
        self.time_left = time_left

    def allows(self, wait: float) -> bool:
        return self.time_left() >= wait + ATTEMPT_SECONDS


def retry_after(headers: Mapping[str, Any]) -> int:
    """A 429's Retry-After in whole seconds (header names in any case); 1 when unreadable."""
    value = {k.lower(): v for k, v in headers.items()}.get("retry-after") or "1"
    try:
        return int(value)
    except ValueError:
        return 1


def retry_wait(
    attempt: int,
    status: int | None,
    headers: Mapping[str, Any],
    error: BaseException | None,
    *,
    deadline: Deadline,
    backoff_factor: float,
) -> float | None:
    """Seconds before retrying attempt `attempt` (0 the first); None: no retry. A 429 waits Retry-After (+ up to 1 s)
    when it fits; a 5xx, timeout or connection error backs off factor x 2^attempt (+ as much); MAX_RETRIES at most."""
    if attempt >= MAX_RETRIES:
        return None
    jitter = random.random()  # noqa: S311 - jitter, not cryptography
    if status == 429:
        wait = retry_after(headers)
        return wait + jitter if wait <= MAX_RETRY_AFTER_SECONDS and deadline.allows(wait) else None
    server_error = status is not None and 500 <= status < 600
    if (server_error or isinstance(error, CONNECTION_ERRORS)) and deadline.allows(MAX_BACKOFF_SECONDS):
        return backoff_factor * 2.0**attempt * (1 + jitter)
    return None


# (attempt, status or None, headers, error or None) -> seconds to wait before the next attempt, or None: no retry
RetryRule = Callable[[int, int | None, Mapping[str, Any], BaseException | None], float | None]


def slack_retries(deadline: Deadline, backoff_factor: float) -> RetryRule:
    return partial(retry_wait, deadline=deadline, backoff_factor=backoff_factor)


def retry_connection_once(
    attempt: int, status: int | None, headers: Mapping[str, Any], error: BaseException | None
) -> float | None:
    """One retry of a refused or reset connection after 0.5 to 1.5 s, as slack_sdk's WebhookClient did."""
    if attempt == 0 and status is None and isinstance(error, URLError | ConnectionResetError | RemoteDisconnected):
        return 0.5 + random.random()  # noqa: S311 - jitter, not cryptography
    return None


def exchange(
    request: Request, *, retry: RetryRule, timeout: float, logger: logging.Logger
) -> tuple[int, Mapping[str, str], str]:
    """Send `request` (http(s) only), retried as `retry` says: the last status, headers and body, or the last error."""
    if not request.full_url.lower().startswith(("https://", "http://")):
        raise ValueError(f"Invalid URL detected: {request.full_url}")
    attempt = 0
    while True:
        try:
            with urlopen(request, timeout=timeout) as response:  # noqa: S310 - http(s) only, checked above
                body = response.read().decode(response.headers.get_content_charset() or "utf-8")
                return response.status, response.headers, body
        except HTTPError as exc:
            headers = dict(exc.headers.items())
            body = exc.read().decode(exc.headers.get_content_charset() or "utf-8")
            wait = retry(attempt, exc.code, headers, None)
            if wait is None:
                return exc.code, headers, body
        except Exception as exc:
            logger.error("Failed to send a request to Slack API server: %s", exc)  # URLs blanked by its filter
            wait = retry(attempt, None, {}, exc)
            if wait is None:
                raise
        time.sleep(wait)
        attempt += 1


@frozen
class Delivery:
    ok: bool
    permanent: bool = False
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
        last_sent: dict[str, float] | None = None,
    ) -> None:
        """`last_sent`: each URL's last post, shared by the senders of one container's invocations (pacing)."""
        self.deadline = deadline or Deadline()
        self._backoff = BACKOFF_FACTOR if backoff_factor is None else backoff_factor
        self._logger = _sdk_logger()
        self._min_interval = min_interval
        self._clock = clock
        self._sleep = sleep
        self._last_sent: dict[str, float] = {} if last_sent is None else last_sent

    def send(self, url: str, text: str, blocks: list[dict[str, Any]]) -> Delivery:
        self._pace(url)
        body = {"text": text, "blocks": blocks, "unfurl_links": False, "unfurl_media": False}
        request = Request(url, data=json.dumps(body).encode("utf-8"), headers=JSON_HEADERS, method="POST")  # noqa: S310
        try:
            retry = slack_retries(self.deadline, self._backoff)
            status, _, answer = exchange(request, retry=retry, timeout=SEND_TIMEOUT_SECONDS, logger=self._logger)
        except Exception as exc:  # noqa: BLE001 - connection errors after retries: transient
            return Delivery(ok=False, detail=f"{type(exc).__name__}: {_URL.sub('<webhook url>', str(exc))}")
        finally:
            self._last_sent[url] = self._clock()
        if status == 200:
            return Delivery(ok=True, detail="200")
        transient = status == 429 or status >= 500
        return Delivery(ok=False, permanent=not transient, detail=f"HTTP {status} {answer[:200]}")

    def _pace(self, url: str) -> None:
        last = self._last_sent.get(url)
        if last is not None:
            wait = self._min_interval - (self._clock() - last)
            if wait > 0:
                self._sleep(wait)
