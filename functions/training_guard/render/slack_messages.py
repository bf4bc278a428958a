"""One notification document rendered as a Slack message (Block Kit as plain JSON, as Slack documents it). Pure.

Text from jobs, tags, rules or SageMaker is escaped for mrkdwn, then cut to Block Kit's limits, never mid-entity."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from training_guard import contract
from training_guard.domain.events import parse_time
from training_guard.domain.pricing import spend_line
from training_guard.domain.text import clock, format_duration, person, status_text

HEADER_MAX = 150
SECTION_MAX = 3000
FIELD_MAX = 2000
FALLBACK_MAX = 3000
BUTTON_TEXT_MAX = 75
# Block Kit's limits (docs/limits.md), checked before a message leaves as slack_sdk's classes checked them.
_TEXT_MAX = {"header": HEADER_MAX, "section": SECTION_MAX}
_ITEMS_MAX = {"fields": 10, "context": 10, "actions": 25}
_BUTTON_MAX = {"text": BUTTON_TEXT_MAX, "url": 3000, "value": 2000, "action_id": 255}

SEVERITY_MARKERS = {"critical": "🔴", "warning": "🟠", "info": "🔵"}
_DID = {
    "stopped": "Stopped the job.",
    "would_stop": "Did not stop the job (see why).",
    "deferred": "Will stop the job after its grace period.",
    "notified": "Notified only.",
    "already_ended": "Did not stop: the job had already ended (SageMaker refused the stop).",
    "already_stopping": "Did not stop again: another rule's stop is under way.",
}


# messages.Notice.TEST, spelled here too: the notifier does not import messages (and the policy behind it).
TEST_KIND = "test"
BUDGET_SOURCE = "budget"  # policy.BUDGET: a budget's finding is shown as its budget, not as a rule
DIGEST_KIND = contract.DIGEST_KIND
_DID_KIND = {TEST_KIND: "Nothing: this is a test of the notification path."}


def is_test(doc: Mapping[str, Any]) -> bool:
    return doc.get("kind") == TEST_KIND


class NotADocument(ValueError):
    """The payload is not a Training Guard notification this renderer understands."""


def escape(text: str) -> str:
    """Slack mrkdwn escaping: the only three characters Slack asks to escape."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fit(text: str, limit: int) -> str:
    """`escape(text)` cut to at most `limit` characters, never inside an entity, with an ellipsis."""
    escaped = escape(text)
    if len(escaped) <= limit:
        return escaped
    # The longest prefix whose escaped form leaves room for the ellipsis (escaping only grows text).
    low, high = 0, min(len(text), limit - 1)
    while low < high:
        middle = (low + high + 1) // 2
        if len(escape(text[:middle])) <= limit - 1:
            low = middle
        else:
            high = middle - 1
    return escape(text[:low]) + "…"


def _plain(text: str, limit: int) -> str:
    """Plain text cut to a limit, with angle brackets made inert (no `<!channel>` anywhere)."""
    text = text.replace("<", "\u2039").replace(">", "\u203a")
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- Block Kit as dicts, keys in the order slack_sdk's classes wrote them (sorted): the JSON Slack receives is the same
Block = dict[str, Any]


def _plain_text(text: str) -> Block:
    return {"emoji": True, "text": text, "type": "plain_text"}


def _mrkdwn(text: str) -> Block:
    return {"text": text, "type": "mrkdwn"}


def _header(text: str) -> Block:
    return {"text": _plain_text(text), "type": "header"}


def _section(text: str) -> Block:
    return {"text": _mrkdwn(text), "type": "section"}


def _fields(texts: list[str]) -> Block:
    return {"fields": [_mrkdwn(t) for t in texts], "type": "section"}


def _context(texts: list[str]) -> Block:
    return {"elements": [_mrkdwn(t) for t in texts], "type": "context"}


def _actions(elements: list[dict[str, Any]]) -> Block:
    return {"elements": [_sorted(e) for e in elements], "type": "actions"}


def _divider() -> Block:
    return {"type": "divider"}


def _sorted(element: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _sorted(v) if isinstance(v, Mapping) else v for k, v in sorted(element.items())}


def _checked(blocks: list[Block]) -> list[Block]:
    for block in blocks:
        kind = block["type"]
        text: str = block["text"]["text"] if "text" in block else ""
        if len(text) > _TEXT_MAX.get(kind, len(text)):
            raise ValueError(f"Slack {kind} block: {len(text)} characters, Block Kit takes at most {_TEXT_MAX[kind]}")
        items: list[dict[str, Any]] = block.get("fields") or block.get("elements") or []
        most = _ITEMS_MAX.get("fields" if "fields" in block else kind, len(items))
        if len(items) > most:
            raise ValueError(f"Slack {kind} block: {len(items)} items, Block Kit takes at most {most}")
        for element in items if kind == "actions" else []:
            for key, longest in _BUTTON_MAX.items():
                value = element.get(key, "")
                length = len(value["text"] if isinstance(value, Mapping) else str(value))
                if length > longest:
                    raise ValueError(f"Slack button {key}: {length} characters, Block Kit takes at most {longest}")
    return blocks


def check_document(doc: Any) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping) or doc.get("schema") != contract.NOTIFICATION_SCHEMA:
        schema = doc.get("schema") if isinstance(doc, Mapping) else type(doc).__name__
        raise NotADocument(f"expected schema {contract.NOTIFICATION_SCHEMA}, got {schema!r}")
    for key in ("kind", "outcome", "severity", "title", "reason", "job"):
        if key not in doc:
            raise NotADocument(f"notification document has no {key!r}")
    if not isinstance(doc["job"], Mapping) or not isinstance(doc["job"].get("name"), str):
        raise NotADocument("notification document has no job name")
    return doc


def render(
    doc: Mapping[str, Any], *, extra_links: Mapping[str, str] | None = None, actions: list[dict[str, Any]] | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """(fallback text, blocks) of a document; `extra_links` beside its own (the graph), `actions` its buttons."""
    doc = check_document(doc)
    if doc["kind"] == DIGEST_KIND:
        return render_digest(doc)
    job = doc["job"]
    rule = doc.get("rule") or None
    marker = SEVERITY_MARKERS.get(str(doc["severity"]), "🔵")
    title = f"{marker} {doc['title']}"
    blocks: list[Block] = [_header(_plain(title, HEADER_MAX))]

    did = _DID_KIND.get(str(doc["kind"])) or _DID.get(str(doc["outcome"]), "")
    why = f"*What the guard did:* {did}\n*Why:* {_mentioning(doc, str(doc['reason']))}"
    blocks.append(_section(_cut_markdown(why, SECTION_MAX)))
    blocks.append(_fields(_facts(doc)))

    who = _presser(doc)
    if who:
        blocks.append(_section(f"{who} pressed *Stop now*"))
    elif rule:
        name, kind, status = (escape(str(rule.get(k))) for k in ("name", "kind", "status"))
        label = "Budget" if rule.get("kind") == BUDGET_SOURCE else "Rule"
        head = f"*{label}* `{name}` ({kind}) → *{status}*"
        details = rule.get("details")
        text = head if not details else f"{head}\n>{fit(str(details), SECTION_MAX - len(head) - 2)}"
        blocks.append(_section(text))
    if job.get("failure_reason") and job["failure_reason"] != doc["reason"]:
        head = "*Failure reason*\n"
        blocks.append(_section(head + fit(str(job["failure_reason"]), SECTION_MAX - len(head))))

    if actions:
        blocks.append(_actions(actions))
    links = {**(doc.get("links") or {}), **(extra_links or {})}
    if links:
        blocks.append(_link_buttons(links))
    context = [f"Training Guard · {escape(str(doc['kind']))} · event `{escape(str(doc.get('event_id') or '-'))}`"]
    if doc.get("dry_run"):
        context.append("*Dry run*: the guard stops nothing.")
    blocks.append(_divider())
    blocks.append(_context([_cut_markdown(c, FIELD_MAX) for c in context]))

    fallback = fit(f"{title}: {doc['reason']}", FALLBACK_MAX)
    return fallback, _checked(blocks)


# text.person's words for a Slack user, and the kinds whose reason the guard writes about a stop (policy.stop_cause).
_SLACK_USER = re.compile(r"\bSlack user ([A-Z0-9]+)\b")
_GUARD_WORDED_KINDS = frozenset({"job_stopped", "stop_requested"})


def _presser(doc: Mapping[str, Any]) -> str | None:
    """The person who pressed Stop now, as a mention Slack shows as them (`<@U123>`); None for a rule's finding."""
    rule = doc.get("rule") or {}
    return person(rule.get("name"), slack=True) if isinstance(rule, Mapping) else None


def _mentioning(doc: Mapping[str, Any], text: str) -> str:
    """`text` escaped, with the Stop now's presser (`slack:<user id>`, or "Slack user U123" in the guard's own words
    about a stop) as a mention: a person, not an id. Only the guard's words: a job's FailureReason mentions no one."""
    who = _presser(doc)
    escaped = escape(text)
    if who:
        escaped = escaped.replace(escape(str(doc["rule"]["name"])), who)
    if doc.get("kind") in _GUARD_WORDED_KINDS:
        escaped = _SLACK_USER.sub(r"<@\1>", escaped)
    return escaped


def _link_buttons(links: Mapping[str, str]) -> Block:
    return _actions([_link_button(i, label, str(url)) for i, (label, url) in enumerate(links.items())])


def _link_button(index: int, label: str, url: str) -> Block:
    text = _plain_text(_plain(f"Open {label}", BUTTON_TEXT_MAX))
    return {"action_id": f"open-{index}", "text": text, "type": "button", "url": url}


_CARD_STATES = {
    "job_failed": "🔴 Failed",
    "job_completed": "✅ Completed",
    "job_stopped": "⏹️ Stopped",
    "spot_interrupted": "🟠 Interrupted (spot), restarting",
}


def card_state(doc: Mapping[str, Any]) -> str:
    outcome, kind = str(doc["outcome"]), str(doc["kind"])
    rule = (doc.get("rule") or {}).get("name")
    if outcome == "stopped":
        who = person(rule, slack=False)  # the card's header is plain text: no mention there
        return f"🔴 Stopped: {who} pressed Stop now" if who else f"🔴 Stopped by Training Guard: {rule or 'the guard'}"
    state = _CARD_STATES.get(kind)
    if state is None:
        marker = SEVERITY_MARKERS.get(str(doc["severity"]), "🔵")
        return f"{marker} {doc['title']}"
    # A card-only document is the end of a job the guard stopped: its Why line says who asked for the stop and when.
    trained = doc["job"].get("training_seconds")
    if kind == "job_stopped" and isinstance(trained, int | float):
        # The job's end, not the stop's request: said as such, so the two times on the card never read as one.
        return f"{state}, ended {clock(parse_time(doc.get('time')))} after {format_duration(trained)} of training"
    return state


def is_card_only(doc: Mapping[str, Any]) -> bool:
    return doc.get(contract.CARD_ONLY) is True


def render_card(
    doc: Mapping[str, Any], *, actions: list[dict[str, Any]] | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """The job's card, the thread's parent: its state, what the guard did last and why, facts, links and `actions`."""
    doc = check_document(doc)
    job = doc["job"]
    state = card_state(doc)
    head = f"{state} · {job['name']}"
    # A card-only document follows the guard's stop of the job (it was folded into it): that stop is what it did.
    did = _DID["stopped"] if is_card_only(doc) else _DID.get(str(doc["outcome"]), "")
    who = _presser(doc)
    title = f"{who} pressed Stop now" if who else escape(str(doc["title"]))
    latest = f"*Latest:* {title}\n*What the guard did:* {did}\n*Why:* {_mentioning(doc, str(doc['reason']))}"
    blocks: list[Block] = [
        _header(_plain(head, HEADER_MAX)),
        _section(_cut_markdown(latest, SECTION_MAX)),
        _fields(_facts(doc)),
    ]
    if actions:
        blocks.append(_actions(actions))
    links = doc.get("links") or {}
    if links:
        blocks.append(_link_buttons(links))
    updated = clock(parse_time(doc.get("time")))
    context = f"Training Guard · updated {escape(updated)} · every notification about this job is in the thread"
    blocks.append(_context([_cut_markdown(context, FIELD_MAX)]))
    return fit(f"{head}: {doc['title']}", FALLBACK_MAX), _checked(blocks)


def card_version(doc: Mapping[str, Any]) -> int:
    """The card's version: the notification's time in milliseconds (a later notification shows a newer state)."""
    at = parse_time(doc.get("time"))
    return int(at.timestamp() * 1000) if at is not None else 0


def render_digest(doc: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The weekly digest: its totals as fields, the top rules and job prefixes as lists, in the words of digest.py
    (the e-mail and Q Developer say the same). Rule, guard and job names come from the records: escaped."""
    from training_guard.render import digest  # imported here: the weekly digest alone renders one (as messages.py does)

    week = doc.get("digest")
    if not isinstance(week, Mapping):
        raise NotADocument("digest notification document has no 'digest' object")
    title = f"📊 {doc['title']}"
    blocks: list[Block] = [
        _header(_plain(title, HEADER_MAX)),
        _section(f"*{escape(digest.window_text(week))}*"),
        # A section holds at most 10 fields (docs/limits.md); the digest has at most five.
        _fields([_cut_markdown(f"*{label}*\n{escape(text)}", FIELD_MAX) for label, text in digest.facts(week)]),
    ]
    for heading, rows in digest.groups(week):
        text = f"*{heading}*\n" + "\n".join(f"• {escape(row)}" for row in rows)
        blocks.append(_section(_cut_markdown(text, SECTION_MAX)))
    warnings = [str(w) for w in week.get("warnings") or ()]
    if warnings:
        text = "\n".join(f"⚠️ {escape(w)}" for w in warnings)
        blocks.append(_section(_cut_markdown(text, SECTION_MAX)))
    context = [
        f"Training Guard · {DIGEST_KIND} · account {escape(str(doc.get('account') or '-'))} · "
        f"region {escape(str(doc.get('region') or '-'))}",
        "Spend at list price, up to each job's maximum runtime; `training-guard report --since 7d` lists every rule "
        "and prefix.",
    ]
    if doc.get("dry_run"):
        context.append("*Dry run*: the guard stops nothing.")
    blocks.append(_divider())
    blocks.append(_context([_cut_markdown(c, FIELD_MAX) for c in context]))
    fallback = fit(f"{title}: {doc['reason']}", FALLBACK_MAX)
    return fallback, _checked(blocks)


def _facts(doc: Mapping[str, Any]) -> list[str]:
    job = doc["job"]
    status = escape(status_text(job.get("status"), job.get("secondary_status"), doc.get("outcome")))
    facts = [
        f"*Job*\n`{fit(str(job['name']), 200)}`",
        f"*Status*\n{status}",
        f"*Account*\n{escape(str(doc.get('account') or '-'))}",
        f"*Region*\n{escape(str(doc.get('region') or '-'))}",
    ]
    if job.get("instance_type"):
        facts.append(f"*Instances*\n{job.get('instance_count') or 1} \u00d7 {escape(str(job['instance_type']))}")
    if isinstance(job.get("training_seconds"), int | float):
        facts.append(f"*Trained*\n{format_duration(job['training_seconds'])}")
    spent = spend_line(doc.get("spend"), str(doc.get("outcome")), str(doc.get("kind")))
    if spent:
        facts.append(f"*Spend*\n{escape(spent)}")
    return [_cut_markdown(f, FIELD_MAX) for f in facts]


def _cut_markdown(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"


def is_alarm_notification(payload: Any) -> bool:
    return isinstance(payload, Mapping) and isinstance(payload.get("AlarmName"), str) and "NewStateValue" in payload


def alarm_key(payload: Mapping[str, Any]) -> str:
    """One message per alarm transition, however often SNS or SQS deliver it."""
    return f"alarm#{payload['AlarmName']}#{payload.get('NewStateValue')}#{payload.get('StateChangeTime')}"


def alarm_severity(payload: Mapping[str, Any]) -> str:
    return "critical" if payload.get("NewStateValue") == "ALARM" else "info"


def _alarm_time(value: Any) -> str:
    """An alarm's StateChangeTime as every message shows a time ("01:39 UTC"); as it came when it is no time."""
    at = parse_time(value) if isinstance(value, str) else None
    return clock(at) if at is not None else str(value or "-")


def render_alarm(payload: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    state = str(payload.get("NewStateValue"))
    marker = "🔴" if state == "ALARM" else "🟢" if state == "OK" else "⚪"
    title = f"{marker} Training Guard self-monitoring: {payload['AlarmName']} is {state}"
    description = str(payload.get("AlarmDescription") or "")
    reason = str(payload.get("NewStateReason") or "")
    text = (
        f"*What it means:* {escape(description)}\n*Why:* {escape(reason)}"
        if description
        else f"*Why:* {escape(reason)}"
    )
    facts = [
        f"*Alarm*\n`{fit(str(payload['AlarmName']), 200)}`",
        f"*State*\n{escape(str(payload.get('OldStateValue') or '?'))} → {escape(state)}",
        f"*Account*\n{escape(str(payload.get('AWSAccountId') or '-'))}",
        f"*When*\n{escape(_alarm_time(payload.get('StateChangeTime')))}",
    ]
    blocks: list[Block] = [
        _header(_plain(title, HEADER_MAX)),
        _section(_cut_markdown(text, SECTION_MAX)),
        _fields(facts),
        _context(["See README, Operate: alarms and how to redrive dead letters."]),
    ]
    return fit(f"{title}: {reason}", FALLBACK_MAX), _checked(blocks)
