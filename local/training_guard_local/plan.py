"""`training-guard plan`: what the guard will do, on one screen, before it is deployed.

Read from the same layered configuration the CDK app deploys (cdk.json's `training-guard` context,
with `--config FILE` layered over it: infra/guard_config.py), and described with the code the stack
and the functions use (the rule actions of `GuardConfig`, the Metrics Insights queries of
`training_guard.domain.metric_guards`, the names of infra/components/names.py). No AWS call, no jsii.

The text is a view of the JSON document (`--json`), so both always say the same.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from training_guard.config.model import SEVERITIES, Action, GuardConfig

CDK_JSON = "cdk.json"
# Enough to read at a glance and stay within 40 lines at the configuration's maxima; --json has all.
MAX_GUARDS_SHOWN = 4  # two lines each (four, not five: room for budgets and idle GPUs)
MAX_BUDGETS_SHOWN = 3  # on one line
MAX_WEBHOOKS_SHOWN = 3
MAX_EMAILS_SHOWN = 3


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Register the sub-command on the CLI's sub-parsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "plan",
        help="show what the guard will do with the configuration a deploy would use (offline)",
        description=(
            "Reads cdk.json's configuration in the current folder with --config FILE layered over it, exactly "
            "as `make synth` / `make deploy CONFIG=FILE` do, and prints on one screen what the guard will do: "
            "which rules stop and which notify, dry run, exemptions, grace period, budgets, metric guards with "
            "their Metrics Insights queries, the idle-GPU check, notifications and channels, and what is off. "
            "No AWS call."
        ),
    )
    parser.add_argument(
        "--config", metavar="FILE", help="the per-account file layered over cdk.json (make deploy CONFIG=FILE)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON document instead of text")
    parser.set_defaults(run=_run)
    return parser


def _run(args: argparse.Namespace) -> int:
    from training_guard_local import configs
    from training_guard_local.inputs import EXIT_OK, UsageError

    cdk_json = Path(CDK_JSON)
    if not cdk_json.is_file():
        raise UsageError(f"no {CDK_JSON} in {Path.cwd()}: run it from the project folder")
    layered = configs.deployed(Path(args.config) if args.config else None)  # as simulate, demo and the deploy
    document = plan(layered.config, layered.layers)
    print(json.dumps(document) if args.json else render(document))
    return EXIT_OK


# --- the plan as data --------------------------------------------------------------------------------


def plan(config: GuardConfig, layers: tuple[str, ...]) -> dict[str, Any]:
    """What the guard will do with this configuration, as a JSON-ready document."""
    from infra.components.names import STACK_NAME, bot_token_secret_name, signing_secret_name, webhook_secret_name
    from training_guard.domain.metric_guards import fleet_alarm_name, insights_query

    by_action: dict[str, list[str]] = {a.value: [] for a in Action}
    for rule, action in config.rules.actions.items():
        by_action[action.value].append(rule)
    slack = config.slack
    document: dict[str, Any] = {
        "layers": list(layers),
        "rules": {
            "debugger_default": config.rules.debugger_default.value,
            "profiler_default": config.rules.profiler_default.value,
            "by_action": by_action,
        },
        "dry_run": config.dry_run,
        "stop_requires_tag": config.stop_requires_tag,
        "exemption_tags": [config.tags.exempt, config.tags.notify_only],
        "min_training_minutes": config.min_training_minutes,
        "jobs": {
            "include_prefixes": list(config.jobs.include_prefixes),
            "exclude_prefixes": list(config.jobs.exclude_prefixes),
        },
        "metric_guards": [
            {
                "name": guard.name,
                "alarm": fleet_alarm_name(guard),
                "describe": guard.describe(),
                "query": insights_query(guard),
                "action": guard.action.value,
                "job_prefix": guard.job_prefix,
                "job_tag": guard.job_tag,
            }
            for guard in config.metric_guards
        ],
        "per_job_alarms": config.per_job_alarms,
        "stall": None
        if config.stall is None
        else {"minutes": config.stall.minutes, "action": config.stall.action.value},
        "budgets": {
            "tag": config.tags.budget_usd,
            "defaults": {
                "warn_at": config.budget_defaults.warn_at,
                "action": config.budget_defaults.action.value,
            },
            "entries": [
                {
                    "name": f"budgets[{i}]",
                    "describe": budget.describe(f"budgets[{i}]"),
                    "max_usd": budget.max_usd,
                    "warn_at": budget.warn_at,
                    "action": budget.action.value,
                    "job_prefix": budget.job_prefix,
                    "job_tag": budget.job_tag,
                }
                for i, budget in enumerate(config.budgets)
            ],
        },
        "idle_gpu": None
        if config.idle_gpu is None
        else {
            "threshold_percent": config.idle_gpu.threshold_percent,
            "minutes": config.idle_gpu.minutes,
            "ignore_first_minutes": config.idle_gpu.ignore_first_minutes,
            "action": config.idle_gpu.action.value,
            "describe": config.idle_gpu.describe(),
        },
        "sweep_minutes": config.sweep_minutes,
        "notifications": {
            "failed": config.notifications.failed,
            "stopped": config.notifications.stopped,
            "spot_interrupted": config.notifications.spot_interrupted,
            "completed": config.notifications.completed,
        },
        "emails": list(config.emails),
        "slack": None
        if not slack.enabled
        else {
            "mode": slack.mode,
            "webhooks": {
                name: {
                    "secret_name": hook.secret_name or webhook_secret_name(STACK_NAME, name),
                    "created_by_the_stack": not hook.secret_name,
                }
                for name, hook in slack.webhooks.items()
            },
            "app": None
            if slack.app is None or not slack.app_mode
            else {
                "channels": dict(slack.app.channels),
                "allowed_users": list(slack.app.allowed_users),
                "bot_token_secret": slack.app.bot_token_secret_name or bot_token_secret_name(STACK_NAME),
                "signing_secret": slack.app.signing_secret_name or signing_secret_name(STACK_NAME),
            },
            "routes": _routes(config),
        },
        "organization": None
        if config.organization is None
        else {
            "hub_account": config.organization.hub_account,
            "region": config.organization.region,
            "members": list(config.organization.members),
            "organizational_units": list(config.organization.organizational_units),
        },
        "q_developer": None
        if config.q_developer is None
        else {
            "slack_workspace_id": config.q_developer.slack_workspace_id,
            "slack_channel_id": config.q_developer.slack_channel_id,
        },
        "dedup_ttl_days": config.dedup_ttl_days,
        "powertools_layer_arn": config.powertools_layer_arn,
    }
    document["off"] = _off(document)
    return document


def _routes(config: GuardConfig) -> list[str]:
    """Slack routing in the order `SlackConfig.route` applies it."""
    slack = config.slack
    routes: list[str] = []
    if slack.min_severity != SEVERITIES[0]:
        below = ", ".join(SEVERITIES[: SEVERITIES.index(slack.min_severity)])
        routes.append(f"{below} -> no webhook (min_severity {slack.min_severity})")
    if slack.team_tag:
        routes.append(f"a job tagged {slack.team_tag}=<webhook> -> that webhook")
    if slack.by_account:
        routes.append("account " + _some([f"{a} -> {w}" for a, w in slack.by_account.items()], 3))
    if slack.by_organizational_unit:
        routes.append("unit " + _some([f"{u} -> {w}" for u, w in slack.by_organizational_unit.items()], 3))
    routes.extend(
        f"{severity} -> {slack.by_severity[severity]}" for severity in SEVERITIES if severity in slack.by_severity
    )
    if slack.default:
        routes.append(f"{'everything else' if routes else 'everything'} -> {slack.default}")
    return routes


def _off(document: dict[str, Any]) -> list[str]:
    off = []
    if not document["metric_guards"]:
        off.append("metric guards")
    if document["stall"] is None:
        off.append("stall check")
    if document["idle_gpu"] is None:
        off.append("idle GPU check")
    if not document["per_job_alarms"]:
        off.append("per-job guard tags")
    if not document["emails"]:
        off.append("e-mail")
    if document["slack"] is None:
        off.append("Slack")
    if document["q_developer"] is None:
        off.append("Q Developer")
    return off


# --- the plan as text ---------------------------------------------------------------------------------


def render(document: dict[str, Any]) -> str:
    """About 30 lines; never more than 40 whatever the configuration."""
    d = document
    lines = [f"Training Guard plan: {' + '.join(d['layers'])}"]
    if len(d["layers"]) > 1:
        lines.append("  (the file layers over cdk.json: objects merge, other values replace, null removes)")
    lines += _organization_lines(d)
    lines += _rule_lines(d)
    lines += _stop_lines(d)
    lines += _budget_lines(d)
    lines += _metric_lines(d)
    lines += _notification_lines(d)
    lines.append("Off: " + (", ".join(d["off"]) if d["off"] else "nothing"))
    return "\n".join(lines)


def _rule_lines(d: dict[str, Any]) -> list[str]:
    rules = d["rules"]
    lines = [
        "Debugger and Profiler rules reporting IssuesFound on a running job",
        f"  Debugger rules: {rules['debugger_default']}   Profiler rules: {rules['profiler_default']}"
        "   (rules.debugger_default, rules.profiler_default)",
    ]
    named = [f"{action} {', '.join(names)}" for action, names in rules["by_action"].items() if names]
    if named:
        lines.append(f"  by name (rules.actions): {'; '.join(named)}")
    lines.append("  a rule in Error is notified unless ignored, never stopped for (it says nothing about the model)")
    return lines


def _stop_lines(d: dict[str, Any]) -> list[str]:
    lines = ["Stopping"]
    if d["dry_run"]:
        lines.append('  dry run: ON: nothing is stopped; "would have stopped" is notified instead (dry_run)')
    else:
        lines.append("  dry run: off: the guard calls StopTrainingJob, once per job, and tags the job")
    if d["stop_requires_tag"]:
        lines.append(f"  opt-in: only jobs tagged {d['stop_requires_tag']}=true may be stopped (IAM enforces it too)")
    exempt, notify_only = d["exemption_tags"]
    lines.append(f'  never stopped: jobs tagged {exempt} or {notify_only} (notified "would have stopped")')
    if d["min_training_minutes"]:
        lines.append(
            f"  grace: a finding in the first {d['min_training_minutes']} min of training is deferred, then stops "
            "the job (min_training_minutes)"
        )
    else:
        lines.append("  grace: none: a finding stops at once (min_training_minutes = 0)")
    jobs = d["jobs"]
    only = f"only names starting {', '.join(jobs['include_prefixes'])}" if jobs["include_prefixes"] else "every job"
    but = f"; not names starting {', '.join(jobs['exclude_prefixes'])}" if jobs["exclude_prefixes"] else ""
    lines.append(f"  jobs guarded: {only}{but}")
    return lines


def _share(warn_at: float) -> str:
    return f"warned at {warn_at * 100:g} %" if warn_at > 0 else "no warning"


def _budget_lines(d: dict[str, Any]) -> list[str]:
    """Two lines whatever the number of budgets (--json has them all)."""
    budgets = d["budgets"]
    defaults = budgets["defaults"]
    lines = [
        f"Budgets (list price, checked at every sweep): a job tagged {budgets['tag']}=<USD> is capped at it, "
        f"{_share(defaults['warn_at'])}, then {defaults['action']} (budget_defaults)"
    ]
    entries = budgets["entries"]
    if not entries:
        lines.append("  budgets: none (budgets): only a job's own tag caps it")
        return lines
    shown = []
    for entry in entries[:MAX_BUDGETS_SHOWN]:
        scope = [f"jobs starting {entry['job_prefix']}"] if entry["job_prefix"] else []
        scope += [f"jobs tagged {entry['job_tag']}"] if entry["job_tag"] else []
        shown.append(
            f"{' and '.join(scope) or 'every job'} ${entry['max_usd']:,.2f}, {_share(entry['warn_at'])}, "
            f"then {entry['action']}"
        )
    more = f"; and {len(entries) - MAX_BUDGETS_SHOWN} more" if len(entries) > MAX_BUDGETS_SHOWN else ""
    lines.append(f"  otherwise the first that selects it (budgets): {'; '.join(shown)}{more}")
    return lines


def _metric_lines(d: dict[str, Any]) -> list[str]:
    guards = d["metric_guards"]
    if not guards:
        lines = ["Metric guards: none (metric_guards)"]
    else:
        lines = [f"Metric guards: {len(guards)}, one Metrics Insights alarm each (every job is a contributor)"]
        for guard in guards[:MAX_GUARDS_SHOWN]:
            scope = [f"jobs starting {guard['job_prefix']}"] if guard["job_prefix"] else []
            scope += [f"jobs tagged {guard['job_tag']}"] if guard["job_tag"] else []
            lines.append(f"  {guard['describe']}" + (f" ({'; '.join(scope)})" if scope else ""))
            lines.append(f"    {guard['query']}")
        if len(guards) > MAX_GUARDS_SHOWN:
            lines.append(f"  ... and {len(guards) - MAX_GUARDS_SHOWN} more (--json lists them all)")
    tags = "honoured" if d["per_job_alarms"] else "ignored (per_job_alarms = false)"
    lines.append(f"  per-job guard tags (training-guard:alarm:<metric>): {tags}")
    stall = d["stall"]
    if stall is None:
        lines.append("  stall check: off (stall): a job that stops logging metrics is not noticed")
    else:
        lines.append(f"  stall check: a running job with no new metric for {stall['minutes']} min -> {stall['action']}")
    idle = d["idle_gpu"]
    if idle is None:
        lines.append("  idle GPU check: off (idle_gpu): a job whose GPUs sit idle is not noticed")
    else:
        lines.append(
            f"  idle GPU check: GPUs below {idle['threshold_percent']} % (per GPU) for {idle['minutes']} min in a "
            f"row, after the first {idle['ignore_first_minutes']} min of training -> {idle['action']} (idle_gpu)"
        )
    lines.append(
        f"  sweeper: every {d['sweep_minutes']} min "
        "(lost events, still-firing guards, orphaned alarms, budgets, idle GPUs)"
    )
    return lines


def _some(items: list[str], shown: int) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def _app_lines(app: dict[str, Any]) -> list[str]:
    channels = app["channels"]
    shown = ", ".join(f"{name}={channel}" for name, channel in list(channels.items())[:MAX_WEBHOOKS_SHOWN])
    more = f" and {len(channels) - MAX_WEBHOOKS_SHOWN} more" if len(channels) > MAX_WEBHOOKS_SHOWN else ""
    return [
        f"  Slack: app mode (slack.mode): one thread per job in {shown}{more}; buttons for "
        f"{len(app['allowed_users'])} user(s) (slack.app.allowed_users)",
        f"    put the bot token in {app['bot_token_secret']} and the signing secret in {app['signing_secret']};"
        " the app's request URL is the stack output SlackInteractivityUrl",
    ]


def _organization_lines(d: dict[str, Any]) -> list[str]:
    org = d["organization"]
    if org is None:
        return []  # one account and region: nothing to say
    units = org["organizational_units"]
    rollout = f"a StackSet to {_some(units, 3)}" if units else "a member stack per account"
    return [
        f"Organization: hub {org['hub_account']} in {org['region']}, {len(org['members'])} member account(s) "
        f"({_some(org['members'], 3)}); members get {rollout}; any other account's events are ignored"
    ]


def _notification_lines(d: dict[str, Any]) -> list[str]:
    notes = d["notifications"]
    kinds = {"failed": "failed", "stopped": "stopped", "spot_interrupted": "spot interrupted", "completed": "completed"}
    on = [word for key, word in kinds.items() if notes[key]]
    off = [word for key, word in kinds.items() if not notes[key]]
    lines = [
        "Notifications: one per transition, to the SNS topic (stack output NotificationTopicArn)",
        f"  job lifecycle: {', '.join(on) or 'none'}" + (f" (not: {', '.join(off)})" if off else ""),
    ]
    emails = d["emails"]
    if emails:
        lines.append(f"  e-mail: {_some(emails, MAX_EMAILS_SHOWN)} (each confirms its subscription once)")
    else:
        lines.append("  e-mail: off: no addresses (emails)")
    slack = d["slack"]
    if slack is None:
        lines.append("  Slack: off: no webhooks configured (slack.webhooks)")
    else:
        webhooks = slack["webhooks"]
        app = slack.get("app")
        if app is not None:
            lines += _app_lines(app)
        else:
            lines.append(f"  Slack: {len(webhooks)} webhook{'s' if len(webhooks) > 1 else ''} (slack.webhooks)")
        for name, hook in list(webhooks.items())[:MAX_WEBHOOKS_SHOWN]:
            created = ", created by the stack: put the webhook URL in it" if hook["created_by_the_stack"] else ""
            lines.append(f"    {name}: secret {hook['secret_name']}{created}")
        if len(webhooks) > MAX_WEBHOOKS_SHOWN:
            lines.append(f"    ... and {len(webhooks) - MAX_WEBHOOKS_SHOWN} more (--json lists them all)")
        lines.append(f"    routing: {'; '.join(slack['routes'])}")
    q = d["q_developer"]
    if q is None:
        lines.append("  Amazon Q Developer: off: not configured (q_developer)")
    else:
        lines.append(
            f"  Amazon Q Developer: Slack workspace {q['slack_workspace_id']}, channel {q['slack_channel_id']}"
        )
    lines.append(
        f"  a handled transition is remembered {d['dedup_ttl_days']} days (dedup_ttl_days): never announced twice"
    )
    return lines
