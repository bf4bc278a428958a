from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from training_guard_local.check_metrics import DefinitionsError, check, load_definitions, sparkline

SEED_LINE = "Train_error=0.138318;  Valid_error=0.324557;"


def test_the_seed_example_yields_both_metrics() -> None:
    defs = load_definitions(
        '[{"Name": "train:error", "Regex": "Train_error=(.*?);"}, {"Name": "validation:error", "Regex": "Valid_error=(.*?);"}]'
    )
    train, valid = check(defs, [SEED_LINE])
    assert (train.values, valid.values) == ([0.138318], [0.324557])
    assert train.warnings() == valid.warnings() == []


def test_a_greedy_capture_that_swallows_the_line_is_called_out() -> None:
    [report] = check(load_definitions('[{"Name": "e", "Regex": "Train_error=(.*);"}]'), [SEED_LINE])
    assert report.values == []
    assert report.non_numeric == ["0.138318;  Valid_error=0.324557"]
    assert any("matches too much" in w for w in report.warnings())


def test_nan_and_inf_are_counted_apart_and_warned_about() -> None:
    lines = ["loss=0.5;", "loss=nan;", "loss=inf;", "loss=-Infinity;", "loss=0.25;"]
    [report] = check(load_definitions('[{"Name": "loss", "Regex": "loss=(.*?);"}]'), lines)
    assert report.values == [0.5, 0.25]
    assert report.non_finite == ["nan", "inf", "-Infinity"]
    assert report.as_dict() == {
        "name": "loss",
        "count": 2,
        "first": 0.5,
        "last": 0.25,
        "warnings": [
            "3 capture(s) are not finite ('nan', 'inf', ...): CloudWatch accepts no nan or inf, so these datapoints are dropped"
        ],
    }


def test_a_regex_that_never_matches_is_reported() -> None:
    [report] = check(load_definitions('[{"Name": "acc", "Regex": "accuracy=([0-9.]+)"}]'), [SEED_LINE])
    assert report.warnings() == ["the regex never matches a line of this log"]


def test_an_algorithm_specification_is_accepted_as_definitions() -> None:
    defs = load_definitions('{"TrainingImage": "x", "MetricDefinitions": [{"Name": "a", "Regex": "a=(\\\\d+)"}]}')
    assert [d.name for d in defs] == ["a"]


def test_what_describe_training_job_prints_is_accepted_as_definitions(tmp_path: Path) -> None:
    described = {  # the shape of `aws sagemaker describe-training-job --training-job-name NAME`
        "TrainingJobName": "mnist-1",
        "TrainingJobArn": "arn:aws:sagemaker:eu-west-1:123456789012:training-job/mnist-1",
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.1-gpu-py310",
            "TrainingInputMode": "File",
            "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}],
            "EnableSageMakerMetricsTimeSeries": True,
        },
        "TrainingJobStatus": "Completed",
    }
    path = tmp_path / "job.json"
    path.write_text(json.dumps(described))
    assert [d.name for d in load_definitions(str(path))] == ["train:loss"]
    del described["AlgorithmSpecification"]["MetricDefinitions"]  # type: ignore[attr-defined]
    path.write_text(json.dumps(described))
    with pytest.raises(DefinitionsError, match="the job's AlgorithmSpecification has no MetricDefinitions"):
        load_definitions(str(path))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "non-empty list"),
        ('{"Name": "a"}', 'got {"Name": "a"}'),
        ("[null]", 'definitions[0] must be {"Name": "...", "Regex": "..."}, got null'),
        ('[{"Name": "a", "Regex": true}]', 'got {"Name": "a", "Regex": true}'),
        ('[{"Name": "a"}]', 'definitions[0] must be {"Name"'),
        ('[{"Name": "a", "Regex": "a=("}]', "definitions[0] (a): invalid regex"),
        ('[{"Name": "a", "Regex": "a=\\\\d+"}]', "definitions[0] (a): the regex has no capture group"),
        ("[1,", "--definitions: not JSON (Expecting value at line 1 column 4)"),
        ("- Name: loss\n  Regex: loss=(.*?);", "--definitions: looks like YAML; metric definitions are JSON"),
        ("/nonexistent/defs.json", "/nonexistent/defs.json: cannot read"),
    ],
)
def test_bad_definitions_are_named(text: str, message: str) -> None:
    with pytest.raises(DefinitionsError, match=re.escape(message)):
        load_definitions(text)


def test_sparkline_shape() -> None:
    assert sparkline([]) == ""
    assert sparkline([1, 1, 1]) == "▄▄▄"
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert len(sparkline(list(range(1000)))) == 40
    assert sparkline(list(range(1000)))[-1] == "█"
