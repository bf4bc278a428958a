"""The guard's Slack buttons: which message offers which, what a button carries, what a click on one means. Pure.

Which button goes where and what it carries: docs/design/slack-clicks.md."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from enum import StrEnum
from typing import Any

from training_guard.config.frozen import frozen
from training_guard.domain.job_names import ACCOUNT_ID, JOB_NAME, RULE_NAME_MAX
from training_guard.domain.values import mapping

ACTION_PREFIX = "training-guard:"
VALUE_MAX_CHARS = 2000  # https://docs.slack.dev/reference/block-kit/block-elements/button-element
ACTION_ID_MAX_CHARS = 255  # a button's action_id (same page)
BLOCK_ACTIONS = "block_actions"
CLICK_SCHEMA = "training-guard.click/1"  # the message the acknowledgement hands to the asynchronous path


class Act(StrEnum):
    STOP = "stop"
    SNOOZE = "snooze"
    EXEMPT = "exempt"
    MUTE = "mute"


# Which buttons name a rule: snoozing and muting silence one rule; a stop and an exemption are about the job.
_NEEDS_RULE = frozenset({Act.SNOOZE, Act.MUTE})

RUNNING = "InProgress"
# The kinds whose notification is about a finding (policy.Kind values; the notifier does not import the policy).
FINDING_KINDS = frozenset(
    {"issues_found", "metric_alarm", "metric_stall", "idle_gpu", "budget_warning", "budget_exceeded"}
)
# Stop now (issue 14): on "would have stopped", a notify-only rule finding or metric guard, a deferred stop, a stall.
_STOP_OUTCOMES = frozenset({"would_stop", "deferred"})
_STOP_WHEN_NOTIFIED = frozenset({"issues_found", "metric_alarm", "metric_stall"})
_FINISHED_OUTCOMES = frozenset({"stopped", "already_ended", "already_stopping"})


class NotAClick(ValueError):
    """A payload that is not a click on one of the guard's buttons, or one whose value cannot be read."""


@frozen
class Click:
    act: Act
    job: str
    user: str
    rule: str | None = None  # the rule to silence; for a stop, the finding that offered it (for the record)
    account: str | None = None  # a member account's job (organization mode); None: the guard's own account
    seconds: int | None = None  # snooze or exemption length; None: until the job ends
    user_name: str | None = None
    team: str | None = None
    channel: str | None = None
    message_ts: str | None = None
    thread_ts: str | None = None  # its thread's parent, when the button was on a reply
    response_url: str | None = None
    action_ts: str | None = None

    @property
    def by(self) -> str:
        """Who acted, as the guard records it (tags, audit record, mutes): `slack:<user id>`."""
        return f"slack:{self.user}"

    @property
    def thread(self) -> str | None:
        return self.thread_ts or self.message_ts

    def to_json(self) -> dict[str, Any]:
        return {k: (v.value if isinstance(v, Act) else v) for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Click:
        fields = dict(data)
        try:
            fields["act"] = Act(fields["act"])
            return cls(**fields)
        except (KeyError, TypeError, ValueError) as exc:
            raise NotAClick(f"not a click record: {exc}") from None


def button(
    act: Act,
    *,
    label: str,
    job: str,
    rule: str | None = None,
    account: str | None = None,
    seconds: int | None = None,
    style: str | None = None,
    suffix: str = "",
) -> dict[str, Any]:
    value: dict[str, Any] = {"job": job}
    if rule is not None:
        value["rule"] = rule
    if account is not None:
        value["account"] = account
    if act in (Act.SNOOZE, Act.EXEMPT):
        value["for"] = seconds  # null: until the job ends
    _check(act, job=job, rule=rule, account=account, seconds=seconds)
    encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    action_id = f"{ACTION_PREFIX}{act.value}{':' + suffix if suffix else ''}"
    if len(encoded) > VALUE_MAX_CHARS or len(action_id) > ACTION_ID_MAX_CHARS:
        raise ValueError(
            f"button {action_id[:40]}: value {len(encoded)} and action_id {len(action_id)} characters, Slack takes "
            f"{VALUE_MAX_CHARS} and {ACTION_ID_MAX_CHARS}"
        )
    element: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": label, "emoji": True},
        "action_id": action_id,
        "value": encoded,
    }
    if style is not None:
        element["style"] = style
    return element


def stop_button(doc: Mapping[str, Any], *, account: str | None = None) -> list[dict[str, Any]]:
    """Stop now, where issue 14 offers it, on the card of a running job (gone once the card shows it ended)."""
    job, rule = doc["job"], doc.get("rule") or {}
    kind, outcome = str(doc["kind"]), str(doc["outcome"])
    if job.get("status") != RUNNING or outcome in _FINISHED_OUTCOMES or doc.get("dry_run"):
        return []
    if not (outcome in _STOP_OUTCOMES or (outcome == "notified" and kind in _STOP_WHEN_NOTIFIED)):
        return []
    rule_name = str(rule["name"]) if rule.get("name") else None
    return [button(Act.STOP, label="Stop now", job=str(job["name"]), rule=rule_name, account=account, style="danger")]


def buttons(doc: Mapping[str, Any], *, account: str | None = None) -> list[dict[str, Any]]:
    """A reply's buttons about a running job: Snooze and Exempt on a finding, Mute on a rule error."""
    job, rule = doc["job"], doc.get("rule") or {}
    kind, outcome = str(doc["kind"]), str(doc["outcome"])
    if job.get("status") != RUNNING or outcome in _FINISHED_OUTCOMES:
        return []
    name, rule_name = str(job["name"]), rule.get("name")
    rule_name = str(rule_name) if rule_name else None
    elements: list[dict[str, Any]] = []
    if kind in FINDING_KINDS and rule_name:
        elements += [
            button(
                Act.SNOOZE, label="Snooze 1 h", job=name, rule=rule_name, account=account, seconds=3600, suffix="1h"
            ),
            button(Act.SNOOZE, label="Snooze until the job ends", job=name, rule=rule_name, account=account),
            button(Act.EXEMPT, label="Exempt this job", job=name, account=account),
        ]
    if kind == "rule_error" and rule_name:
        elements.append(
            button(Act.MUTE, label="Mute this rule for this job", job=name, rule=rule_name, account=account)
        )
    return elements


def decode(payload: Mapping[str, Any]) -> Click:
    if payload.get("type") != BLOCK_ACTIONS:
        raise NotAClick(f"payload type {payload.get('type')!r}: only block_actions are the guard's buttons")
    actions = payload.get("actions")
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], Mapping):
        raise NotAClick("a button click carries exactly one action")
    action = actions[0]
    action_id = str(action.get("action_id") or "")
    if not action_id.startswith(ACTION_PREFIX):
        raise NotAClick(f"action {action_id!r} is not one of the guard's")
    try:
        act = Act(action_id.removeprefix(ACTION_PREFIX).split(":", 1)[0])
    except ValueError:
        raise NotAClick(f"action {action_id!r}: no such action") from None
    try:
        value = json.loads(str(action.get("value") or ""))
    except json.JSONDecodeError:
        raise NotAClick(f"action {action_id!r}: its value is not JSON") from None
    if not isinstance(value, dict):
        raise NotAClick(f"action {action_id!r}: its value is not an object")
    user = mapping(payload.get("user"))
    user_id = str(user.get("id") or "")
    if not user_id:
        raise NotAClick("the payload names no user")
    job, rule, account = value.get("job"), value.get("rule"), value.get("account")
    seconds = value.get("for")
    _check(act, job=job, rule=rule, account=account, seconds=seconds)
    container = mapping(payload.get("container"))
    message = mapping(payload.get("message"))
    channel = mapping(payload.get("channel")).get("id") or container.get("channel_id")
    return Click(
        act=act,
        job=str(job),
        user=user_id,
        rule=rule,
        account=account,
        seconds=seconds,
        user_name=_text(user.get("username") or user.get("name")),
        team=_text(mapping(payload.get("team")).get("id") or user.get("team_id")),
        channel=_text(channel),
        message_ts=_text(container.get("message_ts") or message.get("ts")),
        thread_ts=_text(message.get("thread_ts")),
        response_url=_text(payload.get("response_url")),
        action_ts=_text(action.get("action_ts")),
    )


def _check(act: Act, *, job: Any, rule: Any, account: Any, seconds: Any) -> None:
    if not isinstance(job, str) or not JOB_NAME.fullmatch(job):
        raise NotAClick(f"{act.value}: job {job!r} is not a training job name")
    if act in _NEEDS_RULE and not (isinstance(rule, str) and 0 < len(rule.strip()) <= RULE_NAME_MAX):
        raise NotAClick(f"{act.value}: names no rule")
    if rule is not None and not (isinstance(rule, str) and len(rule) <= RULE_NAME_MAX):
        raise NotAClick(f"{act.value}: rule {rule!r} is not a rule name")
    if account is not None and not (isinstance(account, str) and ACCOUNT_ID.fullmatch(account)):
        raise NotAClick(f"{act.value}: account {account!r} is not an AWS account ID")
    # The duration's bounds are a mute's (mutes.py checks them when the mute is made, after the acknowledgement).
    if seconds is not None and (
        act not in (Act.SNOOZE, Act.EXEMPT) or isinstance(seconds, bool) or not isinstance(seconds, int) or seconds <= 0
    ):
        raise NotAClick(f"{act.value}: a duration {seconds!r} where none belongs")


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None
