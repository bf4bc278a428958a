"""The member stack: what every training account needs to be guarded by the hub. No Lambda code, no assets.

- Two rules on the account's default bus forward the guard's events to the hub's bus: training job state changes
  (the single-account rule's pattern, from contract.py) and the guard's alarm state changes. EventBridge sends
  them with a role of this account allowed `events:PutEvents` on the hub bus only, trusted by EventBridge as the
  cross-account guide shows it
  (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-service-cross-account.html); a sender that gets
  its permission from an organization-wide bus policy must name such a role
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-events-eventbuspolicy.html).
  A forwarded event keeps the `account` of the member it happened in.
- The role the hub's functions assume: exactly what the single-account functions may do on this account's
  training jobs and the guard's alarms (the same action lists and resource patterns, imported from the
  single-account components), with the `stop_requires_tag` condition kept. Trusted by the hub account only for
  the hub functions' roles (in Slack app mode also the click worker's, which stops a job on Stop now), named by
  ARN in `aws:PrincipalArn` (and, with `organization_id`, a caller of the organization). The role ARNs are a
  condition rather than the principal: IAM turns a role principal into the role's unique ID when the policy is
  saved, so a hub redeployed with new roles would silently lose the trust, while the condition keeps comparing ARNs
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html). Both keys are
  global condition keys, usable in any policy
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html).
- The fleet metric guards: Metrics Insights alarms query the metrics of their own account, so each member has
  its own; their contributors' state changes reach the hub through the alarm rule above.

The stack is synthesized with the legacy synthesizer: no bootstrap version parameter and no rule, so the same
template is the StackSet's body (member accounts are not bootstrapped) and what `cdk deploy` puts in an account
with the CLI's credentials (https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.LegacyStackSynthesizer.html).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, CfnOutput, CfnResource, LegacyStackSynthesizer, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.job_events import (
    JOB_ALARM_ACTIONS,
    JOB_EVENTS_ACTIONS,
    JOB_TAG_READ_ACTIONS,
    job_alarm_arn_pattern,
    training_job_arn_pattern,
)
from infra.components.log_rules import SUBSCRIPTION_ACTIONS, training_log_group_arns
from infra.components.metric_guards import ALARM_READ_ACTIONS, UNSCOPED_READ_ACTIONS, FleetAlarm
from infra.components.queues import DEAD_LETTER_RETENTION
from infra.nag import acknowledge_findings
from infra.organization.names import SUBSCRIBER, acting_functions, hub_role_name, member_log_role_name
from training_guard import contract
from training_guard.config.model import GuardConfig, OrganizationConfig

# Actions of the member role, statement by statement (each list is the single-account functions' own).
MEMBER_JOB_ACTIONS = (*JOB_EVENTS_ACTIONS, *JOB_TAG_READ_ACTIONS)


def hub_bus_arn(scope: Construct, organization: OrganizationConfig) -> str:
    return Stack.of(scope).format_arn(
        service="events",
        region=organization.region,
        account=organization.hub_account,
        resource="event-bus",
        resource_name=organization.bus_name,
        arn_format=ArnFormat.SLASH_RESOURCE_NAME,
    )


def hub_role_arns(scope: Construct, config: GuardConfig) -> list[str]:
    """The hub roles the member role trusts: the acting functions of this configuration (names.acting_functions).

    Slack app mode's click worker is listed only when the configuration has `slack.mode: app`, although a condition
    naming a role that does not exist would be harmless: the member template is synthesized from the same
    configuration as the hub (the StackSet's body is this stack synthesized beside the hub, stackset.py; `cdk deploy
    TrainingGuardMember` reads the same configuration file), so the two agree by construction, a webhook-mode member
    is unchanged, and the trust never names more roles than the hub has. Turning app mode on updates the StackSet's
    members with the hub's deploy; a member deployed per account must be deployed again (docs/organization.md)."""
    organization = config.organization
    assert organization is not None
    return [
        Stack.of(scope).format_arn(
            service="iam",
            region="",
            account=organization.hub_account,
            resource="role",
            resource_name=hub_role_name(organization, function),
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        for function in acting_functions(config)
    ]


def pattern(document: dict[str, Any]) -> events.EventPattern:
    """An EventPattern from the contract's pattern document, key for key."""
    return events.EventPattern(
        source=document.get("source"), detail_type=document.get("detail-type"), detail=document.get("detail")
    )


class Forwarding(Construct):
    """The two rules that send the guard's events to the hub bus, and the role EventBridge sends them with."""

    def __init__(self, scope: Construct, construct_id: str, *, organization: OrganizationConfig) -> None:
        super().__init__(scope, construct_id)
        bus_arn = hub_bus_arn(self, organization)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("events.amazonaws.com"),
            description="Training Guard member: EventBridge forwards the guard's events to the hub bus",
        )
        bus = events.EventBus.from_event_bus_arn(self, "HubBus", bus_arn)
        # After EventBridge's own retries (24 hours by default), an event the hub bus refused (a bus policy that
        # does not admit this account) waits here instead of being dropped. SQS-managed encryption: the member
        # has no key of its own, and EventBridge may write to it without a key policy.
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=DEAD_LETTER_RETENTION,
        )
        self.job_rule = events.Rule(
            self,
            "JobEvents",
            description="SageMaker training job state changes -> the Training Guard hub",
            event_pattern=pattern(dict(contract.JOB_EVENTS_PATTERN)),
        )
        self.alarm_rule = events.Rule(
            self,
            "AlarmEvents",
            description="Training Guard alarm (and alarm contributor) state changes -> the Training Guard hub",
            event_pattern=pattern(dict(contract.ALARM_EVENTS_PATTERN)),
        )
        for rule in (self.job_rule, self.alarm_rule):
            # The target grants the role events:PutEvents on the hub bus, and nothing else.
            rule.add_target(targets.EventBus(bus, role=self.role, dead_letter_queue=self.dead_letters))


class HubAccess(Construct):
    """The role the hub's functions assume in this account."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GuardConfig) -> None:
        super().__init__(scope, construct_id)
        organization = config.organization
        assert organization is not None
        conditions: dict[str, Any] = {"ArnEquals": {"aws:PrincipalArn": hub_role_arns(self, config)}}
        if organization.organization_id:
            conditions["StringEquals"] = {"aws:PrincipalOrgID": organization.organization_id}
        self.role = iam.Role(
            self,
            "Role",
            role_name=organization.member_role_name,  # the hub builds its ARN from the configuration
            assumed_by=iam.AccountPrincipal(organization.hub_account).with_conditions(conditions),
            description="Training Guard member: the hub's functions describe, stop and tag this account's jobs",
        )
        jobs = training_job_arn_pattern(self)
        actions = list(MEMBER_JOB_ACTIONS)
        if config.stop_requires_tag:
            # As in the single-account functions: IAM itself refuses to stop a job without the opt-in tag.
            actions.remove("sagemaker:StopTrainingJob")
            self.role.add_to_policy(
                iam.PolicyStatement(
                    sid="StopOptedInTrainingJobs",
                    actions=["sagemaker:StopTrainingJob"],
                    resources=[jobs],
                    conditions={
                        contract.STOP_OPT_IN_OPERATOR: {
                            f"aws:ResourceTag/{config.stop_requires_tag}": contract.STOP_OPT_IN_VALUE
                        }
                    },
                )
            )
        self.role.add_to_policy(
            iam.PolicyStatement(sid="ObserveStopAndAttributeTrainingJobs", actions=actions, resources=[jobs])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="KeepPerJobAlarms", actions=list(JOB_ALARM_ACTIONS), resources=[job_alarm_arn_pattern(self)]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(sid="ReadAlarms", actions=list(ALARM_READ_ACTIONS), resources=["*"])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(sid="ListRunningJobsAndMetrics", actions=list(UNSCOPED_READ_ACTIONS), resources=["*"])
        )
        # As for the sweeper's policy: cfn-lint's action list predates DescribeAlarmContributors (W3037).
        policy = self.role.node.find_child("DefaultPolicy").node.default_child
        assert isinstance(policy, CfnResource)
        policy.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3037"]}})


class LogAccess(Construct):
    """The role the hub's log-rules subscriber assumes in this account: it may put, describe and delete the guard's
    filter on the training log group (and create the group), nothing else; trusted only by the subscriber's role. A role
    of its own, not the member role: the functions that act on jobs need no logs action, and the subscriber nothing
    else (docs/design/log-subscription.md, "Members")."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GuardConfig) -> None:
        super().__init__(scope, construct_id)
        organization = config.organization
        assert organization is not None
        subscriber = Stack.of(self).format_arn(
            service="iam",
            region="",
            account=organization.hub_account,
            resource="role",
            resource_name=hub_role_name(organization, SUBSCRIBER),
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        conditions: dict[str, Any] = {"ArnEquals": {"aws:PrincipalArn": [subscriber]}}
        if organization.organization_id:
            conditions["StringEquals"] = {"aws:PrincipalOrgID": organization.organization_id}
        self.role = iam.Role(
            self,
            "Role",
            role_name=member_log_role_name(organization),  # the hub builds its ARN from the configuration
            assumed_by=iam.AccountPrincipal(organization.hub_account).with_conditions(conditions),
            description="Training Guard member: the hub subscribes the log rules to this account's training logs",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="SubscribeTrainingLogGroup",
                actions=list(SUBSCRIPTION_ACTIONS),
                resources=training_log_group_arns(self),
            )
        )


MEMBER_DESCRIPTION = "Training Guard member: forwards the guard's events to the hub and lets the hub act on jobs"


class MemberStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: GuardConfig, **kwargs: Any) -> None:
        kwargs.setdefault("description", MEMBER_DESCRIPTION)
        super().__init__(scope, construct_id, synthesizer=LegacyStackSynthesizer(), analytics_reporting=False, **kwargs)
        organization = config.organization
        if organization is None:
            raise ValueError("a member stack needs the configuration's organization section")
        self.config = config
        self.forwarding = Forwarding(self, "Forwarding", organization=organization)
        self.access = HubAccess(self, "HubAccess", config=config)
        # The hub's log rules read this account's training logs through a filter the hub's subscriber puts.
        self.logs = LogAccess(self, "LogAccess", config=config) if config.log_rules.enabled else None
        self.alarms = [FleetAlarm(self, f"Guard-{g.name}", guard=g).alarm for g in config.metric_guards]
        CfnOutput(
            self,
            "ForwardingDeadLettersUrl",
            value=self.forwarding.dead_letters.queue_url,
            description="Queue URL: the guard's events EventBridge could not forward to the hub",
        )
        CfnOutput(self, "HubAccessRoleArn", value=self.access.role.role_arn, description="The role the hub assumes")
        acknowledge_findings(self)
