"""What moto lacks for a hub and its member accounts (the organization demo), in force only inside `installed()`.

- **Forwarding to another account's bus keeps the event.** moto puts a forwarded event anew in the receiving
  account: the event becomes that account's (its `account`), and loses its `resources` and `time`. EventBridge
  delivers it as it was sent, so a rule on the receiving bus can match the sender's account ("Rules with an account
  field do not match any events sent from other accounts", PutPermission's Principal,
  https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/eventbridge/aws.sdk.kotlin.services.eventbridge.model/-put-permission-request/principal.html;
  sending between accounts:
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cross-account.html). Here the emulation answers
  PutEvents itself: each rule of the bus (moto's rules, read, and their patterns) whose pattern matches sends the event
  to its targets, and a rule whose target is another account's bus hands that bus's rules the event unchanged. moto
  evaluates no bus policy: the hub bus's policy is not checked here.
- **A target gets the event's account.** Without an input transformer a rule's target receives the matched event
  whole; moto's default input leaves out `account`, which is how the hub tells a member's event from its own. Here an
  SQS queue (the only target the demo's rules have; any other is refused) gets the whole event.
- **AssumeRole needs the role.** moto hands out credentials for any role ARN ("the role does not need to exist", its
  STS backend says); in AWS a role that is not there has no trust policy to admit the caller. Here AssumeRole of a
  role missing from its account is refused with `AccessDenied`, AWS's code for a refused AssumeRole ("An error occurred
  (AccessDenied) when calling the AssumeRole operation: User: ... is not authorized to perform: sts:AssumeRole on
  resource: ...", https://linden.consulting/en/blog/sts-assume-role-access-denied). The role's trust policy is not
  evaluated (moto evaluates no policy).
- **Who called**: `assumed_role_of(access_key)` is the role ARN an access key was handed out for by AssumeRole (None:
  not an assumed role's key, such as the hub's own credentials here).

PutEvents and AssumeRole are answered through botocore's events in front of moto (answers.py); moto's code is not
touched. Outside
`installed()` moto is as it was: other users of it in the same process (the integration tests assume roles
nobody created) see moto's own behaviour.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from moto.events.models import events_backends
from moto.iam.exceptions import NotFoundException
from moto.iam.models import iam_backends
from moto.sqs.models import sqs_backends
from moto.sts.models import sts_backends
from moto.utilities.arns import parse_arn

from training_guard_local import answers

PARTITION = "aws"
DEFAULT_BUS = "default"
# arn:<partition>:iam::<account>:role/<path/><name>
_ROLE_ARN = re.compile(r"^arn:[a-z-]+:iam::(?P<account>[0-9]{12}):role/(?:.*/)?(?P<name>[^/]+)$")


def _assume_role(call: answers.Call, model: Any) -> answers.Reply | None:
    """moto's AssumeRole for a role that exists in its account; AWS's refusal otherwise."""
    role_arn = str(call.params.get("RoleArn") or "")
    match = _ROLE_ARN.match(role_arn)
    if match is not None:
        try:
            iam_backends[match["account"]][PARTITION].get_role(match["name"])
        except NotFoundException:
            pass
        else:
            return None
    message = f"Not authorized to perform: sts:AssumeRole on resource: {role_arn}"
    return answers.refusal(model, "AccessDenied", message, status=403)


def _put_events(call: answers.Call, model: Any) -> answers.Reply:
    """PutEvents as EventBridge answers it: each entry an event of the caller's account, sent to its bus's rules."""
    entries: list[dict[str, str]] = []
    sends: list[tuple[str, str, str, dict[str, Any]]] = []
    for entry in call.params.get("Entries") or []:
        missing = next((key for key in ("Source", "DetailType", "Detail") if not entry.get(key)), None)
        if missing is not None:
            reason = f"Parameter {missing} is not valid. Reason: {missing} is a required argument."
            entries.append({"ErrorCode": "InvalidArgument", "ErrorMessage": reason})
            continue
        try:
            detail = json.loads(str(entry["Detail"]))
        except ValueError:
            entries.append({"ErrorCode": "MalformedDetail", "ErrorMessage": "Detail is malformed."})
            continue
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": entry["DetailType"],
            "source": entry["Source"],
            "account": call.account,
            "time": _event_time(entry.get("Time")),
            "region": call.region,
            "resources": list(entry.get("Resources") or []),
            "detail": detail,
        }
        account, region, bus = _bus(entry.get("EventBusName"), call.account, call.region)
        if bus not in events_backends[account][region].event_buses:
            return answers.refusal(model, "ResourceNotFoundException", f"Event bus {bus} does not exist.")
        sends.append((account, region, bus, event))
        entries.append({"EventId": str(event["id"])})
    for send in sends:  # only once every bus is known: a refused call delivers nothing
        _deliver(*send)
    failed = sum("ErrorCode" in entry for entry in entries)
    return answers.reply(model, {"FailedEntryCount": failed, "Entries": entries})


def _event_time(value: Any) -> str:
    """An event's `time` as EventBridge writes it (UTC, to the second); now when the entry gives none."""
    at = value if isinstance(value, datetime) else datetime.now(UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _bus(name_or_arn: Any, account: str, region: str) -> tuple[str, str, str]:
    """(account, region, name) of the bus an entry names (a name: the caller's; none: its default bus)."""
    if isinstance(name_or_arn, str) and name_or_arn.startswith("arn:"):
        arn = parse_arn(name_or_arn)
        return arn.account, arn.region, arn.resource_id
    return account, region, str(name_or_arn or DEFAULT_BUS)


def _deliver(account: str, region: str, bus: str, event: Any) -> None:
    """The event to every target of each enabled rule of the bus whose pattern matches it."""
    found = events_backends[account][region].event_buses.get(bus)
    if found is None:  # a target bus that is not there: EventBridge's delivery fails, the sender is not told
        return
    for rule in list(found.rules.values()):
        if rule.state != "ENABLED" or not rule.event_pattern.matches_event(event):
            continue
        for target in rule.targets:
            arn = parse_arn(target["Arn"])
            if any(key in target for key in ("Input", "InputPath", "InputTransformer")):
                raise NotImplementedError(f"the hub emulation sends targets the whole event only: {target['Id']}")
            if arn.service == "events" and arn.resource_type == "event-bus":
                _deliver(arn.account, arn.region, arn.resource_id, copy.deepcopy(event))
            elif arn.service == "sqs":
                group = (target.get("SqsParameters") or {}).get("MessageGroupId")
                queues = sqs_backends[arn.account][arn.region]
                queues.send_message(queue_name=arn.resource_id, message_body=json.dumps(event), group_id=group)
            else:
                raise NotImplementedError(f"the hub emulation delivers to SQS queues and buses only: {target['Arn']}")


@contextlib.contextmanager
def installed(session: Any = None) -> Iterator[None]:
    """Forwarding that keeps the event, and AssumeRole that needs the role, for the duration of the block, for every
    client that carries the answers' handlers (`session`'s are given them, default boto3's default session; the
    answers themselves are the process's: see answers.py)."""
    answers.install(session)
    with answers.answering({("events", "PutEvents"): _put_events, ("sts", "AssumeRole"): _assume_role}):
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
