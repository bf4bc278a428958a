"""The emulation's entry and exit: what it changes in the process (the environment, moto's mock, what was entered on
it) is undone in order, whatever fails, and it is entered once at a time."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from unittest import mock

import pytest

from training_guard.config.model import GuardConfig
from training_guard_local.emulator import MOTO_ACCOUNT_ENV, Emulation

pytestmark = pytest.mark.integration


def test_a_patch_entered_on_the_emulation_is_undone_before_its_environment_is_restored() -> None:
    before = dict(os.environ)
    with Emulation(GuardConfig(), handler_logs=False) as aws:
        inside = os.environ[MOTO_ACCOUNT_ENV]
        # what the Slack-app demo does: a patch.dict snapshots the emulation's environment
        aws.enter_context(mock.patch.dict(os.environ, {"TG_PROBE": "1"}))
        assert os.environ["TG_PROBE"] == "1"
    assert inside == aws.account
    assert dict(os.environ) == before  # neither the probe nor the emulation's account and keys are left


def test_a_second_entry_is_refused_and_the_first_is_untouched() -> None:
    aws = Emulation(GuardConfig(), handler_logs=False)
    with aws:
        url = aws.client("sqs").create_queue(QueueName="kept")["QueueUrl"]
        with pytest.raises(RuntimeError, match="already entered"), aws:
            pass
        assert aws.client("sqs").get_queue_url(QueueName="kept")["QueueUrl"] == url


def test_entered_again_after_it_ended_the_guards_resources_are_made_again() -> None:
    aws = Emulation(GuardConfig(), handler_logs=False)
    with aws:
        first = aws.client("sqs").list_queues()["QueueUrls"]
    with aws:  # a new moto: the resources are the emulation's again, not remembered from the first run
        assert sorted(aws.client("sqs").list_queues()["QueueUrls"]) == sorted(first)


def test_a_failure_while_exiting_still_stops_moto_and_restores_the_environment() -> None:
    before = dict(os.environ)

    @contextlib.contextmanager
    def breaks_on_exit() -> Iterator[None]:
        yield
        raise OSError("could not tidy up")

    aws = Emulation(GuardConfig(), handler_logs=False)
    with pytest.raises(OSError, match="could not tidy up"), aws:
        aws.enter_context(breaks_on_exit())
    assert dict(os.environ) == before
    with aws:  # and it can be entered again
        assert aws.client("sqs").list_queues()["QueueUrls"]


def test_a_failure_while_entering_undoes_what_was_done(monkeypatch: pytest.MonkeyPatch) -> None:
    before = dict(os.environ)
    aws = Emulation(GuardConfig(), handler_logs=False)
    monkeypatch.setattr(aws, "_create_resources", mock.Mock(side_effect=RuntimeError("no table")))
    with pytest.raises(RuntimeError, match="no table"), aws:
        pytest.fail("entered")
    assert dict(os.environ) == before
