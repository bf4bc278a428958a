"""Snooze, exempt, mute: one notion of a mute, records with an expiry that the policy reads. Pure.

A mute silences one rule for one job, or exempts the job, until it expires or the job ends; all of a job's mutes
are one state-table item (docs/design/exactly-once.md), their expiry checked at every read."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from training_guard.config.frozen import frozen
from training_guard.config.model import MAX_DAYS_AFTER_TRAINING, MAX_TRAINING_DAYS
from training_guard.domain.accounts import scoped
from training_guard.domain.job_names import JOB_NAME, RULE_NAME_MAX

ALL_RULES = "*"  # the rule of an exemption: the whole job
SNOOZE_SECONDS = 3600  # the Slack button "Snooze 1 h" (issue 14)
MIN_MUTE_SECONDS = 60
# A job runs at most this long, counting the upload after training: a mute has nothing left to silence after it.
MAX_MUTE_DAYS = MAX_TRAINING_DAYS + MAX_DAYS_AFTER_TRAINING
# The item outlives its longest mute by a day; every write sets it again, so the newest write decides.
RECORD_TTL_SECONDS = (MAX_MUTE_DAYS + 1) * 86400
KEY_PREFIX = "mutes#"
_DURATION = r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?"  # compiled by `re` on first use


class Effect(StrEnum):
    SILENCE = "silence"
    EXEMPT = "exempt"


class MuteError(ValueError):
    """A mute that cannot be made: the message names the input and what it must be."""


@frozen
class Mute:
    effect: Effect
    rule: str  # ALL_RULES for an exemption
    by: str  # who made it: "slack:U0123ABC" or "cli:<the caller's ARN>"
    at: datetime
    until: datetime | None = None  # None: until the job ends

    @property
    def key(self) -> str:
        """The mute's name within its job's item: one mute per effect and rule, a new one replaces it."""
        return f"{self.effect.value}:{self.rule}"

    def active(self, now: datetime, *, job_running: bool = True) -> bool:
        return job_running and (self.until is None or now < self.until)

    def describe(self) -> str:
        """The policy's words for it, which go into messages, tags and the audit record as the reason."""
        what = "the job is exempted" if self.effect is Effect.EXEMPT else f"rule {self.rule} is muted for this job"
        until = "until the job ends" if self.until is None else f"until {_when(self.until)}"
        return f"{what} by {self.by} {until} (set {_when(self.at)})"


@frozen
class Mutes:
    entries: tuple[Mute, ...] = ()

    def silencing(self, rule: str, now: datetime, *, job_running: bool = True) -> Mute | None:
        return next(
            (
                m
                for m in self.entries
                if m.effect is Effect.SILENCE and m.rule == rule and m.active(now, job_running=job_running)
            ),
            None,
        )

    def exemption(self, now: datetime, *, job_running: bool = True) -> Mute | None:
        return next(
            (m for m in self.entries if m.effect is Effect.EXEMPT and m.active(now, job_running=job_running)),
            None,
        )

    def active(self, now: datetime, *, job_running: bool = True) -> Mutes:
        return Mutes(tuple(m for m in self.entries if m.active(now, job_running=job_running)))


def silence(rule: str, *, by: str, at: datetime, seconds: int | None) -> Mute:
    name = rule.strip()
    if not name or name == ALL_RULES or len(name) > RULE_NAME_MAX:
        raise MuteError(f"rule {rule!r}: name one rule (1 to {RULE_NAME_MAX} characters), or exempt the whole job")
    return Mute(Effect.SILENCE, name, by, at, _until(at, seconds))


def exempt(*, by: str, at: datetime, seconds: int | None = None) -> Mute:
    return Mute(Effect.EXEMPT, ALL_RULES, by, at, _until(at, seconds))


def check_job(job: str) -> str:
    if not JOB_NAME.fullmatch(job):
        raise MuteError(f"job {job!r}: a training job name is 1 to 63 letters, digits and hyphens")
    return job


def parse_duration(text: str) -> int:
    """`90s`, `30m`, `2h`, `1d`, `1h30m` -> seconds, between MIN_MUTE_SECONDS and MAX_MUTE_DAYS."""
    cleaned = text.strip().lower()
    match = re.fullmatch(_DURATION, cleaned)
    if not cleaned or match is None or not any(match.groups()):
        raise MuteError(f"duration {text!r}: write it like 90m, 2h, 1d or 1h30m")
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if not MIN_MUTE_SECONDS <= total <= MAX_MUTE_DAYS * 86400:
        raise MuteError(
            f"duration {text!r}: at least {MIN_MUTE_SECONDS // 60} minute and at most {MAX_MUTE_DAYS} days "
            "(a training job lives no longer)"
        )
    return total


def mutes_key(job: str, account: str | None = None) -> str:
    return f"{KEY_PREFIX}{scoped(account, job) if account else job}"


def _until(at: datetime, seconds: int | None) -> datetime | None:
    if seconds is None:
        return None
    if not MIN_MUTE_SECONDS <= seconds <= MAX_MUTE_DAYS * 86400:
        raise MuteError(f"{seconds} s: a mute lasts at least {MIN_MUTE_SECONDS} s and at most {MAX_MUTE_DAYS} days")
    return at + timedelta(seconds=seconds)


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
