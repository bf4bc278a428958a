"""Names shared by the hub and the member stacks: pure, no jsii.

The member stack is deployed into accounts the hub's template cannot reference (a StackSet's template body is
a document, not a stack of the same app), so whatever one side names for the other is spelled here once, from
the configuration: the hub bus, the member role, the hub functions' roles.
"""

from __future__ import annotations

from training_guard.config.model import GuardConfig, OrganizationConfig

HUB_STACK_NAME = "TrainingGuard"  # the hub keeps the single-account stack's name: its tools find it the same way
MEMBER_STACK_NAME = "TrainingGuardMember"  # `cdk deploy TrainingGuardMember --profile <member>`
STACK_SET_NAME = "TrainingGuardMembers"

# The hub functions that act in member accounts, by the key the hub stack's functions use. Their roles get fixed
# names so that each member role can trust exactly them by ARN (infra/organization/member.py).
ACTING_FUNCTIONS = ("JobEvents", "AlarmEvents", "Sweeper")
# Slack app mode's click worker (infra/components/slack_app.py) stops a member's job through the member role when
# someone presses Stop now on it. Its key is no longer than the longest above ("AlarmEvents"), so app mode accepts
# every region the other role names accept (IAM's 64 characters, checked in hub.py).
CLICK_WORKER = "ClickWorker"
# The log rules' function (infra/components/log_rules.py) stops a member's job on a member's log line, through the
# member role like the event functions; it exists only with `log_rules.enabled`.
LOG_EVENTS = "LogEvents"
# The log rules' subscriber (the custom resource's function) puts the filter in every member's training log group,
# through a role of its own in the member (MEMBER_LOG_ROLE_SUFFIX) that may do only that. Its key is no longer than
# "AlarmEvents", so its role name fits IAM's 64 characters wherever the others do.
SUBSCRIBER = "Subscriber"
MEMBER_LOG_ROLE_SUFFIX = "-Logs"
# The hub's CloudWatch Logs destination members' filters send to (at most 512 characters, no ':' or '*':
# https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutDestination.html).
LOG_DESTINATION_NAME = "training-guard-member-logs"


def acting_functions(config: GuardConfig) -> tuple[str, ...]:
    """The hub functions that act in member accounts with this configuration: the click worker exists only in Slack
    app mode. The hub (its roles and AssumeRole statements) and the member (its role's trust) both take the list from
    here, from the same configuration, so the two templates agree (tests/infra/test_organization_slack_app.py)."""
    functions = (*ACTING_FUNCTIONS, LOG_EVENTS) if config.log_rules.enabled else ACTING_FUNCTIONS
    return (*functions, CLICK_WORKER) if config.slack.app_mode else functions


def member_log_role_name(organization: OrganizationConfig) -> str:
    """The member's role the hub's subscriber assumes to put the log rules' filter (at most 24 + 5 characters)."""
    return f"{organization.member_role_name}{MEMBER_LOG_ROLE_SUFFIX}"


def hub_role_name(organization: OrganizationConfig, function: str) -> str:
    """A hub function's role: the region is in the name, as role names are per account and a second hub could run
    in another region of the same account. At most 64 characters for every region name the configuration accepts
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html)."""
    return f"TrainingGuardHub-{function}-{organization.region}"
