from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tests.helpers import NOW
from training_guard.config.model import Action, GuardConfig
from training_guard.domain.events import DEBUGGER, PROFILER, Finding, TrainingJob
from training_guard.domain.policy import (
    METRIC,
    STALLED,
    Decision,
    GuardStop,
    Kind,
    Plan,
    decide,
    decide_metric,
    folds_into_guard_stop,
    guard_tag_problems,
    selection_reason,
    stop_cause,
)

JOB_STATUSES = ("InProgress", "Completed", "Failed", "Stopping", "Stopped", "Deleting", "SomethingNew")
RULE_STATUSES = ("InProgress", "NoIssuesFound", "IssuesFound", "Error", "Stopping", "Stopped", "SomethingNew")
ACTIONS = ("stop", "notify", "ignore")


def job(status: str = "InProgress", *rules: Finding, **changes: object) -> TrainingJob:
    base = TrainingJob(
        name="mnist-1",
        status=status,
        arn="arn:aws:sagemaker:us-east-1:123456789012:training-job/mnist-1",
        secondary_status="Training",
        rules=tuple(rules),
        training_start_time=NOW - timedelta(minutes=30),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def rule(status: str, name: str = "VanishingGradient", kind: str = DEBUGGER) -> Finding:
    return Finding(name=name, source=kind, status=status)


def rule_decisions(job_status: str, rule_status: str, action: str, config: GuardConfig | None = None):
    config = config or GuardConfig.from_dict({"rules": {"actions": {"VanishingGradient": action}}})
    decisions = decide(job(job_status, rule(rule_status)), config, now=NOW)
    return [d for d in decisions if d.finding is not None]


@pytest.mark.parametrize("job_status", JOB_STATUSES)
@pytest.mark.parametrize("rule_status", RULE_STATUSES)
@pytest.mark.parametrize("action", ACTIONS)
def test_every_status_combination(job_status: str, rule_status: str, action: str) -> None:
    decisions = rule_decisions(job_status, rule_status, action)
    plans = [(d.kind, d.plan) for d in decisions]
    if action == "ignore" or rule_status not in ("IssuesFound", "Error"):
        assert plans == []
    elif rule_status == "Error":
        assert plans == [(Kind.RULE_ERROR, Plan.NOTIFY)]  # a broken rule never stops a job
    elif action == "notify" or job_status != "InProgress":
        assert plans == [(Kind.ISSUES_FOUND, Plan.NOTIFY)]  # only a running job is ever stopped
    else:
        assert plans == [(Kind.ISSUES_FOUND, Plan.STOP)]


def test_stop_decision_names_the_policy_line() -> None:
    [decision] = rule_decisions("InProgress", "IssuesFound", "stop", GuardConfig())
    assert decision.reason == "rules.debugger_default = stop (debugger rule VanishingGradient)"
    [explicit] = rule_decisions("InProgress", "IssuesFound", "stop")
    assert explicit.reason == "rules.actions.VanishingGradient = stop"


def test_profiler_findings_notify_by_default() -> None:
    decisions = decide(job("InProgress", rule("IssuesFound", "LowGPUUtilization", PROFILER)), GuardConfig(), now=NOW)
    assert [(d.kind, d.plan) for d in decisions] == [(Kind.ISSUES_FOUND, Plan.NOTIFY)]


@pytest.mark.parametrize(
    ("tags", "config", "why"),
    [
        ({"training-guard:exempt": "true"}, {}, "exemption tag training-guard:exempt"),
        ({"training-guard:notify-only": "yes"}, {}, "notify-only tag training-guard:notify-only"),
        ({}, {"dry_run": True}, "dry_run is on"),
        ({"keep-going": "1"}, {"tags": {"exempt": "keep-going"}}, "exemption tag keep-going"),
    ],
)
def test_dry_run_and_job_tags_turn_a_stop_into_would_stop(
    tags: dict[str, str], config: dict[str, object], why: str
) -> None:
    observed = job("InProgress", rule("IssuesFound"), tags=tags)
    [decision] = decide(observed, GuardConfig.from_dict(config), now=NOW)
    assert decision.plan is Plan.WOULD_STOP
    assert why in decision.reason


@pytest.mark.parametrize("value", ["false", "False", "0", "no", "off"])
def test_an_override_tag_set_to_false_does_not_exempt(value: str) -> None:
    observed = job("InProgress", rule("IssuesFound"), tags={"training-guard:exempt": value})
    assert decide(observed, GuardConfig(), now=NOW)[0].plan is Plan.STOP


def test_grace_period_defers_the_stop_under_another_key() -> None:
    config = GuardConfig.from_dict({"min_training_minutes": 60})
    [early] = decide(job("InProgress", rule("IssuesFound")), config, now=NOW)
    assert early.plan is Plan.DEFER
    assert early.key.endswith("#deferred")
    assert "trained 30.0 min" in early.reason
    later = decide(job("InProgress", rule("IssuesFound")), config, now=NOW + timedelta(minutes=31))
    assert [d.plan for d in later] == [Plan.STOP]
    assert later[0].key == early.key.removesuffix("#deferred")


def test_grace_period_treats_an_unstarted_job_as_within_grace() -> None:
    config = GuardConfig.from_dict({"min_training_minutes": 5})
    [decision] = decide(job("InProgress", rule("IssuesFound"), training_start_time=None), config, now=NOW)
    assert decision.plan is Plan.DEFER
    assert "training has not started" in decision.reason


def test_unselected_jobs_get_no_decisions() -> None:
    config = GuardConfig.from_dict({"jobs": {"include_prefixes": ["prod-"]}})
    assert decide(job("Failed", rule("IssuesFound")), config, now=NOW) == []


def test_keys_identify_the_transition() -> None:
    decisions = decide(
        job("InProgress", rule("IssuesFound"), rule("Error", name="ExplodingTensor")), GuardConfig(), now=NOW
    )
    assert [d.key for d in decisions] == [
        "t#mnist-1#debugger#VanishingGradient#IssuesFound",
        "t#mnist-1#debugger#ExplodingTensor#Error",
    ]


@pytest.mark.parametrize(
    ("status", "secondary", "setting", "kind"),
    [
        ("Failed", "Failed", "failed", Kind.JOB_FAILED),
        ("Stopped", "Stopped", "stopped", Kind.JOB_STOPPED),
        ("Completed", "Completed", "completed", Kind.JOB_COMPLETED),
        ("InProgress", "Interrupted", "spot_interrupted", Kind.SPOT_INTERRUPTED),
    ],
)
def test_lifecycle_notifications_follow_their_switches(status: str, secondary: str, setting: str, kind: Kind) -> None:
    observed = job(status, secondary_status=secondary, failure_reason="AlgorithmError: boom")
    on = GuardConfig.from_dict({"notifications": {setting: True}})
    off = GuardConfig.from_dict({"notifications": {setting: False}})
    assert [(d.kind, d.plan) for d in decide(observed, on, now=NOW)] == [(kind, Plan.NOTIFY)]
    assert decide(observed, off, now=NOW) == []


def test_completed_jobs_are_silent_by_default() -> None:
    assert decide(job("Completed", secondary_status="Completed"), GuardConfig(), now=NOW) == []


def test_failed_notification_carries_the_failure_reason() -> None:
    [decision] = decide(job("Failed", failure_reason="AlgorithmError: CUDA out of memory"), GuardConfig(), now=NOW)
    assert decision.reason == "AlgorithmError: CUDA out of memory"


def test_stop_cause_says_who_stopped_the_job() -> None:
    guard = GuardStop(rule="VanishingGradient", reason="rules.debugger_default = stop", at=NOW)
    assert stop_cause(job("Stopped"), guard).startswith("by Training Guard at 03:00 UTC: rule VanishingGradient")
    assert "MaxRuntimeInSeconds" in stop_cause(job("Stopped", secondary_status="MaxRuntimeExceeded"), None)
    assert "MaxWaitTimeInSeconds" in stop_cause(job("Stopped", secondary_status="MaxWaitTimeExceeded"), None)
    assert stop_cause(job("Stopped", secondary_status="Stopped"), None).startswith("by a person or another tool")


def test_rule_findings_and_lifecycle_in_one_event_give_both_decisions() -> None:
    observed = job("Failed", rule("IssuesFound"), failure_reason="x")
    assert [d.kind for d in decide(observed, GuardConfig(), now=NOW)] == [Kind.ISSUES_FOUND, Kind.JOB_FAILED]


def test_a_dry_run_defers_within_the_grace_period_exactly_like_the_real_mode() -> None:
    config = GuardConfig.from_dict({"dry_run": True, "min_training_minutes": 60})
    [early] = decide(job("InProgress", rule("IssuesFound")), config, now=NOW)
    assert early.plan is Plan.DEFER
    [later] = decide(job("InProgress", rule("IssuesFound")), config, now=NOW + timedelta(minutes=31))
    assert later.plan is Plan.WOULD_STOP
    assert later.reason.endswith("but dry_run is on")


def test_an_exemption_tag_rules_out_a_stop_even_within_the_grace_period() -> None:
    config = GuardConfig.from_dict({"min_training_minutes": 60})
    exempt = job("InProgress", rule("IssuesFound"), tags={"training-guard:exempt": "true"})
    assert decide(exempt, config, now=NOW)[0].plan is Plan.WOULD_STOP


def test_an_opt_in_tag_requirement_turns_untagged_stops_into_would_stop() -> None:
    config = GuardConfig.from_dict({"stop_requires_tag": "training-guard:guarded"})
    [untagged] = decide(job("InProgress", rule("IssuesFound")), config, now=NOW)
    assert untagged.plan is Plan.WOULD_STOP
    assert "not tagged training-guard:guarded=true" in untagged.reason
    tagged = job("InProgress", rule("IssuesFound"), tags={"training-guard:guarded": "true"})
    assert decide(tagged, config, now=NOW)[0].plan is Plan.STOP


# --- every path of a finding, decision for decision -------------------------------------------------------
# The key is what the responder records in the ledger to act once per transition: a key that changes form
# between two deployments re-announces every transition already handled. The reason is the policy line shown
# to people (Slack, e-mail, tags, audit record). So both are pinned whole, not by a fragment.
FINDING_KEY = "t#mnist-1#debugger#VanishingGradient#IssuesFound"
STOP_LINE = "rules.debugger_default = stop (debugger rule VanishingGradient)"


WITHIN_GRACE = (
    f"{STOP_LINE}, but the job is within min_training_minutes=45 (trained 30.0 min); "
    "it is stopped on the first event after that"
)
FINDING_PATHS = {  # what the guard sees -> (plan, key, reason)
    "stop": ({}, (Plan.STOP, FINDING_KEY, STOP_LINE)),
    "dry run": ({"config": {"dry_run": True}}, (Plan.WOULD_STOP, FINDING_KEY, f"{STOP_LINE}, but dry_run is on")),
    "exempt": (
        {"tags": {"training-guard:exempt": "yes"}},
        (Plan.WOULD_STOP, FINDING_KEY, f"{STOP_LINE}, but the job carries the exemption tag training-guard:exempt"),
    ),
    "notify-only tag": (
        {"tags": {"training-guard:notify-only": "true"}},
        (
            Plan.WOULD_STOP,
            FINDING_KEY,
            f"{STOP_LINE}, but the job carries the notify-only tag training-guard:notify-only",
        ),
    ),
    "grace": ({"config": {"min_training_minutes": 45}}, (Plan.DEFER, f"{FINDING_KEY}#deferred", WITHIN_GRACE)),
    "not running": (
        {"status": "Stopping"},
        (Plan.NOTIFY, FINDING_KEY, f"{STOP_LINE}, but the job is Stopping: only a running job is stopped"),
    ),
    "notify": (
        {"config": {"rules": {"debugger_default": "notify"}}},
        (Plan.NOTIFY, FINDING_KEY, "rules.debugger_default = notify (debugger rule VanishingGradient): notify only"),
    ),
}


@pytest.mark.parametrize(("situation", "expected"), FINDING_PATHS.values(), ids=FINDING_PATHS.keys())
def test_each_path_of_a_finding_gives_its_whole_decision(
    situation: dict[str, Any], expected: tuple[Plan, str, str]
) -> None:
    finding = rule("IssuesFound")
    observed = job(situation.get("status", "InProgress"), finding, tags=situation.get("tags", {}))
    decisions = decide(observed, GuardConfig.from_dict(situation.get("config", {})), now=NOW)
    plan, key, reason = expected
    assert decisions == [Decision(key, Kind.ISSUES_FOUND, plan, reason, finding)]


def test_an_explicit_rule_action_is_named_with_its_own_setting() -> None:
    # the rule's own line decides, not the default (stop) it overrides
    config = GuardConfig.from_dict({"rules": {"actions": {"VanishingGradient": "notify"}}})
    [decision] = decide(job("InProgress", rule("IssuesFound")), config, now=NOW)
    assert (decision.plan, decision.reason) == (Plan.NOTIFY, "rules.actions.VanishingGradient = notify: notify only")


def test_a_profiler_finding_is_decided_and_named_by_the_profiler_default() -> None:
    finding = rule("IssuesFound", "LowGPUUtilization", PROFILER)
    [decision] = decide(job("InProgress", finding), GuardConfig(), now=NOW)
    assert decision == Decision(
        "t#mnist-1#profiler#LowGPUUtilization#IssuesFound",
        Kind.ISSUES_FOUND,
        Plan.NOTIFY,
        "rules.profiler_default = notify (profiler rule LowGPUUtilization): notify only",
        finding,
    )


def test_a_broken_rule_is_reported_with_why_it_never_stops_the_job() -> None:
    broken = rule("Error", name="ExplodingTensor")
    assert decide(job("InProgress", broken), GuardConfig(), now=NOW) == [
        Decision(
            "t#mnist-1#debugger#ExplodingTensor#Error",
            Kind.RULE_ERROR,
            Plan.NOTIFY,
            "debugger rule ExplodingTensor could not evaluate: a broken rule is not a finding about the model, "
            "so the guard reports it and never stops the job for it",
            broken,
        )
    ]


# --- the grace period at its edges -------------------------------------------------------------------------
def test_a_grace_of_one_minute_defers_a_stop_in_the_first_minute() -> None:
    config = GuardConfig.from_dict({"min_training_minutes": 1})
    started = job("InProgress", rule("IssuesFound"), training_start_time=NOW - timedelta(seconds=30))
    [decision] = decide(started, config, now=NOW)
    assert decision.plan is Plan.DEFER
    assert decision.reason.endswith(
        "within min_training_minutes=1 (trained 0.5 min); it is stopped on the first event after that"
    )


def test_a_grace_of_zero_stops_even_a_job_whose_training_has_not_started() -> None:
    config = GuardConfig.from_dict({"min_training_minutes": 0})
    unstarted = job("InProgress", rule("IssuesFound"), training_start_time=None)
    assert [d.plan for d in decide(unstarted, config, now=NOW)] == [Plan.STOP]


def test_a_job_not_yet_training_is_deferred_with_that_reason() -> None:
    config = GuardConfig.from_dict({"min_training_minutes": 5})
    [decision] = decide(job("InProgress", rule("IssuesFound"), training_start_time=None), config, now=NOW)
    assert decision.reason == (
        f"{STOP_LINE}, but the job is within min_training_minutes=5 (training has not started); "
        "it is stopped on the first event after that"
    )


@pytest.mark.parametrize(
    ("trained", "plan"),
    [(timedelta(minutes=60) - timedelta(seconds=1), Plan.DEFER), (timedelta(minutes=60), Plan.STOP)],
)
def test_the_grace_period_ends_exactly_at_min_training_minutes(trained: timedelta, plan: Plan) -> None:
    config = GuardConfig.from_dict({"min_training_minutes": 60})
    observed = job("InProgress", rule("IssuesFound"), training_start_time=NOW - trained)
    assert [d.plan for d in decide(observed, config, now=NOW)] == [plan]


# --- lifecycle decisions --------------------------------------------------------------------------------------
LIFECYCLE = {  # (status, secondary status, FailureReason) -> (key, kind, reason)
    "failed": (
        ("Failed", "Failed", "AlgorithmError: boom"),
        ("t#mnist-1#job#status#Failed", Kind.JOB_FAILED, "AlgorithmError: boom"),
    ),
    "failed without reason": (
        ("Failed", "Failed", None),
        ("t#mnist-1#job#status#Failed", Kind.JOB_FAILED, "SageMaker gave no FailureReason"),
    ),
    "stopped": (
        ("Stopped", "Stopped", None),
        (
            "t#mnist-1#job#status#Stopped",
            Kind.JOB_STOPPED,
            "by a person or another tool (StopTrainingJob called outside the guard)",
        ),
    ),
    "completed": (
        ("Completed", "Completed", None),
        ("t#mnist-1#job#status#Completed", Kind.JOB_COMPLETED, "notifications.completed = true"),
    ),
    "spot interrupted": (
        ("InProgress", "Interrupted", None),
        (
            "t#mnist-1#job#secondary#Interrupted",
            Kind.SPOT_INTERRUPTED,
            "the spot capacity was reclaimed; SageMaker restarts the job from its last checkpoint",
        ),
    ),
}


@pytest.mark.parametrize(("seen", "expected"), LIFECYCLE.values(), ids=LIFECYCLE.keys())
def test_each_lifecycle_change_gives_its_whole_decision(
    seen: tuple[str, str, str | None], expected: tuple[str, Kind, str]
) -> None:
    status, secondary, failure = seen
    observed = job(status, secondary_status=secondary, failure_reason=failure)
    config = GuardConfig.from_dict({"notifications": {"completed": True}})
    key, kind, reason = expected
    assert decide(observed, config, now=NOW) == [Decision(key, kind, Plan.NOTIFY, reason)]


def test_the_stop_notification_names_the_guard_when_its_audit_record_says_it_stopped_the_job() -> None:
    guard = GuardStop(rule="VanishingGradient", reason=STOP_LINE, at=NOW)
    [decision] = decide(job("Stopped", secondary_status="Stopped"), GuardConfig(), now=NOW, guard_stop=guard)
    assert decision.reason == f"by Training Guard at 03:00 UTC: rule VanishingGradient ({STOP_LINE})"


def test_a_stopped_job_without_a_secondary_status_is_stopped_by_someone_else() -> None:
    assert stop_cause(job("Stopped", secondary_status=None), None) == (
        "by a person or another tool (StopTrainingJob called outside the guard)"
    )


# --- metric findings, guard tag problems, selection -----------------------------------------------------------
GUARDED = GuardConfig.from_dict({"jobs": {"include_prefixes": ["mnist-"]}})


@pytest.mark.parametrize(("status", "kind"), [("ALARM", Kind.METRIC_ALARM), (STALLED, Kind.METRIC_STALL)])
def test_a_metric_finding_is_decided_like_a_rule_finding_under_its_own_kind(status: str, kind: Kind) -> None:
    finding = Finding(name="loss-diverging", source=METRIC, status=status)
    setting = "metric_guards.loss-diverging: MAX(train:loss) > 5 for 3 of 3 min -> stop"
    decisions = decide_metric(job("InProgress"), finding, Action.STOP, setting, GUARDED, now=NOW)
    assert decisions == [Decision(f"t#mnist-1#metric#loss-diverging#{status}", kind, Plan.STOP, setting, finding)]


def test_a_metric_finding_within_the_grace_period_is_deferred() -> None:
    finding = Finding(name="loss-diverging", source=METRIC, status="ALARM")
    config = GuardConfig.from_dict({"min_training_minutes": 45})
    [decision] = decide_metric(job("InProgress"), finding, Action.STOP, "guard line", config, now=NOW)
    assert (decision.plan, decision.key) == (Plan.DEFER, "t#mnist-1#metric#loss-diverging#ALARM#deferred")


def test_a_metric_finding_on_an_unselected_job_decides_nothing() -> None:
    finding = Finding(name="loss-diverging", source=METRIC, status="ALARM")
    config = GuardConfig.from_dict({"jobs": {"include_prefixes": ["prod-"]}})
    assert decide_metric(job("InProgress"), finding, Action.STOP, "guard line", config, now=NOW) == []


def test_unreadable_guard_tags_give_one_notification_listing_every_problem() -> None:
    problems = ["tag training-guard:alarm:a='x': bad", "tag training-guard:alarm:b='y': worse"]
    assert guard_tag_problems(job("InProgress"), problems) == Decision(
        "t#mnist-1#job#guard-tags#invalid", Kind.GUARD_TAG_INVALID, Plan.NOTIFY, "; ".join(problems)
    )


def test_selection_reason_says_why_a_job_is_not_guarded() -> None:
    assert selection_reason("mnist-1", GUARDED) is None
    assert selection_reason("other-1", GUARDED) == "job name is outside jobs.include_prefixes / jobs.exclude_prefixes"


# --- opt-in stopping ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["True", "TRUE", " true", "yes", "1"])
def test_stop_requires_tag_matches_true_exactly_like_the_iam_condition(value: str) -> None:
    # The IAM condition on StopTrainingJob uses StringEquals, an exact, case-sensitive match
    # (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html):
    # deciding "stop" for a job tagged "True" would only meet AccessDenied, so it is "would stop".
    config = GuardConfig.from_dict({"stop_requires_tag": "training-guard:guarded"})
    tagged = job("InProgress", rule("IssuesFound"), tags={"training-guard:guarded": value})
    [decision] = decide(tagged, config, now=NOW)
    assert decision.plan is Plan.WOULD_STOP
    assert decision.reason.endswith("but stop_requires_tag: the job is not tagged training-guard:guarded=true")


# --- a stop the guard made but did not finish announcing ---------------------------------------------------------
def test_a_finding_on_a_job_the_guard_stopped_for_that_rule_is_still_the_guards_stop() -> None:
    finding = rule("IssuesFound")
    guard = GuardStop(rule="VanishingGradient", reason=STOP_LINE, at=NOW)
    stopped = job("Stopped", finding, secondary_status="Stopped")
    decisions = decide(stopped, GuardConfig(), now=NOW, guard_stop=guard)
    assert decisions[0] == Decision(FINDING_KEY, Kind.ISSUES_FOUND, Plan.STOP, STOP_LINE, finding)


def test_a_finding_on_a_job_the_guard_stopped_for_another_rule_is_only_reported() -> None:
    guard = GuardStop(rule="ExplodingTensor", reason="rules.actions.ExplodingTensor = stop", at=NOW)
    stopped = job("Stopped", rule("IssuesFound"), secondary_status="Stopped")
    [finding, _lifecycle] = decide(stopped, GuardConfig(), now=NOW, guard_stop=guard)
    assert (finding.plan, finding.reason) == (
        Plan.NOTIFY,
        f"{STOP_LINE}, but the job is Stopped: only a running job is stopped",
    )


def test_a_metric_finding_on_a_job_the_guard_stopped_for_that_guard_is_still_the_guards_stop() -> None:
    finding = Finding(name="loss-diverging", source=METRIC, status="ALARM")
    guard = GuardStop(rule="loss-diverging", reason="guard line", at=NOW)
    stopped = job("Stopped", secondary_status="Stopped")
    decisions = decide_metric(stopped, finding, Action.STOP, "guard line", GUARDED, now=NOW, guard_stop=guard)
    assert [d.plan for d in decisions] == [Plan.STOP]
    assert [d.plan for d in decide_metric(stopped, finding, Action.STOP, "guard line", GUARDED, now=NOW)] == [
        Plan.NOTIFY
    ]


# --- one job, one story ------------------------------------------------------------------------------
# Budgets and idle GPUs are findings like the others: a warning or an idle job after the guard's stop is not news.
FOLDED_KINDS = {
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


@pytest.mark.parametrize("kind", list(Kind))
def test_after_the_guards_stop_findings_rule_errors_alarms_and_the_stopped_change_fold_and_the_rest_is_news(
    kind: Kind,
) -> None:
    decision = Decision("t#mnist-1#x#y#z", kind, Plan.NOTIFY, "why")
    # a failure, a completion, a spot interruption or unreadable guard tags after the stop: still announced
    assert folds_into_guard_stop(decision, is_the_stop=False) is (kind in FOLDED_KINDS)


@pytest.mark.parametrize(
    "kind", [Kind.ISSUES_FOUND, Kind.METRIC_ALARM, Kind.METRIC_STALL, Kind.BUDGET_EXCEEDED, Kind.IDLE_GPU]
)
def test_the_stop_itself_is_never_folded(kind: Kind) -> None:
    decision = Decision("t#mnist-1#x#y#z", kind, Plan.STOP, "why", rule("IssuesFound"))
    assert folds_into_guard_stop(decision, is_the_stop=True) is False


def test_a_stop_comes_first_whatever_order_the_rules_are_listed_in() -> None:
    """One event, a Profiler finding (notify) listed before a Debugger finding (stop): the stop is acted on
    first, so the same event gives the same story (the stop, the rest folded) in either order."""
    profiler = rule("IssuesFound", "LowGPUUtilization", PROFILER)
    debugger = rule("IssuesFound", "VanishingGradient", DEBUGGER)
    for rules in ((profiler, debugger), (debugger, profiler)):
        decisions = decide(job("InProgress", *rules), GuardConfig(), now=NOW)
        plans = [(d.finding.name if d.finding else "", d.plan) for d in decisions]
        assert plans == [("VanishingGradient", Plan.STOP), ("LowGPUUtilization", Plan.NOTIFY)]
