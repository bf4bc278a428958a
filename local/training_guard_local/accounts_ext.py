"""What moto lacks for a hub and its member accounts (the organization demo), in force only inside `installed()`.

- **Forwarding to another account's bus keeps the event.** moto puts a forwarded event anew in the receiving
  account: the event becomes that account's (its `account`), and loses its `resources` and `time`. EventBridge
  delivers it as it was sent, so a rule on the receiving bus can match the sender's account ("Rules with an account
  field do not match any events sent from other accounts", PutPermission's Principal,
  https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/eventbridge/aws.sdk.kotlin.services.eventbridge.model/-put-permission-request/principal.html;
  sending between accounts:
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cross-account.html). Here a rule whose target is
  another account's bus hands that bus's rules the event unchanged. moto evaluates no bus policy: the hub bus's
  policy is not checked here.
- **A target gets the event's account.** Without an input transformer a rule's target receives the matched event
  whole; moto's default input leaves out `account`, which is how the hub tells a member's event from its own. Here it
  is kept.
- **AssumeRole needs the role.** moto hands out credentials for any role ARN ("the role does not need to exist", its
  STS backend says); in AWS a role that is not there has no trust policy to admit the caller. Here AssumeRole of a
  role missing from its account is refused with `AccessDenied`, AWS's code for a refused AssumeRole ("An error occurred
  (AccessDenied) when calling the AssumeRole operation: User: ... is not authorized to perform: sts:AssumeRole on
  resource: ...", https://linden.consulting/en/blog/sts-assume-role-access-denied). The role's trust policy is not
  evaluated (moto evaluates no policy).
- **Who called**: `assumed_role_of(access_key)` is the role ARN an access key was handed out for by AssumeRole (None:
  not an assumed role's key, such as the hub's own credentials here).

Outside `installed()` moto is as it was: other users of it in the same process (the integration tests assume roles
nobody created) see moto's own behaviour.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Iterator
from typing import Any
from unittest import mock

from moto.events import models as events_models
from moto.events.utils import EventTemplateParser
from moto.iam.exceptions import NotFoundException
from moto.iam.models import iam_backends
from moto.sts.exceptions import STSClientError
from moto.sts.models import STSBackend, sts_backends
from moto.utilities.arns import parse_arn

PARTITION = "aws"
# arn:<partition>:iam::<account>:role/<path/><name>
_ROLE_ARN = re.compile(r"^arn:[a-z-]+:iam::(?P<account>[0-9]{12}):role/(?:.*/)?(?P<name>[^/]+)$")

_moto_send_to_targets = events_models.Rule.send_to_targets
# moto's default target input, with the event's account (the rest as moto has it)
_WHOLE_EVENT = EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE.replace(
    '"version": "0",', '"version": "0", "account": "<account>",'
)
_moto_assume_role = STSBackend.assume_role


class AccessDenied(STSClientError):
    def __init__(self, role_arn: str) -> None:
        super().__init__("AccessDenied", f"Not authorized to perform: sts:AssumeRole on resource: {role_arn}")


def _is_bus(arn: str) -> bool:
    parsed = parse_arn(arn)
    return bool(parsed.service == "events" and parsed.resource_type == "event-bus")


def _send_to_targets(self: Any, original_event: Any, transform_input: bool = True) -> None:
    """moto's delivery for every target but another bus; the event itself, unchanged, to another bus's rules."""
    buses = [t for t in self.targets if _is_bus(t["Arn"])]
    if not buses:
        _moto_send_to_targets(self, original_event, transform_input)
        return
    if not self.event_pattern.matches_event(original_event):
        return
    others = [t for t in self.targets if not _is_bus(t["Arn"])]
    if others:
        kept, self.targets = self.targets, others
        try:
            _moto_send_to_targets(self, original_event, transform_input)
        finally:
            self.targets = kept
    for target in buses:
        arn = parse_arn(target["Arn"])
        backend = events_models.events_backends[arn.account][arn.region]
        bus = backend.describe_event_bus(arn.resource_id)
        for rule in list(bus.rules.values()):
            # Each rule its own copy: moto's SQS delivery rewrites the event's time in place.
            rule.send_to_targets(copy.deepcopy(original_event))


def _assume_role(self: STSBackend, *args: Any, **kwargs: Any) -> Any:
    role_arn = str(kwargs.get("role_arn") or "")
    match = _ROLE_ARN.match(role_arn)
    if match is None:
        raise AccessDenied(role_arn)
    try:
        iam_backends[match["account"]][PARTITION].get_role(match["name"])
    except NotFoundException:
        raise AccessDenied(role_arn) from None
    return _moto_assume_role(self, *args, **kwargs)


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """Forwarding that keeps the event, and AssumeRole that needs the role, for the duration of the block."""
    if _WHOLE_EVENT == EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE:
        raise RuntimeError("moto's default target input changed: accounts_ext no longer knows how to keep `account`")
    with (
        mock.patch.object(EventTemplateParser, "DEFAULT_EVENT_INPUT_TEMPLATE", _WHOLE_EVENT),
        mock.patch.object(events_models.Rule, "send_to_targets", _send_to_targets),
        mock.patch.object(STSBackend, "assume_role", _assume_role),
    ):
        yield


def assumed_role_of(access_key: str) -> str | None:
    """The role ARN AssumeRole handed this access key out for (None: not an assumed role's key)."""
    for account in list(sts_backends):
        for assumed in sts_backends[account][PARTITION].assumed_roles:
            if assumed.access_key_id == access_key:
                return str(assumed.role_arn)
    return None


def assumed_roles(account: str) -> list[str]:
    """Every role ARN assumed in `account` so far (one per AssumeRole call), in order."""
    return [str(assumed.role_arn) for assumed in sts_backends[account][PARTITION].assumed_roles]
