"""AWS refusing a call, in front of moto, through botocore's public events only (nothing of moto's is switched).

A `before-call` handler that raises stops the call before anything answers it: neither the emulation's answers
(training_guard_local/answers.py, registered after it) nor moto's stub runs, so nothing happens in the emulated account,
and the SDK does not retry an error it did not receive. What the guard sees is what the SDK raises once its own
retries are spent: a modeled `ClientError` with the code given.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

from botocore.awsrequest import AWSResponse, create_request_object

# (HTTP status, error code, message) as AWS's JSON and query protocols name them
Fault = tuple[int, str, str]
THROTTLING: Fault = (400, "ThrottlingException", "Rate exceeded")
INTERNAL: Fault = (500, "InternalFailure", "We encountered an internal error")
UNAVAILABLE: Fault = (503, "ServiceUnavailable", "Service unavailable")
ACCESS_DENIED: Fault = (403, "AccessDenied", "User is not authorized to perform: sts:AssumeRole")
TRANSIENT: tuple[Fault, ...] = (THROTTLING, INTERNAL, UNAVAILABLE)


def refusal(client: Any, operation: str, fault: Fault) -> Exception:
    """The exception `client` raises when AWS answers `operation` with `fault` (the modeled class where there is
    one, as botocore picks it from the error code)."""
    status, code, message = fault
    response = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
    made: Exception = client.exceptions.from_code(code)(response, operation)
    return made


def refuse(client: Any, operation: str | None, decide: Callable[[Any], Fault | None]) -> None:
    """From now on each `operation` request of `client` (None: every operation) is refused with the fault
    `decide(request)` names (None: sent as usual); registered first, so it runs before anything answers the call."""

    def before_call(params: dict[str, Any], event_name: str, **_: Any) -> None:
        fault = decide(create_request_object(params))  # the request as it will be sent, unsigned
        if fault is not None:
            raise refusal(client, event_name.rsplit(".", 1)[-1], fault)

    service = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register_first(f"before-call.{service}" + (f".{operation}" if operation else ""), before_call)


class _Body(io.BytesIO):
    """A response body as urllib3 streams it (what botocore's AWSResponse reads its content from)."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        chunk = self.read()
        while chunk:
            yield chunk
            chunk = self.read()


def answer(url: str, status: int, body: bytes, headers: dict[str, str] | None = None) -> AWSResponse:
    """An HTTP answer for a `before-send` handler to return (botocore uses the first one a handler returns). A call the
    emulation answers itself (answers.py: StopTrainingJob, DescribeTrainingJob, ...) never reaches `before-send`:
    fault those with `refuse`."""
    return AWSResponse(url, status, headers or {}, _Body(body))
