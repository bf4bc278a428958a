"""Slack app mode in an organization (issues 14 and 16): the click worker stops a member's job through the member
role, so its role gets a fixed name and may assume exactly the members' roles, and each member role trusts it by ARN.
Webhook mode has no worker: neither template names one. And at the limits: the member role's trust with five hub
roles of IAM's longest role names, the worker's policies naming the most member roles."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.organization import hub as hub_module
from infra.organization.names import (
    ACTING_FUNCTIONS,
    CLICK_WORKER,
    LOG_EVENTS,
    SUBSCRIBER,
    acting_functions,
    hub_role_name,
)
from tests.infra import test_organization_limits as limits
from tests.infra.conftest import cfn_lint, synthesized
from tests.infra.test_organization import HUB, MEMBERS, REGION, OrgSynth, arn, example
from training_guard.config.model import MAX_MEMBER_ACCOUNTS, ConfigError, GuardConfig

APP_SLACK = {
    "mode": "app",
    "webhooks": None,  # the shipped cdk.json names a webhook: app mode removes it
    "app": {
        "channels": {"default": "C0ALERTS", "research": "C0RESEARCH", "platform": "C0PLATFORM"},
        "allowed_users": ["U0ALICE"],
    },
    # the example's routes, naming channels now
    "by_account": {"111122223333": "platform"},
    "by_organizational_unit": {"ou-ab12-cdef3456": "research"},
}
MANAGED_POLICY_MAX_CHARS = 6_144  # https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html
WORKER_ROLE = f"TrainingGuardHub-{CLICK_WORKER}-{REGION}"
# The example has the log rules on (their default): their function acts in members too.
ACTING = (*ACTING_FUNCTIONS, LOG_EVENTS)
ACTING_ORDER = [f"TrainingGuardHub-{f}-{REGION}" for f in (*ACTING, CLICK_WORKER)]
SUBSCRIBER_ROLE = f"TrainingGuardHub-{SUBSCRIBER}-{REGION}"  # trusted by the members' log roles, not the member role


def app_mode(document: dict[str, Any]) -> dict[str, Any]:
    return {**document, "slack": APP_SLACK}


@pytest.fixture(scope="module")
def org_app(tmp_path_factory: pytest.TempPathFactory) -> OrgSynth:
    return OrgSynth(tmp_path_factory.mktemp("org-app"), app_mode(example()))


@pytest.fixture(scope="module")
def org_webhook(tmp_path_factory: pytest.TempPathFactory) -> OrgSynth:
    return synthesized(OrgSynth, example(), tmp_path_factory.mktemp("org-webhook"))  # test_organization's `org`


def worker_role(synth: OrgSynth) -> tuple[str, dict[str, Any]]:
    """The role the click worker runs with, found from the function itself (not by its name)."""
    [function] = [f for k, f in synth.resources("AWS::Lambda::Function").items() if k.startswith("SlackAppClickWorker")]
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    role: dict[str, Any] = synth.json["Resources"][role_id]
    return role_id, role


def role_policies(synth: OrgSynth, role_id: str, kind: str = "AWS::IAM::Policy") -> list[dict[str, Any]]:
    """The documents of the role's inline (`AWS::IAM::Policy`) or customer managed policies."""
    return [
        p["Properties"]["PolicyDocument"]
        for p in synth.resources(kind).values()
        if {"Ref": role_id} in p["Properties"].get("Roles", [])
    ]


def role_statements(synth: OrgSynth, role_id: str) -> list[dict[str, Any]]:
    """Every statement of the role, inline and managed."""
    return [
        s
        for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
        for p in role_policies(synth, role_id, kind)
        for s in p["Statement"]
    ]


def actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def trusted(member_role: dict[str, Any]) -> Any:
    [statement] = member_role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    return statement["Condition"]["ArnEquals"]["aws:PrincipalArn"]


# --- app mode -----------------------------------------------------------------------------------------------------


def test_the_click_workers_role_has_its_fixed_name_and_may_assume_exactly_the_member_roles(org_app: OrgSynth) -> None:
    role_id, role = worker_role(org_app)
    assert role["Properties"]["RoleName"] == WORKER_ROLE
    sts = [s for s in role_statements(org_app, role_id) if any(a.startswith("sts:") for a in actions(s))]
    assert sts == [
        {
            "Sid": "ActInMemberAccounts",
            "Effect": "Allow",
            "Action": "sts:AssumeRole",
            "Resource": [arn(f":iam::{m}:role/TrainingGuardMember") for m in MEMBERS],
        }
    ]


def test_the_member_roles_trust_names_the_click_workers_role_beside_the_other_acting_roles(org_app: OrgSynth) -> None:
    _, role = worker_role(org_app)
    _, member_role = org_app.member_one("AWS::IAM::Role", "HubAccess")
    [statement] = member_role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert (statement["Effect"], statement["Action"]) == ("Allow", "sts:AssumeRole")
    assert statement["Principal"] == {"AWS": arn(f":iam::{HUB}:root")}
    assert statement["Condition"]["ArnEquals"]["aws:PrincipalArn"] == [
        arn(f":iam::{HUB}:role/{name}") for name in ACTING_ORDER
    ]
    assert arn(f":iam::{HUB}:role/{role['Properties']['RoleName']}") in trusted(member_role)


def test_in_app_mode_the_trust_names_exactly_the_roles_the_hub_names(org_app: OrgSynth) -> None:
    """Both templates come from one configuration: the hub's fixed role names are the member's trusted ARNs."""
    hub_names = [
        r["Properties"]["RoleName"]
        for r in org_app.resources("AWS::IAM::Role").values()
        if str(r["Properties"].get("RoleName", "")).startswith("TrainingGuardHub-")
        and r["Properties"]["RoleName"] != SUBSCRIBER_ROLE
    ]
    _, member_role = org_app.member_one("AWS::IAM::Role", "HubAccess")
    assert sorted(trusted(member_role), key=json.dumps) == sorted(
        (arn(f":iam::{HUB}:role/{name}") for name in hub_names), key=json.dumps
    )
    _, stack_set = org_app.one("AWS::CloudFormation::StackSet")
    assert json.loads(stack_set["Properties"]["TemplateBody"]) == org_app.member  # the StackSet rolls out the same


def test_in_app_mode_only_the_acting_roles_may_assume_anything(org_app: OrgSynth) -> None:
    """The interaction function and the notifier assume nothing: only the five acting roles and the log subscriber do."""
    for policy in org_app.resources("AWS::IAM::Policy").values():
        if any("sts:" in json.dumps(s["Action"]) for s in policy["Properties"]["PolicyDocument"]["Statement"]):
            [role_ref] = policy["Properties"]["Roles"]
            name = org_app.json["Resources"][role_ref["Ref"]]["Properties"].get("RoleName")
            assert name in [*ACTING_ORDER, SUBSCRIBER_ROLE]


def test_the_click_worker_is_an_acting_function_only_in_app_mode() -> None:
    webhook = GuardConfig.from_dict(example())
    app = GuardConfig.from_dict(app_mode(example()))
    assert acting_functions(webhook) == ACTING
    assert acting_functions(app) == (*ACTING, CLICK_WORKER)
    assert app.organization is not None
    assert hub_role_name(app.organization, CLICK_WORKER) == WORKER_ROLE


def test_the_click_workers_role_name_is_no_longer_than_the_longest_other_acting_role_name() -> None:
    """So app mode refuses no region the other role names accept (IAM's 64 characters, hub.py)."""
    assert len(CLICK_WORKER) <= max(len(f) for f in ACTING_FUNCTIONS)


def test_in_app_mode_a_region_that_would_make_a_role_name_too_long_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"organization\.region: the role name .* exceed IAM's 64 characters"):
        OrgSynth(tmp_path, app_mode(example(region="us-" + "x" * 40 + "-1")))


# --- webhook mode: no worker, nothing changes ----------------------------------------------------------------------


def test_in_webhook_mode_there_is_no_worker_and_the_member_trusts_the_four_acting_roles(org_webhook: OrgSynth) -> None:
    assert not [k for k in org_webhook.resources("AWS::Lambda::Function") if "ClickWorker" in k]
    assert not [
        r
        for r in org_webhook.resources("AWS::IAM::Role").values()
        if CLICK_WORKER in str(r["Properties"].get("RoleName", ""))
    ]
    _, member_role = org_webhook.member_one("AWS::IAM::Role", "HubAccess")
    assert trusted(member_role) == [arn(f":iam::{HUB}:role/TrainingGuardHub-{f}-{REGION}") for f in ACTING]
    assert CLICK_WORKER not in json.dumps(org_webhook.member)


def test_app_mode_adds_exactly_the_workers_arn_to_the_member_template(org_app: OrgSynth, org_webhook: OrgSynth) -> None:
    """The member template of app mode is webhook mode's with one more trusted ARN, and nothing else."""
    webhook, app = json.loads(json.dumps(org_webhook.member)), json.loads(json.dumps(org_app.member))
    app_role = next(k for k in app["Resources"] if "HubAccess" in k and app["Resources"][k]["Type"] == "AWS::IAM::Role")
    condition = app["Resources"][app_role]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Condition"]
    assert condition["ArnEquals"]["aws:PrincipalArn"].pop() == arn(f":iam::{HUB}:role/{WORKER_ROLE}")
    assert app == webhook


# --- at the limits ----------------------------------------------------------------------------------------------------

# The longest region whose acting role names still fit IAM's 64 characters: every role name is at that limit for the
# longest acting key ("AlarmEvents", "ClickWorker"). A pattern-valid name (no AWS region is this long).
LONGEST_NAMES_REGION = "ap-" + "x" * 29 + "-55"  # 35 characters: 64 - len("TrainingGuardHub-ClickWorker-")


def test_the_longest_names_region_makes_64_character_role_names() -> None:
    config = GuardConfig.from_dict(app_mode(example(region=LONGEST_NAMES_REGION)))
    assert config.organization is not None
    assert len(hub_role_name(config.organization, CLICK_WORKER)) == hub_module.IAM_ROLE_NAME_MAX


@pytest.fixture(scope="module")
def app_at_the_limit(tmp_path_factory: pytest.TempPathFactory) -> OrgSynth:
    """The most members, listed; role names of 64 characters; app mode with the longest routes' names kept short."""
    document = example(
        members=limits.accounts(MAX_MEMBER_ACCOUNTS),
        organization_id=None,
        bus_name=limits.LONGEST_BUS_NAME,
        member_role_name="r" * 24,
        region=LONGEST_NAMES_REGION,
    )
    document["stop_requires_tag"] = "t" * 128  # SageMaker tag keys: at most 128 characters
    document["organization"].pop("account_units")
    document = app_mode(document)
    document["slack"] = {k: v for k, v in APP_SLACK.items() if not k.startswith("by_")}
    return OrgSynth(tmp_path_factory.mktemp("app-limit"), document)


@pytest.fixture
def longest_region(monkeypatch: pytest.MonkeyPatch) -> None:
    """The region token resolved to the configured region, longer than any AWS region."""
    monkeypatch.setitem(limits.WORST, "AWS::Region", LONGEST_NAMES_REGION)


@pytest.mark.usefixtures("longest_region")
def test_the_member_roles_trust_with_five_64_character_role_names_fits_iams_2048_characters(
    app_at_the_limit: OrgSynth,
) -> None:
    """IAM's role trust policy length: 2,048 characters by default
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html)."""
    _, role = app_at_the_limit.member_one("AWS::IAM::Role", "HubAccess")
    trust = limits.resolve(role["Properties"]["AssumeRolePolicyDocument"])
    names = [a.rsplit("/", 1)[1] for a in trust["Statement"][0]["Condition"]["ArnEquals"]["aws:PrincipalArn"]]
    assert len(names) == 5
    assert max(len(n) for n in names) == hub_module.IAM_ROLE_NAME_MAX
    # with the organization's condition too, at its longest (o- and 32 characters)
    trust["Statement"][0]["Condition"]["StringEquals"] = {"aws:PrincipalOrgID": "o-" + "a" * 32}
    size = len(limits.compact(trust))
    assert size <= limits.TRUST_POLICY_MAX_CHARS, size


@pytest.mark.usefixtures("longest_region")
def test_the_click_workers_policies_with_the_most_members_fit_iams_limits(app_at_the_limit: OrgSynth) -> None:
    """Its inline policies together within 10,240 characters, each managed policy within 6,144, white space not
    counted (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html); between them, AssumeRole on
    exactly the 100 members' roles."""
    role_id, role = worker_role(app_at_the_limit)
    assert len(role["Properties"]["RoleName"]) == hub_module.IAM_ROLE_NAME_MAX
    inline = [limits.resolve(p) for p in role_policies(app_at_the_limit, role_id)]
    managed = [limits.resolve(p) for p in role_policies(app_at_the_limit, role_id, "AWS::IAM::ManagedPolicy")]
    assert len(inline) == 1  # the default policy only
    assert len(managed) == -(-MAX_MEMBER_ACCOUNTS // hub_module.MEMBERS_PER_MANAGED_POLICY)
    assumed = [r for p in managed for s in p["Statement"] for r in s["Resource"]]
    assert assumed == [f"arn:aws-us-gov:iam::{a}:role/{'r' * 24}" for a in limits.accounts(MAX_MEMBER_ACCOUNTS)]
    inline_size = sum(len(limits.compact(p)) for p in inline)
    assert inline_size <= limits.ROLE_POLICY_MAX_CHARS, inline_size
    for policy in managed:
        assert len(limits.compact(policy)) <= MANAGED_POLICY_MAX_CHARS, len(limits.compact(policy))


def test_the_other_acting_roles_keep_their_inline_assume_role_policy_in_app_mode(org_app: OrgSynth) -> None:
    managed_roles = [
        r["Ref"] for p in org_app.resources("AWS::IAM::ManagedPolicy").values() for r in p["Properties"]["Roles"]
    ]
    worker_id, _ = worker_role(org_app)
    assert managed_roles == [worker_id]  # two members: one managed policy, the worker's


# --- checks ---------------------------------------------------------------------------------------------------------


def test_cdk_nag_and_cfn_lint_find_nothing_in_the_app_mode_hub(org_app: OrgSynth) -> None:
    report = org_app.report()
    for plugin in report["pluginReports"]:
        assert plugin["violations"] == [], plugin["pluginName"]
    assert cfn_lint(org_app.outdir / "TrainingGuard.template.json") == []
