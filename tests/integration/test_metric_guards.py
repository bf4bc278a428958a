"""Metric guards against moto: fleet alarm contributors, per-job alarms, the sweeper."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.helpers import EVENTS_DIR, load_event
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard.domain.metric_guards import job_alarm_name
from training_guard_local.alarm_events import contributor_event, metric_alarm_event
from training_guard_local.emulator import Emulation

JOB = "resnet50-no-debugger-2026-11-30-02-20-00-001"
LOSS_TAG = f"{contract.JOB_ALARM_TAG_PREFIX}train:loss"
CONFIG = {
    "metric_guards": [
        {"name": "loss-diverging", "metric": "train:loss", "threshold": 5, "action": "stop"},
        {"name": "idle-gpu", "metric": "GPUUtilization", "statistic": "AVG", "comparison": "<", "threshold": 5},
        {"name": "vision-only", "metric": "train:loss", "threshold": 1, "action": "stop", "job_prefix": "vision-"},
    ],
    "stall": {"minutes": 10, "action": "notify"},
}


def job_event(
    status: str = "InProgress", *, tags: dict[str, str] | None = None, minutes_ago: int = 30, **detail: Any
) -> dict[str, Any]:
    """A job without Debugger rules (empty rule lists), started `minutes_ago`."""
    event = load_event("in_progress_no_rule_lists")
    started = datetime.now(UTC) - timedelta(minutes=minutes_ago)
    event["detail"].update(
        TrainingJobName=JOB,
        TrainingJobArn=f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{JOB}",
        TrainingJobStatus=status,
        SecondaryStatus="Training" if status == "InProgress" else status,
        TrainingStartTime=int(started.timestamp() * 1000),
        DebugRuleEvaluationStatuses=[],
        Tags=tags if tags is not None else {"team": "vision"},
        **detail,
    )
    return event


def alarm(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS_DIR / "alarms" / f"{name}.json").read_text())
    return data


@pytest.fixture
def aws() -> Iterator[Emulation]:
    with Emulation(GuardConfig.from_dict(CONFIG)) as emulation:
        yield emulation


def test_a_job_without_debugger_whose_loss_guard_fires_is_stopped_once_and_announced(aws: Emulation) -> None:
    aws.deliver(job_event())
    fired = alarm("contributor_train_loss")
    first = aws.deliver_alarm(fired)
    again = aws.deliver_alarm(copy.deepcopy(fired) | {"id": "another-delivery"})
    assert (first["stopped"], first["notifications"]) == (True, ["metric_alarm"])
    assert (again["stopped"], again["duplicates"]) == (False, 1)
    assert aws.job_status(JOB) == "Stopping"
    [note] = aws.notifications()
    assert note["title"] == f"Stopped {JOB}: metric guard loss-diverging fired"
    assert note["reason"] == "metric_guards.loss-diverging: MAX(train:loss) > 5 for 3 of 3 min -> stop"
    assert note["rule"]["details"].startswith("Threshold Crossed")
    assert aws.job_tags(JOB)[contract.TAG_STOP_RULE] == "loss-diverging"


def test_an_instance_metric_contributor_is_resolved_from_its_host(aws: Emulation) -> None:
    aws.deliver(job_event())
    receipt = aws.deliver_alarm(alarm("contributor_gpu_host"))
    assert (receipt["job"], receipt["notifications"], receipt["outcomes"]) == (JOB, ["metric_alarm"], ["notified"])
    assert aws.job_status(JOB) == "InProgress"  # idle-gpu only notifies


def test_recovery_and_foreign_guards_do_nothing(aws: Emulation) -> None:
    aws.deliver(job_event())
    ok = alarm("contributor_train_loss")
    ok["detail"]["state"]["value"] = "OK"
    assert aws.deliver_alarm(ok)["ignored"] == "alarm training-guard-loss-diverging is OK"
    unknown = alarm("contributor_train_loss")
    unknown["detail"]["alarmName"] = "training-guard-removed-guard"
    assert "no metric guard named 'removed-guard'" in aws.deliver_alarm(unknown)["ignored"]
    scoped = contributor_event("training-guard-vision-only", "q", {"TrainingJobName": JOB})
    assert "job_prefix does not select" in aws.deliver_alarm(scoped)["ignored"]
    assert aws.notifications() == []
    assert aws.job_status(JOB) == "InProgress"


def test_exempt_jobs_are_not_stopped_by_metric_guards(aws: Emulation) -> None:
    aws.deliver(job_event(tags={"training-guard:exempt": "true"}))
    receipt = aws.deliver_alarm(alarm("contributor_train_loss"))
    assert receipt["outcomes"] == ["would_stop"]
    assert aws.job_status(JOB) == "InProgress"


def test_per_job_alarms_are_created_when_the_job_runs_and_deleted_when_it_ends(aws: Emulation) -> None:
    tags = {LOSS_TAG: "max above 5 3/5 stop", "team": "vision"}
    created = aws.deliver(job_event(tags=tags))
    name = job_alarm_name(JOB, "train:loss")
    assert created["alarms_created"] == [name]
    assert aws.deliver(job_event(tags=tags))["alarms_created"] == []  # once
    described = aws.client("cloudwatch").describe_alarms(AlarmNames=[name])["MetricAlarms"][0]
    assert (described["MetricName"], described["Namespace"]) == ("train:loss", contract.SAGEMAKER_TRAINING_NAMESPACE)
    assert described["Dimensions"] == [{"Name": "TrainingJobName", "Value": JOB}]
    assert (described["Statistic"], described["Threshold"], described["ComparisonOperator"]) == (
        "Maximum",
        5.0,
        "GreaterThanThreshold",
    )
    assert (described["EvaluationPeriods"], described["DatapointsToAlarm"]) == (5, 3)
    ended = aws.deliver(job_event("Completed", tags=tags))
    assert ended["alarms_deleted"] == [name]
    assert aws.alarm_names() == []


def test_a_per_job_alarm_firing_applies_the_tags_action(aws: Emulation) -> None:
    aws.deliver(job_event(tags={LOSS_TAG: "max above 5 3/5 stop"}))
    fired = metric_alarm_event(job_alarm_name(JOB, "train:loss"), "train:loss", {"TrainingJobName": JOB})
    receipt = aws.deliver_alarm(fired)
    assert receipt["stopped"] is True
    [note] = aws.notifications()
    assert note["reason"] == f"tag {LOSS_TAG}: MAX(train:loss) > 5 for 3 of 5 min -> stop"


def test_an_unreadable_guard_tag_is_reported_once(aws: Emulation) -> None:
    event = job_event(tags={LOSS_TAG: "max > 5"})
    aws.deliver(event)
    aws.deliver(event)
    [note] = aws.notifications()
    assert note["kind"] == "guard_tag_invalid"
    assert "expected '<avg|min|max|sum>" in note["reason"]
    assert aws.alarm_names() == []


def test_the_sweeper_deletes_alarms_whose_job_ended_without_an_event(aws: Emulation) -> None:
    aws.deliver(job_event(tags={LOSS_TAG: "max above 5"}))
    assert aws.alarm_names() == [job_alarm_name(JOB, "train:loss")]
    aws.put_job(job_event("Failed")["detail"])  # the end event was lost
    report = aws.sweep()
    assert report["orphaned_alarms_deleted"] == [job_alarm_name(JOB, "train:loss")]
    assert aws.alarm_names() == []


def test_the_sweeper_reports_a_running_job_that_stopped_publishing_metrics(aws: Emulation) -> None:
    aws.deliver(job_event(minutes_ago=30))
    aws.put_metric(JOB, "train:loss", [0.9], at=datetime.now(UTC) - timedelta(minutes=20))  # then silence
    quiet = aws.sweep()
    assert quiet["stalled"] == [JOB]
    [note] = aws.notifications()
    assert note["kind"] == "metric_stall"
    assert note["rule"]["details"] == "no datapoint of train:loss in the last 10 min"
    assert aws.sweep()["stalled"] == []  # once


def stall_stops(aws_with: Callable[[GuardConfig], Emulation]) -> Emulation:
    return aws_with(GuardConfig.from_dict({**CONFIG, "stall": {"minutes": 10, "action": "stop"}}))


def test_a_job_that_published_and_went_quiet_is_stopped_when_stalls_stop(emulation_with: Any) -> None:
    aws = stall_stops(emulation_with)
    aws.deliver(job_event(minutes_ago=30))
    aws.put_metric(JOB, "train:loss", [0.9], at=datetime.now(UTC) - timedelta(minutes=20))
    assert aws.sweep()["stalled"] == [JOB]
    assert aws.job_status(JOB) == "Stopping"


def test_a_job_that_never_published_is_reported_but_never_stopped_for_a_stall(emulation_with: Any) -> None:
    aws = stall_stops(emulation_with)
    aws.deliver(job_event(minutes_ago=30))
    assert aws.sweep()["stalled"] == [JOB]
    assert aws.job_status(JOB) == "InProgress"
    [note] = aws.notifications()
    assert note["outcome"] == "notified"
    assert note["rule"]["details"].startswith("no datapoint of train:loss in 30 min of training")
    assert "never published, so notify only" in note["reason"]


def test_any_declared_metric_keeps_a_job_alive_not_only_the_first(aws: Emulation) -> None:
    definitions = [{"Name": "train:loss", "Regex": "loss=(.*?);"}, {"Name": "val:acc", "Regex": "acc=(.*?);"}]
    aws.deliver(job_event(minutes_ago=30, AlgorithmSpecification={"MetricDefinitions": definitions}))
    aws.put_metric(JOB, "val:acc", [0.7])  # only the second metric moves
    assert aws.sweep()["stalled"] == []


def test_a_job_still_downloading_its_data_is_not_stalled(aws: Emulation) -> None:
    downloading = job_event(minutes_ago=30)
    downloading["detail"]["SecondaryStatus"] = "Downloading"
    aws.deliver(downloading)
    assert aws.sweep()["stalled"] == []


def test_the_stall_window_counts_from_the_start_of_training_not_of_the_download(aws: Emulation) -> None:
    from training_guard_local import sagemaker_ext

    aws.deliver(job_event(minutes_ago=60))  # TrainingStartTime an hour ago ...
    job = sagemaker_ext._backend("123456789012", "us-east-1").training_jobs[JOB]
    job.secondary_status_transitions = [  # ... but 50 minutes of it were the data download
        {"Status": "Downloading", "StartTime": datetime.now(UTC) - timedelta(minutes=60)},
        {"Status": "Training", "StartTime": datetime.now(UTC) - timedelta(minutes=5)},
    ]
    assert aws.sweep()["stalled"] == []


def test_a_deferred_metric_guard_stop_happens_after_the_grace_period_without_a_new_event(
    emulation_with: Any,
) -> None:
    aws = emulation_with(GuardConfig.from_dict({**CONFIG, "min_training_minutes": 60}))
    aws.deliver(job_event(minutes_ago=30))
    aws.put_metric(JOB, "train:loss", [7.5, 9.1])  # diverging, and alive
    fired = aws.deliver_alarm(alarm("contributor_train_loss"))
    assert fired["outcomes"] == ["deferred"]
    # The contributor stays in ALARM: CloudWatch sends no further event. Only the sweep can see it.
    aws.set_contributors("training-guard-loss-diverging", [{"TrainingJobName": JOB}])
    assert aws.sweep()["reconciled"] == []  # still within the grace period: nothing new to say
    assert aws.job_status(JOB) == "InProgress"
    aws.put_job(job_event(minutes_ago=61)["detail"])  # an hour of training has passed
    swept = aws.sweep()
    assert [r["outcomes"] for r in swept["reconciled"]] == [["stopped"]]
    assert aws.job_status(JOB) == "Stopping"
    notes = aws.notifications()
    assert [n["outcome"] for n in notes] == ["deferred", "stopped"]
    aws.finish_stopping(JOB)
    assert aws.sweep()["reconciled"] == []  # exactly once


def test_a_per_job_alarm_that_stays_in_alarm_is_acted_on_after_the_grace_period(emulation_with: Any) -> None:
    aws = emulation_with(GuardConfig.from_dict({**CONFIG, "min_training_minutes": 60}))
    tags = {LOSS_TAG: "max above 5 1/1 stop"}
    aws.deliver(job_event(minutes_ago=30, tags=tags))
    aws.put_metric(JOB, "train:loss", [7.5])
    [name] = aws.alarm_names()
    aws.client("cloudwatch").set_alarm_state(AlarmName=name, StateValue="ALARM", StateReason="Threshold Crossed")
    assert [r["outcomes"] for r in aws.sweep()["reconciled"]] == [["deferred"]]
    aws.put_job(job_event(minutes_ago=61, tags=tags)["detail"])
    assert [r["outcomes"] for r in aws.sweep()["reconciled"]] == [["stopped"]]
    assert aws.job_status(JOB) == "Stopping"


def test_contributors_of_jobs_no_longer_running_are_left_alone(aws: Emulation) -> None:
    aws.deliver(job_event(minutes_ago=30))
    aws.set_contributors("training-guard-loss-diverging", [{"TrainingJobName": "an-ended-job"}])
    assert aws.sweep()["reconciled"] == []


def test_a_job_still_publishing_or_too_young_is_not_stalled(aws: Emulation) -> None:
    aws.deliver(job_event(minutes_ago=30))
    aws.put_metric(JOB, "train:loss", [0.9, 0.8])
    assert aws.sweep()["stalled"] == []
    young = job_event(minutes_ago=3)
    young["detail"]["TrainingJobName"] = "young-job"
    aws.deliver(young)
    assert aws.sweep()["stalled"] == []


def test_the_sweeper_acts_on_a_finding_whose_event_was_lost(aws: Emulation) -> None:
    finding = load_event("vanishing_gradient_issues_found")
    aws.put_job(finding["detail"])  # SageMaker knows; no event reached the guard
    first = aws.sweep()
    assert aws.job_status(finding["detail"]["TrainingJobName"]) == "Stopping"
    assert [r["outcomes"] for r in first["reconciled"]] == [["stopped"]]
    assert aws.sweep()["reconciled"] == []  # nothing new the second time
    assert [n["outcome"] for n in aws.notifications()] == ["stopped"]


def test_one_jobs_failure_does_not_keep_the_others_unswept(aws: Emulation) -> None:
    from tests.faults import THROTTLING, Fault, refuse
    from training_guard.services.sweeper import SweepIncomplete

    for name in ("sweep-a", "sweep-b"):
        finding = load_event("vanishing_gradient_issues_found")
        finding["detail"]["TrainingJobName"] = name
        aws.put_job(finding["detail"])  # two running jobs with findings, no events delivered

    def throttle_a(request: Any) -> Fault | None:
        return THROTTLING if b"sweep-a" in (request.body or b"") else None  # SageMaker refused it: moto never sees it

    refuse(aws.function_client("sagemaker"), "DescribeTrainingJob", throttle_a)
    with pytest.raises(SweepIncomplete, match="1 of 2 running job"):
        aws.sweep()
    assert aws.job_status("sweep-b") == "Stopping"  # swept despite sweep-a's failure
    assert aws.job_status("sweep-a") == "InProgress"  # left for the next sweep, and the error alarm fired
