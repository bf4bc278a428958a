from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tests.helpers import NOW
from training_guard.config import GuardConfig
from training_guard.events import DEBUGGER, PROFILER, RuleStatus, TrainingJob
from training_guard.policy import GuardStop, Kind, Plan, decide, stop_cause

JOB_STATUSES = ("InProgress", "Completed", "Failed", "Stopping", "Stopped", "Deleting", "SomethingNew")
RULE_STATUSES = ("InProgress", "NoIssuesFound", "IssuesFound", "Error", "Stopping", "Stopped", "SomethingNew")
ACTIONS = ("stop", "notify", "ignore")


def job(status: str = "InProgress", *rules: RuleStatus, **changes: object) -> TrainingJob:
    base = TrainingJob(
        name="mnist-1",
        status=status,
        arn="arn:aws:sagemaker:us-east-1:123456789012:training-job/mnist-1",
        secondary_status="Training",
        rules=tuple(rules),
        training_start_time=NOW - timedelta(minutes=30),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def rule(status: str, name: str = "VanishingGradient", kind: str = DEBUGGER) -> RuleStatus:
    return RuleStatus(name=name, kind=kind, status=status)


def rule_decisions(job_status: str, rule_status: str, action: str, config: GuardConfig | None = None):
    config = config or GuardConfig.from_dict({"rules": {"actions": {"VanishingGradient": action}}})
    decisions = decide(job(job_status, rule(rule_status)), config, now=NOW)
    return [d for d in decisions if d.rule is not None]


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
    assert stop_cause(job("Stopped"), guard).startswith(
        "by Training Guard at 2026-11-30T03:00:00+00:00: rule VanishingGradient"
    )
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
