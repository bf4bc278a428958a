"""One notification per transition, rendered for each channel. Pure.

`Notification` is the versioned document (`training-guard.notification/1`); `email_text` and `subject` its prose."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any
from urllib.parse import quote

from training_guard import contract
from training_guard.config.frozen import frozen
from training_guard.domain.events import Finding, JobEvent, TrainingJob
from training_guard.domain.outcome import STOP_OUTCOMES, Outcome
from training_guard.domain.policy import BUDGET, Decision, Kind
from training_guard.domain.pricing import Spend, spend_line
from training_guard.domain.text import clock, ended_status, format_duration, person, status_text

SUBJECT_MAX_CHARS = 99  # SNS: subjects must be under 100 characters
_SMS_MAX_CHARS = 140


_SEVERITY = {
    Outcome.STOPPED: "critical",
    Outcome.WOULD_STOP: "warning",
    Outcome.DEFERRED: "warning",
    Outcome.ALREADY_ENDED: "warning",
    Outcome.ALREADY_STOPPING: "warning",
}
_KIND_SEVERITY = {
    Kind.ISSUES_FOUND: "warning",
    Kind.RULE_ERROR: "warning",
    Kind.JOB_FAILED: "critical",
    Kind.JOB_STOPPED: "info",
    Kind.JOB_COMPLETED: "info",
    Kind.SPOT_INTERRUPTED: "info",
    Kind.METRIC_ALARM: "warning",
    Kind.METRIC_STALL: "warning",
    Kind.LOG_RULE: "warning",
    Kind.GUARD_TAG_INVALID: "warning",
    Kind.BUDGET_WARNING: "warning",
    Kind.BUDGET_EXCEEDED: "warning",
    Kind.IDLE_GPU: "warning",
    Kind.STOP_REQUESTED: "warning",
}


class Notice(StrEnum):
    """Notifications about the guard itself, not about a job (no policy decision is behind them)."""

    # One marked message through the deployed path, to every channel (slack_messages.TEST_KIND spells it too).
    TEST = "test"
    DIGEST = contract.DIGEST_KIND


TEST_TITLE_PREFIX = "Test notification"


@frozen
class Notification:
    kind: Kind | Notice
    outcome: Outcome
    severity: str
    title: str
    reason: str
    job: TrainingJob
    finding: Finding | None
    account: str | None
    region: str | None
    event_id: str
    time: datetime
    dry_run: bool
    transition: str = ""
    # What the job cost so far and, for a stop or would-stop, what stopping avoids; None: about no job (a test).
    spend: Spend | None = None
    # The weekly digest's numbers (digest.document): the document's `digest` object; None for any other kind.
    digest: Mapping[str, Any] | None = None

    def spend_document(self) -> dict[str, Any] | None:
        """`Spend.as_dict`, spend avoided only where a stop is in question (elsewhere null: not applicable)."""
        if self.spend is None:
            return None
        spend = self.spend if self.outcome in STOP_OUTCOMES else self.spend.without_avoided()
        return spend.as_dict()

    def document(self) -> dict[str, Any]:
        job = self.job
        training = job.training_seconds(self.time)
        doc: dict[str, Any] = {
            "schema": contract.NOTIFICATION_SCHEMA,
            "kind": self.kind.value,
            "outcome": self.outcome.value,
            "severity": self.severity,
            "title": self.title,
            "reason": self.reason,
            "time": self.time.isoformat(),
            "account": self.account,
            "region": self.region,
            "event_id": self.event_id,
            "transition": self.transition,
            "dry_run": self.dry_run,
            "job": {
                "name": job.name,
                "arn": job.arn,
                "status": job.status,
                "secondary_status": job.secondary_status,
                "failure_reason": job.failure_reason,
                "instance_type": job.instance_type,
                "instance_count": job.instance_count,
                "training_seconds": round(training) if training is not None else None,
                "tuning_job_arn": job.tuning_job_arn,
                "tags": dict(job.tags),
            },
            "rule": None,
            "spend": self.spend_document(),
            "links": self.links(),
        }
        if self.finding is not None:
            doc["rule"] = {
                "name": self.finding.name,
                "kind": self.finding.source,
                "status": self.finding.status,
                "details": self.finding.details,
                "evaluation_job_arn": self.finding.evaluation_job_arn,
            }
        if self.digest is not None:
            doc["digest"] = dict(self.digest)
        return doc

    def links(self) -> dict[str, str]:
        """Console links for the job; a test notification and a digest are about no job, so they have none."""
        return {} if isinstance(self.kind, Notice) else links(self.job.name, self.region, self.finding)

    def subject(self) -> str:
        # SNS subjects are ASCII without line breaks; job and rule names are ASCII already.
        text = f"Training Guard: {self.title}".encode("ascii", "replace").decode()
        text = " ".join(text.split())
        return text if len(text) <= SUBJECT_MAX_CHARS else text[: SUBJECT_MAX_CHARS - 3] + "..."

    def sms_text(self) -> str:
        text = f"Training Guard: {self.title}"
        return text if len(text) <= _SMS_MAX_CHARS else text[: _SMS_MAX_CHARS - 3] + "..."

    def email_text(self) -> str:
        if self.kind is Notice.DIGEST and self.digest is not None:
            # imported here: only the weekly digest renders one (~5 ms of every other function's cold start)
            from training_guard.render.digest import email_text as digest_email_text

            return digest_email_text(self.digest, account=self.account, region=self.region, dry_run=self.dry_run)
        if self.kind is Notice.TEST:
            return "\n".join(
                [
                    self.title,
                    "",
                    self.reason,
                    "",
                    f"Account:   {self.account or '-'}   Region: {self.region or '-'}",
                    "",
                    f"Test {self.event_id} at {clock(self.time)}. No training job was looked at or touched.",
                ]
            )
        job = self.job
        lines = [self.title, "", f"Why: {in_words(self.reason, self.finding)}", ""]
        lines.append(f"Job:       {job.name}")
        lines.append(f"Status:    {status_text(job.status, job.secondary_status, self.outcome.value)}")
        if job.failure_reason and job.failure_reason != self.reason:
            lines.append(f"Failure:   {job.failure_reason}")
        if job.instance_type:
            lines.append(f"Instances: {job.instance_count or 1} x {job.instance_type}")
        training = job.training_seconds(self.time)
        if training is not None:
            lines.append(f"Trained:   {format_duration(training)}")
        spent = spend_line(self.spend_document(), self.outcome.value, self.kind.value)
        if spent:
            lines.append(f"Spend:     {spent}")
        lines.append(f"Account:   {self.account or '-'}   Region: {self.region or '-'}")
        who = person(self.finding.name, slack=False) if self.finding is not None else None
        if self.finding is not None and who is not None:
            lines += ["", f"Stop now:  pressed by {who}"]
        elif self.finding is not None:
            label = f"{finding_label(self.finding.source)}:"
            lines += ["", f"{label:<11}{self.finding.name} ({self.finding.source}) -> {self.finding.status}"]
            if self.finding.details:
                lines.append(f"Details:   {self.finding.details}")
        if self.dry_run:
            lines += ["", "The guard is in dry-run mode: it stops nothing."]
        lines.append("")
        for label, url in self.links().items():
            lines.append(f"{label}: {url}")
        lines += ["", f"Event {self.event_id} at {clock(self.time)}."]
        return "\n".join(lines)


def build(
    event: JobEvent,
    job: TrainingJob,
    decision: Decision,
    outcome: Outcome,
    *,
    now: datetime,
    dry_run: bool,
    spend: Spend | None = None,
) -> Notification:
    severity = _SEVERITY.get(outcome) or _KIND_SEVERITY[decision.kind]
    return Notification(
        kind=decision.kind,
        outcome=outcome,
        severity=severity,
        title=title(decision.kind, outcome, job, decision.finding),
        reason=decision.reason,
        job=job,
        finding=decision.finding,
        account=event.account,
        region=event.region,
        event_id=event.event_id,
        time=now,
        dry_run=dry_run,
        transition=decision.key,
        spend=spend,
    )


def make_test_notification(
    *, test_id: str, stack: str, sent_by: str, account: str | None, region: str | None, now: datetime
) -> Notification:
    """The notification `training-guard test-notification` publishes: a test, about no job, to every channel."""
    return Notification(
        kind=Notice.TEST,
        outcome=Outcome.NOTIFIED,
        severity="info",
        title=f"{TEST_TITLE_PREFIX} from Training Guard ({stack}): nothing happened to any job",
        reason=f"Sent by `training-guard test-notification` as {sent_by} to check that notifications arrive.",
        # The document's schema has a job; this one names the test, so that Q Developer threads it on its own.
        job=TrainingJob(name=f"training-guard-test-{test_id}", status="Test"),
        finding=None,
        account=account,
        region=region,
        event_id=test_id,
        time=now,
        dry_run=False,
        transition=f"test#{test_id}",
    )


def in_words(text: str, finding: Finding | None) -> str:
    """`text` with the person behind a Stop now (`slack:<user id>`) named in words, as e-mail and SMS show them."""
    who = person(finding.name, slack=False) if finding is not None else None
    return text.replace(finding.name, who) if finding is not None and who else text


def finding_label(source: str | None) -> str:
    """What a finding is called where it is shown: a budget's is its budget, anything else a rule (or guard's)."""
    return "Budget" if source == BUDGET else "Rule"


_GUARD_TITLES = {
    Outcome.STOPPED: "Stopped {name}: {what}",
    Outcome.WOULD_STOP: "Would have stopped {name}: {what}",
    Outcome.DEFERRED: "{name}: {what}; stop deferred",
    Outcome.ALREADY_ENDED: "{name}: {what} (job already {ended})",
    Outcome.ALREADY_STOPPING: "{name}: {what} (already being stopped)",
}


def title(kind: Kind, outcome: Outcome, job: TrainingJob, rule: Finding | None) -> str:
    name = job.name
    rule_name = rule.name if rule else "?"
    details = rule.details if rule and rule.details else None
    guarded = {
        Kind.METRIC_ALARM: f"metric guard {rule_name} fired",
        Kind.METRIC_STALL: "no new metrics",
        Kind.LOG_RULE: f"log rule {rule_name}: {details}" if details else f"log rule {rule_name} fired",
        Kind.BUDGET_WARNING: f"budget warning: {details or 'most of its budget spent'}",
        Kind.BUDGET_EXCEEDED: details or "its budget is spent",
        Kind.IDLE_GPU: "GPUs idle",
    }.get(kind)
    if guarded is not None:
        ended = ended_status(job.status)
        return _GUARD_TITLES.get(outcome, "{name}: {what}").format(name=name, what=guarded, ended=ended)
    if kind is Kind.STOP_REQUESTED:
        who = person(rule_name, slack=False) or rule_name
        return {
            Outcome.STOPPED: f"Stopped {name}: {who} pressed Stop now",
            Outcome.WOULD_STOP: f"Did not stop {name}: {who} pressed Stop now",
            Outcome.ALREADY_ENDED: f"{name} had already ended ({ended_status(job.status)}) when {who} pressed Stop now",
            Outcome.ALREADY_STOPPING: f"{name} is already being stopped ({who} pressed Stop now)",
        }.get(outcome, f"{who} pressed Stop now for {name}")
    if kind is Kind.ISSUES_FOUND:
        return {
            Outcome.STOPPED: f"Stopped {name}: rule {rule_name} found issues",
            Outcome.WOULD_STOP: f"Would have stopped {name}: rule {rule_name} found issues",
            Outcome.DEFERRED: f"Rule {rule_name} found issues in {name}: stop deferred",
            Outcome.ALREADY_ENDED: f"Rule {rule_name} found issues in {name} (job already {ended_status(job.status)})",
            Outcome.ALREADY_STOPPING: f"Rule {rule_name} found issues in {name} (already being stopped)",
        }.get(outcome, f"Rule {rule_name} found issues in {name}")
    return {
        Kind.RULE_ERROR: f"Rule {rule_name} failed on {name}",
        Kind.JOB_FAILED: f"Training job {name} failed",
        Kind.JOB_STOPPED: f"Training job {name} stopped",
        Kind.JOB_COMPLETED: f"Training job {name} completed",
        Kind.SPOT_INTERRUPTED: f"Training job {name} was interrupted (spot)",
        Kind.GUARD_TAG_INVALID: f"Budget tag of {name} could not be read"
        if rule and rule.source == BUDGET
        else f"Per-job guard tags of {name} could not be read",
    }[kind]


def links(job_name: str, region: str | None, rule: Finding | None = None) -> dict[str, str]:
    if not region:
        return {}
    console = f"https://{region}.console.aws.amazon.com"
    out = {
        "Job": f"{console}/sagemaker/home?region={region}#/jobs/{quote(job_name)}",
        "Logs": _log_streams_url(console, region, contract.TRAINING_LOG_GROUP, f"{job_name}/"),
    }
    if rule is not None and rule.evaluation_job_arn and "/" in rule.evaluation_job_arn:
        rule_job = rule.evaluation_job_arn.rsplit("/", 1)[1]
        out["Rule logs"] = _log_streams_url(console, region, contract.RULE_JOB_LOG_GROUP, f"{rule_job}/")
    return out


def _log_streams_url(console: str, region: str, group: str, prefix: str) -> str:
    # The CloudWatch console fragment escapes '%' as '$25': '/' is '$252F', '?' '$3F', '=' '$3D'.
    def esc(text: str) -> str:
        return quote(text, safe="").replace("%", "$25")

    return (
        f"{console}/cloudwatch/home?region={region}#logsV2:log-groups/log-group/{esc(group)}"
        f"$3FlogStreamNameFilter$3D{esc(prefix)}"
    )


def thread_id(job: str, account: object, members: Collection[str]) -> str:
    """Q Developer's thread of a job: the hub's (and a single account's) as before, a member's with its account."""
    if isinstance(account, str) and account in members:
        return f"training-guard/{account}/{job}"
    return f"training-guard/{job}"


_Q_MAX_DESCRIPTION = 3500  # leave room under Q Developer's message size for the rest


def q_developer_notification(doc: dict[str, Any], *, members: Collection[str] = ()) -> dict[str, Any]:
    """The document as an Amazon Q Developer custom notification (it drops payloads it does not recognise).

    One thread per job: `training-guard/<job>`, or `training-guard/<account>/<job>` for a member's job."""
    job = doc["job"]
    rule = doc.get("rule") or {}
    status = status_text(job.get("status"), job.get("secondary_status"), doc.get("outcome"))
    who = person(rule.get("name"), slack=False)
    reason = str(doc["reason"]).replace(str(rule["name"]), who) if who else doc["reason"]
    lines = [f"*Why:* {reason}", f"*Job:* `{job['name']}` ({status})"]
    if doc["kind"] == Notice.DIGEST and isinstance(doc.get("digest"), Mapping):
        from training_guard.render.digest import markdown as digest_markdown

        lines = [digest_markdown(doc["digest"])]
    elif who:
        lines.append(f"*Stop now:* pressed by {who}")
    elif rule:
        lines.append(f"*{finding_label(rule.get('kind'))}:* {rule['name']} ({rule['kind']}) → {rule['status']}")
        if rule.get("details"):
            lines.append(f"> {rule['details']}")
    if job.get("failure_reason"):
        lines.append(f"*Failure:* {job['failure_reason']}")
    spent = spend_line(doc.get("spend"), str(doc.get("outcome")), str(doc.get("kind")))
    if spent:
        lines.append(f"*Spend:* {spent}")
    if doc.get("dry_run"):
        lines.append("_Dry run: the guard stops nothing._")
    description = "\n".join(lines)
    if len(description) > _Q_MAX_DESCRIPTION:
        description = description[: _Q_MAX_DESCRIPTION - 1] + "…"
    marker = {"critical": ":red_circle:", "warning": ":large_orange_circle:"}.get(
        doc["severity"], ":information_source:"
    )
    return {
        "version": "1.0",
        "source": "custom",
        "id": doc["event_id"] or doc.get("transition", ""),
        "content": {
            "textType": "client-markdown",
            "title": f"{marker} {doc['title']}",
            "description": description,
            "nextSteps": [f"<{url}|{label}>" for label, url in (doc.get("links") or {}).items()],
            "keywords": [doc["kind"], doc["outcome"], doc["severity"]],
        },
        "metadata": {
            "threadId": thread_id(job["name"], doc.get("account"), members),
            "summary": doc["title"],
            "eventType": f"TrainingGuard.{doc['kind']}",
            "relatedResources": [job["arn"]] if job.get("arn") else [],
            "additionalContext": {"outcome": doc["outcome"], "severity": doc["severity"]},
        },
    }
