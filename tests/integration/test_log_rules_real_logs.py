"""The issue's behaviour (1), default configuration, on logs of real training runs (tests/data/training_logs/).

Each log's facts (its first nan line, where the loss stays at 4x its best, the validation minimum) are read from the
log itself with a regex of its own (bench/training_logs/facts.py), not from the rules under test.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.training_logs.facts import SERIES, series
from training_guard.config.model import GuardConfig
from training_guard.domain.log_rules import Firing
from training_guard_local.check_metrics import RulesRun, read_log, run_rules

LOGS = Path(__file__).resolve().parents[1] / "data" / "training_logs"
HEALTHY = (
    "pytorch_mnist_healthy",
    "pytorch_mnist_noisy",
    "xgboost_healthy",
    "lightgbm_healthy",
    "keras_healthy",
    "lightning_healthy",
    "huggingface_healthy",
)
OVERFITTING = ("pytorch_mlp_overfit", "xgboost_overfit", "lightgbm_overfit", "keras_overfit")
DIVERGING = ("pytorch_mlp_diverging", "huggingface_diverging")


def rules_on(file: str) -> RulesRun:
    path = LOGS / file
    with path.open("rb") as handle:
        kind, lines = read_log(handle, str(path))
        return run_rules(lines, source=str(path), kind=kind, config=GuardConfig())


def firings(file: str) -> list[Firing]:
    return [f for _, f in rules_on(file).firings]


def stops(found: list[Firing]) -> list[Firing]:
    return [f for f in found if f.action == "stop"]


def loss_and_validation(name: str) -> tuple[str, str | None]:
    prefix = max((p for p in SERIES if name.startswith(p)), key=len)
    return SERIES[prefix]


def test_the_nan_run_is_stopped_at_its_first_nan_line() -> None:
    loss = series(LOGS / "pytorch_mlp_nan.log", loss_and_validation("pytorch_mlp_nan")[0])
    first_nan = loss.first_nonfinite()
    assert first_nan == 15
    found = firings("pytorch_mlp_nan.log")
    [nan] = [f for f in found if f.rule == "NaN"]
    assert (nan.line, nan.action, nan.metric) == (first_nan, "stop", "loss")
    assert math.isnan(nan.value or 0.0)
    assert min(f.line or 0 for f in stops(found)) <= first_nan


def test_the_filter_log_events_json_gives_the_same_verdict_at_the_same_event() -> None:
    text = [(f.rule, f.line, f.action) for f in firings("pytorch_mlp_nan.log")]
    assert [(f.rule, f.line, f.action) for f in firings("pytorch_mlp_nan.filter-log-events.json")] == text


@pytest.mark.parametrize("name", DIVERGING)
def test_a_diverging_run_is_stopped_no_later_than_the_loss_at_4x_its_best(name: str) -> None:
    above = series(LOGS / f"{name}.log", loss_and_validation(name)[0]).stays_above(4.0)
    assert above is not None
    found = stops(firings(f"{name}.log"))
    assert found, f"{name}: never stopped; the loss stays at 4x its best {above[1]:g} from line {above[0]}"
    assert min(f.line or 0 for f in found) <= above[0]


@pytest.mark.parametrize("name", HEALTHY)
def test_a_healthy_run_is_never_stopped(name: str) -> None:
    run = rules_on(f"{name}.log")
    [stream] = run.streams.values()
    assert stream.state is not None
    assert stream.state.loss is not None, f"{name}: no loss read, nothing judged"
    assert [(f.rule, f.line, f.detail) for _, f in run.firings if f.action == "stop"] == []


@pytest.mark.parametrize("name", OVERFITTING)
def test_overfit_fires_after_the_validation_minimum_never_before(name: str) -> None:
    validation = loss_and_validation(name)[1]
    assert validation is not None
    minimum, _ = series(LOGS / f"{name}.log", validation).best()
    found = firings(f"{name}.log")
    overfit = [f for f in found if f.rule == "Overfit"]
    assert len(overfit) == 1, found
    assert overfit[0].line is not None
    assert overfit[0].line > minimum
    assert stops(found) == []


def test_the_seeds_lr_0_1_run_is_a_loss_that_does_not_decrease_not_a_divergence() -> None:
    # The seed's MNIST job at learning rate 0.1: the loss sits at chance (ln 10 = 2.30) and never reaches 4x its best.
    found = {f.rule: f for f in firings("pytorch_mnist_lr0.1.log")}
    assert "LossNotDecreasing" in found
    assert "NaN" not in found
    assert "Divergence" not in found
    as_json = [(f.rule, f.line, f.action) for f in firings("pytorch_mnist_lr0.1.get-log-events.json")]
    assert as_json == [(f.rule, f.line, f.action) for f in found.values()]
