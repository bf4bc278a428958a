"""Budgets: the sweeper prices each running job and warns, stops or notifies at its cap, over fakes.

The spend is what the notifications show (pricing.job_spend through the responder's price lookup). These jobs
run on one instance at $2.00 an hour, so the spend so far is a cent per 18 seconds of training: $8.00 after
4 hours, $10.00 after 5.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.fakes import FakeAlarms, FakeJobs, FakeLedger, FakePrices, FakePublisher, FakeTrainingMetrics
from tests.helpers import NOW, SWEEP_ACCOUNT, SWEEP_REGION, job_arn, running_job
from training_guard import contract
from training_guard.config.model import Action, Budget, GuardConfig, budget_from_tag
from training_guard.domain.events import Finding, TrainingJob
from training_guard.domain.outcome import Outcome
from training_guard.domain.policy import Kind, Plan, cents, decide_budget
from training_guard.domain.pricing import PriceQuote
from training_guard.render import messages, slack_messages
from training_guard.services.ports import StopRecord
from training_guard.services.responder import Responder
from training_guard.services.sweeper import Sweeper, SweepReport

ACCOUNT, REGION = SWEEP_ACCOUNT, SWEEP_REGION
TYPE = "ml.g5.2xlarge"
HOURLY = 2.0
SWEEP_ID = "sweep-20261130T030000"
TAG = "training-guard:budget-usd"
EXP_CAP = {"budgets": [{"job_prefix": "exp-", "max_usd": 10, "warn_at": 0.8}]}


arn = job_arn


def spent_after(usd: float) -> timedelta:
    """The training time after which a $2.00-an-hour job has spent `usd`."""
    return timedelta(seconds=round(usd / HOURLY * 3600))


def job(name: str, spent: float, **changes: Any) -> TrainingJob:
    """A running job on one priced instance that has spent `spent` dollars by NOW."""
    return running_job(
        name,
        spent_after(spent),
        **{"instance_type": TYPE, "instance_count": 1, "max_runtime_seconds": 24 * 3600, **changes},
    )


class Fleet:
    def __init__(self, config: dict[str, Any], *jobs: TrainingJob, tags: dict[str, dict[str, str]] | None = None):
        self.jobs = FakeJobs(jobs={j.name: j for j in jobs})
        for name, job_tags in (tags or {}).items():
            self.jobs.tags_by_arn[arn(name)] = job_tags
        self.ledger = FakeLedger()
        self.publisher = FakePublisher()
        self.prices = FakePrices(quotes={(REGION, TYPE): PriceQuote(TYPE, REGION, HOURLY, "table", "2026-08-20")})
        self.config = GuardConfig.from_dict(config)
        self.responder = Responder(
            self.config, self.jobs, self.ledger, self.publisher, alarms=FakeAlarms(), prices=self.prices
        )
        self.sweeper = Sweeper(self.responder, self.jobs, FakeAlarms(), FakeTrainingMetrics())

    def sweep(self) -> SweepReport:
        return self.sweeper.sweep(now=NOW, account=ACCOUNT, region=REGION)

    def published(self) -> list[tuple[str, str, str]]:
        return [(n.job.name, n.kind.value, n.outcome.value) for n in self.publisher.published]


# --- the edges -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spent", "published"),
    [
        (7.99, []),  # one cent under warn_at x cap
        (8.00, [("exp-1", "budget_warning", "notified")]),  # exactly warn_at x cap
        (9.99, [("exp-1", "budget_warning", "notified")]),  # one cent under the cap
        (10.00, [("exp-1", "budget_exceeded", "stopped")]),  # exactly the cap (and not warned besides)
    ],
)
def test_a_job_is_warned_at_warn_at_and_stopped_at_its_cap_to_the_cent(
    spent: float, published: list[tuple[str, str, str]]
) -> None:
    fleet = Fleet(EXP_CAP, job("exp-1", spent))
    report = fleet.sweep()
    assert fleet.published() == published
    assert fleet.jobs.stop_calls == (["exp-1"] if spent >= 10 else [])
    assert (report.budget_warnings, report.over_budget) == (
        (["exp-1"], []) if 8 <= spent < 10 else ([], ["exp-1"]) if spent >= 10 else ([], [])
    )


def test_the_warning_says_how_much_of_which_cap_with_the_spend_line() -> None:
    fleet = Fleet(EXP_CAP, job("exp-1", 8.5))
    fleet.sweep()
    [note] = fleet.publisher.published
    assert note.title == "exp-1: budget warning: $8.50 spent of its $10.00 budget (85 % of the cap)"
    assert note.reason == (
        "budgets[0] (jobs starting exp-): $10.00 cap, warned at 80 %, then stop: $8.50 spent, 85 % of the cap "
        "(list price): warned once"
    )
    assert note.finding == Finding(
        name="budgets[0]",
        source="budget",
        status="Warning",
        details="$8.50 spent of its $10.00 budget (85 % of the cap)",
    )
    assert note.transition == "t#exp-1#budget#budgets[0]#Warning#1000"
    document = note.document()
    assert (document["kind"], document["severity"], document["spend"]["so_far_usd"]) == (
        "budget_warning",
        "warning",
        8.5,
    )
    assert document["spend"]["avoided_usd"] is None  # no stop is in question
    assert "Spend:     $8.50 so far" in note.email_text().splitlines()
    assert "Budget:    budgets[0] (budget) -> Warning" in note.email_text()
    _, blocks = slack_messages.render(document)
    texts = [str(b) for b in blocks]
    assert any("*Budget* `budgets[0]` (budget) → *Warning*" in t for t in texts)
    fields = [f["text"] for b in blocks for f in b.get("fields", [])]
    assert "*Spend*\n$8.50 so far" in fields


def test_the_stop_at_the_cap_names_the_budget_in_the_audit_record_the_tags_and_the_message() -> None:
    fleet = Fleet(EXP_CAP, job("exp-1", 10.0))
    fleet.sweep()
    record = fleet.ledger.stops["exp-1"]
    assert (record.rule, record.confirmed, record.event_id) == ("budgets[0]", True, SWEEP_ID)
    assert (
        record.reason
        == "budgets[0] (jobs starting exp-): $10.00 cap, warned at 80 %, then stop: $10.00 spent (list price)"
    )
    assert record.spend is not None
    assert record.spend.so_far_usd == 10.0
    assert record.spend.avoided_usd == 38.0  # the 19 hours left of its 24 at $2.00
    tags = fleet.jobs.tags_by_arn[arn("exp-1")]
    assert tags[contract.TAG_STOP_RULE] == "budgets 0"  # '[' and ']' are not legal in a SageMaker tag value
    assert tags[contract.TAG_SPEND_AVOIDED] == "38.00"
    [note] = fleet.publisher.published
    assert note.title == "Stopped exp-1: $10.00 spent of its $10.00 budget"
    assert note.severity == "critical"
    assert "Spend:     $10.00 so far · up to $38.00 avoided" in note.email_text()


def test_a_budget_stop_happens_once_across_two_sweeps() -> None:
    fleet = Fleet(EXP_CAP, job("exp-1", 10.0))
    fleet.sweep()
    # SageMaker still lists and describes it InProgress at the next sweep (the stop takes up to 120 s).
    fleet.jobs.jobs["exp-1"] = job("exp-1", 10.02)
    report = fleet.sweep()
    assert fleet.jobs.stop_calls == ["exp-1"]
    assert fleet.published() == [("exp-1", "budget_exceeded", "stopped")]
    assert report.over_budget == []


def test_notify_at_the_cap_notifies_once_and_never_stops() -> None:
    config = {"budgets": [{"job_prefix": "exp-", "max_usd": 10, "action": "notify"}]}
    fleet = Fleet(config, job("exp-1", 12.0))
    fleet.sweep()
    fleet.sweep()
    assert fleet.published() == [("exp-1", "budget_exceeded", "notified")]
    assert fleet.jobs.stop_calls == []
    [note] = fleet.publisher.published
    assert note.title == "exp-1: $12.00 spent of its $10.00 budget"
    assert note.reason.endswith("then notify: $12.00 spent (list price): notify only")


# --- which cap --------------------------------------------------------------------------------------------------
def test_the_jobs_own_budget_tag_comes_before_the_configuration() -> None:
    config = {**EXP_CAP, "budget_defaults": {"warn_at": 0.5, "action": "notify"}}
    fleet = Fleet(config, job("exp-1", 2.5), job("exp-2", 2.5), tags={"exp-1": {TAG: "5"}})
    fleet.sweep()
    assert fleet.published() == [("exp-1", "budget_warning", "notified")]  # $2.50 of its own $5.00; exp-2: of $10
    [note] = fleet.publisher.published
    assert note.finding is not None
    assert note.finding.name == TAG
    assert note.reason.startswith(f"budget_defaults (tag {TAG} = 5): $5.00 cap, warned at 50 %, then notify")


def test_the_first_entry_that_selects_the_job_caps_it_by_prefix_or_tag() -> None:
    config = {
        "budgets": [
            {"job_tag": "team", "max_usd": 3, "warn_at": 0},
            {"job_prefix": "exp-", "max_usd": 100},
            {"max_usd": 4, "action": "notify", "warn_at": 0},
        ]
    }
    fleet = Fleet(config, job("exp-1", 3.5), job("exp-2", 3.5), job("other", 3.5), tags={"exp-1": {"team": "a"}})
    fleet.sweep()
    assert fleet.published() == [("exp-1", "budget_exceeded", "stopped")]  # budgets[0]; exp-2 under budgets[1]
    assert fleet.ledger.stops["exp-1"].rule == "budgets[0]"


def test_a_job_no_budget_selects_is_never_priced() -> None:
    fleet = Fleet(EXP_CAP, job("other", 1000.0))
    fleet.sweep()
    assert (fleet.prices.asked, fleet.published()) == ([], [])


@pytest.mark.parametrize("value", ["abc", "0", "-5", "$500", "1e3", "500 USD", ""])
def test_a_bad_budget_tag_is_reported_once_and_the_configuration_applies(value: str) -> None:
    assert budget_from_tag(value) is None
    fleet = Fleet(EXP_CAP, job("exp-1", 9.0), tags={"exp-1": {TAG: value}})
    report = fleet.sweep()
    fleet.sweep()
    assert fleet.published() == [
        ("exp-1", "guard_tag_invalid", "notified"),
        ("exp-1", "budget_warning", "notified"),  # budgets[0]'s $10.00 cap
    ]
    bad = fleet.publisher.published[0]
    assert bad.title == "Budget tag of exp-1 could not be read"
    assert bad.reason == (
        f"tag {TAG}={value!r}: expected a positive number of US dollars, e.g. 500; budgets[0] applies instead"
    )
    assert report.budget_warnings == ["exp-1"]


def test_a_bad_budget_tag_on_a_job_no_entry_selects_says_nothing_caps_it() -> None:
    fleet = Fleet({}, job("scratch", 9.0), tags={"scratch": {TAG: "lots"}})
    fleet.sweep()
    assert fleet.published() == [("scratch", "guard_tag_invalid", "notified")]  # and no budget decision
    assert fleet.publisher.published[0].reason.endswith("; no budget caps the job")


def test_budget_tag_values_are_plain_numbers_of_dollars() -> None:
    assert [budget_from_tag(v) for v in ("500", " 500 ", "499.99", ".5", "5.")] == [500.0, 500.0, 499.99, 0.5, 5.0]


# --- unknown is unknown ---------------------------------------------------------------------------------------
def test_an_unknown_price_decides_nothing_and_is_said_once() -> None:
    fleet = Fleet(EXP_CAP, job("exp-1", 1000.0, instance_type="ml.p5.48xlarge"))
    first = fleet.sweep()
    second = fleet.sweep()
    assert fleet.published() == []  # never $0 (no warning) and never over budget (no stop)
    assert fleet.jobs.stop_calls == []
    assert first.not_judged == {"exp-1": "budgets[0] not judged: no price for ml.p5.48xlarge"}
    assert second.not_judged == {}


def test_an_unknown_price_is_said_once_by_a_new_container_too() -> None:
    fleet = Fleet(EXP_CAP, job("exp-1", 1000.0, training_start_time=None))
    assert fleet.sweep().not_judged == {"exp-1": "budgets[0] not judged: no TrainingStartTime: spend so far unknown"}
    # a new container: its memory is empty, the ledger remembers
    again = Sweeper(fleet.responder, fleet.jobs, FakeAlarms(), FakeTrainingMetrics())
    assert again.sweep(now=NOW, account=ACCOUNT, region=REGION).not_judged == {}


def test_a_sweep_without_a_region_cannot_price_and_decides_nothing() -> None:
    fleet = Fleet(EXP_CAP, job("exp-1", 1000.0))
    report = fleet.sweeper.sweep(now=NOW, account=ACCOUNT, region=None)
    assert fleet.published() == []
    assert report.not_judged == {
        "exp-1": "budgets[0] not judged: no price for ml.g5.2xlarge; the event names no region: price unknown"
    }


# --- the policy's one path to a stop ------------------------------------------------------------------------------
def test_in_dry_run_the_cap_would_stop() -> None:
    fleet = Fleet({**EXP_CAP, "dry_run": True}, job("exp-1", 10.0))
    fleet.sweep()
    assert fleet.published() == [("exp-1", "budget_exceeded", "would_stop")]
    assert fleet.jobs.stop_calls == []
    [note] = fleet.publisher.published
    assert note.reason.endswith("$10.00 spent (list price), but dry_run is on")
    assert note.title == "Would have stopped exp-1: $10.00 spent of its $10.00 budget"
    assert "Spend:     $10.00 so far" in note.email_text().splitlines()  # a would-stop avoided nothing


@pytest.mark.parametrize(
    ("tags", "why"),
    [
        ({"training-guard:exempt": "true"}, "but the job carries the exemption tag training-guard:exempt"),
        ({"training-guard:notify-only": "yes"}, "but the job carries the notify-only tag training-guard:notify-only"),
    ],
)
def test_an_exempt_or_notify_only_job_is_not_stopped_for_its_budget(tags: dict[str, str], why: str) -> None:
    fleet = Fleet(EXP_CAP, job("exp-1", 10.0), tags={"exp-1": tags})
    fleet.sweep()
    assert fleet.published() == [("exp-1", "budget_exceeded", "would_stop")]
    assert fleet.publisher.published[0].reason.endswith(why)
    assert fleet.jobs.stop_calls == []


def test_stop_requires_tag_keeps_an_untagged_job_running() -> None:
    config = {**EXP_CAP, "stop_requires_tag": "training-guard:guarded"}
    fleet = Fleet(config, job("exp-1", 10.0), job("exp-2", 10.0), tags={"exp-2": {"training-guard:guarded": "true"}})
    fleet.sweep()
    assert fleet.published() == [("exp-1", "budget_exceeded", "would_stop"), ("exp-2", "budget_exceeded", "stopped")]


def test_within_the_grace_period_the_stop_is_deferred_then_made() -> None:
    fleet = Fleet({**EXP_CAP, "min_training_minutes": 360}, job("exp-1", 10.0))  # 5 h trained of 6 h of grace
    fleet.sweep()
    assert fleet.published() == [("exp-1", "budget_exceeded", "deferred")]
    fleet.jobs.jobs["exp-1"] = job("exp-1", 12.0)  # an hour later
    fleet.sweep()
    assert fleet.published() == [("exp-1", "budget_exceeded", "deferred"), ("exp-1", "budget_exceeded", "stopped")]


def test_a_job_the_guard_stops_for_another_reason_in_the_same_sweep_is_not_priced() -> None:
    issues = Finding(name="VanishingGradient", source="debugger", status="IssuesFound")
    fleet = Fleet(EXP_CAP, job("exp-1", 10.0, rules=(issues,)))
    fleet.sweep()
    assert fleet.published() == [("exp-1", "issues_found", "stopped")]
    assert fleet.jobs.stop_calls == ["exp-1"]


def test_a_budget_reached_while_another_rules_stop_is_under_way_is_folded_into_it() -> None:
    # An event's invocation stopped the job a moment ago; the sweep still read it running.
    fleet = Fleet(EXP_CAP, job("exp-1", 10.0))
    fleet.ledger.stops["exp-1"] = StopRecord("exp-1", "VanishingGradient", "why", NOW, "e1", confirmed=True)
    report = fleet.sweep()
    assert fleet.published() == []
    assert fleet.jobs.stop_calls == []
    assert fleet.ledger.stops["exp-1"].folded == ("t#exp-1#budget#budgets[0]#Exceeded#1000",)
    assert report.over_budget == ["exp-1"]  # found and recorded, not announced


def test_a_raised_cap_warns_again_at_the_new_figure() -> None:
    fleet = Fleet(EXP_CAP, job("exp-1", 9.0), tags={"exp-1": {TAG: "10"}})
    fleet.sweep()
    fleet.jobs.tags_by_arn[arn("exp-1")] = {TAG: "20"}
    fleet.jobs.jobs["exp-1"] = job("exp-1", 16.0)
    fleet.sweep()
    assert [n.transition for n in fleet.publisher.published] == [
        f"t#exp-1#budget#{TAG}#Warning#1000",
        f"t#exp-1#budget#{TAG}#Warning#2000",
    ]


# --- the policy alone ----------------------------------------------------------------------------------------------
def test_no_warning_when_warn_at_is_zero_and_no_decision_for_a_job_the_guard_does_not_select() -> None:
    quiet = Budget(max_usd=10, warn_at=0, action=Action.STOP)
    config = GuardConfig.from_dict({"jobs": {"exclude_prefixes": ["scratch-"]}})
    running = job("exp-1", 0)
    assert decide_budget(running, name="b", budget=quiet, setting="s", spent_usd=9.99, config=config, now=NOW) == []
    [stop] = decide_budget(running, name="b", budget=quiet, setting="s", spent_usd=10, config=config, now=NOW)
    assert (stop.kind, stop.plan) == (Kind.BUDGET_EXCEEDED, Plan.STOP)
    skipped = job("scratch-1", 0)
    assert decide_budget(skipped, name="b", budget=quiet, setting="s", spent_usd=99, config=config, now=NOW) == []


def test_amounts_are_compared_in_the_cents_people_read() -> None:
    assert [cents(v) for v in (9.994999, 9.995001, 10.0, 0.8 * 10)] == [999, 1000, 1000, 800]


def test_the_new_kinds_have_a_severity_and_a_title_for_every_outcome() -> None:
    finding = Finding(name="budgets[0]", source="budget", status="Exceeded", details="$1.00 spent of its $1.00 budget")
    for kind in (Kind.BUDGET_WARNING, Kind.BUDGET_EXCEEDED, Kind.IDLE_GPU):
        for outcome in Outcome:
            title = messages.title(kind, outcome, job("exp-1", 1), finding)
            assert title.startswith(("exp-1", "Stopped exp-1", "Would have stopped exp-1"))
        assert messages._KIND_SEVERITY[kind] == "warning"


def test_what_the_price_lookup_ran_into_is_in_the_sweeps_report() -> None:
    fleet = Fleet(EXP_CAP, job("exp-1", 1.0))
    fleet.prices.problems = ["GetProducts ml.g5.2xlarge in eu-west-1 failed: ThrottlingException"]
    assert fleet.sweep().price_problems == ["GetProducts ml.g5.2xlarge in eu-west-1 failed: ThrottlingException"]
