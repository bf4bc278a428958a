"""What the line readers take from each common format, and how the job's own definitions win."""

from __future__ import annotations

import math

import pytest

from training_guard.config.model import LogRules
from training_guard.domain.log_lines import DefinitionsError, LineReader, Point, loss_metrics
from training_guard.domain.log_rules import LogEvent, evaluate


def points(message: str, definitions: tuple[tuple[str, str], ...] = ()) -> list[tuple[str, float, str]]:
    return [(p.metric, p.value, p.reader) for p in LineReader(definitions).read(message)]


def test_hugging_face_trainer_dict_lines() -> None:
    line = "{'loss': 0.6931, 'grad_norm': 1.25, 'learning_rate': 4.5e-05, 'epoch': 0.5}"
    assert points(line) == [
        ("loss", 0.6931, "huggingface"),
        ("grad_norm", 1.25, "huggingface"),
        ("learning_rate", 4.5e-05, "huggingface"),
        ("epoch", 0.5, "huggingface"),
    ]
    (eval_loss, runtime) = points("{'eval_loss': nan, 'eval_runtime': 1.5}")
    assert eval_loss[0] == "eval_loss"
    assert math.isnan(eval_loss[1])
    assert runtime == ("eval_runtime", 1.5, "huggingface")


def test_transformers_5_quotes_the_values() -> None:
    line = "{'loss': '2.192', 'grad_norm': '1.151', 'learning_rate': '0.0049', 'epoch': '0.1111'}"
    assert points(line)[:2] == [("loss", 2.192, "huggingface"), ("grad_norm", 1.151, "huggingface")]
    ((metric, value, _), *_) = points("{'loss': 'nan', 'epoch': '4'}")
    assert metric == "loss"
    assert math.isnan(value)


@pytest.mark.parametrize(
    "line",
    [
        "469/469 [==============================] - 3s 6ms/step - loss: 0.2345 - accuracy: 0.9100 - val_loss: 0.3100",
        "469/469 ━━━━━━━━━━━━━━━━━━━━ 3s 6ms/step - accuracy: 0.9100 - loss: 0.2345 - val_loss: 0.3100",
        "469/469 - 3s - loss: 0.2345 - accuracy: 0.9100 - val_loss: 0.3100 - 3s/epoch - 6ms/step",
    ],
)
def test_keras_progress_and_epoch_lines(line: str) -> None:
    read = {metric: (value, reader) for metric, value, reader in points(line)}
    assert read == {"loss": (0.2345, "keras"), "accuracy": (0.91, "keras"), "val_loss": (0.31, "keras")}


def test_keras_verbose_1_with_cloudwatch_escapes() -> None:
    line = (
        "#033[1m10/12#033[0m #033[32m━━━━━━━━━━━━━━━━#033[0m#033[37m━━━━#033[0m #033[1m0s#033[0m 6ms/step - "
        "accuracy: 0.2672 - loss: 2.1917 #010#010#010#010"
    )
    assert points(line) == [("accuracy", 0.2672, "keras"), ("loss", 2.1917, "keras")]


def test_lightning_progress_bar() -> None:
    line = (
        "Epoch 0:  50%|█████     | 50/100 [00:01<00:01, 30.00it/s, loss=0.123, v_num=0, train_loss=0.12, val_loss=nan]"
    )
    read = points(line)
    assert read[:3] == [("loss", 0.123, "lightning"), ("v_num", 0.0, "lightning"), ("train_loss", 0.12, "lightning")]
    assert read[3][0] == "val_loss"
    assert math.isnan(read[3][1])


@pytest.mark.parametrize("tab", ["#011", "\t"])
def test_xgboost_rounds_with_cloudwatch_tab_or_real_tab(tab: str) -> None:
    line = f"[12]{tab}train-rmse:0.1{tab}validation-rmse:0.2"
    assert points(line) == [("train-rmse", 0.1, "xgboost"), ("validation-rmse", 0.2, "xgboost")]


def test_lightgbm_rounds() -> None:
    assert points("[10]\tvalid_0's l2: 0.123") == [("valid_0-l2", 0.123, "lightgbm")]
    assert points("[10]#011training's binary_logloss: 0.3#011valid_1's binary_logloss: 0.35") == [
        ("training-binary_logloss", 0.3, "lightgbm"),
        ("valid_1-binary_logloss", 0.35, "lightgbm"),
    ]


def test_sagemaker_builtin_quality_metric() -> None:
    line = (
        "[12/05/2026 10:00:00 INFO 140] #quality_metric: host=algo-1, epoch=0, batch=10 train "
        "binary_classification_cross_entropy_objective <loss>=0.69"
    )
    assert points(line) == [("train:objective_loss", 0.69, "sagemaker")]


@pytest.mark.parametrize(
    ("line", "metric"),
    [
        ("loss = nan", "loss"),
        ("step 3 loss: NaN", "loss"),
        ("train loss: inf", "train loss"),
        ("Train Epoch: 1 [0/60000 (0%)]#011Loss: -nan", "Loss"),
    ],
)
def test_generic_loss_line_saying_nan(line: str, metric: str) -> None:
    ((name, value, reader),) = points(line)
    assert (name, reader) == (metric, "generic")
    assert not math.isfinite(value)


def test_generic_reads_a_plain_pytorch_loss() -> None:
    assert points("Train Epoch: 1 [0/60000 (0%)]#011Loss: 2.305") == [("Loss", 2.305, "generic")]


@pytest.mark.parametrize(
    "line",
    [
        "2026-12-05 10:00:00,000 - root - INFO - Starting training",
        "INFO loss_scale: 65536",
        "Downloading data from s3://bucket/train [12 files]",
        "[12:00:01] WARNING: ../src/learner.cc:767: Parameters: { silent } are not used.",
        "",
    ],
)
def test_chatter_is_no_point(line: str) -> None:
    assert points(line) == []


def test_definitions_naming_the_loss_are_the_jobs_series() -> None:
    definitions = (("train:loss", r"- loss: ([0-9.]+)"),)
    line = "469/469 - 3s - loss: 0.2345 - accuracy: 0.9100 - val_loss: 0.3100"
    assert points(line, definitions) == [("train:loss", 0.2345, "MetricDefinitions")]
    # a line the definitions do not match is read by the built-in readers
    assert points("{'eval_loss': 0.5}", definitions) == [("eval_loss", 0.5, "huggingface")]


def test_definitions_win_for_the_metric_they_name() -> None:
    definitions = (("acc", r"- accuracy: ([0-9.]+)"),)
    line = "469/469 - 3s - loss: 0.2345 - accuracy: 0.9100 - val_loss: 0.3100"
    assert points(line, definitions) == [
        ("acc", 0.91, "MetricDefinitions"),
        ("loss", 0.2345, "keras"),
        ("val_loss", 0.31, "keras"),
    ]


def test_a_nan_the_definitions_cannot_capture_is_still_read() -> None:
    definitions = (("train:loss", r"loss: ([0-9.]+)"),)  # matches val_loss's number: the NaN is elsewhere
    read = points("469/469 - 3s - loss: nan - val_loss: 0.3100", definitions)
    assert read[0] == ("train:loss", 0.31, "MetricDefinitions")
    assert any(m == "loss" and math.isnan(v) and r == "keras" for m, v, r in read)


def test_sagemaker_xgboost_definitions_with_011() -> None:
    definitions = (("validation:rmse", r".*\[[0-9]+\].*#011validation-rmse:(\S+)"),)
    read = points("[3]#011train-rmse:0.5#011validation-rmse:0.7", definitions)
    assert read == [("validation:rmse", 0.7, "MetricDefinitions"), ("train-rmse", 0.5, "xgboost")]


def test_a_capture_that_is_not_a_number_is_reported_not_read() -> None:
    reader = LineReader((("cat", r"cat=(\S+)"),))
    assert reader.scan("cat=dog") == ([], "cat")
    assert reader.read("cat=dog") == ()
    assert reader.read("cat=3") == (Point("cat", 3.0, "MetricDefinitions"),)


@pytest.mark.parametrize(
    ("definitions", "words"),
    [
        ((("train:loss", "loss: ([0-9"),), ["'train:loss'", "not a valid regular expression"]),
        ((("train:loss", "loss: [0-9.]+"),), ["'train:loss'", "no capture group"]),
    ],
)
def test_bad_definitions_name_the_metric(definitions: tuple[tuple[str, str], ...], words: list[str]) -> None:
    with pytest.raises(DefinitionsError) as raised:
        LineReader(definitions)
    assert all(word in str(raised.value) for word in words)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["epoch", "loss", "grad_norm", "eval_loss", "learning_rate"], ("loss", "eval_loss")),
        (["accuracy", "loss", "val_accuracy", "val_loss"], ("loss", "val_loss")),
        (["train_loss_step", "loss", "v_num", "val_loss", "train_loss_epoch"], ("loss", "val_loss")),
        (["train-error", "validation-error", "train-rmse", "validation-rmse"], ("train-rmse", "validation-rmse")),
        (["train-auc", "validation-auc"], (None, None)),
        (["training-l2", "valid_1-l2"], ("training-l2", "valid_1-l2")),
        (["train:objective_loss", "validation:objective_loss"], ("train:objective_loss", "validation:objective_loss")),
        (["accuracy", "epoch"], (None, None)),
    ],
)
def test_loss_recognised_by_name_whatever_the_order(names: list[str], expected: tuple[str, str]) -> None:
    assert loss_metrics(names, loss=None, validation=None) == expected
    assert loss_metrics(reversed(names), loss=None, validation=None) == expected


def test_configured_loss_wins_and_picks_its_validation() -> None:
    names = ["train-rmse", "validation-rmse", "train-mae", "validation-mae"]
    assert loss_metrics(names, loss="train-mae", validation=None) == ("train-mae", "validation-mae")
    assert loss_metrics(names, loss="my_loss", validation="my_val") == ("my_loss", "my_val")


def test_a_subclass_sees_every_line_the_evaluator_reads() -> None:
    class Counting(LineReader):
        def __init__(self) -> None:
            super().__init__((("train:loss", r"loss: ([0-9.]+)"),))
            self.seen: list[str] = []

        def scan(self, message: str) -> tuple[list[tuple[str, float, str]], str | None]:
            self.seen.append(message)
            return super().scan(message)

    reader = Counting()
    lines = ["loss: 0.5", "chatter", "loss: 0.4"]
    evaluate(None, [LogEvent(str(i), i, m) for i, m in enumerate(lines)], reader=reader, rules=LogRules())
    assert reader.seen == lines


@pytest.mark.parametrize(
    "template",
    [
        "{{'{key}': 1.0, 'loss': 0.5}}",
        "[3]\t{key}:1.0\ttrain-rmse:0.5",
        "100/100 - 1s - {key}: 1.0 - loss: 0.5",
        "10.0it/s, {key}=1.0, loss=0.5]",
        "{key} loss: 0.5",
    ],
)
def test_a_name_is_never_longer_than_a_metric_name_can_be(template: str) -> None:
    read = points(template.format(key="k" + "x" * 10_000))
    assert read
    assert all(len(metric) <= 255 for metric, _, _ in read)
    assert ("loss", 0.5) in [(m, v) for m, v, _ in read] or ("train-rmse", 0.5) in [(m, v) for m, v, _ in read]
