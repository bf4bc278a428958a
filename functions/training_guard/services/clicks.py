"""Slack clicks: the acknowledgement and the worker that acts on a queued click (docs/design/slack-clicks.md)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import parse_qs

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from training_guard import contract
from training_guard.domain import credentials
from training_guard.domain.errors import ActionFailed
from training_guard.domain.text import ascii_int
from training_guard.domain.values import mapping
from training_guard.render.slack_actions import CLICK_SCHEMA, Act, Click, NotAClick, decode

logger = Logger()

SIGNATURE_WINDOW_SECONDS = 300  # Slack's: a request more than 5 minutes from now is refused
REPLAY_MARGIN_SECONDS = 60  # a replay marker outlives the window by this much
ACT, REFUSE = "act", "refuse"
NOT_ALLOWED = (
    "You are not allowed to act on Training Guard's alerts, so nothing was done. "
    "The guard's operators can add your Slack user ID to slack.app.allowed_users."
)


class ReplayPort(Protocol):
    def first_time(self, signature: str, timestamp: int, *, expires_at: int) -> bool: ...


class QueuePort(Protocol):
    def send(self, work: Mapping[str, Any]) -> None: ...


def response(status: int, body: str = "") -> dict[str, Any]:
    return {"statusCode": status, "headers": {"Content-Type": "text/plain"}, "body": body}


def signature_valid(secret: str, timestamp: str, body: bytes, signature: str) -> bool:
    """Slack's `v0=` HMAC-SHA256 of `v0:<timestamp>:<body>` (https://docs.slack.dev/authentication/verifying-requests-
    from-slack), compared in constant time. By hand: slack_sdk.signature cost the acknowledgement 0.57x a bare boto3
    import at cold start, for these three lines."""
    try:
        body.decode("utf-8")  # Slack sends UTF-8: other bytes are no request of Slack's, whatever they are signed with
    except UnicodeDecodeError:
        return False
    base = b"v0:" + timestamp.encode("ascii", "replace") + b":" + body
    expected = "v0=" + hmac.new(secret.encode("utf-8"), base, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode("ascii"), signature.encode("utf-8", "replace"))


class Interactions:
    """The acknowledgement: verify, refuse replays, hand the click on, answer 200."""

    def __init__(
        self,
        *,
        signing_secret: Callable[[], str],
        replay: ReplayPort,
        queue: QueuePort,
        allowed_users: Collection[str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._secret = signing_secret
        self._replay = replay
        self._queue = queue
        self._allowed = frozenset(allowed_users)
        self._clock = clock

    def acknowledge(self, event: Mapping[str, Any]) -> dict[str, Any]:
        method = str(mapping(mapping(event.get("requestContext")).get("http")).get("method") or "POST")
        if method.upper() != "POST":
            return response(405, "POST only")
        try:
            raw = raw_body(event)
        except ValueError:
            return response(400, "the body is not base64")
        headers = {str(k).lower(): str(v) for k, v in mapping(event.get("headers")).items()}
        timestamp, signature = headers.get("x-slack-request-timestamp"), headers.get("x-slack-signature")
        now = self._clock()
        signed_at = ascii_int(timestamp) if timestamp else None  # Unix seconds, in ASCII digits as Slack sends them
        if signed_at is None or not signature:
            logger.warning("interaction refused: unsigned")
            return response(401, "not signed")
        if abs(now - signed_at) > SIGNATURE_WINDOW_SECONDS:
            logger.warning("interaction refused: stale", extra={"age_seconds": int(now - signed_at)})
            return response(401, "stale")
        secret = self._secret()
        problem = credentials.signing_secret_problem(secret)
        if problem is not None:  # a placeholder or published value signs nothing: anyone could have made the request
            secret_not_set(credentials.SIGNING_SECRET, problem)
            return response(503, "the signing secret is not set")
        if not signature_valid(secret, timestamp or "", raw, signature):
            logger.warning("interaction refused: bad signature")
            return response(401, "bad signature")
        expires = signed_at + SIGNATURE_WINDOW_SECONDS + REPLAY_MARGIN_SECONDS
        if not self._replay.first_time(signature, signed_at, expires_at=expires):
            logger.warning("interaction refused: replayed")
            return response(409, "replayed")
        try:
            click = decode(_payload(raw))
        except NotAClick as exc:
            logger.info("interaction ignored", extra={"why": str(exc)})
            return response(200)  # signed by Slack but not one of the guard's buttons: nothing to do
        except ValueError as exc:
            logger.warning("interaction refused: unreadable", extra={"why": str(exc)})
            return response(400, "unreadable payload")
        kind = ACT if click.user in self._allowed else REFUSE
        self._queue.send({"schema": CLICK_SCHEMA, "kind": kind, "received_at": now, "click": click.to_json()})
        logger.info("interaction acknowledged", extra={"kind": kind, "act": click.act.value, "job": click.job})
        return response(200)


def secret_not_set(kind: str, problem: str) -> None:
    """A refusal for want of a secret: a structured log line and the metric the SecretNotSet self-alarm watches."""
    logger.error("secret not set: refused", extra={"secret": kind, "problem": problem})
    with single_metric(
        name=contract.SECRET_NOT_SET_METRIC, unit=MetricUnit.Count, value=1, namespace=contract.GUARD_METRICS_NAMESPACE
    ):
        pass


def raw_body(event: Mapping[str, Any]) -> bytes:
    """The request body as Slack sent it (a function URL base64-encodes bodies it does not pass as text)."""
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(str(body), validate=True)
        except binascii.Error as exc:
            raise ValueError("not base64") from exc
    return str(body).encode("utf-8")


def _payload(raw: bytes) -> Mapping[str, Any]:
    form = parse_qs(raw.decode("utf-8"), keep_blank_values=True)
    values = form.get("payload")
    if not values:
        raise ValueError("no payload field")
    parsed = json.loads(values[0])
    if not isinstance(parsed, dict):
        raise ValueError("the payload is not an object")
    return parsed


class MuteWriterPort(Protocol):
    def put(self, job: str, mute: Any, *, account: str | None = None, now: datetime) -> None: ...


class StopPort(Protocol):
    def stop(self, click: Click, *, now: datetime) -> str:
        """Stop the click's job, attributed to `click.by`; returns what happened, in words for the thread."""
        ...


class SayPort(Protocol):
    def say(self, click: Click, text: str) -> None: ...


class RespondPort(Protocol):
    def ephemeral(self, url: str, text: str) -> None: ...


class ClickWorker:
    def __init__(self, *, mutes: MuteWriterPort, stopper: StopPort, say: SayPort, respond: RespondPort) -> None:
        self.mutes = mutes
        self.stopper = stopper
        self.say = say
        self.respond = respond

    def handle(self, body: str, *, now: datetime) -> str:
        """Act on one message; what was done (for the log). Raises to have the message delivered again."""
        from training_guard.domain import (
            mutes,  # here, not at the top: the acknowledgement never loads the configuration
        )

        work = json.loads(body)
        if not isinstance(work, dict) or work.get("schema") != CLICK_SCHEMA:
            raise NotAClick("not a click message")
        click = Click.from_json(work.get("click") or {})
        if work.get("kind") == REFUSE:
            if click.response_url:
                self.respond.ephemeral(click.response_url, NOT_ALLOWED)
            return "refused"
        if click.act is Act.STOP:
            try:
                outcome = self.stopper.stop(click, now=now)
            except ActionFailed as exc:
                refused = member_role_refused(exc)
                if refused is None:
                    raise  # throttled, STS or SageMaker out of reach: the queue delivers the click again
                # The member's role does not trust this function: retrying cannot help, say so and drop it.
                self.say.say(click, f"<@{click.user}> asked to stop the job: not done. {refused}")
                return "refused by the member account"
            self.say.say(click, f"<@{click.user}> asked to stop the job: {outcome}")
            return "stop"
        try:
            if click.act is Act.EXEMPT:
                mute = mutes.exempt(by=click.by, at=now, seconds=click.seconds)
            else:
                mute = mutes.silence(str(click.rule), by=click.by, at=now, seconds=click.seconds)
        except mutes.MuteError as exc:
            if click.response_url:
                self.respond.ephemeral(click.response_url, f"Nothing was done: {exc}")
            return "invalid"
        self.mutes.put(click.job, mute, account=click.account, now=now)
        self.say.say(click, f"<@{click.user}>: {mute.describe()}.")
        return click.act.value


def member_role_refused(exc: ActionFailed) -> str | None:
    """What to tell the thread when AssumeRole of the member role was denied; None for any other failure."""
    cause = exc.__cause__
    response = getattr(cause, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    if not exc.action.startswith("AssumeRole ") or code != "AccessDenied":
        return None
    role = exc.action.removeprefix("AssumeRole ")
    return (
        f"The guard may not act in that account: STS refused {role} to the Slack click worker. Deploy the member "
        "stack there again (or update the StackSet) so that its role trusts the worker, then press Stop now again."
    )
