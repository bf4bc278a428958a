"""Small text helpers shared by the renderers (no imports beyond the standard library)."""

from __future__ import annotations


def format_duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


def ascii_int(value: str, max_digits: int = 18) -> int | None:
    """The number a string of ASCII digits writes (at most `max_digits` of them: 18 fit an int64), else None.
    str.isdigit() alone also accepts "²" and fullwidth or Arabic-Indic digits, which int() refuses, and int()
    refuses more than 4,300 digits."""
    if value.isascii() and value.isdigit() and len(value) <= max_digits:
        return int(value)
    return None
