"""The adapters' boto3 clients are typed with the mypy_boto3 stubs, never `Any`, and the stubs (a dev dependency)
are imported under TYPE_CHECKING only, so the Lambda asset never needs them."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "functions" / "training_guard"
CHECKED = [*sorted((PACKAGE / "adapters").glob("*.py")), PACKAGE / "handlers" / "wiring.py"]
# Parameters that take a client by its service's name (`PriceList(pricing=..., dynamodb=...)`) are clients too.
SERVICES = ("cloudwatch", "dynamodb", "pricing", "sagemaker", "secretsmanager", "sns", "sqs", "sts")


def is_client(name: str) -> bool:
    return name == "client" or name.endswith("_client") or name in SERVICES


def mentions_any(annotation: ast.expr | None) -> bool:
    """`Any`, `typing.Any`, `Any | None`, `Callable[[], Any]`, or the same as a string."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return mentions_any(ast.parse(annotation.value, mode="eval").body)
    return any(
        (isinstance(node, ast.Name) and node.id == "Any") or (isinstance(node, ast.Attribute) and node.attr == "Any")
        for node in ast.walk(annotation)
    )


def is_overload(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "overload" for d in node.decorator_list)


def untyped_clients(source: str) -> Iterator[str]:
    """`line: what` for each client parameter, or client-making function's result, annotated with Any."""
    tree = ast.parse(source)
    for scope in ast.walk(tree):
        body = getattr(scope, "body", None)
        if not isinstance(body, list):
            continue
        overloaded = {n.name for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and is_overload(n)}
        for node in body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            arguments = node.args
            for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
                if is_client(arg.arg) and mentions_any(arg.annotation):
                    yield f"{arg.lineno}: parameter {arg.arg} of {node.name}"
            # An overload's implementation is typed by its overloads; any other client maker names its client.
            if is_client(node.name) and node.name not in overloaded and mentions_any(node.returns):
                yield f"{node.lineno}: result of {node.name}"


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: p.name)
def test_no_adapter_takes_or_makes_a_client_typed_any(path: Path) -> None:
    assert list(untyped_clients(path.read_text(encoding="utf-8"))) == []


def test_the_check_sees_every_way_a_client_was_typed_any() -> None:
    source = (
        "def make_client() -> Any: ...\n"
        "class Jobs:\n"
        "    def __init__(self, client: Any, table: str) -> None: ...\n"
        "def read(dynamodb: 'Any | None' = None, *, sts_client: typing.Any) -> None: ...\n"
        "def cache(pricing_factory: Callable[[], Any], item: Any) -> None: ...\n"
        "@overload\n"
        "def client(service: Literal['sqs']) -> SQSClient: ...\n"
        "def client(service: str) -> Any: ...\n"
    )
    assert list(untyped_clients(source)) == [
        "1: result of make_client",
        "4: parameter dynamodb of read",
        "4: parameter sts_client of read",
        "3: parameter client of __init__",
    ]


def test_the_stubs_are_imported_for_type_checking_only() -> None:
    """A mypy_boto3 import outside `if TYPE_CHECKING:` would fail in Lambda: the asset does not carry the stubs."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
            for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(name.startswith("mypy_boto3") for name in names):
                found.append((path.relative_to(PACKAGE).as_posix(), id(node) in guarded))
    assert found  # the adapters do import them
    assert [where for where, guarded in found if not guarded] == []
