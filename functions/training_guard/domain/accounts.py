"""Which accounts the guard acts in, and as whom. Pure: no boto3, no environment."""

from __future__ import annotations

from typing import TYPE_CHECKING

from training_guard.domain.errors import GuardError

if TYPE_CHECKING:
    from training_guard.config.model import GuardConfig, OrganizationConfig

# arn:<partition>:iam::<account>:role/<name> (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html)
ROLE_ARN = "arn:{partition}:iam::{account}:role/{name}"
# A member's job in the state table: "<account>/<job>" (names are unique per account and region only; job names
# hold no "/": https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateTrainingJob.html).
SCOPE_SEPARATOR = "/"


class NotAMember(GuardError):
    """The hub was asked to act in an account that is not one of its configured members."""

    def __init__(self, account: str | None) -> None:
        self.account = account
        super().__init__(f"account {account} is not a configured member of this guard's organization")


def accepts(config: GuardConfig, own_account: str | None, event_account: str | None) -> bool:
    """Whether the guard handles an event from `event_account` (any, when its own account is unknown: a local run)."""
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
    if account is None or account not in organization.members:
        raise NotAMember(account)
    return ROLE_ARN.format(partition=partition, account=account, name=organization.member_role_name)


def scoped(account: str, name: str) -> str:
    return f"{account}{SCOPE_SEPARATOR}{name}"
