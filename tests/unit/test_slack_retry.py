"""The retry rules every Slack call follows (adapters/slack.py's `retry_wait`): the webhook sender and the bot's
Web API calls both send through `exchange`, which asks them after each failed attempt."""

from __future__ import annotations

from urllib.error import URLError

import pytest

from training_guard.adapters.slack import (
    ATTEMPT_SECONDS,
    MAX_BACKOFF_SECONDS,
    MAX_RETRIES,
    MAX_RETRY_AFTER_SECONDS,
    Deadline,
    retry_connection_once,
    retry_wait,
)


def deadline_with(seconds_left: float) -> Deadline:
    deadline = Deadline()
    deadline.time_left = lambda: seconds_left
    return deadline


def wait(
    status: int | None,
    headers: dict[str, str] | None = None,
    error: Exception | None = None,
    *,
    attempt: int = 0,
    deadline: Deadline | None = None,
) -> float | None:
    return retry_wait(attempt, status, headers or {}, error, deadline=deadline or Deadline(), backoff_factor=0.5)


@pytest.mark.parametrize(
    ("retry_after", "retried"), [(str(MAX_RETRY_AFTER_SECONDS), True), (str(MAX_RETRY_AFTER_SECONDS + 1), False)]
)
def test_a_429_is_retried_only_within_the_wait_budget(retry_after: str, retried: bool) -> None:
    assert (wait(429, {"Retry-After": retry_after}) is not None) is retried


def test_a_429_waits_retry_after_plus_under_a_second_whatever_the_header_case() -> None:
    waited = wait(429, {"retry-after": "5"})
    assert waited is not None
    assert 5 <= waited < 6
    unreadable = wait(429, {"Retry-After": "soon"})  # read as one second
    assert unreadable is not None
    assert 1 <= unreadable < 2


@pytest.mark.parametrize("status", [500, 502, 503, 504, 599])
def test_every_server_error_is_retried_with_a_doubling_back_off(status: int) -> None:
    for attempt in range(MAX_RETRIES):
        waited = wait(status, attempt=attempt)
        assert waited is not None
        assert 0.5 * 2**attempt <= waited <= 2 * 0.5 * 2**attempt <= MAX_BACKOFF_SECONDS


@pytest.mark.parametrize("status", [400, 403, 404, 410])
def test_client_errors_are_not_retried(status: int) -> None:
    assert wait(status) is None


def test_timeouts_and_connection_errors_are_retried_until_the_count_runs_out() -> None:
    for error in (TimeoutError("timed out"), ConnectionResetError("reset"), URLError("refused")):
        assert wait(None, error=error) is not None
        assert wait(None, error=error, attempt=MAX_RETRIES) is None
    assert wait(None, error=ValueError("not a connection error")) is None
    assert wait(503, attempt=MAX_RETRIES) is None
    assert wait(429, {"Retry-After": "1"}, attempt=MAX_RETRIES) is None


@pytest.mark.parametrize(
    ("seconds_left", "retried"),
    [(5 + ATTEMPT_SECONDS, True), (5 + ATTEMPT_SECONDS - 0.01, False)],
)
def test_a_429_is_not_waited_for_when_the_wait_and_one_more_attempt_outlast_the_invocation(
    seconds_left: float, retried: bool
) -> None:
    assert (wait(429, {"Retry-After": "5"}, deadline=deadline_with(seconds_left)) is not None) is retried


def test_server_and_connection_errors_are_not_retried_without_time_for_the_longest_back_off() -> None:
    short = deadline_with(MAX_BACKOFF_SECONDS + ATTEMPT_SECONDS - 0.01)
    enough = deadline_with(MAX_BACKOFF_SECONDS + ATTEMPT_SECONDS)
    assert wait(503, deadline=short) is None
    assert wait(503, deadline=enough) is not None
    timeout = TimeoutError("timed out")
    assert wait(None, error=timeout, deadline=short) is None
    assert wait(None, error=timeout, deadline=enough) is not None


def test_without_an_invocation_the_deadline_never_stops_a_retry() -> None:
    assert Deadline().allows(3600)


def test_a_click_answer_retries_a_refused_or_reset_connection_once_and_nothing_else() -> None:
    # The response_url's answers keep what slack_sdk's WebhookClient did by default.
    for error in (URLError("refused"), ConnectionResetError("reset")):
        waited = retry_connection_once(0, None, {}, error)
        assert waited is not None
        assert 0.5 <= waited < 1.5
        assert retry_connection_once(1, None, {}, error) is None
    assert retry_connection_once(0, None, {}, TimeoutError("read timed out")) is None
    assert retry_connection_once(0, 503, {}, None) is None
    assert retry_connection_once(0, 429, {"Retry-After": "1"}, None) is None
