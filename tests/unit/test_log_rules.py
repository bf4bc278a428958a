"""Debugger's loss rules over log lines: where each fires on written curves, and what duplicates and reorders do."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from training_guard import contract
from training_guard.config.model import ConfigError, GuardConfig, LogRules
from training_guard.domain.log_lines import LineReader
from training_guard.domain.log_rules import Firing, LogEvent, StreamState, evaluate, job_overrides, stalled

READER = LineReader()
DEFAULTS = LogRules()
STEP_MS = 1000


def keras(loss: float, val: float | None = None) -> str:
    line = f"469/469 - 3s - loss: {loss:.6g} - accuracy: 0.9000"
    return line + (f" - val_loss: {val:.6g}" if val is not None else "")


def events(lines: Sequence[str], start: int = 0) -> list[LogEvent]:
    return [
        LogEvent(str(start + i + 1), (start + i) * STEP_MS, text, line=start + i + 1) for i, text in enumerate(lines)
    ]


def run(lines: Sequence[str], rules: LogRules = DEFAULTS, tags: dict[str, str] | None = None) -> list[Firing]:
    _, firings = evaluate(None, events(lines), reader=READER, rules=rules, tags=tags or {})
    return firings


def by_rule(firings: Sequence[Firing]) -> dict[str, Firing]:
    return {f.rule: f for f in firings}


def falling(n: int, start: float = 2.0, end: float = 0.3) -> list[float]:
    return [end + (start - end) * math.exp(-i / (n / 5)) for i in range(n)]


def noisy(n: int, seed: int) -> list[float]:
    """A healthy job: a falling trend, each point up to 1.6x it (and now and then 2x), or down to 0.8x."""
    rng = random.Random(seed)
    out = []
    for i, trend in enumerate(falling(n)):
        factor = 2.0 if i % 97 == 50 else rng.choice([0.8, 0.9, 1.0, 1.1, 1.3, 1.6])
        out.append(trend * factor)
    return out


# --- the required behaviour with the defaults --------------------------------------------------------------------


def test_first_nan_stops_at_its_line() -> None:
    lines = [keras(v) for v in falling(30)] + ["469/469 - 3s - loss: nan - accuracy: 0.1000", keras(float("nan"))]
    firing = by_rule(run(lines))["NaN"]
    assert (firing.line, firing.metric, firing.action, firing.reader) == (31, "loss", "stop", "keras")
    assert math.isnan(firing.value or 0.0)
    assert firing.setting.startswith("log_rules.nan")
    assert [f.rule for f in run(lines)].count("NaN") == 1


@pytest.mark.parametrize("line", ["loss = nan", "loss: inf", "{'loss': nan, 'epoch': 1.0}", "[7]#011train-rmse:-inf"])
def test_a_loss_line_saying_nan_stops(line: str) -> None:
    firing = by_rule(run([keras(v) for v in falling(5)] + [line]))["NaN"]
    assert (firing.line, firing.action) == (6, "stop")


def test_only_nan_leaves_infinity_alone() -> None:
    rules = LogRules.__new__(LogRules)
    rules = GuardConfig.from_dict({"log_rules": {"nan": {"only_nan": True}}}).log_rules
    assert "NaN" not in by_rule(run(["loss: inf"], rules))
    assert by_rule(run(["loss: inf", "loss: nan"], rules))["NaN"].line == 2


def test_nan_in_a_metric_that_is_no_loss_is_not_a_stop() -> None:
    # fp16 training logs an infinite gradient norm on healthy steps; eval metrics can be undefined
    assert run(["{'loss': 0.5, 'grad_norm': inf}", "{'eval_matthews': nan}"]) == []


def test_nan_in_any_metric_the_job_defines() -> None:
    reader = LineReader((("accuracy", r"acc=(\S+)"),))
    _, firings = evaluate(None, events(["acc=0.5", "acc=nan"]), reader=reader, rules=DEFAULTS)
    assert [(f.rule, f.metric, f.line, f.reader) for f in firings] == [("NaN", "accuracy", 2, "MetricDefinitions")]


def test_divergence_stops_no_later_than_four_times_the_best() -> None:
    losses = falling(40, end=0.4) + [0.4 * 1.15**k for k in range(1, 20)]
    best = min(losses[:40])
    first_4x = next(i for i, v in enumerate(losses) if i >= 10 and v >= 4 * min(losses[:i])) + 1
    firing = by_rule(run([keras(v) for v in losses]))["Divergence"]
    assert firing.line is not None
    assert firing.line <= first_4x
    assert firing.action == "stop"
    assert (firing.value or 0) >= 4 * best
    assert "x its best" in firing.detail
    assert firing.setting == "log_rules.divergence (factor 4, warmup 10)"


def test_divergence_waits_for_the_warmup() -> None:
    # the first points of a job can be far above what it reaches a few steps later
    losses = [5.0, 0.5, 2.5, 2.4, *falling(20, start=2.0, end=1.0)]
    assert "Divergence" not in by_rule(run([keras(v) for v in losses]))


@pytest.mark.parametrize("seed", range(20))
def test_healthy_noisy_job_is_never_stopped(seed: int) -> None:
    lines = [keras(v, val=v * 1.3) if i % 10 == 9 else keras(v) for i, v in enumerate(noisy(2000, seed))]
    assert [f for f in run(lines) if f.action == "stop"] == []


def test_per_batch_outliers_below_the_level_make_no_divergence() -> None:
    # a batch of 4 images: losses from 0.01 to 3 around a level of 1; the lowest point is no "best"
    rng = random.Random(5)
    losses = [2.3] * 10 + [rng.choice([0.01, 0.3, 0.6, 0.9, 1.0, 1.1, 1.4, 2.0, 3.1]) for _ in range(3000)]
    assert "Divergence" not in by_rule(run([keras(v) for v in losses]))


def test_a_lone_spike_is_no_climb_but_a_climb_through_it_is() -> None:
    base = [keras(v) for v in falling(30, end=0.5)]
    assert "Divergence" not in by_rule(run([*base, keras(2.5), *base[-5:]]))
    firing = by_rule(run([*base, *(keras(v) for v in (1.0, 1.5, 2.0, 2.5, 3.0))]))["Divergence"]
    assert firing.line == 34  # 2.5: 4.7x the best level, and the level has doubled
    assert "its level has climbed 2.0x" in firing.detail


def test_divergence_in_heavy_noise_needs_the_level_to_climb_out_of_it() -> None:
    rng = random.Random(11)
    flat = [0.5 * math.exp(rng.gauss(0, 0.6)) for _ in range(3000)]
    assert "Divergence" not in by_rule(run([keras(v) for v in flat]))
    climbing = flat[:300] + [v * 1.02 ** (i + 1) for i, v in enumerate(flat[300:600])]
    firing = by_rule(run([keras(v) for v in climbing]))["Divergence"]
    assert 300 < (firing.line or 0) < 300 + 100  # the level reaches 4x at about 370


def test_a_progress_bar_repeating_its_value_is_one_point() -> None:
    bar = "Epoch 1:  50%|█████     | 5/10 [00:00<00:00, 190.00it/s, train_loss={v}, val_loss=0.5]"
    state, _ = evaluate(None, events([bar.format(v=0.3)] * 20 + [bar.format(v=0.2)]), reader=READER, rules=DEFAULTS)
    assert state.loss is not None
    assert state.val is not None
    assert (state.loss.count, state.val.count) == (2, 1)


def test_flat_converged_job_is_never_stopped_and_only_notified() -> None:
    rng = random.Random(7)
    losses = falling(100) + [0.3 * rng.uniform(0.97, 1.03) for _ in range(2000)]
    firings = run([keras(v, val=0.35 * rng.uniform(0.98, 1.02)) for v in losses])
    assert [f.action for f in firings if f.action == "stop"] == []
    assert {f.rule for f in firings} <= {"LossNotDecreasing", "Overtraining"}


def test_loss_not_decreasing_on_a_stuck_job() -> None:
    rng = random.Random(1)
    firing = by_rule(run([keras(2.30 * rng.uniform(0.995, 1.005)) for _ in range(40)]))["LossNotDecreasing"]
    assert (firing.line, firing.action) == (20, "notify")  # 2 x num_steps: the first comparison
    assert "less than the 0.1 % decrease" in firing.detail


def test_loss_not_decreasing_quiet_while_the_loss_falls() -> None:
    assert "LossNotDecreasing" not in by_rule(run([keras(v) for v in falling(40, end=0.0001)]))


def test_overfit_fires_after_the_validation_minimum_never_before() -> None:
    lines = overfitting()
    vals = [0.5 + 0.002 * (epoch - 25) ** 2 for epoch in range(60)]
    val_min_line = 5 * (vals.index(min(vals)) + 1)
    firing = by_rule(run(lines))["Overfit"]
    assert firing.line is not None
    assert firing.line > val_min_line
    assert (firing.metric, firing.action) == ("val_loss", "notify")
    assert "rose from its minimum" in firing.detail


@pytest.mark.parametrize("seed", range(10))
def test_overfit_with_noise_fires_after_the_minimum_of_the_trend(seed: int) -> None:
    rng = random.Random(seed)
    lines = []
    for epoch in range(60):
        train = 1.0 * math.exp(-epoch / 15) + 0.05
        val = (0.5 + 0.002 * (epoch - 25) ** 2) * rng.uniform(0.97, 1.03)  # the trend's minimum: epoch 25
        lines += [keras(train * rng.uniform(0.9, 1.1)) for _ in range(4)] + [keras(train, val=val)]
    firing = by_rule(run(lines))["Overfit"]
    assert (firing.line or 0) > 5 * 26


@pytest.mark.parametrize("seed", range(10))
def test_noisy_validation_of_a_healthy_job_is_no_overfit(seed: int) -> None:
    rng = random.Random(seed)
    lines = []
    for epoch in range(100):
        train = 1.0 * math.exp(-epoch / 30) + 0.2
        val = (1.3 * math.exp(-epoch / 30) + 0.3) * rng.uniform(0.9, 1.1)  # 10 % noise, a gap of 50 %
        lines += [keras(train * rng.uniform(0.9, 1.1)) for _ in range(4)] + [keras(train, val=val)]
    assert "Overfit" not in by_rule(run(lines))


def test_overfit_quiet_on_an_ordinary_gap() -> None:
    # validation 30 % above training all along: Debugger's ratio_threshold 0.1 would fire at once
    lines = [keras(v, val=v * 1.3) for v in falling(200)]
    assert "Overfit" not in by_rule(run(lines))


def test_overtraining_when_validation_stops_improving() -> None:
    # better by 0.1 a point up to line 6, then within 0.002 of 0.3 (never the very same value: that is a repeat)
    lines = [keras(v, val=0.8 - 0.1 * min(i, 5) + 0.002 * (i % 2)) for i, v in enumerate(falling(30))]
    firing = by_rule(run(lines))["Overtraining"]
    assert (firing.metric, firing.action, firing.line) == ("val_loss", "notify", 16)


@pytest.mark.parametrize("seed", range(10))
def test_overtraining_waits_while_a_noisy_loss_still_falls(seed: int) -> None:
    # a per-step loss, +-10 % around a trend that falls 1.5 % a point at first: one low draw is no optimum to beat
    rng = random.Random(seed)
    losses = [(0.3 + 2.0 * math.exp(-i / 60)) * math.exp(rng.gauss(0, 0.1)) for i in range(400)]
    firing = by_rule(run([keras(v) for v in losses])).get("Overtraining")
    assert firing is None or (firing.line or 0) >= 20


def test_stalled_after_threshold_seconds_without_a_point() -> None:
    state, _ = evaluate(None, events([keras(0.5), "still saving a checkpoint"]), reader=READER, rules=DEFAULTS)
    assert stalled(state, now_ms=1799 * 1000, rules=DEFAULTS) is None
    firing = stalled(state, now_ms=1800 * 1000, rules=DEFAULTS)
    assert firing is not None
    assert (firing.rule, firing.action, firing.event_id) == ("StalledTrainingRule", "notify", "StalledTrainingRule@0")
    state.mark(firing)
    assert stalled(state, now_ms=4000 * 1000, rules=DEFAULTS) is None


def test_in_the_lambda_the_line_is_the_count_of_lines_folded() -> None:
    batch = [LogEvent(f"id-{i}", i, text) for i, text in enumerate(["starting", keras(0.5), "loss = nan"])]
    state, firings = evaluate(None, batch[:2], reader=READER, rules=DEFAULTS)
    _, firings = evaluate(state, batch[2:], reader=READER, rules=DEFAULTS)
    assert [(f.rule, f.line, f.event_id) for f in firings] == [("NaN", 3, "id-2")]


def test_disabled_rules_fold_nothing() -> None:
    rules = GuardConfig.from_dict({"log_rules": {"enabled": False}}).log_rules
    assert run(["loss = nan"], rules) == []


def test_pattern_rule_fires_once_with_its_action() -> None:
    config = GuardConfig.from_dict(
        {"log_rules": {"patterns": [{"name": "NCCL-timeout", "regex": "NCCL.*[Tt]imeout", "action": "stop"}]}}
    )
    lines = ["ok", "NCCL WARN Timeout waiting", "NCCL timeout again"]
    firings = run(lines, config.log_rules)
    assert [(f.rule, f.line, f.action, f.metric) for f in firings] == [("NCCL-timeout", 2, "stop", None)]
    assert firings[0].setting == "log_rules.patterns[0] (NCCL-timeout: NCCL.*[Tt]imeout)"


# --- duplicates, reorders, bounds ----------------------------------------------------------------------------------


def curve_with_everything() -> list[str]:
    lines = [keras(v, val=v * 1.2) for v in falling(40)]
    lines += [keras(0.35 * 1.2**k) for k in range(1, 15)] + ["loss = nan"]
    return lines


def test_refolding_any_batch_changes_nothing() -> None:
    evs = events(curve_with_everything())
    state: StreamState | None = None
    batches = [evs[i : i + 7] for i in range(0, len(evs), 7)]
    for batch in batches:
        state, _ = evaluate(state, batch, reader=READER, rules=DEFAULTS)
    assert state is not None
    saved = json.dumps(state.to_json(), sort_keys=True)
    for batch in [*batches, evs, evs[3:5], evs[-3:]]:
        again, firings = evaluate(state, batch, reader=READER, rules=DEFAULTS)
        assert firings == []
        assert json.dumps(again.to_json(), sort_keys=True) == saved


def test_state_json_round_trip_folds_the_same() -> None:
    evs = events(curve_with_everything())
    state, _first = evaluate(None, evs[:30], reader=READER, rules=DEFAULTS)
    restored = StreamState.from_json(json.loads(json.dumps(state.to_json())))
    _, direct = evaluate(state, evs[30:], reader=READER, rules=DEFAULTS)
    _, via_json = evaluate(restored, evs[30:], reader=READER, rules=DEFAULTS)
    assert repr(direct) == repr(via_json)
    assert direct


@pytest.mark.parametrize(
    "doc", [{"v": 1, "lines": "many"}, {"v": 1, "loss": {"n": 3}}, {"v": 1, "names": 5}, {"v": 1, "loss": [1]}]
)
def test_a_broken_state_document_is_one_line_error(doc: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="not a log-rules stream state") as raised:
        StreamState.from_json(doc)
    assert "\n" not in str(raised.value)


def test_a_state_of_another_version_starts_afresh() -> None:
    assert StreamState.from_json({"v": 0, "lines": 7}).lines == 0


ORDER_DEPENDENT = {"Divergence", "LossNotDecreasing", "Overfit", "Overtraining"}


def in_order_part(batches: Sequence[Sequence[LogEvent]]) -> list[LogEvent]:
    """The events that arrive no older than every event before their batch: the ones the rules judge."""
    kept: list[LogEvent] = []
    newest: int | None = None
    for batch in batches:
        kept += [e for e in batch if newest is None or e.timestamp_ms >= newest]
        newest = max([newest or 0, *(e.timestamp_ms for e in batch)])
    return sorted(kept, key=lambda e: e.timestamp_ms)


def verdicts(firings: Sequence[Firing], rules: set[str]) -> set[tuple[str, int | None]]:
    return {(f.rule, f.line) for f in firings if f.rule in rules}


@settings(max_examples=60, deadline=None)
@given(st.permutations(range(8)), st.sampled_from(["diverging", "overfit", "nan-late"]))
def test_a_reorder_is_the_in_order_fold_of_the_lines_that_came_in_order(order: list[int], curve: str) -> None:
    lines = {
        "diverging": curve_with_everything(),
        "overfit": overfitting(),
        "nan-late": [*curve_with_everything()[:-1], keras(0.3), "loss = nan", keras(0.3)],
    }[curve]
    evs = events(lines)
    size = math.ceil(len(evs) / 8)
    batches = [evs[i * size : (i + 1) * size] for i in order]
    state: StreamState | None = None
    seen: list[Firing] = []
    for batch in batches:
        state, firings = evaluate(state, batch, reader=READER, rules=DEFAULTS)
        seen += firings
    rules = [f.rule for f in seen]
    assert len(rules) == len(set(rules))  # once per stream
    # NaN reads every line whatever its order: it fires whenever the in-order fold does
    assert ("NaN" in rules) == ("NaN" in by_rule(run(lines)))
    # the other rules judge the lines that came in order, exactly as an in-order fold of those lines would
    _, expected = evaluate(None, in_order_part(batches), reader=READER, rules=DEFAULTS)
    assert verdicts(seen, ORDER_DEPENDENT) == verdicts(expected, ORDER_DEPENDENT)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(1, 30)), max_size=12), st.integers(3, 12))
def test_repeated_deliveries_change_no_verdict(repeats: list[tuple[int, int]], size: int) -> None:
    evs = events([*curve_with_everything(), *overfitting()])
    batches = [evs[i : i + size] for i in range(0, len(evs), size)]
    state: StreamState | None = None
    seen: list[Firing] = []
    folded: list[LogEvent] = []
    for index, batch in enumerate(batches):
        state, firings = evaluate(state, batch, reader=READER, rules=DEFAULTS)
        seen += firings
        folded += batch
        for start, length in repeats[index % 3 :: 3]:  # now and then, a slice of what was delivered before
            again = folded[start % len(folded) :][:length]
            state, firings = evaluate(state, again, reader=READER, rules=DEFAULTS)
            seen += firings
    once = run([e.message for e in evs])
    assert [(f.rule, f.line) for f in seen] == [(f.rule, f.line) for f in once]


def overfitting() -> list[str]:
    lines = []
    for epoch in range(60):
        train = 1.0 * math.exp(-epoch / 15) + 0.05
        lines += [keras(train)] * 4 + [keras(train, val=0.5 + 0.002 * (epoch - 25) ** 2)]
    return lines


def test_in_order_batches_give_the_verdicts_of_one_fold() -> None:
    evs = events(curve_with_everything())
    state: StreamState | None = None
    seen: list[Firing] = []
    for i in range(0, len(evs), 5):
        state, firings = evaluate(state, evs[i : i + 5], reader=READER, rules=DEFAULTS)
        seen += firings
    assert repr(seen) == repr(run(curve_with_everything()))


def test_state_is_bounded_whatever_the_log_length() -> None:
    sizes = []
    state: StreamState | None = None
    rng = random.Random(3)
    total = 0
    for n in (2_000, 18_000):  # each far beyond the longest window (2 x num_steps values)
        lines = [
            keras(0.3 * rng.uniform(0.9, 1.1), val=0.4) if i % 50 == 0 else keras(0.3 * rng.uniform(0.9, 1.1))
            for i in range(n)
        ]
        for i in range(0, n, 1000):
            state, _ = evaluate(state, events(lines[i : i + 1000], start=total + i), reader=READER, rules=DEFAULTS)
        total += n
        assert state is not None
        sizes.append(len(json.dumps(state.to_json())))
    assert state is not None
    assert state.lines == 20_000
    assert state is not None
    json.dumps(state.to_json(), allow_nan=False)  # plain JSON: no NaN or infinity is kept
    assert sizes[1] < 2 * sizes[0] < 4_000  # 2k lines or 20k: the same KB


def test_events_of_one_millisecond_split_across_batches_are_all_folded() -> None:
    same_ms = [LogEvent(str(i), 5, keras(0.5), line=i) for i in range(1, 5)]
    state, _ = evaluate(None, same_ms[:2], reader=READER, rules=DEFAULTS)
    state, _ = evaluate(state, same_ms[1:], reader=READER, rules=DEFAULTS)  # one repeated, two new
    assert state.lines == 4


def test_a_fold_leaves_the_state_it_folds_into_as_it_was() -> None:
    """`evaluate` forks the state, sharing its lists: neither the fold nor a mark on its result may change them."""
    evs = events(curve_with_everything())
    state: StreamState | None = None
    for start in range(0, len(evs), 7):
        before = None if state is None else json.dumps(state.to_json(), sort_keys=True)
        folded, firings = evaluate(state, evs[start : start + 7], reader=READER, rules=DEFAULTS)
        folded.mark(replace(firings[0], rule="StalledTrainingRule") if firings else stalled_firing())
        if state is not None:
            assert json.dumps(state.to_json(), sort_keys=True) == before
        state = folded
    assert state is not None
    assert set(state.fired) >= {"NaN", "Divergence", "StalledTrainingRule"}  # the batches did change their forks


def stalled_firing() -> Firing:
    return Firing("StalledTrainingRule", None, None, 1, "stall@0", 0, "notify", "log_rules.stalled", "clock", "quiet")


def _saved_digest(text: str) -> str:
    """An id, or a batch's ids a line each, as states save them (and as deployed guards saved them)."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@pytest.mark.parametrize("saved_ids", ["as now", "last_event alone"])
def test_events_already_folded_at_the_newest_millisecond_are_known_in_either_saved_form(saved_ids: str) -> None:
    first = [LogEvent(str(i), 1000 * i, keras(1.0 / i), line=i) for i in range(1, 4)]
    same_ms = [LogEvent(str(i), 5000, keras(0.2 + i / 100), line=i) for i in (4, 5)]
    state, _ = evaluate(None, first, reader=READER, rules=DEFAULTS)
    doc = state.to_json()
    # the one id at the newest millisecond as a digest: what a guard deployed before this one reads back
    assert (doc["ids"], doc["last_event"]) == ([_saved_digest("3")], "3")
    if saved_ids != "as now":
        doc["ids"] = []
    state = StreamState.from_json(doc)
    again, _ = evaluate(state, first[-1:], reader=READER, rules=DEFAULTS)
    assert again.lines == 3  # known: not folded twice
    state, _ = evaluate(state, same_ms, reader=READER, rules=DEFAULTS)
    assert (state.lines, state.last_event, state.ids) == (5, "5", [_saved_digest("4"), _saved_digest("5")])
    for repeat in (same_ms[:1], same_ms, [*first[-1:], *same_ms]):
        again, _ = evaluate(state, repeat, reader=READER, rules=DEFAULTS)
        assert again.to_json() == state.to_json()


def test_a_batch_keeps_a_digest_only_where_its_events_would_not_tell_a_redelivery() -> None:
    reader = LineReader((("loss", r" loss: (\S+)"), ("step", r"- (\S+)/step")))  # `3s/step`: not a number
    plain = [LogEvent(str(i), 1000 * i, keras(1.0 / i), line=i) for i in range(1, 8)]
    state, _ = evaluate(None, plain, reader=reader, rules=DEFAULTS)
    assert (state.batches, state.unparsed) == ([], 0)  # a repeat is told by its events: late, or at the newest ms
    odd = [LogEvent(str(i), 1000 * i, f"469/469 - 3s/step - loss: {1.0 / i:.4f}", line=i) for i in range(8, 11)]
    state, _ = evaluate(state, odd, reader=reader, rules=DEFAULTS)
    # the digest deployed guards saved for every batch: their states' digests still match their batches
    assert (state.batches, state.unparsed) == ([_saved_digest("\n".join(e.id for e in odd))], 3)
    newer = [LogEvent("11", 11_000, keras(0.09), line=11)]
    state, _ = evaluate(state, newer, reader=reader, rules=DEFAULTS)
    for repeat in (odd, plain, newer):  # late now, but for `newer`: NaN and patterns only, each counted once
        again, firings = evaluate(state, repeat, reader=reader, rules=DEFAULTS)
        assert firings == []
        assert again.to_json() == state.to_json()


def test_a_batch_of_more_ids_at_one_millisecond_than_a_state_keeps_is_known_by_its_digest() -> None:
    crowd = [LogEvent(str(i), 7, keras(0.5 + i / 1000), line=i) for i in range(1, 300)]
    state, _ = evaluate(None, crowd, reader=READER, rules=DEFAULTS)
    assert (state.lines, len(state.ids), len(state.batches)) == (299, 256, 1)
    again, _ = evaluate(state, crowd, reader=READER, rules=DEFAULTS)
    assert again.to_json() == state.to_json()


# --- the job's tag ---------------------------------------------------------------------------------------------


def diverging() -> list[str]:
    return [keras(v) for v in falling(20, end=0.4)] + [keras(0.4 * 1.5**k) for k in range(1, 8)]


def test_tag_off_turns_the_rules_off() -> None:
    assert run([*diverging(), "loss = nan"], tags={contract.LOG_RULES_TAG: "off"}) == []


def test_tag_sets_an_action_and_says_so() -> None:
    firing = by_rule(run(diverging(), tags={contract.LOG_RULES_TAG: "divergence=notify NaN=stop"}))["Divergence"]
    assert firing.action == "notify"
    assert firing.setting.endswith(f"tag {contract.LOG_RULES_TAG} Divergence=notify")


def test_tag_names_the_loss() -> None:
    lines = [f"{{'my_loss': {v:.4f}, 'loss': 0.5}}" for v in falling(20, end=0.4)]
    lines += [f"{{'my_loss': {0.4 * 1.5**k:.4f}, 'loss': 0.5}}" for k in range(1, 8)]
    assert "Divergence" not in by_rule(run(lines))
    assert by_rule(run(lines, tags={contract.LOG_RULES_TAG: "loss=my_loss"}))["Divergence"].metric == "my_loss"


@pytest.mark.parametrize("value", ["Divergence", "Divergence=explode", "loss", "bad name=stop"])
def test_bad_tag_is_a_problem_and_changes_nothing(value: str) -> None:
    overrides, problem = job_overrides({contract.LOG_RULES_TAG: value})
    assert overrides is None
    assert problem is not None
    assert contract.LOG_RULES_TAG in problem
    assert "\n" not in problem
    assert by_rule(run(diverging(), tags={contract.LOG_RULES_TAG: value}))["Divergence"].action == "stop"


@pytest.mark.parametrize(
    "value",
    [
        "Divergence=notify NaN=stop loss=my_loss val=val_loss",  # what a SageMaker tag value can hold (no comma)
        "Divergence=notify,NaN=stop,loss=my_loss,val=val_loss",
        " divergence = notify  nan=stop loss=my_loss  val=val_loss ",
    ],
)
def test_tag_items_by_spaces_or_commas(value: str) -> None:
    overrides, problem = job_overrides({contract.LOG_RULES_TAG: value})
    assert problem is None
    assert overrides is not None
    assert dict(overrides.actions) == {"Divergence": "notify", "NaN": "stop"}
    assert (overrides.loss, overrides.validation) == ("my_loss", "val_loss")


def test_tag_problem_shows_a_value_sagemaker_accepts() -> None:
    _, problem = job_overrides({contract.LOG_RULES_TAG: "Divergence"})
    assert problem is not None
    example = problem.split("e.g. ")[1].strip("`")
    assert re.fullmatch(r"[\w\s.:/=+\-@]*", example)  # SageMaker's tag value characters (API_Tag)


def test_no_tag_no_overrides() -> None:
    assert job_overrides({"team": "vision"}) == (None, None)


# --- the configuration section ---------------------------------------------------------------------------------


def test_defaults_follow_debugger_where_they_do_not_misfire() -> None:
    rules = GuardConfig.from_dict({}).log_rules
    assert (rules.loss_not_decreasing.num_steps, rules.loss_not_decreasing.diff_percent) == (10, 0.1)
    assert rules.loss_not_decreasing.increase_threshold_percent == 5
    assert (rules.overtraining.patience_train, rules.overtraining.patience_validation) == (5, 10)
    assert rules.overtraining.delta == 0.01
    assert (rules.stalled.threshold, rules.overfit.ratio_threshold, rules.nan.only_nan) == (1800, 0.1, False)
    assert (rules.nan.action, rules.divergence.action, rules.loss_not_decreasing.action) == ("stop", "stop", "notify")


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"patterns": [{"name": "x", "regex": "NCCL(("}]}, "log_rules.patterns[0].regex: not a valid"),
        ({"nan": {"tensor_regex": "["}}, "log_rules.nan.tensor_regex: not a valid"),
        ({"divergence": {"factor": 1}}, "log_rules.divergence.factor: must be more than 1"),
        ({"divergence": {"action": "explode"}}, "log_rules.divergence.action: must be one of stop, notify, dry_run"),
        ({"patterns": [{"name": "NaN", "regex": "x"}]}, "log_rules.patterns[0].name: 'NaN' is a built-in"),
        ({"loss_not_decreasing": {"diff_percent": 0}}, "log_rules.loss_not_decreasing.diff_percent: must be a percent"),
    ],
)
def test_bad_settings_name_the_field(doc: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError) as raised:
        GuardConfig.from_dict({"log_rules": doc})
    assert any(problem.startswith(expected) for problem in raised.value.problems), raised.value.problems


def test_ignored_rule_never_fires() -> None:
    rules = GuardConfig.from_dict({"log_rules": {"nan": {"action": "ignore"}}}).log_rules
    assert run(["loss = nan"], rules) == []


def test_dry_run_action_is_carried() -> None:
    rules = GuardConfig.from_dict({"log_rules": {"nan": {"action": "dry_run"}}}).log_rules
    assert [f.action for f in run(["loss = nan"], rules)] == ["dry_run"]


def test_a_states_copy_is_its_json_round_trip_and_shares_nothing_mutable() -> None:
    lines = [keras(v, v * 1.2) for v in falling(60)] + ["step 61 loss: nan"]
    state, _ = evaluate(None, events(lines), reader=READER, rules=DEFAULTS)
    assert state.loss is not None
    assert state.val is not None
    copied = state.copy()
    assert copied.to_json() == StreamState.from_json(state.to_json()).to_json() == state.to_json()
    for mine, theirs in ((copied.loss, state.loss), (copied.val, state.val)):
        assert mine is not None
        assert mine is not theirs
        assert {k: getattr(mine, k) for k in mine.__slots__ if k != "window"} == {
            k: getattr(theirs, k) for k in theirs.__slots__ if k != "window"
        }
        assert (list(mine.window), mine.window.maxlen) == (list(theirs.window), theirs.window.maxlen)
    before = json.dumps(state.to_json())
    copied.ids.append("x")
    copied.names.append("x")
    copied.fired["x"] = 1
    assert copied.loss is not None
    assert copied.val is not None
    copied.loss.window.append(9.0)
    copied.val.count += 1
    assert json.dumps(state.to_json()) == before


def test_the_plan_follows_the_tag_at_each_call_though_it_is_made_once() -> None:
    lines = [keras(v) for v in falling(30)] + [keras(math.nan)]
    assert [f.action for f in run(lines)] == ["stop"]
    assert [f.action for f in run(lines, tags={contract.LOG_RULES_TAG: "NaN=notify"})] == ["notify"]
    assert run(lines, tags={contract.LOG_RULES_TAG: "off"}) == []
    assert [f.action for f in run(lines)] == ["stop"]
    other = GuardConfig.from_dict({"log_rules": {"nan": {"action": "dry_run"}}}).log_rules
    assert [f.action for f in run(lines, rules=other)] == ["dry_run"]


# --- the evaluator's fast path reads as `scan` does ---------------------------------------------------------------
class _Scanning(LineReader):
    """A reader whose `scan` is its own: `evaluate` then reads every line through `scan`, none through `texts`."""

    def scan(self, message: str) -> tuple[list[tuple[str, float, str]], str | None]:
        return super().scan(message)


MIXED_LINES = [
    *(keras(v, v * 1.3) for v in falling(40)),
    "469/469 - 3s - loss: cat - val_loss: dog",  # two captures that are not numbers, on one line
    "469/469 - 3s - loss: 0.5 - val_loss: 1e999",  # a number float() takes to inf
    "Epoch 41/50",
    "step 41 train loss: 0.4",  # no definition matches: the built-in readers read it
    *(keras(v * 3, v) for v in falling(30, 0.4, 0.3)),
    "469/469 - 3s - loss: 0.41 - accuracy: nan - grad_loss: nan - val_loss: 0.5",  # a built-in reader's nan too
]


@pytest.mark.parametrize(
    "definitions",
    [
        (),
        (("loss", r" loss: (\S+)"), ("val_loss", r"val_loss: (\S+)")),  # name a training loss: they own the series
        (("val_loss", r"val_loss: (\S+)"),),  # validation only: the built-in readers keep the training loss
    ],
)
def test_the_fast_path_folds_each_line_as_scan_reads_it(definitions: tuple[tuple[str, str], ...]) -> None:
    folded = []
    for reader in (LineReader(definitions), _Scanning(definitions)):
        state, firings = None, []
        for start in range(0, len(MIXED_LINES), 7):
            state, new = evaluate(state, events(MIXED_LINES[start : start + 7], start), reader=reader, rules=DEFAULTS)
            firings += new
        assert state is not None
        folded.append((json.dumps(state.to_json(), sort_keys=True), [(f.rule, f.line, f.reader) for f in firings]))
    assert folded[0] == folded[1]
    assert folded[0][1]  # something fired: the comparison saw the rules at work


def test_a_line_whose_two_captures_are_not_numbers_is_counted_once_by_its_last() -> None:
    reader = LineReader((("loss", r" loss: (\S+)"), ("val_loss", r"val_loss: (\S+)")))
    state, _ = evaluate(None, events(["469/469 - 3s - loss: cat - val_loss: dog"]), reader=reader, rules=DEFAULTS)
    assert (state.unparsed, state.unparsed_sample) == (1, "val_loss: 469/469 - 3s - loss: cat - val_loss: dog")


def test_a_metric_no_rule_reads_is_still_named_in_each_stream_that_prints_it() -> None:
    rules = GuardConfig.from_dict({"log_rules": {"nan": {"action": "ignore"}}}).log_rules  # no NaN: no metric is read
    lines = [f"2/2 - 1s - loss: {v:.4f} - accuracy: 0.9 - train_loss: {v:.4f}" for v in falling(20)]
    first, _ = evaluate(None, events(lines), reader=READER, rules=rules)  # the plan learns what no rule reads
    second, _ = evaluate(None, events(["2/2 - 1s - loss: 0.5", *lines[:3]]), reader=READER, rules=rules)
    assert first.names == second.names == ["loss", "accuracy", "train_loss"]


def test_a_metric_the_nan_rule_watches_is_read_on_every_line() -> None:
    rules = GuardConfig.from_dict({"log_rules": {"nan": {"tensor_regex": "accuracy"}}}).log_rules
    lines = [f"2/2 - 1s - loss: {v:.4f} - accuracy: 0.9" for v in falling(20)] + [
        "2/2 - 1s - loss: 0.3 - accuracy: nan"
    ]
    for reader in (READER, LineReader()):  # the second run meets the plan's metrics already filed
        firings = [(f.rule, f.metric, f.line) for f in evaluate(None, events(lines), reader=reader, rules=rules)[1]]
        assert ("NaN", "accuracy", 21) in firings


def test_a_metric_no_rule_read_is_read_once_a_new_name_makes_it_the_validation_loss() -> None:
    rules = GuardConfig.from_dict({"log_rules": {"nan": {"action": "ignore"}}}).log_rules
    before = [f"[{i}]\ttrain-rmse:0.5\tvalidation-rmse:0.6\tvalidation-mae:0.4" for i in range(5)]
    state, _ = evaluate(None, events(before), reader=READER, rules=rules)  # validation-mae is read by no rule
    # train-mae outranks train-rmse as the loss, so validation-mae, printed after it on the line, becomes the validation
    after = events(["[5]\ttrain-mae:0.3\tvalidation-mae:0.45"], start=len(before))
    state, _ = evaluate(state, after, reader=READER, rules=rules)
    assert state.loss is not None
    assert state.val is not None
    assert (state.loss.name, state.val.name, state.val.count) == ("train-mae", "validation-mae", 1)


def test_a_log_of_ever_new_keys_files_a_bounded_number_of_them() -> None:
    from training_guard.domain import log_rules

    rules = LogRules()
    lines = [f"2/2 - 1s - loss: 0.5 - key{i}: 0.1 - other{i}: 0.2" for i in range(3_000)]
    evaluate(None, events(lines), reader=READER, rules=rules)
    plan = log_rules._plan(rules, None)
    assert plan is not None
    filed = [len(quiet) + len(loud) for quiet, loud in plan._quiet.values()]
    assert filed
    assert max(filed) <= log_rules.MAX_FILED


def test_a_firing_says_its_line_and_reader_when_it_has_them() -> None:
    fired = Firing(
        rule="NaN",
        metric="loss",
        value=math.nan,
        line=15,
        event_id="e",
        timestamp_ms=0,
        action="stop",
        setting="log_rules.nan",
        reader="keras",
        detail="loss is nan",
    )
    assert fired.said == "loss is nan (line 15, read by keras)"
    assert replace(fired, line=None).said == "loss is nan (read by keras)"
    assert replace(fired, line=None, reader="").said == "loss is nan"


def test_a_late_batch_with_a_capture_that_is_no_number_counts_it_once_however_often_delivered() -> None:
    reader = LineReader((("loss", r" loss: (\S+)"), ("step", r"- (\S+)/step")))
    state, _ = evaluate(None, [LogEvent("9", 9000, keras(0.5), line=9)], reader=reader, rules=DEFAULTS)
    late = [LogEvent("2", 2000, "469/469 - 3s/step - loss: 0.7000", line=2)]  # older than what was folded
    state, _ = evaluate(state, late, reader=reader, rules=DEFAULTS)
    assert state.unparsed == 1
    for _ in range(2):
        again, firings = evaluate(state, late, reader=reader, rules=DEFAULTS)
        assert firings == []
        assert again.to_json() == state.to_json()
