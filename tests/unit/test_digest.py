"""The weekly digest (training_guard.render.digest): its week, its words in every channel, and once a week."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.fakes import FakeLedger, FakePublisher
from tests.unit.test_import_weight import loaded_after_import
from training_guard import contract
from training_guard.adapters.sns import SNS_MAX_MESSAGE_BYTES, message_attributes, sns_message
from training_guard.config.model import GuardConfig
from training_guard.domain import digest as digest_week
from training_guard.domain import totals
from training_guard.domain.digest import TOP, week_of
from training_guard.domain.errors import ActionFailed
from training_guard.domain.outcome import Outcome
from training_guard.domain.totals import StopEntry
from training_guard.render import digest, slack_messages
from training_guard.render.messages import Notice, Notification
from training_guard.services import digest as weekly
from training_guard.services.chat import ChatDelivery, delivery_key
from training_guard.services.digest import DigestReceipt, WeeklyDigest
from training_guard.services.ports import Claim

# The digest's hour on a Monday of ISO week 49 (seconds late, as a scheduled event may be).
SCHEDULED = datetime(2026, 11, 30, 9, 0, 12, tzinfo=UTC)
WEEK = week_of(SCHEDULED)
NOW = SCHEDULED + timedelta(seconds=3)
MARKER_TTL = 35 * 86400


def stop(
    job: str,
    at: datetime,
    *,
    rule: str = "VanishingGradient",
    reason: str = "rules.debugger_default = stop (debugger rule VanishingGradient)",
    avoided: float | None = 100.0,
    so_far: float | None = 10.0,
    confirmed: bool = True,
) -> StopEntry:
    return StopEntry(
        job=job,
        rule=rule,
        reason=reason,
        at=at,
        confirmed=confirmed,
        spend_avoided_usd=avoided,
        spend_so_far_usd=so_far,
    )


def week_totals(
    stops: Sequence[StopEntry], metrics: Mapping[str, Sequence[tuple[datetime, float]]] | None = None
) -> totals.Totals:
    return totals.compute(
        stops, {} if metrics is None else metrics, since=WEEK.since, until=WEEK.until - timedelta(microseconds=1)
    )


def note(result: totals.Totals, *, dry_run: bool = False, warnings: Sequence[str] = ()) -> Notification:
    return weekly.compose(
        result, WEEK, account="123456789012", region="eu-west-1", now=NOW, dry_run=dry_run, warnings=warnings
    )


DAY = timedelta(days=1)
WEEKS_STOPS = [
    stop("pytorch-mnist-lr01-2026-11-29-02-10-00-123", WEEK.until - DAY, avoided=120.5, so_far=10.25),
    stop("pytorch-mnist-lr01-2026-11-29-05-00-00-001", WEEK.until - 2 * DAY, avoided=80.25, so_far=4.0),
    stop(
        "resnet50-2026-11-28-01-00-00",
        WEEK.until - 3 * DAY,
        rule="loss-diverging",
        reason="metric_guards.loss-diverging: MAX(train:loss) > 5 for 3 of 3 min -> stop",
        avoided=None,
        so_far=None,
    ),
]


# --- the week ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scheduled", "label", "until"),
    [
        (SCHEDULED, "2026-W49", datetime(2026, 11, 30, 9, tzinfo=UTC)),
        # ISO weeks, not calendar years: 1 January 2027 is a Friday of 2026's 53rd week
        (datetime(2027, 1, 1, 17, 59, 59, tzinfo=UTC), "2026-W53", datetime(2027, 1, 1, 17, tzinfo=UTC)),
        (datetime(2027, 1, 4, 0, 0, tzinfo=UTC), "2027-W01", datetime(2027, 1, 4, tzinfo=UTC)),
        # a time in another offset is the same instant: 01:30+02:00 on a Monday is Sunday 23:00 UTC, week 48
        (datetime.fromisoformat("2026-11-30T01:30:00+02:00"), "2026-W48", datetime(2026, 11, 29, 23, tzinfo=UTC)),
    ],
)
def test_the_week_ends_at_the_scheduled_hour_and_is_named_by_its_iso_week(
    scheduled: datetime, label: str, until: datetime
) -> None:
    week = week_of(scheduled)
    assert (week.label, week.until, week.since) == (label, until, until - timedelta(days=7))
    assert week.key == f"digest#{label}"


def test_consecutive_digests_tile_time_a_stop_on_the_hour_counts_in_one() -> None:
    on_the_hour = stop("edge-run-1", WEEK.until)
    at_the_start = stop("edge-run-2", WEEK.since)
    this_week = digest_week.document(week_totals([on_the_hour, at_the_start]), WEEK)
    next_week = week_of(WEEK.until + timedelta(days=7))
    following = totals.compute([on_the_hour], {}, since=next_week.since, until=next_week.until)
    assert this_week["stops"] == 1  # the stop at the window's start, not the one at its end
    assert following.stops == 1  # ... which the next week counts
    assert (this_week["since"], this_week["until"]) == ("2026-11-23T09:00:00Z", "2026-11-30T09:00:00Z")


# --- what it says -------------------------------------------------------------------------------------------------


def test_a_week_with_stops_says_the_totals_the_report_says() -> None:
    metrics = {
        "Outcome_would_stop": [(WEEK.until - DAY, 2.0)],
        "Outcome_notified": [(WEEK.until - DAY, 5.0)],
        "Outcome_deferred": [(WEEK.until - DAY, 1.0)],
    }
    notification = note(week_totals(WEEKS_STOPS, metrics))
    doc = notification.document()
    week = doc["digest"]
    assert (doc["kind"], doc["outcome"], doc["severity"]) == ("digest", "notified", "info")
    assert doc["schema"] == contract.NOTIFICATION_SCHEMA
    assert doc["title"] == "Weekly digest 2026-W49: 3 jobs stopped, up to $200.75 avoided"
    assert (week["stops"], week["would_stop"], week["unconfirmed_stops"]) == (3, 2, 0)
    assert week["spend_avoided"] == {"usd": 200.75, "known": 2, "unknown": 1}
    assert week["spend_so_far"] == {"usd": 14.25, "known": 2, "unknown": 1}
    assert dict(digest.facts(week)) == {
        "Stopped": "3 jobs",
        "Would have stopped": "2 (not stopped: dry run, or the job's tags)",
        "Spend avoided": "up to $200.75 at list price, 1 of 3 unknown",
        "Spend at the stop": "$14.25, 1 of 3 unknown",
        "Other outcomes": "deferred 1 · notified 5",
    }
    assert digest.groups(week) == [
        (
            "Top rules and guards",
            ["VanishingGradient (rules): 2 stops, $200.75", "loss-diverging (metric_guards): 1 stop, unknown"],
        ),
        ("Most-stopped job prefixes", ["pytorch-mnist-lr01: 2 stops, $200.75", "resnet50: 1 stop, unknown"]),
    ]
    assert doc["links"] == {}
    assert doc["rule"] is None
    assert doc["transition"] == "digest#2026-W49"  # one Slack delivery per webhook and week


def test_a_week_without_stops_says_so_and_nothing_is_a_zero_for_want_of_a_figure() -> None:
    week = note(week_totals([])).document()["digest"]
    assert digest.title(week) == "Weekly digest 2026-W49: no job stopped"
    assert dict(digest.facts(week))["Spend avoided"] == "-"
    assert [rows for _, rows in digest.groups(week)] == [["no stops"], ["no stops"]]
    assert (week["rules"], week["rules_total"], len(week["days"])) == ([], 0, 8)  # Monday to Monday, UTC days
    with_would_stop = week_totals([], {"Outcome_would_stop": [(WEEK.until - DAY, 3.0)]})
    assert note(with_would_stop).title == "Weekly digest 2026-W49: no job stopped, 3 would have been"


def test_a_week_whose_stops_have_no_price_says_unknown_never_zero() -> None:
    unpriced = [stop(f"exp-{n}", WEEK.until - DAY, avoided=None, so_far=None) for n in range(2)]
    notification = note(week_totals(unpriced))
    week = notification.document()["digest"]
    assert notification.title == "Weekly digest 2026-W49: 2 jobs stopped, spend avoided unknown"
    assert week["spend_avoided"] == {"usd": 0.0, "known": 0, "unknown": 2}
    assert dict(digest.facts(week))["Spend avoided"] == "unknown (2 stops without a price)"
    assert "$0.00" not in notification.email_text()


def test_metrics_that_could_not_be_read_make_would_have_stopped_unknown_not_zero() -> None:
    unread = totals.compute(WEEKS_STOPS, None, since=WEEK.since, until=WEEK.until - timedelta(microseconds=1))
    notification = note(unread, warnings=["refused"])
    week = notification.document()["digest"]
    assert week["would_stop"] is None
    assert week["outcomes"] is None
    assert dict(digest.facts(week))["Would have stopped"] == "unknown (the guard's metrics could not be read)"
    assert week["warnings"] == ["refused"]
    assert "Warning: refused" in notification.email_text()


def test_many_rules_and_prefixes_name_the_top_five_and_count_the_rest() -> None:
    stops = [
        stop(f"team{n}-run-{k}", WEEK.until - DAY, rule=f"guard-{n}", reason=f"metric_guards.guard-{n}: x -> stop")
        for n in range(8)
        for k in range(8 - n)  # guard-0 stops 8 jobs, guard-7 one
    ]
    week = note(week_totals(stops)).document()["digest"]
    assert TOP == 5
    assert [g["name"] for g in week["rules"]] == [f"guard-{n}" for n in range(5)]  # most stops first
    assert (week["rules_total"], week["prefixes_total"]) == (8, 8)
    [(_, rules), (_, prefixes)] = digest.groups(week)
    assert rules[0] == "guard-0 (metric_guards): 8 stops, $800.00"
    assert rules[-1] == "... 3 more (training-guard report lists them all)"
    assert len(rules) == len(prefixes) == TOP + 1


def test_every_channel_says_the_same_totals() -> None:
    notification = note(week_totals(WEEKS_STOPS), dry_run=True)
    body = json.loads(sns_message(notification))
    assert json.loads(body["sqs"]) == notification.document()
    email = body["email"]
    q_developer = json.loads(body["https"])
    _, blocks = slack_messages.render(notification.document())
    slack = json.dumps(blocks, ensure_ascii=False)
    for words in ("up to $200.75 at list price, 1 of 3 unknown", "VanishingGradient (rules): 2 stops, $200.75"):
        assert words in email
        assert words in q_developer["content"]["description"]
        assert words in slack
    assert email.startswith("Training Guard weekly digest, 2026-W49\n2026-11-23 09:00 to 2026-11-30 09:00 UTC\n")
    assert "The guard is in dry-run mode: it stops nothing." in email
    assert "Job:" not in email
    assert "Job:" not in q_developer["content"]["description"]
    assert q_developer["content"]["title"] == ":information_source: " + notification.title
    assert q_developer["content"]["nextSteps"] == []
    assert q_developer["metadata"]["threadId"] == "training-guard/training-guard-digest-2026-W49"
    assert notification.subject() == "Training Guard: Weekly digest 2026-W49: 3 jobs stopped, up to $200.75 avoided"
    assert message_attributes(notification)["kind"] == {"DataType": "String", "StringValue": "digest"}
    assert len(sns_message(notification).encode()) < SNS_MAX_MESSAGE_BYTES // 10


def test_the_kind_is_spelled_once() -> None:
    assert Notice.DIGEST.value == slack_messages.DIGEST_KIND == contract.DIGEST_KIND == "digest"


# --- Slack -----------------------------------------------------------------------------------------------------------


def test_the_slack_notifier_renders_a_digest_as_a_block_message_to_the_default_webhook() -> None:
    """Through the notifier's own delivery (chat.ChatDelivery), as the chat queue hands it the SNS message."""
    stops = [*WEEKS_STOPS, stop("x-1", WEEK.until - DAY, rule="<!channel> & co", reason="rules.actions.x = stop")]
    notification = note(week_totals(stops))
    body = json.loads(sns_message(notification))["sqs"]
    slack = GuardConfig.from_dict(
        {
            "slack": {
                "webhooks": {"default": {}, "on-call": {}},
                "default": "default",
                "by_severity": {"critical": "on-call"},
            }
        }
    ).slack
    sent: list[tuple[str, str, list[dict[str, Any]]]] = []

    class Sender:
        def send(self, url: str, text: str, blocks: list[dict[str, Any]]) -> Any:
            sent.append((url, text, blocks))
            return type("Delivery", (), {"ok": True})()

    class Urls:
        def url(self, webhook: str) -> str:
            return f"https://hooks.slack.example/{webhook}"

    ledger = FakeLedger()
    chat = ChatDelivery(slack, Urls(), Sender(), ledger, parker=None, ttl_seconds=60)  # type: ignore[arg-type]
    assert chat.deliver(body, now=NOW).delivered == ["default"]  # an info notification: routed as one
    assert chat.deliver(body, now=NOW).skipped == ["default"]  # redelivered: sent once
    assert delivery_key("digest#2026-W49", "default") in ledger.items
    [(url, text, blocks)] = sent
    assert url == "https://hooks.slack.example/default"
    assert text.startswith("📊 Weekly digest 2026-W49: 4 jobs stopped, up to $300.75 avoided: ")
    assert [b["type"] for b in blocks] == ["header", "section", "section", "section", "section", "divider", "context"]
    assert blocks[0]["text"]["text"] == "📊 Weekly digest 2026-W49: 4 jobs stopped, up to $300.75 avoided"
    assert blocks[1]["text"]["text"] == "*2026-11-23 09:00 to 2026-11-30 09:00 UTC*"
    assert [f["text"] for f in blocks[2]["fields"]][:2] == [
        "*Stopped*\n4 jobs",
        "*Would have stopped*\n0 (not stopped: dry run, or the job's tags)",
    ]
    rules = blocks[3]["text"]["text"]
    assert rules.startswith("*Top rules and guards*\n• VanishingGradient (rules): 2 stops, $200.75\n")
    assert "&lt;!channel&gt; &amp; co (rules): 1 stop, $100.00" in rules  # shown, never acted on
    assert "<!channel>" not in json.dumps(blocks)
    assert "Training Guard · digest · account 123456789012 · region eu-west-1" in json.dumps(blocks, ensure_ascii=False)


def test_a_digest_document_without_its_numbers_is_refused() -> None:
    doc = note(week_totals([])).document()
    del doc["digest"]
    with pytest.raises(slack_messages.NotADocument, match="no 'digest' object"):
        slack_messages.render(doc)


def test_the_notifier_still_loads_neither_the_policy_nor_the_totals() -> None:
    """slack_messages reads the digest's words from digest.py, which imports the totals only where it computes them."""
    loaded = loaded_after_import(
        "slack_notifier", also=("training_guard.domain.policy", "training_guard.domain.totals")
    )
    assert loaded == set()
    assert loaded_after_import("digest") == set()  # nor does the digest's function load slack_sdk or pydantic


# --- once a week ---------------------------------------------------------------------------------------------------


@dataclass
class Reads:
    stops: list[StopEntry] = field(default_factory=lambda: list(WEEKS_STOPS))
    metrics_error: BaseException | None = None
    calls: list[str] = field(default_factory=list)

    def read_stops(self, since: datetime) -> list[StopEntry]:
        self.calls.append(f"stops since {since.isoformat()}")
        return self.stops

    def read_metrics(self, since: datetime, until: datetime) -> dict[str, list[tuple[datetime, float]]]:
        self.calls.append(f"metrics {since.isoformat()} to {until.isoformat()}")
        if self.metrics_error is not None:
            raise self.metrics_error
        return {"Outcome_would_stop": [(WEEK.until - DAY, 1.0)]}


def sender(ledger: FakeLedger, publisher: FakePublisher, reads: Reads) -> WeeklyDigest:
    return WeeklyDigest(
        marker=ledger,
        publisher=publisher,
        read_stops=reads.read_stops,
        read_metrics=reads.read_metrics,
        marker_ttl_seconds=MARKER_TTL,
        lease_seconds=310,
    )


def send(weekly: WeeklyDigest, scheduled: datetime = SCHEDULED, now: datetime = NOW) -> DigestReceipt:
    return weekly.send(scheduled, now=now, account="123456789012", region="eu-west-1")


def test_the_week_is_sent_once_whatever_fires_again_in_it() -> None:
    ledger, publisher, reads = FakeLedger(), FakePublisher(), Reads()
    weekly = sender(ledger, publisher, reads)
    first = send(weekly)
    again = send(weekly, now=NOW + timedelta(minutes=1))  # a duplicate delivery of the same event
    moved = send(weekly, scheduled=datetime(2026, 12, 3, 15, tzinfo=UTC))  # the schedule changed mid-week
    assert (first.sent, first.week, first.stops, first.would_stop) == (True, "2026-W49", 3, 1)
    assert (again.sent, again.skipped) == (False, "already sent this week")
    assert (moved.sent, moved.skipped) == (False, "already sent this week")
    [published] = publisher.published
    assert published.kind is Notice.DIGEST
    assert published.outcome is Outcome.NOTIFIED
    assert ledger.items["digest#2026-W49"] == {
        "state": "done",
        "outcome": "sent",
        "expires_at": NOW.timestamp() + MARKER_TTL,
    }
    # read once, for exactly the week: the stops from its start, the metrics to the instant before its end
    assert reads.calls == [
        "stops since 2026-11-23T09:00:00+00:00",
        "metrics 2026-11-23T09:00:00+00:00 to 2026-11-30T08:59:59.999999+00:00",
    ]
    assert send(weekly, scheduled=SCHEDULED + timedelta(days=7)).sent  # the next week is its own


def test_a_digest_being_sent_by_another_invocation_is_left_to_it_unread() -> None:
    ledger, publisher, reads = FakeLedger(), FakePublisher(), Reads()
    assert ledger.claim("digest#2026-W49", now=NOW, lease_seconds=300) is Claim.GRANTED  # the other invocation
    receipt = send(sender(ledger, publisher, reads))
    assert (receipt.sent, receipt.skipped) == (False, "being sent by another invocation")
    assert (publisher.published, reads.calls) == ([], [])


def test_a_failed_publish_releases_the_week_so_that_the_retry_sends_it() -> None:
    ledger, reads = FakeLedger(), Reads()
    failing = FakePublisher(fail=ActionFailed("sns:Publish to topic", RuntimeError("throttled")))
    with pytest.raises(ActionFailed, match="sns:Publish"):
        send(sender(ledger, failing, reads))
    assert "digest#2026-W49" not in ledger.items  # released, not left busy for its lease
    publisher = FakePublisher()
    retry = send(sender(ledger, publisher, reads), now=NOW + timedelta(minutes=1))
    assert retry.sent
    assert len(publisher.published) == 1


def test_a_failed_scan_sends_nothing_and_releases_the_week() -> None:
    ledger, publisher = FakeLedger(), FakePublisher()

    class Refused(Reads):
        def read_stops(self, since: datetime) -> list[StopEntry]:
            raise ActionFailed("dynamodb:Scan of t", RuntimeError("AccessDenied"))

    with pytest.raises(ActionFailed, match="Scan"):
        send(sender(ledger, publisher, Refused()))
    assert (publisher.published, ledger.items) == ([], {})


def test_unreadable_metrics_still_send_the_stops_with_would_have_stopped_unknown() -> None:
    ledger, publisher = FakeLedger(), FakePublisher()
    reads = Reads(metrics_error=ActionFailed("cloudwatch:GetMetricData of the guard's metrics", RuntimeError("denied")))
    receipt = send(sender(ledger, publisher, reads))
    assert (receipt.sent, receipt.stops, receipt.would_stop) == (True, 3, None)
    assert receipt.warnings == [
        "cloudwatch:GetMetricData of the guard's metrics failed: denied: would-have-stopped and the other outcomes "
        "are unknown"
    ]
    [published] = publisher.published
    assert published.document()["digest"]["warnings"] == receipt.warnings
