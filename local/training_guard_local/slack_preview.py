"""Slack messages as an HTML page that looks like Slack (the Block Kit subset the guard uses)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from typing import Any

_STYLE = """
body { font-family: Lato, 'Helvetica Neue', Arial, 'Noto Color Emoji', sans-serif; background: #f8f8f8;
       margin: 0; padding: 24px; color: #1d1c1d; }
.msg { background: #fff; border: 1px solid #ddd; border-radius: 8px; padding: 14px 18px; margin: 0 0 18px;
       max-width: 760px; display: flex; gap: 12px; }
.avatar { width: 36px; height: 36px; border-radius: 6px; background: #4a154b; color: #fff; font-weight: 700;
          display: flex; align-items: center; justify-content: center; flex: none; }
.who { font-weight: 900; } .app { background: #e8e8e8; color: #616061; font-size: 10px; padding: 1px 4px;
       border-radius: 2px; margin-left: 4px; } .when { color: #616061; font-size: 12px; margin-left: 6px; }
h3 { font-size: 18px; margin: 6px 0 8px; }
.section { margin: 6px 0; line-height: 1.45; font-size: 15px; white-space: pre-wrap; }
.fields { display: grid; grid-template-columns: 1fr 1fr; gap: 6px 24px; margin: 8px 0; font-size: 15px; }
.fields div { white-space: pre-wrap; }
code { background: #f6f6f6; border: 1px solid #e1e1e1; border-radius: 3px; padding: 0 3px; color: #c01343;
       font-size: 13px; }
blockquote { border-left: 4px solid #ddd; margin: 4px 0; padding-left: 10px; color: #454245; }
.actions { margin: 10px 0 4px; display: flex; gap: 8px; flex-wrap: wrap; }
.actions a { border: 1px solid #bbb; border-radius: 4px; padding: 4px 12px; font-weight: 700; font-size: 13px;
             color: #1d1c1d; text-decoration: none; }
hr { border: none; border-top: 1px solid #eee; margin: 10px 0 6px; }
.context { color: #616061; font-size: 12px; }
"""


def mrkdwn_to_html(text: str) -> str:
    """Slack mrkdwn (already Slack-escaped) to HTML: *bold*, _italic_, `code`, > quote, <url|label>."""
    lines = []
    for line in text.split("\n"):
        quote = line.startswith(">")
        body = line[1:] if quote else line
        body = re.sub(r"`([^`]+)`", r"<code>\1</code>", body)
        body = re.sub(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])", r"<b>\1</b>", body)
        body = re.sub(r"(?<![\w_])_([^_\n]+)_(?![\w_])", r"<i>\1</i>", body)
        lines.append(f"<blockquote>{body}</blockquote>" if quote else body)
    return "\n".join(lines)  # Slack's &lt; &gt; &amp; are already HTML entities


def message_html(body: dict[str, Any], *, channel: str = "", when: str = "") -> str:
    parts: list[str] = []
    for block in body.get("blocks") or []:
        kind = block.get("type")
        if kind == "header":
            parts.append(f"<h3>{html.escape(block['text']['text'])}</h3>")
        elif kind == "section":
            if block.get("text"):
                parts.append(f"<div class='section'>{mrkdwn_to_html(block['text']['text'])}</div>")
            if block.get("fields"):
                cells = "".join(f"<div>{mrkdwn_to_html(f['text'])}</div>" for f in block["fields"])
                parts.append(f"<div class='fields'>{cells}</div>")
        elif kind == "actions":
            buttons = "".join(
                f"<a href='{html.escape(e.get('url', '#'))}'>{html.escape(e['text']['text'])}</a>"
                for e in block.get("elements", [])
            )
            parts.append(f"<div class='actions'>{buttons}</div>")
        elif kind == "divider":
            parts.append("<hr>")
        elif kind == "context":
            text = " ".join(mrkdwn_to_html(e.get("text", "")) for e in block.get("elements", []))
            parts.append(f"<div class='context'>{text}</div>")
    where = f"<span class='when'>#{html.escape(channel)} {html.escape(when)}</span>" if channel or when else ""
    return (
        "<div class='msg'><div class='avatar'>TG</div><div>"
        f"<span class='who'>Training Guard</span><span class='app'>APP</span>{where}"
        f"{''.join(parts)}</div></div>"
    )


def page(messages: Iterable[tuple[str, dict[str, Any]]]) -> str:
    body = "\n".join(message_html(message, channel=channel) for channel, message in messages)
    return f"<!doctype html><html><head><meta charset='utf-8'><style>{_STYLE}</style></head><body>{body}</body></html>"
