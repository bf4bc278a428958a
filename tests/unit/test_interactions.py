"""Slack's button clicks: read as the guard's actions, verified and acknowledged at once, acted on later."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.fakes_slack_app import FakeMutes, FakeReplayMarkers
from tests.helpers import NOW
from training_guard.domain.credentials import SLACK_EXAMPLE_SIGNING_SECRET
from training_guard.domain.errors import ActionFailed
from training_guard.domain.mutes import SNOOZE_SECONDS, Effect
from training_guard.handlers.interactions import process
from training_guard.render.slack_actions import CLICK_SCHEMA, VALUE_MAX_CHARS, Act, Click, NotAClick, button, decode
from training_guard.services.clicks import (
    ACT,
    NOT_ALLOWED,
    REFUSE,
    SIGNATURE_WINDOW_SECONDS,
    ClickWorker,
    Interactions,
    raw_body,
    signature_valid,
)

SECRET = secrets.token_hex(16)  # drawn per run: a published value is refused (credentials.py)
ALICE, MALLORY = "U0ALICE", "U0MALLORY"
RESPONSE_URL = "https://hooks.slack.com/actions/T0EMULATED/1/abc"
T = 1_780_000_000.0  # the time of the requests


# --- what a click carries ---------------------------------------------------------------------------------


def block_actions(element: dict[str, Any], *, user: str = ALICE, thread_ts: str | None = None) -> dict[str, Any]:
    """The block_actions payload Slack POSTs for a click on `element`
    (https://docs.slack.dev/reference/interaction-payloads/block_actions-payload)."""
    message: dict[str, Any] = {"type": "message", "ts": "1780000001.000100", "text": "card"}
    if thread_ts:
        message["thread_ts"] = thread_ts
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "team_id": "T0EMULATED"},
        "api_app_id": "A0GUARD",
        "team": {"id": "T0EMULATED", "domain": "emulated"},
        "container": {"type": "message", "message_ts": "1780000001.000100", "channel_id": "C0TRAINING"},
        "channel": {"id": "C0TRAINING", "name": "training"},
        "message": message,
        "response_url": RESPONSE_URL,
        "trigger_id": "1.2.3",
        "actions": [
            {
                "type": "button",
                "block_id": "guard-actions",
                "action_id": element["action_id"],
                "value": element["value"],
                "text": element["text"],
                "action_ts": "1780000002.000200",
            }
        ],
    }


@pytest.mark.parametrize(
    ("element", "expected"),
    [
        (
            button(Act.STOP, label="Stop now", job="mnist-1", rule="LossNotDecreasing", style="danger"),
            {"act": Act.STOP, "job": "mnist-1", "rule": "LossNotDecreasing", "account": None, "seconds": None},
        ),
        (
            button(Act.SNOOZE, label="Snooze 1 h", job="mnist-1", rule="LossNotDecreasing", seconds=SNOOZE_SECONDS),
            {"act": Act.SNOOZE, "job": "mnist-1", "rule": "LossNotDecreasing", "account": None, "seconds": 3600},
        ),
        (
            button(Act.SNOOZE, label="Snooze until it ends", job="mnist-1", rule="loss-diverging", suffix="job-end"),
            {"act": Act.SNOOZE, "job": "mnist-1", "rule": "loss-diverging", "account": None, "seconds": None},
        ),
        (
            button(Act.EXEMPT, label="Exempt this job", job="bert-7", account="111122223333"),
            {"act": Act.EXEMPT, "job": "bert-7", "rule": None, "account": "111122223333", "seconds": None},
        ),
        (
            button(Act.MUTE, label="Mute this rule", job="mnist-1", rule="ExplodingTensor"),
            {"act": Act.MUTE, "job": "mnist-1", "rule": "ExplodingTensor", "account": None, "seconds": None},
        ),
    ],
)
def test_each_button_reads_back_as_the_action_it_offers(element: dict[str, Any], expected: dict[str, Any]) -> None:
    click = decode(block_actions(element))
    assert {k: getattr(click, k) for k in expected} == expected
    assert (click.user, click.by, click.team) == (ALICE, f"slack:{ALICE}", "T0EMULATED")
    assert (click.channel, click.message_ts, click.response_url) == ("C0TRAINING", "1780000001.000100", RESPONSE_URL)
    assert click.thread == "1780000001.000100"


def test_a_button_on_a_reply_answers_in_the_parents_thread() -> None:
    click = decode(block_actions(button(Act.STOP, label="Stop", job="mnist-1"), thread_ts="1780000000.000001"))
    assert click.thread == "1780000000.000001"


def test_two_snooze_buttons_in_one_block_have_different_action_ids() -> None:
    hour = button(Act.SNOOZE, label="1 h", job="j", rule="r", seconds=SNOOZE_SECONDS, suffix="hour")
    end = button(Act.SNOOZE, label="until it ends", job="j", rule="r", suffix="job-end")
    assert hour["action_id"] != end["action_id"]
    assert [decode(block_actions(b)).act for b in (hour, end)] == [Act.SNOOZE, Act.SNOOZE]


def test_a_click_survives_the_queue_unchanged() -> None:
    click = decode(block_actions(button(Act.EXEMPT, label="x", job="bert-7", account="111122223333", seconds=7200)))
    assert Click.from_json(json.loads(json.dumps(click.to_json()))) == click


def element_with(value: Any, action_id: str = "training-guard:snooze") -> dict[str, Any]:
    return {"action_id": action_id, "value": value if isinstance(value, str) else json.dumps(value), "text": {}}


@pytest.mark.parametrize(
    ("payload_change", "says"),
    [
        (lambda p: p.update(type="view_submission"), "only block_actions"),
        (lambda p: p["actions"].append(dict(p["actions"][0])), "exactly one action"),
        (lambda p: p.update(actions=[]), "exactly one action"),
        (lambda p: p.update(user={}), "names no user"),
    ],
)
def test_payloads_that_are_no_click_on_a_guard_button_are_refused(payload_change: Any, says: str) -> None:
    payload = block_actions(button(Act.STOP, label="Stop", job="mnist-1"))
    payload_change(payload)
    with pytest.raises(NotAClick, match=says):
        decode(payload)


@pytest.mark.parametrize(
    ("element", "says"),
    [
        (element_with({"job": "j"}, action_id="someone-else:approve"), "is not one of the guard's"),
        (element_with({"job": "j"}, action_id="training-guard:delete"), "no such action"),
        (element_with("{not json"), "not JSON"),
        (element_with([1, 2]), "not an object"),
        (element_with({"job": "mnist_1", "rule": "r"}), "not a training job name"),
        (element_with({"job": "mnist-1"}), "names no rule"),
        (element_with({"job": "mnist-1", "rule": "r", "account": "1234"}), "not an AWS account ID"),
        (element_with({"job": "mnist-1", "rule": "r", "for": True}), "a duration True"),
        (element_with({"job": "mnist-1", "rule": "r", "for": -5}), "a duration -5"),
        (element_with({"job": "mnist-1", "for": 60}, action_id="training-guard:stop"), "a duration 60"),
    ],
)
def test_values_the_guard_did_not_write_are_refused(element: dict[str, Any], says: str) -> None:
    with pytest.raises(NotAClick, match=says):
        decode(block_actions(element))


def test_a_button_whose_value_slack_would_refuse_is_not_made() -> None:
    with pytest.raises(NotAClick):
        button(Act.SNOOZE, label="x", job="mnist-1")  # no rule to snooze
    with pytest.raises(NotAClick):
        button(Act.STOP, label="x", job="not a job name")
    with pytest.raises(ValueError, match="Slack takes 2000 and 255"):
        button(Act.STOP, label="x", job="mnist-1", suffix="x" * 250)  # an action_id over 255 characters


def test_the_longest_names_still_fit_a_buttons_value() -> None:
    element = button(Act.SNOOZE, label="x", job="j" * 63, rule="\u00e9" * 256, account="111122223333", seconds=3600)
    assert len(element["value"]) <= VALUE_MAX_CHARS
    assert decode(block_actions(element)).rule == "\u00e9" * 256


# --- the acknowledgement ------------------------------------------------------------------------------------


def sign(body: bytes, timestamp: int, secret: str = SECRET) -> str:
    """Slack's signature, computed as its documentation shows: v0= HMAC-SHA256 of v0:<timestamp>:<body>."""
    base = b"v0:" + str(timestamp).encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def request(
    payload: dict[str, Any],
    *,
    at: float = T,
    secret: str = SECRET,
    base64_body: bool = True,
    signature: str | None = None,
) -> dict[str, Any]:
    """The function URL event for Slack's POST (payload format 2.0, the form body base64-encoded)."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    timestamp = int(at)
    return {
        "version": "2.0",
        "rawPath": "/",
        "headers": {
            "content-type": "application/x-www-form-urlencoded",
            "x-slack-request-timestamp": str(timestamp),
            "x-slack-signature": signature or sign(body, timestamp, secret),
            "user-agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
        },
        "requestContext": {"http": {"method": "POST", "path": "/"}},
        "body": base64.b64encode(body).decode() if base64_body else body.decode(),
        "isBase64Encoded": base64_body,
    }


class Queue:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, work: Any) -> None:
        self.sent.append(json.loads(json.dumps(work)))


def endpoint(*, now: float = T, allowed: tuple[str, ...] = (ALICE,)) -> tuple[Interactions, Queue, FakeReplayMarkers]:
    queue, replay = Queue(), FakeReplayMarkers()
    app = Interactions(
        signing_secret=lambda: SECRET, replay=replay, queue=queue, allowed_users=allowed, clock=lambda: now
    )
    return app, queue, replay


STOP = block_actions(button(Act.STOP, label="Stop now", job="mnist-1", rule="LossNotDecreasing"))


def test_our_signature_is_slacks_documented_example() -> None:
    # The worked example of https://docs.slack.dev/authentication/verifying-requests-from-slack: if `sign` drifted
    # from Slack's scheme, every test below would check the guard against the wrong thing.
    body = (
        b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&"
        b"channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&"
        b"response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
        b"trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    )
    assert (
        sign(body, 1531420618, SLACK_EXAMPLE_SIGNING_SECRET)
        == "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    )


def test_a_valid_click_by_an_allowed_user_is_acknowledged_and_handed_on() -> None:
    app, queue, replay = endpoint()
    assert app.acknowledge(request(STOP)) == {"statusCode": 200, "headers": {"Content-Type": "text/plain"}, "body": ""}
    [work] = queue.sent
    assert (work["schema"], work["kind"], work["received_at"]) == (CLICK_SCHEMA, ACT, T)
    assert Click.from_json(work["click"]) == decode(STOP)
    [(marker, expires)] = replay.seen.items()
    assert marker.startswith(f"{int(T)}:v0=")
    assert expires == int(T) + SIGNATURE_WINDOW_SECONDS + 60


def test_a_body_the_function_url_did_not_encode_is_verified_as_it_came() -> None:
    app, queue, _ = endpoint()
    assert app.acknowledge(request(STOP, base64_body=False))["statusCode"] == 200
    assert len(queue.sent) == 1


def test_the_signature_is_checked_over_the_decoded_body_not_the_base64() -> None:
    event = request(STOP)
    encoded = event["body"].encode()
    event["headers"]["x-slack-signature"] = sign(encoded, int(T))  # signed over the base64 text: wrong
    app, queue, _ = endpoint()
    assert app.acknowledge(event)["statusCode"] == 401
    assert queue.sent == []
    assert raw_body(request(STOP)) == urlencode({"payload": json.dumps(STOP)}).encode()


def test_a_bad_signature_is_refused_and_nothing_is_handed_on() -> None:
    app, queue, replay = endpoint()
    assert app.acknowledge(request(STOP, secret="not-the-signing-secret"))["statusCode"] == 401
    assert (queue.sent, replay.seen) == ([], {})


def test_a_tampered_body_is_refused() -> None:
    event = request(STOP, base64_body=False)
    event["body"] = event["body"].replace("mnist-1", "mnist-2")
    app, queue, _ = endpoint()
    assert app.acknowledge(event)["statusCode"] == 401
    assert queue.sent == []


@pytest.mark.parametrize("age", [SIGNATURE_WINDOW_SECONDS + 1, -(SIGNATURE_WINDOW_SECONDS + 1), 86400])
def test_a_request_signed_more_than_five_minutes_from_now_is_refused(age: int) -> None:
    app, queue, replay = endpoint(now=T)
    assert app.acknowledge(request(STOP, at=T - age)) == {
        "statusCode": 401,
        "headers": {"Content-Type": "text/plain"},
        "body": "stale",
    }
    assert (queue.sent, replay.seen) == ([], {})


def test_a_request_just_inside_the_window_is_accepted() -> None:
    app, queue, _ = endpoint(now=T)
    assert app.acknowledge(request(STOP, at=T - SIGNATURE_WINDOW_SECONDS))["statusCode"] == 200
    assert len(queue.sent) == 1


@pytest.mark.parametrize(
    "change",
    [
        lambda e: e["headers"].pop("x-slack-signature"),
        lambda e: e["headers"].pop("x-slack-request-timestamp"),
        lambda e: e["headers"].update({"x-slack-request-timestamp": "17800000OO"}),
        # digits str.isdigit() accepts and int() refuses
        lambda e: e["headers"].update({"x-slack-request-timestamp": "\u00b2"}),
        lambda e: e["headers"].update({"x-slack-request-timestamp": "\uff11\uff17\uff18"}),
        lambda e: e["headers"].update({"x-slack-request-timestamp": "1" * 5000}),
    ],
)
def test_an_unsigned_request_is_refused(change: Any) -> None:
    event = request(STOP)
    change(event)
    app, queue, _ = endpoint()
    assert app.acknowledge(event)["statusCode"] == 401
    assert queue.sent == []


def test_headers_are_read_whatever_their_case() -> None:
    event = request(STOP)
    event["headers"] = {k.title(): v for k, v in event["headers"].items()}
    app, _, _ = endpoint()
    assert app.acknowledge(event)["statusCode"] == 200


def test_a_replayed_request_is_refused_and_acted_on_once() -> None:
    app, queue, _ = endpoint()
    event = request(STOP)
    assert app.acknowledge(event)["statusCode"] == 200
    assert app.acknowledge(event)["statusCode"] == 409
    assert len(queue.sent) == 1


def test_the_same_click_signed_again_later_is_another_request() -> None:
    app, queue, _ = endpoint(now=T + 10)
    assert app.acknowledge(request(STOP, at=T))["statusCode"] == 200
    assert app.acknowledge(request(STOP, at=T + 1))["statusCode"] == 200
    assert len(queue.sent) == 2  # two deliveries of a click: the stop path makes them one stop


def test_a_user_who_is_not_allowed_is_acknowledged_and_only_told_so() -> None:
    app, queue, _ = endpoint(allowed=(ALICE,))
    payload = block_actions(button(Act.STOP, label="Stop now", job="mnist-1"), user=MALLORY)
    assert app.acknowledge(request(payload))["statusCode"] == 200
    [work] = queue.sent
    assert work["kind"] == REFUSE
    assert work["click"]["user"] == MALLORY


def test_nobody_is_allowed_when_nobody_is_listed() -> None:
    app, queue, _ = endpoint(allowed=())
    app.acknowledge(request(STOP))
    assert [w["kind"] for w in queue.sent] == [REFUSE]


def test_a_signed_interaction_with_none_of_the_guards_buttons_is_acknowledged_and_ignored() -> None:
    payload = block_actions(element_with({"job": "j"}, action_id="another-app:approve"))
    app, queue, _ = endpoint()
    assert app.acknowledge(request(payload))["statusCode"] == 200
    assert queue.sent == []


@pytest.mark.parametrize("body", [b"payload=%7Bnot-json", b"no_payload=1", b"payload=%5B%5D", b"\xff\xfe"])
def test_an_unreadable_signed_body_is_a_400(body: bytes) -> None:
    event = request(STOP, base64_body=True)
    event["body"] = base64.b64encode(body).decode()
    event["headers"]["x-slack-signature"] = sign(body, int(T))
    app, queue, _ = endpoint()
    status = app.acknowledge(event)["statusCode"]
    assert status == (401 if body == b"\xff\xfe" else 400)  # not UTF-8: no signature of Slack's can match it
    assert queue.sent == []


def test_a_body_that_is_not_base64_is_a_400() -> None:
    event = request(STOP)
    event["body"] = "%%%not-base64%%%"
    assert endpoint()[0].acknowledge(event)["statusCode"] == 400


def test_only_post_is_answered() -> None:
    event = request(STOP)
    event["requestContext"]["http"]["method"] = "GET"
    assert endpoint()[0].acknowledge(event)["statusCode"] == 405


def test_the_acknowledgement_takes_milliseconds(figures: dict[str, Any]) -> None:
    app, _, _ = endpoint()
    event = request(STOP)
    started = time.perf_counter()
    rounds = 200
    for i in range(rounds):
        event["headers"]["x-slack-request-timestamp"] = str(int(T) - i)
        event["headers"]["x-slack-signature"] = sign(raw_body(event), int(T) - i)
        app.acknowledge(event)
    per_ack_ms = (time.perf_counter() - started) / rounds * 1000  # signing the test request included
    figures["ack_ms"] = round(per_ack_ms, 3)
    assert per_ack_ms < 50


# --- the asynchronous path --------------------------------------------------------------------------------


class ThreadLog:
    def __init__(self) -> None:
        self.said: list[tuple[str | None, str]] = []

    def say(self, click: Click, text: str) -> None:
        self.said.append((click.thread, text))


class Responses:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def ephemeral(self, url: str, text: str) -> None:
        self.sent.append((url, text))


class Stopper:
    def __init__(self, outcome: str = "stopped (StopTrainingJob accepted)") -> None:
        self.outcome = outcome
        self.stopped: list[tuple[str, str]] = []

    def stop(self, click: Click, *, now: Any) -> str:
        self.stopped.append((click.job, click.by))
        return self.outcome


def worker() -> tuple[ClickWorker, FakeMutes, Stopper, ThreadLog, Responses]:
    mutes, stopper, thread, responses = FakeMutes(), Stopper(), ThreadLog(), Responses()
    return ClickWorker(mutes=mutes, stopper=stopper, say=thread, respond=responses), mutes, stopper, thread, responses


def message(payload: dict[str, Any], kind: str = ACT) -> str:
    return json.dumps({"schema": CLICK_SCHEMA, "kind": kind, "received_at": T, "click": decode(payload).to_json()})


def test_stop_now_goes_to_the_stop_path_in_the_clickers_name_and_the_thread_says_so() -> None:
    w, mutes, stopper, thread, responses = worker()
    assert w.handle(message(STOP), now=NOW) == "stop"
    assert stopper.stopped == [("mnist-1", f"slack:{ALICE}")]
    assert thread.said == [
        ("1780000001.000100", f"<@{ALICE}> asked to stop the job: stopped (StopTrainingJob accepted)")
    ]
    assert (mutes.items, responses.sent) == ({}, [])


def test_snooze_mutes_the_rule_for_the_job_for_an_hour_in_the_clickers_name() -> None:
    w, mutes, _, thread, _ = worker()
    payload = block_actions(button(Act.SNOOZE, label="1 h", job="mnist-1", rule="LossNotDecreasing", seconds=3600))
    assert w.handle(message(payload), now=NOW) == "snooze"
    [mute] = mutes.read("mnist-1").entries
    assert (mute.effect, mute.rule, mute.by, mute.until) == (
        Effect.SILENCE,
        "LossNotDecreasing",
        f"slack:{ALICE}",
        NOW + timedelta(hours=1),
    )
    assert thread.said == [("1780000001.000100", f"<@{ALICE}>: {mute.describe()}.")]


def test_mute_and_exempt_write_their_records_for_the_right_account() -> None:
    w, mutes, stopper, _, _ = worker()
    w.handle(message(block_actions(button(Act.MUTE, label="m", job="mnist-1", rule="ExplodingTensor"))), now=NOW)
    w.handle(message(block_actions(button(Act.EXEMPT, label="e", job="bert-7", account="111122223333"))), now=NOW)
    assert mutes.read("mnist-1").silencing("ExplodingTensor", NOW + timedelta(days=10)) is not None
    assert mutes.read("bert-7").entries == ()
    assert mutes.read("bert-7", "111122223333").exemption(NOW) is not None
    assert stopper.stopped == []


def test_a_refused_click_only_tells_the_user_and_does_nothing() -> None:
    w, mutes, stopper, thread, responses = worker()
    payload = block_actions(button(Act.STOP, label="Stop", job="mnist-1"), user=MALLORY)
    assert w.handle(message(payload, kind=REFUSE), now=NOW) == "refused"
    assert responses.sent == [(RESPONSE_URL, NOT_ALLOWED)]
    assert (stopper.stopped, mutes.items, thread.said) == ([], {}, [])


def test_a_snooze_the_guard_cannot_make_is_answered_and_not_retried() -> None:
    w, mutes, _, thread, responses = worker()
    payload = block_actions(element_with({"job": "mnist-1", "rule": "r", "for": 5}))  # shorter than a mute can be
    assert w.handle(message(payload), now=NOW) == "invalid"
    assert (mutes.items, thread.said) == ({}, [])
    [(url, text)] = responses.sent
    assert (url, text.startswith("Nothing was done: 5 s")) == (RESPONSE_URL, True)


def test_a_batch_returns_only_the_clicks_that_failed_to_the_queue() -> None:
    w, _, stopper, _, _ = worker()

    def broken(click: Click, *, now: Any) -> str:
        raise ConnectionError("sagemaker unreachable")

    stopper.stop = broken  # type: ignore[method-assign]
    snooze = block_actions(button(Act.SNOOZE, label="1 h", job="mnist-1", rule="r", seconds=3600))
    event = {
        "Records": [
            {"messageId": "1", "body": message(snooze)},
            {"messageId": "2", "body": message(STOP)},
            {"messageId": "3", "body": "{not json"},  # cannot succeed later: dropped with a log line
            {"messageId": "4", "body": json.dumps({"schema": "other"})},
        ]
    }
    assert process(event, w, now=NOW) == {"batchItemFailures": [{"itemIdentifier": "2"}]}


def test_the_acknowledgement_loads_neither_the_configuration_nor_slack_sdk() -> None:
    # Its cold start is held to 1.3 times a bare `import boto3` (issue 29): slack_sdk (~25 ms, for an HMAC the
    # standard library does), the configuration (~11 ms) or Powertools Parameters (~10 ms) would break it.
    watched = [
        "slack_sdk",
        "pydantic",
        "moto",
        "aws_lambda_powertools.utilities.parameters",
        "training_guard.config.model",
        "training_guard.domain.policy",
        "training_guard.domain.mutes",
    ]
    code = (
        "import json, sys; import training_guard.handlers.interactions, training_guard.adapters.interactions; "
        f"print(json.dumps([m for m in {watched!r} if m in sys.modules]))"
    )
    functions = Path(__file__).resolve().parents[2] / "functions"
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(functions)}, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == []


class RefusingStopper(Stopper):
    """The member's role refuses the worker (AccessDenied on AssumeRole), or STS is throttling."""

    def __init__(self, code: str, action: str = "AssumeRole arn:aws:iam::111122223333:role/TrainingGuardMember"):
        super().__init__()
        self.code, self.action = code, action

    def stop(self, click: Click, *, now: Any) -> str:
        from botocore.exceptions import ClientError

        cause = ClientError({"Error": {"Code": self.code, "Message": "no"}}, "AssumeRole")
        raise ActionFailed(self.action, cause) from cause


def test_stop_now_on_a_member_whose_role_refuses_the_worker_says_why_in_the_thread_and_is_not_retried() -> None:
    w, _, _, thread, _ = worker()
    w.stopper = RefusingStopper("AccessDenied")
    payload = block_actions(button(Act.STOP, label="Stop now", job="bert-7", account="111122223333"))
    assert w.handle(message(payload), now=NOW) == "refused by the member account"
    [(where, text)] = thread.said
    assert where == "1780000001.000100"
    assert text.startswith(f"<@{ALICE}> asked to stop the job: not done. The guard may not act in that account")
    assert "arn:aws:iam::111122223333:role/TrainingGuardMember" in text
    assert "Deploy the member stack there again" in text


@pytest.mark.parametrize(
    ("code", "action"),
    [
        ("Throttling", "AssumeRole arn:aws:iam::111122223333:role/TrainingGuardMember"),
        ("AccessDenied", "StopTrainingJob bert-7"),
    ],
)
def test_other_failures_of_stop_now_are_retried_and_say_nothing(code: str, action: str) -> None:
    w, _, _, thread, _ = worker()
    w.stopper = RefusingStopper(code, action)
    payload = block_actions(button(Act.STOP, label="Stop now", job="bert-7", account="111122223333"))
    with pytest.raises(ActionFailed):
        w.handle(message(payload), now=NOW)
    assert thread.said == []


@pytest.mark.parametrize("body", [b"payload=%7B%7D", "payload=caf\u00e9 \U0001f600".encode(), b"", b"a" * 4000])
def test_the_hand_written_verifier_agrees_with_slack_sdks_signer(body: bytes) -> None:
    from slack_sdk.signature import SignatureVerifier

    secret, timestamp = secrets.token_hex(16), str(int(T))
    signed = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    assert signed is not None
    assert signature_valid(secret, timestamp, body, signed)
    assert not signature_valid(secret, timestamp, body + b"x", signed)
    assert not signature_valid(secrets.token_hex(16), timestamp, body, signed)
    assert not signature_valid(secret, str(int(T) + 1), body, signed)
