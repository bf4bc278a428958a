"""`make bench` must not rot silently: its Slack interactivity section runs (small N) and reports its fields, and
the import lists it times still cover what the functions' builders import; each reaction makes the calls its design
lists, and the README shows the report's headline table."""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import run
from training_guard import contract

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "functions"
WATCHED = ("training_guard", "slack_sdk", "aws_lambda_powertools")


@pytest.fixture(scope="module")
def cold() -> dict[str, Any]:
    return run.interaction_cold_import(runs=1, fill=False)


@pytest.fixture(scope="module")
def ack() -> dict[str, Any]:
    return run.interaction_ack_latency(clicks=5)


def test_bundling_loads_neither_the_cdk_nor_jsii() -> None:
    """The bench bundles the asset in processes that have no other use for the CDK (booting jsii costs seconds)."""
    probe = "import sys, infra.bundling; print(sorted({'aws_cdk', 'jsii'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"


def test_the_cold_import_reports_each_case_against_boto3_and_a_verdict(cold: dict[str, Any]) -> None:
    rows = {r["module"]: r for r in cold["rows"]}
    assert set(rows) == {
        "baseline: import boto3",
        "handlers.interactions",
        "acknowledgement: handlers.interactions + first call's imports",
        "for comparison: slack_sdk.signature, no longer imported",
        "of which: Powertools Logger alone",
        "worker: handlers.interactions + first call's imports",
    }
    assert all(r["median_ms"] > 0 for r in rows.values())
    assert rows["baseline: import boto3"]["ratio"] == 1.0
    assert cold["runs"] == 1
    assert cold["target"] == 1.3
    assert cold["ack_ms"] == rows["acknowledgement: handlers.interactions + first call's imports"]["median_ms"]
    assert cold["ack_ratio"] == pytest.approx(cold["ack_ms"] / cold["baseline_ms"], abs=0.01)
    assert cold["verdict"] == ("PASS" if cold["ack_ratio"] <= 1.3 else "OVER")
    # the figures themselves are not compared: one sample each, taken while the rest of the suite loads the cores
    assert cold["worker_ms"] == rows["worker: handlers.interactions + first call's imports"]["median_ms"]


def test_signed_clicks_are_acknowledged_and_queued_and_timed(ack: dict[str, Any]) -> None:
    # a click the bench signed wrongly would be a 401 and queue nothing: the timing would be of a refusal
    assert ack["statuses"] == {200: 6}
    assert ack["queued"] == 6
    assert ack["clicks"] == 5
    assert 0 < ack["median_ms"] <= ack["p99_ms"] <= ack["max_ms"]
    assert ack["first_ms"] > 0
    assert ack["budget_ms"] == 3000


def test_the_report_section_carries_the_figures_and_the_verdict(cold: dict[str, Any], ack: dict[str, Any]) -> None:
    text = "\n".join(run.interactions_section(cold, ack))
    assert text.startswith("## Slack interactivity")
    assert f"{cold['ack_ratio']}x boto3" in text
    assert f"{cold['verdict']}**" in text
    assert f"| p99 | {ack['p99_ms']} |" in text
    assert "| Slack's budget for the 200 | 3000 |" in text
    assert "worker" in text
    assert str(cold["worker_ms"]) in text


# One interpreter answers every case (`builders_import`): each case runs in a child forked from it, so each child
# starts with only Python, boto3 and botocore loaded (none of them watched) and the service models the clients read
# already parsed, instead of paying a fresh interpreter's start and boto3's import (~0.3 s of CPU a case).
_FORK_SERVER = f"""
import json, os, sys
import boto3
boto3.setup_default_session()
for service in ("sagemaker", "dynamodb", "sns", "sqs", "secretsmanager", "cloudwatch", "logs", "sts"):
    boto3.client(service)  # its model parsed into the default session's loader, which each child inherits
base = dict(os.environ)
for request in sys.stdin:
    case = json.loads(request)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        os.dup2(2, 1)  # what a builder prints goes to stderr, never into the server's answers
        os.environ.clear()
        os.environ.update({{**base, **case["env"]}})
        for module in case["preload"]:
            __import__(module)
        before = set(sys.modules)
        from training_guard.handlers import wiring
        exec(case["build"], {{"wiring": wiring}})
        new = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in {WATCHED!r})
        os.write(write, json.dumps(new).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        found = answer.read()
    _, status = os.waitpid(child, 0)
    print(json.dumps({{"case": case["case"], "status": status, "found": json.loads(found or b"null")}}), flush=True)
"""


@functools.cache
def _fork_server() -> subprocess.Popen[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TRAINING_GUARD_")}
    return subprocess.Popen(
        [sys.executable, "-c", _FORK_SERVER],
        env={**base, "PYTHONPATH": str(FUNCTIONS), "AWS_DEFAULT_REGION": "us-east-1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module", autouse=True)
def _fork_server_ends() -> Iterator[None]:
    yield
    if _fork_server.cache_info().currsize:
        server = _fork_server()
        _fork_server.cache_clear()
        try:
            assert server.stdin is not None
            server.stdin.close()  # its loop ends with its input
            server.wait(timeout=30)
        finally:
            server.kill()
            assert server.stdout is not None
            server.stdout.close()


_CASES = itertools.count()
ANSWER_SECONDS = 120  # a case imports and builds in about a second; a child that hangs fails its test, not the suite


def builders_import(preload: tuple[str, ...], build: str, env: dict[str, str]) -> list[str]:
    """The modules of ours, slack_sdk's and Powertools' that `build` imports beyond `preload`, in a child process
    that has loaded nothing of them before."""
    server = _fork_server()
    assert server.stdin is not None
    assert server.stdout is not None
    case = next(_CASES)
    server.stdin.write(json.dumps({"case": case, "preload": preload, "build": build, "env": env}) + "\n")
    server.stdin.flush()
    ready, _, _ = select.select([server.stdout], [], [], ANSWER_SECONDS)
    if not ready:
        server.kill()
        _fork_server.cache_clear()
        pytest.fail(f"no answer in {ANSWER_SECONDS} s for building {build!r}")
    answer = json.loads(server.stdout.readline())
    assert answer["case"] == case, "the answer of another case"
    assert answer["status"] == 0, f"building {build!r} failed in the child (status {answer['status']})"
    return list(answer["found"])


def test_what_a_builder_prints_never_becomes_an_answer() -> None:
    wired = ("training_guard.handlers.wiring",)
    assert builders_import(wired, "print('noise', flush=True); print('[]', flush=True)", {}) == []
    # the next case gets its own answer, not the noise
    assert "training_guard.render.charts" in builders_import(wired, "import training_guard.render.charts", {})


def test_the_acknowledgements_listed_imports_are_all_its_builder_imports() -> None:
    env = {
        contract.ENV_TABLE: "t",
        contract.ENV_SLACK_SIGNING_SECRET: "s",
        contract.ENV_CLICK_QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/q",
    }
    preload = (run.INTERACTION_HANDLER, *run.ACK_FIRST_CALL_IMPORTS)
    assert builders_import(preload, "wiring.root().interactions", env) == []
    # and the list is not padded: without it, the builder does import what it names
    assert set(builders_import((run.INTERACTION_HANDLER,), "wiring.root().interactions", env)) >= set(
        run.ACK_FIRST_CALL_IMPORTS
    )


def test_the_workers_listed_imports_are_all_its_builders_import() -> None:
    env = {
        contract.ENV_CONFIG: "{}",
        contract.ENV_TABLE: "t",
        contract.ENV_TOPIC_ARN: "arn:aws:sns:us-east-1:123456789012:t",
        contract.ENV_SLACK_BOT_TOKEN_SECRET: "b",
    }
    preload = (run.INTERACTION_HANDLER, *run.WORKER_FIRST_CALL_IMPORTS)
    build = "wiring.root().click_worker_for(None)"
    assert builders_import(preload, build, env) == []


# What each function's handler calls on its first invocation that builds (and so imports) anything.
_ROOT = "root = wiring.root(); "
FIRST_BUILDS = {
    "job_events": _ROOT + "root.responder_for(None); root.parker; root.members",
    "alarm_events": _ROOT + "root.responder_for(None); root.parker; root.members",
    "sweeper": _ROOT + "root.mutes; root.sweeper_for(None); root.members",
    "slack_notifier": _ROOT + "root.delivery_for(None)",
    "digest": _ROOT + "root.settings",
    "log_events": _ROOT + "root.log_watch_for(None); root.parker; root.members",
    "log_subscription": _ROOT + "root.client('sts'); root.client('logs')",
    "interactions": _ROOT + "root.interactions",
    "click_worker": _ROOT + "root.click_worker_for(None)",
}


def test_every_function_the_stack_deploys_is_timed() -> None:
    deployed = set(re.findall(r"training_guard\.handlers\.(\w+)\.(\w+)", _infra_text()))
    timed = {(run.module_of(h), "worker_handler" if h == "click_worker" else "handler") for h in run.HANDLERS}
    assert timed == deployed
    assert set(FIRST_BUILDS) == set(run.HANDLERS) == set(run.FIRST_CALL_IMPORTS)


def _infra_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "infra" / "components").glob("*.py")))


@pytest.mark.parametrize("handler", run.HANDLERS)
def test_each_functions_listed_first_call_imports_are_all_its_builders_import(handler: str) -> None:
    # Section 1's cold start counts these: a builder importing a module the list lacks would go unmeasured.
    env = {
        contract.ENV_CONFIG: "{}",
        contract.ENV_TABLE: "t",
        contract.ENV_TOPIC_ARN: "arn:aws:sns:us-east-1:123456789012:t",
        contract.ENV_WEBHOOK_SECRETS: '{"default": "s"}',
        contract.ENV_DEAD_LETTER_QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/q",
        contract.ENV_SLACK_SIGNING_SECRET: "s",
        contract.ENV_CLICK_QUEUE_URL: "https://sqs.us-east-1.amazonaws.com/123456789012/q",
        contract.ENV_SLACK_BOT_TOKEN_SECRET: "b",
    }
    preload = (f"training_guard.handlers.{run.module_of(handler)}", *run.FIRST_CALL_IMPORTS[handler])
    assert builders_import(preload, FIRST_BUILDS[handler], env) == []


def test_the_cold_start_section_names_each_function_over_the_target() -> None:
    cold = [{"module": "baseline: import boto3", "median_ms": 100.0, "ratio": 1.0}]
    cold += [{"module": run.first_call_row(h), "median_ms": 120.0, "ratio": 1.2} for h in run.HANDLERS]
    cold[-1]["ratio"] = 1.31
    text = "\n".join(run.cold_section(cold, runs=3))
    assert "| handlers.interactions.worker_handler + first call's imports | 120.0 | 1.31 |" in text
    assert "Over 1.3x: click_worker." in text
    assert "Medians of 3 fresh interpreters per case" in text
    cold[-1]["ratio"] = 1.3
    assert "Every function is within the target." in run.cold_section(cold)


def test_the_slack_app_section_counts_each_method_and_leaves_the_image_unpriced() -> None:
    app = {
        "jobs": 2,
        "notifications": 4,
        "slack": {"chat.postMessage": 7, "chat.update": 4},
        "images": 2,
        "metrics_per_image": [1],
    }
    [title, _, text, _] = run.slack_app_section(app)
    assert title == "## Slack app mode: calls per job (issue 14)"
    assert "2 jobs, 4 notifications" in text
    assert "`chat.postMessage` 7, `chat.update` 4" in text
    assert "`GetMetricWidgetImage`: 2 (one per metric guard that fired, per channel), each of 1 metric(s)" in text
    assert "counted, not priced" in text
    assert "cloudwatch:GetMetricWidgetImage" in run.UNPRICED
    assert not any("widget" in name for name in run.PRICES)


def test_each_reaction_makes_exactly_the_calls_its_design_lists() -> None:
    rows = {r["reaction"]: r for r in run.calls_per_reaction()}
    assert {reaction: r["unexpected"] for reaction, r in rows.items() if r["unexpected"]} == {}
    stop = rows[run.STOP]
    assert stop["detail"] == dict.fromkeys(run.STOP_CALLS, 1)
    assert stop["calls"] == stop["design"] == len(run.STOP_CALLS)
    assert rows[run.NOTHING]["calls"] == 0


def test_a_call_the_design_does_not_list_is_reported_with_its_count() -> None:
    from collections import Counter

    measured = Counter({**dict.fromkeys(run.STOP_CALLS, 1), "dynamodb:GetItem stop record": 1})
    measured[run.PUBLISH] += 1
    del measured[run.PRICE]
    assert run._difference(measured, Counter(run.STOP_CALLS)) == {
        "dynamodb:GetItem price": -1,
        "dynamodb:GetItem stop record": 1,
        "sns:Publish": 1,
    }
    row = {"reaction": "stop", "unexpected": {"sns:Publish": 1}}
    assert run.calls_finding([row]).startswith("- **Calls per reaction differ from the design**")


def test_the_readmes_headline_table_is_the_reports() -> None:
    readme = run.headline_of(run.README.read_text(encoding="utf-8"))
    assert readme == run.headline_of(run.REPORT.read_text(encoding="utf-8")), "run `make bench-report`"
    assert readme[0] == "| what | figure | target |"
    spliced = run.readme_with_headline(
        "intro\n" + run.HEADLINE_START + "\nold\n" + run.HEADLINE_END + "\nrest", ["| new |"]
    )
    assert spliced == "intro\n" + run.HEADLINE_START + "\n| new |\n" + run.HEADLINE_END + "\nrest"


def measured(*, ratio: float, unexpected: dict[str, int], to_stop: float) -> Any:
    modules = [f"handlers.{run.module_of(h)}{s}" for h in run.HANDLERS for s in ("", " (source only)")]
    modules += [run.first_call_row(h) for h in run.HANDLERS]
    return run.Measured(
        cold=[{"module": m, "ratio": ratio, "median_ms": 1.0} for m in modules],
        calls=[
            {"reaction": r, "calls": 3, "design": 3, "unexpected": unexpected, "why": ""}
            for r in run.HEADLINE_REACTIONS
        ],
        latency={"own_ratio": to_stop, "to_stop_ratio": 9.0, "service_ms": 1.5, "margin_ms": -0.4},
        throughput={
            "events": 10_000,
            "jobs": 1_000,
            "events_per_second": 300,
            "peak_rss_mb": 200,
            "wrong_decisions": 0,
            "stops": 250,
            "notifications": 750,
        },
        size={"zipped_mb": 1.39},
        money=[
            {"jobs/month": j, "total $": t, "fixed $": 3.12} for j, t in ((100, 4.98), (1_000, 10.36), (10_000, 34.13))
        ],
    )


def test_the_headline_says_met_or_missed_from_the_figures_and_the_targets() -> None:
    met = run.headline(measured(ratio=1.2, unexpected={}, to_stop=1.5))
    assert met[2].endswith("| 1.2x / 1.2x / 1.2x | 1.3x (met; runs on a 2-core machine vary by about ±0.1x) |")
    assert "| 3 / 3 / 3 / 3 | the design's (3 / 3 / 3 / 3): as designed |" in met[4]
    assert met[5].endswith("| 1.5x (9.0x) | 2.0x (met) |")
    assert (
        met[8]
        == "| monthly cost, 100 / 1,000 / 10,000 jobs (of which fixed, at zero jobs) | $4.98 / $10.36 / $34.13 ($3.12) "
        "| fixed $5 (met: alarms, key, secret; metrics only while jobs run) |"
    )
    missed = run.headline(measured(ratio=1.4, unexpected={"sns:Publish": 1}, to_stop=3.0))
    assert "1.3x (missed, see the report;" in missed[2]
    assert missed[4].endswith("differ from the design: see the report |")
    assert missed[5].endswith("| 3.0x (9.0x) | 2.0x (missed, see the report) |")
    assert run.findings(measured(ratio=1.4, unexpected={}, to_stop=3.0))[0].count("Still over 1.3x: job_events")
    [warm] = [f for f in run.findings(measured(ratio=1.4, unexpected={}, to_stop=3.0)) if "Warm latency" in f]
    assert "3.0x the minimal stopper with the emulator's own answering time left out of both, and 9.0x with it" in warm
    assert "Target 2.0x: missed. Against AWS" in warm
    assert "at most 2.0x while W <= S -0.4 ms" in warm
    [warm] = [f for f in run.findings(measured(ratio=1.2, unexpected={}, to_stop=2.0)) if "Warm latency" in f]
    assert "Target 2.0x: met." in warm


# --- the log rules' section (bench/log_rules.py) --------------------------------------------------------------
def log_measured(ratio: float) -> dict[str, Any]:
    from bench import log_rules

    return {
        "throughput": [{"case": c.label, "ratio": ratio} for c in log_rules.CASES],
        "memory": {
            "case": log_rules.CASES[0].label,
            "runs": [{"lines": n, "peak_rss_kb": 25_000, "state_bytes": 1_300} for n in log_rules.MEMORY_LINES],
            "growth_mb": 0.0,
            "state_growth_bytes": 0,
        },
        "latency": [
            {"events": 1, "decode ms": 0.1, "fold ms": 0.1, "delivery in -> StopTrainingJob ms": 11.0},
            {"events": 10_000, "decode ms": 20.0, "fold ms": 40.0, "delivery in -> StopTrainingJob ms": 75.0},
        ],
    }


def test_the_log_rules_evaluator_is_timed_against_the_bare_loop_on_each_real_log() -> None:
    from bench import log_rules

    rows = log_rules.throughput(lines=2_000, runs=1)
    assert [r["case"] for r in rows] == [c.label for c in log_rules.CASES]
    for row in rows:
        assert row["lines"] == 2_000
        assert row["points"] > 0  # the bare loop read numbers: its regexes are the log's
        assert row["ratio"] == pytest.approx(row["bare lines/s"] / row["evaluator lines/s"], rel=0.02)


def test_the_log_rules_memory_does_not_grow_with_the_log() -> None:
    from bench import log_rules

    memory = log_rules.memory((2_000, 4_000))
    assert [r["lines"] for r in memory["runs"]] == [2_000, 4_000]
    assert abs(memory["state_growth_bytes"]) < 1_000  # a bounded window, not the history


def test_the_guards_part_of_the_latency_is_measured_to_the_stop_per_delivery_size() -> None:
    from bench import log_rules

    rows = log_rules.latency(sizes=(1, 50), runs=1)  # raises unless each delivery stops its job once
    assert [r["events"] for r in rows] == [1, 50]
    assert all(r["delivery in -> StopTrainingJob ms"] > r["decode ms"] > 0 for r in rows)


def test_the_log_rules_section_and_headline_row_say_met_or_missed_and_cite_the_delivery_latency() -> None:
    from bench import log_rules

    met, missed = log_measured(1.8), log_measured(2.6)
    text = "\n".join(log_rules.section(met))
    assert text.startswith(log_rules.SECTION_TITLE)
    assert "(met: worst 1.8x)" in text
    assert log_rules.SUBSCRIPTIONS_PAGE in text
    assert "cannot be predicted from cited figures" in text
    assert "(missed: worst 2.6x)" in "\n".join(log_rules.section(missed))
    row = log_rules.headline_row(missed)
    assert row.startswith(log_rules.HEADLINE_ROW)
    assert "| 2.6x, 2.6x, 2.6x, 2.6x / +0.0 MB / 75.0 ms | 2.0x (missed, see the report) / none / 10 s" in row


def test_the_log_rules_sections_are_spliced_into_the_report_once() -> None:
    from bench import log_rules

    report = run.REPORT.read_text(encoding="utf-8")
    once = log_rules.spliced(report, log_measured(2.6))
    twice = log_rules.spliced(once, log_measured(1.8))
    assert twice.count(log_rules.SECTION_TITLE) == 1
    assert twice.count("## The log rules' cost (issue 30)") == 1
    headline = run.headline_of(twice)
    assert sum(r.startswith(log_rules.HEADLINE_ROW) for r in headline) == 1
    assert "(met: worst 1.8x)" in twice
    assert twice.count("\n## ") == twice.count("\n\n## ")  # every title after a blank line, as `run` writes them
    assert twice.index(log_rules.SECTION_TITLE) < twice.index("## What the numbers say")


def test_the_bare_stoppers_stop_is_signed_and_answered_where_moto_answers_the_guards_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from training_guard.config.model import GuardConfig
    from training_guard_local.emulator import Emulation

    with Emulation(GuardConfig()):
        call_at: list[float] = []
        stopper, client = run._bare_stopper(call_at)
        sent: list[dict[str, bytes]] = []
        client.meta.events.register("before-send", lambda request, **_: sent.append(dict(request.headers)))
        stopper(
            {
                "detail": {
                    "TrainingJobName": "j",
                    "DebugRuleEvaluationStatuses": [{"RuleEvaluationStatus": "IssuesFound"}],
                }
            }
        )
        stopper(
            {
                "detail": {
                    "TrainingJobName": "k",
                    "DebugRuleEvaluationStatuses": [{"RuleEvaluationStatus": "NoIssuesFound"}],
                }
            }
        )
    assert len(call_at) == len(sent) == 1  # one stop, for the job with an issue
    assert sent[0]["Authorization"].startswith(b"AWS4-HMAC-SHA256")  # signed, as a stop to AWS would be
    monkeypatch.setattr(run, "LATENCY_EVENTS", 12)
    latency = run.warm_latency()
    assert latency["events"] == 7
    assert 0 < latency["stop_call_ms"] < latency["baseline_ms"] < latency["to_stop_ms"] < latency["handler_ms"]
    assert 0 < latency["service_ms"] < latency["to_stop_ms"]
    assert 0 < latency["baseline_own_ms"] < latency["baseline_ms"]  # the stopper's answer timed, and left out
    # the figures are rounded to 0.01 ms apiece: a ratio of two of them is good to a few percent
    assert latency["own_ratio"] == pytest.approx(latency["own_ms"] / latency["baseline_own_ms"], rel=0.05)
    assert latency["margin_ms"] == pytest.approx(2 * latency["baseline_own_ms"] - latency["own_ms"], abs=0.03)
