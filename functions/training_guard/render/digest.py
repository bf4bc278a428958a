"""The weekly digest's words, the same in every channel: e-mail prose, Q Developer markdown, the Slack blocks' facts.

Light on purpose: the Slack notifier renders a digest with it and must not load the policy (test_import_weight.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def usd(amount: float) -> str:
    return f"${amount:,.2f}"


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def spend_text(spend: Mapping[str, Any], before: str = "", after: str = "") -> str:
    """A sum of known figures, with how many were unknown (never counted as $0)."""
    known, unknown = spend["known"], spend["unknown"]
    if known == 0 and unknown == 0:
        return "-"
    if known == 0:
        return f"unknown ({count(unknown, 'stop')} without a price)"
    text = f"{before}{usd(spend['usd'])}{after}"
    return text + (f", {unknown} of {known + unknown} unknown" if unknown else "")


def spend_cell(spend: Mapping[str, Any]) -> str:
    known, unknown = spend["known"], spend["unknown"]
    if not known:
        return "unknown" if unknown else "-"
    return usd(spend["usd"]) + (f" (+{unknown} unknown)" if unknown else "")


def window_text(digest: Mapping[str, Any]) -> str:
    return f"{_when(digest['since'])} to {_when(digest['until'])} UTC"


def facts(digest: Mapping[str, Any]) -> list[tuple[str, str]]:
    stopped = count(digest["stops"], "job")
    if digest["unconfirmed_stops"]:
        stopped += f" ({count(digest['unconfirmed_stops'], 'stop attempt')} never confirmed by SageMaker, left out)"
    would = digest["would_stop"]
    rows = [
        ("Stopped", stopped),
        (
            "Would have stopped",
            f"{would} (not stopped: dry run, or the job's tags)"
            if would is not None
            else "unknown (the guard's metrics could not be read)",
        ),
        ("Spend avoided", spend_text(digest["spend_avoided"], "up to ", " at list price")),
        ("Spend at the stop", spend_text(digest["spend_so_far"])),
    ]
    outcomes = digest.get("outcomes") or {}
    others = [f"{k.replace('_', ' ')} {v}" for k, v in outcomes.items() if k not in ("stopped", "would_stop") and v]
    if others:
        rows.append(("Other outcomes", " · ".join(others)))
    return rows


def group_line(group: Mapping[str, Any]) -> str:
    """`VanishingGradient (rules): 2 stops, $200.75`"""
    name = f"{group['name']} ({group['kind']})" if group.get("kind") else str(group["name"])
    return f"{name}: {count(group['stops'], 'stop')}, {spend_cell(group['spend_avoided'])}"


def groups(digest: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """(title, lines) of the top rules and guards and the most-stopped job prefixes; the lines name how many more."""
    out = []
    for title, key in (("Top rules and guards", "rules"), ("Most-stopped job prefixes", "prefixes")):
        lines = [group_line(g) for g in digest[key]]
        more = digest[f"{key}_total"] - len(digest[key])
        if more > 0:
            lines.append(f"... {more} more (training-guard report lists them all)")
        out.append((title, lines or ["no stops"]))
    return out


def title(digest: Mapping[str, Any]) -> str:
    head = f"Weekly digest {digest['week']}"
    stops = digest["stops"]
    if not stops:
        would = digest["would_stop"]
        return f"{head}: no job stopped" + (f", {would} would have been" if would else "")
    avoided = digest["spend_avoided"]
    saved = f"up to {usd(avoided['usd'])} avoided" if avoided["known"] else "spend avoided unknown"
    return f"{head}: {count(stops, 'job')} stopped, {saved}"


def summary(digest: Mapping[str, Any]) -> str:
    return f"{window_text(digest)}: " + "; ".join(f"{label.lower()} {text}" for label, text in facts(digest))


def email_text(digest: Mapping[str, Any], *, account: str | None, region: str | None, dry_run: bool) -> str:
    lines = [f"Training Guard weekly digest, {digest['week']}", window_text(digest), ""]
    lines += [f"  {label + ':':<20}{text}" for label, text in facts(digest)]
    for heading, rows in groups(digest):
        lines += ["", heading] + [f"  {row}" for row in rows]
    warnings = list(digest.get("warnings") or ())
    if warnings:
        lines += [""] + [f"Warning: {w}" for w in warnings]
    if dry_run:
        lines += ["", "The guard is in dry-run mode: it stops nothing."]
    lines += [
        "",
        f"Account:   {account or '-'}   Region: {region or '-'}",
        "",
        "Spend is estimated at list price, up to each job's maximum runtime; a figure without a price is counted "
        "apart, never as $0. `training-guard report --since 7d` shows the same totals with every rule and prefix.",
    ]
    return "\n".join(lines)


def markdown(digest: Mapping[str, Any]) -> str:
    lines = [f"_{window_text(digest)}_"] + [f"*{label}:* {text}" for label, text in facts(digest)]
    for heading, rows in groups(digest):
        lines += [f"*{heading}:*"] + [f"• {row}" for row in rows]
    lines += [f"_Warning: {w}_" for w in digest.get("warnings") or ()]
    return "\n".join(lines)


def _when(text: str) -> str:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).strftime("%Y-%m-%d %H:%M")
