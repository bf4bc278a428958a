"""Slack app mode: a bot token (`xoxb-`) and Slack's Web API over HTTPS, for one living thread per job.

Failures are classified as the webhook sender's are (docs/design/chat-delivery.md); the token is never logged."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode
from urllib.request import Request, urlopen

from training_guard.adapters.slack import (
    ATTEMPT_SECONDS,
    BACKOFF_FACTOR,
    CONNECTION_ERRORS,
    MIN_INTERVAL_SECONDS,
    SEND_TIMEOUT_SECONDS,
    USER_AGENT,
    Deadline,
    _sdk_logger,
    exchange,
    slack_retries,
)
from training_guard.config.frozen import frozen
from training_guard.domain import credentials
from training_guard.domain.credentials import BOT_TOKEN_PREFIX
from training_guard.domain.errors import ActionFailed

SLACK_API_URL = "https://slack.com/api/"
# Errors that chat.postMessage's and files.*'s references list as Slack's side: retrying later can succeed.
# internal_error and fatal_error may have partly succeeded: a retried reply can appear twice (docs/limits.md).
TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "rate_limited", "service_unavailable", "internal_error", "fatal_error", "request_timeout"}
    | {"team_added_to_org"}
)
OUT_OF_TIME = "out_of_time"  # the error when the invocation has too little time left to start a call
UPLOAD_CALLS = 3  # files_upload_v2: files.getUploadURLExternal, the POST of the bytes, files.completeUploadExternal
_URL = re.compile(r"https?://\S+")


class SlackAppError(ActionFailed):
    """A Slack Web API call failed after its retries: `error` is Slack's (or ours); `permanent`: never retry."""

    def __init__(self, action: str, detail: str, *, error: str, permanent: bool, status: int | None = None) -> None:
        self.error = error
        self.permanent = permanent
        self.status = status
        super().__init__(action, RuntimeError(detail))


class _ApiError(Exception):
    def __init__(self, status: int, data: Mapping[str, Any]) -> None:
        super().__init__(f"{data.get('error')} (HTTP {status})")
        self.status = status
        self.data = data


class _UploadRefused(Exception):
    """The POST of a file's bytes to its upload URL was not answered with 200."""


@frozen
class Posted:
    channel: str
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
        last_post: dict[str, float] | None = None,
    ) -> None:
        self.deadline = deadline or Deadline()
        self._token = token
        self._base_url = base_url
        self._backoff = backoff_factor
        self._timeout = timeout
        self._logger = _sdk_logger()
        self._min_interval = min_interval
        self._clock = clock
        self._sleep = sleep
        self._last_post: dict[str, float] = {} if last_post is None else last_post  # shared: the container's pacing

    def post_parent(self, channel: str, text: str, blocks: Sequence[dict[str, Any]]) -> Posted:
        """Post a job's card as a new message of the channel: its `ts` is the thread's from now on."""
        return self._post(f"post the parent message in {channel}", channel, text, blocks, None)

    def reply(self, channel: str, thread_ts: str, text: str, blocks: Sequence[dict[str, Any]]) -> Posted:
        """Post in the thread of the parent `thread_ts` (never a reply's ts: Slack wants the parent's)."""
        return self._post(f"reply in thread {thread_ts} of {channel}", channel, text, blocks, thread_ts)

    def update(self, channel: str, ts: str, text: str, blocks: Sequence[dict[str, Any]]) -> None:
        # Not paced: chat.update is Tier 3 (https://docs.slack.dev/reference/methods/chat.update).
        action = f"update message {ts} in {channel}"
        self._need(action, calls=1)
        try:
            self._call("chat.update", json_body={"channel": channel, "ts": ts, "text": text, "blocks": list(blocks)})
        except Exception as exc:
            raise _failure(action, exc) from exc

    def upload_png(self, channel: str, thread_ts: str, png: bytes, *, filename: str, title: str, alt_text: str) -> str:
        """Share a PNG in the thread of `thread_ts` in Slack's three steps (files.getUploadURLExternal, the POST,
        files.completeUploadExternal: docs/limits.md); its file ID."""
        action = f"upload {filename} to thread {thread_ts} of {channel}"
        self._need(action, calls=UPLOAD_CALLS)
        self._pace(channel)
        try:
            ticket = self._call(
                "files.getUploadURLExternal", form={"filename": filename, "length": len(png), "alt_txt": alt_text}
            )
            self._upload(str(ticket.get("upload_url")), png, filename=filename, title=title)
            shared = [{"id": ticket.get("file_id"), "title": title}]
            form = {"files": json.dumps(shared), "channel_id": channel, "thread_ts": thread_ts}
            done = self._call("files.completeUploadExternal", form=form)
        except Exception as exc:
            raise _failure(action, exc) from exc
        finally:
            self._last_post[channel] = self._clock()
        return str(done["files"][0]["id"])

    def identity(self) -> dict[str, str]:
        """auth.test: the workspace and the bot user the token belongs to (a check that the token works)."""
        action = "auth.test"
        self._need(action, calls=1)
        try:
            response = self._call("auth.test")
        except Exception as exc:
            raise _failure(action, exc) from exc
        return {k: str(v) for k, v in response.items() if k != "ok"}

    def _post(
        self, action: str, channel: str, text: str, blocks: Sequence[dict[str, Any]], thread_ts: str | None
    ) -> Posted:
        self._need(action, calls=1)
        self._pace(channel)
        try:
            body: dict[str, Any] = {"channel": channel, "text": text, "blocks": list(blocks)}
            if thread_ts is not None:
                body["thread_ts"] = thread_ts
            body |= {"unfurl_links": False, "unfurl_media": False}
            response = self._call("chat.postMessage", json_body=body)
        except Exception as exc:
            raise _failure(action, exc) from exc
        finally:
            self._last_post[channel] = self._clock()
        return Posted(channel=str(response["channel"]), ts=str(response["ts"]))

    def _call(
        self, method: str, *, json_body: Mapping[str, Any] | None = None, form: Mapping[str, Any] | None = None
    ) -> Mapping[str, Any]:
        """One Web API call: JSON for chat.*, a form for files.*, retried by slack.py's rules; the answer when `ok`."""
        headers = {"Authorization": f"Bearer {self._token}", "User-Agent": USER_AGENT}
        data: bytes | None = None
        if json_body:
            data, headers["Content-Type"] = json.dumps(json_body).encode("utf-8"), "application/json;charset=utf-8"
        elif form:
            data, headers["Content-Type"] = urlencode(form).encode("utf-8"), "application/x-www-form-urlencoded"
        request = Request(self._base_url + method, data=data, headers=headers, method="POST")  # noqa: S310 - exchange checks
        retry = slack_retries(self.deadline, self._backoff)
        status, _, body = exchange(request, retry=retry, timeout=self._timeout, logger=self._logger)
        try:
            answer = json.loads(body)
        except ValueError:
            answer = {"ok": False, "error": "Received a response in a non-JSON format: " + _one_line(body)}
        if not isinstance(answer, dict):
            answer = {"ok": False, "error": f"Received a JSON {type(answer).__name__}, not an object"}
        if status != 200 or not answer.get("ok"):
            raise _ApiError(status, answer)
        return answer

    def _upload(self, url: str, png: bytes, *, filename: str, title: str) -> None:
        """POST the bytes to the upload URL Slack gave (no token: the URL is the ticket); not retried."""
        if not url.lower().startswith(("https://", "http://")):
            raise _UploadRefused(f"Invalid upload URL detected: {url}")
        request = Request(url, data=png, headers={}, method="POST")  # noqa: S310 - http(s) only, checked above
        with urlopen(request, timeout=self._timeout) as response:  # noqa: S310 - as above
            body = response.read().decode(response.headers.get_content_charset() or "utf-8")
        if response.status != 200:
            said = f"status: {response.status}, body: {body}, filename: {filename}, title: {title}"
            raise _UploadRefused(f"Failed to upload a file ({said})")

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
    if isinstance(exc, _ApiError):
        status, data = exc.status, exc.data
        error = str(data.get("error") or "") or f"http_{status}"
        transient = status == 429 or status >= 500 or error in TRANSIENT_ERRORS
        return SlackAppError(action, f"{error} (HTTP {status})", error=error, permanent=not transient, status=status)
    detail = _URL.sub("<url>", f"{type(exc).__name__}: {exc}")  # an upload URL is a ticket: never shown
    if isinstance(exc, _UploadRefused):  # the POST of the bytes was refused; the next attempt gets a new ticket
        return SlackAppError(action, detail, error="upload_failed", permanent=False)
    if isinstance(exc, CONNECTION_ERRORS):
        return SlackAppError(action, detail, error="connection", permanent=False)
    return SlackAppError(action, detail, error=type(exc).__name__, permanent=False)


def _one_line(body: str) -> str:
    line = "".join(part.strip() for part in body.replace("\r", "\n").split("\n"))
    return line if len(line) <= 100 else line[:100] + "..."


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
        last_post: dict[str, float] | None = None,
    ) -> None:
        self._read = read_secret
        self._last_post = last_post
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
                token,
                base_url=self._base_url,
                deadline=self._deadline,
                min_interval=self._min_interval,
                last_post=self._last_post,
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
