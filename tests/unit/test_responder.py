from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

import pytest
from botocore.exceptions import EndpointConnectionError

from tests.fakes import FakeAlarms, FakeJobs, FakeLedger, FakePrices, FakePublisher
from tests.fakes_slack_app import FakeMutes
from tests.helpers import NOW, load_event, rule_status, with_detail
from training_guard import contract
from training_guard.adapters.sqs import CardUpdates
from training_guard.config.model import Action, GuardConfig, RulePolicy
from training_guard.domain import mutes, policy, pricing
from training_guard.domain.errors import ActionFailed, TransitionBusy
from training_guard.domain.events import Finding, TrainingJob, parse_event, parse_job
from training_guard.domain.metric_guards import AlarmObservation, JobAlarmSpec, job_alarm_name
from training_guard.domain.pricing import PriceQuote
from training_guard.services.ports import Claim
from training_guard.services.responder import (
    BUSY_POLL_SECONDS,
    BUSY_WAIT_SECONDS,
    LEASE_MARGIN_SECONDS,
    EventStamp,
    Receipt,
    Responder,
    StopRecord,
    attribution_tags,
    lease_for,
    tag_value,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class World:
    def __init__(self, config: GuardConfig | None = None) -> None:
        self.jobs = FakeJobs()
        self.ledger = FakeLedger()
        self.publisher = FakePublisher()
        self.sleeps: list[float] = []
        self.guard = Responder(
            config or GuardConfig(), self.jobs, self.ledger, self.publisher, sleep=self.sleeps.append
        )

    def see(self, event: dict[str, Any], now: datetime = NOW) -> Receipt:
        parsed = parse_event(event)
        # SageMaker's view follows the event unless the guard already stopped the job.
        current = self.jobs.jobs.get(parsed.job.name)
        if current is None or current.status == "InProgress" or parsed.job.status != "InProgress":
            self.jobs.jobs[parsed.job.name] = parsed.job
        return self.guard.handle(parsed, now=now)

    def kinds(self) -> list[tuple[str, str]]:
        return [(n.kind.value, n.outcome.value) for n in self.publisher.published]


def test_issues_found_stops_once_across_duplicate_deliveries() -> None:
    world = World()
    event = load_event("vanishing_gradient_issues_found")
    receipts = [world.see(event) for _ in range(3)]
    assert [r.stopped for r in receipts] == [True, False, False]
    assert [r.duplicates for r in receipts] == [0, 1, 1]
    assert world.jobs.stop_calls == ["pytorch-mnist-lr01-2026-11-30-02-10-00-123"]
    assert world.kinds() == [("issues_found", "stopped")]


def test_a_stop_is_attributed_on_the_job_and_in_the_audit_record() -> None:
    world = World()
    world.see(load_event("vanishing_gradient_issues_found"))
    job = "pytorch-mnist-lr01-2026-11-30-02-10-00-123"
    tags = world.jobs.tags_by_arn[f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{job}"]
    assert tags[contract.TAG_STOPPED_BY] == "training-guard"
    assert tags[contract.TAG_STOP_RULE] == "VanishingGradient"
    assert tags[contract.TAG_STOPPED_AT] == "2026-11-30T03:00:00+00:00"
    record = world.ledger.stops[job]
    assert (record.rule, record.event_id) == ("VanishingGradient", "6a7e8feb-b491-4cf7-a9f1-bf3703467718")


def test_rule_error_only_notifies() -> None:
    world = World()
    receipt = world.see(load_event("rule_error"))
    assert receipt.stopped is False
    assert world.jobs.stop_calls == []
    assert world.kinds() == [("rule_error", "notified")]


def test_stop_race_with_a_job_that_already_left_in_progress_is_not_an_error() -> None:
    world = World()
    event = load_event("vanishing_gradient_issues_found")
    parsed = parse_event(event)
    world.jobs.jobs[parsed.job.name] = replace(parsed.job, status="Stopped")  # someone stopped it first
    receipt = world.guard.handle(parsed, now=NOW)
    assert receipt.stopped is False
    assert world.kinds() == [("issues_found", "already_ended")]
    assert world.ledger.stops == {}  # the guard did not stop it, so it does not claim it did
    assert world.jobs.tags_by_arn == {}


def two_findings() -> dict[str, Any]:
    """The VanishingGradient event with a second rule finding issues too."""
    return with_detail(
        load_event("vanishing_gradient_issues_found"),
        DebugRuleEvaluationStatuses=[
            rule_status("VanishingGradient", "IssuesFound"),
            rule_status("ExplodingTensor", "IssuesFound"),
        ],
    )


def test_two_rules_finding_issues_cause_one_stop_call() -> None:
    world = World()
    event = two_findings()
    receipt = world.see(event)
    assert len(world.jobs.stop_calls) == 1
    # the second finding is decided after the stop took effect: recorded, folded into the stop
    assert world.kinds() == [("issues_found", "stopped")]
    assert receipt.folded == [f"t#{JOB}#debugger#ExplodingTensor#IssuesFound"]


def test_a_failed_publish_releases_the_claim_and_the_retry_completes_the_transition() -> None:
    world = World()
    event = load_event("vanishing_gradient_issues_found")
    world.publisher.fail = ActionFailed("sns:Publish", RuntimeError("throttled"))
    with pytest.raises(ActionFailed):
        world.see(event)
    assert world.ledger.items == {}  # nothing half-done is marked done
    world.publisher.fail = None
    receipt = world.see(event)  # Lambda's retry
    # The job was stopped by the first attempt: the retry reports it as the guard's stop, once.
    assert receipt.stopped is True
    assert world.kinds() == [("issues_found", "stopped")]
    assert world.jobs.tags_by_arn  # attribution written


def test_a_failed_stop_call_leaves_no_audit_record_and_no_claim() -> None:
    world = World()
    world.jobs.fail_stop = ActionFailed("StopTrainingJob", RuntimeError("ThrottlingException"))
    with pytest.raises(ActionFailed):
        world.see(load_event("vanishing_gradient_issues_found"))
    assert world.ledger.items == {}
    assert world.ledger.stops == {}
    assert world.publisher.published == []


def test_a_failed_tag_call_is_retried_and_still_reported_as_a_stop() -> None:
    world = World()
    event = load_event("vanishing_gradient_issues_found")
    world.jobs.fail_tag = ActionFailed("AddTags", RuntimeError("500"))
    with pytest.raises(ActionFailed):
        world.see(event)
    world.jobs.fail_tag = None
    assert world.see(event).stopped is True
    assert world.kinds() == [("issues_found", "stopped")]


VANISHING_JOB = "pytorch-mnist-lr01-2026-11-30-02-10-00-123"
VANISHING_KEY = f"t#{VANISHING_JOB}#debugger#VanishingGradient#IssuesFound"


def test_an_expired_lease_of_a_crashed_attempt_can_be_taken_over() -> None:
    world = World()
    world.ledger.claim(VANISHING_KEY, now=NOW, lease_seconds=120)  # an attempt that died mid-way
    event = load_event("vanishing_gradient_issues_found")
    assert world.see(event, now=NOW + timedelta(seconds=121)).stopped is True
    assert world.kinds() == [("issues_found", "stopped")]


def holders_first_write(world: World, lease_seconds: int = 120) -> None:
    """Another attempt made the stop's one write (its record, with a lease) and may still be acting on it."""
    record = StopRecord(VANISHING_JOB, "VanishingGradient", "rules.debugger_default = stop", NOW, "holder")
    assert world.ledger.claim_first_stop(
        record, now=NOW, lease_seconds=lease_seconds, ttl_seconds=3600, check_mutes=False
    )


def test_a_retry_inside_a_live_lease_is_not_a_duplicate_it_must_come_back_later() -> None:
    # The holder may be an attempt that timed out: counting the retry as a duplicate would lose the stop.
    world = World()
    holders_first_write(world)
    event = load_event("vanishing_gradient_issues_found")
    with pytest.raises(TransitionBusy, match="being handled by another attempt"):
        world.see(event, now=NOW + timedelta(seconds=60))
    assert world.jobs.stop_calls == []  # the holder's stop is not made twice
    assert world.publisher.published == []
    assert VANISHING_KEY not in world.ledger.items  # the retry released the transition it had claimed
    assert world.ledger.stops[VANISHING_JOB].event_id == "holder"  # the holder's record is untouched
    # once the lease is over (the holder died), the retry takes the stop over and announces it
    world.see(event, now=NOW + timedelta(seconds=121))
    assert world.kinds() == [("issues_found", "stopped")]


def test_a_retry_of_a_claim_held_by_another_attempt_waits_for_it() -> None:
    world = World()
    holders_first_write(world)
    world.ledger.claim(VANISHING_KEY, now=NOW, lease_seconds=120)  # the holder stopped the job and claimed
    with pytest.raises(TransitionBusy, match="being handled by another attempt"):
        world.see(load_event("vanishing_gradient_issues_found"), now=NOW + timedelta(seconds=60))
    assert sum(world.sleeps) >= BUSY_WAIT_SECONDS  # it waited for the holder before giving up
    assert world.ledger.items[VANISHING_KEY]["state"] == "in_progress"  # the holder's claim is untouched
    assert world.jobs.stop_calls == []


def test_a_busy_transition_whose_holder_finishes_during_the_wait_is_a_duplicate() -> None:
    world = World()
    holders_first_write(world)
    world.ledger.claim(VANISHING_KEY, now=NOW, lease_seconds=120)

    def holder_finishes(seconds: float) -> None:
        world.ledger.complete(VANISHING_KEY, now=NOW, ttl_seconds=3600, outcome="stopped")

    world.guard.sleep = holder_finishes
    receipt = world.see(load_event("vanishing_gradient_issues_found"), now=NOW + timedelta(seconds=1))
    assert receipt.duplicates == 1
    assert world.jobs.stop_calls == []
    assert world.publisher.published == []


def test_a_claim_tells_granted_done_and_busy_apart() -> None:
    ledger = FakeLedger()
    assert ledger.claim("k", now=NOW, lease_seconds=40) is Claim.GRANTED
    assert ledger.claim("k", now=NOW + timedelta(seconds=40), lease_seconds=40) is Claim.BUSY
    assert ledger.claim("k", now=NOW + timedelta(seconds=41), lease_seconds=40) is Claim.GRANTED
    ledger.complete("k", now=NOW, ttl_seconds=60, outcome="done")
    assert ledger.claim("k", now=NOW + timedelta(days=1), lease_seconds=40) is Claim.DONE


@pytest.mark.parametrize(
    ("remaining_ms", "lease"),
    [
        (30_000, 30 + LEASE_MARGIN_SECONDS),
        (29_001, 30 + LEASE_MARGIN_SECONDS),
        (1, 1 + LEASE_MARGIN_SECONDS),
        (0, LEASE_MARGIN_SECONDS),
        (-5, LEASE_MARGIN_SECONDS),
        (None, 120),
    ],
)
def test_the_lease_ends_when_the_invocation_can_no_longer_act(remaining_ms: int | None, lease: int) -> None:
    assert lease_for(remaining_ms) == lease


def test_a_lease_from_a_30_second_invocation_has_run_out_before_lambdas_first_retry() -> None:
    # Asynchronous invocations are retried about 1 minute after a failure or timeout.
    assert lease_for(30_000) < 60


def test_events_without_rule_statuses_fall_back_to_describe() -> None:
    world = World()
    event = load_event("in_progress_no_rule_lists")
    described = parse_job(
        {
            **event["detail"],
            "DebugRuleEvaluationStatuses": [rule_status("VanishingGradient", "IssuesFound")],
            "Tags": None,
        }
    )
    world.jobs.jobs[described.name] = described
    receipt = world.guard.handle(parse_event(event), now=NOW)
    assert receipt.described is True
    assert world.jobs.describe_calls == [described.name]
    assert receipt.stopped is True


def test_describe_fallback_keeps_the_events_tags_for_overrides() -> None:
    world = World()
    event = with_detail(load_event("in_progress_no_rule_lists"), Tags={"training-guard:exempt": "true"})
    world.jobs.jobs[event["detail"]["TrainingJobName"]] = parse_job(
        {
            **event["detail"],
            "DebugRuleEvaluationStatuses": [rule_status("VanishingGradient", "IssuesFound")],
            "Tags": None,
        }
    )
    world.guard.handle(parse_event(event), now=NOW)
    assert world.jobs.stop_calls == []
    assert world.kinds() == [("issues_found", "would_stop")]


def test_no_describe_when_the_event_carries_rule_statuses_or_the_job_ended() -> None:
    world = World()
    world.see(load_event("rule_error"))
    world.see(load_event("failed"))
    assert world.jobs.describe_calls == []


def test_exempt_job_gets_would_have_stopped_and_is_not_stopped() -> None:
    world = World()
    world.see(load_event("exempt_issues_found"))
    assert world.jobs.stop_calls == []
    assert world.kinds() == [("issues_found", "would_stop")]


def test_dry_run_notifies_would_have_stopped() -> None:
    world = World(GuardConfig(dry_run=True))
    world.see(load_event("vanishing_gradient_issues_found"))
    assert world.jobs.stop_calls == []
    assert world.kinds() == [("issues_found", "would_stop")]
    assert world.publisher.published[0].dry_run is True


def test_out_of_order_events_do_not_stop_an_ended_job() -> None:
    world = World()
    failed = load_event("failed")
    world.see(failed)
    late = load_event("vanishing_gradient_issues_found")  # a stale InProgress event arriving after
    parsed = parse_event(late)
    world.guard.handle(parsed, now=NOW)  # SageMaker's view stays Failed
    assert world.jobs.stop_calls == [parsed.job.name]  # asked, refused by SageMaker: the race
    assert ("issues_found", "already_ended") in world.kinds()


def test_a_stopped_change_over_a_stop_record_never_confirmed_is_announced_as_the_guards_stop() -> None:
    # A record written before StopTrainingJob by an attempt killed before it confirmed the stop (or by a
    # version of the guard that did not confirm stops): the job's end is announced, and attributed to the guard.
    world = World()
    world.ledger.stops[JOB] = StopRecord(JOB, "VanishingGradient", "rules.debugger_default = stop", NOW, "e0")
    receipt = world.see(stopped_event(rules=[]))
    [stopped] = world.publisher.published
    assert (stopped.kind.value, receipt.folded) == ("job_stopped", [])
    assert stopped.reason.startswith("by Training Guard at")


def test_unselected_jobs_are_ignored_with_a_reason() -> None:
    world = World(GuardConfig.from_dict({"jobs": {"exclude_prefixes": ["pytorch-"]}}))
    receipt = world.see(load_event("vanishing_gradient_issues_found"))
    assert receipt.ignored is not None
    assert world.publisher.published == []


def test_tag_values_are_made_legal_for_sagemaker() -> None:
    legal = re.compile(r"^[\w\s.:/=+\-@]*$")
    text = "rules.actions.X = stop (debugger rule X, step 500); <b>&amp;</b>" + "y" * 400
    value = tag_value(text)
    assert legal.match(value)
    assert len(value) == 256
    assert value.startswith("rules.actions.X = stop debugger rule X step 500 b amp /b")
    tags = attribution_tags(StopRecord("j", "R(1)", "a;b", NOW, "e"))
    assert all(legal.match(v) for v in tags.values())


def test_a_retry_of_our_killed_stop_that_finds_the_job_stopping_finishes_and_announces_the_stop() -> None:
    world = World()
    event = load_event("vanishing_gradient_issues_found")
    job = event["detail"]["TrainingJobName"]
    # A first attempt wrote the stop record, stopped the job, and was killed before tagging and announcing.
    world.ledger.stops[job] = StopRecord(job, "VanishingGradient", "rules.debugger_default = stop", NOW, "e0")
    stopping = with_detail(event, TrainingJobStatus="Stopping", SecondaryStatus="Stopping")
    world.jobs.jobs[job] = parse_event(stopping).job
    receipt = world.guard.handle(parse_event(stopping), now=NOW + timedelta(seconds=61))
    assert receipt.outcomes == ["stopped"]
    assert world.kinds() == [("issues_found", "stopped")]
    assert world.jobs.tags_by_arn[parse_event(event).job.arn or ""][contract.TAG_STOPPED_BY] == "training-guard"


def test_a_retry_of_our_killed_stop_of_a_job_that_completed_on_its_own_is_not_a_stop() -> None:
    world = World()
    event = load_event("vanishing_gradient_issues_found")
    job = event["detail"]["TrainingJobName"]
    # The first attempt wrote the stop record and was killed before StopTrainingJob; the job then completed.
    world.ledger.stops[job] = StopRecord(job, "VanishingGradient", "rules.debugger_default = stop", NOW, "e0")
    world.jobs.jobs[job] = replace(parse_event(event).job, status="Completed")
    receipt = world.guard.handle(parse_event(event), now=NOW + timedelta(seconds=61))
    assert receipt.outcomes == ["already_ended"]
    assert world.jobs.tags_by_arn == {}
    assert job not in world.ledger.stops  # the record of a stop that never happened is dropped


def test_a_finding_on_a_job_stopped_by_someone_else_is_only_reported() -> None:
    world = World()
    stopped = with_detail(load_event("vanishing_gradient_issues_found"), TrainingJobStatus="Stopped")
    world.jobs.jobs[stopped["detail"]["TrainingJobName"]] = parse_event(stopped).job
    receipt = world.guard.handle(parse_event(stopped), now=NOW)
    assert receipt.outcomes[0] == "notified"
    assert world.jobs.stop_calls == []


# --- the receipt, the ledger's records, the busy wait ------------------------------------------------------
def test_the_receipt_of_a_stop_is_what_the_handler_returns_and_simulate_prints() -> None:
    world = World()
    receipt = world.see(load_event("vanishing_gradient_issues_found"))
    printed = receipt.as_dict()
    spend = printed.pop("spend")
    assert isinstance(spend, dict)
    # No price source in this world: unknown, never 0; the time it is for is known all the same.
    assert (spend["so_far_usd"], spend["avoided_usd"], spend["avoided_label"]) == (None, None, "up to")
    assert (spend["billed_seconds"], spend["seconds_left"]) == (2910.0, 86400.0 - 2910.0)
    assert printed == {
        "job": "pytorch-mnist-lr01-2026-11-30-02-10-00-123",
        "event_id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "stopped": True,
        "notifications": ["issues_found"],
        "outcomes": ["stopped"],
        "duplicates": 0,
        "ignored": None,
        "rejected": None,
        "described": False,
        "alarms_created": [],
        "alarms_deleted": [],
        "unrecorded": [],
        "folded": [],
        "price_problems": [],
        "card_problems": [],
    }
    # The transition is remembered for dedup_ttl_days (35 by default) from now.
    assert world.ledger.items[VANISHING_KEY] == {
        "state": "done",
        "outcome": "stopped",
        "expires_at": NOW.timestamp() + 35 * 86400,
    }


def test_every_duplicate_transition_of_an_event_is_counted() -> None:
    world = World()
    event = two_findings()
    world.see(event)
    assert world.see(event).duplicates == 2


def test_a_transition_acted_on_whose_record_failed_is_reported_unrecorded() -> None:
    class LedgerDown(FakeLedger):
        def complete(self, key: str, *, now: datetime, ttl_seconds: int, outcome: str) -> None:
            raise ActionFailed(f"complete {key}", RuntimeError("throttled"))

    world = World()
    world.guard.ledger = LedgerDown()
    receipt = world.see(load_event("vanishing_gradient_issues_found"))
    assert (receipt.stopped, receipt.unrecorded) == (True, [VANISHING_KEY])
    assert world.kinds() == [("issues_found", "stopped")]


def test_a_holder_whose_lease_runs_out_during_the_wait_is_taken_over() -> None:
    # The wait advances the claim's clock: a holder killed 1 s before its lease ended is taken over at once.
    world = World()
    world.ledger.claim(VANISHING_KEY, now=NOW, lease_seconds=1)
    assert world.see(load_event("vanishing_gradient_issues_found")).stopped is True
    assert world.sleeps == [BUSY_POLL_SECONDS] * 8  # claimed at NOW + 2 s, the first second after the lease


def test_a_busy_transition_is_given_up_after_exactly_the_busy_wait() -> None:
    world = World()
    world.ledger.claim(VANISHING_KEY, now=NOW, lease_seconds=120)
    with pytest.raises(TransitionBusy) as busy:
        world.see(load_event("vanishing_gradient_issues_found"), now=NOW + timedelta(seconds=60))
    assert busy.value.key == VANISHING_KEY
    assert world.sleeps == [BUSY_POLL_SECONDS] * int(BUSY_WAIT_SECONDS / BUSY_POLL_SECONDS)


def test_the_stopped_notification_names_the_guards_rule_and_its_reason() -> None:
    world = World()
    reason = "rules.debugger_default = stop (debugger rule VanishingGradient)"
    world.ledger.stops[JOB] = StopRecord(JOB, "VanishingGradient", reason, NOW, "e0")  # never confirmed
    world.see(stopped_event(rules=[]))
    [stopped] = [n for n in world.publisher.published if n.kind.value == "job_stopped"]
    assert stopped.reason == (
        "by Training Guard at 03:00 UTC: rule VanishingGradient "
        "(rules.debugger_default = stop (debugger rule VanishingGradient))"
    )


# --- per-job alarms --------------------------------------------------------------------------------------
LOSS_TAG = f"{contract.JOB_ALARM_TAG_PREFIX}train:loss"


def job_with_alarm_tag(status: str, secondary: str) -> dict[str, Any]:
    return with_detail(
        load_event("in_progress_no_rule_lists"),
        TrainingJobStatus=status,
        SecondaryStatus=secondary,
        DebugRuleEvaluationStatuses=[],
        Tags={LOSS_TAG: "max above 5 3/5 stop"},
    )


class AlarmWorld(World):
    def __init__(self, config: GuardConfig | None = None) -> None:
        super().__init__(config)
        self.alarms = FakeAlarms()
        self.guard.alarms = self.alarms


def test_per_job_alarms_are_created_once_while_running_and_deleted_once_when_the_job_ends() -> None:
    world = AlarmWorld()
    running = job_with_alarm_tag("InProgress", "Training")
    job = running["detail"]["TrainingJobName"]
    name = job_alarm_name(job, "train:loss")
    created = [world.see(running).alarms_created for _ in range(2)]
    stopping = world.see(job_with_alarm_tag("Stopping", "Stopping")).alarms_deleted
    deleted = [world.see(job_with_alarm_tag("Completed", "Completed")).alarms_deleted for _ in range(2)]
    assert (created, stopping, deleted) == ([[name], []], [], [[name], []])
    assert [spec.alarm_name for spec in world.alarms.put] == [name]
    assert world.alarms.deleted == [name]
    done = {"state": "done", "outcome": "done", "expires_at": NOW.timestamp() + 35 * 86400}
    assert (world.ledger.items[f"a#{job}#created"], world.ledger.items[f"a#{job}#deleted"]) == (done, done)


def test_a_failed_alarm_creation_releases_its_claim_so_the_retry_creates_it() -> None:
    class AlarmsDown(FakeAlarms):
        def put_job_alarm(self, spec: JobAlarmSpec) -> None:
            raise ActionFailed("PutMetricAlarm", RuntimeError("throttled"))

    world = AlarmWorld()
    world.guard.alarms = AlarmsDown()
    running = job_with_alarm_tag("InProgress", "Training")
    with pytest.raises(ActionFailed):
        world.see(running)
    world.guard.alarms = world.alarms
    job = running["detail"]["TrainingJobName"]
    assert world.see(running).alarms_created == [job_alarm_name(job, "train:loss")]


def test_a_failed_record_of_an_alarm_upkeep_is_raised_not_kept_as_unrecorded() -> None:
    # Unlike a stop (its notification would be sent twice), an alarm's upkeep is safe to do again: the failure to
    # record it goes to Lambda's retry.
    class LedgerDown(FakeLedger):
        def complete(self, key: str, *, now: datetime, ttl_seconds: int, outcome: str) -> None:
            raise ActionFailed(f"complete {key}", RuntimeError("throttled"))

    world = AlarmWorld()
    world.guard.ledger = LedgerDown()
    with pytest.raises(ActionFailed, match="complete a#"):
        world.see(job_with_alarm_tag("InProgress", "Training"))


def test_the_notification_of_the_guards_stop_shows_the_job_stopping() -> None:
    # SageMaker accepted StopTrainingJob: the job is Stopping now, not the event's InProgress / Training.
    world = World()
    world.see(load_event("vanishing_gradient_issues_found"))
    [note] = world.publisher.published
    assert (note.job.status, note.job.secondary_status) == ("Stopping", "Stopping")


def without_tags(event: dict[str, Any]) -> dict[str, Any]:
    del event["detail"]["Tags"]
    return event


@dataclass
class ListingJobs(FakeJobs):
    """Records every ListTags."""

    listed: list[str] = field(default_factory=list)

    def tags(self, arn: str) -> dict[str, str]:
        self.listed.append(arn)
        return super().tags(arn)


def test_a_running_job_whose_event_lacks_tags_gets_its_per_job_alarms_from_the_listed_tags() -> None:
    world = AlarmWorld()
    world.guard.jobs = world.jobs = ListingJobs()
    event = without_tags(job_with_alarm_tag("InProgress", "Training"))
    job, job_arn = event["detail"]["TrainingJobName"], event["detail"]["TrainingJobArn"]
    world.jobs.tags_by_arn[job_arn] = {LOSS_TAG: "max above 5 3/5 stop"}
    assert world.see(event).alarms_created == [job_alarm_name(job, "train:loss")]
    assert world.jobs.listed == [job_arn]


@pytest.mark.parametrize(
    "event",
    [
        without_tags(load_event("failed")),  # an ended job: nothing it does turns on its tags
        without_tags(  # no finding, and no per-job alarms kept (no alarms adapter)
            with_detail(
                load_event("vanishing_gradient_issues_found"),
                DebugRuleEvaluationStatuses=[rule_status("VanishingGradient", "NoIssuesFound")],
            )
        ),
    ],
)
def test_tags_are_listed_only_when_a_decision_may_turn_on_them(event: dict[str, Any]) -> None:
    world = World()
    world.guard.jobs = world.jobs = ListingJobs()
    world.see(event)
    assert world.jobs.listed == []


# --- a metric guard's alarm ------------------------------------------------------------------------------
ALARM_JOB = "resnet50-2026-11-30-02-20-00-001"
ALARM_ARN = f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{ALARM_JOB}"
REASON = "Threshold Crossed: 1 datapoint was greater than the threshold (5.0)."
GUARDS = {
    "metric_guards": [
        {"name": "loss-diverging", "metric": "train:loss", "threshold": 5, "action": "stop"},
        {"name": "vision-only", "metric": "train:loss", "threshold": 5, "job_prefix": "vision-"},
        {"name": "tagged-only", "metric": "train:loss", "threshold": 5, "job_tag": "team"},
    ]
}


def observed(alarm_name: str = "training-guard-loss-diverging", **changes: Any) -> AlarmObservation:
    fired = AlarmObservation(
        event_id="alarm-1",
        account="123456789012",
        region="eu-west-1",
        time=NOW,
        alarm_name=alarm_name,
        state="ALARM",
        reason=REASON,
        job=ALARM_JOB,
        metric="train:loss",
        contributor=True,
    )
    return replace(fired, **changes)


def alarm_world(status: str = "InProgress", tags: dict[str, str] | None = None) -> World:
    world = World(GuardConfig.from_dict(GUARDS))
    world.jobs.jobs[ALARM_JOB] = TrainingJob(
        name=ALARM_JOB, status=status, arn=ALARM_ARN, secondary_status="Training", training_start_time=NOW
    )
    world.jobs.tags_by_arn[ALARM_ARN] = dict(tags or {})
    return world


def test_a_fleet_guards_alarm_stops_the_job_and_says_where_and_what_fired() -> None:
    world = alarm_world()
    receipt = world.guard.handle_alarm(observed(), now=NOW)
    printed = receipt.as_dict()
    assert isinstance(printed.pop("spend"), dict)
    assert printed == {
        "job": ALARM_JOB,
        "event_id": "alarm-1",
        "stopped": True,
        "notifications": ["metric_alarm"],
        "outcomes": ["stopped"],
        "duplicates": 0,
        "ignored": None,
        "rejected": None,
        "described": False,
        "alarms_created": [],
        "alarms_deleted": [],
        "unrecorded": [],
        "folded": [],
        "price_problems": [],
        "card_problems": [],
    }
    [note] = world.publisher.published
    assert (note.account, note.region, note.event_id, note.transition) == (
        "123456789012",
        "eu-west-1",
        "alarm-1",
        f"t#{ALARM_JOB}#metric#loss-diverging#ALARM",
    )
    assert note.finding == Finding(name="loss-diverging", source="metric", status="ALARM", details=REASON)


def test_a_per_job_alarm_is_the_finding_of_its_tags_metric() -> None:
    world = alarm_world(tags={LOSS_TAG: "max above 5 3/5 notify"})
    receipt = world.guard.handle_alarm(observed(job_alarm_name(ALARM_JOB, "train:loss")), now=NOW)
    assert receipt.outcomes == ["notified"]
    [note] = world.publisher.published
    assert note.finding == Finding(name="train:loss", source="metric", status="ALARM", details=REASON)
    assert note.transition == f"t#{ALARM_JOB}#metric#train:loss#ALARM"


@pytest.mark.parametrize(
    ("alarm", "tags", "ignored"),
    [
        (observed(state="OK"), {}, "alarm training-guard-loss-diverging is OK"),
        (observed(job=None), {}, "alarm training-guard-loss-diverging names no training job"),
        (observed(job="gone"), {}, "training job gone does not exist"),
        (observed("training-guard-removed"), {}, "no metric guard named 'removed' in the configuration"),
        (
            observed("training-guard-vision-only"),
            {},
            f"metric_guards.vision-only.job_prefix does not select {ALARM_JOB}",
        ),
        (observed("training-guard-tagged-only"), {}, "metric_guards.tagged-only.job_tag: the job has no tag team"),
        (
            observed(job_alarm_name(ALARM_JOB, "train:acc")),
            {LOSS_TAG: "max above 5"},
            f"alarm {job_alarm_name(ALARM_JOB, 'train:acc')} matches no training-guard:alarm tag of {ALARM_JOB}",
        ),
    ],
)
def test_an_alarm_that_does_not_apply_is_ignored_with_its_reason(
    alarm: AlarmObservation, tags: dict[str, str], ignored: str
) -> None:
    world = alarm_world(tags=tags)
    receipt = world.guard.handle_alarm(alarm, now=NOW)
    assert (receipt.job, receipt.event_id, receipt.ignored) == (alarm.job or "", "alarm-1", ignored)
    assert world.publisher.published == []


def test_a_guard_limited_to_a_tag_applies_to_a_job_carrying_it() -> None:
    world = alarm_world(tags={"team": "vision"})
    assert world.guard.handle_alarm(observed("training-guard-tagged-only"), now=NOW).outcomes == ["notified"]


def test_an_alarm_retried_after_our_killed_stop_finishes_and_announces_the_stop() -> None:
    # An attempt wrote the stop record and stopped the job, then was killed before tagging and announcing.
    world = alarm_world(status="Stopping")
    world.ledger.stops[ALARM_JOB] = StopRecord(ALARM_JOB, "loss-diverging", "metric_guards.loss-diverging", NOW, "a0")
    receipt = world.guard.handle_alarm(observed(), now=NOW + timedelta(seconds=61))
    assert receipt.outcomes == ["stopped"]
    assert world.jobs.tags_by_arn[ALARM_ARN][contract.TAG_STOP_RULE] == "loss-diverging"


def log_finding(detail: str = "loss 9.1 is 4.2x its best 2.17") -> Finding:
    return Finding(name="Divergence", source=policy.LOG_RULE, status=policy.LOG_ISSUE, details=detail)


LOG_STAMP = EventStamp(
    "delivery-1#3790", "123456789012", "eu-west-1", NOW, source=contract.LOGS_SOURCE, detail_type=contract.LOG_DELIVERY
)


def test_a_log_rules_finding_stops_the_job_once_through_the_policy() -> None:
    world = alarm_world()
    for _ in range(2):  # the delivery repeated: one stop
        receipt = world.guard.handle_finding(
            ALARM_JOB,
            log_finding(),
            action=Action.STOP,
            setting="log_rules.divergence (factor 4)",
            kind=policy.Kind.LOG_RULE,
            stamp=LOG_STAMP,
            now=NOW,
        )
    assert world.jobs.stop_calls == [ALARM_JOB]
    assert receipt.duplicates == 1
    [note] = world.publisher.published
    assert (note.kind, note.transition, note.event_id) == (
        policy.Kind.LOG_RULE,
        f"t#{ALARM_JOB}#log#Divergence#IssuesFound",
        "delivery-1#3790",
    )
    assert world.ledger.stops[ALARM_JOB].rule == "Divergence"


@pytest.mark.parametrize(
    ("action", "dry_run", "tags", "outcome"),
    [
        (Action.STOP, True, {}, "would_stop"),
        (Action.NOTIFY, False, {}, "notified"),
        (Action.STOP, False, {contract.DEFAULT_EXEMPT_TAG: "true"}, "would_stop"),
    ],
)
def test_a_log_rules_finding_honours_dry_run_notify_and_exemption(
    action: Action, dry_run: bool, tags: dict[str, str], outcome: str
) -> None:
    world = alarm_world(tags=tags)
    receipt = world.guard.handle_finding(
        ALARM_JOB,
        log_finding(),
        action=action,
        setting="log_rules.divergence",
        kind=policy.Kind.LOG_RULE,
        stamp=LOG_STAMP,
        now=NOW,
        dry_run=dry_run,
    )
    assert receipt.outcomes == [outcome]
    assert world.jobs.stop_calls == []
    if dry_run:
        assert world.publisher.published[0].reason == "log_rules.divergence, but its action is dry_run"


def test_a_log_rules_finding_about_a_job_that_is_gone_is_ignored() -> None:
    world = alarm_world()
    receipt = world.guard.handle_finding(
        "gone", log_finding(), action=Action.STOP, setting="s", kind=policy.Kind.LOG_RULE, stamp=LOG_STAMP, now=NOW
    )
    assert receipt.ignored == "training job gone does not exist"


# --- one job, one story: what follows the guard's stop is folded into it ----------------------------------
JOB = "pytorch-mnist-lr01-2026-11-30-02-10-00-123"
JOB_ARN = f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{JOB}"


def job_event(status: str, rules: list[dict[str, Any]] | None = None, **detail: Any) -> dict[str, Any]:
    """The diverging job's state change in `status` (its rule statuses replaced when given)."""
    secondary = "Training" if status == "InProgress" else status
    event = with_detail(
        load_event("vanishing_gradient_issues_found"), TrainingJobStatus=status, SecondaryStatus=secondary, **detail
    )
    if rules is not None:
        event["detail"]["DebugRuleEvaluationStatuses"] = rules
    return event


def stopped_event(rules: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return job_event("Stopped", rules)


def key(rule: str, status: str, source: str = "debugger") -> str:
    return f"t#{JOB}#{source}#{rule}#{status}"


STOPPED_KEY = f"t#{JOB}#job#status#Stopped"
# What SageMaker says while the guard's stop takes effect: a second rule finds issues, a third breaks.
LATER_FINDING = job_event("Stopping", [rule_status("WeightUpdateRatio", "IssuesFound")])
LATER_RULE_ERROR = job_event("Stopping", [rule_status("LossNotDecreasing", "Error", "Training job has ended")])
THE_STOPPED_CHANGE = stopped_event(rules=[])
# An event SageMaker sent before the stop took effect, delivered after it: the job still reads InProgress.
STALE_FINDING = job_event("InProgress", [rule_status("WeightUpdateRatio", "IssuesFound")])


def stopped_by_the_guard(config: GuardConfig | None = None) -> World:
    world = World(config)
    world.see(load_event("vanishing_gradient_issues_found"))
    assert world.kinds() == [("issues_found", "stopped")]
    assert world.ledger.stops[JOB].confirmed
    return world


def test_the_diverging_job_tells_one_story_the_rule_error_before_the_stop_and_the_stop() -> None:
    world = World()
    before = job_event("InProgress", [rule_status("ExplodingTensor", "Error", "No debugging data was saved")])
    receipts = [world.see(before), world.see(load_event("vanishing_gradient_issues_found"))]
    receipts += [world.see(e) for e in (LATER_FINDING, stopped_event([rule_status("LossNotDecreasing", "Error")]))]
    # Without folding: the rule error, the stop, the later finding, the stopped change, the later rule error.
    assert world.kinds() == [("rule_error", "notified"), ("issues_found", "stopped")]
    folded = [key("WeightUpdateRatio", "IssuesFound"), key("LossNotDecreasing", "Error"), STOPPED_KEY]
    assert [k for r in receipts for k in r.folded] == folded
    # exactly once per transition: each one claimed, acted on and marked done, its outcome "folded" ...
    assert all(world.ledger.items[k]["state"] == "done" for k in folded)
    assert {k: world.ledger.items[k]["outcome"] for k in folded} == dict.fromkeys(folded, "folded")
    # ... and kept with the stop's audit record, which outlives the ledger's transitions
    assert world.ledger.stops[JOB].folded == tuple(sorted(folded))


@pytest.mark.parametrize(
    ("after", "folded"),
    [
        (LATER_FINDING, key("WeightUpdateRatio", "IssuesFound")),  # a finding on the job being stopped
        (LATER_RULE_ERROR, key("LossNotDecreasing", "Error")),  # a rule breaking as the job ends
        (THE_STOPPED_CHANGE, STOPPED_KEY),  # the "stopped" change of the guard's own stop
        (STALE_FINDING, key("WeightUpdateRatio", "IssuesFound")),  # late delivery: refused as "already stopping"
    ],
    ids=["later-finding", "later-rule-error", "stopped-change", "stale-in-progress-finding"],
)
def test_what_follows_the_guards_stop_is_recorded_and_folded_not_announced(after: dict[str, Any], folded: str) -> None:
    world = stopped_by_the_guard()
    receipt = world.see(after, now=NOW + timedelta(minutes=1))
    assert (receipt.folded, receipt.notifications, receipt.outcomes) == ([folded], [], [])
    assert world.kinds() == [("issues_found", "stopped")]
    assert world.ledger.items[folded] == {
        "state": "done",
        "outcome": "folded",
        "expires_at": (NOW + timedelta(minutes=1)).timestamp() + 35 * 86400,
    }
    assert world.ledger.stops[JOB].folded == (folded,)
    assert world.jobs.stop_calls == [JOB]  # folding acts exactly as before: no second stop


def test_a_redelivered_folded_transition_is_a_duplicate_not_a_message() -> None:
    world = stopped_by_the_guard()
    world.see(LATER_FINDING)
    again = world.see(LATER_FINDING)
    assert (again.duplicates, again.folded, again.notifications) == (1, [], [])
    assert world.kinds() == [("issues_found", "stopped")]


# --- Slack app mode: the job's end, folded, still shown on its card -------------------------------------------
def with_cards(world: World, fail: BaseException | None = None) -> FakePublisher:
    """The world's responder with Slack app mode's card port (a publisher-shaped fake: it records what it shows)."""
    cards = FakePublisher(fail=fail)
    world.guard.cards = _CardsOf(cards)
    return cards


@dataclass
class _CardsOf:
    inner: FakePublisher

    def update_card(self, notification: Any) -> None:
        self.inner.publish(notification)


def test_the_folded_stopped_change_of_the_guards_stop_updates_the_card_and_nothing_else() -> None:
    world = stopped_by_the_guard()
    cards = with_cards(world)
    receipt = world.see(THE_STOPPED_CHANGE, now=NOW + timedelta(minutes=1))
    assert receipt.folded == [STOPPED_KEY]
    assert world.kinds() == [("issues_found", "stopped")]  # still announced nowhere
    [card] = cards.published
    assert (card.kind.value, card.outcome.value, card.transition, card.time) == (
        "job_stopped",
        "notified",
        STOPPED_KEY,
        NOW + timedelta(minutes=1),
    )
    assert card.reason.startswith("by Training Guard at ")
    assert card.job.status == "Stopped"
    assert receipt.card_problems == []


def test_the_card_shows_the_jobs_spend_at_its_end_priced_in_the_events_region() -> None:
    world = stopped_by_the_guard()
    cards = with_cards(world)
    p3 = PriceQuote("ml.p3.2xlarge", "us-east-1", 3.6, pricing.SOURCE_API, "2026-11-01", "TESTSKU")
    world.guard.prices = FakePrices(quotes={("us-east-1", "ml.p3.2xlarge"): p3})
    world.see(THE_STOPPED_CHANGE, now=NOW + timedelta(minutes=1))
    [card] = cards.published
    assert world.guard.prices.asked == [("us-east-1", ("ml.p3.2xlarge",))]
    assert card.spend is not None
    assert card.spend.price_source == "AWS Price List API (2026-11-01)"
    assert card.spend.so_far_usd is not None
    assert card.spend.so_far_usd > 0


@pytest.mark.parametrize(
    "after", [LATER_FINDING, LATER_RULE_ERROR, STALE_FINDING], ids=["later-finding", "rule-error", "stale-finding"]
)
def test_what_else_is_folded_leaves_the_card_showing_the_stop(after: dict[str, Any]) -> None:
    world = stopped_by_the_guard()
    cards = with_cards(world)
    assert world.see(after).folded
    assert cards.published == []


def test_a_card_update_that_fails_is_reported_and_the_transition_stays_done() -> None:
    world = stopped_by_the_guard()
    cards = with_cards(world, fail=ActionFailed("sqs:SendMessage", RuntimeError("throttled")))
    receipt = world.see(THE_STOPPED_CHANGE)
    assert receipt.card_problems == [f"{STOPPED_KEY}: sqs:SendMessage failed: throttled"]
    assert world.ledger.items[STOPPED_KEY]["outcome"] == "folded"  # not released: a retry would be a duplicate
    assert (cards.published, world.kinds()) == ([], [("issues_found", "stopped")])


def test_any_failure_of_the_card_update_is_reported_never_raised_after_the_transition_is_done() -> None:
    # Raised, Lambda's retry would find the transition done: the card update, the receipt and the metrics lost.
    world = stopped_by_the_guard()
    with_cards(world, fail=EndpointConnectionError(endpoint_url="https://sqs.us-east-1.amazonaws.com/"))
    receipt = world.see(THE_STOPPED_CHANGE)
    assert receipt.card_problems == [
        f'{STOPPED_KEY}: Could not connect to the endpoint URL: "https://sqs.us-east-1.amazonaws.com/"'
    ]
    assert receipt.folded == [STOPPED_KEY]


def test_the_sqs_adapter_names_a_connection_failure_as_an_action_that_failed() -> None:
    class Unreachable:
        def send_message(self, **_: Any) -> None:
            raise EndpointConnectionError(endpoint_url="https://sqs.us-east-1.amazonaws.com/")

    world = stopped_by_the_guard()
    world.guard.cards = CardUpdates(cast("SQSClient", Unreachable()), "https://sqs.us-east-1.amazonaws.com/1/chat")
    receipt = world.see(THE_STOPPED_CHANGE)
    [problem] = receipt.card_problems
    assert problem.startswith(f"{STOPPED_KEY}: sqs:SendMessage of a card update to https://sqs.us-east-1")


def test_an_announced_stopped_change_is_published_not_sent_to_the_card() -> None:
    world = World()
    cards = with_cards(world)
    world.see(THE_STOPPED_CHANGE)  # a person stopped it: announced, and the notifier updates the card itself
    assert world.kinds() == [("job_stopped", "notified")]
    assert cards.published == []


def test_a_metric_alarm_of_a_job_the_guard_stopped_for_a_rule_is_folded() -> None:
    world = stopped_by_the_guard(GuardConfig.from_dict(GUARDS))
    alarm = observed(job=JOB)
    receipt = world.guard.handle_alarm(alarm, now=NOW)
    assert receipt.folded == [f"t#{JOB}#metric#loss-diverging#ALARM"]
    assert world.kinds() == [("issues_found", "stopped")]


def test_the_stopped_change_of_a_job_a_metric_guard_stopped_is_folded() -> None:
    world = alarm_world()
    assert world.guard.handle_alarm(observed(), now=NOW).outcomes == ["stopped"]
    stopped = TrainingJob(name=ALARM_JOB, status="Stopped", arn=ALARM_ARN, secondary_status="Stopped", rules=())
    world.jobs.jobs[ALARM_JOB] = stopped
    event = replace(parse_event(load_event("failed")), job=stopped)
    receipt = world.guard.handle(event, now=NOW)
    assert receipt.folded == [f"t#{ALARM_JOB}#job#status#Stopped"]
    assert [(n.kind.value, n.outcome.value) for n in world.publisher.published] == [("metric_alarm", "stopped")]


def test_a_stop_by_a_person_is_announced_with_who_stopped_it() -> None:
    world = World()
    receipt = world.see(THE_STOPPED_CHANGE)  # nobody asked the guard: no stop record
    [note] = world.publisher.published
    assert (note.kind.value, receipt.folded) == ("job_stopped", [])
    assert note.reason == "by a person or another tool (StopTrainingJob called outside the guard)"
    assert world.ledger.items[STOPPED_KEY]["outcome"] == "notified"


def test_a_finding_handled_before_the_guards_stop_exists_is_announced() -> None:
    # The other rule's finding arrives first: the stop is still to come, so it is news, and so is the stop.
    world = World()
    world.see(job_event("InProgress", [rule_status("LossNotDecreasing", "Error", "no data")]))
    world.see(load_event("vanishing_gradient_issues_found"))
    assert world.kinds() == [("rule_error", "notified"), ("issues_found", "stopped")]


@pytest.mark.parametrize(
    "config",
    [GuardConfig(dry_run=True), GuardConfig(rules=RulePolicy(actions={"VanishingGradient": Action.NOTIFY}))],
    ids=["dry-run", "notify-only"],
)
def test_nothing_is_folded_after_a_would_stop_or_a_notify_only_finding(config: GuardConfig) -> None:
    # A "would have stopped" is not a stop: the person who then stops the job, the rules that break
    # meanwhile, are each news.
    world = World(config)
    world.see(load_event("vanishing_gradient_issues_found"))
    receipts = [world.see(LATER_RULE_ERROR), world.see(THE_STOPPED_CHANGE)]
    assert [r.folded for r in receipts] == [[], []]
    assert [kind for kind, _ in world.kinds()] == ["issues_found", "rule_error", "job_stopped"]
    assert world.jobs.stop_calls == []


def test_a_stop_record_never_confirmed_folds_nothing() -> None:
    # An attempt wrote the record and was killed before StopTrainingJob: the job may still run. Another rule's
    # finding is refused the stop ("already being stopped") and said, never folded into a stop that did not happen.
    world = World()
    world.ledger.stops[JOB] = StopRecord(JOB, "VanishingGradient", "rules.debugger_default = stop", NOW, "e0")
    receipt = world.see(STALE_FINDING)
    assert (receipt.outcomes, receipt.folded) == (["already_stopping"], [])
    assert world.jobs.stop_calls == []


def test_a_failure_after_the_guards_stop_is_announced() -> None:
    # The stop ended the job otherwise than announced: that is news.
    world = stopped_by_the_guard()
    receipt = world.see(job_event("Failed", [], FailureReason="AlgorithmError: exit 137"))
    assert receipt.folded == []
    assert world.kinds() == [("issues_found", "stopped"), ("job_failed", "notified")]


def test_a_retry_whose_stop_call_fails_keeps_the_earlier_attempts_record_and_still_announces_the_stop() -> None:
    # The first attempt stopped the job and failed to publish; the retry's StopTrainingJob call fails (throttled).
    # Dropping the record then made the next retry announce the guard's own stop as "already ended".
    world = World()
    event = load_event("vanishing_gradient_issues_found")
    world.publisher.fail = ActionFailed("sns:Publish", RuntimeError("throttled"))
    with pytest.raises(ActionFailed):
        world.see(event)
    world.publisher.fail = None
    world.jobs.fail_stop = ActionFailed("StopTrainingJob", RuntimeError("ThrottlingException"))
    with pytest.raises(ActionFailed):
        world.see(event)
    assert world.ledger.stops[JOB].confirmed  # kept: its stop took effect
    world.jobs.fail_stop = None
    assert world.see(event).outcomes == ["stopped"]
    assert world.kinds() == [("issues_found", "stopped")]


def test_a_retry_of_a_stop_keeps_the_first_record_and_tags_what_it_says() -> None:
    world = World()
    record = StopRecord(JOB, "VanishingGradient", "rules.debugger_default = stop", NOW, "e0")
    world.ledger.stops[JOB] = record  # the first attempt's, killed before StopTrainingJob
    world.see(load_event("vanishing_gradient_issues_found"), now=NOW + timedelta(seconds=61))
    kept = world.ledger.stops[JOB]
    assert replace(kept, spend=None) == replace(record, confirmed=True)
    assert kept.spend is not None  # what this retry's stop avoided, once it took effect
    assert world.jobs.tags_by_arn[JOB_ARN][contract.TAG_STOPPED_AT] == NOW.isoformat(timespec="seconds")


# --- mutes: each job's own, in its own account ------------------------------------------------------------------
def muted_world(*, job: str = ALARM_JOB, account: str | None = None) -> tuple[World, FakeMutes]:
    """The alarm world with a mutes store holding a silence of the loss-diverging guard for `job` in `account`."""
    world = alarm_world()
    store = FakeMutes()
    store.put(job, mutes.silence("loss-diverging", by="cli:me", at=NOW, seconds=None), account=account, now=NOW)
    world.guard.mutes = store
    world.ledger.mutes_in_force = store.in_force  # the stop's one write checks the mutes item (DynamoDB: same call)
    return world, store


def test_a_silenced_metric_guard_decides_nothing_for_its_job() -> None:
    world, _ = muted_world()
    receipt = world.guard.handle_alarm(observed(), now=NOW)
    assert (receipt.outcomes, world.jobs.stop_calls) == ([], [])


@pytest.mark.parametrize(
    ("job", "account", "scope"),
    [("another-job", None, None), (ALARM_JOB, "444455556666", None), (ALARM_JOB, None, "444455556666")],
    ids=["another-jobs-mute", "a-members-mute-in-the-hub", "the-hubs-mute-in-a-member"],
)
def test_a_mute_silences_only_its_own_job_in_its_own_account(job: str, account: str | None, scope: str | None) -> None:
    world, _ = muted_world(job=job, account=account)
    world.guard = world.guard.acting(account_scope=scope)
    assert world.guard.handle_alarm(observed(), now=NOW).outcomes == ["stopped"]


def test_a_sweeps_memo_keeps_each_jobs_mutes_apart() -> None:
    world, store = muted_world(job="another-job")
    world.guard = world.guard.acting(mutes_memo={})
    assert world.guard.mutes_of("another-job").entries  # read, then remembered
    assert world.guard.mutes_of(ALARM_JOB).entries == ()
    assert world.guard.mutes_of("another-job").entries
    assert store.reads == 2


def test_the_cards_port_given_to_the_constructor_is_the_one_used() -> None:
    cards = FakePublisher()
    world = stopped_by_the_guard()
    guard = Responder(
        world.guard.config, world.jobs, world.ledger, world.publisher, cards=_CardsOf(cards), sleep=world.sleeps.append
    )
    world.guard = guard
    world.see(THE_STOPPED_CHANGE)
    assert [n.kind.value for n in cards.published] == ["job_stopped"]


def test_a_snoozed_debugger_rule_holds_back_the_stop_of_its_job_only() -> None:
    world = World()
    store = FakeMutes()
    store.put(JOB, mutes.silence("VanishingGradient", by="slack:U1", at=NOW, seconds=3600), now=NOW)
    world.guard.mutes = store
    world.ledger.mutes_in_force = store.in_force
    receipt = world.see(load_event("vanishing_gradient_issues_found"))
    assert (receipt.stopped, world.jobs.stop_calls) == (False, [])
    store.put("another-job", mutes.silence("VanishingGradient", by="slack:U1", at=NOW, seconds=3600), now=NOW)
    store.items.pop(JOB)
    assert world.see(load_event("vanishing_gradient_issues_found")).stopped


# --- what the sweeps ask of the responder --------------------------------------------------------------------------
def test_first_time_is_true_once_per_key_whatever_asks_later() -> None:
    ledger = FakeLedger()
    guard = Responder(GuardConfig(), FakeJobs(), ledger, FakePublisher())
    assert guard.first_time("said#job-a#budget", NOW) is True
    assert guard.first_time("said#job-a#budget", NOW + timedelta(hours=1)) is False
    assert guard.first_time("said#job-b#budget", NOW) is True
    assert {"said#job-a#budget", "said#job-b#budget"} <= set(ledger.items)


def test_spend_prices_the_events_instances_in_its_region_at_that_time() -> None:
    event = parse_event(load_event("vanishing_gradient_issues_found"))
    quote = PriceQuote("ml.p3.2xlarge", event.region or "", 3.6, pricing.SOURCE_API, "2026-11-01", "TESTSKU")
    prices = FakePrices(quotes={(event.region or "", "ml.p3.2xlarge"): quote})
    guard = Responder(GuardConfig(), FakeJobs(), FakeLedger(), FakePublisher(), prices=prices)
    receipt = Receipt(job=event.job.name, event_id=event.event_id)
    spend = guard.spend(event, event.job, receipt, NOW + timedelta(hours=1))
    assert prices.asked == [(event.region, ("ml.p3.2xlarge",))]
    assert spend.hourly_usd == 3.6
    assert spend.quotes == (quote,)
    assert receipt.price_problems == []
