"""Spend in every notification and record (issue 15): the job's resources parsed from events and
DescribeTrainingJob, the spend each notification carries (so far; for a stop or would-stop, up to what stopping
avoids), the stop's audit record, tags and metric, and every edge where something is unknown.

Prices here are made up for the arithmetic (3.60 USD/h for ml.p3.2xlarge): not a claim about AWS's prices.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fakes import FakeJobs, FakeLedger, FakeMeter, FakePrices, FakePublisher
from tests.helpers import NOW, load_event, with_detail
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard.domain import pricing
from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import InstanceGroup, parse_event, parse_job
from training_guard.domain.outcome import Outcome
from training_guard.domain.pricing import PriceQuote, spend_line
from training_guard.render.messages import Notification, make_test_notification, q_developer_notification
from training_guard.render.slack_messages import render
from training_guard.services.ports import StopSpend
from training_guard.services.responder import Receipt, Responder

JOB = "pytorch-mnist-lr01-2026-11-30-02-10-00-123"
JOB_ARN = f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{JOB}"
P3 = PriceQuote("ml.p3.2xlarge", "us-east-1", 3.6, pricing.SOURCE_API, "2026-11-01", "TESTSKU")
RAN = 2910.0  # the fixtures' job started 02:11:30; NOW is 03:00:00
LEFT = 86400.0 - RAN  # until its MaxRuntimeInSeconds, a day
SO_FAR = round(3.6 * RAN / 3600, 2)  # 2.91
AVOIDED = round(3.6 * LEFT / 3600, 2)  # 83.49


@dataclass
class World:
    """The responder with fakes; `calls` is the order in which SageMaker and the price list were asked."""

    config: GuardConfig = field(default_factory=GuardConfig)
    calls: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        calls = self.calls

        class Jobs(FakeJobs):
            def stop(self, name: str) -> bool:
                calls.append("StopTrainingJob")
                return super().stop(name)

            def tag(self, arn: str, tags: Any) -> None:
                calls.append("AddTags")
                super().tag(arn, tags)

        class Prices(FakePrices):
            def prices(self, region: str, instance_types: tuple[str, ...], *, now: datetime) -> Any:
                calls.append("price")
                return super().prices(region, instance_types, now=now)

        self.jobs = Jobs()
        self.ledger = FakeLedger()
        self.publisher = FakePublisher()
        self.prices = Prices(quotes={("us-east-1", "ml.p3.2xlarge"): P3})
        self.meter = FakeMeter()
        self.guard = Responder(
            self.config, self.jobs, self.ledger, self.publisher, prices=self.prices, meter=self.meter
        )

    def see(self, event: dict[str, Any], now: datetime = NOW) -> Receipt:
        parsed = parse_event(event)
        self.jobs.jobs.setdefault(parsed.job.name, parsed.job)
        return self.guard.handle(parsed, now=now)

    def note(self) -> Notification:
        [note] = self.publisher.published
        return note


def finding(**detail: Any) -> dict[str, Any]:
    return with_detail(load_event("vanishing_gradient_issues_found"), **detail)


# --- The job's resources, parsed tolerantly ------------------------------------------------------------------
def test_an_events_resources_are_parsed_as_describe_training_job_gives_them() -> None:
    detail = load_event("vanishing_gradient_issues_found")["detail"]
    described = {
        **detail,
        "TrainingStartTime": datetime(2026, 11, 30, 2, 11, 30, tzinfo=UTC),  # boto3 gives datetimes
        "CreationTime": datetime(2026, 11, 30, 2, 10, tzinfo=UTC),
        "LastModifiedTime": datetime(2026, 11, 30, 2, 15, 5, tzinfo=UTC),
    }
    from_event, from_describe = parse_job(detail, where="detail"), parse_job(described)
    for job in (from_event, from_describe):
        assert job.billed_instances == (InstanceGroup("ml.p3.2xlarge", 1),)
        assert (job.max_runtime_seconds, job.managed_spot) == (86400.0, False)
        assert (job.billable_seconds, job.training_time_seconds) == (None, None)
    assert from_event.training_start_time == from_describe.training_start_time


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [(3600, 3600.0), (3600.5, 3600.5), ("3600", 3600.0), (" 60 ", 60.0), (None, None), ("", None), ("an hour", None),
     (-1, None), (float("nan"), None), (float("inf"), None), (True, None), ({"s": 1}, None)],
)  # fmt: skip
def test_durations_arrive_as_numbers_numeric_strings_or_nothing_and_anything_else_is_unknown(
    raw: Any, seconds: float | None
) -> None:
    job = parse_job(
        finding(StoppingCondition={"MaxRuntimeInSeconds": raw}, BillableTimeInSeconds=raw, TrainingTimeInSeconds=raw)[
            "detail"
        ]
    )
    assert (job.max_runtime_seconds, job.billable_seconds, job.training_time_seconds) == (seconds, seconds, seconds)


@pytest.mark.parametrize(("raw", "spot"), [(True, True), ("true", True), ("True", True), (False, False),
                                           ("false", False), (1, False), (None, False)])  # fmt: skip
def test_managed_spot_training_is_a_json_true_or_the_string_true(raw: Any, spot: bool) -> None:
    assert parse_job(finding(EnableManagedSpotTraining=raw)["detail"]).managed_spot is spot


def test_what_is_billed_is_the_selected_type_else_the_instance_groups_else_the_one_type() -> None:
    groups = [
        {"InstanceGroupName": "gpu", "InstanceType": "ml.p3.2xlarge", "InstanceCount": 2},
        {"InstanceGroupName": "cpu", "InstanceType": "ml.m5.large", "InstanceCount": "3"},
        "not a group",  # kept as a group of unknown type: dropping it would price the job too low
    ]
    job = parse_job(finding(ResourceConfig={"InstanceGroups": groups})["detail"])
    assert job.billed_instances == (
        InstanceGroup("ml.p3.2xlarge", 2, "gpu"),
        InstanceGroup("ml.m5.large", 3, "cpu"),
        InstanceGroup(None, None, None),
    )
    selected = {"InstanceGroups": groups, "SelectedInstanceType": "ml.g5.2xlarge", "SelectedInstanceCount": 4}
    assert parse_job(finding(ResourceConfig=selected)["detail"]).billed_instances == (
        InstanceGroup("ml.g5.2xlarge", 4),
    )
    nothing: Any
    for nothing in (None, {}, [], "ml.p3.2xlarge"):
        assert parse_job(finding(ResourceConfig=nothing)["detail"]).billed_instances == ()


# --- A stop: spend in the notification, the record, the tags, the metric ---------------------------------------
def test_a_stop_announces_what_the_job_spent_and_up_to_what_stopping_it_avoided_at_list_price() -> None:
    world = World()
    receipt = world.see(finding())
    spend = world.note().document()["spend"]
    assert spend["so_far_usd"] == SO_FAR
    assert spend["avoided_usd"] == AVOIDED
    assert spend["avoided_label"] == "up to"
    assert spend["price_source"] == "AWS Price List API (2026-11-01)"
    assert (spend["list_price"], spend["estimate"], spend["upper_bound"]) == (True, True, False)
    assert (spend["billed_seconds"], spend["seconds_left"]) == (RAN, LEFT)
    assert receipt.spend == spend  # what `training-guard simulate` prints
    assert world.prices.asked == [("us-east-1", ("ml.p3.2xlarge",))]  # asked once, for the job's region


def test_the_price_is_asked_only_after_sagemaker_accepted_the_stop() -> None:
    world = World()
    world.see(finding())
    assert world.calls == ["StopTrainingJob", "price", "AddTags"]


def test_a_stop_that_fails_asks_no_price() -> None:
    world = World()
    world.jobs.fail_stop = ActionFailed("StopTrainingJob", RuntimeError("ThrottlingException"))
    with pytest.raises(ActionFailed):
        world.see(finding())
    assert world.prices.asked == []


def test_the_stop_record_keeps_what_the_stop_avoided_for_the_report() -> None:
    world = World()
    world.see(finding())
    record = world.ledger.stops[JOB]
    assert record.confirmed
    assert record.spend == StopSpend(
        avoided_usd=AVOIDED,
        so_far_usd=SO_FAR,
        price_source="AWS Price List API (2026-11-01)",
        instance_types=("ml.p3.2xlarge",),
    )


def test_the_stopped_job_is_tagged_with_the_spend_avoided_in_dollars() -> None:
    world = World()
    world.see(finding())
    assert world.jobs.tags_by_arn[JOB_ARN][contract.TAG_SPEND_AVOIDED] == f"{AVOIDED:.2f}" == "83.49"


def test_each_stop_counts_its_spend_avoided_under_the_rule_that_stopped_it() -> None:
    world = World()
    world.see(finding())
    world.see(finding())  # a duplicate: no second stop, no second count
    assert world.meter.spend_avoided_usd == [("VanishingGradient", AVOIDED)]


def test_a_stop_whose_announcement_failed_is_counted_once_by_the_retry_that_announces_it() -> None:
    world = World()
    world.publisher.fail = ActionFailed("sns:Publish", RuntimeError("throttled"))
    with pytest.raises(ActionFailed):
        world.see(finding())
    assert world.meter.spend_avoided_usd == []
    world.publisher.fail = None
    world.see(finding())
    assert [rule for rule, _ in world.meter.spend_avoided_usd] == ["VanishingGradient"]


def test_a_would_stop_says_what_a_stop_would_have_avoided_and_counts_nothing() -> None:
    world = World(GuardConfig(dry_run=True))
    world.see(finding())
    note = world.note()
    assert note.outcome is Outcome.WOULD_STOP
    assert note.document()["spend"]["avoided_usd"] == AVOIDED
    # the document says what a stop would avoid; the line says "avoided" only where the guard's stop avoided it
    assert f"Spend:     ${SO_FAR} so far" in note.email_text().splitlines()
    assert world.meter.spend_avoided_usd == []
    assert world.ledger.stops == {}


def test_a_notification_without_a_stop_carries_spend_so_far_only() -> None:
    world = World()
    world.see(load_event("rule_error"))
    note = world.note()
    spend = note.document()["spend"]
    assert spend["so_far_usd"] == SO_FAR
    assert (spend["avoided_usd"], spend["avoided_label"], spend["seconds_left"]) == (None, None, None)
    assert f"Spend:     ${SO_FAR} so far" in note.email_text().splitlines()


# --- Unknown is unknown, never 0 ----------------------------------------------------------------------------
def test_a_stop_of_a_job_whose_price_is_unknown_says_unknown_everywhere_and_counts_nothing() -> None:
    world = World()
    world.prices.quotes.clear()
    world.see(finding())
    note = world.note()
    spend = note.document()["spend"]
    assert (spend["so_far_usd"], spend["avoided_usd"], spend["price_source"]) == (None, None, None)
    assert spend["unknown_instance_types"] == ["ml.p3.2xlarge"]
    line = "unknown: no price for ml.p3.2xlarge"  # said once, with why
    assert f"Spend:     {line}" in note.email_text().splitlines()
    assert world.ledger.stops[JOB].spend == StopSpend(None, None, None, ("ml.p3.2xlarge",))
    assert world.jobs.tags_by_arn[JOB_ARN][contract.TAG_SPEND_AVOIDED] == "unknown"
    assert world.meter.spend_avoided_usd == []


def test_a_price_lookup_that_fails_unexpectedly_costs_neither_the_stop_nor_the_alert() -> None:
    world = World()
    world.prices.fail = RuntimeError("the Price List API's client could not be made")
    receipt = world.see(finding())
    assert receipt.stopped
    assert receipt.outcomes == ["stopped"]
    assert world.note().document()["spend"]["so_far_usd"] is None
    assert receipt.price_problems == [
        "price lookup of ml.p3.2xlarge in us-east-1 failed: RuntimeError(\"the Price List API's client could not "
        'be made")'
    ]


def test_the_price_lists_own_problems_reach_the_receipt_for_the_handler_to_log() -> None:
    world = World()
    world.prices.problems.append("GetProducts ml.p3.2xlarge in us-east-1 failed: ThrottlingException")
    receipt = world.see(finding())
    assert receipt.price_problems == ["GetProducts ml.p3.2xlarge in us-east-1 failed: ThrottlingException"]
    assert world.prices.problems == []


def test_without_a_start_time_spend_so_far_is_unknown_and_a_stop_avoids_up_to_the_whole_max_runtime() -> None:
    world = World()
    world.see(finding(TrainingStartTime=None))
    spend = world.note().document()["spend"]
    assert (spend["so_far_usd"], spend["avoided_usd"]) == (None, 86.4)  # 3.60 USD/h for the whole day
    assert "no TrainingStartTime: spend so far unknown" in spend["notes"]


def test_without_a_max_runtime_spend_avoided_is_unknown_and_so_far_known() -> None:
    world = World()
    world.see(finding(StoppingCondition={}))
    spend = world.note().document()["spend"]
    assert (spend["so_far_usd"], spend["avoided_usd"]) == (SO_FAR, None)
    assert world.jobs.tags_by_arn[JOB_ARN][contract.TAG_SPEND_AVOIDED] == "unknown"


def test_a_spot_job_says_the_list_price_is_an_upper_bound() -> None:
    world = World()
    world.see(finding(EnableManagedSpotTraining=True))
    note = world.note()
    assert note.document()["spend"]["upper_bound"] is True
    assert f"Spend:     ${note.document()['spend']['so_far_usd']} so far at most (spot)" in note.email_text()


def test_an_ended_job_is_priced_for_its_billable_time_not_the_clock() -> None:
    world = World()
    world.see(with_detail(load_event("failed"), BillableTimeInSeconds=400, TrainingTimeInSeconds=510))
    note = world.note()
    spend = note.document()["spend"]
    assert (spend["so_far_usd"], spend["estimate"], spend["billed_seconds"]) == (0.4, False, 400.0)
    assert "Spend:     $0.40 billed" in note.email_text().splitlines()


def test_an_event_without_its_instances_is_priced_from_describe_training_job() -> None:
    world = World()
    event = finding(ResourceConfig=None)
    world.jobs.jobs[JOB] = parse_event(finding()).job  # what SageMaker knows
    world.see(event)
    assert world.note().document()["spend"]["so_far_usd"] == SO_FAR
    assert world.jobs.describe_calls == [JOB]


def test_an_event_without_a_region_cannot_be_priced_and_says_why() -> None:
    world = World()
    world.see({**finding(), "region": None})
    spend = world.note().document()["spend"]
    assert spend["so_far_usd"] is None
    assert "the event names no region: price unknown" in spend["notes"]
    assert world.prices.asked == []


def test_without_a_price_list_every_spend_is_unknown() -> None:
    guard = Responder(GuardConfig(), FakeJobs(), FakeLedger(), publisher := FakePublisher())
    parsed = parse_event(load_event("rule_error"))
    guard.handle(parsed, now=NOW)
    assert publisher.published[0].document()["spend"]["so_far_usd"] is None


# --- Every channel ------------------------------------------------------------------------------------------
def test_the_document_carries_spend_as_an_object_with_the_documented_fields() -> None:
    world = World()
    world.see(finding())
    spend = world.note().document()["spend"]
    assert set(spend) == {
        "so_far_usd",
        "avoided_usd",
        "avoided_label",
        "price_source",
        "hourly_usd",
        "list_price",
        "upper_bound",
        "estimate",
        "billed_seconds",
        "seconds_left",
        "unknown_instance_types",
        "notes",
        "prices",
    }
    assert spend["prices"] == [P3.as_dict()]
    assert json.loads(json.dumps(spend)) == spend


def test_email_slack_and_q_developer_say_the_spend_in_the_same_short_line() -> None:
    world = World()
    world.see(finding())
    note = world.note()
    line = f"${SO_FAR} so far · up to ${AVOIDED} avoided"
    assert f"Spend:     {line}" in note.email_text().splitlines()
    doc = note.document()
    _, blocks = render(doc)
    fields = [f["text"] for b in blocks if b["type"] == "section" for f in b.get("fields", [])]
    assert f"*Spend*\n{line}" in fields
    assert f"*Spend:* {line}" in q_developer_notification(doc)["content"]["description"]


def test_a_test_notification_is_about_no_job_and_carries_no_spend() -> None:
    note = make_test_notification(
        test_id="t1", stack="TrainingGuard", sent_by="me", account="1", region="us-east-1", now=NOW
    )
    assert note.document()["spend"] is None
    assert "Spend" not in note.email_text()
    _, blocks = render(note.document())
    assert "Spend" not in json.dumps(blocks)


@pytest.mark.parametrize(
    ("spend", "outcome", "line"),
    [
        ({"so_far_usd": 1234.5, "avoided_usd": 0.0, "avoided_label": "up to", "estimate": True}, "stopped",
         "$1,234.50 so far · up to $0.00 avoided"),
        ({"so_far_usd": 0.13, "avoided_usd": 36.23, "avoided_label": "up to", "estimate": True}, "stopped",
         "$0.13 so far · up to $36.23 avoided"),
        ({"so_far_usd": 2.0, "avoided_usd": 9.0, "avoided_label": "up to", "estimate": True}, "would_stop",
         "$2.00 so far"),
        ({"so_far_usd": 2.0, "avoided_usd": None, "avoided_label": None, "estimate": False}, "notified",
         "$2.00 billed"),
        ({"so_far_usd": 2.0, "avoided_usd": None, "avoided_label": "up to",
          "notes": ["no MaxRuntimeInSeconds: spend avoided unknown"]}, "stopped",
         "$2.00 so far · avoided: unknown (no MaxRuntimeInSeconds)"),
        ({"so_far_usd": None, "avoided_usd": None, "avoided_label": None, "notes": "not a list"}, "notified",
         "unknown"),
        ({"so_far_usd": "12", "avoided_usd": None, "avoided_label": "up to", "upper_bound": True,
          "notes": ["managed spot training: the list price is an upper bound", "no price for ml.x"]}, "stopped",
         "unknown: no price for ml.x"),
        (None, "stopped", None),
        ("spend", "stopped", None),
    ],
)  # fmt: skip
def test_the_spend_line_reads_naturally_and_never_shows_a_non_number_as_an_amount(
    spend: Any, outcome: str, line: str | None
) -> None:
    assert spend_line(spend, outcome) == line


def test_avoided_is_said_only_where_the_guards_own_stop_avoided_something() -> None:
    spend = {"so_far_usd": 0.13, "avoided_usd": 36.23, "avoided_label": "up to", "estimate": True}
    assert spend_line(spend, "stopped", "issues_found") == "$0.13 so far · up to $36.23 avoided"
    for outcome, kind in [("stopped", "stop_requested"), ("would_stop", "issues_found"), ("notified", "metric_alarm")]:
        assert spend_line(spend, outcome, kind) == "$0.13 so far", (outcome, kind)


def test_a_spend_line_from_a_job_tag_or_a_forged_document_is_escaped_in_slack() -> None:
    world = World()
    world.see(finding())
    doc = world.note().document()
    doc["spend"] = {**doc["spend"], "so_far_usd": None, "notes": ["<!channel> & friends"]}
    _, blocks = render(doc)
    assert "<!channel>" not in json.dumps(blocks)
    assert "&lt;!channel&gt; &amp; friends" in json.dumps(blocks)


def test_the_retry_of_an_earlier_attempts_stop_records_and_tags_the_spend_too() -> None:
    world = World()
    world.jobs.fail_tag = ActionFailed("AddTags", RuntimeError("ThrottlingException"))
    with pytest.raises(ActionFailed):
        world.see(finding())
    world.jobs.fail_tag = None
    later = NOW + timedelta(minutes=2)
    world.see(finding(), now=later)
    record = world.ledger.stops[JOB]
    assert record.spend is not None
    assert record.spend.avoided_usd == round(3.6 * (LEFT - 120) / 3600, 2)
    assert world.jobs.tags_by_arn[JOB_ARN][contract.TAG_SPEND_AVOIDED] == f"{record.spend.avoided_usd:.2f}"
    assert record.confirmed


# --- The metric and the wiring -------------------------------------------------------------------------------
def test_the_meter_writes_one_embedded_metric_per_stop_with_the_rule_as_its_only_extra_dimension(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from training_guard.adapters.receipts import SpendMeter

    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "training-guard")
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    SpendMeter().spend_avoided("VanishingGradient", 83.49)
    [emf] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    [directive] = emf["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == contract.GUARD_METRICS_NAMESPACE
    assert directive["Metrics"] == [{"Name": contract.SPEND_AVOIDED_METRIC, "Unit": "None"}]
    assert sorted(directive["Dimensions"][0]) == sorted([contract.RULE_DIMENSION, contract.SERVICE_DIMENSION])
    assert (emf["rule"], emf["service"], emf[contract.SPEND_AVOIDED_METRIC]) == (
        "VanishingGradient",
        "training-guard",
        [83.49],
    )


@pytest.mark.parametrize(
    ("rule", "value"),
    [("VanishingGradient", "VanishingGradient"), ("loss-diverging", "loss-diverging"), ("損失", "??"),
     ("a\tb", "a?b"), ("   ", "?"), ("", "?"), ("x" * 2000, "x" * 1024)],
)  # fmt: skip
def test_a_rule_name_becomes_a_legal_dimension_value(rule: str, value: str) -> None:
    """ASCII only, no control characters, one non-whitespace character at least, 1 to 1024 characters:
    https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_Dimension.html"""
    from training_guard.adapters.receipts import dimension_value

    assert dimension_value(rule) == value


def test_the_functions_responder_prices_jobs_and_meters_stops_without_making_a_pricing_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from training_guard.adapters import receipts
    from training_guard.adapters.price_list import PriceList
    from training_guard.handlers import wiring

    made: list[str] = []

    def pricing_client() -> object:
        made.append("pricing")
        return object()

    monkeypatch.setenv(contract.ENV_CONFIG, GuardConfig().to_json())
    monkeypatch.setenv(contract.ENV_TABLE, "training-guard-state")
    monkeypatch.setenv(contract.ENV_TOPIC_ARN, "arn:aws:sns:us-east-1:123456789012:t")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv(contract.ENV_CONFIG_FILE, raising=False)
    wiring.install(wiring.Root(pricing=pricing_client))  # type: ignore[arg-type]
    try:
        guard = wiring.root().responder
        assert isinstance(guard.prices, PriceList)
        assert guard.prices is wiring.root().price_list is wiring.root().sweeper.responder.prices  # one per container
        assert isinstance(guard.meter, receipts.SpendMeter)
        assert made == []  # made when a price is first asked of the API, not at cold start
        guard.prices._client()
        guard.prices._client()
        assert made == ["pricing"]
    finally:
        wiring.reset()
