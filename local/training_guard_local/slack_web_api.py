"""A Slack Web API on 127.0.0.1 for tests and the demo: slack_sdk's WebClient talks to it through `base_url`.

`with SlackWebApi() as slack:` then `WebClient(token=slack.token, base_url=slack.base_url)`. It implements what
the guard's app mode calls, with the shapes of Slack's method reference (docs.slack.dev/reference/methods/<name>):

- `chat.postMessage` (channel, text, blocks, thread_ts): `{"ok": true, "channel", "ts", "message"}`; a reply is kept
  under its parent's `ts` (https://docs.slack.dev/reference/methods/chat.postMessage).
- `chat.update` (channel, ts, text, blocks): edits the message in place, keeping what it said before in `edits`;
  `{"ok": true, "channel", "ts", "text", "message"}`, `message_not_found` for an unknown `ts`
  (https://docs.slack.dev/reference/methods/chat.update).
- `files.getUploadURLExternal` (filename, length) -> `{"ok": true, "upload_url", "file_id"}`; the bytes are POSTed to
  `upload_url` (no token: the URL is the ticket) and saved under `files_dir`; `files.completeUploadExternal` (files
  as a JSON array of `{"id", "title"}`, channel_id, thread_ts, initial_comment) shares them in the channel or the
  thread: `{"ok": true, "files": [{"id", "title", ...}]}`, `file_not_found` for a file never uploaded, and
  `invalid_channel` (this method's name for it) for an unknown channel. This is the sequence of slack_sdk's
  `files_upload_v2` (slack_sdk/web/client.py); `files.upload` itself was retired
  (https://docs.slack.dev/reference/methods/files.getUploadURLExternal,
  https://docs.slack.dev/reference/methods/files.completeUploadExternal).
- `auth.test` -> `{"ok": true, "url", "team", "user", "team_id", "user_id", "bot_id"}`
  (https://docs.slack.dev/reference/methods/auth.test).
- a `response_url` per interaction (`slack.response_url()`), which records what is posted to it: the ephemeral
  "not allowed" and the guard's answers to a click
  (https://docs.slack.dev/interactivity/handling-user-interaction).

Every API method checks the bearer token (`Authorization: Bearer ...`, or a `token` parameter): none is
`not_authed`, a wrong one `invalid_auth`. Errors are Slack's shape, `{"ok": false, "error": "..."}` with HTTP 200,
except a rate limit: HTTP 429 with `Retry-After` in seconds and `{"ok": false, "error": "ratelimited"}`
(https://docs.slack.dev/apis/web-api/rate-limits). `fail(method, Fault(...))` makes the next calls of a method
fail that way (or with a 5xx); then it answers normally again.

Stricter than Slack where Slack documents nothing: a `thread_ts` that names no parent message in the channel is
refused with `thread_not_found` (the name conversations.replies uses), so that a wrong `ts` fails a test instead of
silently starting a new conversation.
"""

from __future__ import annotations

import itertools
import json
import secrets
import shutil
import tempfile
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs

from training_guard.domain.credentials import BOT_TOKEN_PREFIX

DEFAULT_CHANNEL = "C0TRAINING"
TEAM_ID = "T0EMULATED"
BOT_USER_ID = "U0TRAINGUARD"
BOT_ID = "B0TRAINGUARD"
# Seconds since the epoch of the first `ts`: Slack's message timestamps are "<epoch seconds>.<6 digits>", unique
# per channel; the emulation numbers them from a fixed start so that a run is reproducible.
_FIRST_TS = 1_780_000_000


@dataclass(frozen=True)
class UploadedFile:
    id: str
    name: str
    title: str
    length: int  # as announced in files.getUploadURLExternal
    path: Path | None = None  # where the bytes were saved (None until they are uploaded)
    alt_txt: str | None = None


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None  # the parent's ts, for a reply
    files: list[UploadedFile] = field(default_factory=list)
    edits: list[dict[str, Any]] = field(default_factory=list)  # earlier versions ({"text", "blocks"}), oldest first

    def as_api(self) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "type": "message",
            "subtype": "bot_message",
            "bot_id": BOT_ID,
            "text": self.text,
            "ts": self.ts,
            "blocks": self.blocks,
        }
        if self.thread_ts:
            shown["thread_ts"] = self.thread_ts
        if self.files:
            shown["files"] = [{"id": f.id, "name": f.name, "title": f.title} for f in self.files]
        return shown


@dataclass(frozen=True)
class Fault:
    """The answer to one call of a method, instead of doing it."""

    error: str  # Slack's `error` string
    status: int = 200
    retry_after: int | None = None  # seconds, sent as Retry-After
    delay: float = 0.0  # seconds to wait first (to provoke the client's timeout)

    @classmethod
    def ratelimited(cls, retry_after: int = 1) -> Fault:
        return cls("ratelimited", status=429, retry_after=retry_after)

    @classmethod
    def server_error(cls, status: int = 503) -> Fault:
        return cls("service_unavailable", status=status)


@dataclass(frozen=True)
class Call:
    """One request, as received (the token is never kept)."""

    method: str  # an API method, or "upload" / "response_url"
    params: dict[str, Any]
    at: float
    status: int
    error: str | None


class _ApiError(Exception):
    def __init__(self, error: str, status: int = 200, retry_after: int | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.status = status
        self.retry_after = retry_after


class SlackWebApi:
    """The emulated workspace: channels, their messages and threads, uploaded files, response_url posts."""

    def __init__(
        self,
        *,
        token: str | None = None,
        channels: Iterable[str] = (DEFAULT_CHANNEL,),
        files_dir: Path | None = None,
        on_change: Callable[[str, Message], None] | None = None,
    ) -> None:
        self.token = token or f"{BOT_TOKEN_PREFIX}{secrets.token_hex(12)}"  # drawn per workspace: no default token
        self.channels = set(channels)
        self.calls: list[Call] = []
        self.responses: dict[str, list[dict[str, Any]]] = defaultdict(list)  # response_url id -> posts
        self._own_dir = files_dir is None
        self.files_dir = Path(tempfile.mkdtemp(prefix="slack-files-")) if files_dir is None else files_dir
        self._messages: dict[str, list[Message]] = defaultdict(list)  # channel -> every message, in order
        self._files: dict[str, UploadedFile] = {}
        self._faults: dict[str, deque[Fault]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self._on_change = on_change
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                status, headers, body = api._handle(self.path, dict(self.headers.items()), raw)
                try:
                    self.send_response(status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client gave up (a timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: a test's output is its assertions

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            # a short poll: shutdown() waits for it, and every test starts and stops a server
            target=lambda: self._server.serve_forever(poll_interval=0.05),
            name="slack-web-api",
            daemon=True,
        )

    # --- lifecycle -------------------------------------------------------------------------------------
    def __enter__(self) -> SlackWebApi:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._own_dir:
            shutil.rmtree(self.files_dir, ignore_errors=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """What WebClient takes as `base_url` (the real one is https://slack.com/api/)."""
        return f"http://127.0.0.1:{self.port}/api/"

    def response_url(self) -> str:
        """A fresh response_url, as Slack puts one in each interaction payload."""
        return f"http://127.0.0.1:{self.port}/response/{self._next_id('R')}"

    # --- scripting ---------------------------------------------------------------------------------------
    def fail(self, method: str, *faults: Fault) -> None:
        """Answer the next calls of `method` ("chat.postMessage", "upload", "response_url", ...) with these faults."""
        with self._lock:
            self._faults[method].extend(faults)

    # --- reading -----------------------------------------------------------------------------------------
    def history(self, channel: str = DEFAULT_CHANNEL) -> list[Message]:
        """The channel's parent messages (not the replies), oldest first, as they read now."""
        with self._lock:
            return [m for m in self._messages[channel] if m.thread_ts is None]

    def replies(self, channel: str, ts: str) -> list[Message]:
        """The replies in the thread of the parent `ts`, oldest first."""
        with self._lock:
            return [m for m in self._messages[channel] if m.thread_ts == ts]

    def message(self, channel: str, ts: str) -> Message | None:
        with self._lock:
            return next((m for m in self._messages[channel] if m.ts == ts), None)

    def called(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def posted_to(self, response_url: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.responses[response_url.rsplit("/", 1)[-1]])

    # --- the server --------------------------------------------------------------------------------------
    def _next_id(self, prefix: str) -> str:
        return f"{prefix}0{next(self._counter):08d}"

    def _next_ts(self) -> str:
        n = next(self._counter)
        return f"{_FIRST_TS + n}.{n:06d}"

    def _handle(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, str], bytes]:
        if path.startswith("/upload/"):
            return self._serve("upload", {}, lambda: self._upload(path.removeprefix("/upload/"), raw), text=True)
        if path.startswith("/response/"):
            url_id = path.removeprefix("/response/")
            params = _json_or_form(headers, raw)
            return self._serve("response_url", params, lambda: self._respond(url_id, params), text=True)
        if not path.startswith("/api/"):
            return 404, {"Content-Type": "text/plain"}, b"not found"
        method = path.removeprefix("/api/").split("?", 1)[0]
        params = _json_or_form(headers, raw)
        token = params.pop("token", None)

        def call() -> dict[str, Any]:
            auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
            given = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else token
            if not given:
                raise _ApiError("not_authed")
            if given != self.token:
                raise _ApiError("invalid_auth")
            handler = self._methods().get(method)
            if handler is None:
                raise _ApiError("unknown_method")
            return handler(params)

        return self._serve(method, params, call)

    def _serve(
        self, method: str, params: dict[str, Any], act: Callable[[], Any], *, text: bool = False
    ) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            queue = self._faults.get(method)
            fault = queue.popleft() if queue else None
        if fault is not None:
            if fault.delay:
                time.sleep(fault.delay)
            return self._answer(method, params, _ApiError(fault.error, fault.status, fault.retry_after))
        try:
            result = act()
        except _ApiError as exc:
            return self._answer(method, params, exc)
        self._record(method, params, 200, None)
        if text:
            return 200, {"Content-Type": "text/plain"}, str(result).encode()
        return 200, {"Content-Type": "application/json"}, json.dumps({"ok": True, **result}).encode()

    def _answer(self, method: str, params: dict[str, Any], exc: _ApiError) -> tuple[int, dict[str, str], bytes]:
        self._record(method, params, exc.status, exc.error)
        headers = {"Content-Type": "application/json"}
        if exc.retry_after is not None:
            headers["Retry-After"] = str(exc.retry_after)
        return exc.status, headers, json.dumps({"ok": False, "error": exc.error}).encode()

    def _record(self, method: str, params: dict[str, Any], status: int, error: str | None) -> None:
        with self._lock:
            self.calls.append(Call(method, params, time.monotonic(), status, error))

    def _methods(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        return {
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "files.getUploadURLExternal": self._get_upload_url,
            "files.completeUploadExternal": self._complete_upload,
            "auth.test": self._auth_test,
        }

    def _changed(self, kind: str, message: Message) -> None:
        if self._on_change is not None:
            self._on_change(kind, message)

    # --- the methods ---------------------------------------------------------------------------------
    def _post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel") or "")
        text, blocks = str(params.get("text") or ""), _blocks(params.get("blocks"))
        if not text and not blocks:
            raise _ApiError("no_text")
        with self._lock:
            if channel not in self.channels:
                raise _ApiError("channel_not_found")
            thread_ts = self._parent(channel, params.get("thread_ts"))
            message = Message(channel, self._next_ts(), text, blocks, thread_ts)
            self._messages[channel].append(message)
        self._changed("reply" if thread_ts else "post", message)
        return {"channel": channel, "ts": message.ts, "message": message.as_api()}

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(params.get("channel") or ""), str(params.get("ts") or "")
        text, blocks = params.get("text"), params.get("blocks")
        if not text and not blocks:
            raise _ApiError("no_text")
        with self._lock:
            if channel not in self.channels:
                raise _ApiError("channel_not_found")
            message = next((m for m in self._messages[channel] if m.ts == ts), None)
            if message is None:
                raise _ApiError("message_not_found")
            message.edits.append({"text": message.text, "blocks": message.blocks})
            message.text = str(text or "")
            if blocks is not None:  # without blocks, Slack keeps the message's blocks
                message.blocks = _blocks(blocks)
        self._changed("update", message)
        return {"channel": channel, "ts": ts, "text": message.text, "message": message.as_api()}

    def _get_upload_url(self, params: dict[str, Any]) -> dict[str, Any]:
        filename = str(params.get("filename") or "")
        try:
            length = int(params.get("length") or 0)
        except ValueError:
            raise _ApiError("invalid_arguments") from None
        if not filename or length <= 0:
            raise _ApiError("missing_argument")
        file_id = self._next_id("F")
        alt = params.get("alt_txt")
        with self._lock:
            self._files[file_id] = UploadedFile(file_id, filename, filename, length, None, str(alt) if alt else None)
        return {"upload_url": f"http://127.0.0.1:{self.port}/upload/{file_id}", "file_id": file_id}

    def _upload(self, file_id: str, raw: bytes) -> str:
        with self._lock:
            ticket = self._files.get(file_id)
        if ticket is None:
            raise _ApiError("file_not_found", status=404)
        path = self.files_dir / f"{file_id}-{Path(ticket.name).name}"
        path.write_bytes(raw)
        with self._lock:
            self._files[file_id] = UploadedFile(ticket.id, ticket.name, ticket.title, len(raw), path, ticket.alt_txt)
        return f"OK - {len(raw)}"

    def _complete_upload(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            wanted = json.loads(params.get("files") or "[]")
        except json.JSONDecodeError:
            raise _ApiError("invalid_arguments") from None
        if not isinstance(wanted, list) or not wanted:
            raise _ApiError("invalid_arguments")
        channel = params.get("channel_id")
        with self._lock:
            shared: list[UploadedFile] = []
            for entry in wanted:
                ticket = self._files.get(str(entry.get("id")))
                if ticket is None or ticket.path is None:
                    raise _ApiError("file_not_found")
                title = str(entry.get("title") or ticket.title)
                shared.append(UploadedFile(ticket.id, ticket.name, title, ticket.length, ticket.path, ticket.alt_txt))
            message = None
            if channel:
                if channel not in self.channels:
                    raise _ApiError("invalid_channel")
                thread_ts = self._parent(channel, params.get("thread_ts"))
                text = str(params.get("initial_comment") or "")
                message = Message(str(channel), self._next_ts(), text, [], thread_ts, shared)
                self._messages[str(channel)].append(message)
            for f in shared:
                self._files[f.id] = f
        if message is not None:
            self._changed("file", message)
        return {"files": [{"id": f.id, "title": f.title, "name": f.name, "size": f.length} for f in shared]}

    def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": f"http://127.0.0.1:{self.port}/",
            "team": "Emulated workspace",
            "user": "training-guard",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
        }

    def _respond(self, url_id: str, params: dict[str, Any]) -> str:
        with self._lock:
            self.responses[url_id].append(params)
        return "ok"

    def _parent(self, channel: str, thread_ts: Any) -> str | None:
        """The parent of a reply; refuses a ts that is no parent message of the channel (lock held)."""
        if not thread_ts:
            return None
        parent = next((m for m in self._messages[channel] if m.ts == thread_ts), None)
        if parent is None or parent.thread_ts is not None:
            raise _ApiError("thread_not_found")
        return str(thread_ts)


def _json_or_form(headers: dict[str, str], raw: bytes) -> dict[str, Any]:
    """The request's arguments: slack_sdk sends chat.* as JSON and the files.* methods as a form."""
    content_type = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
    text = raw.decode("utf-8", "replace")
    if content_type.startswith("application/json"):
        try:
            parsed = json.loads(text or "{}")
        except json.JSONDecodeError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {key: values[-1] for key, values in parse_qs(text, keep_blank_values=True).items()}


def _blocks(value: Any) -> list[dict[str, Any]]:
    """Blocks arrive as a list (JSON body) or as a JSON string (a form)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise _ApiError("invalid_blocks") from None
    if value is None:
        return []
    if not isinstance(value, list):
        raise _ApiError("invalid_blocks")
    return [dict(b) for b in value]
