"""`simulate` on CloudWatch Logs subscription deliveries: the Lambda event, its decoded document, or a saved log."""

from __future__ import annotations

import base64
import gzip
import json
import sys
import time
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import EVENTS_DIR, load_event
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard_local import logs_ext
from training_guard_local.cli import main
from training_guard_local.emulator import Emulation

JOB = "pytorch-mnist-lr01-2026-11-30-02-10-00-123"  # the job of tests/events/vanishing_gradient_issues_found.json
STREAM = f"{JOB}/algo-1-1796004800"
SECOND = 1796004905000  # 2026-11-30T02:15:05Z in epoch milliseconds
LINES = ["epoch 1 loss=2.31", "epoch 2 loss=0.92", "epoch 3 loss=nan"]
LOGS = Path(__file__).resolve().parents[1] / "data" / "training_logs"


def the_document(owner: str = "123456789012", stream: str = STREAM) -> dict[str, Any]:
    """A decoded delivery as CloudWatch Logs sends it (https://docs.aws.amazon.com/lambda/latest/dg/services-cloudwatchlogs.html)."""
    return {
        "messageType": "DATA_MESSAGE",
        "owner": owner,
        "logGroup": contract.TRAINING_LOG_GROUP,
        "logStream": stream,
        "subscriptionFilters": [contract.LOG_SUBSCRIPTION_FILTER_NAME],
        "logEvents": [
            {"id": f"3795351130929{i:043d}", "timestamp": SECOND + i * 1000, "message": line}
            for i, line in enumerate(LINES)
        ],
    }


def lambda_event(doc: dict[str, Any]) -> dict[str, Any]:
    """Written out here rather than through logs_ext.encode: what the function receives, as AWS documents it."""
    return {"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(doc).encode())).decode()}}


class StandIn:
    """The log-rules function's place, for the delivery's plumbing: keeps what it received, and says NaN fired on a
    line saying nan (its receipt shaped as the real handler's: the rules that fired, the responder's receipt)."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    def handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        raw = gzip.decompress(base64.b64decode(event["awslogs"]["data"]))
        doc = json.loads(raw)
        self.received.append(doc)
        firings = ["NaN"] if any("nan" in e["message"] for e in doc["logEvents"]) else []
        job = logs_ext.job_of(doc["logStream"])
        return {"job": job, "firings": firings, "findings": {"job": job, "stopped": False, "notifications": []}}


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    made = StandIn()
    module = types.ModuleType("training_guard.handlers.log_events")
    module.handler = made.handler  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "training_guard.handlers.log_events", module)
    return made


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]], str]:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def write(tmp_path: Path, name: str, value: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(value), encoding="utf-8")
    return str(path)


# --- the delivery as input ---------------------------------------------------------------------------------------
def test_the_lambda_event_and_its_decoded_document_reach_the_function_as_the_same_delivery(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_in: StandIn
) -> None:
    raw = write(tmp_path, "raw.json", lambda_event(the_document()))
    decoded = write(tmp_path, "decoded.json", the_document())
    code, lines, _ = run(capsys, raw, decoded)
    assert code == 0
    assert stand_in.received == [the_document(), the_document()]
    for line in lines:
        assert line["job"] == JOB
        assert line["log_events"] == 3
        # the stand-in keeps no state and notifies nothing: the rule's name only
        assert line["log_rules"] == [{"rule": "NaN", "line": None, "event_id": None, "outcome": None, "detail": None}]
        # at the last log event's time, in the owner's account
        assert (line["time"], line["account"], line["region"]) == ("2026-11-30T02:15:07Z", "123456789012", "us-east-1")


def test_a_delivery_takes_account_and_time_from_the_options_and_its_owner_follows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_in: StandIn
) -> None:
    decoded = write(tmp_path, "decoded.json", the_document(owner="111122223333"))
    args = ("--account", "444455556666", "--region", "eu-west-1", "--now", "2026-11-30T03:00:00Z", decoded)
    code, [line], _ = run(capsys, *args)
    assert code == 0
    assert (line["account"], line["region"], line["time"]) == ("444455556666", "eu-west-1", "2026-11-30T03:00:00Z")
    assert stand_in.received[0]["owner"] == "444455556666"  # played in that account, as if it owned the log


def test_a_job_known_only_from_its_log_is_emulated_in_progress_and_the_line_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_in: StandIn
) -> None:
    decoded = write(tmp_path, "decoded.json", the_document())
    code, [line], _ = run(capsys, decoded)
    assert code == 0
    assert line["job_status"] == "InProgress"
    assert any(f"job {JOB} not seen before in this replay" in w for w in line["warnings"])
    # with its state-change event first, the job is the event's: nothing to say
    in_progress = write(tmp_path, "in_progress.json", load_event("vanishing_gradient_issues_found"))
    code, [_, line], _ = run(capsys, "--config", write(tmp_path, "c.json", {"dry_run": True}), in_progress, decoded)
    assert code == 0
    assert not any("not seen before" in w for w in line["warnings"])


def test_a_delivery_and_events_are_played_in_the_order_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_in: StandIn
) -> None:
    mixed = write(tmp_path, "mixed.json", [load_event("rule_error"), lambda_event(the_document())])
    code, lines, _ = run(capsys, mixed)
    assert code == 0
    assert [line["log_events"] for line in lines] == [None, 3]
    assert [line["event"].rsplit("[", 1)[1] for line in lines] == ["0]", "1]"]


@pytest.mark.parametrize(
    ("delivery", "says"),
    [
        ({"awslogs": {"data": "not base64!"}}, "awslogs.data: not base64"),
        ({"awslogs": {"data": base64.b64encode(b"{}").decode()}}, "awslogs.data: not gzip-compressed"),
        ({"awslogs": {"data": base64.b64encode(gzip.compress(b"[1")).decode()}}, "its gzip holds no JSON document"),
        ({"awslogs": {}}, "awslogs.data: must be a string"),
        ({**the_document(), "logEvents": None}, "logEvents: must be a list"),
        ({**the_document(), "messageType": "DATA"}, "messageType: DATA_MESSAGE or CONTROL_MESSAGE"),
        ({"messageType": "DATA_MESSAGE", "logEvents": []}, "lacks owner, logGroup, logStream, subscriptionFilters"),
        (
            {**the_document(), "logEvents": [{"id": 1, "timestamp": SECOND, "message": "x"}]},
            "logEvents[0].id: must be a string",
        ),
        (
            {**the_document(), "logEvents": [{"id": "1", "timestamp": "now", "message": "x"}]},
            "logEvents[0].timestamp: must be a whole number of milliseconds",
        ),
    ],
)
def test_a_broken_delivery_is_bad_input_in_one_line_before_anything_is_played(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_in: StandIn, delivery: dict[str, Any], says: str
) -> None:
    path = write(tmp_path, "broken.json", [load_event("rule_error"), delivery])
    code, lines, err = run(capsys, path)
    assert code == 2
    assert lines == []
    assert stand_in.received == []
    assert err.count("\n") == 1
    assert f"{path}[1]: not a CloudWatch Logs subscription delivery: " in err
    assert says in err


# --- a saved log, delivered as the subscription would ------------------------------------------------------------
def test_a_plain_log_is_delivered_as_the_subscription_would_to_the_jobs_stream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_in: StandIn
) -> None:
    log = tmp_path / "train.log"
    log.write_text("\n".join([LINES[0], "", "Create neural network module", *LINES[1:]]) + "\n", encoding="utf-8")
    saved = tmp_path / "deliveries.json"
    args = ("--log", str(log), "--job", JOB, "--now", "2026-11-30T02:15:07Z", "--write-deliveries", str(saved))
    code, [line], err = run(capsys, *args)
    assert code == 0
    [doc] = stand_in.received
    end = int(datetime(2026, 11, 30, 2, 15, 7, tzinfo=UTC).timestamp() * 1000)
    # one line a second up to --now, the file's line number as the ID (the blank line 2 is no event); line 3 says
    # nothing of a loss: the guard's default filter pattern leaves it out
    assert doc["logEvents"] == [
        {"id": "1", "timestamp": end - 4000, "message": LINES[0]},
        {"id": "4", "timestamp": end - 1000, "message": LINES[1]},
        {"id": "5", "timestamp": end, "message": LINES[2]},
    ]
    assert doc["logStream"] == f"{JOB}/algo-1-{(end - 4000) // 1000}"
    assert (doc["messageType"], doc["owner"], doc["logGroup"]) == (
        "DATA_MESSAGE",
        "123456789012",
        contract.TRAINING_LOG_GROUP,
    )
    assert doc["subscriptionFilters"] == [contract.LOG_SUBSCRIPTION_FILTER_NAME]
    assert line["event"] == f"{log}[delivery 1]"
    assert line["log_events"] == 3
    pattern = contract.LOG_FILTER_PATTERN
    assert f"{log}: 4 log events to {doc['logStream']}, 3 matching the filter pattern {pattern!r}: 1 delivery" in err
    # the deliveries written are the Lambda events played: replayed, the function receives the same
    assert [logs_ext.decode(event) for event in json.loads(saved.read_text())] == [doc]
    code, _, _ = run(capsys, str(saved))
    assert code == 0
    assert stand_in.received[1] == doc


def test_log_applies_the_configured_filter_pattern(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_in: StandIn
) -> None:
    log = write(tmp_path, "train.log", None)
    Path(log).write_text("\n".join(LINES), encoding="utf-8")
    config = write(tmp_path, "config.json", {"log_rules": {"filter_pattern": "%nan%"}})
    code, [_], err = run(capsys, "--config", config, "--log", log, "--job", JOB)
    assert code == 0
    assert [e["message"] for e in stand_in.received[0]["logEvents"]] == [LINES[2]]
    assert "3 log events to" in err
    assert "1 matching the filter pattern '%nan%'" in err


def test_a_filter_log_events_print_keeps_its_ids_times_and_streams(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_in: StandIn
) -> None:
    printed = {
        "events": [
            {"logStreamName": f"{JOB}/algo-{host}-1796004800", "timestamp": SECOND + i, "message": m, "eventId": f"{i}"}
            for i, (host, m) in enumerate([(1, "loss=1.0"), (2, "loss=2.0"), (1, "loss=nan")])
        ],
        "searchedLogStreams": [],
    }
    code, lines, _ = run(capsys, "--log", write(tmp_path, "printed.json", printed))
    assert code == 0
    assert [(d["logStream"], [e["id"] for e in d["logEvents"]]) for d in stand_in.received] == [
        (f"{JOB}/algo-1-1796004800", ["0", "2"]),
        (f"{JOB}/algo-2-1796004800", ["1"]),
    ]
    assert [line["time"] for line in lines] == ["2026-11-30T02:15:05Z"] * 2


def test_the_filter_pattern_selects_what_is_delivered_and_cuts_at_put_log_events_limits() -> None:
    lines = [f"step {i} loss={i}" if i % 2 else f"step {i} lr=0.1" for i in range(1, 10_003)]
    events = logs_ext.read_events("\n".join(lines), start_ms=0)
    deliveries = logs_ext.deliveries(events, filter_pattern="?loss ?nan", log_stream=STREAM, owner="123456789012")
    # 10,002 lines are two PutLogEvents calls (10,000 events at most each): two deliveries of the loss lines only
    assert [len(logs_ext.decode(d)["logEvents"]) for d in deliveries] == [5000, 1]
    assert all("loss=" in e["message"] for d in deliveries for e in logs_ext.decode(d)["logEvents"])
    # a byte-heavy log is cut at 1,048,576 bytes a call, each event counting 26 bytes more than its message
    heavy = [{"id": str(i), "timestamp": i, "message": "x" * (1024 * 256 - 26)} for i in range(5)]
    assert [len(call) for call in logs_ext.puts(heavy)] == [4, 1]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--log", "{log}"), "the log names no stream: give the job's name with --job NAME"),
        (("--log", "{log}", "--job", "bad_name"), "--job 'bad_name': not a training job name"),
        (("--log", "{log}", "--job", "j", "--host", "0"), "--host 0: a host is numbered from 1"),
        (("--job", "j", "{event}"), "--job and --write-deliveries go with --log LOGFILE"),
        ((), "give EVENT.json files, a training log with --log LOGFILE, or both"),
        (("--log", "{missing}", "--job", "j"), "cannot read log"),
        (("--log", "{empty}", "--job", "j"), "no log line in it"),
    ],
)
def test_bad_log_input_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_in: StandIn, args: tuple[str, ...], says: str
) -> None:
    (tmp_path / "train.log").write_text("\n".join(LINES), encoding="utf-8")
    (tmp_path / "empty.log").write_text("\n\n", encoding="utf-8")
    paths = {
        "log": str(tmp_path / "train.log"),
        "missing": str(tmp_path / "nope.log"),
        "empty": str(tmp_path / "empty.log"),
        "event": str(EVENTS_DIR / "rule_error.json"),
    }
    code, lines, err = run(capsys, *(a.format(**paths) for a in args))
    assert (code, lines, stand_in.received) == (2, [], [])
    assert err.count("\n") == 1
    assert says in err


# --- the filter pattern ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("", ["anything"], []),
        ("loss", ["loss=1", "val_loss: 2"], ["Loss=1", "lr=0.1"]),  # terms are case-sensitive
        ("loss nan", ["loss=nan"], ["loss=1.0", "nan"]),  # every term
        ("?loss ?nan ?Loss", ["loss=1", "grad nan", "Loss: 2"], ["lr=0.1"]),  # any term
        ("loss -val_loss", ["loss=1"], ["loss=1 val_loss=2"]),  # a term excluded
        ('"Train Epoch" loss', ["Train Epoch: 1 loss=2"], ["Train epoch: 1 loss=2", "Epoch Train loss"]),
        ("%[Ll]oss[=:] *[0-9n]%", ["Loss: 2", "loss=nan"], ["loss is 2", "lr=0.1"]),  # a regular expression
    ],
)
def test_the_filter_pattern_matches_as_cloudwatch_logs_documents_it(
    pattern: str, matching: list[str], not_matching: list[str]
) -> None:
    matches = logs_ext.matcher(pattern)
    assert [m for m in matching if not matches(m)] == []
    assert [m for m in not_matching if matches(m)] == []


@pytest.mark.parametrize("pattern", ['{ $.loss = "nan" }', "[time, level=ERROR, ...]", "?loss nan", "%(a%"])
def test_a_pattern_the_emulation_cannot_apply_is_refused_not_matched_loosely(pattern: str) -> None:
    with pytest.raises(logs_ext.FilterPatternError, match="filter pattern"):
        logs_ext.matcher(pattern)


# --- the template's subscription ---------------------------------------------------------------------------------
def _template(subscription: dict[str, Any]) -> dict[str, Any]:
    function = {"Type": "AWS::Lambda::Function", "Properties": {"Handler": logs_ext.LOG_EVENTS_HANDLER}}
    provider = {"Type": "AWS::Lambda::Function", "Properties": {"Handler": "provider.handler"}}
    return {"Resources": {"LogRulesFunction": function, "Provider": provider, "Subscription": subscription}}


@pytest.mark.parametrize(
    "subscription",
    [
        {
            "Type": "Custom::LogSubscription",
            "Properties": {
                "ServiceToken": {"Fn::GetAtt": ["Provider", "Arn"]},
                "LogGroupName": contract.TRAINING_LOG_GROUP,
                "FilterName": contract.LOG_SUBSCRIPTION_FILTER_NAME,
                "FilterPattern": "?loss ?nan",
                "DestinationArn": {"Fn::GetAtt": ["LogRulesFunction", "Arn"]},
            },
        },
        {
            "Type": "AWS::Logs::SubscriptionFilter",
            "Properties": {
                "LogGroupName": contract.TRAINING_LOG_GROUP,
                "FilterName": contract.LOG_SUBSCRIPTION_FILTER_NAME,
                "FilterPattern": "?loss ?nan",
                "DestinationArn": {"Fn::GetAtt": ["LogRulesFunction", "Arn"]},
            },
        },
    ],
    ids=["custom resource", "subscription filter"],
)
def test_the_subscription_is_read_from_the_template(subscription: dict[str, Any]) -> None:
    assert logs_ext.subscription_from(_template(subscription)) == logs_ext.Subscription(
        filter_name=contract.LOG_SUBSCRIPTION_FILTER_NAME,
        filter_pattern="?loss ?nan",
        handler=logs_ext.LOG_EVENTS_HANDLER,
        log_group=contract.TRAINING_LOG_GROUP,
    )


def test_a_template_without_a_subscription_has_none() -> None:
    other = {"Type": "Custom::Other", "Properties": {"ServiceToken": {"Fn::GetAtt": ["Provider", "Arn"]}}}
    assert logs_ext.subscription_from(_template(other)) is None


# --- the emulated log group --------------------------------------------------------------------------------------
def test_lines_written_to_the_emulated_group_come_back_with_ids_in_order(aws: Emulation) -> None:
    now = int(time.time() * 1000)
    stream = logs_ext.stream_name(JOB, epoch=now // 1000)
    first = aws.put_log_events(stream, [{"timestamp": now + i, "message": m} for i, m in enumerate(LINES[:2])])
    second = aws.put_log_events(stream, [{"timestamp": now + 5, "message": LINES[2]}])
    assert [e["message"] for e in first + second] == LINES
    ids = [e["id"] for e in first + second]
    assert all(len(i) == 56 and i.isdigit() for i in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == 3
    got = aws.client("logs").describe_log_streams(logGroupName=contract.TRAINING_LOG_GROUP)["logStreams"]
    assert [s["logStreamName"] for s in got] == [stream]
    assert logs_ext.job_of(stream) == JOB
    assert logs_ext.job_of("not-a-job-stream") is None


# --- the real log-rules function -------------------------------------------------------------------------------
def test_a_saved_nan_log_is_stopped_at_its_line_by_the_real_function(capsys: pytest.CaptureFixture[str]) -> None:
    log = str(LOGS / "pytorch_mlp_nan.log")
    code, [line], _ = run(capsys, "--log", log, "--job", "mlp-lr2", "--now", "2026-11-30T03:00:00Z")
    assert code == 0
    assert (line["stopped"], line["job_status"], line["log_events"]) == (True, "Stopping", 90)
    stop = next(f for f in line["log_rules"] if f["outcome"] == "stopped")
    # the loss is 15 (line 14), 7.7x its best, before it is nan (line 15): no later than that line
    assert (stop["rule"], stop["line"], stop["event_id"]) == ("Divergence", 14, "14")
    assert "7.7x its best" in stop["detail"]
    nan = next(f for f in line["log_rules"] if f["rule"] == "NaN")
    assert (nan["line"], nan["outcome"]) == (15, "folded")  # one stop: the NaN folds into it


def test_the_same_delivery_twice_stops_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "deliveries.json"
    log = str(LOGS / "pytorch_mlp_nan.log")
    code, _, _ = run(capsys, "--log", log, "--job", "mlp-lr2", "--write-deliveries", str(saved))
    assert code == 0
    code, lines, _ = run(capsys, str(saved), str(saved))
    assert code == 0
    assert [line["stopped"] for line in lines] == [True, False]
    assert lines[1]["log_rules"] == []  # nothing new: the events were folded already


def test_a_healthy_log_is_never_stopped(capsys: pytest.CaptureFixture[str]) -> None:
    log = str(LOGS / "pytorch_mnist_healthy.log")
    code, [line], _ = run(capsys, "--log", log, "--job", "mnist-lr005")
    assert code == 0
    assert line["stopped"] is False
    assert line["job_status"] == "InProgress"
    assert all(f["outcome"] != "stopped" for f in line["log_rules"])


def test_slack_preview_shows_what_a_delivery_leads_to(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "deliveries.json"
    code, _, _ = run(
        capsys, "--log", str(LOGS / "pytorch_mlp_nan.log"), "--job", "mlp-lr2", "--write-deliveries", str(saved)
    )
    assert code == 0
    assert main(["slack-preview", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "Stopped mlp-lr2: log rule Divergence: loss 15 is 7.7x its best level" in out


@pytest.mark.parametrize(
    "log_rules",
    [
        {},
        {"filter_pattern": "%nan%"},
        {"patterns": [{"name": "NCCL-timeout", "regex": "NCCL.*[Tt]imeout", "action": "stop"}]},
        {"loss_metric": "objective", "validation_metric": "val-acc"},
        {"loss_metric": "train_loss"},  # the guard's pattern selects it already
        {"loss_metric": "top 1 error"},  # a name the dialect cannot spell: not added
    ],
)
def test_simulate_filters_with_the_pattern_the_stack_deploys(log_rules: dict[str, Any]) -> None:
    # One function (domain/log_filter.py) serves both: the stack's subscription and simulate, which needs no CDK.
    from infra.components.log_rules import WingSettings
    from training_guard.domain.log_filter import effective_filter_pattern

    config = GuardConfig.from_dict({"log_rules": log_rules})
    assert WingSettings.of(config).filter_pattern == effective_filter_pattern(config.log_rules)
