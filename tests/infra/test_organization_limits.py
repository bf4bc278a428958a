"""The organization at its limits, measured on the synthesized templates with every token replaced by its longest
plausible value:

- the hub bus's policy with the most members the configuration accepts, listed: at most 10 KB
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-events-eventbuspolicy.html);
- each acting hub role's inline policies with as many member roles to assume, named with the longest role name the
  configuration accepts: at most 10,240 characters, white space not counted
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html);
- the member role's trust policy: at most 2,048 characters, IAM's default quota (same page);
- the StackSet's template body with the most metric guards the configuration accepts: at most 51,200 bytes
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_CreateStackSet.html).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.organization import stackset
from infra.organization.names import ACTING_FUNCTIONS, MEMBER_STACK_NAME
from tests.infra.test_organization import FUNCTION_PATHS, OrgSynth, example
from training_guard.config.model import MAX_FLEET_GUARDS, MAX_MEMBER_ACCOUNTS, ConfigError

BUS_POLICY_MAX_BYTES = 10 * 1024
ROLE_POLICY_MAX_CHARS = 10_240
TRUST_POLICY_MAX_CHARS = 2_048
# The longest values a token can take here: the GovCloud partition, a long region, and for a reference to a
# resource of the stack (a name CloudFormation generates, or an ARN) far more than CloudFormation generates.
WORST = {"AWS::Partition": "aws-us-gov", "AWS::Region": "ap-southeast-5", "AWS::AccountId": "111122223333"}
RESOURCE_REFERENCE = "x" * 256
LONGEST_BUS_NAME = "b" * 256


def resolve(value: Any) -> Any:
    """A template fragment with its intrinsic functions evaluated at their longest."""
    if isinstance(value, list):
        return [resolve(v) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"}:
        return WORST.get(value["Ref"], RESOURCE_REFERENCE)
    if set(value) == {"Fn::GetAtt"}:
        return RESOURCE_REFERENCE
    if set(value) == {"Fn::Join"}:
        separator, parts = value["Fn::Join"]
        return separator.join(str(resolve(p)) for p in parts)
    return {k: resolve(v) for k, v in value.items()}


def compact(document: Any) -> str:
    return json.dumps(document, separators=(",", ":"))


def accounts(n: int) -> list[str]:
    return [f"{100000000000 + i:012d}" for i in range(n)]


@pytest.fixture(scope="module")
def at_the_limit(tmp_path_factory: pytest.TempPathFactory) -> OrgSynth:
    """The most members, listed on the bus, the longest bus name, opt-in stopping with the longest tag key."""
    document = example(
        members=accounts(MAX_MEMBER_ACCOUNTS),
        organization_id=None,
        bus_name=LONGEST_BUS_NAME,
        member_role_name="r" * 24,
        region="ap-southeast-5",
    )
    document["stop_requires_tag"] = "t" * 128  # SageMaker tag keys: at most 128 characters
    # The example's chat routes name its two members; routes ship in the configuration file, not in these policies.
    document["organization"].pop("account_units")
    document.pop("slack")
    return OrgSynth(tmp_path_factory.mktemp("limit"), document)


def test_the_bus_policy_listing_the_most_members_fits_eventbridges_10_kb(at_the_limit: OrgSynth) -> None:
    _, policy = at_the_limit.one("AWS::Events::EventBusPolicy")
    statement = resolve(policy["Properties"]["Statement"])
    assert len(statement["Principal"]["AWS"]) == MAX_MEMBER_ACCOUNTS
    statement["Resource"] = f"arn:aws-us-gov:events:ap-southeast-5:111122223333:event-bus/{LONGEST_BUS_NAME}"
    document = compact({"Version": "2012-10-17", "Statement": [statement]})
    assert len(document.encode()) <= BUS_POLICY_MAX_BYTES, len(document.encode())


@pytest.mark.parametrize("function", [*ACTING_FUNCTIONS, "LogEvents", "Subscriber"])
def test_each_acting_hub_roles_policies_with_the_most_members_fit_iams_10240_characters(
    at_the_limit: OrgSynth, function: str
) -> None:
    path = {**FUNCTION_PATHS, "Subscriber": "LogRulesSubscriber"}[function]
    [role_id] = [
        k
        for k, v in at_the_limit.resources("AWS::IAM::Role").items()
        if path in k and str(v["Properties"].get("RoleName", "")).startswith("TrainingGuardHub-")
    ]
    policies = [
        resolve(p["Properties"]["PolicyDocument"])
        for p in at_the_limit.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    assert len(policies) == 2  # the default policy and the one that names the members' roles
    overflow = [
        p
        for p in at_the_limit.resources("AWS::IAM::ManagedPolicy").values()
        if {"Ref": role_id} in p["Properties"].get("Roles", [])
    ]
    assert overflow == []  # CDK moved nothing into a managed policy (6,144 characters)
    size = sum(len(compact(p)) for p in policies)  # IAM does not count white space
    assert size <= ROLE_POLICY_MAX_CHARS, size


def test_the_member_roles_trust_policy_fits_iams_default_2048_characters(at_the_limit: OrgSynth) -> None:
    _, role = at_the_limit.member_one("AWS::IAM::Role", "HubAccess")
    trust = resolve(role["Properties"]["AssumeRolePolicyDocument"])
    # with the organization's condition too, at its longest (o- and 32 characters)
    trust["Statement"][0]["Condition"]["StringEquals"] = {"aws:PrincipalOrgID": "o-" + "a" * 32}
    assert len(compact(trust)) <= TRUST_POLICY_MAX_CHARS, len(compact(trust))


def fleet_guards(n: int, *, name: str, metric: str, job_prefix: str | None) -> list[dict[str, Any]]:
    return [
        {
            "name": f"g{i:02d}-{name}"[:40],
            "metric": metric,
            "threshold": 123456.789,
            "statistic": "AVG",
            "comparison": ">=",
            "periods": 180,
            "datapoints": 180,
            "action": "stop",
            **({"job_prefix": job_prefix} if job_prefix else {}),
        }
        for i in range(n)
    ]


def test_the_member_template_with_the_most_metric_guards_fits_a_stacksets_template_body(tmp_path: Path) -> None:
    """50 guards with names and metrics like the README's (`loss-diverging`, `train:loss`, `GPUUtilization`)."""
    document = example()
    document["metric_guards"] = fleet_guards(
        MAX_FLEET_GUARDS, name="gpu-memory-utilization-high", metric="GPUMemoryUtilization", job_prefix="team-"
    )
    synth = OrgSynth(tmp_path, document)
    _, resource = synth.one("AWS::CloudFormation::StackSet")
    body = resource["Properties"]["TemplateBody"]
    assert len(synth.member_resources("AWS::CloudWatch::Alarm")) == MAX_FLEET_GUARDS
    assert len(body.encode()) <= stackset.TEMPLATE_BODY_MAX_BYTES, len(body.encode())


def test_fifty_guards_on_the_longest_metric_names_fail_the_synth_not_cloudformation(tmp_path: Path) -> None:
    """Metric names of 255 characters make the member template larger than a TemplateBody may be: the synth says
    so, with the way out (the per-account roll-out takes templates up to CloudFormation's own limits)."""
    document = example()
    document["metric_guards"] = fleet_guards(MAX_FLEET_GUARDS, name="n" * 40, metric="m" * 255, job_prefix="p" * 64)
    with pytest.raises(ConfigError, match="over the 51200 bytes a StackSet's TemplateBody may hold"):
        OrgSynth(tmp_path, document)
    document["organization"]["organizational_units"] = []
    OrgSynth(tmp_path / "per-account", document)  # no StackSet: the same guards deploy per account


def test_a_member_template_over_the_limit_fails_the_synth_naming_the_limit() -> None:
    at_limit = {
        "Description": "x" * (stackset.TEMPLATE_BODY_MAX_BYTES - len(stackset.template_body({"Description": ""})))
    }
    assert len(stackset.template_body(at_limit).encode()) == stackset.TEMPLATE_BODY_MAX_BYTES
    over = {"Description": at_limit["Description"] + "x"}
    with pytest.raises(ConfigError, match="over the 51200 bytes a StackSet's TemplateBody may hold"):
        stackset.template_body(over)


def test_the_stackset_body_is_the_member_template_without_the_clis_construct_paths(tmp_path: Path) -> None:
    """The CDK CLI asks for construct paths in the templates; the StackSet's body has no use for them."""
    from tests.infra.conftest import Synth

    config_file = tmp_path / "organization.json"
    config_file.write_text(json.dumps(example()))
    synth = Synth(tmp_path / "out", {"config": str(config_file), "aws:cdk:enable-path-metadata": True})
    member = json.loads((synth.outdir / f"{MEMBER_STACK_NAME}.template.json").read_text())
    assert all("aws:cdk:path" in r.get("Metadata", {}) for r in member["Resources"].values())
    for resource in member["Resources"].values():
        resource["Metadata"].pop("aws:cdk:path")
        if not resource["Metadata"]:
            resource.pop("Metadata")
    _, stack_set = synth.one("AWS::CloudFormation::StackSet")
    assert json.loads(stack_set["Properties"]["TemplateBody"]) == member


def test_the_log_destinations_role_trust_listing_the_most_members_fits_iams_2048_characters(
    at_the_limit: OrgSynth,
) -> None:
    """Without an organization id, CloudWatch Logs may assume it for the hub's and the 100 members' log groups."""
    _, role = at_the_limit.one("AWS::IAM::Role", "MemberLogsDestinationRole")
    trust = resolve(role["Properties"]["AssumeRolePolicyDocument"])
    assert len(trust["Statement"][0]["Condition"]["StringEquals"]["aws:SourceAccount"]) == MAX_MEMBER_ACCOUNTS + 1
    assert len(compact(trust)) <= TRUST_POLICY_MAX_CHARS, len(compact(trust))


def test_the_members_log_role_trust_fits_iams_2048_characters(at_the_limit: OrgSynth) -> None:
    _, role = at_the_limit.member_one("AWS::IAM::Role", "LogAccess")
    trust = resolve(role["Properties"]["AssumeRolePolicyDocument"])
    trust["Statement"][0]["Condition"]["StringEquals"] = {"aws:PrincipalOrgID": "o-" + "a" * 32}
    assert len(compact(trust)) <= TRUST_POLICY_MAX_CHARS, len(compact(trust))
