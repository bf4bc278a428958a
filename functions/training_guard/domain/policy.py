"""Pure decisions: which actions follow from an observed training job.

Each decision carries its transition key (job, source, name, new status); the responder acts on each key once."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from enum import StrEnum

from training_guard import contract
from training_guard.config.frozen import frozen
from training_guard.config.model import Action, Budget, GuardConfig, IdleGpuGuard
from training_guard.domain.events import (
    COMPLETED,
    FAILED,
    ISSUES_FOUND,
    PROFILER,
    RULE_ERROR,
    STOPPED,
    Finding,
    TrainingJob,
)
from training_guard.domain.mutes import Mutes
from training_guard.domain.text import clock, person

METRIC = "metric"  # the source of a metric guard's, a stall's or idle GPUs' finding (Finding.source)
STALLED = "NoData"
BUDGET = "budget"  # the source of a budget's finding; its name is the budget's (`budgets[0]`, or the tag key)
BUDGET_WARNING = "Warning"  # the status of a budget's finding: `warn_at` of the cap spent
BUDGET_EXCEEDED = "Exceeded"
IDLE_GPU = "idle-gpu"
IDLE = "Idle"
LOG_RULE = "log"  # the source of a log rule's finding (the log-rules wing); its name is the rule's
LOG_ISSUE = "IssuesFound"
STOP_REQUEST = "slack"  # the source of a person's Stop now (a Slack button); its name is who: `slack:<user id>`
REQUESTED = "StopRequested"
NO_MUTES = Mutes()

# Tag values that switch an override tag off rather than on.
_FALSE_TAG_VALUES = frozenset({"false", "0", "no", "off"})
_SECONDARY_STOP_CAUSES = {
    "MaxRuntimeExceeded": "by SageMaker: the job reached StoppingCondition.MaxRuntimeInSeconds",
    "MaxWaitTimeExceeded": "by SageMaker: the spot job reached StoppingCondition.MaxWaitTimeInSeconds",
}


class Kind(StrEnum):
    ISSUES_FOUND = "issues_found"
    RULE_ERROR = "rule_error"
    JOB_FAILED = "job_failed"
    JOB_STOPPED = "job_stopped"
    JOB_COMPLETED = "job_completed"
    SPOT_INTERRUPTED = "spot_interrupted"
    METRIC_ALARM = "metric_alarm"
    METRIC_STALL = "metric_stall"  # the job declared metrics but published none for a while
    GUARD_TAG_INVALID = "guard_tag_invalid"  # a per-job guard tag (or budget tag) could not be read
    BUDGET_WARNING = "budget_warning"
    BUDGET_EXCEEDED = "budget_exceeded"
    IDLE_GPU = "idle_gpu"
    STOP_REQUESTED = "stop_requested"  # a person pressed Stop now (Slack app mode)
    LOG_RULE = "log_rule"  # a rule read the job's training log and found an issue (NaN, divergence, ...)


class Plan(StrEnum):
    STOP = "stop"
    WOULD_STOP = "would_stop"  # a stop was called for but dry-run or a job tag prevents it
    DEFER = "defer"  # a stop is called for, but the job is within its grace period
    NOTIFY = "notify"


@frozen
class GuardStop:
    rule: str
    reason: str
    at: datetime


@frozen
class Decision:
    key: str
    kind: Kind
    plan: Plan
    reason: str  # the policy line that decided it, shown to people
    finding: Finding | None = None


def transition_key(job: str, source: str, name: str, status: str) -> str:
    return f"t#{job}#{source}#{name}#{status}"


# Folded into the guard's confirmed stop, not announced: they add nothing a person must read. A failure, a completion
# after the stop, or a stop by a person or SageMaker, is news (docs/design/responder.md).
FOLDED_AFTER_GUARD_STOP = frozenset(
    {
        Kind.ISSUES_FOUND,
        Kind.RULE_ERROR,
        Kind.METRIC_ALARM,
        Kind.METRIC_STALL,
        Kind.LOG_RULE,
        Kind.BUDGET_WARNING,
        Kind.BUDGET_EXCEEDED,
        Kind.IDLE_GPU,
        Kind.JOB_STOPPED,
    }
)


# Of what is folded, the job's end still changes its Slack card, and is posted nowhere else.
FOLDED_ONTO_THE_CARD = frozenset({Kind.JOB_STOPPED})


def folds_into_guard_stop(decision: Decision, *, is_the_stop: bool) -> bool:
    return decision.kind in FOLDED_AFTER_GUARD_STOP and not is_the_stop


def decide(
    job: TrainingJob,
    config: GuardConfig,
    *,
    now: datetime,
    guard_stop: GuardStop | None = None,
    mutes: Mutes = NO_MUTES,
) -> list[Decision]:
    """The decisions about an observed job; a silenced rule decides nothing, an exempted job would-have-stopped."""
    if not config.selects(job.name):
        return []
    decisions = [d for rule in job.rules or () if (d := _decide_rule(job, rule, config, now, guard_stop, mutes=mutes))]
    # The stop first, so the rest of the event folds into it the same way whatever the rules' order (stable sort).
    decisions = sorted(decisions, key=lambda d: d.plan is not Plan.STOP)
    lifecycle = _decide_lifecycle(job, config, guard_stop)
    if lifecycle is not None:
        decisions.append(lifecycle)
    return decisions


def selection_reason(job_name: str, config: GuardConfig) -> str | None:
    if config.selects(job_name):
        return None
    return "job name is outside jobs.include_prefixes / jobs.exclude_prefixes"


def _decide_rule(
    job: TrainingJob,
    rule: Finding,
    config: GuardConfig,
    now: datetime,
    guard_stop: GuardStop | None,
    *,
    mutes: Mutes = NO_MUTES,
) -> Decision | None:
    action = config.action_for(rule.name, profiler=rule.source == PROFILER)
    if action is Action.IGNORE or rule.status not in (ISSUES_FOUND, RULE_ERROR):
        return None
    if silenced(job, rule, mutes, now):
        return None
    if rule.status == RULE_ERROR:
        reason = (
            f"{rule.source} rule {rule.name} could not evaluate: a broken rule is not a finding about "
            "the model, so the guard reports it and never stops the job for it"
        )
        key = transition_key(job.name, rule.source, rule.name, rule.status)
        return Decision(key, Kind.RULE_ERROR, Plan.NOTIFY, reason, rule)
    setting = _rule_setting(config, rule)
    return decide_finding(
        job,
        rule,
        action=action,
        setting=setting,
        config=config,
        now=now,
        kind=Kind.ISSUES_FOUND,
        guard_stop=guard_stop,
        mutes=mutes,
    )


def silenced(job: TrainingJob, finding: Finding, mutes: Mutes, now: datetime) -> bool:
    """Whether a mute silences this finding about the job now (a snooze or a mute of its rule, while the job runs)."""
    return mutes.silencing(finding.name, now, job_running=job.running) is not None


def decide_finding(
    job: TrainingJob,
    finding: Finding,
    *,
    action: Action,
    setting: str,
    config: GuardConfig,
    now: datetime,
    kind: Kind,
    guard_stop: GuardStop | None = None,
    mutes: Mutes = NO_MUTES,
    dry_run: bool = False,
) -> Decision:
    """The one path from a finding (rule, metric alarm, stall, log rule) to stop / would-stop / notify;
    `dry_run`: this finding's own setting says dry run (the configuration's `dry_run` applies to all)."""
    key = transition_key(job.name, finding.source, finding.name, finding.status)
    if action is not Action.STOP:
        return Decision(key, kind, Plan.NOTIFY, f"{setting}: notify only", finding)
    if not job.running and guard_stop is not None and guard_stop.rule == finding.name:
        return Decision(key, kind, Plan.STOP, setting, finding)  # finish the stop a killed attempt began
    if not job.running:
        reason = f"{setting}, but the job is {job.status}: only a running job is stopped"
        return Decision(key, kind, Plan.NOTIFY, reason, finding)
    # As in the real mode, so that a dry run reports what would really happen: dry_run replaces only the stop.
    exempt = _tag_override(job, config) or _exemption(job, mutes, now)
    if exempt:
        return Decision(key, kind, Plan.WOULD_STOP, f"{setting}, but {exempt}", finding)
    grace = _grace_remaining(job, config, now)
    if grace is not None:
        reason = (
            f"{setting}, but the job is within min_training_minutes={config.min_training_minutes} "
            f"({grace}); it is stopped on the first event after that"
        )
        return Decision(f"{key}#deferred", kind, Plan.DEFER, reason, finding)
    if config.dry_run or dry_run:
        said = "dry_run is on" if config.dry_run else "its action is dry_run"
        return Decision(key, kind, Plan.WOULD_STOP, f"{setting}, but {said}", finding)
    return Decision(key, kind, Plan.STOP, setting, finding)


def decide_metric(
    job: TrainingJob,
    finding: Finding,
    action: Action,
    setting: str,
    config: GuardConfig,
    *,
    now: datetime,
    guard_stop: GuardStop | None = None,
    mutes: Mutes = NO_MUTES,
    kind: Kind | None = None,
    dry_run: bool = False,
) -> list[Decision]:
    if not config.selects(job.name) or silenced(job, finding, mutes, now):
        return []
    if kind is None:
        kind = Kind.METRIC_STALL if finding.status == STALLED else Kind.METRIC_ALARM
    return [
        decide_finding(
            job,
            finding,
            action=action,
            setting=setting,
            config=config,
            now=now,
            kind=kind,
            guard_stop=guard_stop,
            mutes=mutes,
            dry_run=dry_run,
        )
    ]


def cents(usd: float) -> int:
    """An amount in whole cents, as it is shown (`$1,234.56`): budgets compare what people read."""
    return round(round(usd, 2) * 100)


def _dollars(amount_cents: int) -> str:
    return f"${amount_cents / 100:,.2f}"


def decide_budget(
    job: TrainingJob,
    *,
    name: str,
    budget: Budget,
    setting: str,
    spent_usd: float,
    config: GuardConfig,
    now: datetime,
    mutes: Mutes = NO_MUTES,
) -> list[Decision]:
    """A job's spend so far (list price) against its cap: a warning at `warn_at`, the budget's action at the cap.
    Compared in whole cents, as shown; the cap is in each transition's key, so a raised cap warns and acts again."""
    if not config.selects(job.name) or mutes.silencing(name, now, job_running=job.running) is not None:
        return []
    spent, cap = cents(spent_usd), cents(budget.max_usd)
    share = f"{spent / cap * 100:.0f} % of the cap" if cap else "the cap"
    if spent >= cap:
        finding = Finding(
            name=name,
            source=BUDGET,
            status=BUDGET_EXCEEDED,
            details=f"{_dollars(spent)} spent of its {_dollars(cap)} budget",
        )
        line = f"{setting}: {_dollars(spent)} spent (list price)"
        decision = decide_finding(
            job,
            finding,
            action=budget.action,
            setting=line,
            config=config,
            now=now,
            kind=Kind.BUDGET_EXCEEDED,
            mutes=mutes,
        )
    elif budget.warn_at > 0 and spent >= cents(budget.max_usd * budget.warn_at):
        finding = Finding(
            name=name,
            source=BUDGET,
            status=BUDGET_WARNING,
            details=f"{_dollars(spent)} spent of its {_dollars(cap)} budget ({share})",
        )
        reason = f"{setting}: {_dollars(spent)} spent, {share} (list price): warned once"
        key = transition_key(job.name, BUDGET, name, BUDGET_WARNING)
        decision = Decision(key, Kind.BUDGET_WARNING, Plan.NOTIFY, reason, finding)
    else:
        return []
    return [replace(decision, key=f"{decision.key}#{cap}")]


def decide_idle_gpu(
    job: TrainingJob,
    *,
    details: str,
    guard: IdleGpuGuard,
    config: GuardConfig,
    now: datetime,
    mutes: Mutes = NO_MUTES,
) -> list[Decision]:
    """A job whose GPUs sat idle (the sweeper measured it): the guard's action, through the path of any stop."""
    finding = Finding(name=IDLE_GPU, source=METRIC, status=IDLE, details=details)
    if not config.selects(job.name) or silenced(job, finding, mutes, now):
        return []
    return [
        decide_finding(
            job,
            finding,
            action=guard.action,
            setting=guard.describe(),
            config=config,
            now=now,
            kind=Kind.IDLE_GPU,
            mutes=mutes,
        )
    ]


def decide_stop_request(job: TrainingJob, config: GuardConfig, *, by: str, rule: str | None) -> Decision:
    """A person's Stop now on a running job, in their name (`by`: `slack:<user id>`). Exemptions and mutes do not
    hold it back; dry run and a missing opt-in tag do (IAM would refuse the stop)."""
    details = f"Stop now pressed in Slack by {by}" + (f" (on the finding of {rule})" if rule else "")
    finding = Finding(name=by, source=STOP_REQUEST, status=REQUESTED, details=details)
    key = transition_key(job.name, STOP_REQUEST, by, REQUESTED)
    setting = f"Stop now, pressed in Slack by {by}"
    if config.stop_requires_tag and not contract.stop_opted_in(dict(job.tags), config.stop_requires_tag):
        reason = f"{setting}, but stop_requires_tag: the job is not tagged {config.stop_requires_tag}="
        return Decision(key, Kind.STOP_REQUESTED, Plan.WOULD_STOP, reason + contract.STOP_OPT_IN_VALUE, finding)
    if config.dry_run:
        return Decision(key, Kind.STOP_REQUESTED, Plan.WOULD_STOP, f"{setting}, but dry_run is on", finding)
    return Decision(key, Kind.STOP_REQUESTED, Plan.STOP, setting, finding)


def budget_tag_problem(job: TrainingJob, *, tag: str, problem: str) -> Decision:
    """A budget tag that sets no cap, reported once (apart from the per-job guard tags' report)."""
    finding = Finding(name=tag, source=BUDGET, status="invalid", details=problem)
    key = transition_key(job.name, BUDGET, tag, "invalid")
    return Decision(key, Kind.GUARD_TAG_INVALID, Plan.NOTIFY, problem, finding)


def guard_tag_problems(job: TrainingJob, problems: list[str]) -> Decision:
    reason = "; ".join(problems)
    return Decision(
        transition_key(job.name, "job", "guard-tags", "invalid"), Kind.GUARD_TAG_INVALID, Plan.NOTIFY, reason
    )


def _rule_setting(config: GuardConfig, rule: Finding) -> str:
    action = config.action_for(rule.name, profiler=rule.source == PROFILER)
    if rule.name in config.rules.actions:
        return f"rules.actions.{rule.name} = {action.value}"
    default = "rules.profiler_default" if rule.source == PROFILER else "rules.debugger_default"
    return f"{default} = {action.value} ({rule.source} rule {rule.name})"


def _tag_set(job: TrainingJob, key: str) -> bool:
    value = job.tags.get(key)
    return value is not None and value.strip().lower() not in _FALSE_TAG_VALUES


def _tag_override(job: TrainingJob, config: GuardConfig) -> str | None:
    if config.stop_requires_tag and not contract.stop_opted_in(dict(job.tags), config.stop_requires_tag):
        return f"stop_requires_tag: the job is not tagged {config.stop_requires_tag}={contract.STOP_OPT_IN_VALUE}"
    if _tag_set(job, config.tags.exempt):
        return f"the job carries the exemption tag {config.tags.exempt}"
    if _tag_set(job, config.tags.notify_only):
        return f"the job carries the notify-only tag {config.tags.notify_only}"
    return None


def _exemption(job: TrainingJob, mutes: Mutes, now: datetime) -> str | None:
    mute = mutes.exemption(now, job_running=job.running)
    return mute.describe() if mute is not None else None


def _grace_remaining(job: TrainingJob, config: GuardConfig, now: datetime) -> str | None:
    if config.min_training_minutes <= 0:
        return None
    trained = job.training_seconds(now)
    if trained is None:
        return "training has not started"
    if trained < config.min_training_minutes * 60:
        return f"trained {trained / 60:.1f} min"
    return None


def _decide_lifecycle(job: TrainingJob, config: GuardConfig, guard_stop: GuardStop | None) -> Decision | None:
    notes = config.notifications
    if job.status == FAILED and notes.failed:
        reason = job.failure_reason or "SageMaker gave no FailureReason"
        return Decision(transition_key(job.name, "job", "status", FAILED), Kind.JOB_FAILED, Plan.NOTIFY, reason)
    if job.status == STOPPED and notes.stopped:
        return Decision(
            transition_key(job.name, "job", "status", STOPPED),
            Kind.JOB_STOPPED,
            Plan.NOTIFY,
            stop_cause(job, guard_stop),
        )
    if job.status == COMPLETED and notes.completed:
        key = transition_key(job.name, "job", "status", COMPLETED)
        return Decision(key, Kind.JOB_COMPLETED, Plan.NOTIFY, "notifications.completed = true")
    if job.secondary_status == "Interrupted" and notes.spot_interrupted:
        key = transition_key(job.name, "job", "secondary", "Interrupted")
        reason = "the spot capacity was reclaimed; SageMaker restarts the job from its last checkpoint"
        return Decision(key, Kind.SPOT_INTERRUPTED, Plan.NOTIFY, reason)
    return None


def stop_cause(job: TrainingJob, guard_stop: GuardStop | None) -> str:
    if guard_stop is not None:
        at = clock(guard_stop.at)
        who = person(guard_stop.rule, slack=False)
        if guard_stop.rule.startswith(contract.STOPPED_BY_SLACK_PREFIX) and who:
            return f"by Training Guard at {at}: {who} pressed Stop now"
        return f"by Training Guard at {at}: rule {guard_stop.rule} ({guard_stop.reason})"
    cause = _SECONDARY_STOP_CAUSES.get(job.secondary_status or "")
    if cause:
        return cause
    return "by a person or another tool (StopTrainingJob called outside the guard)"
