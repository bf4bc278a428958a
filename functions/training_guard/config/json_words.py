"""A value read from JSON, named in an error in JSON's words (`null`, `true`, "a number", "an object"), never
Python's (`None`, `True`, `dict`): the people reading the error wrote JSON."""

from __future__ import annotations

import json
from typing import Any

_SHOWN_CHARS = 80  # an error line names the value, it does not reprint a document


def kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__  # not from JSON: a bug's value, named as Python names it


def shown(value: Any) -> str:
    """The value as JSON writes it (`null`, `true`, `"text"`, `{"a": 1}`), cut to one short line."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else f"{text[: _SHOWN_CHARS - 1]}…"
