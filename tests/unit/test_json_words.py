"""Errors about a value read from JSON name it in JSON's words (null, true, "a number", "an object"), never in
Python's (None, True, dict, NoneType): every typed setting of the configuration, every kind of wrong value."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from training_guard.config import json_words
from training_guard.config.model import ConfigError, GuardConfig
from training_guard.domain.events import EventError, parse_event
from training_guard.domain.metric_guards import parse_alarm_event

# Python's names and reprs that a JSON author never wrote
PYTHON_WORDS = re.compile(r"\b(None|True|False|NoneType|dict|str|int|float|bool|tuple)\b|\{'|\['|'\}|'\]")
WRONG_VALUES: list[Any] = [None, True, False, {}, {"a": None}, [], [True], 1.5, 7, "x"]
# One setting of each kind the reader knows, as a document holding `value` there
SETTINGS: dict[str, Callable[[Any], Any]] = {
    "a boolean": lambda v: {"dry_run": v},
    "a whole number": lambda v: {"dedup_ttl_days": v},
    "a number": lambda v: {"metric_guards": [{"name": "g", "metric": "train:loss", "threshold": v}]},
    "a string": lambda v: {"metric_guards": [{"name": v, "metric": "train:loss", "threshold": 1}]},
    "a choice": lambda v: {"rules": {"debugger_default": v}},
    "an object": lambda v: {"rules": v},
    "a list": lambda v: {"metric_guards": v},
    "a list of strings": lambda v: {"jobs": {"include_prefixes": v}},
    "the document": lambda v: v,
}


def test_kind_and_shown_speak_json() -> None:
    values: tuple[Any, ...] = (None, True, 1, 1.5, "x", [], {})
    assert [json_words.kind(v) for v in values] == [
        "null", "a boolean", "a number", "a number", "a string", "a list", "an object",
    ]  # fmt: skip
    assert [json_words.shown(v) for v in (None, True, False, "x", {"a": [None]})] == [
        "null", "true", "false", '"x"', '{"a": [null]}',
    ]  # fmt: skip
    assert json_words.shown("a" * 200).endswith("…")
    assert len(json_words.shown("a" * 200)) == 80


@pytest.mark.parametrize("setting", sorted(SETTINGS))
@pytest.mark.parametrize("value", WRONG_VALUES, ids=json_words.shown)
def test_a_wrong_value_is_named_in_json_words(setting: str, value: Any) -> None:
    try:
        GuardConfig.from_dict(SETTINGS[setting](value))
    except ConfigError as exc:
        message = str(exc)
    else:
        return  # a value the setting accepts
    assert not PYTHON_WORDS.search(message), message


@pytest.mark.parametrize("parse", [parse_event, parse_alarm_event])
@pytest.mark.parametrize("value", [v for v in WRONG_VALUES if not isinstance(v, dict)], ids=json_words.shown)
def test_an_event_that_is_no_object_is_named_in_json_words(parse: Any, value: Any) -> None:
    with pytest.raises(EventError) as raised:
        parse(value)
    assert str(raised.value) == f"event must be a JSON object, got {json_words.kind(value)}"
