"""The retry rules of adapters/slack.py: in the webhook sender's own loop (standard library), and in the Slack app's
handlers through slack_sdk's public `can_retry` (if slack_sdk stopped delegating to `_can_retry`, the extension point
those handlers override, these tests would fail)."""

from __future__ import annotations

import inspect
from urllib.error import URLError

import pytest
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from training_guard.adapters.slack import (
    ATTEMPT_SECONDS,
    MAX_BACKOFF_SECONDS,
    MAX_RETRIES,
    MAX_RETRY_AFTER_SECONDS,
    Deadline,
    WebhookSender,
)
from training_guard.adapters.slack_app import retry_handlers

REQUEST = HttpRequest(method="POST", url="https://hooks.example/x", headers={}, body_params=None, data=None)


def verdicts(response: HttpResponse | None, error: Exception | None = None, attempt: int = 0) -> list[bool]:
    state = RetryState(current_attempt=attempt)
    return [h.can_retry(state=state, request=REQUEST, response=response, error=error) for h in retry_handlers(0.0)]


def test_the_extension_point_keeps_the_signature_our_handlers_override() -> None:
    params = inspect.signature(RetryHandler._can_retry).parameters
    assert list(params) == ["self", "state", "request", "response", "error"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for name, p in params.items() if name != "self")


@pytest.mark.parametrize(
    ("retry_after", "retried"), [(str(MAX_RETRY_AFTER_SECONDS), True), (str(MAX_RETRY_AFTER_SECONDS + 1), False)]
)
def test_a_429_is_retried_only_within_the_wait_budget(retry_after: str, retried: bool) -> None:
    response = HttpResponse(status_code=429, headers={"Retry-After": [retry_after]}, body={})
    assert verdicts(response) == [retried, False, False]


@pytest.mark.parametrize("status", [500, 502, 503, 504, 599])
def test_every_server_error_is_retried(status: int) -> None:
    assert verdicts(HttpResponse(status_code=status, headers={}, body={})) == [False, True, False]


@pytest.mark.parametrize("status", [400, 403, 404, 410])
def test_client_errors_are_not_retried(status: int) -> None:
    assert verdicts(HttpResponse(status_code=status, headers={}, body={})) == [False, False, False]


def test_timeouts_and_connection_errors_are_retried_until_the_count_runs_out() -> None:
    assert verdicts(None, TimeoutError("timed out")) == [False, False, True]
    assert verdicts(None, TimeoutError("timed out"), attempt=MAX_RETRIES) == [False, False, False]


def deadline_with(seconds_left: float) -> Deadline:
    deadline = Deadline()
    deadline.time_left = lambda: seconds_left
    return deadline


@pytest.mark.parametrize(
    ("seconds_left", "retried"),
    [(5 + ATTEMPT_SECONDS, True), (5 + ATTEMPT_SECONDS - 0.01, False)],
)
def test_a_429_is_not_waited_for_when_the_wait_and_one_more_attempt_outlast_the_invocation(
    seconds_left: float, retried: bool
) -> None:
    response = HttpResponse(status_code=429, headers={"Retry-After": ["5"]}, body={})
    handlers = retry_handlers(0.0, deadline_with(seconds_left))
    state = RetryState(current_attempt=0)
    assert handlers[0].can_retry(state=state, request=REQUEST, response=response) is retried


def test_server_and_connection_errors_are_not_retried_without_time_for_the_longest_back_off() -> None:
    short = retry_handlers(0.0, deadline_with(MAX_BACKOFF_SECONDS + ATTEMPT_SECONDS - 0.01))
    enough = retry_handlers(0.0, deadline_with(MAX_BACKOFF_SECONDS + ATTEMPT_SECONDS))
    state = RetryState(current_attempt=0)
    error_503 = HttpResponse(status_code=503, headers={}, body={})
    assert short[1].can_retry(state=state, request=REQUEST, response=error_503) is False
    assert enough[1].can_retry(state=state, request=REQUEST, response=error_503) is True
    timeout = TimeoutError("timed out")
    assert short[2].can_retry(state=state, request=REQUEST, error=timeout) is False
    assert enough[2].can_retry(state=state, request=REQUEST, error=timeout) is True


def test_without_an_invocation_the_deadline_never_stops_a_retry() -> None:
    assert Deadline().allows(3600)


# --- the webhook sender's loop: the same rules, without slack_sdk -------------------------------------------------


def webhook_wait(
    status: int | None, headers: dict[str, str] | None = None, error: Exception | None = None, attempt: int = 0
) -> float | None:
    return WebhookSender(backoff_factor=0.5)._wait(attempt, status, headers or {}, error)


def test_the_webhook_waits_retry_after_plus_under_a_second_within_the_wait_budget() -> None:
    wait = webhook_wait(429, {"retry-after": "5"})
    assert wait is not None
    assert 5 <= wait < 6
    assert webhook_wait(429, {"Retry-After": str(MAX_RETRY_AFTER_SECONDS + 1)}) is None
    unreadable = webhook_wait(429, {"Retry-After": "soon"})
    assert unreadable is not None
    assert 1 <= unreadable < 2


@pytest.mark.parametrize("status", [500, 502, 503, 504, 599])
def test_the_webhook_backs_off_on_every_server_error(status: int) -> None:
    wait = webhook_wait(status, attempt=2)
    assert wait is not None
    assert 2.0 <= wait <= MAX_BACKOFF_SECONDS


@pytest.mark.parametrize("status", [400, 403, 404, 410])
def test_the_webhook_does_not_retry_client_errors(status: int) -> None:
    assert webhook_wait(status) is None


def test_the_webhook_retries_timeouts_and_connection_errors_until_the_count_runs_out() -> None:
    for error in (TimeoutError("timed out"), ConnectionResetError("reset"), URLError("refused")):
        assert webhook_wait(None, error=error) is not None
        assert webhook_wait(None, error=error, attempt=MAX_RETRIES) is None
    assert webhook_wait(None, error=ValueError("not a connection error")) is None


def test_the_webhook_retries_nothing_without_time_for_the_wait_and_one_more_attempt() -> None:
    sender = WebhookSender(deadline=deadline_with(MAX_BACKOFF_SECONDS + ATTEMPT_SECONDS - 0.01))
    assert sender._wait(0, 503, {}, None) is None
    assert sender._wait(0, None, {}, TimeoutError("timed out")) is None
    assert sender._wait(0, 429, {"Retry-After": "1"}, None) is not None  # 1 s and an attempt still fit
    assert sender._wait(0, 429, {"Retry-After": "5"}, None) is None
