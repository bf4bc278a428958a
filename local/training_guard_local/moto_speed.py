"""Five of moto's costs that an emulation pays over and over and that change nothing it answers, removed.

Measured with py-spy over the unit tests in one process (they start about a thousand mocks and make a few hundred KMS
keys), together about a seventh of their time:

- **Starting a mock** (`mock_aws`) registered a new `responses` callback for each of moto's 183 URL patterns and each
  of seven HTTP methods (1,281 objects, ~5 ms). They are made once here and registered again on each start: the
  registry they go into is still made anew each time (`reset_responses_mock`), and a callback holds no state of a
  mock's (its pattern, its method and moto's dispatch function; the calls it records are only those made through
  `requests`, which nothing here uses: boto3 is served by moto's botocore hook).
- **Each call** looked its action up in the list of every function of the response class (`inspect.getmembers`,
  ~0.4 ms): `action in method_names_from_class(cls)` is the same question as "is `cls.<action>` a function", which is
  what this asks, by name, at the time of the call (so a method added later, as `metric_widget_ext` adds one, is
  found).
- **Each DynamoDB condition** (the guard's claims and updates are conditional) was lexed anew, one regular expression
  match after another over the whole text (~5% of a fault campaign's time): the tokens of each expression text are
  kept, and each parse gets new nodes made from them, as the lexer would have made them.
- **Each request** was signed (SigV4: a canonical request, a string to sign, five HMACs; ~0.1 ms), which moto never
  checks: while a mock is on, requests carry SigV4's headers and credential scope, which moto reads, with a signature
  of zeros (outside one they are signed in full).
- **Each KMS key** got an RSA-2048 private key at creation (~100 ms of CPU), which only Sign, Verify and GetPublicKey
  read: the key is made when one of them first reads it, the same key moto would have made.

`install()` is idempotent and process-wide; what it replaces answers exactly as before (the signature: while moto's
mock is on).
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
import threading
from collections import deque
from typing import Any


@functools.cache
def install() -> None:
    models: Any = importlib.import_module("moto.core.models")
    responses: Any = importlib.import_module("moto.core.responses")
    kms_models: Any = importlib.import_module("moto.kms.models")
    models.CallbackResponse = _kept_callback(models.CallbackResponse)
    responses.method_names_from_class = _FunctionNames
    kms_models.generate_private_key = _lazy_private_key(kms_models.generate_private_key)
    comparisons: Any = importlib.import_module("moto.dynamodb.comparisons")
    parser = comparisons.ConditionExpressionParser
    parser._lex_condition_expression = _kept_tokens(parser._lex_condition_expression)
    auth: Any = importlib.import_module("botocore.auth")
    auth.AUTH_TYPE_MAPS["v4"] = _scoped_v4(auth.AUTH_TYPE_MAPS["v4"])


@functools.cache
def _scoped_v4(sigv4: type) -> type:
    """botocore's SigV4 signer, its headers as before and, while a mock is on, its signature not computed (~0.1 ms a
    call: a canonical request, a string to sign and five HMACs). moto reads the Authorization header's credential
    scope (the access key picks the account, `BaseResponse.get_access_key`) and checks no signature: only its IAM
    authorization mode (`set_initial_no_auth_action_count`) would, and nothing here turns it on. Outside a mock (moto's
    botocore hook off), requests are signed in full: a process that emulated and then calls AWS is not refused."""
    models: Any = importlib.import_module("moto.core.models")
    stubber = models.botocore_stubber

    class ScopedV4(sigv4):  # type: ignore[misc]
        def canonical_request(self, request: Any) -> str:
            return "" if stubber.enabled else str(super().canonical_request(request))

        def string_to_sign(self, request: Any, canonical_request: str) -> str:
            return "" if stubber.enabled else str(super().string_to_sign(request, canonical_request))

        def signature(self, string_to_sign: str, request: Any) -> str:
            return "0" * 64 if stubber.enabled else str(super().signature(string_to_sign, request))

    return ScopedV4


def _kept_callback(make: Any) -> Any:
    kept: dict[tuple[Any, ...], Any] = {}

    def callback_response(*, method: str, url: Any, callback: Any) -> Any:
        key = (method, getattr(url, "pattern", url), getattr(url, "flags", None), callback)  # url: str or re.Pattern
        response = kept.get(key)
        if response is None:
            response = kept[key] = make(method=method, url=url, callback=callback)
        else:
            response.calls.reset()  # as new: what it recorded in an earlier mock is not this one's
        return response

    return callback_response


class _FunctionNames:
    """What `method_names_from_class(cls)` is used for (`action in ...`), answered for one name."""

    __slots__ = ("_cls",)

    def __init__(self, cls: Any) -> None:
        self._cls = cls

    def __contains__(self, name: object) -> bool:
        # inspect.getmembers(cls, inspect.isfunction) lists the names whose getattr(cls, name) is a function
        return isinstance(name, str) and inspect.isfunction(getattr(self._cls, name, None))


class _LazyPrivateKey:
    """moto's private key of a KMS key, made when first used (once: moto's server mode serves threads).

    A copy is a copy of the key, made first, as copying moto's own key object would give. Python's special methods
    are looked up on the class, so only ordinary attributes reach `__getattr__`: a dunder asked of the instance and
    this class's own fields are refused there, never answered by making a key."""

    _key: Any = None

    def __init__(self, make: Any, key_spec: str) -> None:
        self._make = make
        self._key_spec = key_spec
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_make", "_key_spec", "_lock"):
            raise AttributeError(name)
        return getattr(self._made(), name)

    def __copy__(self) -> Any:
        return copy.copy(self._made())

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return copy.deepcopy(self._made(), memo)

    def _made(self) -> Any:
        with self._lock:
            if self._key is None:
                self._key = self._make(self._key_spec)
            return self._key


def _lazy_private_key(make: Any) -> Any:
    def generate_private_key(key_spec: str) -> Any:
        return _LazyPrivateKey(make, key_spec)

    return generate_private_key


def _kept_tokens(lex: Any) -> Any:
    """ConditionExpressionParser._lex_condition_expression, its tokens kept by expression text. The lexer's nodes are
    LITERAL nodes with no children whose value is their text (moto/dynamodb/comparisons.py, `_lex_one_node`); each
    call gets new ones (a new empty children list each), as from the lexer. An expression the lexer refuses is not
    kept: it raises each time."""
    kept: dict[str, tuple[tuple[Any, str], ...]] = {}

    def lex_condition_expression(self: Any) -> Any:
        expression = self.condition_expression
        tokens = kept.get(expression)
        if tokens is None:
            nodes = lex(self)
            if any(n.kind != self.Kind.LITERAL or n.children or n.value != n.text for n in nodes):
                return nodes  # not the lexer's plain tokens (another moto version): not kept
            tokens = kept[expression] = tuple((n.nonterminal, n.text) for n in nodes)
        return deque(
            self.Node(nonterminal=nonterminal, kind=self.Kind.LITERAL, text=text, value=text, children=[])
            for nonterminal, text in tokens
        )

    return lex_condition_expression
