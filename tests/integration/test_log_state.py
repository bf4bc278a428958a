"""A warm Lambda container keeps the Logger's appended keys from one invocation to the next unless the handler's
`inject_lambda_context` clears them (Powertools: "custom keys are persisted across warm invocations ... clear_state").
An invocation that logs before it knows its job must not carry the previous job's name."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterator

from tests.helpers import load_event
from training_guard_local.emulator import Emulation


def _lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@contextlib.contextmanager
def _logged() -> Iterator[io.StringIO]:
    """What the handlers' Logger writes, whatever `sys.stdout` was when a handler module was first imported.

    Powertools binds its stream handler to the `sys.stdout` of the moment the first Logger() is made; under pytest
    that may be an earlier test's capture, which capfd never sees. The stream is swapped for the block instead."""
    from training_guard.handlers import job_events

    buffer = io.StringIO()
    handlers = [h for h in logging.getLogger(job_events.logger.name).handlers if isinstance(h, logging.StreamHandler)]
    assert handlers, "the handlers' Logger has no stream handler"
    previous = [h.setStream(buffer) for h in handlers]
    try:
        yield buffer
    finally:
        for handler, stream in zip(handlers, previous, strict=True):
            handler.setStream(stream)


def test_a_log_line_before_the_job_is_known_does_not_name_the_previous_invocations_job() -> None:
    with Emulation(quiet=True) as aws:
        first = load_event("vanishing_gradient_issues_found")
        with _logged() as before:
            aws.deliver(first)
        assert any(line.get("training_job") for line in _lines(before.getvalue())), "the first job was not logged"
        with _logged() as after:
            aws.deliver(
                {"id": "not-sagemaker", "source": "aws.ec2", "detail-type": "EC2 Instance State-change Notification"}
            )
            aws.sweep()
    logged = _lines(after.getvalue())
    assert any(line.get("message") == "foreign event ignored" for line in logged)
    assert all("training_job" not in line for line in logged), logged
