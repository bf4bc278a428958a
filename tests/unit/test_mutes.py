"""One notion of a mute: silence a rule or exempt a job, for a while or until the job ends."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.fakes_slack_app import FakeMutes
from tests.helpers import NOW
from training_guard.domain.mutes import (
    ALL_RULES,
    MAX_MUTE_DAYS,
    RECORD_TTL_SECONDS,
    SNOOZE_SECONDS,
    Effect,
    Mute,
    MuteError,
    Mutes,
    check_job,
    exempt,
    mutes_key,
    parse_duration,
    silence,
)

BY = "slack:U0ALICE"


def test_a_snooze_silences_its_rule_for_an_hour_and_no_other_rule() -> None:
    mutes = Mutes((silence("LossNotDecreasing", by=BY, at=NOW, seconds=SNOOZE_SECONDS),))
    assert mutes.silencing("LossNotDecreasing", NOW + timedelta(minutes=59)) is not None
    assert mutes.silencing("LossNotDecreasing", NOW + timedelta(hours=1)) is None  # the hour is up
    assert mutes.silencing("VanishingGradient", NOW) is None
    assert mutes.exemption(NOW) is None


def test_a_mute_until_the_job_ends_holds_while_it_runs_and_ends_with_it() -> None:
    mutes = Mutes((silence("ExplodingTensor", by=BY, at=NOW, seconds=None),))
    assert mutes.silencing("ExplodingTensor", NOW + timedelta(days=20)) is not None
    assert mutes.silencing("ExplodingTensor", NOW, job_running=False) is None


def test_an_exemption_covers_the_whole_job_but_silences_nothing() -> None:
    mutes = Mutes((exempt(by=BY, at=NOW, seconds=7200),))
    found = mutes.exemption(NOW + timedelta(hours=1))
    assert found is not None
    assert found.rule == ALL_RULES
    assert mutes.exemption(NOW + timedelta(hours=2)) is None
    assert mutes.silencing("LossNotDecreasing", NOW) is None


def test_active_keeps_only_what_holds_now() -> None:
    short = silence("A", by=BY, at=NOW, seconds=60)
    long = silence("B", by=BY, at=NOW, seconds=3600)
    assert Mutes((short, long)).active(NOW + timedelta(minutes=5)) == Mutes((long,))


def test_the_reason_names_who_and_until_when_in_utc() -> None:
    snooze = silence("LossNotDecreasing", by=BY, at=NOW, seconds=SNOOZE_SECONDS)
    assert snooze.describe() == (
        "rule LossNotDecreasing is muted for this job by slack:U0ALICE until 2026-11-30 04:00 UTC "
        "(set 2026-11-30 03:00 UTC)"
    )
    assert exempt(by="cli:arn:aws:iam::111122223333:user/bob", at=NOW).describe() == (
        "the job is exempted by cli:arn:aws:iam::111122223333:user/bob until the job ends (set 2026-11-30 03:00 UTC)"
    )


def test_a_new_mute_of_the_same_rule_replaces_the_old_one() -> None:
    store = FakeMutes()
    store.put("mnist-1", silence("A", by=BY, at=NOW, seconds=60), now=NOW)
    store.put("mnist-1", silence("A", by="slack:U0BOB", at=NOW, seconds=None), now=NOW)
    [only] = store.read("mnist-1").entries
    assert (only.by, only.until) == ("slack:U0BOB", None)
    assert store.reads == 1


def test_a_members_job_is_another_job() -> None:
    store = FakeMutes()
    store.put("mnist-1", exempt(by=BY, at=NOW), account="111122223333", now=NOW)
    assert store.read("mnist-1").entries == ()
    assert store.read("mnist-1", account="111122223333").exemption(NOW) is not None
    assert mutes_key("mnist-1") == "mutes#mnist-1"
    assert mutes_key("mnist-1", "111122223333") == "mutes#111122223333/mnist-1"


def test_the_record_outlives_the_longest_mute() -> None:
    longest = silence("A", by=BY, at=NOW, seconds=MAX_MUTE_DAYS * 86400)
    assert longest.until is not None
    assert NOW.timestamp() + RECORD_TTL_SECONDS > longest.until.timestamp()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400), ("1h30m", 5400), (" 2H ", 7200), ("30d", 30 * 86400)],
)
def test_durations_read_as_people_write_them(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2", "h", "2 hours", "-1h", "1.5h", "30s", "31d", "0m", "1h2d"])
def test_durations_that_are_not_one_or_not_within_a_jobs_life_are_refused(text: str) -> None:
    with pytest.raises(MuteError, match="duration"):
        parse_duration(text)


def test_a_silence_names_one_rule() -> None:
    for bad in ("", "  ", ALL_RULES, "x" * 257):
        with pytest.raises(MuteError, match="rule"):
            silence(bad, by=BY, at=NOW, seconds=60)
    assert silence(" LossNotDecreasing ", by=BY, at=NOW, seconds=60).rule == "LossNotDecreasing"


def test_a_mute_longer_than_a_job_lives_is_refused() -> None:
    with pytest.raises(MuteError):
        exempt(by=BY, at=NOW, seconds=MAX_MUTE_DAYS * 86400 + 1)
    with pytest.raises(MuteError):
        silence("A", by=BY, at=NOW, seconds=59)


@pytest.mark.parametrize("job", ["mnist-1", "a", "A" * 63, "pytorch-mnist-lr01-2026-11-30-02-10-00"])
def test_job_names_as_sagemaker_allows_them(job: str) -> None:
    assert check_job(job) == job


@pytest.mark.parametrize("job", ["", "-mnist", "mnist_1", "A" * 64, "111122223333/mnist-1", "mnist 1"])
def test_job_names_sagemaker_would_refuse_are_refused(job: str) -> None:
    with pytest.raises(MuteError, match="training job name"):
        check_job(job)


def test_keys_tell_the_effect_and_the_rule() -> None:
    assert silence("A", by=BY, at=NOW, seconds=60).key == "silence:A"
    assert exempt(by=BY, at=NOW).key == "exempt:*"
    assert Mute(Effect.EXEMPT, ALL_RULES, BY, NOW).active(NOW) is True
