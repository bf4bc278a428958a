"""Campaign: bad input. Thousands of malformed, truncated, oversized and wrong-typed events and
configurations; each is accepted or rejected with a clear reason, never an unhandled exception."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from tests.campaign.junk import Junk
from tests.fakes import FakeJobs, FakeLedger, FakePublisher
from tests.helpers import EVENTS_DIR, NOW, event_names, load_event
from training_guard.config.model import ConfigError, GuardConfig
from training_guard.domain.events import EventError, parse_event
from training_guard.domain.metric_guards import parse_alarm_event
from training_guard.handlers.job_events import process
from training_guard.services.responder import Responder

EXAMPLES = 3000
SEED = 20261201
FIXTURES = [load_event(n) for n in event_names()]
ALARMS = [json.loads(p.read_text()) for p in sorted((EVENTS_DIR / "alarms").glob("*.json"))]
REASONS: Counter[str] = Counter()


def junk_or_mutated(junk: Junk, originals: list[dict[str, Any]], count: int) -> Iterable[Any]:
    """Half pure junk, half real payloads with one place broken."""
    for i in range(count):
        yield junk.value() if i % 2 else junk.mutated(originals)


def campaign(inputs: Iterable[Any], check: Callable[[Any], None]) -> None:
    """`check` on every input; any exception or failed assertion is a finding, reported with the input whole."""
    findings = []
    for number, value in enumerate(inputs):
        try:
            check(value)
        except Exception as exc:  # noqa: BLE001 - what the campaign looks for
            shown = repr(value)
            shown = shown if len(shown) < 400 else f"{shown[:400]}... ({len(shown)} characters)"
            findings.append(f"input {number}: {type(exc).__name__}: {exc}: {shown}")
    if findings:
        pytest.fail("\n".join(findings[:5]) + f"\n({len(findings)} in all)", pytrace=False)


def classify(exc: EventError) -> str:
    return str(exc).split(" (", 1)[0].split(":", 1)[0][:50]


def test_the_event_parser_accepts_or_explains() -> None:
    def check(event: Any) -> None:
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

    campaign(junk_or_mutated(Junk(SEED), FIXTURES, EXAMPLES), check)


def test_the_alarm_parser_accepts_or_explains() -> None:
    def check(event: Any) -> None:
        try:
            parse_alarm_event(event)
        except EventError as exc:
            REASONS[f"alarm: {classify(exc)}"] += 1
            return
        REASONS["alarm: accepted"] += 1

    campaign(junk_or_mutated(Junk(SEED + 1), ALARMS, EXAMPLES // 3), check)


def test_the_handler_only_ever_raises_event_error_for_bad_input() -> None:
    def check(event: Any) -> None:
        guard = Responder(GuardConfig(), FakeJobs(), FakeLedger(), FakePublisher())
        try:
            receipt = process(event, guard, account="123456789012", now=NOW)
        except EventError:
            REASONS["handler: rejected to the DLQ"] += 1
            return
        REASONS["handler: handled" if not receipt.ignored else "handler: ignored"] += 1

    junk = Junk(SEED + 2)
    campaign((junk.mutated(FIXTURES) for _ in range(EXAMPLES // 3)), check)


CONFIG_KEYS = [
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


def configs(junk: Junk, count: int) -> Iterable[Any]:
    """Half pure junk, half objects of the configuration's own keys (and one unknown) holding junk."""
    for i in range(count):
        if i % 2:
            yield junk.value()
        else:
            keys = junk.rng.sample(CONFIG_KEYS, junk.rng.randint(0, 6))
            yield {key: junk.value() for key in keys}


def test_the_config_loader_accepts_or_names_the_field() -> None:
    def check(data: Any) -> None:
        try:
            config = GuardConfig.from_dict(data)
        except ConfigError as exc:
            assert exc.problems
            assert all(": " in p for p in exc.problems)  # every problem names its field
            REASONS["config: rejected"] += 1
            return
        assert GuardConfig.from_json(config.to_json()) == config
        REASONS["config: accepted"] += 1

    campaign(configs(Junk(SEED + 3), EXAMPLES), check)


def test_report_the_fuzzing_figures(figures: dict[str, Any]) -> None:
    figures.update(sorted(REASONS.items(), key=lambda kv: -kv[1])[:8])
    figures["total_inputs"] = sum(REASONS.values())
