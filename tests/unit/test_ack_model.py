"""bench/ack_model.py: the cold acknowledgement against Slack's 3 s, from cited figures and measured ones."""

from __future__ import annotations

import pytest

from bench import ack_model


def test_below_one_vcpu_cpu_work_is_scaled_by_memory_and_not_above() -> None:
    assert ack_model.cpu_factor(1769) == 1.0
    assert ack_model.cpu_factor(3008) == 1.0
    assert ack_model.cpu_factor(256) == pytest.approx(1769 / 256)


def test_the_model_adds_runtime_init_imports_handler_and_the_first_secret_read() -> None:
    rows = {r.memory_mb: r for r in ack_model.model(import_ms=200.0, first_call_ms=10.0)}
    at_512 = rows[512]
    expected = 117.37 + 200.0 * 1769 / 512 + 10.0 * 1769 / 512 + 1000.0
    assert at_512.modelled_ms == pytest.approx(expected)
    assert at_512.headroom_ms == pytest.approx(3000.0 - expected)


def test_the_default_256_mb_leaves_no_room_for_the_writes_and_1024_does() -> None:
    """With the acknowledgement's last measured import (234 ms) and first click (20.5 ms)."""
    rows = {r.memory_mb: r for r in ack_model.model(import_ms=234.0, first_call_ms=20.5)}
    assert rows[256].headroom_ms < ack_model.REQUIRED_HEADROOM_MS
    assert rows[1024].headroom_ms >= ack_model.REQUIRED_HEADROOM_MS


def test_a_slower_import_asks_for_more_memory_and_none_when_nothing_holds() -> None:
    assert ack_model.smallest_that_holds(ack_model.model(import_ms=234.0, first_call_ms=20.5)) == 512
    assert ack_model.smallest_that_holds(ack_model.model(import_ms=600.0, first_call_ms=20.5)) == 1769
    assert ack_model.smallest_that_holds(ack_model.model(import_ms=2000.0, first_call_ms=20.5)) is None


def test_the_section_names_every_source_and_says_whether_the_configured_size_holds() -> None:
    text = "\n".join(ack_model.section(234.0, 20.5, 1024))
    for source in (
        "https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html",
        ack_model.LAMBDA_PERF_SOURCE,
        ack_model.FIRST_READ_MEASUREMENT_PAGE,
        "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Introduction.html",
    ):
        assert source in text
    assert "configured with 1024 MB: 1545 ms modelled, 1455 ms left" in text
    assert text.rstrip().endswith("HOLDS.")
    assert "DOES NOT HOLD" in "\n".join(ack_model.section(234.0, 20.5, 256))
