"""The organization's stacks, statement by statement: the hub bus and its policy, the rules on it, the hub roles that
may assume exactly the members' roles, the member role's trust and permissions, the forwarding rules and role, the
StackSet. And the single-account app, which must not change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App

from infra.app import build_app
from infra.components import job_events, metric_guards
from infra.organization import hub as hub_module
from infra.organization import stackset
from infra.organization.names import (
    ACTING_FUNCTIONS,
    LOG_EVENTS,
    MEMBER_STACK_NAME,
    STACK_SET_NAME,
    SUBSCRIBER,
    hub_role_name,
)
from infra.stack import TrainingGuardStack
from tests.infra.conftest import (
    ConfigSynth,
    cfn_lint,
    expected_rows,
    shipped_context,
    statement_rows,
    synthesized,
    unordered,
)
from training_guard import contract
from training_guard.config.model import GuardConfig

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "configs" / "organization.json"
HUB = "111122223333"
MEMBERS = ("444455556666", "777788889999")
REGION = "eu-west-1"
ORG_ID = "o-a1b2c3d4e5"
PARTITION = {"Ref": "AWS::Partition"}


def arn(rest: str) -> dict[str, Any]:
    """An ARN whose partition is the stack's (what format_arn makes for a known account and region)."""
    return {"Fn::Join": ["", ["arn:", PARTITION, rest]]}


def here(service: str, resource: str) -> dict[str, Any]:
    """An ARN of this account and region (the member template is deployed in every member account)."""
    return {
        "Fn::Join": [
            "",
            ["arn:", PARTITION, f":{service}:", {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"}, resource],
        ]
    }


class OrgSynth(ConfigSynth):
    """The app synthesized with an organization configuration: the hub (`json`) and the member template."""

    file_name = "organization.json"

    def __init__(self, outdir: Path, document: dict[str, Any]) -> None:
        super().__init__(outdir, document)
        self.member: dict[str, Any] = json.loads((self.outdir / f"{MEMBER_STACK_NAME}.template.json").read_text())

    def member_resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.member["Resources"].items() if v["Type"] == kind}

    def member_one(self, kind: str, path_part: str = "") -> tuple[str, dict[str, Any]]:
        found = {k: v for k, v in self.member_resources(kind).items() if path_part in k}
        assert len(found) == 1, f"expected one {kind} matching {path_part!r}, found {list(found)}"
        return next(iter(found.items()))


def example(**organization: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(EXAMPLE.read_text())
    document.pop("$schema")
    document["organization"] = {**document["organization"], **organization}
    return document


@pytest.fixture(scope="module")
def org(tmp_path_factory: pytest.TempPathFactory) -> OrgSynth:
    return synthesized(OrgSynth, example(), tmp_path_factory.mktemp("org"))


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> OrgSynth:
    """Without organization_id (the bus lists the members), without OUs (no StackSet), with opt-in stopping."""
    document = example(organization_id=None, organizational_units=[])
    document["stop_requires_tag"] = "training-guard:guarded"
    return OrgSynth(tmp_path_factory.mktemp("listed"), document)


# --- the hub bus ----------------------------------------------------------------------------------------------


def test_the_hub_bus_is_the_configured_custom_bus(org: OrgSynth) -> None:
    _, bus = org.one("AWS::Events::EventBus")
    assert bus["Properties"]["Name"] == "training-guard-hub"


def test_the_bus_policy_admits_the_organization_only_to_put_events(org: OrgSynth) -> None:
    bus_id, _ = org.one("AWS::Events::EventBus")
    _, policy = org.one("AWS::Events::EventBusPolicy")
    props = policy["Properties"]
    assert props["EventBusName"] == {"Ref": bus_id}
    assert props["StatementId"] == f"cdk-{hub_module.BUS_POLICY_STATEMENT_ID}"
    assert set(props) == {"EventBusName", "StatementId", "Statement"}
    assert props["Statement"] == {
        "Sid": f"cdk-{hub_module.BUS_POLICY_STATEMENT_ID}",
        "Effect": "Allow",
        "Principal": {"AWS": "*"},  # anyone, as the condition allows: the organization only
        "Action": "events:PutEvents",
        "Resource": {"Fn::GetAtt": [bus_id, "Arn"]},
        "Condition": {"StringEquals": {"aws:PrincipalOrgID": ORG_ID}},
    }


def test_without_an_organization_id_the_bus_policy_lists_exactly_the_members(listed: OrgSynth) -> None:
    bus_id, _ = listed.one("AWS::Events::EventBus")
    _, policy = listed.one("AWS::Events::EventBusPolicy")
    assert policy["Properties"]["Statement"] == {
        "Sid": f"cdk-{hub_module.BUS_POLICY_STATEMENT_ID}",
        "Effect": "Allow",
        "Principal": {"AWS": [arn(f":iam::{m}:root") for m in MEMBERS]},
        "Action": "events:PutEvents",
        "Resource": {"Fn::GetAtt": [bus_id, "Arn"]},
    }


@pytest.mark.parametrize(
    ("rule_part", "function_part", "queue_part", "pattern"),
    [
        ("MemberJobEvents", "JobEventsHandler", "JobEventsDeadLetters", contract.JOB_EVENTS_PATTERN),
        ("MemberAlarmEvents", "MetricGuardsAlarmEvents", "MetricGuardsDeadLetters", contract.ALARM_EVENTS_PATTERN),
    ],
)
def test_rules_on_the_hub_bus_send_the_contracts_events_to_the_same_functions(
    org: OrgSynth, rule_part: str, function_part: str, queue_part: str, pattern: dict[str, Any]
) -> None:
    bus_id, _ = org.one("AWS::Events::EventBus")
    rule_id, rule = org.one("AWS::Events::Rule", rule_part)
    fn_id, _ = org.one("AWS::Lambda::Function", function_part)
    dlq_id, _ = org.one("AWS::SQS::Queue", queue_part)
    props = rule["Properties"]
    assert props["EventBusName"] == {"Ref": bus_id}
    assert props["EventPattern"] == pattern
    [target] = props["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [fn_id, "Arn"]}
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}
    assert target["RetryPolicy"] == {
        "MaximumRetryAttempts": job_events.EVENT_RETRY_ATTEMPTS,
        "MaximumEventAgeInSeconds": int(job_events.EVENT_MAX_AGE.to_seconds()),
    }
    permissions = [
        p["Properties"]
        for p in org.resources("AWS::Lambda::Permission").values()
        if p["Properties"].get("SourceArn") == {"Fn::GetAtt": [rule_id, "Arn"]}
    ]
    assert permissions == [
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": {"Fn::GetAtt": [fn_id, "Arn"]},
            "Principal": "events.amazonaws.com",
            "SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]},
        }
    ]


def test_the_default_bus_rules_of_the_hubs_own_account_are_kept(org: OrgSynth) -> None:
    default_bus_rules = [
        r for r in org.resources("AWS::Events::Rule").values() if "EventBusName" not in r["Properties"]
    ]
    patterns = [r["Properties"].get("EventPattern") for r in default_bus_rules]
    assert contract.JOB_EVENTS_PATTERN in patterns
    assert contract.ALARM_EVENTS_PATTERN in patterns


# --- the hub's roles --------------------------------------------------------------------------------------------

FUNCTION_PATHS = {
    "JobEvents": "JobEventsHandler",
    "AlarmEvents": "MetricGuardsAlarmEvents",
    "Sweeper": "Sweeper",
    "LogEvents": "LogRulesHandler",
}
# The example has the log rules on (their default): their function stops members' jobs too.
ACTING = (*ACTING_FUNCTIONS, LOG_EVENTS)


@pytest.mark.parametrize("function", ACTING)
def test_each_acting_hub_role_has_its_fixed_name_and_may_assume_exactly_the_member_roles(
    org: OrgSynth, function: str
) -> None:
    path = FUNCTION_PATHS[function]
    roles = {k: v for k, v in org.resources("AWS::IAM::Role").items() if path in k and "Role" in k}
    [(role_id, role)] = [(k, v) for k, v in roles.items() if "ServiceRole" not in k]
    assert role["Properties"]["RoleName"] == f"TrainingGuardHub-{function}-{REGION}"
    policies = [p for p in org.resources("AWS::IAM::Policy").values() if p["Properties"]["Roles"] == [{"Ref": role_id}]]
    assumes = [
        s
        for p in policies
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "sts:AssumeRole" in unordered(s["Action"])
    ]
    assert assumes == [
        {
            "Sid": "ActInMemberAccounts",
            "Effect": "Allow",
            "Action": "sts:AssumeRole",
            "Resource": [arn(f":iam::{m}:role/TrainingGuardMember") for m in MEMBERS],
        }
    ]


def test_no_other_hub_role_may_assume_anything(org: OrgSynth) -> None:
    # The subscriber may assume the members' log roles only (tests/infra/test_organization_logs.py).
    acting = {f"TrainingGuardHub-{f}-{REGION}" for f in (*ACTING, SUBSCRIBER)}
    for policy in org.resources("AWS::IAM::Policy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        if any("sts:" in json.dumps(s["Action"]) for s in statements):
            [role_ref] = policy["Properties"]["Roles"]
            assert org.json["Resources"][role_ref["Ref"]]["Properties"]["RoleName"] in acting


def test_the_member_roles_trust_names_exactly_the_hub_roles_the_hub_creates(org: OrgSynth) -> None:
    """The two templates are deployed to different accounts: the names must agree by construction."""
    hub_names = {
        r["Properties"]["RoleName"]
        for r in org.resources("AWS::IAM::Role").values()
        if str(r["Properties"].get("RoleName", "")).startswith("TrainingGuardHub-")
    } - {f"TrainingGuardHub-{SUBSCRIBER}-{REGION}"}  # trusted by the members' log roles instead
    _, member_role = org.member_one("AWS::IAM::Role", "HubAccess")
    [statement] = member_role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    trusted = statement["Condition"]["ArnEquals"]["aws:PrincipalArn"]
    assert trusted == [arn(f":iam::{HUB}:role/{name}") for name in sorted(hub_names, key=ACTING_ORDER.index)]


ACTING_ORDER = [f"TrainingGuardHub-{f}-{REGION}" for f in ACTING]


# --- the member stack -----------------------------------------------------------------------------------------------


def test_the_member_role_is_trusted_only_by_the_hub_roles_of_the_organization(org: OrgSynth) -> None:
    _, role = org.member_one("AWS::IAM::Role", "HubAccess")
    assert role["Properties"]["RoleName"] == "TrainingGuardMember"
    assert role["Properties"]["AssumeRolePolicyDocument"] == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": arn(f":iam::{HUB}:root")},
                "Action": "sts:AssumeRole",
                "Condition": {
                    "ArnEquals": {"aws:PrincipalArn": [arn(f":iam::{HUB}:role/{name}") for name in ACTING_ORDER]},
                    "StringEquals": {"aws:PrincipalOrgID": ORG_ID},
                },
            }
        ],
    }


def test_without_an_organization_id_the_member_role_trusts_the_hub_roles_by_arn_alone(listed: OrgSynth) -> None:
    _, role = listed.member_one("AWS::IAM::Role", "HubAccess")
    [statement] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Condition"] == {
        "ArnEquals": {"aws:PrincipalArn": [arn(f":iam::{HUB}:role/{name}") for name in ACTING_ORDER]}
    }


def member_role_statements(synth: OrgSynth) -> list[dict[str, Any]]:
    role_id, _ = synth.member_one("AWS::IAM::Role", "HubAccess")
    [policy] = [
        p for p in synth.member_resources("AWS::IAM::Policy").values() if p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def test_the_member_role_may_do_exactly_what_the_single_account_functions_may_do_on_jobs(org: OrgSynth) -> None:
    statements = member_role_statements(org)
    assert all(s["Effect"] == "Allow" and "Condition" not in s for s in statements)
    assert statement_rows(statements) == expected_rows(
        [
            (
                "ObserveStopAndAttributeTrainingJobs",
                [*job_events.JOB_EVENTS_ACTIONS, *job_events.JOB_TAG_READ_ACTIONS],
                here("sagemaker", ":training-job/*"),
            ),
            ("KeepPerJobAlarms", list(job_events.JOB_ALARM_ACTIONS), here("cloudwatch", ":alarm:training-guard-job-*")),
            ("ReadAlarms", list(metric_guards.ALARM_READ_ACTIONS), "*"),
            ("ListRunningJobsAndMetrics", list(metric_guards.UNSCOPED_READ_ACTIONS), "*"),
        ]
    )


def test_the_member_role_keeps_the_opt_in_tag_condition_on_stops(listed: OrgSynth) -> None:
    statements = member_role_statements(listed)
    stops = [s for s in statements if "sagemaker:StopTrainingJob" in unordered(s["Action"])]
    assert stops == [
        {
            "Sid": "StopOptedInTrainingJobs",
            "Effect": "Allow",
            "Action": "sagemaker:StopTrainingJob",
            "Resource": here("sagemaker", ":training-job/*"),
            "Condition": {
                contract.STOP_OPT_IN_OPERATOR: {"aws:ResourceTag/training-guard:guarded": contract.STOP_OPT_IN_VALUE}
            },
        }
    ]


@pytest.mark.parametrize(
    ("rule_part", "pattern"),
    [("JobEvents", contract.JOB_EVENTS_PATTERN), ("AlarmEvents", contract.ALARM_EVENTS_PATTERN)],
)
def test_the_member_forwards_the_contracts_events_to_the_hub_bus_with_its_role(
    org: OrgSynth, rule_part: str, pattern: dict[str, Any]
) -> None:
    _, rule = org.member_one("AWS::Events::Rule", rule_part)
    role_id, _ = org.member_one("AWS::IAM::Role", "ForwardingRole")
    dlq_id, _ = org.member_one("AWS::SQS::Queue", "ForwardingDeadLetters")
    props = rule["Properties"]
    assert "EventBusName" not in props  # the member's default bus, where SageMaker and CloudWatch send them
    assert props["EventPattern"] == pattern
    assert props["Targets"] == [
        {
            "Arn": arn(f":events:{REGION}:{HUB}:event-bus/training-guard-hub"),
            "Id": "Target0",
            "RoleArn": {"Fn::GetAtt": [role_id, "Arn"]},
            "DeadLetterConfig": {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}},
        }
    ]


def test_the_forwarding_role_is_eventbridges_and_may_only_put_events_on_the_hub_bus(org: OrgSynth) -> None:
    role_id, role = org.member_one("AWS::IAM::Role", "ForwardingRole")
    assert role["Properties"]["AssumeRolePolicyDocument"] == {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    [policy] = [
        p for p in org.member_resources("AWS::IAM::Policy").values() if p["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Effect": "Allow",
            "Action": "events:PutEvents",
            "Resource": arn(f":events:{REGION}:{HUB}:event-bus/training-guard-hub"),
        }
    ]


def test_what_cannot_be_forwarded_waits_in_an_encrypted_tls_only_queue_eventbridge_may_write(org: OrgSynth) -> None:
    _, queue = org.member_one("AWS::SQS::Queue", "ForwardingDeadLetters")
    assert queue["Properties"] == {"MessageRetentionPeriod": 14 * 24 * 3600, "SqsManagedSseEnabled": True}
    _, policy = org.member_one("AWS::SQS::QueuePolicy", "ForwardingDeadLetters")
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statements[0]["Effect"] == "Deny"
    assert statements[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    rules = set(org.member_resources("AWS::Events::Rule"))
    allowed = {s["Condition"]["ArnEquals"]["aws:SourceArn"]["Fn::GetAtt"][0] for s in statements[1:]}
    assert allowed == rules
    assert all(
        s["Principal"] == {"Service": "events.amazonaws.com"} and s["Action"] == "sqs:SendMessage"
        for s in statements[1:]
    )


def test_the_member_has_its_own_metric_guards(org: OrgSynth) -> None:
    [hub_alarm] = [
        a
        for a in org.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("AlarmName") == "training-guard-loss-diverging"
    ]
    [(_, member_alarm)] = list(org.member_resources("AWS::CloudWatch::Alarm").items())
    assert member_alarm["Properties"] == hub_alarm["Properties"]
    assert member_alarm["Properties"]["AlarmName"] == "training-guard-loss-diverging"


def test_the_member_template_has_no_code_no_assets_no_parameters_and_no_bootstrap_rule(org: OrgSynth) -> None:
    kinds = {r["Type"] for r in org.member["Resources"].values()}
    assert kinds == {
        "AWS::IAM::Role",
        "AWS::IAM::Policy",
        "AWS::Events::Rule",
        "AWS::SQS::Queue",
        "AWS::SQS::QueuePolicy",
        "AWS::CloudWatch::Alarm",
    }
    assert "Parameters" not in org.member
    assert "Rules" not in org.member
    manifest = json.loads((org.outdir / "manifest.json").read_text())
    assert f"{MEMBER_STACK_NAME}.assets" not in manifest["artifacts"]


# --- the sweeper in the members ----------------------------------------------------------------------------------


def actions_of(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def sweeper_role(synth: OrgSynth) -> tuple[str, dict[str, Any]]:
    """The role the hub's sweeper function runs with, found from the function itself (not by its name)."""
    [function] = [f for k, f in synth.resources("AWS::Lambda::Function").items() if k.startswith("MetricGuardsSweeper")]
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    role: dict[str, Any] = synth.json["Resources"][role_id]
    return role_id, role


def test_the_sweepers_role_may_assume_the_member_roles_of_the_configured_members_and_nothing_else(
    org: OrgSynth,
) -> None:
    role_id, _ = sweeper_role(org)
    statements = [
        s
        for p in org.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    sts = [s for s in statements if any(a.startswith("sts:") for a in actions_of(s))]
    assert sts == [
        {
            "Sid": "ActInMemberAccounts",
            "Effect": "Allow",
            "Action": "sts:AssumeRole",
            "Resource": [arn(f":iam::{m}:role/TrainingGuardMember") for m in MEMBERS],
        }
    ]


def test_the_member_roles_trust_admits_the_sweepers_role_by_its_arn(org: OrgSynth) -> None:
    _, role = sweeper_role(org)
    name = role["Properties"]["RoleName"]
    _, member_role = org.member_one("AWS::IAM::Role", "HubAccess")
    [statement] = member_role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert (statement["Effect"], statement["Action"]) == ("Allow", "sts:AssumeRole")
    assert statement["Principal"] == {"AWS": arn(f":iam::{HUB}:root")}
    assert arn(f":iam::{HUB}:role/{name}") in statement["Condition"]["ArnEquals"]["aws:PrincipalArn"]


@pytest.mark.parametrize("which", ["org", "listed"])
def test_the_member_role_allows_every_call_a_members_sweep_makes(which: str, request: pytest.FixtureRequest) -> None:
    """The calls are those recorded with a member's credentials on moto (tests/integration/
    test_organization_sweep_moto.py): a new call of the sweep without a grant here fails this test."""
    from tests.integration.test_organization_sweep_moto import MEMBER_SWEEP_ACTIONS

    synth: OrgSynth = request.getfixturevalue(which)
    allowed = [s for s in member_role_statements(synth) if s["Effect"] == "Allow"]
    jobs = here("sagemaker", ":training-job/*")
    job_alarms = here("cloudwatch", ":alarm:training-guard-job-*")
    for action in sorted(MEMBER_SWEEP_ACTIONS):
        granting = [s for s in allowed if action in actions_of(s)]
        assert granting, f"the member role does not allow {action}"
        resources = {json.dumps(s["Resource"], sort_keys=True) for s in granting}
        if action.startswith("sagemaker:") and action != "sagemaker:ListTrainingJobs":
            assert resources == {json.dumps(jobs, sort_keys=True)}, action  # the account's jobs, never "*"
        if action in ("cloudwatch:DeleteAlarms", "cloudwatch:PutMetricAlarm"):
            assert resources == {json.dumps(job_alarms, sort_keys=True)}, action  # the per-job alarms only


# --- the StackSet -------------------------------------------------------------------------------------------------


def test_the_stackset_rolls_the_member_stack_out_to_the_ous_with_service_managed_permissions(org: OrgSynth) -> None:
    _, resource = org.one("AWS::CloudFormation::StackSet")
    props = resource["Properties"]
    body = props.pop("TemplateBody")
    assert props == {
        "StackSetName": STACK_SET_NAME,
        "Description": "Training Guard member: forwards the guard's events to the hub and lets the hub act",
        "PermissionModel": "SERVICE_MANAGED",
        # the example's hub is a delegated administrator, not the management account (docs/organization.md)
        "CallAs": "DELEGATED_ADMIN",
        "AutoDeployment": {"Enabled": True, "RetainStacksOnAccountRemoval": False},
        "Capabilities": ["CAPABILITY_NAMED_IAM"],
        "ManagedExecution": {"Active": True},
        "StackInstancesGroup": [
            {"DeploymentTargets": {"OrganizationalUnitIds": ["ou-ab12-cdef3456"]}, "Regions": [REGION]}
        ],
    }
    assert json.loads(body) == org.member, "the StackSet deploys exactly the member stack of `cdk deploy`"
    assert len(body.encode()) <= stackset.TEMPLATE_BODY_MAX_BYTES


def test_a_hub_in_the_management_account_creates_the_stackset_as_self(tmp_path: Path) -> None:
    synth = OrgSynth(tmp_path, example(stack_set_call_as="SELF"))
    _, resource = synth.one("AWS::CloudFormation::StackSet")
    assert resource["Properties"]["CallAs"] == "SELF"


def test_without_ous_there_is_no_stackset_and_the_member_stack_is_deployed_per_account(listed: OrgSynth) -> None:
    assert listed.resources("AWS::CloudFormation::StackSet") == {}
    assert listed.member_resources("AWS::IAM::Role")


# --- checks ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["org", "listed"])
def test_cdk_nag_finds_nothing_open_in_the_hub_and_member_stacks(which: str, request: pytest.FixtureRequest) -> None:
    synth: OrgSynth = request.getfixturevalue(which)
    report = synth.report()
    for plugin in report["pluginReports"]:
        assert plugin["violations"] == [], plugin["pluginName"]
        assert plugin["conclusion"] == "success"
    stacks = {v["acknowledgedAt"] for p in report["pluginReports"] for v in p.get("suppressedViolations", [])}
    assert MEMBER_STACK_NAME in stacks  # the member's findings are acknowledged with the same reasons


@pytest.mark.parametrize("template", ["TrainingGuard", MEMBER_STACK_NAME])
def test_cfn_lint_finds_nothing_in_the_organizations_templates(org: OrgSynth, template: str) -> None:
    assert cfn_lint(org.outdir / f"{template}.template.json") == []


def test_the_hub_and_its_functions_ship_the_organization_to_the_functions(org: OrgSynth) -> None:
    shipped = org.shipped_config("JobEvents")
    assert shipped.organization is not None
    assert shipped.organization.members == MEMBERS
    assert isinstance(org.stack, hub_module.HubStack)


def test_a_region_that_would_make_a_hub_role_name_too_long_is_refused(tmp_path: Path) -> None:
    from training_guard.config.model import ConfigError

    long_region = "us-" + "x" * 40 + "-1"
    with pytest.raises(ConfigError, match="exceed IAM's 64 characters"):
        OrgSynth(tmp_path, example(region=long_region))


# --- the single-account app is unchanged ---------------------------------------------------------------------------


def test_the_single_account_app_has_no_organization_resources_and_one_stack(tmp_path: Path) -> None:
    app = App(outdir=str(tmp_path), context={**shipped_context(), "aws:cdk:bundling-stacks": []})
    app, stack = build_app(app, checks=False)
    assert type(stack) is TrainingGuardStack
    assembly = app.synth()
    assert [s.stack_name for s in assembly.stacks] == ["TrainingGuard"]
    template = assembly.get_stack_by_name("TrainingGuard").template
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert not kinds & {"AWS::Events::EventBus", "AWS::Events::EventBusPolicy", "AWS::CloudFormation::StackSet"}
    assert not [
        r for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Role" and "RoleName" in r["Properties"]
    ]
    assert 'sts:AssumeRole"' not in json.dumps(
        [r for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"]
    )


def test_the_hub_role_name_is_shared_by_both_sides() -> None:
    config = GuardConfig.from_dict(example())
    assert config.organization is not None
    assert [hub_role_name(config.organization, f) for f in ACTING] == ACTING_ORDER
