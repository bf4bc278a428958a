"""Slack app mode: a bot token (`xoxb-`) and slack_sdk's WebClient, for one living thread per job.

Failures are classified as the webhook sender's are (docs/design/chat-delivery.md); the token is never logged.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError, SlackRequestError
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
from slack_sdk.web.client import WebClient

from training_guard.adapters.slack import (
    ATTEMPT_SECONDS,
    BACKOFF_FACTOR,
    CONNECTION_ERRORS,
    MAX_RETRIES,
    MIN_INTERVAL_SECONDS,
    SEND_TIMEOUT_SECONDS,
    Deadline,
    _sdk_logger,
    retries_connection_error,
    retries_rate_limit,
    retries_server_error,
    retry_after,
)
from training_guard.domain import credentials
from training_guard.domain.credentials import BOT_TOKEN_PREFIX
from training_guard.domain.errors import ActionFailed

SLACK_API_URL = "https://slack.com/api/"
# Errors each method's reference lists as Slack's side, not the request's: retrying later can succeed
# (https://docs.slack.dev/reference/methods/chat.postMessage, .../files.getUploadURLExternal). Of internal_error and
# fatal_error "it's possible some aspect of the operation succeeded"
# (https://docs.slack.dev/reference/methods/files.completeUploadExternal): a retried reply can appear twice.
TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "rate_limited", "service_unavailable", "internal_error", "fatal_error", "request_timeout"}
    | {"team_added_to_org"}
)
OUT_OF_TIME = "out_of_time"  # the error when the invocation has too little time left to start a call
UPLOAD_CALLS = 3  # files_upload_v2: files.getUploadURLExternal, the POST of the bytes, files.completeUploadExternal
_URL = re.compile(r"https?://\S+")


# The WebClient's retries follow adapters/slack.py's rules through slack_sdk's handlers. `_can_retry` is slack_sdk's
# extension point despite the underscore (https://docs.slack.dev/tools/python-slack-sdk/reference/http_retry/handler.html);
# test_slack_retry.py pins it.
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
        if response is None:
            return False
        return retries_rate_limit(response.status_code, retry_after(response.headers), self.deadline)


class _AllServerErrorsHandler(_WithDeadline, ServerErrorRetryHandler):
    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is not None and retries_server_error(response.status_code, self.deadline)


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
        return retry and retries_connection_error(error, self.deadline)


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
            error_types=list(CONNECTION_ERRORS),
            deadline=deadline,
        ),
    ]


class SlackAppError(ActionFailed):
    """A Slack Web API call failed after slack_sdk's retries: `error` is Slack's (or ours); `permanent`: never retry."""

    def __init__(self, action: str, detail: str, *, error: str, permanent: bool, status: int | None = None) -> None:
        self.error = error
        self.permanent = permanent
        self.status = status
        super().__init__(action, RuntimeError(detail))


@dataclass(frozen=True)
class Posted:
    channel: str  # the channel ID Slack answered with
    ts: str  # the message's timestamp: its ID within the channel


def bot_token(secret_id: str, value: str) -> str:
    """The bot token a secret holds; a permanent failure while it still holds the stack's placeholder."""
    if credentials.bot_token_problem(value) is None:
        return value.strip()
    raise SlackAppError(
        f"read the bot token from {secret_id}",
        f"secret {secret_id} does not hold a bot token ({BOT_TOKEN_PREFIX}...) yet; set it with "
        f"{credentials.put_secret_command(secret_id, credentials.BOT_TOKEN)}",
        error=credentials.NOT_CONFIGURED_ERROR,
        permanent=True,
    )


class SlackApp:
    """One workspace's bot: post a job's parent message, reply in its thread, update the parent, upload a chart."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str = SLACK_API_URL,
        deadline: Deadline | None = None,
        backoff_factor: float = BACKOFF_FACTOR,
        min_interval: float = MIN_INTERVAL_SECONDS,
        timeout: int = SEND_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.deadline = deadline or Deadline()
        self.client = WebClient(
            token=token,
            base_url=base_url,
            timeout=timeout,
            logger=_sdk_logger(),
            retry_handlers=retry_handlers(backoff_factor, self.deadline),
        )
        self._min_interval = min_interval
        self._clock = clock
        self._sleep = sleep
        self._last_post: dict[str, float] = {}

    # --- what the guard does ---------------------------------------------------------------------------
    def post_parent(self, channel: str, text: str, blocks: Sequence[dict[str, Any]]) -> Posted:
        """Post a job's card as a new message of the channel: its `ts` is the thread's from now on."""
        return self._post(f"post the parent message in {channel}", channel, text, blocks, None)

    def reply(self, channel: str, thread_ts: str, text: str, blocks: Sequence[dict[str, Any]]) -> Posted:
        """Post in the thread of the parent `thread_ts` (never a reply's ts: Slack wants the parent's)."""
        return self._post(f"reply in thread {thread_ts} of {channel}", channel, text, blocks, thread_ts)

    def update(self, channel: str, ts: str, text: str, blocks: Sequence[dict[str, Any]]) -> None:
        """Replace the text and blocks of message `ts` in place."""
        # Not paced: chat.update is Tier 3 (https://docs.slack.dev/reference/methods/chat.update).
        action = f"update message {ts} in {channel}"
        self._need(action, calls=1)
        try:
            self.client.chat_update(channel=channel, ts=ts, text=text, blocks=list(blocks))
        except Exception as exc:
            raise _failure(action, exc) from exc

    def upload_png(self, channel: str, thread_ts: str, png: bytes, *, filename: str, title: str, alt_text: str) -> str:
        """Share a PNG in the thread of `thread_ts` (slack_sdk's files_upload_v2); its file ID."""
        action = f"upload {filename} to thread {thread_ts} of {channel}"
        self._need(action, calls=UPLOAD_CALLS)
        self._pace(channel)
        try:
            response = self.client.files_upload_v2(
                channel=channel, thread_ts=thread_ts, content=png, filename=filename, title=title, alt_txt=alt_text
            )
        except Exception as exc:
            raise _failure(action, exc) from exc
        finally:
            self._last_post[channel] = self._clock()
        return str(response["file"]["id"])

    def identity(self) -> dict[str, str]:
        """auth.test: the workspace and the bot user the token belongs to (a check that the token works)."""
        action = "auth.test"
        self._need(action, calls=1)
        try:
            response = self.client.auth_test()
        except Exception as exc:
            raise _failure(action, exc) from exc
        return {k: str(v) for k, v in response.data.items() if k != "ok"} if isinstance(response.data, dict) else {}

    # --- mechanics ------------------------------------------------------------------------------------
    def _post(
        self, action: str, channel: str, text: str, blocks: Sequence[dict[str, Any]], thread_ts: str | None
    ) -> Posted:
        self._need(action, calls=1)
        self._pace(channel)
        try:
            response = self.client.chat_postMessage(
                channel=channel,
                text=text,
                blocks=list(blocks),
                thread_ts=thread_ts,
                unfurl_links=False,
                unfurl_media=False,
            )
        except Exception as exc:
            raise _failure(action, exc) from exc
        finally:
            self._last_post[channel] = self._clock()
        return Posted(channel=str(response["channel"]), ts=str(response["ts"]))

    def _need(self, action: str, *, calls: int) -> None:
        """Start only what can finish: `calls` attempts within the time left (a timeout would fail the whole batch)."""
        if not self.deadline.allows((calls - 1) * ATTEMPT_SECONDS):
            raise SlackAppError(action, "too little time left in this invocation", error=OUT_OF_TIME, permanent=False)

    def _pace(self, channel: str) -> None:
        last = self._last_post.get(channel)
        if last is not None:
            wait = self._min_interval - (self._clock() - last)
            if wait > 0:
                self._sleep(wait)


def _failure(action: str, exc: BaseException) -> SlackAppError:
    """Slack's answer (or the lack of one) as the guard's error: permanent or worth retrying later."""
    if isinstance(exc, SlackApiError):
        status = getattr(exc.response, "status_code", None)
        data = getattr(exc.response, "data", None)
        error = str(data.get("error") or "") if isinstance(data, dict) else ""
        error = error or f"http_{status}"
        transient = status == 429 or (status is not None and status >= 500) or error in TRANSIENT_ERRORS
        return SlackAppError(action, f"{error} (HTTP {status})", error=error, permanent=not transient, status=status)
    detail = _URL.sub("<url>", f"{type(exc).__name__}: {exc}")  # an upload URL is a ticket: never shown
    if isinstance(exc, SlackRequestError):  # the POST of the bytes was refused; the next attempt gets a new ticket
        return SlackAppError(action, detail, error="upload_failed", permanent=False)
    if isinstance(exc, CONNECTION_ERRORS):
        return SlackAppError(action, detail, error="connection", permanent=False)
    return SlackAppError(action, detail, error=type(exc).__name__, permanent=False)


class BotFromSecret:
    """The bot its secret's token makes, renewed on rotation; a permanent `not_configured` on a placeholder."""

    def __init__(
        self,
        read_secret: Callable[[str], str],
        secret_id: str,
        *,
        base_url: str = SLACK_API_URL,
        deadline: Deadline | None = None,
        min_interval: float = MIN_INTERVAL_SECONDS,
    ) -> None:
        self._read = read_secret
        self._id = secret_id
        self._base_url = base_url
        self._deadline = deadline
        self._min_interval = min_interval
        self._token: str | None = None
        self._app: SlackApp | None = None

    def __call__(self) -> SlackApp:
        try:
            value = self._read(self._id)
        except ActionFailed as exc:  # Secrets Manager refused or failed: worth retrying, never shown the value
            raise SlackAppError(
                f"read the bot token from {self._id}", str(exc), error="secret_unreadable", permanent=False
            ) from exc
        token = bot_token(self._id, value)
        if self._app is None or token != self._token:
            self._app = SlackApp(
                token, base_url=self._base_url, deadline=self._deadline, min_interval=self._min_interval
            )
            self._token = token
        return self._app


class ThreadSay:
    """What a click did, said in the job's thread by the bot (the click worker's SayPort)."""

    def __init__(self, bot: Callable[[], SlackApp]) -> None:
        self._bot = bot

    def say(self, click: Any, text: str) -> None:
        """`click`: a slack_actions.Click (its channel, and the thread of the message the button was on)."""
        if not click.channel or not click.thread:
            return  # a click Slack sent without its message: nowhere to say it (the response_url still answers)
        block = {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}
        self._bot().reply(click.channel, click.thread, text[:3000], [block])
