"""`training-guard simulate`: replay files through the real handler on the emulation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import EVENTS_DIR, load_event, with_detail
from training_guard_local.cli import main

VANISHING = str(EVENTS_DIR / "vanishing_gradient_issues_found.json")
RULE_ERROR = str(EVENTS_DIR / "rule_error.json")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]], str]:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def test_issues_found_three_times_stops_once_and_a_later_rule_error_folds_into_the_stop(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, results, _ = run(capsys, VANISHING, VANISHING, VANISHING, RULE_ERROR)
    assert code == 0
    assert [r["stopped"] for r in results] == [True, False, False, False]
    assert [r["notifications"] for r in results] == [["issues_found"], [], [], []]
    assert [r["duplicates"] for r in results] == [0, 1, 1, 0]
    assert results[3]["folded"] == ["t#pytorch-mnist-lr01-2026-11-30-02-10-00-123#debugger#ExplodingTensor#Error"]
    assert all(r["error"] is None for r in results)
    assert all(r["job"] == "pytorch-mnist-lr01-2026-11-30-02-10-00-123" for r in results)


def test_a_rule_error_only_notifies(capsys: pytest.CaptureFixture[str]) -> None:
    code, [result], _ = run(capsys, RULE_ERROR)
    assert code == 0
    assert (result["stopped"], result["notifications"], result["outcomes"]) == (False, ["rule_error"], ["notified"])


def test_a_file_may_hold_an_array_of_events_processed_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    timeline = tmp_path / "timeline.json"
    finding = load_event("vanishing_gradient_issues_found")
    timeline.write_text(
        json.dumps([finding, finding, with_detail(finding, TrainingJobStatus="Failed", FailureReason="x")])
    )
    code, results, _ = run(capsys, str(timeline))
    assert code == 0
    assert [r["stopped"] for r in results] == [True, False, False]
    assert results[2]["notifications"] == ["job_failed"]


def test_an_unusable_event_is_reported_and_the_replay_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([{"source": "my.app"}, load_event("rule_error")]))
    code, results, _ = run(capsys, str(broken))
    assert code == 0
    assert results[0]["error"].startswith("not a training job state change")
    assert results[0]["stopped"] is False
    assert results[1]["notifications"] == ["rule_error"]


def test_config_file_applies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "guard.json"
    config.write_text(json.dumps({"dry_run": True}))
    _, [result], _ = run(capsys, "--config", str(config), VANISHING)
    assert result["stopped"] is False
    assert result["outcomes"] == ["would_stop"]


def test_the_config_file_layers_over_cdk_json_as_the_deploy_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Routing to cdk.json's webhook `default` is valid only over cdk.json, which declares it (as `make plan CONFIG=`).
    config = tmp_path / "guard.json"
    config.write_text(json.dumps({"slack": {"by_severity": {"critical": "default"}}, "dry_run": True}))
    cdk_json = tmp_path / "project" / "cdk.json"
    cdk_json.parent.mkdir()
    cdk_json.write_text(
        json.dumps({"context": {"training-guard": {"slack": {"webhooks": {"default": {}}}, "dry_run": False}}})
    )
    monkeypatch.chdir(cdk_json.parent)
    code, [result], err = run(capsys, "--config", str(config), VANISHING)
    assert (code, err) == (0, "")
    assert result["outcomes"] == ["would_stop"]  # the file's dry_run over cdk.json's
    # without the file: cdk.json's own configuration, as a deploy without CONFIG=
    code, [result], _ = run(capsys, VANISHING)
    assert (code, result["outcomes"]) == (0, ["stopped"])
    # outside the project folder there is no cdk.json to layer over: the file alone
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "--config", str(config), VANISHING)
    assert code == 2
    assert "names no webhook in slack.webhooks: 'default'" in err
    # the context given as JSON text (as `-c training-guard='{...}'` gives it) is layered under the file too
    cdk_json.write_text(
        json.dumps({"context": {"training-guard": json.dumps({"slack": {"webhooks": {"default": {}}}})}})
    )
    monkeypatch.chdir(cdk_json.parent)
    code, [result], err = run(capsys, "--config", str(config), VANISHING)
    assert (code, err, result["outcomes"]) == (0, "", ["would_stop"])
    # a context that is no object fails as the deploy fails
    cdk_json.write_text(json.dumps({"context": {"training-guard": [1]}}))
    code, _, err = run(capsys, "--config", str(config), VANISHING)
    assert code == 2
    assert "cdk.json context 'training-guard' is invalid" in err
    # an invalid cdk.json is blamed by name
    cdk_json.write_text(json.dumps({"context": {"training-guard": {"dry_run": "yes"}}}))
    monkeypatch.chdir(cdk_json.parent)
    code, _, err = run(capsys, VANISHING)
    assert code == 2
    assert "cdk.json context 'training-guard'" in err
    assert "dry_run: must be true or false" in err


def test_non_json_input_exits_2_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, results, err = run(capsys, VANISHING, str(bad))
    assert code == 2
    assert results == []  # nothing is played before every input was read
    assert err.count("\n") == 1
    assert str(bad) in err
    assert "not JSON" in err


def test_unreadable_input_exits_2_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.json"
    code, _, err = run(capsys, str(missing))
    assert code == 2
    assert err.strip() == f"training-guard simulate: {missing}: cannot read events: No such file or directory"


def test_invalid_config_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "guard.json"
    config.write_text(json.dumps({"rules": {"actions": {"VanishingGradient": "halt"}}}))
    code, _, err = run(capsys, "--config", str(config), VANISHING)
    assert code == 2
    assert "rules.actions.VanishingGradient: must be one of stop, notify, ignore" in err
    assert err.count("\n") == 1


def test_slack_preview_prints_what_slack_would_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slack-preview", RULE_ERROR, VANISHING, VANISHING]) == 0
    out = capsys.readouterr().out
    assert out.count("#default") == 2  # the duplicate produced no second message
    assert "🔴 Stopped pytorch-mnist-lr01-2026-11-30-02-10-00-123: rule VanishingGradient found issues" in out
    assert "What the guard did: Stopped the job." in out
    assert "Rule ExplodingTensor (debugger) → Error" in out


def test_slack_preview_writes_an_html_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "preview.html"
    assert main(["slack-preview", "--html", str(target), VANISHING]) == 0
    page = target.read_text()
    assert page.startswith("<!doctype html>")
    assert "<h3>🔴 Stopped pytorch-mnist" in page
    assert "<b>What the guard did:</b> Stopped the job." in page
    assert "wrote 1 message(s)" in capsys.readouterr().err


LOG = str(EVENTS_DIR.parent / "logs" / "mnist_lr01.log")
DEFS = str(EVENTS_DIR.parent / "logs" / "mnist_metric_definitions.json")


def test_check_metrics_reports_each_metric_with_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-metrics", "--definitions", DEFS, "--log", LOG]) == 0
    out = capsys.readouterr().out
    assert "train:loss: 27 values, first 2.05238, last 606.261" in out
    assert "3 capture(s) are not finite ('nan')" in out
    assert "validation:accuracy: no values" in out


def test_check_metrics_json_is_one_object_per_metric(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-metrics", "--json", "--definitions", DEFS, "--log", LOG]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["name"] for r in rows] == ["train:loss", "train:error", "validation:error", "validation:accuracy"]
    assert rows[1] == {"name": "train:error", "count": 5, "first": 0.150744, "last": 0.169899, "warnings": []}
    assert rows[3]["count"] == 0
    assert rows[3]["warnings"] == ["the regex never matches a line of this log"]
    assert set(rows[0]) == {"name", "count", "first", "last", "warnings"}


def test_check_metrics_strict_fails_on_warnings_and_bad_input_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-metrics", "--strict", "--definitions", DEFS, "--log", LOG]) == 1
    assert main(["check-metrics", "--definitions", '[{"Name": "x", "Regex": "("}]', "--log", LOG]) == 2
    assert "definitions[0] (x): invalid regex" in capsys.readouterr().err
    assert main(["check-metrics", "--definitions", DEFS, "--log", "/nonexistent.log"]) == 2


@pytest.mark.parametrize("ended", ["Completed", "Failed"])
def test_a_late_in_progress_event_does_not_revive_an_ended_job(
    ended: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # SageMaker refuses to stop a job that has ended: the finding arrives too late to stop anything.
    finding = load_event("vanishing_gradient_issues_found")
    end = with_detail(finding, TrainingJobStatus=ended, SecondaryStatus=ended, DebugRuleEvaluationStatuses=[])
    timeline = tmp_path / "late.json"
    timeline.write_text(json.dumps([end, finding]))
    code, results, _ = run(capsys, str(timeline))
    assert code == 0
    assert [r["job_status"] for r in results] == [ended, ended]
    assert results[1]["stopped"] is False
    assert results[1]["outcomes"] == ["already_ended"]


def test_a_stop_reports_spend_so_far_and_avoided_from_the_shipped_price_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ml.g5.2xlarge in us-east-1 is in the shipped table at $1.515 an hour (moto has no Price List API). Trained
    # 215 s at the event's time (02:11:30 to 02:15:05): $0.09 so far; 86,185 s left of MaxRuntimeInSeconds: $36.27.
    event = tmp_path / "g5.json"
    finding = load_event("vanishing_gradient_issues_found")
    event.write_text(
        json.dumps(with_detail(finding, ResourceConfig={"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1}))
    )
    code, [line], _ = run(capsys, str(event))
    assert (code, line["outcomes"]) == (0, ["stopped"])
    assert line["spend"] == {
        "so_far_usd": 0.09,
        "avoided_usd": 36.27,
        "price_source": "shipped price table (2026-08-20, second-hand)",
    }


def test_a_stop_of_an_ml_p3_2xlarge_job_reports_spend_at_its_cited_price(capsys: pytest.CaptureFixture[str]) -> None:
    # The shipped event trains 1 x ml.p3.2xlarge; eu-west-1's entry is $4.131 an hour (an AWS bill, December 2023,
    # cited in price_data/training_prices.py). 215 s trained: $0.25; 86,185 s of MaxRuntimeInSeconds left: $98.90.
    code, [line], _ = run(capsys, "--region", "eu-west-1", str(EVENTS_DIR / "vanishing_gradient_issues_found.json"))
    assert (code, line["outcomes"], line["region"]) == (0, ["stopped"], "eu-west-1")
    assert line["spend"] == {
        "so_far_usd": 0.25,
        "avoided_usd": 98.9,
        "price_source": "shipped price table (2023-12-31, second-hand)",
    }


def test_spend_without_a_price_is_null_and_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # ml.c4.8xlarge has no entry in the shipped table, and the emulation reaches no Price List API.
    resources = {"InstanceType": "ml.c4.8xlarge", "InstanceCount": 1}
    timeline = tmp_path / "c4.json"
    timeline.write_text(
        json.dumps(
            [
                with_detail(load_event("vanishing_gradient_issues_found"), ResourceConfig=resources),
                with_detail(load_event("failed"), ResourceConfig=resources),
            ]
        )
    )
    code, [stop, failed], _ = run(capsys, str(timeline))
    assert (code, stop["outcomes"], failed["outcomes"]) == (0, ["stopped"], ["notified"])
    unknown = {"so_far_usd": None, "avoided_usd": None, "price_source": None}
    assert stop["spend"] == {**unknown, "why": "no price for ml.c4.8xlarge"}
    # a failed job's notification: no stop in question, so nothing avoided (not applicable, not unknown)
    assert failed["spend"] == {**unknown, "why": "no price for ml.c4.8xlarge; no stop in question: nothing avoided"}


def test_a_line_without_a_notification_carries_no_spend(capsys: pytest.CaptureFixture[str]) -> None:
    code, [line], _ = run(capsys, str(EVENTS_DIR / "in_progress_no_rule_lists.json"))
    assert (code, line["notifications"], line["spend"]) == (0, [], None)


def test_slack_preview_says_why_nothing_was_posted(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = str(EVENTS_DIR / "in_progress_no_rule_lists.json")
    assert main(["slack-preview", quiet]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"training-guard slack-preview: nothing to post: {quiet}: job pytorch-mnist-lr01-2026-11-30-02-10-00-123 "
        "(InProgress): no transition this configuration announces\n"
    )


@pytest.mark.parametrize("command", ["simulate", "slack-preview"])
@pytest.mark.parametrize("part", ["detail", "rule status", "alarm detail"])
def test_a_bare_detail_is_told_to_be_wrapped(
    command: str, part: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = load_event("vanishing_gradient_issues_found")["detail"]
    alarm = json.loads((EVENTS_DIR / "alarms" / "per_job_train_loss.json").read_text())["detail"]
    given = {"detail": job, "rule status": job["DebugRuleEvaluationStatuses"][0], "alarm detail": alarm}[part]
    path = tmp_path / "event.json"
    path.write_text(json.dumps([given]))
    assert main([command, str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"training-guard {command}: {path}[0]: this looks like an event's detail: wrap it in an ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("value", "kind"), [('"Failed"', "a string"), ("42", "a number"), ("true", "a boolean"), ("null", "null")]
)
@pytest.mark.parametrize("command", ["simulate", "slack-preview"])
def test_a_file_of_one_value_that_is_no_event_is_bad_input(
    command: str, value: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "value.json"
    path.write_text(value)
    assert main([command, str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"training-guard {command}: {path}: holds {kind}; a file holds one event (a JSON object) or a JSON array "
        "of events\n"
    )
