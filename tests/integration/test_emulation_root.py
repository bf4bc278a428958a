"""The emulation gives the functions their composition root, made from its moto clients: nothing is patched."""

from __future__ import annotations

import pytest

from tests.helpers import load_event
from training_guard.config.model import GuardConfig
from training_guard.handlers import wiring
from training_guard_local.emulator import Emulation

pytestmark = pytest.mark.integration

SERVICES = ("sqs", "dynamodb", "sagemaker", "sns", "cloudwatch", "secretsmanager")


def test_the_functions_root_is_the_emulations_and_is_forgotten_after_it() -> None:
    with Emulation(GuardConfig()) as aws:
        root = wiring.root()
        assert {service: root.client(service) for service in SERVICES} == {
            service: aws.function_client(service) for service in SERVICES
        }
        assert aws.deliver(load_event("vanishing_gradient_issues_found"))["stopped"] is True
        assert wiring.root() is root  # one root per site, kept between deliveries as a container keeps its own
    assert wiring.root() is not root  # a container's own, made from boto3 when first asked for a client
    wiring.reset()


def test_each_region_of_an_emulation_has_the_functions_clients_of_that_region() -> None:
    with Emulation(GuardConfig()) as aws:
        here = {service: wiring.root().client(service) for service in SERVICES}
        aws.use(aws.account, "eu-west-1")
        there = {service: wiring.root().client(service) for service in SERVICES}
        assert {c.meta.region_name for c in there.values()} == {"eu-west-1"}
        assert not {id(c) for c in here.values()} & {id(c) for c in there.values()}
        aws.use(aws.account, "us-east-1")
        assert {service: wiring.root().client(service) for service in SERVICES} == here


def test_a_new_site_gets_a_new_root_with_its_own_settings() -> None:
    with Emulation(GuardConfig()) as aws:
        first = wiring.root()
        assert first.settings.topic_arn.split(":")[4] == aws.default_account
        aws.use("210987654321", aws.region)
        second = wiring.root()
        assert second is not first
        assert second.settings.topic_arn.split(":")[4] == "210987654321"
