"""Webhook secrets from Secrets Manager: cached for their max age, and failures name the secret, never a value."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from training_guard.adapters.secrets import Secrets, SecretWebhookUrls
from training_guard.domain.errors import ActionFailed
from training_guard.services.chat import NotConfigured

URL = "https://hooks.slack.com/services/T000/B000/not-a-real-secret"


def stubbed() -> tuple[Secrets, Stubber]:
    client = boto3.client("secretsmanager", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    return Secrets(client), Stubber(client)


def test_a_secret_is_read_once_then_served_from_the_cache() -> None:
    secrets, stub = stubbed()
    stub.add_response("get_secret_value", {"SecretString": URL}, {"SecretId": "TrainingGuard/slack/default"})
    with stub:
        urls = SecretWebhookUrls(secrets, {"default": "TrainingGuard/slack/default"})
        assert urls.url("default") == URL
        assert urls.url("default") == URL  # no second call: the stubber would refuse it
    stub.assert_no_pending_responses()


def test_a_secret_is_read_again_once_its_max_age_has_passed() -> None:
    client = boto3.client("secretsmanager", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    now = [1000.0]
    secrets, stub = Secrets(client, max_age=300, monotonic=lambda: now[0]), Stubber(client)
    stub.add_response("get_secret_value", {"SecretString": URL}, {"SecretId": "s"})
    stub.add_response("get_secret_value", {"SecretString": URL + "2"}, {"SecretId": "s"})
    with stub:
        assert secrets.get("s") == URL
        now[0] += 300
        assert secrets.get("s") == URL  # still within its max age
        now[0] += 1
        assert secrets.get("s") == URL + "2"
    stub.assert_no_pending_responses()


def test_a_binary_secret_is_read_as_powertools_read_it() -> None:
    secrets, stub = stubbed()
    stub.add_response("get_secret_value", {"SecretBinary": b"abc"}, {"SecretId": "s"})
    with stub:
        assert secrets.get("s") == "b'abc'"


def test_a_failed_read_names_the_secret_and_the_error_never_a_value() -> None:
    secrets, stub = stubbed()
    stub.add_client_error("get_secret_value", "AccessDeniedException", "not allowed")
    with (
        stub,
        pytest.raises(ActionFailed, match=r"read secret TrainingGuard/slack/default failed: .*AccessDenied") as err,
    ):
        secrets.get("TrainingGuard/slack/default")
    assert URL not in str(err.value)


def test_a_secret_without_a_url_is_not_configured_and_says_how_to_fix_it() -> None:
    secrets, stub = stubbed()
    stub.add_response("get_secret_value", {"SecretString": "REPLACE-ME"}, {"SecretId": "s"})
    with stub, pytest.raises(NotConfigured, match="put-secret-value --secret-id s"):
        SecretWebhookUrls(secrets, {"default": "s"}).url("default")
