"""`training-guard demo`: the whole guard, end to end, on an emulated AWS account.

1. synthesizes the real CDK stack with the scenario's configuration;
2. installs the template's EventBridge rules, with their event patterns as synthesized, on an
   emulated bus (moto), each targeting a queue that stands in for its Lambda function; the
   function's handler (from the template) consumes the queue in-process;
3. points the Slack webhook secrets at a Slack-compatible listener on 127.0.0.1 that prints each
   message as Slack would show it;
4. answers the functions' Price List API calls with the scenario's recorded GetProducts answers
   (botocore's Stubber through the real adapter: request, pages, parsing, the state table's cache);
   a type without a recording is priced from the shipped table, else unknown. Nothing reaches AWS;
5. plays the scenario's timeline (SageMaker events, duplicates included; alarms; instance metrics;
   the sweeper: budgets, idle GPUs) with progress, then prints a summary with each job's spend and
   checks the scenario's expectations.
"""

from __future__ import annotations

import importlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from training_guard import contract
from training_guard.metric_guards import fleet_alarm_name, insights_query
from training_guard.pricing import SOURCE_API, table_quote, usd
from training_guard_local import alarm_events
from training_guard_local.emulator import ACCOUNT, REGION, Emulation, handler_output_to_stderr, replay_clock
from training_guard_local.scenario import Job, Scenario, Step
from training_guard_local.slack_listener import SlackListener, render_text


@dataclass
class Route:
    rule: str
    queue_url: str
    handler: str  # module.function, as in the template


@dataclass
class JobState:
    status: str = "InProgress"
    secondary: str = "Starting"
    rules: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    failure_reason: str | None = None


@dataclass
class Outcome:
    saw: list[str] = field(default_factory=list)
    did: list[str] = field(default_factory=list)
    notifications: list[str] = field(default_factory=list)
    slack: int = 0
    stopped_by_guard: bool = False
    spend: dict[str, Any] | None = None  # the latest spend the guard announced for the job (Spend.as_dict)
    avoided: str | None = None  # what its stop avoided, or a would-stop would have ("up to", list price)


SUMMARY_CELL_MAX = 52  # characters; longer cells are cut with an ellipsis (the table stays within ~140 columns)
# What the sweeper finds on its own (no event says it), shown as what the guard saw.
_SWEEP_FINDINGS = ("budget_warning", "budget_exceeded", "idle_gpu")


def _quiet_node_banner() -> None:
    """jsii prints a multi-line end-of-life banner for an old Node.js unless told its version."""
    if "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION" in os.environ:
        return
    try:
        version = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout  # noqa: S607
    except OSError:
        return
    major = version.strip().lstrip("v").split(".")[0]
    if major.isdigit():
        os.environ["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = major


def synthesize(scenario: Scenario) -> dict[str, Any]:
    """The CloudFormation template of the real stack for this configuration (no bundling, no nag)."""
    _quiet_node_banner()
    from aws_cdk import App

    from infra.app import build_app

    context = {"training-guard": json.loads(scenario.config.to_json()), "aws:cdk:bundling-stacks": []}
    app, stack = build_app(App(context=context), checks=False)
    template: dict[str, Any] = app.synth().get_stack_by_name(stack.stack_name).template
    return template


def _clock(minute: float) -> str:
    whole = int(minute)
    return f"+{whole // 60:02d}:{whole % 60:02d}"


def _shown_path(path: Path) -> str:
    """A recording's path as a reader finds it: relative to the current folder when it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _field(body: dict[str, Any], name: str) -> str | None:
    """A field of a Slack message's sections (`*Name*\\nvalue`), as a person reads it."""
    for block in body.get("blocks") or []:
        for item in block.get("fields") or []:
            head, _, value = str(item.get("text", "")).partition("\n")
            if head.strip("*") == name:
                return value.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return None


def routes_from(template: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(rule logical id, event pattern, handler) for every pattern rule in the template."""
    resources = template["Resources"]
    out = []
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::Events::Rule" or "EventPattern" not in resource["Properties"]:
            continue
        for target in resource["Properties"]["Targets"]:
            function_id = target["Arn"]["Fn::GetAtt"][0]
            handler = resources[function_id]["Properties"]["Handler"]
            out.append((logical_id, resource["Properties"]["EventPattern"], handler))
    return out


class Demo:
    def __init__(self, scenario: Scenario, *, out: TextIO | None = None) -> None:
        self.scenario = scenario
        self.out = out or sys.stdout
        self.routes: list[Route] = []
        self.jobs: dict[str, JobState] = {}
        self.outcomes: dict[str, Outcome] = defaultdict(Outcome)
        self.by_name = {job.name: key for key, job in scenario.jobs.items()}
        self.start = datetime.now(UTC).replace(second=0, microsecond=0)
        self._handlers: dict[str, Callable[..., Any]] = {}

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    # --- setup ---------------------------------------------------------------------------------------
    def run(self) -> int:
        started = time.monotonic()
        self.say(f"Training Guard demo: {self.scenario.name}")
        self.say("[1/3] synthesizing the stack (aws-cdk) ...")
        template = synthesize(self.scenario)
        found = routes_from(template)
        self.say(f"      {len(template['Resources'])} resources; {len(found)} event rules to install")
        # The Price List API: recorded answers only, in the emulation's region (none recorded: the shipped table).
        answers = {(REGION, t): recording.pages for t, recording in self.scenario.price_list.items()}
        with SlackListener(on_message=self._slack_message) as slack:
            urls = {name: slack.url(name) for name in self.scenario.config.slack.webhooks}
            with Emulation(self.scenario.config, webhook_urls=urls, price_answers=answers) as aws:
                self.aws = aws
                self.say("[2/3] emulated AWS: moto + SageMaker extension; Slack listener on 127.0.0.1")
                self._say_price_list()
                for rule, pattern, handler in found:
                    self._install(rule, pattern, handler)
                self.say(f"[3/3] playing {len(self.scenario.steps)} steps")
                for step in self.scenario.steps:
                    self._play(step)
                self._collect_final()
        failures = self._check()
        self._summary()
        self.say(f"\ndone in {time.monotonic() - started:.1f} s")
        if failures:
            self.say("\nThe outcome differs from the scenario's expectations:")
            for failure in failures:
                self.say(f"  ✗ {failure}")
            return 1
        self.say("All expectations met.")
        return 0

    def _say_price_list(self) -> None:
        recorded = self.scenario.price_list
        if not recorded:
            self.say("      Price List API: no recorded answer, nothing reaches AWS: shipped price table, else unknown")
            return
        self.say(
            "      Price List API: recorded GetProducts answers played by botocore's Stubber (nothing reaches AWS)"
        )
        for instance_type, recording in recorded.items():
            pages = len(recording.pages)
            self.say(f"        {instance_type}: {_shown_path(recording.path)} ({pages} page{'s' if pages > 1 else ''})")
        self.say("        any other type: no recorded answer, so the shipped price table, else unknown")

    def _install(self, rule: str, pattern: dict[str, Any], handler: str) -> None:
        events = self.aws.client("events")
        sqs = self.aws.client("sqs")
        queue_url = sqs.create_queue(QueueName=f"function-{rule}"[:80])["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_rule(Name=rule, EventPattern=json.dumps(pattern))
        events.put_targets(Rule=rule, Targets=[{"Id": "function", "Arn": queue_arn}])
        self.routes.append(Route(rule, queue_url, handler))
        self.say(f"      rule {rule}: {json.dumps(pattern)} -> {handler}")

    # --- the timeline -----------------------------------------------------------------------------------
    def _stamp(self, step: Step) -> str:
        minutes = int(step.minute)
        return f"[+{minutes // 60:02d}:{minutes % 60:02d}]"

    def _play(self, step: Step) -> None:
        at = self.start + timedelta(minutes=step.minute)
        with replay_clock(at):  # during a step the functions' clock is the step's time
            self._play_at(step, at)

    def _play_at(self, step: Step, at: datetime) -> None:
        if step.note:
            self.say(f"\n{self._stamp(step)} {step.note}")
        if step.status:
            assert step.job is not None
            self._job_event(self.scenario.jobs[step.job], step, at)
        elif step.alarm:
            assert step.job is not None
            self._alarm(self.scenario.jobs[step.job], step, at)
        elif step.sagemaker == "finish_stopping":
            assert step.job is not None
            job = self.scenario.jobs[step.job]
            if self.aws.finish_stopping(job.name):
                self.say(f"{self._stamp(step)} {job.key}: SageMaker finished stopping the job")
                state = self.jobs.setdefault(job.key, JobState())
                state.status, state.secondary = "Stopped", "Stopped"
                self._send(self._state_event(job, state, at), job, deliveries=1)
        elif step.publish:
            assert step.job is not None
            job = self.scenario.jobs[step.job]
            for metric, values in step.publish.items():
                self.aws.put_metric(job.name, metric, values, at=at)
            shown = "; ".join(f"{m} = {', '.join(f'{v:g}' for v in vs)}" for m, vs in step.publish.items())
            self.say(f"{self._stamp(step)} {job.key}: SageMaker publishes {shown}")
        elif step.host_metrics:
            assert step.job is not None
            self._host_metrics(self.scenario.jobs[step.job], step, at)
        elif step.sweep:
            self.say(f"{self._stamp(step)} sweeper: scheduled run")
            report = self.aws.sweep()
            self.say(
                f"         guard: {report['running']} running job(s), {len(report['reconciled'])} reconciled, "
                f"{len(report['stalled'])} stalled, {len(report['orphaned_alarms_deleted'])} orphaned alarm(s) deleted"
            )
            found = [
                ("budget warning", report.get("budget_warnings")),
                ("over budget", report.get("over_budget")),
                ("idle GPUs", report.get("idle_gpus")),
            ]
            said = [f"{what}: {', '.join(self.by_name.get(j, j) for j in jobs)}" for what, jobs in found if jobs]
            said += [f"not judged: {self.by_name.get(j, j)} ({why})" for j, why in report.get("not_judged", {}).items()]
            if said:
                self.say("         guard: " + "; ".join(said))
        self._drain()
        self.aws.pump_chat(rounds=2)

    def _job_event(self, job: Job, step: Step, at: datetime) -> None:
        state = self.jobs.setdefault(job.key, JobState())
        state.status = step.status or state.status
        state.secondary = step.secondary or ("Training" if state.status == "InProgress" else state.status)
        state.rules.update(step.rules)
        state.details.update(step.details)
        state.failure_reason = step.failure_reason or state.failure_reason
        rules = ", ".join(f"{r}={s}" for r, s in state.rules.items()) or "no Debugger rules"
        times = f" (delivered {step.deliveries}x)" if step.deliveries > 1 else ""
        self.say(f"{self._stamp(step)} {job.key}: {state.status}/{state.secondary}; {rules}{times}")
        for rule, status in step.rules.items():
            if status in ("IssuesFound", "Error"):
                self.outcomes[job.key].saw.append(f"{rule} {status}")
        if step.status in ("Completed", "Failed"):
            self.outcomes[job.key].saw.append(step.status)
        event = self._state_event(job, state, at)
        if self.aws.job_status(job.name) in ("Stopping", "Stopped") and state.status == "InProgress":
            event["detail"]["TrainingJobStatus"] = self.aws.job_status(job.name)
        self._send(event, job, deliveries=step.deliveries)

    def _state_event(self, job: Job, state: JobState, at: datetime) -> dict[str, Any]:
        ms = int(at.timestamp() * 1000)
        started = int(self.start.timestamp() * 1000)
        arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{job.name}"
        detail: dict[str, Any] = {
            "TrainingJobName": job.name,
            "TrainingJobArn": arn,
            "TrainingJobStatus": state.status,
            "SecondaryStatus": state.secondary,
            "AlgorithmSpecification": {
                "TrainingInputMode": "File",
                "MetricDefinitions": [{"Name": m, "Regex": f"{m.split(':')[-1]}=(.*?);"} for m in job.metrics],
            },
            "ResourceConfig": {
                "InstanceType": job.instance_type,
                "InstanceCount": job.instance_count,
                "VolumeSizeInGB": 30,
            },
            "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
            "CreationTime": started,
            "TrainingStartTime": started + 60_000,
            "LastModifiedTime": ms,
            "Tags": dict(job.tags),
        }
        if state.status not in ("InProgress", "Stopping"):
            detail["TrainingEndTime"] = ms
        if state.failure_reason:
            detail["FailureReason"] = state.failure_reason
        if state.rules:
            detail["DebugRuleEvaluationStatuses"] = [
                self._rule(job, rule, status, state.details.get(rule), ms)
                for rule, status in state.rules.items()
                if rule not in job.profiler_rules
            ]
            detail["ProfilerRuleEvaluationStatuses"] = [
                self._rule(job, rule, status, state.details.get(rule), ms)
                for rule, status in state.rules.items()
                if rule in job.profiler_rules
            ]
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": contract.TRAINING_JOB_STATE_CHANGE,
            "source": contract.SAGEMAKER_EVENT_SOURCE,
            "account": ACCOUNT,
            "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": REGION,
            "resources": [arn],
            "detail": detail,
        }

    @staticmethod
    def _rule(job: Job, rule: str, status: str, details: str | None, ms: int) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "RuleConfigurationName": rule,
            "RuleEvaluationJobArn": (
                f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:processing-job/{job.name[:40]}-{rule.lower()[:16]}"
            ),
            "RuleEvaluationStatus": status,
            "LastModifiedTime": ms,
        }
        if details:
            entry["StatusDetails"] = details
        return entry

    def _host_metrics(self, job: Job, step: Step, at: datetime) -> None:
        """Instance metrics per host, one datapoint a minute up to the step's minute (as SageMaker publishes them)."""
        for metric, hosts in step.host_metrics.items():
            for host, values in hosts.items():
                self.aws.put_host_metric(job.name, host, metric, values, until=at)
                first = step.minute - len(values) + 1
                shown = ", ".join(f"{v:g}" for v in values[:6]) + (", …" if len(values) > 6 else "")
                self.say(
                    f"{self._stamp(step)} {job.key}: SageMaker publishes {metric} of {job.name}/{host}, one a minute "
                    f"from {_clock(first)}: {shown} (mean {statistics.fmean(values):.1f})"
                )

    def _alarm(self, job: Job, step: Step, at: datetime) -> None:
        guard = self.scenario.config.metric_guard(step.alarm or "")
        assert guard is not None
        self.say(f"{self._stamp(step)} {job.key}: CloudWatch alarm {fleet_alarm_name(guard)} -> ALARM for this job")
        self.outcomes[job.key].saw.append(f"{guard.metric} alarm")
        dimension = contract.HOST_DIMENSION if guard.instance_metric else contract.JOB_DIMENSION
        value = f"{job.name}/algo-1" if guard.instance_metric else job.name
        reason = step.reason or f"Threshold Crossed: 3 datapoints were beyond the threshold ({guard.threshold:g})."
        event = alarm_events.contributor_event(
            fleet_alarm_name(guard), insights_query(guard), {dimension: value}, reason=reason, at=at
        )
        self._put(event)

    def _send(self, event: dict[str, Any], job: Job, *, deliveries: int) -> None:
        self.aws.put_job(event["detail"])  # SageMaker's own view follows its events (a stop is not undone)
        for _ in range(deliveries):
            self._put(event)

    def _put(self, event: dict[str, Any]) -> None:
        self.aws.client("events").put_events(
            Entries=[
                {
                    "Source": event["source"],
                    "DetailType": event["detail-type"],
                    "Detail": json.dumps(event["detail"]),
                    "Resources": event["resources"],
                    "Time": datetime.fromisoformat(event["time"].replace("Z", "+00:00")),
                }
            ]
        )

    def _handler(self, path: str) -> Callable[..., Any]:
        if path not in self._handlers:
            module, function = path.rsplit(".", 1)
            with handler_output_to_stderr():
                self._handlers[path] = getattr(importlib.import_module(module), function)
        return self._handlers[path]

    def _drain(self) -> None:
        """The emulated Lambda service: every routed event to its real handler, in order."""
        sqs = self.aws.client("sqs")
        for route in self.routes:
            while True:
                messages = sqs.receive_message(QueueUrl=route.queue_url, MaxNumberOfMessages=10).get("Messages", [])
                if not messages:
                    break
                for message in messages:
                    event = json.loads(message["Body"])
                    event.setdefault("account", ACCOUNT)  # moto omits it; EventBridge always sets it
                    receipt = self.aws.invoke(self._handler(route.handler), event, self.aws.context(route.rule))
                    self._react(receipt)
                    sqs.delete_message(QueueUrl=route.queue_url, ReceiptHandle=message["ReceiptHandle"])
        for note in self.aws.notifications():
            key = self.by_name.get(note["job"]["name"])
            if key:  # what the guard did, one outcome per notification (stalls, budgets, idle GPUs included)
                self._note(self.outcomes[key], note)

    def _note(self, got: Outcome, note: dict[str, Any]) -> None:
        got.notifications.append(note["kind"])
        got.did.append(note["outcome"])
        if note["outcome"] == "stopped":  # the sweeper's stops (a budget) have no receipt of their own here
            got.stopped_by_guard = True
        rule = note.get("rule") or {}
        if note["kind"] in _SWEEP_FINDINGS and rule:
            got.saw.append(f"{rule.get('name')} {rule.get('status')}")
        spend = note.get("spend")
        if isinstance(spend, dict):
            got.spend = spend
            if spend.get("avoided_label") and note["outcome"] in ("stopped", "would_stop"):
                avoided = usd(spend.get("avoided_usd"))
                shown = f"up to {avoided}" if avoided else "unknown"
                got.avoided = f"would: {shown}" if note["outcome"] == "would_stop" else shown

    def _react(self, receipt: dict[str, Any]) -> None:
        key = self.by_name.get(receipt.get("job", ""), receipt.get("job", "?"))
        parts = []
        if receipt.get("stopped"):
            parts.append("StopTrainingJob called")
            self.outcomes[key].stopped_by_guard = True
        for kind, outcome in zip(receipt.get("notifications", []), receipt.get("outcomes", []), strict=False):
            parts.append(f"{outcome} ({kind})")
        if receipt.get("duplicates"):
            parts.append(f"{receipt['duplicates']} duplicate(s) ignored")
        if receipt.get("alarms_created"):
            parts.append(f"per-job alarm created: {', '.join(receipt['alarms_created'])}")
        if receipt.get("alarms_deleted"):
            parts.append(f"per-job alarm deleted: {', '.join(receipt['alarms_deleted'])}")
        if receipt.get("ignored"):
            parts.append(f"ignored: {receipt['ignored']}")
        if parts:
            self.say("         guard: " + "; ".join(parts))

    def _slack_message(self, channel: str, body: dict[str, Any]) -> None:
        text = render_text(body).splitlines()
        channel = channel.removesuffix("-secret-token")
        self.say(f"         slack #{channel} │ {text[0] if text else ''}")
        for line in text[2:4]:
            self.say(f"                  │ {line[:110]}")
        spent = _field(body, "Spend")
        if spent:
            self.say(f"                  │ Spend: {spent}")
        title = body.get("blocks", [{}])[0].get("text", {}).get("text", "")
        for name, key in self.by_name.items():
            if name in title:
                self.outcomes[key].slack += 1

    # --- results -----------------------------------------------------------------------------------------
    def _collect_final(self) -> None:
        self.final = {key: self.aws.job_status(job.name) for key, job in self.scenario.jobs.items()}

    def _check(self) -> list[str]:
        failures = []
        for key, expected in self.scenario.expect.items():
            got = self.outcomes[key]
            if expected.stopped_by_guard is not None and got.stopped_by_guard != expected.stopped_by_guard:
                failures.append(
                    f"{key}: stopped by the guard {got.stopped_by_guard}, expected {expected.stopped_by_guard}"
                )
            if expected.final_status is not None and self.final.get(key) != expected.final_status:
                failures.append(f"{key}: final status {self.final.get(key)}, expected {expected.final_status}")
            if expected.notifications is not None and tuple(got.notifications) != expected.notifications:
                failures.append(f"{key}: notifications {got.notifications}, expected {list(expected.notifications)}")
        return failures

    def _summary(self) -> None:
        rows = [("job", "what the guard saw", "what it did", "spent so far", "avoided", "Slack", "status")]
        for key in self.scenario.jobs:
            got = self.outcomes[key]
            saw = ", ".join(dict.fromkeys(got.saw)) or "-"
            did = ", ".join(got.did) or "nothing"
            spent = "-" if got.spend is None else usd(got.spend.get("so_far_usd")) or "unknown"
            rows.append((key, saw, did, spent, got.avoided or "-", str(got.slack), str(self.final.get(key))))
        widths = [min(max(len(r[i]) for r in rows), SUMMARY_CELL_MAX) for i in range(len(rows[0]))]
        self.say("\nSummary")
        for i, row in enumerate(rows):
            cells = [
                (c if len(c) <= widths[j] else c[: widths[j] - 1] + "…").ljust(widths[j]) for j, c in enumerate(row)
            ]
            self.say("  " + " │ ".join(cells))
            if i == 0:
                self.say("  " + "─┼─".join("─" * w for w in widths))
        self._prices()

    def _prices(self) -> None:
        """Where each price in the spend columns came from, as the guard reported it, and what that source is here."""
        quotes: dict[str, dict[str, Any]] = {}
        unknown: dict[str, str] = {}
        for got in self.outcomes.values():
            spend = got.spend or {}
            for quote in spend.get("prices") or []:
                quotes.setdefault(str(quote.get("instance_type")), quote)
            for instance_type in spend.get("unknown_instance_types") or []:
                unknown.setdefault(str(instance_type), "; ".join(str(n) for n in spend.get("notes") or []))
        if not quotes and not unknown:
            return
        self.say("  Spend: list prices, estimated until a job ends. The prices:")
        for instance_type, quote in quotes.items():
            where = (
                "the Price List API: here its recorded answer, played by botocore's Stubber"
                if quote.get("source") == SOURCE_API
                else "the shipped price table"
            )
            date = f" ({quote['as_of']})" if quote.get("as_of") else ""
            self.say(f"    {instance_type}: ${quote.get('usd_per_hour'):g} an hour{date}, from {where}")
        for instance_type, why in unknown.items():
            missing = [] if instance_type in self.scenario.price_list else ["no recorded answer"]
            missing += [] if table_quote(REGION, instance_type) else ["no entry in the shipped price table"]
            self.say(
                f"    {instance_type}: unknown ({why or 'no price'})" + (f": {', '.join(missing)}" if missing else "")
            )
