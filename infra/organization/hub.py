"""The hub: the single-account stack, plus what lets it guard the member accounts.

- A custom event bus the members forward to. Its policy lets the organization put events on it
  (`aws:PrincipalOrgID`, when `organization_id` is set) or else exactly the member accounts. EventBridge keeps an
  event bus policy to 10 KB
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-events-eventbuspolicy.html);
  the configuration's cap on members keeps the listed form within it (tests/infra/test_organization_limits.py).
- Rules on that bus with the single-account rules' patterns, to the same functions, with the same retries and
  dead-letter queues. The functions accept exactly the hub's own account and the configured members
  (training_guard.domain.accounts): an event of another account of the organization is ignored and counted.
- The functions that act on jobs get fixed role names (each member role trusts them by ARN) and may assume the
  member role of each configured member account, and no other. In Slack app mode the click worker is one of them:
  Stop now on a member's job stops it in the member's account.
- With `organizational_units`, the StackSet that rolls the member stack out to them (stackset.py).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, CfnOutput, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.components.functions import GuardFunction
from infra.components.job_events import event_target
from infra.organization.member import pattern
from infra.organization.member_logs import MemberLogs
from infra.organization.names import CLICK_WORKER, LOG_EVENTS, acting_functions, hub_role_name
from infra.organization.stackset import MemberStackSet
from infra.stack import TrainingGuardStack
from training_guard import contract
from training_guard.config.model import ConfigError, GuardConfig, OrganizationConfig

BUS_POLICY_STATEMENT_ID = "TrainingGuardMembers"
IAM_ROLE_NAME_MAX = 64  # https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html


def member_role_arn(scope: Construct, organization: OrganizationConfig, account: str) -> str:
    return Stack.of(scope).format_arn(
        service="iam",
        region="",
        account=account,
        resource="role",
        resource_name=organization.member_role_name,
        arn_format=ArnFormat.SLASH_RESOURCE_NAME,
    )


def bus_policy_statement(organization: OrganizationConfig, bus_arn: str) -> iam.PolicyStatement:
    """Who may put events on the hub bus: the organization, or exactly the members (never anyone else)."""
    if organization.organization_id:
        return iam.PolicyStatement(
            sid=BUS_POLICY_STATEMENT_ID,
            actions=["events:PutEvents"],
            resources=[bus_arn],
            principals=[iam.AnyPrincipal()],
            conditions={"StringEquals": {"aws:PrincipalOrgID": organization.organization_id}},
        )
    return iam.PolicyStatement(
        sid=BUS_POLICY_STATEMENT_ID,
        actions=["events:PutEvents"],
        resources=[bus_arn],
        principals=[iam.AccountPrincipal(account) for account in organization.members],
    )


class HubStack(TrainingGuardStack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: GuardConfig,
        member_template_body: str | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, config=config, **kwargs)
        organization = config.organization
        if organization is None:
            raise ValueError("a hub stack needs the configuration's organization section")
        self.organization = organization
        self.bus = events.EventBus(self, "HubBus", event_bus_name=organization.bus_name)
        self.bus.add_to_resource_policy(bus_policy_statement(organization, self.bus.event_bus_arn))
        self.member_job_rule = events.Rule(
            self,
            "MemberJobEvents",
            event_bus=self.bus,
            description="Members' SageMaker training job state changes -> Training Guard",
            event_pattern=pattern(dict(contract.JOB_EVENTS_PATTERN)),
        )
        self.member_job_rule.add_target(event_target(self.job_events.handler, self.job_events.dead_letters))
        self.member_alarm_rule = events.Rule(
            self,
            "MemberAlarmEvents",
            event_bus=self.bus,
            description="Members' Training Guard alarm (and alarm contributor) state changes",
            event_pattern=pattern(dict(contract.ALARM_EVENTS_PATTERN)),
        )
        self.member_alarm_rule.add_target(
            event_target(self.metric_guards.alarm_handler, self.metric_guards.dead_letters)
        )
        for key, function in self.acting_functions().items():
            self._act_in_members(key, function, managed=key == CLICK_WORKER)
        self.stack_set = (
            MemberStackSet(self, "Members", config=config, body=member_template_body)
            if organization.organizational_units and member_template_body is not None
            else None
        )
        # Members' training logs: through the hub's CloudWatch Logs destination to the same log-events function.
        self.member_logs = (
            MemberLogs(self, "MemberLogs", organization=organization, wing=self.log_rules) if self.log_rules else None
        )
        if self.member_logs is not None and self.stack_set is not None and self.log_rules is not None:
            # The members' log roles exist once the StackSet has deployed them.
            self.log_rules.subscription.node.add_dependency(self.stack_set)
        CfnOutput(self, "HubBusArn", value=self.bus.event_bus_arn, description="The bus members forward to")
        if self.member_logs is not None and self.log_rules is not None:
            CfnOutput(
                self,
                "MemberLogSubscriptions",
                value=self.log_rules.subscription.get_att_string("Members"),
                description="The log rules' filter in each member's training log group: how many subscribed, and "
                "the members that are not (the custom resource's status reason says why)",
            )
        if self.stack_set is not None:
            CfnOutput(
                self,
                "MemberStackSetName",
                value=self.stack_set.stack_set.ref,
                description="The StackSet that deploys the member stack",
            )

    def acting_functions(self) -> dict[str, GuardFunction]:
        functions = {
            "JobEvents": self.job_events.handler,
            "AlarmEvents": self.metric_guards.alarm_handler,
            "Sweeper": self.metric_guards.sweeper,
        }
        if self.log_rules is not None:
            # A member's log line that fires a rule stops the member's job through the member role.
            functions[LOG_EVENTS] = self.log_rules.handler
        if self.slack_app is not None:
            # Stop now on a member's job: the worker stops it through the member role (services/clicks.py).
            functions[CLICK_WORKER] = self.slack_app.worker
        assert tuple(functions) == acting_functions(self.config), "the member's trust lists the same roles"
        return functions

    def _act_in_members(self, key: str, function: GuardFunction, *, managed: bool = False) -> None:
        name = hub_role_name(self.organization, key)
        if len(name) > IAM_ROLE_NAME_MAX:
            raise ConfigError(
                [f"organization.region: the role name {name!r} would exceed IAM's {IAM_ROLE_NAME_MAX} characters"],
                "the organization's hub",
            )
        role = function.role.node.default_child
        assert isinstance(role, iam.CfnRole)
        role.role_name = name  # each member role trusts this ARN (member.py)
        roles = [member_role_arn(self, self.organization, a) for a in self.organization.members]
        if managed:
            # The click worker's default policy is the responder's and the click queue's, larger than the other acting
            # roles': with the most members, the longest member role name and GovCloud ARNs its inline policies would
            # exceed the 10,240 characters IAM allows a role's inline policies together (10,394 measured with the
            # limit tests' stand-ins, tests/infra/test_organization_slack_app.py). So its AssumeRole statement, the
            # same statement, is in customer managed policies of MEMBERS_PER_MANAGED_POLICY role ARNs each: a managed
            # policy holds 6,144 characters and does not count toward the inline total; two at most are attached,
            # within IAM's quota of managed policies per role (https://docs.aws.amazon.com/IAM/latest/UserGuide/
            # reference_iam-quotas.html).
            for i in range(0, len(roles), MEMBERS_PER_MANAGED_POLICY):
                iam.ManagedPolicy(
                    self,
                    f"{key}ActInMembers{i // MEMBERS_PER_MANAGED_POLICY + 1}",
                    description="Training Guard: the Slack click worker stops members' jobs through their roles",
                    roles=[function.role],
                    statements=[_assume(roles[i : i + MEMBERS_PER_MANAGED_POLICY])],
                )
            return
        # An inline policy of its own beside the role's default policy: CDK moves statements that do not fit a
        # default policy into managed policies, which IAM keeps to 6,144 characters; the role's inline policies
        # together may hold 10,240 (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html).
        iam.Policy(self, f"{key}ActInMembers", roles=[function.role], statements=[_assume(roles)])


# 50 role ARNs of GovCloud with a 24-character role name are about 3,300 characters: two managed policies hold the
# most members the configuration accepts, each well within 6,144 characters.
MEMBERS_PER_MANAGED_POLICY = 50


def _assume(role_arns: list[str]) -> iam.PolicyStatement:
    return iam.PolicyStatement(sid="ActInMemberAccounts", actions=["sts:AssumeRole"], resources=role_arns)
