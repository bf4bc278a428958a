"""`training-guard demo`: the whole guard, end to end, on an emulated AWS account.

1. synthesizes the real CDK stack with the scenario's configuration (reusing the template of an earlier run of the
   very same sources and configuration: template_cache.py);
2. installs the template's EventBridge rules, with their event patterns as synthesized, on an
   emulated bus (moto), each targeting a queue that stands in for its Lambda function; the
   function's handler (from the template) consumes the queue in-process;
3. points the Slack webhook secrets at a Slack-compatible listener on 127.0.0.1 that prints each
   message as Slack would show it;
4. answers the functions' Price List API calls with the scenario's recorded GetProducts answers
   (botocore's Stubber through the real adapter: request, pages, parsing, the state table's cache);
   a type without a recording is priced from the shipped table, else unknown. Nothing reaches AWS;
5. reads the template's subscription to the training log group (its filter pattern and function): a job's log lines
   are written to the emulated group and delivered to that function as CloudWatch Logs sends them (demo_logs.py);
6. plays the scenario's timeline (SageMaker events, duplicates included; alarms; instance metrics;
   log lines; the sweeper: budgets, idle GPUs) with progress, then prints a summary with each job's spend and
   checks the scenario's expectations.

With an `organization` in the configuration the demo is a hub and its member accounts (docs/organization.md), all on
moto: the hub stack's rules on the hub's default bus and on the hub bus; in every member account (and in an outsider
of the organization's units, where the StackSet puts the member stack too) the member stack's role, created from the
template, and its forwarding rules on the account's default bus, which send each job's events to the hub bus keeping
their account. The hub's functions act in a member only through a session AssumeRole hands out for that member's role;
the summary groups the jobs by account and says through which role each was stopped.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import statistics
import sys
import tempfile
import textwrap
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from training_guard import contract
from training_guard.domain.metric_guards import fleet_alarm_name, insights_query
from training_guard.domain.pricing import SOURCE_API, table_quote, usd
from training_guard_local import accounts_ext, alarm_events, logs_ext, metric_widget_ext, sagemaker_ext, template_cache
from training_guard_local.cdk_run import quiet_node_banner
from training_guard_local.demo_logs import DemoLogs
from training_guard_local.demo_slack_app import AppSlack, NoButton
from training_guard_local.emulator import ACCOUNT, REGION, Emulation, replay_clock
from training_guard_local.scenario import HUB_CREDENTIALS, ClickStep, Job, Scenario, Step
from training_guard_local.slack_listener import SlackListener, render_text

DEFAULT_BUS = "default"
PARTITION = "aws"
# What the hub's receipt says of an event from an account it does not guard (handlers/receipts.py), and the metric it
# counts such events in.


@dataclass
class Route:
    rule: str
    queue_url: str
    handler: str  # module.function, as in the template
    bus: str = DEFAULT_BUS


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
    ignored: int = 0  # events of the job the guard ignored as another account's
    stopped_via: str | None = None  # the role ARN of the StopTrainingJob call, or HUB_CREDENTIALS
    stopped_by_click: bool = False  # a click's Stop now made a StopTrainingJob call
    stopped_by: str | None = None  # the job's training-guard:stopped-by tag at the end
    stop_calls: int = 0  # StopTrainingJob calls made for the job
    parents: dict[str, int] = field(default_factory=dict)  # app mode: channel ID -> parent messages about the job


SUMMARY_CELL_MAX = 52  # characters; longer cells are cut with an ellipsis (the table stays within ~140 columns)
# What the sweeper finds on its own (no event says it), shown as what the guard saw.
_SWEEP_FINDINGS = ("budget_warning", "budget_exceeded", "idle_gpu", "metric_stall")


def synthesize(scenario: Scenario) -> dict[str, Any]:
    """The CloudFormation template of the real stack for this configuration (no bundling, no nag); a hub's with an
    organization."""
    return synthesize_stacks(scenario)[0]


def synthesize_stacks(scenario: Scenario) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The stack's template, and with an organization the member stack's too (the same app builds both)."""
    template, member, _ = synthesized(scenario)
    return template, member


def synthesized(scenario: Scenario) -> tuple[dict[str, Any], dict[str, Any] | None, Path | None]:
    """`synthesize_stacks`, and where the templates were kept from an earlier synthesis of the very same sources and
    configuration (template_cache.py), or None when they were synthesized now."""
    context = {"training-guard": json.loads(scenario.config.to_json()), "aws:cdk:bundling-stacks": []}
    cache, name = template_cache.folder(), template_cache.key(context)
    kept = template_cache.load(cache, name)
    if kept is not None and len(kept) == 2 and isinstance(kept[0], dict):  # [template, member]
        assert cache is not None
        return kept[0], kept[1], cache / f"{name}.json"
    quiet_node_banner()
    from aws_cdk import App

    from infra.app import build_app

    app, stack = build_app(App(context=context), checks=False)
    assembly = app.synth()
    template: dict[str, Any] = assembly.get_stack_by_name(stack.stack_name).template
    member: dict[str, Any] | None = None
    if scenario.config.organization is not None:
        from infra.organization.names import MEMBER_STACK_NAME

        member = assembly.get_stack_by_name(MEMBER_STACK_NAME).template
    template_cache.store(cache, name, [template, member])
    return template, member, None


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


def routes_from(template: dict[str, Any]) -> list[tuple[str, dict[str, Any], str, str]]:
    """(rule logical id, event pattern, handler, bus name) for every pattern rule in the template."""
    resources = template["Resources"]
    out = []
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::Events::Rule" or "EventPattern" not in resource["Properties"]:
            continue
        bus = resource["Properties"].get("EventBusName", DEFAULT_BUS)
        if isinstance(bus, dict):  # {"Ref": <the stack's own bus>}: its name
            bus = resources[bus["Ref"]]["Properties"]["Name"]
        for target in resource["Properties"]["Targets"]:
            function_id = target["Arn"]["Fn::GetAtt"][0]
            handler = resources[function_id]["Properties"]["Handler"]
            out.append((logical_id, resource["Properties"]["EventPattern"], handler, str(bus)))
    return out


def role_name(template: dict[str, Any], logical_id: str, stack: str) -> str:
    """A role's name: its RoleName, else one like CloudFormation's (the stack's and the logical ID's; CloudFormation
    adds a random suffix), within IAM's 64 characters."""
    props = template["Resources"][logical_id]["Properties"]
    return str(props.get("RoleName") or f"{stack}-{logical_id}"[:64])


def resolve(value: Any, template: dict[str, Any], *, account: str, region: str, stack: str) -> Any:
    """A template value as CloudFormation would make it in `account`: the pseudo parameters, Fn::Join, and a role's
    Ref (its name) and Arn. Anything else the demo does not need raises ValueError."""
    if isinstance(value, list):
        return [resolve(v, template, account=account, region=region, stack=stack) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        [(key, arg)] = value.items()
        pseudo = {"AWS::Partition": PARTITION, "AWS::Region": region, "AWS::AccountId": account}
        if key == "Ref" and arg in pseudo:
            return pseudo[arg]
        resources = template["Resources"]
        if key == "Ref" and resources.get(arg, {}).get("Type") == "AWS::IAM::Role":
            return role_name(template, arg, stack)
        if key == "Fn::GetAtt" and arg[1] == "Arn" and resources.get(arg[0], {}).get("Type") == "AWS::IAM::Role":
            return f"arn:{PARTITION}:iam::{account}:role/{role_name(template, arg[0], stack)}"
        if key == "Fn::Join":
            separator, parts = arg
            return separator.join(str(resolve(p, template, account=account, region=region, stack=stack)) for p in parts)
        if key.startswith(("Fn::", "Ref")):
            raise ValueError(f"the demo cannot resolve {json.dumps(value)}")
    return {k: resolve(v, template, account=account, region=region, stack=stack) for k, v in value.items()}


class LogLines:
    """Where the functions' log lines go in the demo: each warning or error the handlers log (one JSON line,
    as Powertools writes it in Lambda) is shown as one line of the demo, `log <level>: <message>` with its
    reason or problems; info lines are dropped (the demo says what they would)."""

    FIELDS = ("reason", "problems", "account", "error")

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._show(line)
        return len(text)

    def flush(self) -> None:
        pass

    def _show(self, line: str) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            if line.strip():
                self._say(f"         log: {line.strip()}")
            return
        if not isinstance(record, dict):
            return
        level = str(record.get("level", "")).lower()
        if level not in ("warning", "error", "critical"):
            return
        extra = [f"{k}={record[k]}" for k in self.FIELDS if record.get(k) not in (None, "", [])]
        self._say(f"         log {level}: {record.get('message', '')}" + (f" ({'; '.join(extra)})" if extra else ""))


class Demo:
    def __init__(self, scenario: Scenario, *, out: TextIO | None = None, folder: Path | None = None) -> None:
        """`folder`: where Slack app mode saves what is uploaded to Slack (the charts); None: a new temporary folder,
        kept after the demo so that its files can be opened."""
        self.scenario = scenario
        self.out = out or sys.stdout
        self.folder = folder
        self.app: AppSlack | None = None  # Slack app mode's workspace, kept after the run (the thread's picture)
        self.routes: list[Route] = []
        self.jobs: dict[str, JobState] = {}
        self.outcomes: dict[str, Outcome] = defaultdict(Outcome)
        self.organization = scenario.config.organization
        # A job is its account and its name: two members may run jobs of the same name.
        self.keys = {(self.account_of(job), job.name): key for key, job in scenario.jobs.items()}
        self.ignored: dict[str, int] = defaultdict(int)  # events ignored as another account's, by account
        self._forwarded: set[str] = set()  # accounts whose forwarding the demo has shown
        self.start = datetime.now(UTC).replace(second=0, microsecond=0)
        self._handlers: dict[str, Callable[..., Any]] = {}
        self._log_sink = LogLines(self.say)
        self._stops_said = 0  # the StopTrainingJob calls (sagemaker_ext.stop_calls) the demo has printed
        self.logs = DemoLogs(self, None)  # the jobs' training logs, and the template's subscription to them

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    @staticmethod
    def account_of(job: Job) -> str:
        return job.account or ACCOUNT

    def key_of(self, name: str, account: str | None = None) -> str | None:
        """The scenario's key of a job: by its account and name, else by its name when only one job has it."""
        if account is not None and (account, name) in self.keys:
            return self.keys[(account, name)]
        named = [key for (_, job_name), key in self.keys.items() if job_name == name]
        return named[0] if len(named) == 1 else None

    def _who(self, job: Job) -> str:
        """A job as the timeline names it: its key, and with an organization the account it runs in."""
        if self.organization is None:
            return job.key
        account = self.account_of(job)
        return f"{job.key} in {account}" + (" (hub)" if account == self.organization.hub_account else "")

    # --- setup ---------------------------------------------------------------------------------------
    def run(self, started: float | None = None) -> int:
        """`started`: when the person began to wait (time.monotonic()); None: now."""
        started = time.monotonic() if started is None else started
        self.say(f"Training Guard demo: {self.scenario.name}")
        self.say("[1/3] synthesizing the stack (aws-cdk) ...")
        template, member, kept = synthesized(self.scenario)
        if kept is not None:
            self.say(
                "      the template synthesized earlier from these very sources and configuration: "
                f"{template_cache.shown(kept)}"
            )
        found = routes_from(template)
        self.say(f"      {len(template['Resources'])} resources; {len(found)} event rules to install")
        if member is not None:
            self.say(f"      member stack: {len(member['Resources'])} resources, no Lambda code")
        # The Price List API: recorded answers only, in the emulation's region (none recorded: the shipped table).
        answers = {(REGION, t): recording.pages for t, recording in self.scenario.price_list.items()}
        with self._slack() as slack:
            urls = {name: slack.url(name) for name in self.scenario.config.slack.webhooks} if slack else {}
            with Emulation(
                self.scenario.config,
                webhook_urls=urls,
                price_answers=answers,
                by_credentials=self.organization is not None,
            ) as aws:
                self.aws = aws
                listener = "Slack app mode's Web API" if self.app else "Slack listener"
                self.say(f"[2/3] emulated AWS: moto + SageMaker extension; {listener} on 127.0.0.1")
                if self.app is not None:
                    self.app.install(aws, template)
                self._say_price_list()
                if self.organization is not None:
                    self.aws.client("events").create_event_bus(Name=self.organization.bus_name)
                    hub = self.organization.hub_account
                    self.say(f"      hub {hub}: its default bus and bus {self.organization.bus_name}")
                for rule, pattern, handler, bus in found:
                    self._install(rule, pattern, handler, bus)
                if any(step.log_lines for step in self.scenario.steps):
                    self.logs = DemoLogs(self, logs_ext.subscription_from(template))
                    self.say(self.logs.describe())
                    self.logs.schedule(template)
                if member is not None:
                    self._say_stack_set(template)
                    self._install_members(member)
                self.say(f"[3/3] playing {len(self.scenario.steps)} steps")
                for step in self.scenario.steps:
                    self._play(step)
                self._collect_final()
        failures = self._check()
        self._summary()
        self._say_app()
        self.say(f"\ndone in {time.monotonic() - started:.1f} s")
        if failures:
            self.say("\nThe outcome differs from the scenario's expectations:")
            for failure in failures:
                self.say(f"  ✗ {failure}")
            return 1
        self.say("All expectations met.")
        return 0

    @contextlib.contextmanager
    def _slack(self) -> Iterator[SlackListener | None]:
        """The webhooks' listener, or in app mode (None) the local Slack Web API (self.app), for the run."""
        if not self.scenario.config.slack.app_mode:
            with SlackListener(on_message=self._slack_message) as listener:
                yield listener
            return
        folder = self.folder or Path(tempfile.mkdtemp(prefix="training-guard-demo-"))
        self.app = AppSlack(self.scenario.config, say=self.say, folder=folder)
        with self.app:
            yield None

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

    def _install(self, rule: str, pattern: dict[str, Any], handler: str, bus: str = DEFAULT_BUS) -> None:
        events = self.aws.client("events")
        sqs = self.aws.client("sqs")
        queue_url = sqs.create_queue(QueueName=f"function-{rule}"[:80])["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_rule(Name=rule, EventPattern=json.dumps(pattern), EventBusName=bus)
        events.put_targets(Rule=rule, EventBusName=bus, Targets=[{"Id": "function", "Arn": queue_arn}])
        self.routes.append(Route(rule, queue_url, handler, bus))
        where = f" on bus {bus}" if bus != DEFAULT_BUS else ""
        self.say(f"      rule {rule}{where}: {json.dumps(pattern)} -> {handler}")

    # --- an organization's member accounts ----------------------------------------------------------------
    def _member_accounts(self) -> list[str]:
        """Where the member stack is: every configured member, and every other account a job runs in (an account of
        the StackSet's units that is not a member: the StackSet deploys there too, and its events reach the hub)."""
        assert self.organization is not None
        accounts = list(self.organization.members)
        for job in self.scenario.jobs.values():
            account = self.account_of(job)
            if account != self.organization.hub_account and account not in accounts:
                accounts.append(account)
        return accounts

    def _say_stack_set(self, template: dict[str, Any]) -> None:
        for resource in template["Resources"].values():
            if resource["Type"] != "AWS::CloudFormation::StackSet":
                continue
            props = resource["Properties"]
            targets = [
                unit
                for group in props.get("StackInstancesGroup", [])
                for unit in group.get("DeploymentTargets", {}).get("OrganizationalUnitIds", [])
            ]
            auto = (
                "automatic deployment" if props.get("AutoDeployment", {}).get("Enabled") else "no automatic deployment"
            )
            self.say(
                f"      StackSet {props.get('StackSetName')} in the hub's template: {props.get('PermissionModel')}, "
                f"{auto}, to {', '.join(targets)}; its body is the member stack, which the demo installs below in "
                "each account"
            )

    def _install_members(self, member: dict[str, Any]) -> None:
        """The member stack in each member account: its roles (trust and policies as synthesized) and its rules on the
        account's default bus, forwarding to the hub bus."""
        from infra.organization.names import MEMBER_STACK_NAME

        assert self.organization is not None
        resources = member["Resources"]
        for number, account in enumerate(self._member_accounts()):

            def made(value: Any, account: str = account) -> Any:
                return resolve(value, member, account=account, region=REGION, stack=MEMBER_STACK_NAME)

            with self.aws.in_account(account):
                iam, events = self.aws.client("iam"), self.aws.client("events")
                roles = [(i, r["Properties"]) for i, r in resources.items() if r["Type"] == "AWS::IAM::Role"]
                for logical_id, props in roles:  # the roles first: the policies name them
                    iam.create_role(
                        RoleName=role_name(member, logical_id, MEMBER_STACK_NAME),
                        AssumeRolePolicyDocument=json.dumps(made(props["AssumeRolePolicyDocument"])),
                        Description=props.get("Description", ""),
                    )
                for logical_id, resource in resources.items():
                    props = resource["Properties"]
                    if resource["Type"] == "AWS::IAM::Policy":
                        for role in made(props["Roles"]):
                            iam.put_role_policy(
                                RoleName=role,
                                PolicyName=props["PolicyName"],
                                PolicyDocument=json.dumps(made(props["PolicyDocument"])),
                            )
                    elif resource["Type"] == "AWS::Events::Rule" and "EventPattern" in props:
                        events.put_rule(Name=logical_id, EventPattern=json.dumps(props["EventPattern"]))
                        targets = [
                            {"Id": t["Id"], "Arn": made(t["Arn"]), "RoleArn": made(t["RoleArn"])}
                            for t in props["Targets"]
                        ]
                        events.put_targets(Rule=logical_id, Targets=targets)
                        if number == 0:
                            arns = ", ".join(t["Arn"] for t in targets)
                            self.say(f"        rule {logical_id}: {json.dumps(props['EventPattern'])} -> {arns}")
            if number == 0:
                self._say_member_role(member)
        members = ", ".join(self.organization.members)
        others = [a for a in self._member_accounts() if a not in self.organization.members]
        outsiders = f"; and in {', '.join(others)}, of the StackSet's units but not a member" if others else ""
        self.say(f"      member stack {MEMBER_STACK_NAME} (above) installed in {members}{outsiders}")
        self.say(
            "      moto evaluates no policy: the hub bus's policy and the roles' trust are not checked; AssumeRole "
            "needs the role in its account, and a forwarded event keeps its account, as in AWS"
        )

    def _say_member_role(self, member: dict[str, Any]) -> None:
        assert self.organization is not None
        for resource in member["Resources"].values():
            props = resource["Properties"]
            if resource["Type"] != "AWS::IAM::Role" or props.get("RoleName") != self.organization.member_role_name:
                continue
            [statement] = props["AssumeRolePolicyDocument"]["Statement"]
            conditions = statement.get("Condition", {})
            arns = conditions.get("ArnEquals", {}).get("aws:PrincipalArn", [])
            names = [resolve(a, member, account="", region=REGION, stack="").rsplit("/", 1)[-1] for a in arns]
            org = conditions.get("StringEquals", {}).get("aws:PrincipalOrgID")
            self.say(
                f"        role {props['RoleName']}: trusted by the hub's {', '.join(names)} (aws:PrincipalArn)"
                + (f" of organization {org} (aws:PrincipalOrgID)" if org else "")
            )

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
        if step.sweep:
            self.say(f"{self._stamp(step)} sweeper: scheduled run")
            if self.organization is None:
                self._swept(self.aws.sweep(), None)
            else:
                self._sweep_organization()
            self._say_stops("the sweeper's")
            self.logs.check_stalls(at)
        elif step.job is not None:
            self._play_job(self.scenario.jobs[step.job], step, at)
        self._drain()
        self._say_stops()  # any other stop the step led to: every StopTrainingJob the guard makes is shown
        self.aws.pump_chat(rounds=2)

    def _play_job(self, job: Job, step: Step, at: datetime) -> None:
        """A step of one job: its event, an alarm, SageMaker's end of a stop, metrics, a click, log lines."""
        if step.status:
            self._job_event(job, step, at)
        elif step.alarm:
            self._alarm(job, step, at)
        elif step.sagemaker == "finish_stopping":
            if self.aws.finish_stopping(job.name, account=self.account_of(job)):
                self.say(f"{self._stamp(step)} {self._who(job)}: SageMaker finished stopping the job")
                state = self.jobs.setdefault(job.key, JobState())
                state.status, state.secondary = "Stopped", "Stopped"
                self._send(self._state_event(job, state, at), job, deliveries=1)
        elif step.publish:
            for metric, values in step.publish.items():
                self.aws.put_metric(job.name, metric, values, at=at, account=self.account_of(job))
            shown = "; ".join(f"{m} = {', '.join(f'{v:g}' for v in vs)}" for m, vs in step.publish.items())
            self.say(f"{self._stamp(step)} {self._who(job)}: SageMaker publishes {shown}")
        elif step.host_metrics:
            self._host_metrics(job, step, at)
        elif step.click is not None:
            self._click(job, step.click, step, at)
        elif step.log_lines:
            self.logs.play(job, step, at)

    def _new_stops(self) -> list[sagemaker_ext.StopCall]:
        """The StopTrainingJob calls made since the demo last printed them (now printed)."""
        calls = sagemaker_ext.stop_calls()
        new, self._stops_said = calls[self._stops_said :], len(calls)
        return new

    def _say_stops(self, whose: str = "the guard's") -> None:
        for call in self._new_stops():
            key = self.key_of(call.job, call.account) or call.job
            self.outcomes[key].stopped_by_guard = True
            self.say(
                f"         guard: StopTrainingJob called for {key} ({whose})"
                + self._stopped_how(call.job, call.account)
            )

    def _click(self, job: Job, click: ClickStep, step: Step, at: datetime) -> None:
        """A person presses one of the guard's buttons in Slack (app mode): the signed request, then the worker."""
        assert self.app is not None
        self.say(f"{self._stamp(step)} {self._who(job)}: {click.user} clicks {click.button} in Slack")
        try:
            pressed = self.app.press(job.name, click.button, click.user, at=at, handler=self._handler)
        except NoButton as exc:
            self.say(f"         slack: nothing to press: {exc}")
            return
        if any(call.job == job.name for call in self._new_stops()):
            self.outcomes[job.key].stopped_by_click = True
            self.say(f"         guard: StopTrainingJob called for {click.user}'s [{pressed.button}]")

    def _swept(self, report: dict[str, Any], account: str | None, prefix: str = "") -> None:
        """What one account's sweep found (`account`: the one swept, None: a single-account guard's)."""
        self.say(
            f"         guard: {prefix}{report['running']} running job(s), {len(report['reconciled'])} reconciled, "
            f"{len(report['stalled'])} stalled, {len(report['orphaned_alarms_deleted'])} orphaned alarm(s) deleted"
        )
        found: list[tuple[str, list[str] | None]] = [
            ("budget warning", report.get("budget_warnings")),
            ("over budget", report.get("over_budget")),
            ("stalled", report.get("stalled") if account is not None else None),
            ("idle GPUs", report.get("idle_gpus")),
        ]
        said = [f"{what}: {', '.join(self.key_of(j, account) or j for j in jobs)}" for what, jobs in found if jobs]
        said += [
            f"not judged: {self.key_of(j, account) or j} ({why})" for j, why in report.get("not_judged", {}).items()
        ]
        if said:
            self.say("         guard: " + " " * len(prefix) + "; ".join(said))

    def _sweep_organization(self) -> None:
        """The hub's sweep: its own account, then each member through its role (the handler's organization report)."""
        from training_guard.services.sweeper import OrganizationSweepIncomplete

        assert self.organization is not None
        try:
            swept: dict[str, Any] = self.aws.sweep()
        except OrganizationSweepIncomplete as incomplete:
            swept = incomplete.report.as_dict()
            self.say(f"         guard: sweep incomplete: {incomplete}")
        width = max(len(self._as_whom(a)) for a in swept["accounts"]) + 2 if swept["accounts"] else 0
        for account, report in swept["accounts"].items():
            self._swept(report, account, prefix=f"{self._as_whom(account) + ':':<{width}}")
        for account, why in swept["failed"].items():
            if account not in swept["accounts"]:
                self.say(f"         guard: {account}: not swept ({why})")
        for account in swept["deferred"]:
            self.say(f"         guard: {account}: not started, for want of time")

    def _as_whom(self, account: str) -> str:
        """An account and the credentials the hub acts there with."""
        assert self.organization is not None
        if account == self.organization.hub_account:
            return f"{account} (hub, own credentials)"
        return f"{account} (via role {self.organization.member_role_name})"

    def _job_event(self, job: Job, step: Step, at: datetime) -> None:
        state = self.jobs.setdefault(job.key, JobState())
        state.status = step.status or state.status
        state.secondary = step.secondary or ("Training" if state.status == "InProgress" else state.status)
        state.rules.update(step.rules)
        state.details.update(step.details)
        state.failure_reason = step.failure_reason or state.failure_reason
        rules = ", ".join(f"{r}={s}" for r, s in state.rules.items()) or "no Debugger rules"
        times = f" (delivered {step.deliveries}x)" if step.deliveries > 1 else ""
        self.say(f"{self._stamp(step)} {self._who(job)}: {state.status}/{state.secondary}; {rules}{times}")
        self._say_forwarding(job)
        for rule, status in step.rules.items():
            if status in ("IssuesFound", "Error"):
                self.outcomes[job.key].saw.append(f"{rule} {status}")
        if step.status in ("Completed", "Failed"):
            self.outcomes[job.key].saw.append(step.status)
        event = self._state_event(job, state, at)
        sagemakers = self.aws.job_status(job.name, account=self.account_of(job))
        if sagemakers in ("Stopping", "Stopped") and state.status == "InProgress":
            event["detail"]["TrainingJobStatus"] = sagemakers
        self._send(event, job, deliveries=step.deliveries)

    def _say_forwarding(self, job: Job) -> None:
        """The first event of a member account: how it reaches the hub (said once per account)."""
        account = self.account_of(job)
        if self.organization is None or account == self.organization.hub_account or account in self._forwarded:
            return
        self._forwarded.add(account)
        self.say(
            f"         EventBridge in {account}: its default bus's forwarding rule -> hub bus "
            f"{self.organization.bus_name} in {self.organization.hub_account} (the event keeps account {account})"
        )

    def _state_event(self, job: Job, state: JobState, at: datetime) -> dict[str, Any]:
        ms = int(at.timestamp() * 1000)
        started = int(self.start.timestamp() * 1000)
        account = self.account_of(job)
        arn = f"arn:aws:sagemaker:{REGION}:{account}:training-job/{job.name}"
        detail: dict[str, Any] = {
            "TrainingJobName": job.name,
            "TrainingJobArn": arn,
            "TrainingJobStatus": state.status,
            "SecondaryStatus": state.secondary,
            "AlgorithmSpecification": {
                "TrainingInputMode": "File",
                "MetricDefinitions": (
                    [{"Name": m, "Regex": f"{m.split(':')[-1]}=(.*?);"} for m in job.metrics]
                    if job.metric_definitions is None
                    else [{"Name": name, "Regex": regex} for name, regex in job.metric_definitions]
                ),
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
            "account": account,
            "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": REGION,
            "resources": [arn],
            "detail": detail,
        }

    @classmethod
    def _rule(cls, job: Job, rule: str, status: str, details: str | None, ms: int) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "RuleConfigurationName": rule,
            "RuleEvaluationJobArn": (
                f"arn:aws:sagemaker:{REGION}:{cls.account_of(job)}:processing-job/{job.name[:40]}-{rule.lower()[:16]}"
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
                self.aws.put_host_metric(job.name, host, metric, values, until=at, account=self.account_of(job))
                first = step.minute - len(values) + 1
                shown = ", ".join(f"{v:g}" for v in values[:6]) + (", …" if len(values) > 6 else "")
                self.say(
                    f"{self._stamp(step)} {self._who(job)}: SageMaker publishes {metric} of {job.name}/{host}, one a "
                    f"minute from {_clock(first)}: {shown} (mean {statistics.fmean(values):.1f})"
                )

    def _alarm(self, job: Job, step: Step, at: datetime) -> None:
        guard = self.scenario.config.metric_guard(step.alarm or "")
        assert guard is not None
        self.say(
            f"{self._stamp(step)} {self._who(job)}: CloudWatch alarm {fleet_alarm_name(guard)} -> ALARM for this job"
        )
        self._say_forwarding(job)
        self.outcomes[job.key].saw.append(f"{guard.metric} alarm")
        dimension = contract.HOST_DIMENSION if guard.instance_metric else contract.JOB_DIMENSION
        value = f"{job.name}/algo-1" if guard.instance_metric else job.name
        reason = step.reason or f"Threshold Crossed: 3 datapoints were beyond the threshold ({guard.threshold:g})."
        account = self.account_of(job)
        event = alarm_events.contributor_event(
            fleet_alarm_name(guard), insights_query(guard), {dimension: value}, reason=reason, at=at, account=account
        )
        self._put(event, account)

    def _send(self, event: dict[str, Any], job: Job, *, deliveries: int) -> None:
        # SageMaker's own view follows its events (a stop is not undone)
        self.aws.put_job(event["detail"], account=self.account_of(job))
        for _ in range(deliveries):
            self._put(event, self.account_of(job))

    def _put(self, event: dict[str, Any], account: str = ACCOUNT) -> None:
        """Put the event on the default bus of the account it happens in (a member's forwards it to the hub bus)."""
        with self.aws.in_account(account):
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
            # The handler module binds its Logger to the stream in effect at its first import: the log sink.
            with contextlib.redirect_stdout(self._log_sink):
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
                    self._react(receipt, event["account"])
                    sqs.delete_message(QueueUrl=route.queue_url, ReceiptHandle=message["ReceiptHandle"])
        for note in self.aws.notifications():
            key = self.key_of(note["job"]["name"], note.get("account"))
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

    def _react(self, receipt: dict[str, Any], account: str = ACCOUNT) -> None:
        key = self.key_of(receipt.get("job", ""), account) or receipt.get("job", "?")
        parts = []
        stops = self._new_stops()
        if receipt.get("stopped") or stops:
            parts.append("StopTrainingJob called" + self._stopped_how(receipt.get("job", ""), account))
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
            if self.organization is not None and not self.organization.accepts(account):
                self.outcomes[key].ignored += 1
                self.ignored[account] += 1
                parts.append(f"{contract.Metric.EVENTS_FROM_OTHER_ACCOUNTS} +1 ({sum(self.ignored.values())} so far)")
        if parts:
            self.say("         guard: " + "; ".join(parts))

    def _stopped_how(self, name: str, account: str) -> str:
        """With an organization: where the stop was made, and with whose credentials (the recorded StopTrainingJob)."""
        if self.organization is None:
            return ""
        via = self._stop_credentials(name, account)
        if via is None:
            return ""
        return f" in {account} " + ("with the hub's own credentials" if via == HUB_CREDENTIALS else f"via {via}")

    @staticmethod
    def _stop_credentials(name: str, account: str) -> str | None:
        """The role ARN the job's first StopTrainingJob was made with, HUB_CREDENTIALS when it was not an assumed
        role's, None when nothing stopped it."""
        calls = sagemaker_ext.stop_calls(account, REGION, name)
        if not calls:
            return None
        return accounts_ext.assumed_role_of(calls[0].access_key) or HUB_CREDENTIALS

    def _slack_message(self, channel: str, body: dict[str, Any]) -> None:
        text = render_text(body).splitlines()
        channel = channel.removesuffix("-secret-token")
        self.say(f"         slack #{channel} │ {text[0] if text else ''}")
        for line in text[2:4]:
            for part in textwrap.wrap(line, 110, subsequent_indent="  ") or [""]:
                self.say(f"                  │ {part}")
        spent = _field(body, "Spend")
        if spent:
            self.say(f"                  │ Spend: {spent}")
        title = body.get("blocks", [{}])[0].get("text", {}).get("text", "")
        account = _field(body, "Account")
        for (job_account, name), key in self.keys.items():
            if name in title and (self.organization is None or account in (None, job_account)):
                self.outcomes[key].slack += 1

    # --- results -----------------------------------------------------------------------------------------
    def _collect_final(self) -> None:
        self.final = {
            key: self.aws.job_status(job.name, account=self.account_of(job)) for key, job in self.scenario.jobs.items()
        }
        for key, job in self.scenario.jobs.items():
            got, account = self.outcomes[key], self.account_of(job)
            got.stopped_via = self._stop_credentials(job.name, account)
            got.stop_calls = len(sagemaker_ext.stop_calls(account, REGION, job.name))
            if self.final.get(key) is not None:
                with self.aws.in_account(account):
                    tags = self.aws.client("sagemaker").list_tags(
                        ResourceArn=f"arn:{PARTITION}:sagemaker:{REGION}:{account}:training-job/{job.name}"
                    )["Tags"]
                got.stopped_by = next((t["Value"] for t in tags if t["Key"] == contract.TAG_STOPPED_BY), None)
            if self.app is not None:
                got.parents = self.app.parents_of(job.name)
                got.slack = self.app.thread_size(job.name)
        self.assumed = {account: accounts_ext.assumed_roles(account) for account in self._accounts()}

    def _accounts(self) -> list[str]:
        """Every account of the scenario: the hub's (or the guard's own), the members, then any other."""
        accounts = [ACCOUNT, *(self.organization.members if self.organization is not None else ())]
        for job in self.scenario.jobs.values():
            if self.account_of(job) not in accounts:
                accounts.append(self.account_of(job))
        return accounts

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
            if expected.stopped_via is not None and got.stopped_via != expected.stopped_via:
                failures.append(f"{key}: stopped via {got.stopped_via}, expected {expected.stopped_via}")
            if expected.ignored_events is not None and got.ignored != expected.ignored_events:
                failures.append(
                    f"{key}: {got.ignored} event(s) ignored as another account's, expected {expected.ignored_events}"
                )
            failures += self._check_stop(key, expected, got)
        return failures

    def _check_stop(self, key: str, expected: Any, got: Outcome) -> list[str]:
        """Who stopped the job and how, and (app mode) its one thread per channel."""
        failures = []
        if expected.stopped_by is not None and got.stopped_by != expected.stopped_by:
            failures.append(f"{key}: stopped-by tag {got.stopped_by!r}, expected {expected.stopped_by!r}")
        if expected.stopped_by_click is not None and got.stopped_by_click != expected.stopped_by_click:
            failures.append(f"{key}: stopped by a click {got.stopped_by_click}, expected {expected.stopped_by_click}")
        if expected.stop_calls is not None and got.stop_calls != expected.stop_calls:
            failures.append(f"{key}: {got.stop_calls} StopTrainingJob call(s), expected {expected.stop_calls}")
        if expected.slack_parents is not None:
            wrong = {c: n for c, n in got.parents.items() if n != expected.slack_parents}
            if wrong or (not got.parents and expected.slack_parents):
                found = ", ".join(f"{n} in {c}" for c, n in got.parents.items()) or "none"
                failures.append(f"{key}: Slack parent messages {found}, expected {expected.slack_parents} per channel")
        return failures

    def _say_app(self) -> None:
        """App mode: each job's thread as it reads at the end, and where the charts were saved."""
        if self.app is None:
            return
        self.say("\nSlack threads (app mode)")
        for key in self.scenario.jobs:
            parents = self.outcomes[key].parents
            where = ", ".join(f"{n} parent(s) in {c}" for c, n in parents.items()) or "no thread"
            by = self.outcomes[key].stopped_by
            self.say(f"  {key}: {where}, {self.outcomes[key].slack} message(s)" + (f"; stopped-by {by}" if by else ""))
        if self.app.charts:
            stand_in = " (stand-ins: moto has no GetMetricWidgetImage)" if metric_widget_ext.drawn else ""
            self.say(f"  charts uploaded into the threads{stand_in}:")
            for path in self.app.charts:
                self.say(f"    {path}")

    def _row(self, key: str) -> tuple[str, ...]:
        got = self.outcomes[key]
        saw = ", ".join(dict.fromkeys(got.saw)) or "-"
        did = ", ".join(got.did) or ("ignored" if got.ignored else "nothing")
        spent = "-" if got.spend is None else usd(got.spend.get("so_far_usd")) or "unknown"
        return (key, saw, did, spent, got.avoided or "-", str(got.slack), str(self.final.get(key)))

    def _summary(self) -> None:
        header = ("job", "what the guard saw", "what it did", "spent so far", "avoided", "Slack", "status")
        rows = [self._row(key) for key in self.scenario.jobs]
        widths = [min(max(len(r[i]) for r in [header, *rows]), SUMMARY_CELL_MAX) for i in range(len(header))]
        if self.organization is None:
            self.say("\nSummary")
            self._table(header, rows, widths, indent="  ")
        else:
            self._summary_by_account(header, widths)
        self._prices()

    def _table(
        self, header: tuple[str, ...] | None, rows: list[tuple[str, ...]], widths: list[int], *, indent: str
    ) -> None:
        """Rows under a header and its rule (None: rows only), each cell cut to its column's width."""
        for row in [header, *rows] if header is not None else rows:
            cells = [
                (c if len(c) <= widths[j] else c[: widths[j] - 1] + "…").ljust(widths[j]) for j, c in enumerate(row)
            ]
            self.say(indent + " │ ".join(cells))
            if row is header:
                self.say(indent + "─┼─".join("─" * w for w in widths))

    def _summary_by_account(self, header: tuple[str, ...], widths: list[int]) -> None:
        """The jobs by account, each account under a line that says who it is to the hub, the role the hub assumed
        there, whose credentials each stop was made with and what was ignored."""
        assert self.organization is not None
        self.say("\nSummary by account")
        self._table(header, [], widths, indent="    ")
        for account in self._accounts():
            self.say(f"  {account} · {self._account_line(account)}")
            for key, job in self.scenario.jobs.items():
                if self.account_of(job) == account:
                    self._table(None, [self._row(key)], widths, indent="    ")

    def _account_line(self, account: str) -> str:
        assert self.organization is not None
        keys = [key for key, job in self.scenario.jobs.items() if self.account_of(job) == account]
        vias = [via for k in keys if (via := self.outcomes[k].stopped_via)]
        stops = f"{len(vias)} stop(s)"
        assumed = self.assumed.get(account, [])
        if account == self.organization.hub_account:
            return f"the hub: its own jobs, with its own credentials; {stops}"
        role = f"arn:{PARTITION}:iam::{account}:role/{self.organization.member_role_name}"
        if account in self.organization.members:
            made = ", ".join(sorted({"the hub's own credentials" if v == HUB_CREDENTIALS else v for v in vias}))
            return f"member: AssumeRole {role} x{len(assumed)}; {stops}" + (f", via {made}" if made else "")
        never = "never assumed" if not assumed else f"assumed x{len(assumed)}"
        return (
            f"not a member: {self.ignored.get(account, 0)} event(s) ignored "
            f"({contract.Metric.EVENTS_FROM_OTHER_ACCOUNTS}); "
            f"its role {never}; {stops}"
        )

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
