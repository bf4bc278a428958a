"""React to one training-job event: decide, act exactly once per transition, notify.

The ports below are implemented by `training_guard.adapters` (AWS) and by fakes in tests.
Ordering is what makes the reaction exactly-once *and* loss-free:

1. claim the transition key for a lease that ends when this invocation's time does (a duplicate
   finds it done and does nothing; a delivery that finds it *busy* waits briefly for the holder, then
   raises `TransitionBusy` so that it comes back later: the holder may be an attempt that timed out);
2. act (stop, attribute) and publish one notification;
3. mark the key done. If anything in 2 raises, the claim is released and the error propagates,
   so Lambda's retries and the dead-letter queue see it and no half-done transition is marked done.
   An attempt killed by its timeout releases nothing: its lease runs out, and the retry (about 1 and
   2 minutes later for asynchronous invocations) takes the transition over.

A stop is additionally guarded per job by the audit record (one record per stopped job), so two
rules finding issues at once cause one `StopTrainingJob` call, not two. The record is written before
the call and confirmed once SageMaker accepted it.

One job, one story: after the guard's confirmed stop of a job, what follows about the job (later
findings and rule errors, metric alarms, the "stopped" lifecycle change; `policy.folds_into_guard_stop`)
is folded into the stop instead of being published. Step 2 then records the transition on the stop record
(one conditional write that succeeds only on a confirmed stop, so a finding handled before the stop took
effect is announced as usual) in place of the publish; step 3 marks it done with the outcome `folded`.
A redelivery is a duplicate, as for any transition, and nothing is published to any channel: e-mail,
Slack and Amazon Q Developer all fan out from the one SNS publish.

Every notification about a job carries its spend (pricing.Spend): so far, and for a stop or would-stop what
stopping avoids, "up to" its MaxRuntimeInSeconds, at list price. A price is information, never a reason to
delay or fail an action: a stop asks for it only once StopTrainingJob was accepted (then writes it on the
audit record and the attribution tags), and a failed lookup leaves the spend unknown, with why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

from training_guard import contract
from training_guard.config.model import Action, GuardConfig
from training_guard.domain import metric_guards, policy, pricing
from training_guard.domain.errors import GuardError, TransitionBusy
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

# How long a delivery that finds its transition busy waits for the holder to finish before it gives up
# and raises (a duplicate delivered at the same moment is the common case: its holder takes < 1 s).
BUSY_WAIT_SECONDS = 3.0
BUSY_POLL_SECONDS = 0.25
AUDIT_RETENTION_SECONDS = 400 * 24 * 3600  # stop records are kept a little over a year
_TAG_VALUE_PUNCTUATION = frozenset("_.:/=+-@ ")
FOLDED = "folded"  # the ledger's outcome of a transition folded into the guard's stop of its job


class MemberAccessPort(Protocol):
    """Responders that act in a member account (adapters.accounts.MemberAccess; fakes in tests)."""

    def responder_for(self, base: Responder, account: str) -> Responder: ...


class MutesPort(Protocol):
    def read(self, job: str, account: str | None = None) -> Mutes:
        """All of a job's mutes (one read); `account`: a member account's job."""
        ...


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
    rejected: str | None = None  # why the event could not be used (it was parked in the dead-letter queue)
    described: bool = False
    alarms_created: list[str] = field(default_factory=list)
    alarms_deleted: list[str] = field(default_factory=list)
    # Acted on and announced, but the ledger could not record it (see Responder._react).
    unrecorded: list[str] = field(default_factory=list)
    # Transitions acted on and recorded but not announced: folded into the guard's stop of the job.
    folded: list[str] = field(default_factory=list)
    # The `spend` object of the last notification announced about the job (None: nothing was announced).
    spend: dict[str, object] | None = None
    # What went wrong looking up prices (the spend then says unknown); the handler logs it.
    price_problems: list[str] = field(default_factory=list)
    # Folded transitions whose Slack card could not be updated (the card stays as it was; nothing else is lost).
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
    ) -> None:
        """`prices`: None prices nothing (every spend unknown); `meter`: None counts nothing; `mutes`: None reads no
        mutes (none is in force); `cards`: Slack app mode's job cards, shown the job's end when it is folded into the
        guard's stop (None: webhook mode, no card to keep current)."""
        self.config = config
        self.cards = cards
        self.jobs = jobs
        self.ledger = ledger
        self.publisher = publisher
        self.alarms = alarms
        self.prices = prices
        self.meter = meter
        self.mutes = mutes
        # The account whose jobs this responder acts on when it is not the guard's own (a hub acting in a member:
        # adapters/accounts.py): the mutes of a member's job are its own.
        self.account_scope: str | None = None
        # A sweep reads each job's mutes once for all its steps (`remember_mutes`); None: read at every decision.
        self.mutes_memo: dict[tuple[str | None, str], Mutes] | None = None
        self.busy_wait_seconds = busy_wait_seconds
        self.sleep = sleep
        # The lease of this invocation's claims (see `lease_for`); set per invocation by the handler.
        self.lease_seconds = DEFAULT_LEASE_SECONDS

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
            # An exemption, notify-only or opt-in tag (and a per-job guard) lives in the tags: never
            # decide on tags that were merely absent from the event.
            job = _replace_tags(job, self.jobs.tags(job.arn))
        guard_stop = self._guard_stop(job)
        findings = any(r.status in (ISSUES_FOUND, RULE_ERROR) for r in job.rules or ())
        mutes = self.mutes_of(job.name) if findings else NO_MUTES
        for decision in policy.decide(job, self.config, now=now, guard_stop=guard_stop, mutes=mutes):
            self._react(event, job, decision, receipt, now)
        if self.alarms is not None and self.config.per_job_alarms:
            self._keep_job_alarms(event, job, receipt, now)
        return receipt

    def handle_alarm(self, alarm: AlarmObservation, *, now: datetime) -> Receipt:
        """A metric guard's alarm (fleet contributor or per-job alarm) went to ALARM for a job."""
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
        event = JobEvent(
            event_id=alarm.event_id,
            account=alarm.account,
            region=alarm.region,
            time=alarm.time,
            source=contract.CLOUDWATCH_EVENT_SOURCE,
            detail_type=contract.ALARM_STATE_CHANGE,
            job=job,
        )
        guard_stop = self._guard_stop(job)
        for decision in policy.decide_metric(
            job, finding, action, setting, self.config, now=now, guard_stop=guard_stop, mutes=self.mutes_of(job.name)
        ):
            self._react(event, job, decision, receipt, now)
        return receipt

    def _alarm_rule(self, alarm: AlarmObservation, job: TrainingJob) -> tuple[Finding, Action, str] | str:
        """The finding, action and policy line of an alarm, or why it does not apply to this job."""
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
        """Create a job's per-job alarms when it is first seen running; delete them when it ends."""
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
        self, key: str, now: datetime, *, outcome: str, keep_if_unrecorded: bool = False
    ) -> AbstractContextManager[Held]:
        """Exactly once per transition: claimed (a short BUSY waited out), completed for the dedup TTL, released when
        acting failed."""
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
        """Whether a decision about this job may turn on its tags: a running job with a finding, or one
        whose per-job guard tags the guard keeps alarms for."""
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
        """The guard's record of stopping a job that is stopping or stopped (who stopped it, and a stop
        of ours that an attempt killed mid-way left to finish)."""
        if job.status not in (STOPPING, STOPPED):
            return None
        record = self.ledger.get_stop(job.name)
        return GuardStop(record.rule, record.reason, record.at) if record else None

    def mutes_of(self, job: str) -> Mutes:
        """The job's mutes (mutes.py), read once per job: per event, or per sweep while `mutes_memo` is set."""
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
        """A person's Stop now (Slack app mode): the job stopped through the one path to a stop, attributed to `by`
        (`slack:<user id>`), with its audit record and notification, exactly once however often and by how many it
        is pressed. What happened, in words for the thread."""
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
        """Act on one decision exactly once (used by the sweeper for stalls, budgets and idle GPUs). `spend`: the
        job's spend as the caller already priced it, for the notification (a stop prices the job again, after it)."""
        self._react(event, job, decision, receipt, now, known_spend=spend)

    def spend(self, event: JobEvent, job: TrainingJob, receipt: Receipt, now: datetime) -> Spend:
        """The job's spend so far (and what a stop would avoid), priced exactly as its notifications are."""
        return self._spend(event, job, receipt, now)

    def first_time(self, key: str, now: datetime) -> bool:
        """True the first time `key` is asked about (claimed and marked done at once), False ever after: for what
        is said once and never acted on (a job the sweeper cannot judge). Raises `TransitionBusy` as a claim does."""
        return bool(self._once(key, now, lambda: [key]))

    def _claim(self, key: str, now: datetime) -> Claim:
        """GRANTED: ours to act on; DONE: done before (a duplicate). Raises `TransitionBusy` when another
        attempt still holds it after a short wait, so that this delivery comes back later."""
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
    ) -> None:
        with self._held(decision.key, now, outcome="done", keep_if_unrecorded=True) as held:
            if not held.granted:
                receipt.duplicates += 1
                return
            outcome, spend = self._act(event, job, decision, receipt, now)
            if outcome is Outcome.ALREADY_ENDED:
                job = self._as_it_ended(job)  # the state SageMaker refused the stop in, not the event's InProgress
            elif outcome is Outcome.STOPPED:
                # StopTrainingJob accepted: SageMaker shows the job Stopping now, not the event's InProgress.
                job = replace(job, status=STOPPING, secondary_status=STOPPING)
            # Asked after acting: the stop this decision may fold into can be the one just confirmed (by this
            # event's other finding, or by another invocation a moment ago).
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
            # The stop and the notification are done; only the record failed. Raising now would make
            # Lambda's retry announce it again for certain. The claim keeps its lease instead, so a
            # repeat needs another delivery after the lease, and Slack delivery de-duplicates it anyway.
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
        """The job's end on its Slack card, after the transition is recorded: a failure here leaves the card as it
        was (the stop was announced; the thread has the story) and is reported, never raised. Raised, Lambda's retry
        would find the transition done (a duplicate) and the receipt, the job's alarms and the metrics lost."""
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
        """The notification of a decision acted on, with the job's spend (priced now when not given)."""
        spend = spend or self._spend(event, job, receipt, now)
        return messages.build(event, job, decision, outcome, now=now, dry_run=self.config.dry_run, spend=spend)

    def _act(
        self, event: JobEvent, job: TrainingJob, decision: Decision, receipt: Receipt, now: datetime
    ) -> tuple[Outcome, Spend | None]:
        """What was done, and the job's spend if the action needed it (a stop records what it avoided)."""
        if decision.plan is Plan.WOULD_STOP:
            return Outcome.WOULD_STOP, None
        if decision.plan is Plan.DEFER:
            return Outcome.DEFERRED, None
        if decision.plan is Plan.NOTIFY:
            return Outcome.NOTIFIED, None
        return self._stop(event, job, decision, receipt, now)

    def _spend(self, event: JobEvent, job: TrainingJob, receipt: Receipt, now: datetime) -> Spend:
        """What the job cost so far and what stopping it avoids, at list price. Never raises: a notification goes
        out with its spend unknown (and why) rather than not at all."""
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

    def _stop(
        self, event: JobEvent, job: TrainingJob, decision: Decision, receipt: Receipt, now: datetime
    ) -> tuple[Outcome, Spend | None]:
        rule = _rule_of(decision)
        record = StopRecord(job=job.name, rule=rule, reason=decision.reason, at=now, event_id=event.event_id)
        claim = self.ledger.claim_stop(record, ttl_seconds=AUDIT_RETENTION_SECONDS)
        if not claim.granted:
            return Outcome.ALREADY_STOPPING, None
        try:
            stopped = self.jobs.stop(job.name)
        except BaseException:
            if claim.previous is None:
                # Only this attempt's own record: the record of an earlier attempt stays, as its stop may have
                # taken effect (dropping it would announce our own stop as "already ended" on the next retry).
                self.ledger.drop_stop(job.name)
            raise
        if not stopped and not self._stopped_by_earlier_attempt(job.name, claim):
            # The job left InProgress before we asked (a person, SageMaker, or it finished).
            self.ledger.drop_stop(job.name)
            return Outcome.ALREADY_ENDED, None
        # stopped now, or by our own earlier attempt whose later steps failed and are retried here
        self.ledger.confirm_stop(job.name)
        # Only now the price: StopTrainingJob never waits for it (the lookup is bounded and never raises).
        spend = self._spend(event, job, receipt, now)
        stop_spend = StopSpend(
            avoided_usd=_cents(spend.avoided_usd),
            so_far_usd=_cents(spend.so_far_usd),
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
        """The job as DescribeTrainingJob shows it after SageMaker refused to stop it (it had just ended): its status,
        secondary status and end, so that no channel says "already InProgress". As it was when that fails."""
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
        """The job was no longer running when we asked: was that our own earlier attempt's stop?

        Its record says it meant to; the job says whether it did. An attempt can be killed after writing
        the record and before StopTrainingJob took effect, while the job completes or fails on its own.
        """
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
    """The guard's tags on a job it stopped, in the order of `ATTRIBUTION_KEYS` (the spend avoided only when
    it was looked up: "45.67" US dollars, "up to", at list price; "unknown" without a price)."""
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
    """The rule or metric guard a decision is about, as the audit record and the metric name it."""
    return decision.finding.name if decision.finding else "?"


def _cents(amount: float | None) -> float | None:
    return None if amount is None else round(amount, 2)


def tag_value(text: str) -> str:
    """Text made legal as a SageMaker tag value: letters, numbers, spaces and _.:/=+-@ only."""
    cleaned = "".join(c if c.isalnum() or c in _TAG_VALUE_PUNCTUATION else " " for c in text)
    return " ".join(cleaned.split())[: contract.TAG_VALUE_MAX_CHARS]


def _replace_tags(job: TrainingJob, tags: Mapping[str, str]) -> TrainingJob:
    """The job with the tags SageMaker listed for it (ListTags: the whole truth, none included)."""
    return replace(job, tags=dict(tags), tags_known=True)
