"""The small JSON value helpers every layer shares (domain/values.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from training_guard.domain.values import cents, iso, mapping


@pytest.mark.parametrize(("amount", "rounded"), [(200.755, 200.76), (0.125, 0.13), (36.234, 36.23), (0.0, 0.0)])
def test_money_is_rounded_to_the_cent_half_up_everywhere(amount: float, rounded: float) -> None:
    # pricing, the responder's spend and the totals once rounded differently (round() takes 200.755 down)
    assert cents(amount) == rounded
    assert round(200.755, 2) == 200.75  # the float rounding this replaces


def test_no_amount_stays_no_amount() -> None:
    assert cents(None) is None


def test_only_an_object_is_an_object() -> None:
    assert mapping({"a": 1}) == {"a": 1}
    not_one: object
    for not_one in (None, [], "text", 3):
        assert mapping(not_one) == {}


def test_times_are_written_in_utc_with_a_z() -> None:
    moment = datetime(2026, 12, 5, 22, 30, tzinfo=timezone(timedelta(hours=1)))
    assert iso(moment) == "2026-12-05T21:30:00Z"
    assert iso(datetime(2026, 12, 5, 21, 30, tzinfo=UTC)) == "2026-12-05T21:30:00Z"
