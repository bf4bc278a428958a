"""Slack messages as an HTML page that looks like Slack (the Block Kit subset the guard uses).

`page` shows messages one under the other (webhook mode). `thread_page` shows Slack app mode's threads as the local
Slack Web API (slack_web_api.py) recorded them: each job's parent card as it reads now (marked edited when
chat.update changed it), its buttons, then the replies indented under it as Slack shows a thread, with the images
uploaded into the thread inline (embedded in the page, so the page reads no file).
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from training_guard_local.slack_web_api import Message

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
.actions a.danger { color: #e01e5a; border-color: #e01e5a; } .actions a.primary { background: #007a5a; color: #fff; }
.thread { max-width: 800px; margin: 0 0 28px; }
.thread > .msg { margin-bottom: 6px; }
.replies { margin-left: 48px; border-left: 2px solid #ddd; padding-left: 14px; }
.replies .msg { max-width: 700px; margin-bottom: 8px; }
.count { color: #1264a3; font-size: 13px; font-weight: 700; margin: 0 0 8px 48px; }
.mention { background: #e8f5fa; color: #1264a3; border-radius: 3px; padding: 0 2px; }
.edited { color: #616061; font-size: 12px; margin-left: 4px; }
.file { margin: 6px 0; } .file img { max-width: 520px; border: 1px solid #ddd; border-radius: 6px; display: block; }
.file .caption { color: #616061; font-size: 12px; margin-top: 3px; }
hr { border: none; border-top: 1px solid #eee; margin: 10px 0 6px; }
.context { color: #616061; font-size: 12px; }
"""


# Slack's control sequences: <@U…> a mention, <#C…|name> a channel, <!here>, <url|label> a link. Text is escaped
# (& < > as &amp; &lt; &gt;), so a raw < starts one of these and an escaped &lt;@U…&gt; is literal text, as in Slack.
_CONTROL = re.compile(r"<([^<>\n]+)>")


def mrkdwn_to_html(text: str) -> str:
    """Slack mrkdwn (already Slack-escaped) to HTML: *bold*, _italic_, `code`, > quote, mentions and links."""
    controls: list[str] = []

    def hold(match: re.Match[str]) -> str:
        controls.append(_control_html(match.group(1)))
        return f"\x00{len(controls) - 1}\x00"  # kept out of the *bold* and _italic_ passes (URLs hold _)

    lines = []
    for line in text.split("\n"):
        quote = line.startswith(">")
        body = line[1:] if quote else line
        body = _CONTROL.sub(hold, body).replace("<", "&lt;").replace(">", "&gt;")
        body = re.sub(r"`([^`]+)`", r"<code>\1</code>", body)
        body = re.sub(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])", r"<b>\1</b>", body)
        body = re.sub(r"(?<![\w_])_([^_\n]+)_(?![\w_])", r"<i>\1</i>", body)
        lines.append(f"<blockquote>{body}</blockquote>" if quote else body)
    shown = "\n".join(lines)
    return re.sub(r"\x00(\d+)\x00", lambda m: controls[int(m.group(1))], shown)  # &lt; &gt; &amp;: HTML already


def _control_html(inner: str) -> str:
    target, _, label = inner.partition("|")
    if target[:1] and target[0] in "@#!":  # a user, a channel, a special mention (<!here>)
        shown = label or target[1:].split("^")[0]
        return f"<span class='mention'>{'#' if target[0] == '#' else '@'}{shown}</span>"
    if not target.startswith(("https://", "http://", "mailto:")):
        return f"&lt;{inner}&gt;"  # not a link Slack would make: shown as written
    return f"<a href='{target.replace(chr(39), '%27')}'>{label or target}</a>"


def message_html(
    body: dict[str, Any], *, channel: str = "", when: str = "", edited: bool = False, extra: str = ""
) -> str:
    """One message; `edited`: Slack's "(edited)" mark; `extra`: HTML after its blocks (a shared file)."""
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
                f"<a class='{html.escape(e.get('style', ''))}' href='{html.escape(e.get('url', '#'))}'>"
                f"{html.escape(e['text']['text'])}</a>"
                for e in block.get("elements", [])
            )
            parts.append(f"<div class='actions'>{buttons}</div>")
        elif kind == "divider":
            parts.append("<hr>")
        elif kind == "context":
            text = " ".join(mrkdwn_to_html(e.get("text", "")) for e in block.get("elements", []))
            parts.append(f"<div class='context'>{text}</div>")
    if not parts and body.get("text"):
        parts.append(f"<div class='section'>{mrkdwn_to_html(str(body['text']))}</div>")  # mrkdwn, escaped too
    where = f"<span class='when'>#{html.escape(channel)} {html.escape(when)}</span>" if channel or when else ""
    mark = "<span class='edited'>(edited)</span>" if edited else ""
    return (
        "<div class='msg'><div class='avatar'>TG</div><div>"
        f"<span class='who'>Training Guard</span><span class='app'>APP</span>{where}{mark}"
        f"{''.join(parts)}{extra}</div></div>"
    )


def page(messages: Iterable[tuple[str, dict[str, Any]]]) -> str:
    body = "\n".join(message_html(message, channel=channel) for channel, message in messages)
    return f"<!doctype html><html><head><meta charset='utf-8'><style>{_STYLE}</style></head><body>{body}</body></html>"


def _files_html(message: Message, caption: str) -> str:
    out = []
    for shared in message.files:
        if shared.path is None:
            continue
        data = base64.b64encode(shared.path.read_bytes()).decode()
        alt = html.escape(shared.alt_txt or shared.title)
        note = f" · {html.escape(caption)}" if caption else ""
        out.append(
            f"<div class='file'><img alt='{alt}' src='data:image/png;base64,{data}'>"
            f"<div class='caption'>{html.escape(shared.title)} ({shared.name}){note}</div></div>"
        )
    return "".join(out)


def thread_html(parent: Message, replies: Sequence[Message], *, channel: str = "", image_caption: str = "") -> str:
    """One thread: the parent as it reads now, the reply count, the replies indented, their images inline.
    `image_caption`: said under each image (e.g. that it is a stand-in)."""
    body = {"text": parent.text, "blocks": parent.blocks}
    head = message_html(body, channel=channel, edited=bool(parent.edits), extra=_files_html(parent, image_caption))
    count = f"<div class='count'>{len(replies)} repl{'y' if len(replies) == 1 else 'ies'}</div>" if replies else ""
    shown = "".join(
        message_html({"text": m.text, "blocks": m.blocks}, edited=bool(m.edits), extra=_files_html(m, image_caption))
        for m in replies
    )
    return f"<div class='thread'>{head}{count}<div class='replies'>{shown}</div></div>"


def thread_page(threads: Iterable[tuple[str, Message, Sequence[Message]]], *, image_caption: str = "") -> str:
    """Threads (channel name, parent, replies) as one page."""
    body = "\n".join(
        thread_html(parent, replies, channel=channel, image_caption=image_caption)
        for channel, parent, replies in threads
    )
    return f"<!doctype html><html><head><meta charset='utf-8'><style>{_STYLE}</style></head><body>{body}</body></html>"
