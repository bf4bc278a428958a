"""Campaign: bad input. Thousands of malformed, truncated, oversized and wrong-typed events and
configurations; each is accepted or rejected with a clear reason, never an unhandled exception."""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes import FakeJobs, FakeLedger, FakePublisher
from tests.helpers import EVENTS_DIR, NOW, event_names, load_event
from training_guard.config import ConfigError, GuardConfig
from training_guard.events import EventError, parse_event
from training_guard.handlers.job_events import process
from training_guard.metric_guards import parse_alarm_event
from training_guard.responder import Responder

EXAMPLES = 1000
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=20), children, max_size=6),
    max_leaves=25,
)
FIXTURES = [load_event(n) for n in event_names()]
ALARMS = [json.loads(p.read_text()) for p in sorted((EVENTS_DIR / "alarms").glob("*.json"))]
REASONS: Counter[str] = Counter()


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw: st.DrawFn, originals: list[dict[str, Any]]) -> Any:
    """A real payload with one place replaced by junk, deleted, truncated or blown up."""
    value = copy.deepcopy(draw(st.sampled_from(originals)))
    path = draw(st.sampled_from(paths(value)[1:]))
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    action = draw(st.sampled_from(["replace", "delete", "huge", "truncate"]))
    if action == "replace":
        parent[path[-1]] = draw(JSON)
    elif action == "delete" and isinstance(parent, dict):
        del parent[path[-1]]
    elif action == "huge":
        parent[path[-1]] = "x" * 300_000
    elif action == "truncate" and isinstance(parent[path[-1]], str):
        parent[path[-1]] = parent[path[-1]][: draw(st.integers(0, 3))]
    return value


def classify(exc: EventError) -> str:
    return str(exc).split(" (", 1)[0].split(":", 1)[0][:50]


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.too_slow], deadline=None, derandomize=True)
@given(st.one_of(JSON, mutated(FIXTURES)))
def test_the_event_parser_accepts_or_explains(event: Any) -> None:
    try:
        parsed = parse_event(event)
    except EventError as exc:
        assert str(exc)
        assert "\n" not in str(exc)
        REASONS[f"event: {classify(exc)}"] += 1
        return
    assert parsed.job.name
    assert parsed.job.status
    REASONS["event: accepted"] += 1


@settings(max_examples=EXAMPLES // 3, suppress_health_check=[HealthCheck.too_slow], deadline=None, derandomize=True)
@given(st.one_of(JSON, mutated(ALARMS)))
def test_the_alarm_parser_accepts_or_explains(event: Any) -> None:
    try:
        parse_alarm_event(event)
    except EventError as exc:
        REASONS[f"alarm: {classify(exc)}"] += 1
        return
    REASONS["alarm: accepted"] += 1


@settings(max_examples=EXAMPLES // 3, suppress_health_check=[HealthCheck.too_slow], deadline=None, derandomize=True)
@given(mutated(FIXTURES))
def test_the_handler_only_ever_raises_event_error_for_bad_input(event: Any) -> None:
    guard = Responder(GuardConfig(), FakeJobs(), FakeLedger(), FakePublisher())
    try:
        receipt = process(event, guard, account="123456789012", now=NOW)
    except EventError:
        REASONS["handler: rejected to the DLQ"] += 1
        return
    REASONS["handler: handled" if not receipt.ignored else "handler: ignored"] += 1


CONFIG_KEYS = st.sampled_from(
    [
        "rules",
        "dry_run",
        "tags",
        "min_training_minutes",
        "jobs",
        "notifications",
        "emails",
        "slack",
        "metric_guards",
        "stall",
        "x",
    ]
)


@settings(max_examples=EXAMPLES, suppress_health_check=[HealthCheck.too_slow], deadline=None, derandomize=True)
@given(st.one_of(JSON, st.dictionaries(CONFIG_KEYS, JSON, max_size=6)))
def test_the_config_loader_accepts_or_names_the_field(data: Any) -> None:
    try:
        config = GuardConfig.from_dict(data)
    except ConfigError as exc:
        assert exc.problems
        assert all(": " in p for p in exc.problems)  # every problem names its field
        REASONS["config: rejected"] += 1
        return
    assert GuardConfig.from_json(config.to_json()) == config
    REASONS["config: accepted"] += 1


def test_report_the_fuzzing_figures(figures: dict[str, Any]) -> None:
    figures.update(sorted(REASONS.items(), key=lambda kv: -kv[1])[:8])
    figures["total_inputs"] = sum(REASONS.values())
