"""Small helpers for values read from JSON and written to it: an object or nothing, money in cents, UTC times."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, overload

_CENT = Decimal("0.01")


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` when it is an object, else an empty one: a missing or malformed field reads as no field."""
    return value if isinstance(value, Mapping) else {}


@overload
def cents(amount: float) -> float: ...


@overload
def cents(amount: float | None) -> float | None: ...


def cents(amount: float | None) -> float | None:
    """Dollars to the cent, half a cent up as people round money (float's round() takes 200.755 down to 200.75)."""
    if amount is None:
        return None
    return float(Decimal(repr(amount)).quantize(_CENT, rounding=ROUND_HALF_UP))


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
