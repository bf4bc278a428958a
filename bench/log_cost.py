"""The log rules' monthly cost at 100 / 1,000 / 10,000 jobs: deliveries, state writes, the stall check. Pure arithmetic
on the prices `bench/run.py` cites; `make bench` prints it and docs/cost.md quotes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# What the model assumes, each a choice where AWS documents nothing (docs/limits.md, CloudWatch Logs):
LOG_ASSUMPTIONS: dict[str, float] = {
    "job duration hours": 6,  # as the rest of the cost model
    "hosts per job": 1,
    # Lines the default filter pattern lets through: a metric line every 10 s per host (epoch, eval and step logs).
    "matching lines per host-hour": 360,
    # CloudWatch Logs batches a stream's events into one delivery, but documents no batch size or interval: one
    # delivery a minute per stream is the assumption; "one a line" below is the bound if it never batched.
    "deliveries per host-hour (batched)": 60,
    # 256 MB. The log-events handler took 2.7 ms warm in-process on moto for a 10-line delivery (median of 35, one
    # GetItem and one conditional PutItem of the stream state); AWS's own calls take longer: 50 ms is assumed.
    "function seconds per delivery": 0.05,
    "function GB": 0.25,
    "state writes per delivery": 1,  # one conditional PutItem of the stream's state (a bounded window, under 1 KB)
    "state reads per delivery": 1,  # one strongly consistent GetItem (under 4 KB: one read unit)
    "stall checks per month": 8640,  # every 5 minutes (sweep_minutes)
    "stall check seconds": 0.5,
    "chatty job: hosts": 8,  # issue 30's chatty job: a line per step, a step a second, on 8 hosts
    "chatty job: matching lines per host-hour": 3600,
}
# Members of an organization (docs/design/log-subscription.md, "Members"): their deliveries reach the same function
# through the hub's CloudWatch Logs destination and a Firehose stream. Firehose bills ingestion per GB, each record
# rounded up to the next 5 KB, and nothing while idle (https://aws.amazon.com/kinesis/data-firehose/pricing/): a
# delivery (one record, CloudWatch Logs' gzip of a minute of metric lines) is counted as one 5 KB increment, an
# assumption (AWS documents no delivery size). The per-GB price was not read from the page: the model gives GB, not $.
FIREHOSE_RECORD_KB = 5
# A Kinesis data stream would bill every shard hour whether or not anything trains (same page family:
# https://aws.amazon.com/kinesis/data-streams/pricing/); Firehose adds nothing to the fixed cost.
FIREHOSE_FIXED_MONTH = 0.0


def member_ingestion_gb(deliveries: float) -> float:
    """GB Firehose bills for members' deliveries (each a record of at most one 5 KB increment, the assumption)."""
    return deliveries * FIREHOSE_RECORD_KB / (1024 * 1024)


# No page read states a charge for delivering a subscription to Lambda (the training logs' ingestion is SageMaker's
# and paid whether or not the guard reads them): the model adds none (docs/cost.md, "The log rules").
UNPRICED = {"CloudWatch Logs subscription delivery": "no charge found on a page read; counted as none"}


def _invocation(prices: Mapping[str, float], seconds: float, gb: float) -> float:
    return prices["lambda_request"] + seconds * gb * prices["lambda_gb_second_arm"]


def per_delivery(prices: Mapping[str, float], a: Mapping[str, float] = LOG_ASSUMPTIONS) -> float:
    """One delivery: an invocation, the stream state read and written."""
    return (
        _invocation(prices, a["function seconds per delivery"], a["function GB"])
        + a["state writes per delivery"] * prices["dynamodb_write"]
        + a["state reads per delivery"] * prices["dynamodb_read"]
    )


def log_path_cost(
    prices: Mapping[str, float], a: Mapping[str, float] = LOG_ASSUMPTIONS, jobs: tuple[int, ...] = (100, 1000, 10_000)
) -> list[dict[str, Any]]:
    """Per month: the deliveries batched (the assumption) and one a line (the bound), and the stall check, which also
    reads each running stream's state once a check."""
    delivery = per_delivery(prices, a)
    checks = a["stall checks per month"]
    rows = []
    for count in jobs:
        host_hours = count * a["hosts per job"] * a["job duration hours"]
        batched = host_hours * min(a["deliveries per host-hour (batched)"], a["matching lines per host-hour"])
        unbatched = host_hours * a["matching lines per host-hour"]
        stream_reads = host_hours * checks / 730 * prices["dynamodb_read"]  # each running stream, each check
        stall = checks * _invocation(prices, a["stall check seconds"], a["function GB"]) + stream_reads
        rows.append(
            {
                "jobs/month": count,
                "deliveries (batched)": round(batched),
                "log path $ (batched)": round(batched * delivery + stall, 2),
                "deliveries (one a line)": round(unbatched),
                "log path $ (one a line)": round(unbatched * delivery + stall, 2),
                "of which stall check $": round(stall, 3),
                "members: Firehose GB (batched)": round(member_ingestion_gb(batched), 2),
            }
        )
    return rows


def chatty_job(prices: Mapping[str, float], a: Mapping[str, float] = LOG_ASSUMPTIONS) -> dict[str, float]:
    """Issue 30's chatty job, per hour: batched, and if every line were its own invocation."""
    hosts, lines = a["chatty job: hosts"], a["chatty job: matching lines per host-hour"]
    delivery = per_delivery(prices, a)
    return {
        "lines per hour": hosts * lines,
        "batched $ per hour": round(hosts * min(lines, a["deliveries per host-hour (batched)"]) * delivery, 6),
        "one a line $ per hour": round(hosts * lines * delivery, 6),
    }


def section(prices: Mapping[str, float], alarms: int = 5) -> list[str]:
    """The report's lines (markdown)."""
    rows = log_path_cost(prices)
    columns = list(rows[0])
    chatty = chatty_job(prices)
    return [
        "## The log rules' cost (issue 30)",
        "",
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
        *("| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows),
        "",
        f"Already in the monthly cost model's fixed part: {alarms} alarms (the function's errors and throttles, its "
        "dead-letter queue, the subscription's delivery errors and throttling), "
        f"${alarms * prices['alarm_month']:.2f} a month. "
        f"The chatty job (a line per step, {chatty['lines per hour']:,.0f} lines an hour on "
        f"{LOG_ASSUMPTIONS['chatty job: hosts']:.0f} hosts): ${chatty['batched $ per hour']} an hour batched, "
        f"${chatty['one a line $ per hour']} if each line were its own invocation. Assumptions: "
        + ", ".join(f"{k}: {v:g}" for k, v in LOG_ASSUMPTIONS.items())
        + ". Members' jobs (an organization): the same deliveries and state, plus Firehose's ingestion in the column "
        f"'members: Firehose GB' ({FIREHOSE_RECORD_KB} KB a delivery; per GB at the Region's Firehose price, nothing "
        "at rest, so the fixed cost is unchanged)"
        + ". Not priced: "
        + "; ".join(f"{k} ({v})" for k, v in UNPRICED.items())
        + ".",
        "",
    ]
