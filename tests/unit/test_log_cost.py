"""The log rules' cost model: the arithmetic at one point by hand, batching's effect, and the report section."""

from __future__ import annotations

import pytest

from bench import log_cost, run

PRICES = run.PRICES


def test_one_delivery_is_an_invocation_and_one_state_read_and_write() -> None:
    by_hand = 0.20 / 1e6 + 0.05 * 0.25 * 0.0000133334 + 0.625 / 1e6 + 0.125 / 1e6
    assert log_cost.per_delivery(PRICES) == pytest.approx(by_hand)


def test_a_thousand_jobs_of_six_host_hours_at_one_delivery_a_minute() -> None:
    [row] = log_cost.log_path_cost(PRICES, jobs=(1000,))
    assert row["deliveries (batched)"] == 1000 * 6 * 60
    assert row["deliveries (one a line)"] == 1000 * 6 * 360
    stall = 8640 * (0.20 / 1e6 + 0.5 * 0.25 * 0.0000133334) + 1000 * 6 * 8640 / 730 * 0.125 / 1e6
    assert row["of which stall check $"] == pytest.approx(stall, abs=0.001)
    assert row["log path $ (batched)"] == pytest.approx(360_000 * log_cost.per_delivery(PRICES) + stall, abs=0.01)


def test_batching_is_what_keeps_a_chatty_job_cheap() -> None:
    chatty = log_cost.chatty_job(PRICES)
    assert chatty["lines per hour"] == 8 * 3600
    assert chatty["one a line $ per hour"] == pytest.approx(60 * chatty["batched $ per hour"], rel=0.01)
    rows = log_cost.log_path_cost(PRICES)
    assert [r["jobs/month"] for r in rows] == [100, 1000, 10_000]
    assert all(r["log path $ (batched)"] < r["log path $ (one a line)"] for r in rows)


def test_a_host_writing_fewer_lines_than_deliveries_is_not_charged_for_more() -> None:
    quiet = {**log_cost.LOG_ASSUMPTIONS, "matching lines per host-hour": 10}
    [row] = log_cost.log_path_cost(PRICES, quiet, jobs=(100,))
    assert row["deliveries (batched)"] == row["deliveries (one a line)"] == 100 * 6 * 10


def test_the_section_names_every_assumption_and_what_is_not_priced() -> None:
    text = "\n".join(log_cost.section(PRICES))
    assert text.startswith("## The log rules' cost (issue 30)")
    assert all(key in text for key in log_cost.LOG_ASSUMPTIONS)
    assert "CloudWatch Logs subscription delivery" in text
    assert "$0.50 a month" in text  # the wing's 5 alarms


def test_members_deliveries_are_billed_by_firehose_per_5_kb_record_and_nothing_at_rest() -> None:
    [row] = log_cost.log_path_cost(PRICES, jobs=(1000,))
    assert row["members: Firehose GB (batched)"] == pytest.approx(1000 * 6 * 60 * 5 / 1024**2, abs=0.01)  # 1.72 GB
    assert log_cost.FIREHOSE_FIXED_MONTH == 0.0
    assert "members: Firehose GB" in "\n".join(log_cost.section(PRICES))
