"""The report's and digest's totals (training_guard.domain.totals): what counts, what is unknown, how jobs group."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from training_guard.adapters.ledger import _stop_key
from training_guard.domain import totals
from training_guard.domain.outcome import Outcome
from training_guard.domain.totals import SpendSum, StopEntry, compute, job_prefix

SINCE = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
UNTIL = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def stop(
    job: str,
    at: datetime,
    *,
    rule: str = "VanishingGradient",
    reason: str = "rules.debugger_default = stop (debugger rule VanishingGradient)",
    confirmed: bool = True,
    avoided: float | None = None,
    so_far: float | None = None,
) -> StopEntry:
    return StopEntry(
        job=job,
        rule=rule,
        reason=reason,
        at=at,
        confirmed=confirmed,
        spend_avoided_usd=avoided,
        spend_so_far_usd=so_far,
    )


def item(**attributes: Any) -> dict[str, Any]:
    """A stop record as DynamoDB returns it, as adapters/ledger.py writes it, plus the given attributes."""
    base: dict[str, Any] = {
        "pk": {"S": _stop_key("exp-7")},
        "job": {"S": "exp-7"},
        "rule": {"S": "loss-diverging"},
        "reason": {"S": "metric_guards.loss-diverging: MAX(train:loss) > 5 for 3 of 3 min -> stop"},
        "stopped_at": {"S": "2026-11-29T02:10:00.123000+00:00"},
        "event_id": {"S": "e-1"},
        "stopped_by": {"S": "training-guard"},
        "confirmed": {"BOOL": True},
        "expires_at": {"N": "1799999999"},
    }
    return base | attributes


# --- job-name prefixes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "prefix"),
    [
        ("pytorch-mnist-lr01-2026-11-30-02-10-00-123", "pytorch-mnist-lr01"),  # SDK timestamp and counter
        ("resnet50-no-debugger-2026-11-30-02-12-00", "resnet50-no-debugger"),
        ("exp-42", "exp"),
        ("run42", "run42"),  # digits not after a dash are part of the name
        ("lr01-v2", "lr01-v2"),  # a group with a letter ends the stripping
        ("2026-11-30", "2026"),  # only groups after a dash are stripped
        ("tuning-001-1a2b3c4d", "tuning-001-1a2b3c4d"),  # a hex suffix is not digits
        ("7", "7"),
    ],
)
def test_a_jobs_prefix_is_its_name_without_the_trailing_numbers(name: str, prefix: str) -> None:
    assert job_prefix(name) == prefix


@pytest.mark.parametrize(
    ("name", "prefix"),
    [
        ("vision--resnet--lr3-2026", "vision"),  # up to the first separator
        ("no-separator-here-12", "no-separator-here-12"),  # none: the whole name, digits kept
        ("--starts-with-it", "--starts-with-it"),  # nothing before it: the whole name
    ],
)
def test_with_a_separator_the_prefix_is_the_name_up_to_its_first_occurrence(name: str, prefix: str) -> None:
    assert job_prefix(name, "--") == prefix


# --- reading a stop record -----------------------------------------------------------------------------------------


def test_a_stop_record_as_the_ledger_writes_it_is_read_with_its_spend_unknown() -> None:
    entry = StopEntry.from_item(item())
    assert entry == StopEntry(
        job="exp-7",
        rule="loss-diverging",
        reason="metric_guards.loss-diverging: MAX(train:loss) > 5 for 3 of 3 min -> stop",
        at=datetime(2026, 11, 29, 2, 10, 0, 123000, tzinfo=UTC),
        confirmed=True,
        spend_avoided_usd=None,
        spend_so_far_usd=None,
        price_source=None,
        instance_types=(),
    )
    assert entry.kind == "metric_guards"


def test_the_spend_attributes_are_read_when_present() -> None:
    entry = StopEntry.from_item(
        item(
            spend_avoided_usd={"N": "120.50"},
            spend_so_far_usd={"N": "10.25"},
            price_source={"S": "AWS Price List API (2026-11-01)"},
            instance_types={"SS": ["ml.p3.2xlarge", "ml.m5.large"]},
        )
    )
    assert entry is not None
    assert (entry.spend_avoided_usd, entry.spend_so_far_usd) == (120.5, 10.25)
    assert entry.price_source == "AWS Price List API (2026-11-01)"
    assert entry.instance_types == ("ml.p3.2xlarge", "ml.m5.large")


@pytest.mark.parametrize(
    "value",
    [{"NULL": True}, {"N": "NaN"}, {"N": "Infinity"}, {"N": "-1"}, {"S": "n/a"}, {"BOOL": True}, "12", None],
)
def test_a_spend_figure_that_is_null_or_no_amount_is_unknown_not_zero(value: Any) -> None:
    entry = StopEntry.from_item(item(spend_avoided_usd=value))
    assert entry is not None
    assert entry.spend_avoided_usd is None


def test_a_spend_figure_written_as_a_numeric_string_is_read() -> None:
    entry = StopEntry.from_item(item(spend_avoided_usd={"S": "3.25"}))
    assert entry is not None
    assert entry.spend_avoided_usd == 3.25


@pytest.mark.parametrize(
    ("value", "types"),
    [
        ({"L": [{"S": "ml.g5.xlarge"}, {"S": "ml.m5.large"}]}, ("ml.g5.xlarge", "ml.m5.large")),
        ({"S": "ml.g5.xlarge, ml.m5.large"}, ("ml.g5.xlarge", "ml.m5.large")),
        ({"NULL": True}, ()),
    ],
)
def test_instance_types_are_read_as_a_set_a_list_or_a_comma_separated_string(
    value: Any, types: tuple[str, ...]
) -> None:
    entry = StopEntry.from_item(item(instance_types=value))
    assert entry is not None
    assert entry.instance_types == types


@pytest.mark.parametrize(
    "changes",
    [
        {"pk": {"S": "t#exp-7#debugger#VanishingGradient#IssuesFound"}},  # a ledger transition
        {"pk": {"S": "price#us-east-1#ml.m5.large"}},  # a cached price
        {"stopped_at": {"S": "yesterday"}},
        {"stopped_at": {"NULL": True}},
    ],
)
def test_an_item_that_is_no_readable_stop_record_is_skipped(changes: dict[str, Any]) -> None:
    assert StopEntry.from_item(item(**changes)) is None


def test_a_record_without_job_or_rule_still_counts_under_its_key() -> None:
    raw = item()
    del raw["job"], raw["rule"], raw["reason"]
    entry = StopEntry.from_item(raw)
    assert entry is not None
    assert (entry.job, entry.rule, entry.kind) == ("exp-7", "?", "")


def test_the_record_key_is_the_ledgers() -> None:
    assert _stop_key("job-1") == f"{totals.STOP_KEY_PREFIX}job-1"


# --- the totals ------------------------------------------------------------------------------------------------------


def test_stops_count_confirmed_records_within_the_window_edges_included() -> None:
    result = compute(
        [
            stop("at-the-start-1", SINCE),
            stop("at-the-end-1", UNTIL),
            stop("before-1", SINCE - timedelta(microseconds=1)),
            stop("after-1", UNTIL + timedelta(seconds=1)),
            stop("never-confirmed-1", SINCE + timedelta(days=1), confirmed=False),
        ],
        {},
        since=SINCE,
        until=UNTIL,
    )
    assert (result.stops, result.unconfirmed) == (2, 1)
    assert [g.name for g in result.prefixes] == ["at-the-end", "at-the-start"]


def test_spend_avoided_sums_the_known_figures_and_counts_the_unknown_apart() -> None:
    result = compute(
        [
            stop("a-1", SINCE + timedelta(hours=1), avoided=120.50, so_far=10.25),
            stop("a-2", SINCE + timedelta(hours=2), avoided=80.25),
            stop("b-1", SINCE + timedelta(hours=3)),
            stop("c-1", SINCE + timedelta(hours=4), avoided=0.0, so_far=1.0),
            stop("d-1", SINCE + timedelta(hours=5), avoided=999.0, confirmed=False),  # not a stop: not counted
        ],
        {},
        since=SINCE,
        until=UNTIL,
    )
    assert result.spend_avoided == SpendSum(usd=200.75, known=3, unknown=1)
    assert result.spend_so_far == SpendSum(usd=11.25, known=2, unknown=2)
    assert result.unpriced_jobs == ("b-1",)
    # a group whose only stop has no figure is unknown, not $0
    [b] = [g for g in result.prefixes if g.name == "b"]
    assert b.spend_avoided == SpendSum(usd=0.0, known=0, unknown=1)
    [c] = [g for g in result.prefixes if g.name == "c"]
    assert c.spend_avoided == SpendSum(usd=0.0, known=1, unknown=0)  # a known $0 (the job was at its limit)


def test_rules_and_guards_rank_by_stops_then_spend_then_name_each_with_its_kind() -> None:
    guard = "metric_guards.loss-diverging: MAX(train:loss) > 5 for 3 of 3 min -> stop"
    result = compute(
        [
            stop("a-1", SINCE + timedelta(hours=1), avoided=5.0),
            stop("a-2", SINCE + timedelta(hours=2)),
            stop("b-1", SINCE + timedelta(hours=3), rule="loss-diverging", reason=guard),
            stop(
                "c-1",
                SINCE + timedelta(hours=4),
                rule="LossNotDecreasing",
                reason="rules.actions.LossNotDecreasing = stop",
            ),
            stop("d-1", SINCE + timedelta(hours=5), rule="stall", reason="stall.minutes = 30 -> stop", avoided=1.0),
            # the same name decided by a guard and by a rule: two lines
            stop(
                "e-1", SINCE + timedelta(hours=6), rule="loss-diverging", reason="rules.actions.loss-diverging = stop"
            ),
        ],
        {},
        since=SINCE,
        until=UNTIL,
    )
    assert [(g.name, g.kind, g.stops) for g in result.rules] == [
        ("VanishingGradient", "rules", 2),
        ("stall", "stall", 1),  # $1 avoided ranks it above the others with one stop
        ("LossNotDecreasing", "rules", 1),
        ("loss-diverging", "metric_guards", 1),
        ("loss-diverging", "rules", 1),
    ]


def test_prefixes_group_the_runs_of_one_experiment() -> None:
    result = compute(
        [
            stop("pytorch-mnist-lr01-2026-11-29-02-10-00-123", SINCE + timedelta(hours=1), avoided=1.5),
            stop("pytorch-mnist-lr01-2026-11-29-05-00-00-001", SINCE + timedelta(hours=2), avoided=2.25),
            stop("bert-exp-7", SINCE + timedelta(hours=3)),
        ],
        {},
        since=SINCE,
        until=UNTIL,
    )
    assert [(g.name, g.stops, g.spend_avoided) for g in result.prefixes] == [
        ("pytorch-mnist-lr01", 2, SpendSum(3.75, 2, 0)),
        ("bert-exp", 1, SpendSum(0.0, 0, 1)),
    ]
    with_separator = compute(
        [stop("vision--a-1", SINCE), stop("vision--b-2", SINCE)], {}, since=SINCE, until=UNTIL, prefix_separator="--"
    )
    assert [(g.name, g.stops) for g in with_separator.prefixes] == [("vision", 2)]


def points(*pairs: tuple[datetime, float]) -> list[tuple[datetime, float]]:
    return list(pairs)


def test_would_stop_and_the_outcomes_come_from_the_metric_datapoints_of_the_windows_hours() -> None:
    metrics = {
        totals.WOULD_STOP_METRIC: points(
            (datetime(2026, 11, 23, 12, 0, tzinfo=UTC), 1.0),  # the hour the window starts in: counted
            (datetime(2026, 11, 23, 11, 0, tzinfo=UTC), 7.0),  # the hour before: not
            (datetime(2026, 11, 29, 3, 0, tzinfo=UTC), 2.0),
            (datetime(2026, 11, 30, 12, 0, tzinfo=UTC), 1.0),  # the hour the window ends in: counted
            (datetime(2026, 11, 30, 13, 0, tzinfo=UTC), 5.0),  # after: not
        ),
        "Outcome_notified": points((datetime(2026, 11, 25, 8, 0, tzinfo=UTC), 5.0)),
        "Outcome_deferred": points((datetime(2026, 11, 25, 8, 0, tzinfo=UTC), 1.0)),
        "SomeDollars": points((datetime(2026, 11, 29, 3, 0, tzinfo=UTC), 200.755)),  # any metric given is summed
    }
    result = compute([], metrics, since=SINCE + timedelta(minutes=30), until=UNTIL)
    assert result.would_stop == 4
    assert result.outcomes == {
        "stopped": 0,
        "would_stop": 4,
        "deferred": 1,
        "notified": 5,
        "already_ended": 0,
        "already_stopping": 0,
    }
    assert result.metrics is not None
    assert result.metrics["SomeDollars"] == pytest.approx(200.755)
    assert result.as_dict()["metrics"]["SomeDollars"] == 200.76  # half a cent rounds up
    per_day = {d.day: d.would_stop for d in result.days}
    assert per_day[date(2026, 11, 23)] == 1
    assert per_day[date(2026, 11, 29)] == 2
    assert per_day[date(2026, 11, 30)] == 1
    assert sum(v or 0 for v in per_day.values()) == 4


def test_without_the_metrics_would_stop_is_unknown_not_zero() -> None:
    result = compute([stop("a-1", SINCE)], None, since=SINCE, until=UNTIL)
    assert result.would_stop is None
    assert result.outcomes == {}
    assert {d.would_stop for d in result.days} == {None}
    document = result.as_dict()
    assert (document["would_stop"], document["outcomes"], document["metrics"]) == (None, None, None)


def test_every_outcome_the_handlers_count_is_a_metric_the_totals_read() -> None:
    # handlers/receipts.py counts each outcome as f"Outcome_{outcome}"
    assert {f"Outcome_{o.value}" for o in Outcome} <= set(totals.METRICS)
    assert totals.WOULD_STOP_METRIC == "Outcome_would_stop"


def test_days_are_utc_calendar_days_from_the_windows_first_to_its_last() -> None:
    result = compute(
        [
            stop("a-1", datetime(2026, 11, 23, 23, 59, tzinfo=UTC), avoided=2.5),
            stop("a-2", datetime(2026, 11, 24, 0, 0, tzinfo=UTC), avoided=1.25),
            stop("a-3", datetime(2026, 11, 24, 1, 0, tzinfo=UTC)),
        ],
        {},
        since=SINCE,
        until=UNTIL,
    )
    assert [d.day for d in result.days] == [date(2026, 11, d) for d in range(23, 31)]
    assert [(d.stops, d.spend_avoided_usd) for d in result.days[:3]] == [(1, 2.5), (2, 1.25), (0, 0.0)]


def test_a_window_in_another_offset_is_taken_in_utc() -> None:
    from datetime import timezone

    tokyo = timezone(timedelta(hours=9))
    result = compute(
        [stop("a-1", datetime(2026, 11, 24, 0, 30, tzinfo=UTC))],
        {},
        since=datetime(2026, 11, 24, 9, 0, tzinfo=tokyo),  # 00:00 UTC
        until=datetime(2026, 11, 24, 10, 0, tzinfo=tokyo),
    )
    assert result.stops == 1
    assert [d.day for d in result.days] == [date(2026, 11, 24)]


def test_a_window_that_ends_before_it_starts_is_refused() -> None:
    with pytest.raises(ValueError, match="ends"):
        compute([], {}, since=UNTIL, until=SINCE)


def test_the_document_says_everything_in_plain_values() -> None:
    result = compute(
        [stop("pytorch-mnist-lr01-2026-11-29-02-10-00-123", datetime(2026, 11, 29, 2, 10, tzinfo=UTC), avoided=120.5)],
        {totals.WOULD_STOP_METRIC: points((datetime(2026, 11, 29, 3, 0, tzinfo=UTC), 2.0))},
        since=datetime(2026, 11, 28, 12, 0, tzinfo=UTC),
        until=datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
    )
    assert result.as_dict() == {
        "since": "2026-11-28T12:00:00Z",
        "until": "2026-11-29T12:00:00Z",
        "stops": 1,
        "unconfirmed_stops": 0,
        "would_stop": 2,
        "spend_avoided": {"usd": 120.5, "known": 1, "unknown": 0, "unknown_jobs": []},
        "spend_so_far": {"usd": 0.0, "known": 0, "unknown": 1},
        "rules": [
            {
                "name": "VanishingGradient",
                "stops": 1,
                "kind": "rules",
                "spend_avoided": {"usd": 120.5, "known": 1, "unknown": 0},
            }
        ],
        "prefixes": [
            {"name": "pytorch-mnist-lr01", "stops": 1, "spend_avoided": {"usd": 120.5, "known": 1, "unknown": 0}}
        ],
        "outcomes": {
            "stopped": 0,
            "would_stop": 2,
            "deferred": 0,
            "notified": 0,
            "already_ended": 0,
            "already_stopping": 0,
        },
        "metrics": {
            "Outcome_already_ended": 0.0,
            "Outcome_already_stopping": 0.0,
            "Outcome_deferred": 0.0,
            "Outcome_notified": 0.0,
            "Outcome_stopped": 0.0,
            "Outcome_would_stop": 2.0,
        },
        "days": [
            {"day": "2026-11-28", "stops": 0, "would_stop": 0, "spend_avoided_usd": 0.0},
            {"day": "2026-11-29", "stops": 1, "would_stop": 2, "spend_avoided_usd": 120.5},
        ],
    }


def test_the_totals_module_stays_pure() -> None:
    """No boto3, no os, no clock: the digest Lambda and the local report share it."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(totals.__file__).read_text())
    imported = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert not {m for m in imported if m.split(".")[0] in {"boto3", "botocore", "os", "time"}}
    assert "datetime.now" not in Path(totals.__file__).read_text()
