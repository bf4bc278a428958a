"""React to one training-job event: decide, act exactly once per transition, notify.

The order of work, the stop and what folds into it: docs/design/responder.md."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

from training_guard import contract
from training_guard.config.frozen import frozen
from training_guard.config.model import Action, GuardConfig
from training_guard.domain import metric_guards, policy, pricing
from training_guard.domain.accounts import is_member
from training_guard.domain.errors import ActionFailed, GuardError, TransitionBusy
from training_guard.domain.events import (
    COMPLETED,
    FAILED,
    ISSUES_FOUND,
    RULE_ERROR,
    STOPPED,
    STOPPING,
    Finding,
    JobEvent,
    TrainingJob,
)
from training_guard.domain.leases import DEFAULT_LEASE_SECONDS, LEASE_MARGIN_SECONDS, lease_for
from training_guard.domain.metric_guards import AlarmObservation, JobAlarmSpec
from training_guard.domain.mutes import Mutes
from training_guard.domain.outcome import Outcome
from training_guard.domain.policy import NO_MUTES, Decision, GuardStop, Plan
from training_guard.domain.pricing import Spend
from training_guard.domain.values import cents
from training_guard.render import messages
from training_guard.services.once import Held, once
from training_guard.services.ports import (
    AlarmsPort,
    CardPort,
    Claim,
    JobsPort,
    LedgerPort,
    MeterPort,
    PricesPort,
    PublisherPort,
    StopClaim,
    StopRecord,
    StopSpend,
)

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "LEASE_MARGIN_SECONDS",
    "AlarmsPort",
    "JobsPort",
    "LedgerPort",
    "PublisherPort",
    "Receipt",
    "Responder",
    "StopClaim",
    "StopRecord",
    "lease_for",
]

_ENDED = (COMPLETED, FAILED, STOPPED)

# A busy transition is most often a duplicate delivered at the same moment, whose holder takes < 1 s.
BUSY_WAIT_SECONDS = 3.0
BUSY_POLL_SECONDS = 0.25
AUDIT_RETENTION_SECONDS = 400 * 24 * 3600  # stop records are kept a little over a year
_TAG_VALUE_PUNCTUATION = frozenset("_.:/=+-@ ")
FOLDED = "folded"


class MemberAccessPort(Protocol):
    def responder_for(self, base: Responder, account: str) -> Responder: ...


def responder_in(guard: Responder, own: str | None, account: str | None, members: MemberAccessPort | None) -> Responder:
    """`guard` in its own account, or acting through the member's role where the accepted event happened."""
    if account is None or not is_member(guard.config, own, account):  # no organization, or the guard's own account
        return guard
    if members is None:
        raise ActionFailed(f"act in member account {account}", ValueError("no member access was given"))
    return members.responder_for(guard, account)


class MutesPort(Protocol):
    def read(self, job: str, account: str | None = None) -> Mutes: ...


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
    rejected: str | None = None
    described: bool = False
    alarms_created: list[str] = field(default_factory=list)
    alarms_deleted: list[str] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)  # acted on and announced, but not recorded
    folded: list[str] = field(default_factory=list)  # folded into the guard's stop, not announced
    spend: dict[str, object] | None = None
    price_problems: list[str] = field(default_factory=list)
    card_problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "job": self.job,
            "event_id": self.event_id,
            "stopped": self.stopped,
            "notifications": self.notifications,
            "outcomes": self.outcomes,
            "duplicates": self.duplicates,
            "ignored": self.ignored,
            "rejected": self.rejected,
            "described": self.described,
            "alarms_created": self.alarms_created,
            "alarms_deleted": self.alarms_deleted,
            "unrecorded": self.unrecorded,
            "folded": self.folded,
            "spend": self.spend,
            "price_problems": self.price_problems,
            "card_problems": self.card_problems,
        }


@frozen
class EventStamp:
    """What a finding arrived with: the event (or delivery) it came from, for the audit record and the dedup."""

    event_id: str
    account: str | None
    region: str | None
    time: datetime | None
    source: str = contract.CLOUDWATCH_EVENT_SOURCE
    detail_type: str = contract.ALARM_STATE_CHANGE


class Responder:
    def __init__(
        self,
        config: GuardConfig,
        jobs: JobsPort,
        ledger: LedgerPort,
        publisher: PublisherPort,
        *,
        alarms: AlarmsPort | None = None,
        prices: PricesPort | None = None,
        meter: MeterPort | None = None,
        mutes: MutesPort | None = None,
        cards: CardPort | None = None,
        busy_wait_seconds: float = BUSY_WAIT_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        account_scope: str | None = None,
        mutes_memo: dict[tuple[str | None, str], Mutes] | None = None,
    ) -> None:
        """A port left None does nothing: no price (spend unknown), no metric, no mute in force, no Slack card."""
        self.config = config
        self.cards = cards
        self.jobs = jobs
        self.ledger = ledger
        self.publisher = publisher
        self.alarms = alarms
        self.prices = prices
        self.meter = meter
        self.mutes = mutes
        self.account_scope = account_scope
        self.mutes_memo = mutes_memo
        self.busy_wait_seconds = busy_wait_seconds
        self.sleep = sleep
        self.lease_seconds = lease_seconds

    def acting(
        self,
        *,
        lease_seconds: int | None = None,
        account_scope: str | None = None,
        jobs: JobsPort | None = None,
        alarms: AlarmsPort | None = None,
        ledger: LedgerPort | None = None,
        mutes_memo: dict[tuple[str | None, str], Mutes] | None = None,
    ) -> Responder:
        """A responder for one invocation or one member account: nothing an invocation sets outlives it."""
        return Responder(
            self.config,
            jobs or self.jobs,
            ledger or self.ledger,
            self.publisher,
            alarms=alarms or self.alarms,
            prices=self.prices,
            meter=self.meter,
            mutes=self.mutes,
            cards=self.cards,
            busy_wait_seconds=self.busy_wait_seconds,
            sleep=self.sleep,
            lease_seconds=self.lease_seconds if lease_seconds is None else lease_seconds,
            account_scope=account_scope or self.account_scope,
            mutes_memo=self.mutes_memo if mutes_memo is None else mutes_memo,
        )

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
        if not job.tags_known and job.arn and self._needs_tags(job):
            # Exemptions, opt-ins and per-job guards live in tags: never decide on tags the event merely lacked.
            job = _replace_tags(job, self.jobs.tags(job.arn))
        guard_stop = self._guard_stop(job)
        findings = any(r.status in (ISSUES_FOUND, RULE_ERROR) for r in job.rules or ())

        def decide(mutes: Mutes) -> list[Decision]:
            return policy.decide(job, self.config, now=now, guard_stop=guard_stop, mutes=mutes)

        if findings:
            self._reactions(event, job, decide, receipt, now)
        else:
            for decision in decide(NO_MUTES):
                self._react(event, job, decision, receipt, now)
        if self.alarms is not None and self.config.per_job_alarms:
            self._keep_job_alarms(event, job, receipt, now)
        return receipt

    def handle_alarm(self, alarm: AlarmObservation, *, now: datetime) -> Receipt:
        receipt = Receipt(job=alarm.job or "", event_id=alarm.event_id)
        if alarm.state != "ALARM":
            receipt.ignored = f"alarm {alarm.alarm_name} is {alarm.state}"
            return receipt
        if not alarm.job:
            receipt.ignored = f"alarm {alarm.alarm_name} names no training job"
            return receipt
        job = self.jobs.describe(alarm.job)
        if job is None:
            receipt.ignored = f"training job {alarm.job} does not exist"
            return receipt
        if job.arn:
            job = _replace_tags(job, self.jobs.tags(job.arn))
        rule = self._alarm_rule(alarm, job)
        if isinstance(rule, str):
            receipt.ignored = rule
            return receipt
        finding, action, setting = rule
        stamp = EventStamp(alarm.event_id, alarm.account, alarm.region, alarm.time)
        return self._decide_finding(
            job, finding, action=action, setting=setting, kind=None, stamp=stamp, receipt=receipt, now=now
        )

    def handle_finding(
        self,
        job_name: str,
        finding: Finding,
        *,
        action: Action,
        setting: str,
        kind: policy.Kind,
        stamp: EventStamp,
        now: datetime,
        dry_run: bool = False,
    ) -> Receipt:
        """A finding about a job from outside an event (a log rule): the same policy and exactly-once stop."""
        receipt = Receipt(job=job_name, event_id=stamp.event_id)
        job = self.jobs.describe(job_name)
        if job is None:
            receipt.ignored = f"training job {job_name} does not exist"
            return receipt
        if job.arn:
            job = _replace_tags(job, self.jobs.tags(job.arn))
        return self._decide_finding(
            job,
            finding,
            action=action,
            setting=setting,
            kind=kind,
            stamp=stamp,
            receipt=receipt,
            now=now,
            dry_run=dry_run,
        )

    def _decide_finding(
        self,
        job: TrainingJob,
        finding: Finding,
        *,
        action: Action,
        setting: str,
        kind: policy.Kind | None,
        stamp: EventStamp,
        receipt: Receipt,
        now: datetime,
        dry_run: bool = False,
    ) -> Receipt:
        event = JobEvent(
            event_id=stamp.event_id,
            account=stamp.account,
            region=stamp.region,
            time=stamp.time,
            source=stamp.source,
            detail_type=stamp.detail_type,
            job=job,
        )
        guard_stop = self._guard_stop(job)

        def decide(mutes: Mutes) -> list[Decision]:
            return policy.decide_metric(
                job,
                finding,
                action,
                setting,
                self.config,
                now=now,
                guard_stop=guard_stop,
                mutes=mutes,
                kind=kind,
                dry_run=dry_run,
            )

        self._reactions(event, job, decide, receipt, now)
        return receipt

    def _reactions(
        self,
        event: JobEvent,
        job: TrainingJob,
        decide: Callable[[Mutes], list[Decision]],
        receipt: Receipt,
        now: datetime,
    ) -> None:
        """Act on the findings' decisions: the stop first, after one write (docs/design/responder.md)."""
        hopeful = decide(NO_MUTES)
        stop = next((d for d in hopeful if d.plan is Plan.STOP), None)
        if stop is not None and job.running:
            record = StopRecord(job=job.name, rule=_rule_of(stop), reason=stop.reason, at=now, event_id=event.event_id)
            if self.ledger.claim_first_stop(
                record,
                now=now,
                lease_seconds=self.lease_seconds,
                ttl_seconds=AUDIT_RETENTION_SECONDS,
                check_mutes=self.mutes is not None,
            ):
                for decision in hopeful:
                    self._react(event, job, decision, receipt, now, first_stop=record if decision is stop else None)
                return
        for decision in decide(self.mutes_of(job.name)):
            self._react(event, job, decision, receipt, now)

    def _alarm_rule(self, alarm: AlarmObservation, job: TrainingJob) -> tuple[Finding, Action, str] | str:
        if alarm.guard_name is not None:
            guard = self.config.metric_guard(alarm.guard_name)
            if guard is None:
                return f"no metric guard named {alarm.guard_name!r} in the configuration"
            if guard.job_prefix and not job.name.startswith(guard.job_prefix):
                return f"metric_guards.{guard.name}.job_prefix does not select {job.name}"
            if guard.job_tag and guard.job_tag not in job.tags:
                return f"metric_guards.{guard.name}.job_tag: the job has no tag {guard.job_tag}"
            finding = Finding(name=guard.name, source=policy.METRIC, status="ALARM", details=alarm.reason)
            return finding, guard.action, guard.describe()
        specs, _ = metric_guards.job_alarm_specs(job.name, job.tags)
        spec = next((s for s in specs if s.alarm_name == alarm.alarm_name), None)
        if spec is None:
            return f"alarm {alarm.alarm_name} matches no training-guard:alarm tag of {job.name}"
        finding = Finding(name=spec.metric, source=policy.METRIC, status="ALARM", details=alarm.reason)
        return finding, spec.action, spec.describe()

    def _keep_job_alarms(self, event: JobEvent, job: TrainingJob, receipt: Receipt, now: datetime) -> None:
        assert self.alarms is not None
        specs, problems = metric_guards.job_alarm_specs(job.name, job.tags)
        if job.running:
            if problems:
                self._react(event, job, policy.guard_tag_problems(job, problems), receipt, now)
            if specs:
                receipt.alarms_created = self._once(f"a#{job.name}#created", now, lambda: [self._put(s) for s in specs])
        elif job.status in _ENDED and specs:
            names = [s.alarm_name for s in specs]
            receipt.alarms_deleted = self._once(f"a#{job.name}#deleted", now, lambda: self._delete(names))

    def _put(self, spec: JobAlarmSpec) -> str:
        assert self.alarms is not None
        self.alarms.put_job_alarm(spec)
        return spec.alarm_name

    def _delete(self, names: list[str]) -> list[str]:
        assert self.alarms is not None
        self.alarms.delete_alarms(names)
        return names

    def _once(self, key: str, now: datetime, action: Callable[[], list[str]]) -> list[str]:
        with self._held(key, now, outcome="done") as held:
            return action() if held.granted else []

    def _held(
        self,
        key: str,
        now: datetime,
        *,
        outcome: str,
        keep_if_unrecorded: bool = False,
    ) -> AbstractContextManager[Held]:
        return once(
            self.ledger,
            key,
            now=now,
            lease_seconds=self.lease_seconds,
            ttl_seconds=self.config.dedup_ttl_days * 86400,
            outcome=outcome,
            acquire=lambda: self._claim(key, now),
            keep_if_unrecorded=keep_if_unrecorded,
        )

    def _needs_tags(self, job: TrainingJob) -> bool:
        """Whether a decision may turn on the job's tags: running with a finding, or with per-job alarms kept."""
        if not job.running:
            return False
        return any(r.status == ISSUES_FOUND for r in job.rules or ()) or (
            self.alarms is not None and self.config.per_job_alarms
        )

    def _describe(self, job: TrainingJob) -> TrainingJob:
        described = self.jobs.describe(job.name)
        if described is None:
            return job
        # DescribeTrainingJob returns no tags; the event's are the ones the policy needs.
        return replace(described, tags=dict(job.tags), tags_known=job.tags_known)

    def _guard_stop(self, job: TrainingJob) -> GuardStop | None:
        if job.status not in (STOPPING, STOPPED):
            return None
        record = self.ledger.get_stop(job.name)
        return GuardStop(record.rule, record.reason, record.at) if record else None

    def mutes_of(self, job: str) -> Mutes:
        """The job's mutes, read once per event, or once per sweep while `mutes_memo` is set."""
        if self.mutes is None:
            return NO_MUTES
        key = (self.account_scope, job)
        if self.mutes_memo is not None and key in self.mutes_memo:
            return self.mutes_memo[key]
        read = self.mutes.read(job, self.account_scope)
        if self.mutes_memo is not None:
            self.mutes_memo[key] = read
        return read

    def stop_requested(
        self,
        name: str,
        *,
        by: str,
        rule: str | None,
        request_id: str,
        region: str | None,
        now: datetime,
        account: str | None = None,
    ) -> str:
        """A person's Stop now, attributed to `by` (`slack:<user id>`) once; returns what happened, in words."""
        job = self.jobs.describe(name)
        if job is None:
            return f"nothing to stop: there is no training job {name}"
        if job.status == STOPPING:
            return f"nothing to do: {name} is already being stopped"
        if not job.running:
            return f"nothing to stop: {name} had already ended ({job.status})"
        if job.arn:
            job = _replace_tags(job, self.jobs.tags(job.arn))
        decision = policy.decide_stop_request(job, self.config, by=by, rule=rule)
        event = JobEvent(
            event_id=request_id,
            account=self.account_scope or account,  # a member's, else the guard's own (as an event would name it)
            region=region,
            time=now,
            source=policy.STOP_REQUEST,
            detail_type="Stop now",
            job=job,
        )
        receipt = Receipt(job=name, event_id=request_id)
        self._react(event, job, decision, receipt, now)
        if receipt.duplicates:
            return f"already asked: {by} pressed Stop now for {name} before"
        outcome = Outcome(receipt.outcomes[-1]) if receipt.outcomes else None
        return (
            {
                Outcome.STOPPED: f"stopped {name}",
                Outcome.ALREADY_ENDED: f"nothing to stop: {name} had already ended",
                Outcome.ALREADY_STOPPING: f"{name} is already being stopped (another click or a rule was first)",
                Outcome.WOULD_STOP: f"not stopped: {decision.reason}",
            }.get(outcome, f"{name}: {decision.reason}")
            if outcome
            else f"{name}: {decision.reason}"
        )

    def react(
        self,
        event: JobEvent,
        job: TrainingJob,
        decision: Decision,
        receipt: Receipt,
        now: datetime,
        *,
        spend: Spend | None = None,
    ) -> None:
        """Act on one of the sweeper's decisions exactly once; `spend`: as the caller priced it (a stop reprices)."""
        self._react(event, job, decision, receipt, now, known_spend=spend)

    def spend(self, event: JobEvent, job: TrainingJob, receipt: Receipt, now: datetime) -> Spend:
        return self._spend(event, job, receipt, now)

    def first_time(self, key: str, now: datetime) -> bool:
        """True the first time `key` is asked about, False ever after. Raises `TransitionBusy` as a claim does."""
        return bool(self._once(key, now, lambda: [key]))

    def _claim(self, key: str, now: datetime) -> Claim:
        """GRANTED or DONE. Raises `TransitionBusy` when another attempt still holds the key after a short wait."""
        waited = 0.0
        while True:
            claim = self.ledger.claim(key, now=now + timedelta(seconds=waited), lease_seconds=self.lease_seconds)
            if claim is not Claim.BUSY:
                return claim
            if waited >= self.busy_wait_seconds:
                raise TransitionBusy(key)
            self.sleep(BUSY_POLL_SECONDS)
            waited += BUSY_POLL_SECONDS

    def _react(
        self,
        event: JobEvent,
        job: TrainingJob,
        decision: Decision,
        receipt: Receipt,
        now: datetime,
        *,
        known_spend: Spend | None = None,
        first_stop: StopRecord | None = None,
    ) -> None:
        """`first_stop`: the stop's record, written already (`_reactions`): the stop comes before the claim."""
        if first_stop is None:
            self._announce(event, job, decision, receipt, now, known_spend=known_spend)
            return
        try:
            acted = self._stop(event, job, decision, receipt, now, first_stop)
            self._announce(event, job, decision, receipt, now, known_spend=known_spend, acted=acted)
        except BaseException:
            # A failure, not a death: the retry may take the stop over at once (the claim is released the same way).
            self.ledger.release_stop_lease(job.name)
            raise

    def _announce(
        self,
        event: JobEvent,
        job: TrainingJob,
        decision: Decision,
        receipt: Receipt,
        now: datetime,
        *,
        known_spend: Spend | None = None,
        acted: tuple[Outcome, Spend | None] | None = None,
    ) -> None:
        with self._held(decision.key, now, outcome="done", keep_if_unrecorded=True) as held:
            if not held.granted:
                receipt.duplicates += 1
                return
            outcome, spend = acted or self._act(event, job, decision, receipt, now)
            if outcome is Outcome.ALREADY_ENDED:
                job = self._as_it_ended(job)  # the state SageMaker refused the stop in, not the event's InProgress
            elif outcome is Outcome.STOPPED:
                # StopTrainingJob accepted: SageMaker shows the job Stopping now, not the event's InProgress.
                job = replace(job, status=STOPPING, secondary_status=STOPPING)
            # Asked after acting: the stop to fold into may have been confirmed a moment ago.
            folded = policy.folds_into_guard_stop(
                decision, is_the_stop=outcome is Outcome.STOPPED
            ) and self.ledger.fold(job.name, decision.key)
            if not folded:
                note = self._note(event, job, decision, outcome, receipt, now, spend or known_spend)
                self.publisher.publish(note)
                spend = note.spend
                receipt.spend = note.spend_document()
            held.outcome = FOLDED if folded else outcome.value
        if held.unrecorded is not None:
            # Raising would make Lambda's retry announce it again; the claim keeps its lease instead.
            receipt.unrecorded.append(decision.key)
        receipt.stopped = receipt.stopped or outcome is Outcome.STOPPED
        if outcome is Outcome.STOPPED and self.meter is not None and spend and spend.avoided_usd is not None:
            # Counted once the stop is announced: an attempt that fails before is retried and counted then.
            self.meter.spend_avoided(_rule_of(decision), spend.avoided_usd)
        if folded:
            receipt.folded.append(decision.key)
            if self.cards is not None and decision.kind in policy.FOLDED_ONTO_THE_CARD:
                self._show_on_card(
                    event, job, decision, outcome=outcome, receipt=receipt, now=now, spend=spend or known_spend
                )
            return
        receipt.notifications.append(decision.kind.value)
        receipt.outcomes.append(outcome.value)

    def _show_on_card(
        self,
        event: JobEvent,
        job: TrainingJob,
        decision: Decision,
        *,
        outcome: Outcome,
        receipt: Receipt,
        now: datetime,
        spend: Spend | None,
    ) -> None:
        """The job's end on its Slack card; a failure is reported, never raised (the transition is already done)."""
        assert self.cards is not None
        try:
            self.cards.update_card(self._note(event, job, decision, outcome, receipt, now, spend))
        except Exception as exc:  # noqa: BLE001 - the card is a view: no failure of it may cost what is already done
            receipt.card_problems.append(f"{decision.key}: {exc}")

    def _note(  # noqa: PLR0917 - the reaction's parts, as _react holds them
        self,
        event: JobEvent,
        job: TrainingJob,
        decision: Decision,
        outcome: Outcome,
        receipt: Receipt,
        now: datetime,
        spend: Spend | None,
    ) -> messages.Notification:
        spend = spend or self._spend(event, job, receipt, now)
        return messages.build(event, job, decision, outcome, now=now, dry_run=self.config.dry_run, spend=spend)

    def _act(
        self, event: JobEvent, job: TrainingJob, decision: Decision, receipt: Receipt, now: datetime
    ) -> tuple[Outcome, Spend | None]:
        if decision.plan is Plan.WOULD_STOP:
            return Outcome.WOULD_STOP, None
        if decision.plan is Plan.DEFER:
            return Outcome.DEFERRED, None
        if decision.plan is Plan.NOTIFY:
            return Outcome.NOTIFIED, None
        return self._stop(event, job, decision, receipt, now)

    def _spend(self, event: JobEvent, job: TrainingJob, receipt: Receipt, now: datetime) -> Spend:
        """Spend so far and what a stop avoids, at list price. Never raises: unknown spend, with why, instead."""
        if self.prices is None:
            return pricing.job_spend(job, {}, now=now)
        if not job.billed_instances and not receipt.described:
            job = self._resources_of(job, receipt)
        types = pricing.job_instance_types(job)
        quotes: dict[str, pricing.PriceQuote | None] = {}
        if types and event.region:
            try:
                quotes = self.prices.prices(event.region, types, now=now)
            except Exception as exc:  # noqa: BLE001 - a price is information: no failure of its lookup may cost a stop or an alert
                receipt.price_problems.append(f"price lookup of {', '.join(types)} in {event.region} failed: {exc!r}")
            receipt.price_problems += self.prices.take_problems()
        spend = pricing.job_spend(job, quotes, now=now)
        if types and not event.region:
            spend = replace(spend, notes=(*spend.notes, "the event names no region: price unknown"))
        return spend

    def _resources_of(self, job: TrainingJob, receipt: Receipt) -> TrainingJob:
        """The job as DescribeTrainingJob tells its instances, when the event did not; as it was when that fails."""
        try:
            described = self.jobs.describe(job.name)
        except GuardError as exc:
            receipt.price_problems.append(f"describe {job.name} for its instances failed: {exc}")
            return job
        if described is None or not described.billed_instances:
            return job
        return replace(
            job,
            instance_type=described.instance_type,
            instance_count=described.instance_count,
            instance_groups=described.instance_groups,
            selected_instance_type=described.selected_instance_type,
            selected_instance_count=described.selected_instance_count,
            max_runtime_seconds=job.max_runtime_seconds or described.max_runtime_seconds,
            managed_spot=job.managed_spot or described.managed_spot,
            training_start_time=job.training_start_time or described.training_start_time,
        )

    def _stop(  # noqa: PLR0917 - the reaction's parts, as _react holds them
        self,
        event: JobEvent,
        job: TrainingJob,
        decision: Decision,
        receipt: Receipt,
        now: datetime,
        first_stop: StopRecord | None = None,
    ) -> tuple[Outcome, Spend | None]:
        if first_stop is not None:
            record, claim = first_stop, StopClaim(granted=True, previous=None)
        else:
            rule = _rule_of(decision)
            record = StopRecord(job=job.name, rule=rule, reason=decision.reason, at=now, event_id=event.event_id)
            claim = self.ledger.claim_stop(record, ttl_seconds=AUDIT_RETENTION_SECONDS)
            if claim.busy:
                # The same rule's stop, written by an attempt that may still be acting on it: Lambda retries later.
                raise TransitionBusy(decision.key)
        if not claim.granted:
            return Outcome.ALREADY_STOPPING, None
        try:
            stopped = self.jobs.stop(job.name)
        except BaseException:
            if claim.previous is None:
                # An earlier attempt's record stays: its stop may have taken effect.
                self.ledger.drop_stop(job.name)
            raise
        if not stopped and not self._stopped_by_earlier_attempt(job.name, claim):
            # The job left InProgress before we asked (a person, SageMaker, or it finished).
            self.ledger.drop_stop(job.name)
            return Outcome.ALREADY_ENDED, None
        self.ledger.confirm_stop(job.name)
        # Only now the price: StopTrainingJob never waits for it.
        spend = self._spend(event, job, receipt, now)
        stop_spend = StopSpend(
            avoided_usd=cents(spend.avoided_usd),
            so_far_usd=cents(spend.so_far_usd),
            price_source=spend.price_source,
            instance_types=pricing.job_instance_types(job),
        )
        self.ledger.record_stop_spend(job.name, stop_spend)
        held = claim.previous or record  # an earlier attempt's record is kept whole: the tags say what it says
        if job.arn:
            # Within the job's 50 tags: the most telling attribution first; the audit record keeps it all.
            room = contract.TAGS_PER_JOB_MAX - len(set(job.tags) - set(ATTRIBUTION_KEYS))
            tags = dict(list(attribution_tags(held, stop_spend).items())[: max(room, 0)])
            if tags:
                self.jobs.tag(job.arn, tags)
        return Outcome.STOPPED, spend

    def _as_it_ended(self, job: TrainingJob) -> TrainingJob:
        try:
            current = self.jobs.describe(job.name)
        except GuardError:
            return job  # the renderers then say "ended", never the stale InProgress (text.status_text)
        if current is None or current.running:
            return job
        return replace(
            job,
            status=current.status,
            secondary_status=current.secondary_status,
            failure_reason=current.failure_reason or job.failure_reason,
            training_end_time=current.training_end_time or job.training_end_time,
        )

    def _stopped_by_earlier_attempt(self, name: str, claim: StopClaim) -> bool:
        if claim.previous is None:
            return False
        current = self.jobs.describe(name)
        return current is not None and current.status in (STOPPING, STOPPED)


# In order of importance: a job with little room for tags keeps the first ones.
ATTRIBUTION_KEYS = (
    contract.TAG_STOPPED_BY,
    contract.TAG_STOP_RULE,
    contract.TAG_STOPPED_AT,
    contract.TAG_STOP_REASON,
    contract.TAG_SPEND_AVOIDED,
)
UNKNOWN_SPEND_TAG_VALUE = "unknown"


def attribution_tags(record: StopRecord, spend: StopSpend | None = None) -> dict[str, str]:
    """The guard's tags on a job it stopped, in `ATTRIBUTION_KEYS` order; spend avoided in US dollars ("45.67")."""
    tags = {
        contract.TAG_STOPPED_BY: contract.stopped_by(record.rule),
        contract.TAG_STOP_RULE: tag_value(record.rule),
        contract.TAG_STOPPED_AT: record.at.isoformat(timespec="seconds"),
        contract.TAG_STOP_REASON: tag_value(record.reason),
    }
    if spend is not None:
        avoided = spend.avoided_usd
        tags[contract.TAG_SPEND_AVOIDED] = UNKNOWN_SPEND_TAG_VALUE if avoided is None else f"{avoided:.2f}"
    return tags


def _rule_of(decision: Decision) -> str:
    return decision.finding.name if decision.finding else "?"


def tag_value(text: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in _TAG_VALUE_PUNCTUATION else " " for c in text)
    return " ".join(cleaned.split())[: contract.TAG_VALUE_MAX_CHARS]


def _replace_tags(job: TrainingJob, tags: Mapping[str, str]) -> TrainingJob:
    return replace(job, tags=dict(tags), tags_known=True)
