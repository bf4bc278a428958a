"""Names shared by the hub and the member stacks: pure, no jsii.

The member stack is deployed into accounts the hub's template cannot reference (a StackSet's template body is
a document, not a stack of the same app), so whatever one side names for the other is spelled here once, from
the configuration: the hub bus, the member role, the hub functions' roles.
"""

from __future__ import annotations

from training_guard.config import OrganizationConfig

HUB_STACK_NAME = "TrainingGuard"  # the hub keeps the single-account stack's name: its tools find it the same way
MEMBER_STACK_NAME = "TrainingGuardMember"  # `cdk deploy TrainingGuardMember --profile <member>`
STACK_SET_NAME = "TrainingGuardMembers"

# The hub functions that act in member accounts, by the key the hub stack's functions use. Their roles get fixed
# names so that each member role can trust exactly them by ARN (infra/organization/member.py).
ACTING_FUNCTIONS = ("JobEvents", "AlarmEvents", "Sweeper")


def hub_role_name(organization: OrganizationConfig, function: str) -> str:
    """A hub function's role: the region is in the name, as role names are per account and a second hub could run
    in another region of the same account. At most 64 characters for every region name the configuration accepts
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html)."""
    return f"TrainingGuardHub-{function}-{organization.region}"
