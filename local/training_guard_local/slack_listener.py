"""A Slack-compatible incoming-webhook receiver on 127.0.0.1, for tests and the local demo.

It answers like Slack (`200 ok`, or what a test scripts: 429 with Retry-After, 500, 404, a slow
answer), records every request exactly as received, and can print each message the way Slack
would show it, as plain text in a terminal.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: str = "ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (to provoke client timeouts)


@dataclass(frozen=True)
class Received:
    path: str
    body: dict[str, Any]
    at: float
    status: int


class SlackListener:
    """`with SlackListener() as slack:`; `slack.url("team")` is a webhook URL for channel "team"."""

    def __init__(self, *, on_message: Callable[[str, dict[str, Any]], None] | None = None) -> None:
        self.requests: list[Received] = []
        self._script: dict[str, deque[Reply]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._on_message = on_message
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                reply = listener._next_reply(self.path)
                with listener._lock:  # recorded on arrival, before any scripted delay
                    listener.requests.append(Received(self.path, body, time.monotonic(), reply.status))
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status == 200 and listener._on_message:
                    # before answering: the sender waits, so what is shown keeps the order of events
                    listener._on_message(self.path.strip("/").split("/")[-1], body)
                try:
                    self.send_response(reply.status)
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    payload = reply.body.encode()
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client gave up (a timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the URL path is the stand-in for a secret

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            # a short poll: shutdown() waits for it (0.5 s by default), and every test starts and stops a listener
            target=lambda: self._server.serve_forever(poll_interval=0.05),
            name="slack-listener",
            daemon=True,
        )

    # --- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> SlackListener:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, channel: str) -> str:
        # Shaped like a real webhook path, so a leak of it in logs would be recognisable in tests.
        return f"http://127.0.0.1:{self.port}/services/T0EMULATED/B0{channel.upper()}/{channel}-secret-token"

    # --- scripting and reading ---------------------------------------------------------------------
    def script(self, channel: str, *replies: Reply) -> None:
        """Answer the next requests to `channel` with these replies, then `200 ok` again."""
        self._script[self._path(channel)].extend(replies)

    def _path(self, channel: str) -> str:
        return self.url(channel).split(str(self.port), 1)[1]

    def _next_reply(self, path: str) -> Reply:
        with self._lock:
            queue = self._script.get(path)
            return queue.popleft() if queue else Reply()

    def received(self, channel: str | None = None, *, delivered_only: bool = True) -> list[Received]:
        with self._lock:
            return [
                r
                for r in self.requests
                if (channel is None or r.path == self._path(channel)) and (r.status == 200 or not delivered_only)
            ]


def render_text(body: dict[str, Any]) -> str:
    """A Slack message as a person would read it, for a terminal."""
    lines: list[str] = []
    for block in body.get("blocks") or []:
        kind = block.get("type")
        if kind == "header":
            title = block["text"]["text"]
            lines += [title, "─" * min(len(title) + 2, 100)]
        elif kind == "section":
            if block.get("text"):
                lines.append(_unescape(block["text"]["text"]))
            fields = [_unescape(f["text"]).replace("\n", ": ", 1) for f in block.get("fields") or []]
            lines += [" · ".join(fields[i : i + 3]) for i in range(0, len(fields), 3)]
        elif kind == "actions":
            lines.append("  ".join(f"[{e['text']['text']}]" for e in block.get("elements", [])))
        elif kind == "context":
            lines.append(" ".join(_unescape(e.get("text", "")) for e in block.get("elements", [])))
    return "\n".join(lines) if lines else _unescape(str(body.get("text", "")))


def _unescape(text: str) -> str:
    """Slack mrkdwn as plain terminal text: no *bold* or `code` markers, entities decoded."""
    text = re.sub(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])", r"\1", text)
    text = re.sub(r"`([^`\n]+)`", r"\1", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
