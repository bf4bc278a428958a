"""Emulations one after another share the process's clients, and no hook a test put on one reaches the next."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import load_event
from training_guard.adapters import clients
from training_guard.config.model import GuardConfig
from training_guard_local.emulator import FUNCTION_SERVICES, Emulation
from training_guard_local.kept_clients import KEPT

pytestmark = pytest.mark.integration


def test_the_next_emulation_borrows_the_same_clients_without_the_last_ones_hooks() -> None:
    heard: list[str] = []

    def lose(**_: Any) -> None:
        heard.append("publish")
        raise RuntimeError("a fault the first emulation's test injected")

    with Emulation(GuardConfig()) as first:
        sns, sqs = clients.client("sns"), first.client("sqs")
        sns.meta.events.register_first("before-send.sns.Publish", lose)
        sqs.meta.events.register("before-call.sqs.ListQueues", lose)
        made = KEPT.made

    with Emulation(GuardConfig()) as second:
        assert KEPT.made == made  # nothing made again
        assert clients.client("sns") is sns
        assert second.client("sqs") is sqs
        assert second.deliver(load_event("vanishing_gradient_issues_found"))["stopped"] is True
        assert [n["kind"] for n in second.notifications()] == ["issues_found"]
        second.client("sqs").list_queues()
    assert heard == []


def test_each_region_of_an_emulation_has_the_functions_clients_of_that_region() -> None:
    with Emulation(GuardConfig()) as aws:
        here = {service: clients.client(service) for service in FUNCTION_SERVICES}
        aws.use(aws.account, "eu-west-1")
        there = {service: clients.client(service) for service in FUNCTION_SERVICES}
        assert {c.meta.region_name for c in there.values()} == {"eu-west-1"}
        assert not {id(c) for c in here.values()} & {id(c) for c in there.values()}
        aws.use(aws.account, "us-east-1")
        assert {service: clients.client(service) for service in FUNCTION_SERVICES} == here
