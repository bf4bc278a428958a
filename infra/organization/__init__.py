"""One guard for an organization: a hub stack, the member stack, and the StackSet that rolls it out.

docs/organization.md has the picture and both roll-out paths. The package itself imports nothing of the CDK, so that
`infra.organization.names` (pure) is read without starting jsii: the demo's organization scenario names the member
stack from it, and importing aws_cdk there booted Node.js and the construct library (~2 s of CPU) that its kept
template (local/training_guard_local/template_cache.py) saves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from training_guard.config.model import GuardConfig

if TYPE_CHECKING:
    from aws_cdk import App

    from infra.organization.hub import HubStack
    from infra.organization.member import MemberStack

__all__ = ["build"]


def build(app: App, config: GuardConfig, *, description: str) -> tuple[HubStack, MemberStack]:
    """The hub and the member stack, both environment-agnostic like the single-account stack (same template shapes,
    same cdk-nag acknowledgments). The hub must be deployed in `organization.hub_account` and `region`: the
    member roles trust that account's hub roles, and members forward to that account's bus."""
    from infra.organization.hub import HubStack
    from infra.organization.member import MemberStack
    from infra.organization.names import HUB_STACK_NAME, MEMBER_STACK_NAME
    from infra.organization.stackset import member_template, template_body

    organization = config.organization
    assert organization is not None
    body = (
        template_body(member_template(config, app.node.get_all_context()))
        if organization.organizational_units
        else None
    )
    hub = HubStack(
        app,
        HUB_STACK_NAME,
        config=config,
        member_template_body=body,
        description=f"{description} (organization hub)",
    )
    member = MemberStack(app, MEMBER_STACK_NAME, config=config)
    return hub, member
