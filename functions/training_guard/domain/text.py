"""Small text helpers shared by the renderers (no imports beyond the standard library)."""

from __future__ import annotations

from datetime import UTC, datetime


def format_duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


def ascii_int(value: str, max_digits: int = 18) -> int | None:
    """The number a string of at most `max_digits` ASCII digits writes (18 fit an int64), else None."""
    # isdigit() alone accepts "²" and non-ASCII digits, which int() refuses, as it refuses over 4,300 digits.
    if value.isascii() and value.isdigit() and len(value) <= max_digits:
        return int(value)
    return None


RUNNING = "InProgress"  # events.IN_PROGRESS (this module imports nothing of the guard)
ALREADY_ENDED = "already_ended"  # messages.Outcome.ALREADY_ENDED: SageMaker refused the stop, the job had ended
SLACK_USER_PREFIX = "slack:"  # policy.decide_stop_request's `by`: `slack:<user id>`


def ended_status(status: object) -> str:
    """The state of a job the stop found ended, as a title says it ("Stopped"); "ended" when only that is known."""
    text = str(status or "")
    if not text or text == RUNNING:
        return "ended"
    return "being stopped" if text == "Stopping" else text


def status_text(status: object, secondary: object, outcome: object) -> str:
    """A job's status line ("Stopped / Stopped"); never InProgress for a job that ended before the stop."""
    if outcome == ALREADY_ENDED and (not status or status == RUNNING):
        return "ended before the stop (SageMaker refused it)"
    return f"{status} / {secondary}" if secondary else str(status)


def person(by: object, *, slack: bool) -> str | None:
    """Who pressed a button: `<@U123>` in Slack, "Slack user U123" elsewhere; None when `by` names no person."""
    text = str(by or "")
    user = text[len(SLACK_USER_PREFIX) :] if text.startswith(SLACK_USER_PREFIX) else ""
    if not user or not user.isascii() or not user.isalnum():
        return None
    return f"<@{user}>" if slack else f"Slack user {user}"


def clock(at: datetime | None) -> str:
    """A time as every message shows it: "01:39 UTC" (minutes, in UTC); "-" when unknown."""
    return at.astimezone(UTC).strftime("%H:%M UTC") if at is not None else "-"
