"""`training-guard demo --scenario slack_app`: Slack app mode end to end on the emulation.

The demo synthesizes the stack in app mode, runs the real handlers on moto with the local Slack Web API
(slack_web_api.py) behind slack_sdk, and presses Stop now with a signed request through the real acknowledgement
and click worker. What the Web API recorded is the evidence here: one parent per job, edited with chat.update,
replies carrying thread_ts, the chart through the three upload calls into the thread; the click's one
StopTrainingJob, attributed `slack:<user>`.

The README's picture of the resulting threads is made from the same run, by headless Chromium:

    .venv/bin/python -m tests.e2e.test_demo_slack_app docs/slack-thread.png
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_readme import check_demo_block
from tests.e2e.test_report_chromium import find_chromium, read_png, rgb, screenshot
from training_guard import contract
from training_guard_local import metric_widget_ext, sagemaker_ext
from training_guard_local.cli import demo_of
from training_guard_local.demo import Demo
from training_guard_local.emulator import ACCOUNT, REGION
from training_guard_local.scenario import ScenarioError, parse, resolve
from training_guard_local.slack_preview import thread_page
from training_guard_local.slack_web_api import DEFAULT_CHANNEL, Message

pytestmark = pytest.mark.e2e

REPOSITORY = Path(__file__).resolve().parents[2]
ALICE = "U0ALICE"
# The page's window: the BERT job's thread, its chart shown at most 520 pixels wide
WINDOW = (900, 1860)
STAND_IN = "a stand-in for CloudWatch's GetMetricWidgetImage (moto has none), drawn from the emulated datapoints"
STOP_NOW_RED = "#e01e5a"  # slack_preview's danger button
CHART_BLUE = (31, 119, 180)  # metric_widget_ext's first line
THRESHOLD_RED = (214, 39, 40)


@dataclass
class Run:
    code: int
    output: str
    demo: Demo
    names: dict[str, str]  # scenario key -> job name
    stop_calls: dict[str, int]  # job name -> StopTrainingJob calls, read right after the run


def run_demo(folder: Path) -> Run:
    out = io.StringIO()
    demo = demo_of("slack_app", out=out, folder=folder)  # what `training-guard demo --scenario slack_app` runs
    scenario = demo.scenario
    code = demo.run()
    names = {key: job.name for key, job in scenario.jobs.items()}
    calls = {name: len(sagemaker_ext.stop_calls(ACCOUNT, REGION, name)) for name in names.values()}
    return Run(code, out.getvalue(), demo, names, calls)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_demo(tmp_path_factory.mktemp("slack-app-demo"))


def test_the_readmes_slack_app_block_is_what_the_demo_printed(run: Run) -> None:
    check_demo_block("slack_app", run.output)


def parent_of(run: Run, key: str) -> Message:
    assert run.demo.app is not None
    [parent] = [m for m in run.demo.app.api.history(DEFAULT_CHANNEL) if run.names[key] in m.text]
    return parent


def test_the_demo_meets_its_expectations(run: Run) -> None:
    assert run.code == 0, run.output
    assert "All expectations met." in run.output


def test_each_job_has_one_parent_updated_in_place_with_chat_update(run: Run) -> None:
    assert run.demo.app is not None
    api = run.demo.app.api
    assert len(api.history(DEFAULT_CHANNEL)) == 2  # two jobs, two threads
    updated = {(c.params["channel"], c.params["ts"]) for c in api.called("chat.update") if c.error is None}
    for key in ("resnet", "bert"):
        parent = parent_of(run, key)
        assert (DEFAULT_CHANNEL, parent.ts) in updated
        assert parent.edits, f"{key}: the card was never edited"
        # The stop, then the job's end: folded into the stop (no reply), shown on the card alone.
        stop = {"resnet": "🔴 Stopped by Training Guard: ", "bert": f"🔴 Stopped: Slack user {ALICE} pressed Stop now"}
        assert [e["text"] for e in parent.edits][-1].startswith(stop[key])
        assert parent.text.startswith("⏹️ Stopped, ended ")
        assert " of training · " in parent.text
        assert "*What the guard did:* Stopped the job." in json.dumps(parent.blocks, ensure_ascii=False)
    assert "edited in place" in run.output


def test_replies_are_posted_with_the_parents_thread_ts(run: Run) -> None:
    assert run.demo.app is not None
    api = run.demo.app.api
    parents = {parent_of(run, key).ts for key in ("resnet", "bert")}
    posts = [c for c in api.called("chat.postMessage") if c.error is None]
    threaded = [c.params["thread_ts"] for c in posts if c.params.get("thread_ts")]
    assert len(posts) - len(threaded) == 2  # the two parents; everything else is a reply
    assert set(threaded) == parents
    resnet = api.replies(DEFAULT_CHANNEL, parent_of(run, "resnet").ts)
    assert [m.text.split(":")[0] for m in resnet if not m.files][:2] == [
        f"🟠 Rule LossNotDecreasing failed on {run.names['resnet']}",
        f"🔴 Stopped {run.names['resnet']}",
    ]


def test_the_chart_is_uploaded_into_the_thread_and_saved_as_a_png_outside_the_repository(run: Run) -> None:
    assert run.demo.app is not None
    api = run.demo.app.api
    assert len([c for c in api.called("files.getUploadURLExternal") if c.error is None]) == 2
    completes = [c for c in api.called("files.completeUploadExternal") if c.error is None]
    assert {(c.params["channel_id"], c.params["thread_ts"]) for c in completes} == {
        (DEFAULT_CHANNEL, parent_of(run, key).ts) for key in ("resnet", "bert")
    }
    [shared] = [f for m in api.replies(DEFAULT_CHANNEL, parent_of(run, "resnet").ts) for f in m.files]
    assert shared.name == f"{run.names['resnet']}-train-loss.png"
    assert shared.path is not None
    assert f"chart saved: {shared.path}" in run.output  # the demo prints where it is
    assert REPOSITORY not in shared.path.resolve().parents
    image = read_png(shared.path.read_bytes())
    assert (image.width, image.height) == (800, 400)
    colours = set(image.pixels())
    assert CHART_BLUE in colours
    assert THRESHOLD_RED in colours
    assert "stand-in" in run.output


def test_the_click_stops_the_notified_job_once_attributed_to_the_user_and_the_thread_says_who(run: Run) -> None:
    assert run.demo.app is not None
    api = run.demo.app.api
    bert = run.names["bert"]
    assert run.stop_calls == {run.names["resnet"]: 1, bert: 1}
    assert run.demo.outcomes["bert"].stopped_by == f"{contract.STOPPED_BY_SLACK_PREFIX}{ALICE}"
    assert run.demo.outcomes["bert"].stopped_by_click
    assert run.demo.outcomes["resnet"].stopped_by == contract.STOPPED_BY_VALUE
    assert not run.demo.outcomes["resnet"].stopped_by_click
    parent = parent_of(run, "bert")
    said = [m.text for m in api.replies(DEFAULT_CHANNEL, parent.ts)]
    assert f"<@{ALICE}> asked to stop the job: stopped {bert}" in said
    assert f"<@{ALICE}> pressed Stop now" in json.dumps(parent.blocks)  # the card says who, as a person
    # The button pressed was Stop now on the job's card, while the job ran; no message offers it once it stopped.
    assert any(stop_offered(edit["blocks"]) for edit in parent.edits)
    assert not stop_offered(parent.blocks)
    assert not any(stop_offered(m.blocks) for m in api.replies(DEFAULT_CHANNEL, parent.ts))
    assert "interactions acknowledged: HTTP 200" in run.output


def stop_offered(blocks: list[dict[str, Any]]) -> bool:
    return any(e.get("action_id") == "training-guard:stop" for b in blocks for e in b.get("elements") or [])


def test_the_expectations_fail_when_the_outcome_differs(run: Run) -> None:
    """The demo's checks can fail: the same run judged against other expectations."""
    scenario = run.demo.scenario
    bert = scenario.expect["bert"]
    run.demo.scenario = replace(
        scenario,
        expect={
            **scenario.expect,
            "bert": replace(bert, stopped_by="slack:U0BOB", stop_calls=2, slack_parents=2, stopped_by_click=False),
        },
    )
    try:
        failures = run.demo._check()
    finally:
        run.demo.scenario = scenario
    assert failures == [
        "bert: stopped-by tag 'slack:U0ALICE', expected 'slack:U0BOB'",
        "bert: stopped by a click True, expected False",
        "bert: 1 StopTrainingJob call(s), expected 2",
        f"bert: Slack parent messages 1 in {DEFAULT_CHANNEL}, expected 2 per channel",
    ]


def test_a_click_step_needs_app_mode_a_known_button_and_a_user_id() -> None:
    data = json.loads(resolve("slack_app").read_text())
    data["config"]["slack"] = {"webhooks": {"default": {}}}
    data["steps"].append({"minute": 11, "job": "bert", "click": {"button": "reboot", "user": "alice"}})
    where = f"steps[{len(data['steps']) - 1}].click"
    with pytest.raises(ScenarioError) as invalid:
        parse(data, folder=resolve("slack_app").parent)
    clicks = [p for p in invalid.value.problems if ".click" in p]
    assert any("buttons are Slack app mode's" in p and "slack.mode webhook" in p for p in clicks)
    assert any(p.startswith(f"{where}.button: must be one of stop, snooze, exempt, mute") for p in clicks)
    assert any(p.startswith(f"{where}.user: a Slack user ID") for p in clicks)


def test_the_stand_in_draws_the_widgets_datapoints_and_threshold() -> None:
    """metric_widget_ext, through the guard's real adapter on moto: the PNG has the line and the threshold."""
    import boto3
    from moto import mock_aws

    from training_guard.adapters.cloudwatch import MetricCharts

    now = datetime.now(UTC)
    with mock_aws():
        metric_widget_ext.install()
        cloudwatch = boto3.client("cloudwatch", region_name=REGION)
        dimension = [{"Name": contract.JOB_DIMENSION, "Value": "j"}]
        cloudwatch.put_metric_data(
            Namespace=contract.SAGEMAKER_TRAINING_NAMESPACE,
            MetricData=[
                {
                    "MetricName": "train:loss",
                    "Dimensions": dimension,
                    "Value": v,
                    "Timestamp": now - timedelta(minutes=i),
                }
                for i, v in enumerate([40.0, 9.0, 2.0])
            ],
        )
        widget = {
            "metrics": [[contract.SAGEMAKER_TRAINING_NAMESPACE, "train:loss", contract.JOB_DIMENSION, "j"]],
            "stat": "Maximum",
            "period": 60,
            "start": "-PT3H",
            "end": "P0D",
            "annotations": {"horizontal": [{"label": "limit", "value": 5}]},
            "width": 300,
            "height": 200,
        }
        image = read_png(MetricCharts(cloudwatch).png(widget))
    assert (image.width, image.height) == (300, 200)
    colours = set(image.pixels())
    assert {CHART_BLUE, THRESHOLD_RED} <= colours
    empty = read_png(metric_widget_ext.render({**widget, "metrics": []}, [], now))
    assert CHART_BLUE not in set(empty.pixels())  # no datapoints, no line


def write_thread_picture(run: Run, folder: Path, png: Path, *, job: str = "bert") -> None:
    """The job's thread as Slack shows it, photographed by headless Chromium (the BERT job's: the notify-only guard's
    reply, its chart, Alice's click and the stop, the card edited to say who stopped it, its Stop now gone)."""
    assert run.demo.app is not None
    page = folder / "slack-thread.html"
    threads = [t for t in run.demo.app.threads() if run.names[job] in t[1].text]
    page.write_text(thread_page(threads, image_caption=STAND_IN), encoding="utf-8")
    screenshot(page, png, window=WINDOW)


def test_the_thread_renders_with_its_buttons_and_chart_in_headless_chromium(run: Run, tmp_path: Path) -> None:
    find_chromium()
    png = tmp_path / "slack-thread.png"
    write_thread_picture(run, tmp_path, png)
    image = read_png(png.read_bytes())
    assert (image.width, image.height) == WINDOW
    colours = set(image.pixels())
    assert rgb(STOP_NOW_RED) not in colours  # no Stop now once the job stopped (it was on the card alone)
    assert CHART_BLUE in colours  # the chart, inline


if __name__ == "__main__":
    # The README's picture: python -m tests.e2e.test_demo_slack_app docs/slack-thread.png
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/slack-thread.png")
    with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(io.StringIO()):
        made = run_demo(Path(scratch))
        if made.code != 0:
            raise SystemExit(made.output)
        write_thread_picture(made, Path(scratch), target)
    print(f"wrote {target}", file=sys.stderr)
