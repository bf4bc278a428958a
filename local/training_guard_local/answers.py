"""The emulation's own answers to AWS calls, given through botocore's public events in front of moto (nothing of moto's
or botocore's code is replaced): a `before-call` handler that returns `(http, parsed)` is the call's answer, as with
botocore's Stubber. The extensions (sagemaker_ext, cloudwatch_ext, ...) register what they answer here."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.validate import validate_parameters

MOTO_ACCOUNT_ENV = "MOTO_ACCOUNT_ID"
_PARAMS = "training_guard_local.params"  # request context key: the call's API parameters
_HANDLERS = "training-guard-local-answers"  # the handlers' unique ids on an event emitter start so
ANSWER_ID = f"{_HANDLERS}-answer"  # a client that must not be answered here unregisters it (the bench's stopper)


@dataclass(frozen=True)
class Call:
    """One API call an extension answers: its parameters and where moto would serve it."""

    params: Mapping[str, Any]
    region: str
    request_signer: Any

    @cached_property
    def access_key(self) -> str:
        """The access key the call is signed with ("" unsigned)."""
        auth = self.request_signer.get_auth_instance(self.request_signer.signing_name, self.region, "v4")
        credentials = getattr(auth, "credentials", None)
        return str(credentials.access_key) if credentials is not None else ""

    @cached_property
    def account(self) -> str:
        """The account moto serves the call in: MOTO_ACCOUNT_ID, else the one its credentials belong to (moto's
        multi-account rule, https://docs.getmoto.org/en/latest/docs/multi_account.html)."""
        account = os.environ.get(MOTO_ACCOUNT_ENV)
        if account:
            return account
        from moto.iam.models import get_account_id_from

        return str(get_account_id_from(self.access_key))


Reply = tuple[AWSResponse, dict[str, Any]]
Answer = Callable[[Call, Any], Reply | None]  # (call, operation model) -> the answer; None: moto answers


@dataclass(frozen=True)
class Operation:
    """How the emulation answers one operation."""

    answer: Answer
    prepare: Callable[[dict[str, Any]], None] | None = None  # may rewrite the parameters before they are serialized


_OPERATIONS: dict[tuple[str, str], Operation] = {}  # (service name, operation) -> how the emulation answers it


def install(session: Any = None) -> None:
    """Give the clients `session` makes from now on the emulation's answers (default: boto3's default session, the
    kept one inside an emulation); idempotent. A client has the handlers its session had when it was made."""
    if session is None:
        import boto3

        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()
        session = boto3.DEFAULT_SESSION
    events = session.events if hasattr(session, "events") else session.get_component("event_emitter")
    # Registered at the root of each event: every handler registered for the service or the operation (a campaign's
    # faults, a test's observer) runs first, as it would in front of AWS.
    events.register("before-parameter-build", _keep_params, unique_id=f"{_HANDLERS}-params")
    events.register_last("before-call", _answer, unique_id=ANSWER_ID)


def answer(
    service: str, operation: str, how: Answer, *, prepare: Callable[[dict[str, Any]], None] | None = None
) -> None:
    """From now on the emulation answers `operation` of `service` (botocore's service name) with `how`."""
    _OPERATIONS[(service, operation)] = Operation(how, prepare)


@contextlib.contextmanager
def answering(operations: Mapping[tuple[str, str], Answer]) -> Iterator[None]:
    """The emulation answers these operations inside the block only (blocks nest; overlapping ones that are not nested
    would put back each other's answers)."""
    saved = {key: _OPERATIONS.get(key) for key in operations}
    _OPERATIONS.update({key: Operation(how) for key, how in operations.items()})
    try:
        yield
    finally:
        for key, kept in saved.items():
            if kept is None:
                _OPERATIONS.pop(key, None)
            else:
                _OPERATIONS[key] = kept


def _keep_params(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    operation = _OPERATIONS.get((model.service_model.service_name, model.name))
    if operation is None:
        return
    if operation.prepare is not None:
        operation.prepare(params)
    context[_PARAMS] = params


def _answer(model: Any, request_signer: Any, context: dict[str, Any], **_: Any) -> Reply | None:
    operation = _OPERATIONS.get((model.service_model.service_name, model.name))
    if operation is None or _PARAMS not in context:
        return None
    call = Call(context[_PARAMS], str(context.get("client_region") or request_signer.region_name), request_signer)
    return operation.answer(call, model)


def reply(model: Any, output: Mapping[str, Any] | None = None) -> Reply:
    """A successful answer, checked against the operation's output shape (as botocore's Stubber checks its answers)."""
    parsed = dict(output or {})
    if model.output_shape is not None:
        validate_parameters(parsed, model.output_shape)
    return AWSResponse("", 200, {}, None), {**parsed, "ResponseMetadata": _metadata(200)}


def refusal(model: Any, code: str, message: str, *, status: int | None = None) -> Reply:
    """An error answer: botocore raises the ClientError the service model names for `code` (HTTP status: the error
    shape's, else `status`, else 400)."""
    modeled = {shape.error_code: shape for shape in model.service_model.error_shapes}.get(code)
    status = status or (modeled.metadata.get("error", {}).get("httpStatusCode") if modeled is not None else None) or 400
    parsed = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": _metadata(status)}
    return AWSResponse("", status, {}, None), parsed


def _metadata(status: int) -> dict[str, Any]:
    return {"RequestId": str(uuid.uuid4()), "HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0}
