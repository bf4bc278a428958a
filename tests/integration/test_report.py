"""`training-guard report` against the synthesized stack deployed on moto, seeded with stop records and metrics.

The stop records are written by the guard's own ledger (adapters/ledger.py), with the spend attributes added
as the stop path records them; the metrics are put as Powertools publishes them (namespace TrainingGuard,
dimension service). The report must find the table through the stack's outputs and give these totals exactly.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html import escape
from pathlib import Path
from typing import Any

import pytest

from infra import outputs
from tests.integration.deployed import ACCOUNT, REGION, STACK, Deployment, deployed
from tests.integration.test_doctor import refuse
from training_guard import contract
from training_guard.adapters.ledger import DynamoLedger
from training_guard.config.model import GuardConfig
from training_guard.domain import totals
from training_guard.services.ports import StopRecord
from training_guard.services.responder import AUDIT_RETENTION_SECONDS
from training_guard_local import cli, doctor, report

pytestmark = pytest.mark.integration

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SINCE = NOW - timedelta(days=7)  # --since 7d
MNIST_1 = "pytorch-mnist-lr01-2026-11-29-02-10-00-123"
MNIST_2 = "pytorch-mnist-lr01-2026-11-29-05-00-00-001"
RESNET = "resnet50-no-debugger-2026-11-28-01-00-00"
BERT = "bert-exp-7"
EDGE = "edge-run-1"
GUARD_REASON = "metric_guards.loss-diverging: MAX(train:loss) > 5 for 3 of 3 min -> stop"


def table(stack: Deployment) -> str:
    return stack.outputs[outputs.STATE_TABLE_NAME]


def record_stop(
    stack: Deployment,
    job: str,
    at: datetime,
    *,
    rule: str = "VanishingGradient",
    reason: str = "rules.debugger_default = stop (debugger rule VanishingGradient)",
    confirmed: bool = True,
    spend: dict[str, Any] | None = None,
) -> None:
    """A stop as the responder records it: claimed, confirmed once SageMaker accepted it, spend added."""
    ledger = DynamoLedger(stack.client("dynamodb"), table(stack))
    record = StopRecord(job=job, rule=rule, reason=reason, at=at, event_id=f"event-{job}")
    assert ledger.claim_stop(record, ttl_seconds=AUDIT_RETENTION_SECONDS).granted
    if confirmed:
        ledger.confirm_stop(job)
    if spend:
        names = {f"#s{i}": k for i, k in enumerate(spend)}
        stack.client("dynamodb").update_item(
            TableName=table(stack),
            Key={"pk": {"S": f"stop#{job}"}},
            UpdateExpression="SET " + ", ".join(f"{n} = :v{n[2:]}" for n in names),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={f":v{i}": v for i, v in enumerate(spend.values())},
        )


def put_metric(stack: Deployment, name: str, at: datetime, value: float, service: str = "training-guard") -> None:
    stack.client("cloudwatch").put_metric_data(
        Namespace=contract.GUARD_METRICS_NAMESPACE,
        MetricData=[
            {
                "MetricName": name,
                "Dimensions": [{"Name": "service", "Value": service}],
                "Timestamp": at,
                "Value": value,
                "Unit": "Count",
            }
        ],
    )


def seed(stack: Deployment) -> None:
    day = timedelta(days=1)
    record_stop(
        stack,
        MNIST_1,
        datetime(2026, 11, 29, 2, 10, tzinfo=UTC),
        spend={
            "spend_avoided_usd": {"N": "120.50"},
            "spend_so_far_usd": {"N": "10.25"},
            "price_source": {"S": "AWS Price List API (2026-11-01)"},
            "instance_types": {"SS": ["ml.p3.2xlarge"]},
        },
    )
    record_stop(
        stack,
        MNIST_2,
        datetime(2026, 11, 29, 5, 0, tzinfo=UTC),
        spend={"spend_avoided_usd": {"N": "80.25"}, "spend_so_far_usd": {"N": "4"}},
    )
    # no spend attributes at all (stopped by a guard deployed before them): unknown
    record_stop(stack, RESNET, datetime(2026, 11, 28, 1, 0, tzinfo=UTC), rule="loss-diverging", reason=GUARD_REASON)
    # a null spend avoided (the job had no maximum runtime to price): unknown
    record_stop(
        stack,
        BERT,
        datetime(2026, 11, 25, 10, 0, tzinfo=UTC),
        rule="LossNotDecreasing",
        reason="rules.actions.LossNotDecreasing = stop",
        spend={"spend_avoided_usd": {"NULL": True}, "spend_so_far_usd": {"N": "2.5"}},
    )
    # exactly at the window's start: counted
    record_stop(stack, EDGE, SINCE, spend={"spend_avoided_usd": {"N": "1.00"}})
    # a stop SageMaker never confirmed: apart
    record_stop(
        stack,
        "xgb-tune-2026-11-27-00-00-00",
        datetime(2026, 11, 27, tzinfo=UTC),
        rule="stall",
        reason="stall.minutes = 30 -> stop",
        confirmed=False,
        spend={"spend_avoided_usd": {"N": "500"}},
    )
    # before the window: not counted
    record_stop(stack, "old-job-2026-11-01-00-00-00", SINCE - day, spend={"spend_avoided_usd": {"N": "999"}})
    # what else the table holds: a transition and a cached price
    ledger = DynamoLedger(stack.client("dynamodb"), table(stack))
    ledger.claim(f"t#{MNIST_1}#debugger#VanishingGradient#IssuesFound", now=NOW - day, lease_seconds=60)
    stack.client("dynamodb").put_item(
        TableName=table(stack), Item={"pk": {"S": "price#eu-west-1#ml.p3.2xlarge"}, "usd": {"N": "3.825"}}
    )

    put_metric(stack, "Outcome_would_stop", datetime(2026, 11, 29, 3, 5, tzinfo=UTC), 2)
    put_metric(stack, "Outcome_would_stop", datetime(2026, 11, 26, 9, 0, tzinfo=UTC), 1)
    put_metric(stack, "Outcome_would_stop", SINCE - day, 4)  # before the window
    put_metric(stack, "Outcome_would_stop", datetime(2026, 11, 29, 3, 5, tzinfo=UTC), 9, service="another-app")
    for at in (datetime(2026, 11, 29, 2, 10, tzinfo=UTC), datetime(2026, 11, 29, 5, 0, tzinfo=UTC)):
        put_metric(stack, "Outcome_stopped", at, 1)
    put_metric(stack, "Outcome_notified", datetime(2026, 11, 28, 1, 0, tzinfo=UTC), 5)
    put_metric(stack, "Outcome_deferred", datetime(2026, 11, 28, 1, 0, tzinfo=UTC), 1)
    # as the stop path publishes it: per stop, with the rule as a second dimension (the records give the figure)
    stack.client("cloudwatch").put_metric_data(
        Namespace=contract.GUARD_METRICS_NAMESPACE,
        MetricData=[
            {
                "MetricName": "SpendAvoidedUSD",
                "Dimensions": [{"Name": "service", "Value": "training-guard"}, {"Name": "rule", "Value": "X"}],
                "Timestamp": datetime(2026, 11, 29, 2, 10, tzinfo=UTC),
                "Value": 7777.0,
            }
        ],
    )


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployment]:
    with deployed(GuardConfig()) as deployment:
        seed(deployment)
        monkeypatch.setattr(doctor, "connect", lambda environ, region: deployment.aws())
        monkeypatch.setattr(report, "utcnow", lambda: NOW)
        yield deployment


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["report", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- the totals, exactly ---------------------------------------------------------------------------------------------


def test_the_report_of_a_seeded_deployment_has_exactly_its_totals(
    stack: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--since", "7d", "--json", "--region", REGION)
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert document["schema"] == "training-guard.report/1"
    assert (document["stack"], document["region"], document["account"]) == (STACK, REGION, ACCOUNT)
    assert document["table"] == table(stack)
    assert (document["since"], document["until"]) == ("2026-11-23T12:00:00Z", "2026-11-30T12:00:00Z")
    assert (document["stops"], document["unconfirmed_stops"], document["would_stop"]) == (5, 1, 3)
    assert document["spend_avoided"] == {"usd": 201.75, "known": 3, "unknown": 2, "unknown_jobs": [BERT, RESNET]}
    assert document["spend_so_far"] == {"usd": 16.75, "known": 3, "unknown": 2}
    assert [(r["name"], r["kind"], r["stops"], r["spend_avoided"]) for r in document["rules"]] == [
        ("VanishingGradient", "rules", 3, {"usd": 201.75, "known": 3, "unknown": 0}),
        ("LossNotDecreasing", "rules", 1, {"usd": 0.0, "known": 0, "unknown": 1}),
        ("loss-diverging", "metric_guards", 1, {"usd": 0.0, "known": 0, "unknown": 1}),
    ]
    assert [(p["name"], p["stops"], p["spend_avoided"]["usd"]) for p in document["prefixes"]] == [
        ("pytorch-mnist-lr01", 2, 200.75),
        ("edge-run", 1, 1.0),
        ("bert-exp", 1, 0.0),
        ("resnet50-no-debugger", 1, 0.0),
    ]
    # One count of stops, the records'; the metric's own is named for what it counts, and says why it is lower
    assert (document["stops"], document["stops_counted_by_metrics"]) == (5, 2)
    assert document["stops_note"] == report.STOPS_NOTE
    assert list(document).index("stops_counted_by_metrics") == list(document).index("stops") + 1
    assert document["outcomes"] == {
        "would_stop": 3,
        "deferred": 1,
        "notified": 5,
        "already_ended": 0,
        "already_stopping": 0,
    }
    assert set(document["metrics"]) == set(totals.METRICS)
    assert [(d["day"], d["stops"], d["would_stop"], d["spend_avoided_usd"]) for d in document["days"]] == [
        ("2026-11-23", 1, 0, 1.0),
        ("2026-11-24", 0, 0, 0.0),
        ("2026-11-25", 1, 0, 0.0),
        ("2026-11-26", 0, 1, 0.0),
        ("2026-11-27", 0, 0, 0.0),
        ("2026-11-28", 1, 0, 0.0),
        ("2026-11-29", 2, 2, 200.75),
        ("2026-11-30", 0, 0, 0.0),
    ]
    assert document["warnings"] == []


def test_the_text_report_fits_one_screen_and_says_what_is_unknown(
    stack: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--since", "7d")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) <= 24
    assert lines[:2] == [
        f"Training Guard report: stack {STACK} in {REGION} (account {ACCOUNT})",
        "2026-11-23 12:00 UTC to 2026-11-30 12:00 UTC (7 days)",
    ]
    assert "  stopped             5 jobs  (1 stop attempt never confirmed by SageMaker, left out)" in lines
    assert "                      (the Outcome_stopped metric counts 2: only stops on an event or an alarm)" in lines
    assert "  would have stopped  3  (not stopped: dry run, or the job's tags)" in lines
    assert "  spend avoided       up to $201.75 at list price, 2 of 5 unknown" in lines
    assert "  other outcomes      deferred 1 · notified 5" in lines
    assert any(line.startswith("  VanishingGradient (rules)") and line.endswith("3   $201.75") for line in lines)
    assert any(line.startswith("  loss-diverging (metric_guards)") and line.endswith("1   unknown") for line in lines)
    assert lines[-1] == "stops per day  ▄·▄··▄█·  (max 2)"


def test_a_window_from_a_date_starts_at_its_midnight_utc(stack: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--since", "2026-11-28", "--json")
    document = json.loads(out)
    assert (code, document["since"], document["stops"], document["would_stop"]) == (0, "2026-11-28T00:00:00Z", 3, 2)


def test_a_separator_groups_jobs_by_the_teams_own_convention(
    stack: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(capsys, "--since", "7d", "--json", "--prefix-separator", "-")
    prefixes = {p["name"]: p["stops"] for p in json.loads(out)["prefixes"]}
    assert prefixes == {"pytorch": 2, "edge": 1, "bert": 1, "resnet50": 1}


# --- the HTML page ---------------------------------------------------------------------------------------------------


def test_the_html_page_is_self_contained_and_escapes_what_the_account_names(
    stack: Deployment, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record_stop(stack, "<img src=x onerror=alert(1)>-1", NOW - timedelta(hours=1), rule="<script>alert(1)</script>")
    page = tmp_path / "report.html"
    code, out, err = run(capsys, "--since", "7d", "--html", str(page))
    assert code == 0
    assert err == f"training-guard report: wrote {page}\n"
    assert out.startswith("Training Guard report:")  # the text still goes to stdout
    html = page.read_text(encoding="utf-8")
    lowered = html.lower()
    for fetches in ("<script", "src=", "href=", "url(", "@import", "<link", "<iframe", "<object"):
        assert fetches not in lowered.replace("&lt;script", "").replace("&lt;img src=", ""), fetches
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert html.count("<svg") == 2
    # the bars: 6 stops over 5 days (the new one today), would-have-stopped on 2 days, spend on 2 days
    assert html.count(f'fill="{report_html().STOPPED_COLOUR}"') == 5
    assert html.count(f'fill="{report_html().WOULD_STOP_COLOUR}"') == 2
    assert html.count(f'fill="{report_html().SPEND_COLOUR}"') == 2
    assert "$201.75" in html
    assert (
        escape(
            "Jobs stopped counts the audit records: every stop. The guard's Outcome_stopped metric counts 2: only the "
            "stops made on an event or an alarm (not the sweeper's, not Stop now in Slack)."
        )
        in html
    )


def report_html() -> Any:
    from training_guard_local import report_html

    return report_html


def test_without_the_metrics_the_report_still_runs_and_says_what_is_unknown(
    stack: Deployment, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws = stack.aws()
    refuse(aws, "cloudwatch", "GetMetricData")
    monkeypatch.setattr(doctor, "connect", lambda environ, region: aws)
    page = tmp_path / "report.html"
    code, out, err = run(capsys, "--since", "7d", "--json", "--html", str(page))
    document = json.loads(out)
    assert code == 0
    assert (document["stops"], document["would_stop"], document["outcomes"]) == (5, None, None)
    assert document["warnings"] == [
        "the guard's metrics could not be read (GetMetricData: AccessDenied): would-have-stopped and the other "
        "outcomes are unknown; the credentials need cloudwatch:GetMetricData"
    ]
    assert err.endswith(f"training-guard report: warning: {document['warnings'][0]}\n")
    assert 'would have stopped</div><div class="v">unknown' in page.read_text(encoding="utf-8")


# --- scanning a large table -------------------------------------------------------------------------------------------


def test_the_scan_follows_every_page_and_reports_its_progress(stack: Deployment) -> None:
    for n in range(12):
        record_stop(stack, f"bulk-{n:02d}", NOW - timedelta(hours=n + 1), spend={"spend_avoided_usd": {"N": "0.5"}})
    stream = io.StringIO()
    progress = report.ScanProgress(table(stack), stream=stream, after=0, every=0)
    found = report.scan_stops(stack.client("dynamodb"), table(stack), since=SINCE, progress=progress, page_size=3)
    assert sum(1 for s in found if s.job.startswith("bulk-")) == 12
    assert {s.job for s in found} >= {MNIST_1, MNIST_2, RESNET, BERT, EDGE}
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 6  # 22 items at 3 a page: a line for each page but the last
    assert lines[-1].startswith(f"training-guard report: scanning {table(stack)}: ")
    assert lines[-1].endswith(" stop records")


def test_a_time_written_in_another_offset_is_not_lost_to_the_text_filter(stack: Deployment) -> None:
    # 05:00-08:00 is 13:00 UTC, inside the window, but sorts as text before the window's "12:00+00:00"
    stack.client("dynamodb").put_item(
        TableName=table(stack),
        Item={
            "pk": {"S": "stop#pacific-1"},
            "job": {"S": "pacific-1"},
            "rule": {"S": "VanishingGradient"},
            "reason": {"S": "rules.debugger_default = stop"},
            "stopped_at": {"S": "2026-11-23T05:00:00-08:00"},
            "confirmed": {"BOOL": True},
        },
    )
    found = report.scan_stops(stack.client("dynamodb"), table(stack), since=SINCE)
    [pacific] = [s for s in found if s.job == "pacific-1"]
    assert pacific.at == datetime(2026, 11, 23, 13, 0, tzinfo=UTC)
    assert totals.compute(found, {}, since=SINCE, until=NOW).stops == 6


def test_a_short_scan_says_nothing() -> None:
    ticks = iter([0.0, 0.5, 1.0])
    stream = io.StringIO()
    progress = report.ScanProgress("T", stream=stream, clock=lambda: next(ticks))
    progress.step(100, 1)
    progress.step(200, 2)
    assert stream.getvalue() == ""


# --- bad input and missing access: one line, exit 2, before any work ---------------------------------------------------


def test_an_html_path_that_cannot_be_written_is_refused_before_anything_is_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def never(environ: Any, region: Any) -> Any:
        raise AssertionError("the report connected before checking --html")

    monkeypatch.setattr(doctor, "connect", never)
    missing = tmp_path / "no-such-folder" / "report.html"
    assert run(capsys, "--html", str(missing)) == (
        2,
        "",
        f"training-guard report: --html {missing}: the folder {missing.parent} does not exist\n",
    )
    assert run(capsys, "--html", str(tmp_path)) == (
        2,
        "",
        f"training-guard report: --html {tmp_path}: is a folder; name the HTML file to write\n",
    )


@pytest.mark.parametrize(
    ("since", "message"),
    [
        ("30x", "--since 30x: not a duration nor a date; write 30d, 7d, 12h, 2026-11-01 or 2026-11-01T08:00Z"),
        ("0d", "--since 0d: must be at least 1d"),
        ("-5d", "--since -5d: must be positive: how far back, e.g. 5d"),
        ("-12h", "--since -12h: must be positive: how far back, e.g. 12h"),
        ("-5", "--since -5: must be positive: how far back, e.g. 5d"),
        ("401d", "--since 401d: at most 400 days back; the guard keeps its audit records 400 days"),
        ("2026-12-25", "--since 2026-12-25: is not in the past (now is 2026-11-30 12:00 UTC)"),
        ("2025-10-01", "--since 2025-10-01: at most 400 days back; the guard keeps its audit records 400 days"),
    ],
)
def test_a_bad_since_is_one_line(
    since: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(report, "utcnow", lambda: NOW)
    assert run(capsys, "--since", since) == (2, "", f"training-guard report: {message}\n")


def test_since_accepts_hours_days_dates_and_times() -> None:
    assert report.parse_since("12h", NOW) == NOW - timedelta(hours=12)
    assert report.parse_since("30D", NOW) == NOW - timedelta(days=30)
    assert report.parse_since("400d", NOW) == NOW - timedelta(days=400)
    assert report.parse_since("2026-11-01T08:00Z", NOW) == datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    assert report.parse_since("2026-11-01T09:00+01:00", NOW) == datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


def test_no_stack_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with deployed(GuardConfig()) as stack:
        stack.exists = False
        monkeypatch.setattr(doctor, "connect", lambda environ, region: stack.aws())
        assert run(capsys, "--stack", STACK) == (
            2,
            "",
            f"training-guard report: no stack {STACK} in {REGION}: deploy it (make deploy), or name it: "
            "training-guard report --stack NAME --region REGION\n",
        )


def test_a_stack_without_the_table_output_is_one_line(stack: Deployment, capsys: pytest.CaptureFixture[str]) -> None:
    del stack.outputs[outputs.STATE_TABLE_NAME]
    code, _, err = run(capsys)
    assert (code, err) == (
        2,
        f"training-guard report: the stack {STACK} has no output StateTableName: it was deployed by an older "
        "version of the guard; deploy this one (make deploy)\n",
    )


def test_credentials_that_may_not_scan_the_table_are_one_line(
    stack: Deployment, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    aws = stack.aws()
    refuse(aws, "dynamodb", "Scan")
    monkeypatch.setattr(doctor, "connect", lambda environ, region: aws)
    assert run(capsys) == (
        2,
        "",
        f"training-guard report: Scan of the state table {table(stack)} was refused (AccessDenied): the "
        "credentials need dynamodb:Scan on it\n",
    )


def test_credentials_that_may_not_read_the_stack_are_one_line(
    stack: Deployment, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    aws = stack.aws()
    refuse(aws, "cloudformation", "DescribeStacks")
    monkeypatch.setattr(doctor, "connect", lambda environ, region: aws)
    assert run(capsys)[0::2] == (
        2,
        "training-guard report: DescribeStacks was refused (AccessDenied): the credentials cannot read the stack\n",
    )


def test_aws_out_of_reach_mid_way_is_one_line(
    stack: Deployment, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from botocore.exceptions import EndpointConnectionError

    aws = stack.aws()

    def unreachable(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://dynamodb.eu-west-1.amazonaws.com/")

    aws.client("dynamodb").meta.events.register_first("before-call.dynamodb.Scan", unreachable)
    monkeypatch.setattr(doctor, "connect", lambda environ, region: aws)
    assert run(capsys) == (
        cli.EXIT_NETWORK,
        "",
        "training-guard report: cannot reach AWS (Could not connect to the endpoint URL: "
        '"https://dynamodb.eu-west-1.amazonaws.com/"): check the network connection, a proxy (HTTPS_PROXY) or '
        "AWS_ENDPOINT_URL\n",
    )


# --- what the report relies on, pinned -----------------------------------------------------------------------------------


def test_one_get_metric_data_request_holds_the_longest_window() -> None:
    queries = report.metric_queries()
    assert len(queries) == len(totals.METRICS) <= report.METRIC_QUERIES_MAX
    hours = report.MAX_DAYS * 24 + 1
    assert hours * len(queries) <= report.METRIC_DATAPOINTS_MAX
    assert {q["MetricStat"]["Period"] for q in queries} == {3600}


def test_the_window_reaches_no_further_back_than_the_audit_records_are_kept() -> None:
    assert report.MAX_DAYS * 86400 == AUDIT_RETENTION_SECONDS
