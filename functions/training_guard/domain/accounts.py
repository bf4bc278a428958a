"""Which accounts the guard acts in, and as whom. Pure: no boto3, no environment.

Single account (no `organization` in the configuration): the guard acts only in its own account; an event
that names another account is ignored (the default bus carries only this account's events, so anything else
was spoofed or misrouted).

Organization: the hub accepts exactly its own account and the configured members; every other account is
ignored and counted, even one of the same organization whose events reach the hub bus (the bus admits the
whole organization when `organization_id` is set). In a member account the guard acts through that member's
role, whose ARN is built here from the configuration: the event names only the account, and an account that
is not configured gets no ARN at all (`NotAMember`).

Job names are unique within an account and region only, so two members may both run `mnist-1`
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateTrainingJob.html). The state table's
keys of a member's job carry the account (`AccountLedger`); the hub's own jobs keep the keys of a
single-account guard, so turning a guard into a hub keeps its history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from training_guard.domain.errors import GuardError

if TYPE_CHECKING:
    from training_guard.config.model import GuardConfig, OrganizationConfig

# arn:<partition>:iam::<account>:role/<name> (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html)
ROLE_ARN = "arn:{partition}:iam::{account}:role/{name}"
# A member's job in the state table: "<account>/<job>". Job names are letters, digits and hyphens (the API reference
# above), so the separator cannot be part of one.
SCOPE_SEPARATOR = "/"


class NotAMember(GuardError):
    """The hub was asked to act in an account that is not one of its configured members."""

    def __init__(self, account: str | None) -> None:
        self.account = account
        super().__init__(f"account {account} is not a configured member of this guard's organization")


def accepts(config: GuardConfig, own_account: str | None, event_account: str | None) -> bool:
    """Whether the guard handles an event from `event_account`.

    Single account: only its own (unknown: a local run without a Lambda context, which accepts anything, as
    before). Organization: exactly the hub and the configured members, whatever the function's own account.
    """
    organization = config.organization
    if organization is None:
        return own_account is None or event_account == own_account
    return organization.accepts(event_account)


def is_member(config: GuardConfig, own_account: str | None, event_account: str | None) -> bool:
    """Whether an accepted event is about a member account (acted on through its role), not the guard's own."""
    organization = config.organization
    if organization is None or event_account is None:
        return False
    return event_account != own_account and event_account in organization.members


def member_role_arn(organization: OrganizationConfig, account: str | None, partition: str) -> str:
    """The role the hub assumes to act in `account`: only ever for a configured member."""
    if account is None or account not in organization.members:
        raise NotAMember(account)
    return ROLE_ARN.format(partition=partition, account=account, name=organization.member_role_name)


def scoped(account: str, name: str) -> str:
    return f"{account}{SCOPE_SEPARATOR}{name}"
