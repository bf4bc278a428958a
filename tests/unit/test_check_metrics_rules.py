"""check-metrics --rules: the Lambda's log rules over a saved log, text or `aws logs` JSON, streamed."""

from __future__ import annotations

import io
import json
import math
import sys
import tracemalloc
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from training_guard.config.model import GuardConfig
from training_guard_local import check_metrics
from training_guard_local.check_metrics import TRACE_WIDTH, LogLine, Trace, read_log, run_rules
from training_guard_local.cli import main

HOUR_MS = 3_600_000


def healthy(n: int, start: int = 0) -> list[str]:
    return [f"step={start + i} loss={2.3 * 0.99 ** (start + i):.5f}" for i in range(n)]


def write(tmp_path: Path, lines: Sequence[str], name: str = "job.log") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return path


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(["check-metrics", "--rules", "--json", *argv]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def get_log_events(messages: Sequence[tuple[int, str]]) -> dict[str, Any]:
    events = [{"timestamp": ts, "message": m, "ingestionTime": ts + 900} for ts, m in messages]
    return {"events": events, "nextForwardToken": "f/3", "nextBackwardToken": "b/3"}


# --- what it prints ---------------------------------------------------------------------------------------------


def test_json_is_one_object_per_firing_with_the_file_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path, ["Invoking script", *healthy(20), "step=20 loss=nan", *healthy(5, 21)])
    [row] = [r for r in cli_json(capsys, "--log", str(log)) if r["rule"] == "NaN"]
    assert (row["metric"], row["line"], row["value"], row["action"]) == ("loss", 22, "NaN", "stop")
    assert row["setting"].startswith("log_rules.nan")
    assert row["stream"] is None
    assert row["timestamp"] is None


def test_text_shows_each_firing_with_its_sparkline_marked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path, [*healthy(30), "step=30 loss=inf"])
    assert main(["check-metrics", "--rules", "--log", str(log)]) == 0
    out = capsys.readouterr().out
    block = out[out.index("\nNaN ") :].splitlines()
    assert block[1].split() == ["NaN", "stop", "line", "31", "loss", "=", "inf"]
    spark, caret = block[4], block[5]
    assert spark.startswith("  loss ")
    assert spark.rstrip().endswith("(line 31)")
    assert caret.strip() == "^ line 31"
    assert spark[caret.index("^")] == "\u00d7"  # the marked column is the non-finite point
    assert "Not fired:" in out
    assert "StalledTrainingRule (a text log has no times" in out


def test_a_log_with_no_firing_says_so_and_strict_fails_only_on_firings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quiet = write(tmp_path, ["hello", "world"], "quiet.log")
    assert main(["check-metrics", "--rules", "--strict", "--log", str(quiet)]) == 0
    out = capsys.readouterr().out
    assert "no metric in the log" in out
    assert "No rule fires on this log." in out
    loud = write(tmp_path, ["loss=1.0", "loss=nan"], "loud.log")
    assert main(["check-metrics", "--rules", "--strict", "--log", str(loud)]) == 1


def test_the_configuration_and_the_job_tag_decide_the_action(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write(tmp_path, [*healthy(15), "step=15 loss=nan"])
    config = tmp_path / "dry.json"
    config.write_text(json.dumps({"dry_run": True}))
    [row] = cli_json(capsys, "--log", str(log), "--config", str(config))
    assert (row["rule"], row["action"]) == ("NaN", "dry_run")
    [row] = cli_json(capsys, "--log", str(log), "--log-rules-tag", "NaN=notify")
    assert (row["rule"], row["action"]) == ("NaN", "notify")
    assert cli_json(capsys, "--log", str(log), "--log-rules-tag", "off") == []


def test_definitions_are_the_jobs_own_reader(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path, [f"it {i} | objective {1 / (i + 1):.4f} |" for i in range(12)] + ["it 12 | objective nan |"])
    definitions = json.dumps([{"Name": "train:objective_loss", "Regex": r"objective (\S+) \|"}])
    [row] = cli_json(capsys, "--log", str(log), "--definitions", definitions)
    assert (row["rule"], row["metric"], row["line"], row["reader"]) == (
        "NaN",
        "train:objective_loss",
        13,
        "MetricDefinitions",
    )


# --- the JSON `aws logs` prints ---------------------------------------------------------------------------------


def test_get_log_events_json_gives_event_numbers_and_times(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = [(1_700_000_000_000 + i * 1000, m) for i, m in enumerate([*healthy(12), "step=12 loss=nan"])]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(get_log_events(messages), indent=4))
    [row] = cli_json(capsys, "--log", str(path))
    assert (row["rule"], row["line"], row["timestamp"]) == ("NaN", 13, messages[12][0])


def test_a_silence_in_a_timed_log_fires_stalled_training(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    start = 1_700_000_000_000
    messages = [(start + i * 1000, m) for i, m in enumerate(healthy(20))]
    messages.append((start + 19_000 + HOUR_MS, "still here, no loss"))  # 60 min without a point
    path = tmp_path / "events.json"
    path.write_text(json.dumps(get_log_events(messages)))
    stalls = [r for r in cli_json(capsys, "--log", str(path)) if r["rule"] == "StalledTrainingRule"]
    assert [(r["line"], r["action"], r["value"]) for r in stalls] == [(21, "notify", None)]
    # 29 minutes is under Debugger's 1800 s threshold
    messages[-1] = (start + 19_000 + 29 * 60_000, "still here")
    path.write_text(json.dumps(get_log_events(messages)))
    assert [r for r in cli_json(capsys, "--log", str(path)) if r["rule"] == "StalledTrainingRule"] == []


def test_filter_log_events_keeps_one_state_per_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Two hosts of one job, interleaved as filter-log-events returns them: algo-2 goes nan, algo-1 never does.
    events = []
    for i in range(15):
        for host in (1, 2):
            text = "step=14 loss=nan" if host == 2 and i == 14 else f"step={i} loss={2.3 * 0.99**i:.5f}"
            events.append({"logStreamName": f"job/algo-{host}-1", "timestamp": 1_000 * i + host, "message": text})
    path = tmp_path / "filtered.json"
    path.write_text(json.dumps({"events": events, "searchedLogStreams": []}))
    [row] = cli_json(capsys, "--log", str(path))
    assert (row["rule"], row["stream"], row["line"]) == ("NaN", "job/algo-2-1", 30)


def test_json_is_streamed_across_chunk_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_metrics, "_JSON_CHUNK", 7)  # every value spans chunks
    messages = [(10**12 + i, f'loss={i}.5 "quoted" \u00e9') for i in range(40)]
    doc = get_log_events(messages)
    doc = {"nextForwardToken": "f/1", **doc}  # the events need not come first
    kind, lines = read_log(io.BytesIO(json.dumps(doc, indent=2).encode()), "x.json")
    assert kind == "json"
    assert [(line.line, line.timestamp_ms, line.message) for line in lines] == [
        (i + 1, ts, m) for i, (ts, m) in enumerate(messages)
    ]


def test_a_log_of_hugging_face_dict_lines_is_text_not_json() -> None:
    kind, lines = read_log(io.BytesIO(b"{'loss': 0.5, 'epoch': 1.0}\n{\"loss\": 0.4}\n"), "x.log")
    assert kind == "text"
    assert [line.message for line in lines] == ["{'loss': 0.5, 'epoch': 1.0}", '{"loss": 0.4}']


def test_stdin_is_read_as_a_stream(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.dumps(get_log_events([(10**12 + i, m) for i, m in enumerate(["loss=1", "loss=nan"])])).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    [row] = cli_json(capsys, "--log", "-")
    assert (row["rule"], row["line"]) == ("NaN", 2)


# --- bad input: one line, exit 2 ----------------------------------------------------------------------------------

BAD_JSON = {
    "no events": ('{"nextForwardToken": "f/1"}', 'no "events" in this JSON'),
    "events not a list": ('{"events": {"a": 1}}', "expected '['"),
    "no message": ('{"events": [{"timestamp": 1}]}', 'events[0]: "message" must be the line as text'),
    "bad timestamp": ('{"events": [{"timestamp": "x", "message": "m"}]}', 'events[0]: "timestamp" must be'),
    "cut short": ('{"events": [{"timestamp": 1, "message": "m"}', "expected ',' or ']' after events[0], found the end"),
    "cut in an event": ('{"events": [{"timestamp": 1, "mess', "not JSON in events[0]"),
    "no comma": ('{"events": [] "nextToken": null}', "expected ',' or '}' after 'events', found '\"'"),
    "two documents": ('{"events": []}{"events": []}', "more after the JSON object ends"),
}


@pytest.mark.parametrize("name", sorted(BAD_JSON))
def test_bad_aws_logs_json_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    text, problem = BAD_JSON[name]
    log = tmp_path / "events.json"
    log.write_text(text)
    assert main(["check-metrics", "--rules", "--log", str(log)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert problem in err
    assert str(log) in err


def test_bad_input_is_named_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path, ["loss=1"])
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x00\x01loss")
    latin = tmp_path / "latin.log"
    latin.write_bytes(b"loss=1\nloss=2 \xe9t\xe9\n")
    cases = [
        (["--log", str(binary)], "not a text file (binary data)"),
        (["--log", str(latin)], "line 2 is not UTF-8 text (byte 0xe9)"),
        (["--log", str(tmp_path)], "is a folder, not a log file"),
        (["--log", str(tmp_path / "missing.log")], "cannot read log"),
        (["--log", str(log), "--definitions", '[{"Name": "x", "Regex": "("}]'], "definitions[0] (x): invalid regex"),
        (["--log", str(log), "--log-rules-tag", "Divergence=explode"], "--log-rules-tag: tag training-guard:log-rules"),
    ]
    for argv, problem in cases:
        assert main(["check-metrics", "--rules", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1, (argv, err)
        assert problem in err, (argv, err)
    assert main(["check-metrics", "--log", str(log)]) == 2
    assert "--definitions is needed without --rules" in capsys.readouterr().err
    assert main(["check-metrics", "--log", str(log), "--definitions", "[]", "--log-rules-tag", "off"]) == 2
    assert "--log-rules-tag is for the log rules: add --rules" in capsys.readouterr().err


# --- memory does not grow with the log ------------------------------------------------------------------------------


def test_a_trace_keeps_at_most_twice_its_width_whatever_the_length() -> None:
    trace = Trace("loss", "generic", 1, 5.0)
    for line in range(2, 100_001):
        trace.add(line, 5.0 - line / 100_000)
    assert len(trace.buckets) <= 2 * TRACE_WIDTH + 1
    columns = trace.columns()
    assert len(columns) == TRACE_WIDTH
    assert columns[0].first == 1
    assert columns[-1].last == 100_000
    assert sum(c.points for c in columns) == 100_000
    picture, at, _ = trace.picture(50_000)
    assert picture[0] == "█"
    assert picture[-1] == "▁"
    assert at is not None
    assert columns[at].first <= 50_000 <= columns[at].last
    assert at in (19, 20)


def lines_of(n: int) -> Iterator[LogLine]:
    for i in range(1, n + 1):
        noise = 0.02 * math.sin(i)
        yield LogLine(i, None, f"{{'loss': {2.0 / (1 + i / 500) + noise:.5f}, 'learning_rate': 1e-05, 'epoch': {i}}}")


def peak_bytes(n: int) -> int:
    tracemalloc.start()
    try:
        run = run_rules(lines_of(n), source="gen", kind="text", config=GuardConfig())
        assert run.lines == n
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_length_of_the_log() -> None:
    # 18,000 more lines: keeping even a pointer a line (8 bytes) would add 144,000
    small, large = peak_bytes(2_000), peak_bytes(20_000)
    assert large - small < 100_000, (small, large)
