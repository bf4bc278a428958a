from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.helpers import NOW, load_event
from training_guard import contract
from training_guard.adapters.sns import SNS_MAX_MESSAGE_BYTES, message_attributes, sns_message
from training_guard.config.model import GuardConfig
from training_guard.domain.events import parse_event
from training_guard.domain.outcome import Outcome
from training_guard.domain.policy import Kind, decide
from training_guard.domain.text import format_duration
from training_guard.render.messages import TEST_TITLE_PREFIX, Notice, Notification, build, links, make_test_notification


def notification(event_name: str, outcome: Outcome, index: int = 0) -> Notification:
    event = parse_event(load_event(event_name))
    decision = decide(event.job, GuardConfig(), now=NOW)[index]
    return build(event, event.job, decision, outcome, now=NOW, dry_run=False)


def test_document_is_versioned_and_complete() -> None:
    note = notification("vanishing_gradient_issues_found", Outcome.STOPPED)
    doc = note.document()
    assert doc["schema"] == contract.NOTIFICATION_SCHEMA
    assert (doc["kind"], doc["outcome"], doc["severity"]) == ("issues_found", "stopped", "critical")
    assert doc["job"]["name"] == "pytorch-mnist-lr01-2026-11-30-02-10-00-123"
    assert doc["job"]["instance_type"] == "ml.p3.2xlarge"
    assert doc["job"]["training_seconds"] == 2910  # started 02:11:30, observed 03:00:00
    assert doc["rule"]["name"] == "VanishingGradient"
    assert doc["rule"]["details"].startswith("RuleEvaluationConditionMet")
    assert doc["reason"] == "rules.debugger_default = stop (debugger rule VanishingGradient)"
    assert json.loads(json.dumps(doc)) == doc


@pytest.mark.parametrize(
    ("outcome", "title"),
    [
        (Outcome.STOPPED, "Stopped pytorch-mnist-lr01-2026-11-30-02-10-00-123: rule VanishingGradient found issues"),
        (
            Outcome.WOULD_STOP,
            "Would have stopped pytorch-mnist-lr01-2026-11-30-02-10-00-123: rule VanishingGradient found issues",
        ),
        (
            Outcome.DEFERRED,
            "Rule VanishingGradient found issues in pytorch-mnist-lr01-2026-11-30-02-10-00-123: stop deferred",
        ),
        (Outcome.NOTIFIED, "Rule VanishingGradient found issues in pytorch-mnist-lr01-2026-11-30-02-10-00-123"),
    ],
)
def test_titles_say_what_happened_in_words(outcome: Outcome, title: str) -> None:
    assert notification("vanishing_gradient_issues_found", outcome).title == title


def test_lifecycle_titles() -> None:
    assert notification("failed", Outcome.NOTIFIED).title.endswith("failed")
    assert notification("failed", Outcome.NOTIFIED).kind is Kind.JOB_FAILED
    assert notification("spot_interrupted", Outcome.NOTIFIED).title.endswith("was interrupted (spot)")


def test_subject_fits_sns_limits() -> None:
    note = notification("vanishing_gradient_issues_found", Outcome.WOULD_STOP)
    subject = note.subject()
    assert len(subject) < 100
    assert subject.isascii()
    assert "\n" not in subject
    assert subject.endswith("...")


def test_email_prose_has_the_facts_and_links() -> None:
    text = notification("failed", Outcome.NOTIFIED).email_text()
    assert "Why: AlgorithmError: ExecuteUserScriptError" in text
    assert "Instances: 1 x ml.p3.2xlarge" in text
    assert "https://us-east-1.console.aws.amazon.com/sagemaker/home?region=us-east-1#/jobs/pytorch-mnist" in text
    assert "{" not in text  # prose, not JSON


def test_links_point_at_the_job_its_log_streams_and_the_rule_job() -> None:
    note = notification("vanishing_gradient_issues_found", Outcome.STOPPED)
    out = links(note.job.name, "eu-west-1", note.finding)
    assert out["Job"] == (
        "https://eu-west-1.console.aws.amazon.com/sagemaker/home?region=eu-west-1"
        "#/jobs/pytorch-mnist-lr01-2026-11-30-02-10-00-123"
    )
    assert out["Logs"].endswith(
        "#logsV2:log-groups/log-group/$252Faws$252Fsagemaker$252FTrainingJobs"
        "$3FlogStreamNameFilter$3Dpytorch-mnist-lr01-2026-11-30-02-10-00-123$252F"
    )
    assert "$252Faws$252Fsagemaker$252FProcessingJobs" in out["Rule logs"]
    assert links("x", None) == {}


def test_sns_body_gives_prose_to_email_and_the_document_to_machines() -> None:
    note = notification("vanishing_gradient_issues_found", Outcome.STOPPED)
    body = json.loads(sns_message(note))
    # SNS sends `default` to every protocol the message does not name (Lambda, e-mail-json, HTTP).
    assert set(body) == {"default", "email", "sqs", "https", "sms"}
    assert json.loads(body["sqs"]) == note.document()
    assert json.loads(body["default"]) == note.document()
    assert body["email"] == note.email_text()
    assert len(body["sms"]) <= 140
    attrs = message_attributes(note)
    assert attrs["severity"] == {"DataType": "String", "StringValue": "critical"}
    assert attrs["kind"]["StringValue"] == "issues_found"


@pytest.mark.parametrize(("seconds", "text"), [(5, "5 s"), (125, "2 min 05 s"), (7260, "2 h 01 min")])
def test_durations_read_naturally(seconds: int, text: str) -> None:
    assert format_duration(seconds) == text


def test_letters_outside_ascii_travel_as_utf8_not_escaped_twice() -> None:
    note = notification("vanishing_gradient_issues_found", Outcome.STOPPED)
    note = replace(note, reason="学習率が高すぎる")
    raw = sns_message(note)
    assert "学習率が高すぎる" in raw
    assert "\\u" not in raw
    assert json.loads(json.loads(raw)["default"])["reason"] == "学習率が高すぎる"


def test_a_notification_too_large_for_sns_is_cut_not_lost() -> None:
    note = notification("vanishing_gradient_issues_found", Outcome.STOPPED)
    job = replace(note.job, tags={f"key-{i}-" + "鍵" * 120: "値" * 256 for i in range(50)})
    big = replace(note, job=job, reason="理由" * 5000)
    raw = sns_message(big)
    assert len(raw.encode()) <= SNS_MAX_MESSAGE_BYTES - 1024
    document = json.loads(json.loads(raw)["default"])
    assert len(document["job"]["tags"]) == 50  # every tag is still named
    assert document["reason"].startswith("理由理由")
    assert document["title"] == big.title  # what is short stays whole


# --- the test notification (`training-guard test-notification`) -------------------------------------------


def a_test_note() -> Notification:
    return make_test_notification(
        test_id="0123456789ab",
        stack="TrainingGuard",
        sent_by="arn:aws:iam::123456789012:user/ops",
        account="123456789012",
        region="eu-west-1",
        now=NOW,
    )


def test_a_test_notification_is_marked_and_about_no_job() -> None:
    note = a_test_note()
    doc = note.document()
    assert doc["schema"] == contract.NOTIFICATION_SCHEMA
    assert (doc["kind"], doc["outcome"], doc["severity"]) == ("test", "notified", "info")
    assert doc["title"] == "Test notification from Training Guard (TrainingGuard): nothing happened to any job"
    assert doc["title"].startswith(TEST_TITLE_PREFIX)
    assert doc["transition"] == "test#0123456789ab"
    assert doc["links"] == {}  # no console page of a job that does not exist
    assert doc["rule"] is None
    assert "arn:aws:iam::123456789012:user/ops" in doc["reason"]
    assert note.subject() == "Training Guard: " + doc["title"]


def test_a_test_notification_reads_as_a_test_in_every_channel() -> None:
    note = a_test_note()
    body = json.loads(sns_message(note))
    assert body["email"].startswith("Test notification from Training Guard (TrainingGuard)")
    assert "No training job was looked at or touched." in body["email"]
    assert "Job:" not in body["email"]
    assert json.loads(body["sqs"]) == note.document()
    q_developer = json.loads(body["https"])
    assert q_developer["content"]["title"].startswith(":information_source: Test notification")
    assert q_developer["content"]["nextSteps"] == []
    assert message_attributes(note)["kind"] == {"DataType": "String", "StringValue": "test"}


def test_the_notifier_spells_the_test_kind_as_the_messages_do() -> None:
    from training_guard.render.slack_messages import TEST_KIND

    assert Notice.TEST.value == TEST_KIND
