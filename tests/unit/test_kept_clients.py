"""The emulation's kept clients: lent again as they were made, never two borrowers at once."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config

from training_guard_local.kept_clients import KeptClients

EVENT = "heard-by-the-test"  # an event of the test's own, which none of botocore's handlers listens to
STANDARD = Config(retries={"mode": "standard", "total_max_attempts": 5})


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "a",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


def make() -> Any:
    return boto3.client("sagemaker", config=STANDARD)


def heard(client: Any) -> list[str]:
    """What the handlers registered on `client` heard of one emitted event."""
    said: list[str] = []
    client.meta.events.emit(f"{EVENT}.sagemaker.ListTrainingJobs", said=said)
    return said


def quota(client: Any) -> Any:
    """The standard retry mode's retry quota (botocore.retries.standard.register_retry_handler)."""
    return client.meta.events._emitter._unique_id_handlers["retry-config-sagemaker"]["handler"].__self__._retry_quota


def test_a_client_given_back_is_lent_again_without_the_handlers_registered_on_it() -> None:
    kept = KeptClients()
    first = kept.lend("sagemaker", make)
    first.meta.events.register(f"{EVENT}.sagemaker.ListTrainingJobs", lambda said, **_: said.append("plain"))
    first.meta.events.register_first(
        f"{EVENT}.sagemaker", lambda said, **_: said.append("unique"), unique_id="campaign-hook"
    )
    assert sorted(heard(first)) == ["plain", "unique"]
    kept.give_back(first)

    again = kept.lend("sagemaker", make)
    assert again is first
    assert kept.made == 1
    assert heard(again) == []
    # the unique id is free again: registering it anew works and is heard once
    again.meta.events.register(f"{EVENT}.sagemaker", lambda said, **_: said.append("anew"), unique_id="campaign-hook")
    assert heard(again) == ["anew"]


def test_a_client_lent_again_keeps_the_handlers_it_was_made_with() -> None:
    kept = KeptClients()
    client = kept.lend("sagemaker", make)
    before = list(client.meta.events._emitter._handlers.prefix_search("needs-retry.sagemaker.ListTrainingJobs"))
    kept.give_back(client)
    again = kept.lend("sagemaker", make)
    assert list(again.meta.events._emitter._handlers.prefix_search("needs-retry.sagemaker.ListTrainingJobs")) == before
    assert before  # the retry handler itself is still there


def test_the_retry_quota_a_campaign_drained_is_full_again() -> None:
    kept = KeptClients()
    client = kept.lend("sagemaker", make)
    checker = quota(client)
    full = checker._quota.available_capacity
    while checker._quota.acquire(5):
        pass
    assert checker._quota.available_capacity < 5
    kept.give_back(client)
    assert quota(kept.lend("sagemaker", make))._quota.available_capacity == full == 500


def test_a_key_already_lent_is_made_anew_and_both_are_kept() -> None:
    kept = KeptClients()
    outer = kept.lend("sagemaker", make)
    inner = kept.lend("sagemaker", make)
    assert inner is not outer
    kept.give_back(inner)
    kept.give_back(outer)
    assert {id(kept.lend("sagemaker", make)), id(kept.lend("sagemaker", make))} == {id(outer), id(inner)}
    assert kept.made == 2


def test_other_credentials_in_the_environment_make_another_client(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = KeptClients()
    first = kept.lend("sagemaker", make)
    kept.give_back(first)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "b")
    other = kept.lend("sagemaker", make)
    assert other is not first
    assert kept.made == 2
    # the region is part of the caller's key, not of the environment's
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "a")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert kept.lend("sagemaker", make) is first


def test_an_unregister_that_misses_its_event_still_loses_nothing_for_the_next_borrower() -> None:
    """botocore drops the unique id first, then finds no such event and keeps its lookup cache."""
    kept = KeptClients()
    client = kept.lend("sagemaker", make)
    client.meta.events.unregister("no-such-event", unique_id="retry-config-sagemaker")
    assert "retry-config-sagemaker" not in client.meta.events._emitter._unique_id_handlers
    kept.give_back(client)
    again = kept.lend("sagemaker", make)
    assert quota(again)._quota.available_capacity == 500  # the retry handler is back, its quota full


def test_a_counted_registration_does_not_change_what_the_next_borrower_gets() -> None:
    kept = KeptClients()
    client = kept.lend("sagemaker", make)
    said: list[str] = []
    hook = lambda said, **_: said.append("counted")  # noqa: E731
    for _ in range(2):
        client.meta.events.register(f"{EVENT}.sagemaker", hook, unique_id="counted", unique_id_uses_count=True)
    kept.give_back(client)
    again = kept.lend("sagemaker", make)
    assert heard(again) == []
    again.meta.events.register(f"{EVENT}.sagemaker", hook, unique_id="counted", unique_id_uses_count=True)
    again.meta.events.unregister(f"{EVENT}.sagemaker", hook, unique_id="counted", unique_id_uses_count=True)
    assert heard(again) == said == []


def test_an_emitter_nothing_changed_is_lent_as_it_is_and_a_later_change_is_still_undone() -> None:
    kept = KeptClients()
    client = kept.lend("sagemaker", make)
    handlers = client.meta.events._emitter._handlers
    heard(client)  # an emit fills the lookup cache: not a change
    kept.give_back(client)
    again = kept.lend("sagemaker", make)
    assert again.meta.events._emitter._handlers is handlers  # not copied back: nothing changed it
    again.meta.events.register(f"{EVENT}.sagemaker", lambda said, **_: said.append("second loan"))
    assert heard(again) == ["second loan"]
    kept.give_back(again)
    third = kept.lend("sagemaker", make)
    assert heard(third) == []
    assert third.meta.events._emitter._handlers is not handlers
    kept.give_back(third)
    assert kept.lend("sagemaker", make).meta.events._emitter._handlers is third.meta.events._emitter._handlers
