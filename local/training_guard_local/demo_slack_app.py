"""Slack app mode in `training-guard demo` (`slack.mode: app`): the local Slack Web API, the app's secrets and click
queue on the emulated account, the thread printed as it changes, and a person's click through the real endpoint.

What the stack makes for app mode (infra/components/slack_app.py), made here on moto with the environment the
template gives each function: the bot token's secret (holding the local Slack Web API's token; the notifier and the
click worker read it), the signing secret's (a value the demo draws at random and signs its clicks with), the click
queue, and `TRAINING_GUARD_SLACK_API_URL` pointing slack_sdk at 127.0.0.1. The notifier posts each job's card
once, replies in its thread and updates the card in place (chat.postMessage, chat.update); a metric guard's graph
goes through GetMetricWidgetImage (moto lacks it: metric_widget_ext draws a stand-in from the emulated datapoints)
and files_upload_v2 into the thread, saved under the demo's output folder.

A `click` step is what Slack does when a person presses a button: the block_actions payload of the button on the
job's latest message that has it, form-encoded and signed (`v0=` HMAC-SHA256 with the signing secret, by slack_sdk's
SignatureVerifier), POSTed as a function URL hands it to Lambda (base64 body) to the real acknowledgement handler;
then the real worker handler consumes the click queue, as its event source mapping would.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard_local import metric_widget_ext
from training_guard_local.emulator import Emulation
from training_guard_local.slack_listener import render_text
from training_guard_local.slack_web_api import TEAM_ID, Message, SlackWebApi

ACKNOWLEDGE_HANDLER = "training_guard.handlers.interactions.handler"
WORKER_HANDLER = "training_guard.handlers.interactions.worker_handler"
NOTIFIER_HANDLER = "training_guard.handlers.slack_notifier.handler"
# The emulation's Lambda context names each function; app mode's functions get the time left their template gives.
CONTEXT_NAMES = {
    "slack-notifier": NOTIFIER_HANDLER,
    "interactions": ACKNOWLEDGE_HANDLER,
    "click-worker": WORKER_HANDLER,
}
CLICK_QUEUE = "training-guard-clicks"
LINE_MAX = 110  # characters of a message line the demo prints


def timeouts(template: dict[str, Any]) -> dict[str, int]:
    """Each function's timeout in seconds, by its handler, as the template sets it."""
    return {
        str(r["Properties"]["Handler"]): int(r["Properties"]["Timeout"])
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and "Handler" in r["Properties"] and "Timeout" in r["Properties"]
    }


@dataclass(frozen=True)
class Pressed:
    """What a click step did: the endpoint's HTTP status and what the worker made of the queued click."""

    status: int
    failures: int  # the worker's batch item failures (the click back in the queue)
    button: str


class NoButton(LookupError):
    """No message of the job carries the button the step presses."""


class AppSlack:
    """The demo's Slack workspace in app mode (`with AppSlack(config, say=..., folder=...) as app:`)."""

    def __init__(self, config: GuardConfig, *, say: Callable[[str], None], folder: Path) -> None:
        assert config.slack.app is not None
        self.config = config
        self.say = say
        self.folder = folder
        self.channel_names = {channel: name for name, channel in config.slack.app.channels.items()}
        self.api = SlackWebApi(channels=config.slack.app.channels.values(), files_dir=folder, on_change=self._changed)
        self.signing_secret = secrets.token_hex(16)  # the demo's own app: drawn per run, never printed
        self.charts: list[Path] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> AppSlack:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._stack.enter_context(self.api)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    # --- the stack's app-mode resources on the emulation -----------------------------------------------------
    def install(self, aws: Emulation, template: dict[str, Any]) -> None:
        """The app's secrets and click queue in the emulated account, and the functions' environment naming them.
        The notifier, the endpoint and the worker run with their template's timeout as their time left: the chart's
        upload (three Web API calls) starts only when the notifier's time allows all three."""
        self.aws = aws
        limits = timeouts(template)
        aws.function_timeouts.update({name: limits[h] for name, h in CONTEXT_NAMES.items() if h in limits})
        secrets_manager = aws.client("secretsmanager")
        bot = secrets_manager.create_secret(Name="training-guard/slack-app-bot-token", SecretString=self.api.token)
        signing = secrets_manager.create_secret(
            Name="training-guard/slack-app-signing-secret", SecretString=self.signing_secret
        )
        self.queue_url = aws.client("sqs").create_queue(QueueName=CLICK_QUEUE)["QueueUrl"]
        assert self.config.slack.app is not None
        environment = {
            contract.ENV_SLACK_BOT_TOKEN_SECRET: bot["ARN"],
            contract.ENV_SLACK_API_URL: self.api.base_url,
            contract.ENV_SLACK_SIGNING_SECRET: signing["ARN"],
            contract.ENV_CLICK_QUEUE_URL: self.queue_url,
            contract.ENV_SLACK_ALLOWED_USERS: ",".join(self.config.slack.app.allowed_users),
        }
        # Undone when the emulation ends, before it restores its own environment: patch.dict restores the environment
        # it found, the emulation's, so undone after the emulation it would leave moto's account and keys set.
        aws.enter_context(mock.patch.dict(os.environ, environment))
        aws.rebuild_functions()  # the functions' settings read the environment once: read it again
        metric_widget_ext.install()
        metric_widget_ext.reset()
        names = ", ".join(f"#{n} ({c})" for c, n in self.channel_names.items())
        self.say(f"      Slack app mode: a local Slack Web API on 127.0.0.1 (slack_sdk's base_url) with {names}")
        self.say("        bot token and signing secret in Secrets Manager (moto); click queue -> the click worker")
        self.say(
            "        GetMetricWidgetImage: moto lacks it, so the PNG is a stand-in drawn from the emulated datapoints "
            "(metric_widget_ext)"
        )

    # --- the thread as it changes ---------------------------------------------------------------------------
    def _changed(self, kind: str, message: Message) -> None:
        channel = f"#{self.channel_names.get(message.channel, message.channel)}"
        first = (render_text({"text": message.text, "blocks": message.blocks}).splitlines() or [""])[0]
        if kind == "post":
            self.say(f"         slack {channel} ┌ new thread (parent {message.ts}): {first[:LINE_MAX]}")
        elif kind == "update":
            self.say(
                f"         slack {channel} ✎ parent {message.ts} edited in place (chat.update): {first[:LINE_MAX]}"
            )
        elif kind == "reply":
            self.say(f"         slack {channel} │ ↳ reply in thread {message.thread_ts}: {first[:LINE_MAX]}")
            for line in _buttons(message):
                self.say(f"         slack {channel} │   {line}")
        elif kind == "file":
            for shared in message.files:
                self.say(
                    f"         slack {channel} │ ↳ file in thread {message.thread_ts}: {shared.title} "
                    f"({shared.length} bytes, files_upload_v2)"
                )
                if shared.path is not None:
                    self.charts.append(shared.path)
                    self.say(f"         chart saved: {shared.path}")

    # --- what the workspace holds -------------------------------------------------------------------------------
    def messages(self) -> list[Message]:
        """Every message of every channel: each parent, then its replies."""
        out: list[Message] = []
        for channel in self.channel_names:
            for parent in self.api.history(channel):
                out += [parent, *self.api.replies(channel, parent.ts)]
        return out

    def threads(self) -> list[tuple[str, Message, list[Message]]]:
        """Every thread as it reads now: (channel name, parent, replies), oldest first."""
        return [
            (self.channel_names[channel], parent, self.api.replies(channel, parent.ts))
            for channel in self.channel_names
            for parent in self.api.history(channel)
        ]

    def parents_of(self, job: str) -> dict[str, int]:
        """The parent messages about a job in each channel that has any (its card names it)."""
        counts: dict[str, int] = {}
        for channel in self.channel_names:
            found = sum(1 for m in self.api.history(channel) if job in m.text)
            if found:
                counts[channel] = found
        return counts

    def thread_size(self, job: str) -> int:
        """The messages in the job's threads: the parents and every reply, files included."""
        return sum(
            1 + len(self.api.replies(channel, m.ts))
            for channel in self.channel_names
            for m in self.api.history(channel)
            if job in m.text
        )

    # --- a person's click ---------------------------------------------------------------------------------------
    def press(self, job: str, button: str, user: str, *, at: datetime, handler: Callable[[str], Any]) -> Pressed:
        """Press `button` on the job's latest message that carries it, as Slack would: the signed request to the
        endpoint, then the worker on the click queue (its clock the step's time). `handler`: a handler by its path."""
        message, element = self._button(job, button)
        payload = {
            "type": "block_actions",
            "user": {"id": user, "username": user.lower(), "team_id": TEAM_ID},
            "team": {"id": TEAM_ID},
            "api_app_id": "A0TRAINGUARD",
            "container": {
                "type": "message",
                "message_ts": message.ts,
                "channel_id": message.channel,
                "is_ephemeral": False,
                "thread_ts": message.thread_ts,
            },
            "channel": {"id": message.channel, "name": self.channel_names.get(message.channel, "")},
            "message": message.as_api(),
            "response_url": self.api.response_url(),
            "trigger_id": f"{int(time.time())}.{uuid.uuid4().int % 10**12}",
            "actions": [
                {
                    "type": "button",
                    "action_id": element["action_id"],
                    "block_id": element.get("block_id", "actions"),
                    "text": element["text"],
                    "value": element["value"],
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
        body = urlencode({"payload": json.dumps(payload, separators=(",", ":"))}).encode()
        timestamp = str(int(time.time()))  # the endpoint checks it against its own clock: 5 minutes either way
        signature = SignatureVerifier(self.signing_secret).generate_signature(timestamp=timestamp, body=body)
        event = {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": "/",
            "headers": {
                "content-type": "application/x-www-form-urlencoded",
                "x-slack-request-timestamp": timestamp,
                "x-slack-signature": signature,
            },
            "requestContext": {"http": {"method": "POST", "path": "/"}},
            "body": base64.b64encode(body).decode(),
            "isBase64Encoded": True,
        }
        label = element["text"]["text"]
        self.say(
            f"         slack: {user} presses [{label}] on {message.ts} -> POST to the function URL "
            f"({len(body)} bytes, signed v0=…)"
        )
        answer = self.aws.invoke(handler(ACKNOWLEDGE_HANDLER), event, self.aws.context("interactions"))
        self.say(f"         guard: interactions acknowledged: HTTP {answer['statusCode']} (the click queued)")
        failures = self._work(handler(WORKER_HANDLER), at)
        return Pressed(int(answer["statusCode"]), failures, label)

    def _work(self, worker: Callable[..., Any], at: datetime) -> int:
        """The click queue's event source mapping: each queued click to the worker handler."""
        sqs = self.aws.client("sqs")
        failures = 0
        while True:
            batch = sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=1).get("Messages", [])
            if not batch:
                return failures
            records = [
                {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"]} for m in batch
            ]
            # The worker's clock is the step's time (training_guard.adapters.clock, as every handler reads it).
            result = self.aws.invoke(worker, {"Records": records}, self.aws.context("click-worker"), at=at)
            failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
            failures += len(failed)
            for m in batch:
                if m["MessageId"] not in failed:
                    sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])
            self.say(
                f"         guard: click worker: {len(records) - len(failed)} click(s) acted on, {len(failed)} failed"
            )
            if failed:
                return failures

    def _button(self, job: str, button: str) -> tuple[Message, dict[str, Any]]:
        """The job's latest message carrying the button (the guard's buttons name the job in their value)."""
        wanted = f"training-guard:{button}"
        for message in reversed(self.messages()):
            for block in message.blocks:
                for element in block.get("elements") or [] if block.get("type") == "actions" else []:
                    action_id = str(element.get("action_id", ""))
                    if action_id != wanted and not action_id.startswith(wanted + ":"):
                        continue
                    with contextlib.suppress(ValueError, TypeError):
                        if json.loads(element.get("value") or "{}").get("job") == job:
                            return message, {**element, "block_id": block.get("block_id", "actions")}
        raise NoButton(f"no Slack message of {job} carries a {button} button")


def _buttons(message: Message) -> Iterator[str]:
    for block in message.blocks:
        if block.get("type") == "actions":
            labels = [str(e.get("text", {}).get("text", "")) for e in block.get("elements") or []]
            if labels:
                yield "  ".join(f"[{label}]" for label in labels)
