"""The report as one self-contained HTML page: inline CSS and inline SVG charts, no script, no external asset.

The page opens from a file, a mail attachment or a CI artifact with no network: nothing is fetched (no
fonts, images, stylesheets or scripts from anywhere), and every text from the account (job, rule and stack
names) is escaped. Made from the document `training-guard report --json` prints, so the page and the JSON
never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any, Final

STOPPED_COLOUR: Final = "#c92a2a"  # the stop bars (the e2e test looks for this colour in the screenshot)
WOULD_STOP_COLOUR: Final = "#f08c00"
SPEND_COLOUR: Final = "#2b8a3e"
INK: Final = "#212529"
MUTED: Final = "#868e96"
GRID: Final = "#dee2e6"

CHART_WIDTH: Final = 960
CHART_HEIGHT: Final = 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 12, 16, 40
MAX_X_LABELS: Final = 10

_CSS = f"""
body {{ font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; color: {INK}; margin: 24px 32px;
  background: #fff; max-width: 1040px; }}
h1 {{ font-size: 22px; margin: 0 0 4px; }}
h2 {{ font-size: 16px; margin: 28px 0 8px; }}
.sub {{ color: {MUTED}; font-size: 13px; margin: 0 0 18px; }}
.cards {{ display: flex; gap: 12px; flex-wrap: wrap; }}
.card {{ border: 1px solid {GRID}; border-radius: 6px; padding: 10px 14px; min-width: 180px; }}
.card .v {{ font-size: 26px; font-weight: bold; }}
.card .l {{ font-size: 12px; color: {MUTED}; text-transform: uppercase; letter-spacing: .04em; }}
.card .n {{ font-size: 12px; color: {MUTED}; margin-top: 2px; }}
.stopped .v {{ color: {STOPPED_COLOUR}; }}
.would .v {{ color: {WOULD_STOP_COLOUR}; }}
.spend .v {{ color: {SPEND_COLOUR}; }}
.tables {{ display: flex; gap: 32px; flex-wrap: wrap; }}
table {{ border-collapse: collapse; font-size: 13px; min-width: 440px; }}
th, td {{ text-align: left; padding: 4px 10px 4px 0; border-bottom: 1px solid {GRID}; }}
td.num, th.num {{ text-align: right; }}
.kind {{ color: {MUTED}; }}
.legend span {{ display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; vertical-align: middle; }}
.legend {{ font-size: 12px; color: {MUTED}; }}
.warn {{ background: #fff3bf; border: 1px solid #ffe066; padding: 8px 12px; border-radius: 6px; font-size: 13px; }}
.notes {{ color: {MUTED}; font-size: 12px; margin-top: 24px; }}
svg text {{ font-family: inherit; }}
"""


def page(document: Mapping[str, Any]) -> str:
    """The whole page for a report document."""
    title = f"Training Guard report: {document['stack']} ({document['region']})"
    since, until = _moment(document["since"]), _moment(document["until"])
    days = document["days"]
    warnings = "".join(f'<p class="warn">{escape(w)}</p>' for w in document.get("warnings") or [])
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # No request leaves the page: not even for a favicon.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        'img-src data:">',
        f"<title>{escape(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">{_when(since)} to {_when(until)} · account {escape(str(document["account"]))} · '
        f"state table {escape(str(document['table']))}</p>",
        warnings,
        _cards(document),
        "<h2>Stops and would-have-stopped per day</h2>",
        '<p class="legend">'
        f'<span style="background:{STOPPED_COLOUR}"></span>stopped'
        f'<span style="background:{WOULD_STOP_COLOUR}"></span>would have stopped'
        + (" (unknown: the guard's metrics were not read)" if document["would_stop"] is None else "")
        + "</p>",
        bar_chart(
            [d["day"] for d in days],
            [("stopped", STOPPED_COLOUR, [d["stops"] for d in days])]
            + (
                [("would have stopped", WOULD_STOP_COLOUR, [d["would_stop"] or 0 for d in days])]
                if document["would_stop"] is not None
                else []
            ),
            label="Stops and would-have-stopped per day",
            integer=True,
        ),
        "<h2>Spend avoided per day (up to, at list price)</h2>",
        bar_chart(
            [d["day"] for d in days],
            [("spend avoided (USD)", SPEND_COLOUR, [d["spend_avoided_usd"] for d in days])],
            label="Spend avoided per day, US dollars",
            integer=False,
        ),
        '<div class="tables">',
        _table("Top rules and guards", "rule or guard", document["rules"]),
        _table("Most-stopped job prefixes", "job prefix", document["prefixes"]),
        "</div>",
        _notes(document),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def _cards(document: Mapping[str, Any]) -> str:
    avoided, so_far = document["spend_avoided"], document["spend_so_far"]
    unconfirmed = document["unconfirmed_stops"]
    would = document["would_stop"]
    cards = [
        (
            "stopped",
            "jobs stopped",
            str(document["stops"]),
            (f"{unconfirmed} attempt{'' if unconfirmed == 1 else 's'} never confirmed, left out")
            if unconfirmed
            else "each confirmed by SageMaker",
        ),
        (
            "would",
            "would have stopped",
            str(would) if would is not None else "unknown",
            "not stopped: dry run, or the job's tags",
        ),
        ("spend", "spend avoided, up to", _usd_or_unknown(avoided), _coverage(avoided)),
        ("", "spend when stopped", _usd_or_unknown(so_far), _coverage(so_far)),
    ]
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card {cls}"><div class="l">{escape(label)}</div><div class="v">{escape(value)}</div>'
            f'<div class="n">{escape(note)}</div></div>'
            for cls, label, value, note in cards
        )
        + "</div>"
    )


def _table(title: str, column: str, groups: Sequence[Mapping[str, Any]]) -> str:
    rows = "".join(
        "<tr><td>"
        + escape(str(g["name"]))
        + (f' <span class="kind">({escape(str(g["kind"]))})</span>' if g.get("kind") else "")
        + f'</td><td class="num">{g["stops"]}</td><td class="num">{escape(_spend_cell(g["spend_avoided"]))}</td></tr>'
        for g in groups
    )
    if not rows:
        rows = '<tr><td colspan="3" class="kind">no stops in this window</td></tr>'
    return (
        f"<div><h2>{escape(title)}</h2><table><thead><tr><th>{escape(column)}</th>"
        f'<th class="num">stops</th><th class="num">spend avoided</th></tr></thead><tbody>{rows}</tbody></table></div>'
    )


def _notes(document: Mapping[str, Any]) -> str:
    unknown = document["spend_avoided"].get("unknown_jobs") or []
    notes = [
        "Spend avoided is an estimate at on-demand list price for the time left until each job's maximum runtime; "
        "spot jobs cost less. A stop without a price is counted apart, never as $0.",
        "Would-have-stopped and the other outcomes come from the guard's metrics (hourly sums); stops, spend and "
        "the groups from the audit record of each stop.",
    ]
    counted = document.get("stops_counted_by_metrics")
    if counted is not None and counted != document["stops"]:
        notes.append(
            f"Jobs stopped counts the audit records: every stop. The guard's Outcome_stopped metric counts {counted}: "
            "only the stops made on an event or an alarm (not the sweeper's, not Stop now in Slack)."
        )
    if unknown:
        shown = ", ".join(unknown[:10]) + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
        notes.append(f"Stops without a spend figure: {shown}.")
    separator = document.get("prefix_separator")
    notes.append(
        f"Job prefix: the name up to the first {separator!r}."
        if separator
        else "Job prefix: the name without its trailing -<digits> groups (timestamps, counters)."
    )
    return '<div class="notes">' + "".join(f"<p>{escape(n)}</p>" for n in notes) + "</div>"


# --- the chart ---------------------------------------------------------------------------------------------------


def bar_chart(
    days: Sequence[str], series: Sequence[tuple[str, str, Sequence[float]]], *, label: str, integer: bool
) -> str:
    """Grouped bars per day, one colour per series, a y axis with round ticks; inline SVG."""
    plot_w = CHART_WIDTH - _LEFT - _RIGHT
    plot_h = CHART_HEIGHT - _TOP - _BOTTOM
    top = max((v for _, _, values in series for v in values), default=0.0)
    ticks = _ticks(top, integer=integer)
    scale_max = ticks[-1] or 1.0
    slot = plot_w / max(len(days), 1)
    gap = slot * 0.2 if slot > 4 else 0.0
    bar_w = (slot - gap) / max(len(series), 1)
    out = [
        f'<svg role="img" aria-label="{escape(label)}" '
        f'viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" width="{CHART_WIDTH}" height="{CHART_HEIGHT}">',
        f"<title>{escape(label)}</title>",
    ]
    for tick in ticks:
        y = _TOP + plot_h - tick / scale_max * plot_h
        out.append(f'<line x1="{_LEFT}" x2="{CHART_WIDTH - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
        text = f"{tick:,.0f}" if integer or tick >= 10 else f"{tick:,.2f}".rstrip("0").rstrip(".")
        out.append(
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11" fill="{MUTED}">'
            f"{'$' if not integer else ''}{text}</text>"
        )
    for i, day in enumerate(days):
        x0 = _LEFT + i * slot + gap / 2
        for j, (name, colour, values) in enumerate(series):
            value = values[i]
            if value <= 0:
                continue
            height = value / scale_max * plot_h
            x = x0 + j * bar_w
            shown = f"{value:,.0f}" if integer else f"${value:,.2f}"
            out.append(
                f'<rect x="{x:.2f}" y="{_TOP + plot_h - height:.2f}" width="{max(bar_w, 0.5):.2f}" '
                f'height="{height:.2f}" fill="{colour}"><title>{escape(day)}: {escape(name)} {shown}</title></rect>'
            )
    every = max(1, math.ceil(len(days) / MAX_X_LABELS))
    for i in range(0, len(days), every):
        x = _LEFT + (i + 0.5) * slot
        out.append(
            f'<text x="{x:.1f}" y="{CHART_HEIGHT - _BOTTOM + 16}" text-anchor="middle" font-size="11" '
            f'fill="{MUTED}">{escape(days[i][5:])}</text>'
        )
    baseline = _TOP + plot_h
    out.append(f'<line x1="{_LEFT}" x2="{CHART_WIDTH - _RIGHT}" y1="{baseline}" y2="{baseline}" stroke="{INK}"/>')
    out.append("</svg>")
    return "".join(out)


def _ticks(top: float, *, integer: bool) -> list[float]:
    """0 and up to 5 round steps covering `top` (1, 2 or 5 times a power of ten; whole numbers for counts)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / 4
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if integer:
        step = max(1.0, math.ceil(step))
    count = math.ceil(top / step)
    return [i * step for i in range(count + 1)]


# --- small helpers -----------------------------------------------------------------------------------------------


def _moment(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _usd_or_unknown(spend: Mapping[str, Any]) -> str:
    if spend["known"] == 0:
        return "unknown" if spend["unknown"] else "$0.00"
    return f"${spend['usd']:,.2f}"


def _coverage(spend: Mapping[str, Any]) -> str:
    known, unknown = spend["known"], spend["unknown"]
    if not known and not unknown:
        return "no stops"
    return f"{known} of {known + unknown} stops priced" + (f", {unknown} unknown" if unknown else "")


def _spend_cell(spend: Mapping[str, Any]) -> str:
    known, unknown = spend["known"], spend["unknown"]
    if not known:
        return "unknown" if unknown else "-"
    return f"${spend['usd']:,.2f}" + (f" (+{unknown} unknown)" if unknown else "")
