"""React to one training-job event: decide, act exactly once per transition, notify.

The ports below are implemented by `training_guard.adapters` (AWS) and by fakes in tests.
Ordering is what makes the reaction exactly-once *and* loss-free:

1. claim the transition key (a lease; a duplicate finds it taken and does nothing);
2. act (stop, attribute) and publish one notification;
3. mark the key done. If anything in 2 raises, the claim is released and the error propagates,
   so Lambda's retries and the dead-letter queue see it and no half-done transition is marked done.

A stop is additionally guarded per job by the audit record (one record per stopped job), so two
rules finding issues at once cause one `StopTrainingJob` call, not two.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol

from training_guard import contract, messages, policy
from training_guard.config import GuardConfig
from training_guard.events import STOPPED, JobEvent, TrainingJob
from training_guard.messages import Notification, Outcome
from training_guard.policy import Decision, GuardStop, Plan

# A claim outlives the function's timeout so that a crashed attempt's retry can take it over.
DEFAULT_LEASE_SECONDS = 120
AUDIT_RETENTION_SECONDS = 400 * 24 * 3600  # stop records are kept a little over a year
_TAG_VALUE_PUNCTUATION = frozenset("_.:/=+-@ ")


class JobsPort(Protocol):
    def describe(self, name: str) -> TrainingJob | None: ...

    def stop(self, name: str) -> bool:
        """Stop a running job; False when it had already left InProgress (not an error)."""
        ...

    def tag(self, arn: str, tags: Mapping[str, str]) -> None: ...


@dataclass(frozen=True)
class StopRecord:
    job: str
    rule: str
    reason: str
    at: datetime
    event_id: str


@dataclass(frozen=True)
class StopClaim:
    granted: bool
    # The record that was there before the claim: our own earlier attempt (granted) or another
    # rule's stop (not granted); None when the claim created the record.
    previous: StopRecord | None


class LedgerPort(Protocol):
    def claim(self, key: str, *, now: datetime, lease_seconds: int) -> bool: ...

    def complete(self, key: str, *, now: datetime, ttl_seconds: int, outcome: str) -> None: ...

    def release(self, key: str) -> None: ...

    def claim_stop(self, record: StopRecord, *, ttl_seconds: int) -> StopClaim: ...

    def get_stop(self, job: str) -> StopRecord | None: ...

    def drop_stop(self, job: str) -> None: ...


class PublisherPort(Protocol):
    def publish(self, notification: Notification) -> None: ...


@dataclass
class Receipt:
    """What one event caused; returned by the handler and printed by `training-guard simulate`."""

    job: str
    event_id: str
    stopped: bool = False
    notifications: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    duplicates: int = 0
    ignored: str | None = None
    described: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "job": self.job,
            "event_id": self.event_id,
            "stopped": self.stopped,
            "notifications": self.notifications,
            "outcomes": self.outcomes,
            "duplicates": self.duplicates,
            "ignored": self.ignored,
            "described": self.described,
        }


class Responder:
    def __init__(
        self,
        config: GuardConfig,
        jobs: JobsPort,
        ledger: LedgerPort,
        publisher: PublisherPort,
        *,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self.config = config
        self.jobs = jobs
        self.ledger = ledger
        self.publisher = publisher
        self.lease_seconds = lease_seconds

    def handle(self, event: JobEvent, *, now: datetime) -> Receipt:
        job = event.job
        receipt = Receipt(job=job.name, event_id=event.event_id)
        not_selected = policy.selection_reason(job.name, self.config)
        if not_selected:
            receipt.ignored = not_selected
            return receipt
        if job.rules is None and job.running:
            # The event did not carry rule statuses: ask SageMaker so no finding is missed.
            job = self._describe(job)
            receipt.described = True
        guard_stop = self._guard_stop(job)
        for decision in policy.decide(job, self.config, now=now, guard_stop=guard_stop):
            self._react(event, job, decision, receipt, now)
        return receipt

    def _describe(self, job: TrainingJob) -> TrainingJob:
        described = self.jobs.describe(job.name)
        if described is None:
            return job
        # DescribeTrainingJob returns no tags; the event's are the ones the policy needs.
        return _replace_tags(described, job.tags)

    def _guard_stop(self, job: TrainingJob) -> GuardStop | None:
        if job.status != STOPPED or not self.config.notifications.stopped:
            return None
        record = self.ledger.get_stop(job.name)
        return GuardStop(record.rule, record.reason, record.at) if record else None

    def _react(self, event: JobEvent, job: TrainingJob, decision: Decision, receipt: Receipt, now: datetime) -> None:
        if not self.ledger.claim(decision.key, now=now, lease_seconds=self.lease_seconds):
            receipt.duplicates += 1
            return
        try:
            outcome = self._act(event, job, decision, now)
            note = messages.build(event, job, decision, outcome, now=now, dry_run=self.config.dry_run)
            self.publisher.publish(note)
        except BaseException:
            self.ledger.release(decision.key)
            raise
        self.ledger.complete(
            decision.key, now=now, ttl_seconds=self.config.dedup_ttl_days * 86400, outcome=outcome.value
        )
        receipt.stopped = receipt.stopped or outcome is Outcome.STOPPED
        receipt.notifications.append(decision.kind.value)
        receipt.outcomes.append(outcome.value)

    def _act(self, event: JobEvent, job: TrainingJob, decision: Decision, now: datetime) -> Outcome:
        if decision.plan is Plan.WOULD_STOP:
            return Outcome.WOULD_STOP
        if decision.plan is Plan.DEFER:
            return Outcome.DEFERRED
        if decision.plan is Plan.NOTIFY:
            return Outcome.NOTIFIED
        return self._stop(event, job, decision, now)

    def _stop(self, event: JobEvent, job: TrainingJob, decision: Decision, now: datetime) -> Outcome:
        rule = decision.rule.name if decision.rule else "?"
        record = StopRecord(job=job.name, rule=rule, reason=decision.reason, at=now, event_id=event.event_id)
        claim = self.ledger.claim_stop(record, ttl_seconds=AUDIT_RETENTION_SECONDS)
        if not claim.granted:
            return Outcome.ALREADY_STOPPING
        try:
            stopped = self.jobs.stop(job.name)
        except BaseException:
            self.ledger.drop_stop(job.name)
            raise
        if not stopped and claim.previous is None:
            # The job left InProgress before we asked (a person, SageMaker, or it finished).
            self.ledger.drop_stop(job.name)
            return Outcome.ALREADY_ENDED
        # stopped now, or by our own earlier attempt whose later steps failed and are retried here
        if job.arn:
            self.jobs.tag(job.arn, attribution_tags(record))
        return Outcome.STOPPED


def attribution_tags(record: StopRecord) -> dict[str, str]:
    return {
        contract.TAG_STOPPED_BY: contract.STOPPED_BY_VALUE,
        contract.TAG_STOP_RULE: tag_value(record.rule),
        contract.TAG_STOP_REASON: tag_value(record.reason),
        contract.TAG_STOPPED_AT: record.at.isoformat(timespec="seconds"),
    }


def tag_value(text: str) -> str:
    """Text made legal as a SageMaker tag value: letters, numbers, spaces and _.:/=+-@ only."""
    cleaned = "".join(c if c.isalnum() or c in _TAG_VALUE_PUNCTUATION else " " for c in text)
    return " ".join(cleaned.split())[: contract.TAG_VALUE_MAX_CHARS]


def _replace_tags(job: TrainingJob, tags: Mapping[str, str]) -> TrainingJob:
    return replace(job, tags=dict(tags) or dict(job.tags))
