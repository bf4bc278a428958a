"""moto_speed's replacements answer as moto's own do (the costs they remove: the module's docstring)."""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
import requests
from moto.backends import get_backend
from moto.core import utils as moto_utils
from moto.core.models import responses_mock
from moto.core.responses import BaseResponse

from training_guard_local import moto_speed
from training_guard_local.emulator import mock_aws_kept_session

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def response_classes() -> list[type]:
    """The response class of every service the guard and its emulation use, and their bases."""
    found: set[type] = set()
    for service in ("sagemaker", "dynamodb", "sns", "sqs", "cloudwatch", "events", "kms", "secretsmanager", "iam"):
        get_backend(service)  # imports the service's models
        module = importlib.import_module(f"moto.{service}.responses")
        found |= {c for _, c in inspect.getmembers(module, inspect.isclass) if issubclass(c, BaseResponse)}
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def test_an_actions_method_is_found_exactly_when_moto_would_find_it() -> None:
    moto_speed.install()
    for cls in response_classes():
        listed = moto_utils.method_names_from_class(cls)
        names = moto_speed._FunctionNames(cls)
        assert all(name in names for name in listed), cls
        attributes = [n for n in dir(cls) if n not in listed]
        assert not any(name in names for name in [*attributes, "no_such_action", ""]), cls


def test_a_method_added_to_a_response_class_later_is_found() -> None:
    from moto.cloudwatch.responses import CloudWatchResponse

    class Extended(CloudWatchResponse):  # metric_widget_ext adds its method to CloudWatchResponse itself
        pass

    names = moto_speed._FunctionNames(Extended)
    assert "put_metric_alarm" in names
    assert "an_action_added_later" not in names
    Extended.an_action_added_later = lambda self: None  # type: ignore[attr-defined]
    assert "an_action_added_later" in names


def test_each_mock_registers_the_same_callbacks_and_they_still_serve_requests() -> None:
    registered = []
    for _ in range(2):
        with mock_aws_kept_session():
            registered.append(responses_mock.registered())
            # a call through `requests` to an AWS address is served by moto, in either mock
            answer = requests.post(
                "https://sts.amazonaws.com/", data={"Action": "GetCallerIdentity", "Version": "2011-06-15"}, timeout=5
            )
            assert answer.status_code == 200
            assert "<Account>123456789012</Account>" in answer.text
    first, second = registered
    assert len(first) == len(second) > 1000
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert not responses_mock.registered() or responses_mock._patcher is None  # no mock left started


def test_a_kms_key_gets_its_private_key_when_first_used_and_signs_as_before() -> None:
    with mock_aws_kept_session():
        kms = boto3.client("kms", region_name="us-east-1")
        symmetric = kms.create_key()["KeyMetadata"]["KeyId"]
        backend: Any = get_backend("kms")["123456789012"]["us-east-1"]
        assert backend.keys[symmetric].private_key._key is None  # nothing made for a key that never signs
        for spec, algorithm in (("RSA_2048", "RSASSA_PSS_SHA_256"), ("ECC_NIST_P256", "ECDSA_SHA_256")):
            key = kms.create_key(KeySpec=spec, KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
            signature = kms.sign(KeyId=key, Message=b"stopped", SigningAlgorithm=algorithm)["Signature"]
            assert kms.verify(KeyId=key, Message=b"stopped", Signature=signature, SigningAlgorithm=algorithm)[
                "SignatureValid"
            ]
            assert kms.get_public_key(KeyId=key)["PublicKey"]
        # encryption with the symmetric key never needed the private key
        blob = kms.encrypt(KeyId=symmetric, Plaintext=json.dumps({"a": 1}).encode())["CiphertextBlob"]
        assert kms.decrypt(CiphertextBlob=blob)["Plaintext"] == b'{"a": 1}'
        assert backend.keys[symmetric].private_key._key is None


def test_a_lazy_private_key_is_made_once_among_threads_and_copies_as_moto_s_key_does() -> None:
    made: list[str] = []

    def make(spec: str) -> Any:
        made.append(spec)
        time.sleep(0.01)  # a window for a second thread to make one too, were the lock missing
        return SimpleNamespace(key_size=2048, spec=spec)

    key: Any = moto_speed._LazyPrivateKey(make, "RSA_2048")
    assert key._key is None
    with pytest.raises(AttributeError):
        key.__reduce_cls__  # noqa: B018 (a dunder is refused, never answered by making a key)
    assert made == []
    with ThreadPoolExecutor(4) as pool:
        sizes = list(pool.map(lambda _: key.key_size, range(8)))
    assert sizes == [2048] * 8
    assert made == ["RSA_2048"]
    for copied in (copy.copy(key), copy.deepcopy(key)):  # copies of the one key, as of moto's own
        assert copied.key_size == 2048
        assert copied is not key._key
    assert made == ["RSA_2048"]
    fresh: Any = moto_speed._LazyPrivateKey(make, "ECC_NIST_P256")
    assert copy.deepcopy(fresh).spec == "ECC_NIST_P256"  # a copy of one not used yet makes the key first
    assert fresh._key is not None


def test_a_kms_key_copies_with_its_private_key() -> None:
    with mock_aws_kept_session():
        kms = boto3.client("kms", region_name="us-east-1")
        key_id = kms.create_key(KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
        key: Any = get_backend("kms")["123456789012"]["us-east-1"].keys[key_id]
        copied: Any = copy.deepcopy(key)
        # moto's key wraps the cryptography key (`.private_key`): a copy holds the same numbers
        assert copied.private_key.private_key.private_numbers() == key.private_key.private_key.private_numbers()


def test_a_kept_callback_records_only_its_own_mocks_calls() -> None:
    with mock_aws_kept_session():
        requests.post(
            "https://sts.amazonaws.com/", data={"Action": "GetCallerIdentity", "Version": "2011-06-15"}, timeout=5
        )
        called = [r for r in responses_mock.registered() if r.call_count]
        assert called
    with mock_aws_kept_session():
        assert all(r.call_count == 0 for r in called)  # the same objects, registered again as new


@pytest.mark.parametrize(
    "expression",
    [
        "attribute_not_exists(pk) OR (#s = :done AND lease_until < :now)",
        "#s IN (:a, :b) AND size(tags) > :n",
        "NOT begins_with(job.title, :p) AND attempts BETWEEN :lo AND :hi",
        "a.b[1].c <> :v",
    ],
)
def test_a_condition_is_lexed_into_the_nodes_the_lexer_makes_each_time_anew(
    expression: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb.comparisons import ConditionExpressionParser

    moto_speed.install()
    names = {"#s": "state"}
    values = {k: {"S": "x"} for k in (":done", ":now", ":a", ":b", ":n", ":p", ":lo", ":hi", ":v")}
    lexer = ConditionExpressionParser(expression, names, values)
    fresh = []
    remaining = expression
    while remaining:  # the lexer's own loop, by hand (moto/dynamodb/comparisons.py)
        node, remaining = lexer._lex_one_node(remaining)
        if node.nonterminal != lexer.Nonterminal.WHITESPACE:
            fresh.append(node)
    first, second = (
        list(ConditionExpressionParser(expression, names, values)._lex_condition_expression()) for _ in "ab"
    )
    assert first == second == fresh
    assert all(a.children is not b.children for a, b in zip(first, second, strict=True))
    # the second time the tokens were kept: the lexer is not run again
    monkeypatch.setattr(ConditionExpressionParser, "_lex_one_node", lambda self, remaining: pytest.fail("lexed again"))
    assert list(ConditionExpressionParser(expression, names, values)._lex_condition_expression()) == fresh


def test_an_expression_the_lexer_refuses_is_refused_every_time() -> None:
    from moto.dynamodb.comparisons import ConditionExpressionParser

    moto_speed.install()
    for _ in range(2):
        with pytest.raises(ValueError, match="Cannot parse condition"):
            ConditionExpressionParser("a = :v ;", {}, {":v": {"S": "x"}})._lex_condition_expression()


def test_requests_carry_sigv4s_headers_and_scope_and_moto_still_tells_accounts_apart() -> None:
    seen: list[dict[str, str]] = []

    def headers(request: Any, **_: Any) -> None:
        seen.append({k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()})

    with mock_aws_kept_session():
        sts = boto3.client("sts", region_name="eu-west-1")
        sts.meta.events.register("before-send", headers)
        assert sts.get_caller_identity()["Account"] == "123456789012"
        authorization = seen[-1]["Authorization"]
        assert re.match(
            r"AWS4-HMAC-SHA256 Credential=\w+/\d{8}/eu-west-1/sts/aws4_request, SignedHeaders=", authorization
        )
        assert "X-Amz-Date" in seen[-1]
        # moto picks the account from the access key: a role's credentials act in the role's account
        role = "arn:aws:iam::111122223333:role/member"
        credentials = sts.assume_role(RoleArn=role, RoleSessionName="speed")["Credentials"]
        member = boto3.client(
            "sts",
            region_name="eu-west-1",
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
        )
        member.meta.events.register("before-send", headers)
        assert member.get_caller_identity()["Account"] == "111122223333"
        assert seen[-1]["X-Amz-Security-Token"] == credentials["SessionToken"]


def test_outside_a_mock_requests_are_signed_in_full() -> None:
    moto_speed.install()
    client = boto3.client(
        "sts", region_name="eu-west-1", aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret"
    )
    signed: list[str] = []

    class Sent(Exception):
        pass

    def capture(request: Any, **_: Any) -> None:  # signed by now; nothing leaves the process
        signed.append(request.headers["Authorization"].decode())
        raise Sent

    client.meta.events.register("before-send", capture)
    with pytest.raises(Sent):
        client.get_caller_identity()
    signature = signed[-1].rsplit("Signature=", 1)[1]
    assert re.fullmatch(r"[0-9a-f]{64}", signature)
    assert signature != "0" * 64
