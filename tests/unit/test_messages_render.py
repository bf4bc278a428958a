"""What people read on every channel (issue 28, section 2 and 4): a stop SageMaker refused because the job had just
ended says the state the job is in, a person who pressed Stop now is a person, and times read "03:00 UTC"."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tests.fakes import FakeJobs, FakeLedger, FakePublisher
from tests.helpers import NOW, load_event, running_job
from training_guard.config.model import GuardConfig
from training_guard.domain import policy
from training_guard.domain.errors import ActionFailed
from training_guard.domain.events import Finding, JobEvent, parse_event
from training_guard.domain.outcome import Outcome
from training_guard.render import slack_messages
from training_guard.render.messages import Notification, build, q_developer_notification
from training_guard.services.responder import Receipt, Responder

ALICE = "U0ALICE"


class UnreadableJobs(FakeJobs):
    """SageMaker refuses the stop (the job has ended), then DescribeTrainingJob fails."""

    def describe(self, name: str) -> Any:
        raise ActionFailed(f"DescribeTrainingJob {name}", RuntimeError("ThrottlingException"))


def raced(event: dict[str, Any], status: str, jobs: FakeJobs | None = None) -> Notification:
    """The notification of a stop that lost the race: the event says InProgress, SageMaker says `status`."""
    jobs = jobs or FakeJobs()
    publisher = FakePublisher()
    parsed = parse_event(event)
    jobs.jobs[parsed.job.name] = replace(parsed.job, status=status, secondary_status=status)
    Responder(GuardConfig(), jobs, FakeLedger(), publisher, sleep=lambda _: None).handle(parsed, now=NOW)
    [note] = publisher.published
    assert note.outcome is Outcome.ALREADY_ENDED
    return note


def channels(note: Notification) -> dict[str, str]:
    """Every rendering of one notification: SNS subject and e-mail, SMS, Q Developer, Slack message and card."""
    doc = json.loads(json.dumps(note.document()))
    _, blocks = slack_messages.render(doc)
    _, card = slack_messages.render_card(doc)
    return {
        "email": note.subject() + "\n" + note.email_text(),
        "sms": note.sms_text(),
        "q": json.dumps(q_developer_notification(doc)["content"], ensure_ascii=False),
        "slack": json.dumps(blocks, ensure_ascii=False),
        "card": json.dumps(card, ensure_ascii=False),
    }


@pytest.mark.parametrize("status", ["Stopped", "Completed", "Failed"])
@pytest.mark.parametrize("fixture", ["vanishing_gradient_issues_found", "in_progress_no_rule_lists"])
def test_a_stop_that_lost_the_race_says_the_state_the_job_is_in_on_every_channel(fixture: str, status: str) -> None:
    event = load_event(fixture)
    # the second fixture: a metric guard's firing, through the same stop
    note = metric_race(event, status) if fixture == "in_progress_no_rule_lists" else raced(event, status)
    assert f"(job already {status})" in note.title
    for channel, text in channels(note).items():
        assert "InProgress" not in text, channel
        if channel != "sms":
            assert f"{status} / {status}" in text, channel


def metric_race(event: dict[str, Any], status: str) -> Notification:
    jobs, publisher = FakeJobs(), FakePublisher()
    parsed = parse_event(event)
    jobs.jobs[parsed.job.name] = replace(parsed.job, status=status, secondary_status=status)
    guard = Responder(GuardConfig(), jobs, FakeLedger(), publisher, sleep=lambda _: None)
    decision = policy.Decision(
        f"t#{parsed.job.name}#metric#loss-high",
        policy.Kind.METRIC_ALARM,
        policy.Plan.STOP,
        "metric_guards.loss-high: train:loss > 5",
        Finding(name="loss-high", source="metric", status="ALARM"),
    )
    guard.react(parsed, parsed.job, decision, Receipt(job=parsed.job.name, event_id=parsed.event_id), NOW)
    [note] = publisher.published
    return note


def test_a_stop_race_whose_end_state_cannot_be_read_says_ended_never_in_progress() -> None:
    note = raced(load_event("vanishing_gradient_issues_found"), "Stopped", UnreadableJobs())
    assert "(job already ended)" in note.title
    for channel, text in channels(note).items():
        assert "InProgress" not in text, channel
        if channel != "sms":
            assert "ended before the stop (SageMaker refused it)" in text, channel


def stop_now_note(outcome: Outcome = Outcome.STOPPED) -> Notification:
    job = running_job("train-1", timedelta(minutes=30), instance_type="ml.g5.xlarge")
    decision = policy.decide_stop_request(job, GuardConfig(), by=f"slack:{ALICE}", rule="LossNotDecreasing")
    event = JobEvent("click-1", "123456789012", "eu-west-1", NOW, policy.STOP_REQUEST, "Stop now", job)
    return build(event, job, decision, outcome, now=NOW, dry_run=False)


def test_a_person_who_pressed_stop_now_is_a_person_on_every_channel_never_a_rule() -> None:
    rendered = channels(stop_now_note())
    for channel in ("email", "sms", "q"):
        assert f"Slack user {ALICE} pressed Stop now" in rendered[channel], channel
    for channel in ("slack", "card"):
        assert f"<@{ALICE}> pressed" in rendered[channel], channel  # Slack shows the mention as the person
    for channel, text in rendered.items():
        assert f"slack:{ALICE}" not in text, channel
        assert "Rule" not in text, channel


def test_times_read_the_same_way_everywhere() -> None:
    note = stop_now_note()
    assert note.email_text().endswith("Event click-1 at 03:00 UTC.")
    assert "2026-11-30T" not in note.email_text()
    _, card = slack_messages.render_card(note.document())
    assert "updated 03:00 UTC" in json.dumps(card)
    alarm = {"AlarmName": "TrainingGuard-self-dlq", "NewStateValue": "ALARM", "NewStateReason": "x"}
    _, blocks = slack_messages.render_alarm({**alarm, "StateChangeTime": "2026-11-30T01:39:12.345+0000"})
    assert "*When*\\n01:39 UTC" in json.dumps(blocks)


def test_the_guards_own_stop_shows_the_job_stopping_never_in_progress_beside_stopped() -> None:
    jobs, publisher = FakeJobs(), FakePublisher()
    parsed = parse_event(load_event("vanishing_gradient_issues_found"))
    jobs.jobs[parsed.job.name] = parsed.job
    Responder(GuardConfig(), jobs, FakeLedger(), publisher, sleep=lambda _: None).handle(parsed, now=NOW)
    [note] = publisher.published
    assert note.outcome is Outcome.STOPPED
    for channel, text in channels(note).items():
        assert "InProgress" not in text, channel
        if channel != "sms":
            assert "Stopping / Stopping" in text, channel
