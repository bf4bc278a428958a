"""The member stack rolled out to an organization: a service-managed StackSet created by the hub's stack.

Service-managed permissions: CloudFormation creates the roles it deploys with in the member accounts; the
StackSet is created from the organization's management account (`CallAs: SELF`) or a registered delegated
administrator (`DELEGATED_ADMIN`), and never deploys to the management account itself, even when it belongs to
a targeted OU (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/stacksets-orgs-associate-stackset-with-org.html;
CallAs, AutoDeployment: https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_CreateStackSet.html).
Automatic deployment puts the member stack in every account later added to a targeted OU and removes it from an
account that leaves.

The template body is the member stack as this app synthesizes it (`member_template`), in a separate app with the
same context, so the StackSet deploys exactly what `cdk deploy TrainingGuardMember` would. It carries no Lambda
code and no asset, so member accounts need no asset bucket and no bootstrap. CreateStackSet takes a TemplateBody
of at most 51,200 bytes (API reference above): a larger member template fails the synth here, naming the limit,
instead of failing in CloudFormation.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

from aws_cdk import App, CfnStackSet
from constructs import Construct

from infra.organization.member import MemberStack
from infra.organization.names import MEMBER_STACK_NAME, STACK_SET_NAME
from training_guard.config.model import ConfigError, GuardConfig

TEMPLATE_BODY_MAX_BYTES = 51_200
PERMISSION_MODEL = "SERVICE_MANAGED"
# The member template names its role (the hub builds the role's ARN from the configuration).
CAPABILITIES = ("CAPABILITY_NAMED_IAM",)
# The CDK CLI asks for this context; it adds each resource's construct path to the template as metadata, which a
# template body outside the app has no use for.
_PATH_METADATA_CONTEXT = "aws:cdk:enable-path-metadata"


def member_template(config: GuardConfig, context: dict[str, Any]) -> dict[str, Any]:
    """The member stack's template, synthesized on its own with the app's context."""
    member_context = {**context, _PATH_METADATA_CONTEXT: False}
    with tempfile.TemporaryDirectory(prefix="training-guard-member-") as outdir:
        app = App(outdir=outdir, context=member_context, analytics_reporting=False)
        MemberStack(app, MEMBER_STACK_NAME, config=config)
        template: dict[str, Any] = app.synth().get_stack_by_name(MEMBER_STACK_NAME).template
    return template


def template_body(template: dict[str, Any]) -> str:
    """The template as the StackSet's body: compact JSON, within CreateStackSet's limit."""
    body = json.dumps(template, separators=(",", ":"), sort_keys=True)
    size = len(body.encode("utf-8"))
    if size > TEMPLATE_BODY_MAX_BYTES:
        raise ConfigError(
            [
                f"organization: the member template is {size} bytes, over the {TEMPLATE_BODY_MAX_BYTES} bytes a "
                "StackSet's TemplateBody may hold; configure fewer metric_guards, or deploy the member stack per "
                "account (organizational_units: [])"
            ],
            "the organization's StackSet",
        )
    return body


class MemberStackSet(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: GuardConfig, body: str) -> None:
        super().__init__(scope, construct_id)
        organization = config.organization
        assert organization is not None
        self.stack_set = CfnStackSet(
            self,
            "StackSet",
            stack_set_name=STACK_SET_NAME,
            description="Training Guard member: forwards the guard's events to the hub and lets the hub act",
            permission_model=PERMISSION_MODEL,
            call_as=organization.stack_set_call_as,
            auto_deployment=CfnStackSet.AutoDeploymentProperty(enabled=True, retain_stacks_on_account_removal=False),
            capabilities=list(CAPABILITIES),
            template_body=body,
            stack_instances_group=[
                CfnStackSet.StackInstancesProperty(
                    deployment_targets=CfnStackSet.DeploymentTargetsProperty(
                        organizational_unit_ids=list(organization.organizational_units)
                    ),
                    regions=[organization.region],
                )
            ],
            # Queue a StackSet operation behind a running one instead of failing it.
            managed_execution={"Active": True},
        )
