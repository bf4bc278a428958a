"""No code of ours patches moto or botocore: no attribute of a module or class imported from them is assigned, deleted
or patched (`X.a = ...`, `setattr(X, ...)`, `mock.patch.object(X, ...)`, `monkeypatch.setattr(X, ...)`,
`mock.patch("moto....")`). What the emulation adds goes through botocore's events (local/training_guard_local/answers.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("local", "tests", "bench", "functions")
PATCHED = ("moto", "botocore")
PATCHERS = {"setattr", "delattr", "object", "multiple"}  # setattr(X, ...), monkeypatch.setattr, mock.patch.object


def _from_patched(module: str) -> bool:
    return module.partition(".")[0] in PATCHED


def imported_names(tree: ast.AST) -> set[str]:
    """The names the file binds to a module or a class imported from moto or botocore (at any depth)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names if _from_patched(alias.name)}
        elif isinstance(node, ast.ImportFrom) and not node.level and _from_patched(node.module or ""):
            names |= {alias.asname or alias.name for alias in node.names}
    aliases = [  # `B = models.SageMakerModelBackend`: B is that class too (a subscript or a call is data)
        (target.id, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute | ast.Name)
        for target in node.targets
        if isinstance(target, ast.Name)
    ]
    while new := {name for name, value in aliases if name not in names and _dotted_root(value) in names}:
        names |= new
    return names


def _dotted_root(node: ast.expr) -> str | None:
    """`a` for `a`, `a.b`, `a.b.c`: a name reached through attributes only (no call, no subscript: not data)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _targets(node: ast.AST) -> Iterator[ast.expr]:
    if isinstance(node, ast.Assign):
        pending = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        pending = [node.target]
    elif isinstance(node, ast.Delete):
        pending = list(node.targets)
    else:
        return
    while pending:
        target = pending.pop()
        if isinstance(target, ast.Tuple | ast.List):
            pending += target.elts
        else:
            yield target


def patches(source: str, filename: str = "<source>") -> list[str]:
    """Each place of `source` that replaces an attribute of moto's or botocore's modules or classes."""
    tree = ast.parse(source, filename)
    names = imported_names(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        for target in _targets(node):
            if isinstance(target, ast.Attribute) and _dotted_root(target.value) in names:
                found.append(f"{filename}:{target.lineno}: {ast.unparse(target)}")
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        first = node.args[0]
        on_patched = _dotted_root(first) in names
        by_path = isinstance(first, ast.Constant) and isinstance(first.value, str) and _from_patched(first.value)
        if (called in PATCHERS and on_patched) or (called in {"patch", "setattr", "delattr"} and by_path):
            found.append(f"{filename}:{node.lineno}: {ast.unparse(node)[:100]}")
    return found


def python_files() -> Iterator[Path]:
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if ".venv" not in path.parts and "node_modules" not in path.parts:
                yield path


def test_no_module_patches_moto_or_botocore() -> None:
    sources = ((path, path.read_text(encoding="utf-8")) for path in python_files())
    # a patch names what it patches: a file that never says moto or botocore holds none (and is not parsed)
    found = [
        hit
        for path, source in sources
        if "moto" in source or "botocore" in source
        for hit in patches(source, str(path.relative_to(ROOT)))
    ]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "from moto.sagemaker import models as m\nm.SageMakerModelBackend.stop = f",
        "from moto.sts.models import STSBackend\nSTSBackend.assume_role = f",
        "import moto.cloudwatch.responses\nmoto.cloudwatch.responses.CloudWatchResponse.x = f",
        "import botocore.client as c\nc.BaseClient._make_api_call = f",
        "from moto.events.utils import EventTemplateParser as P\nP.A, x = 1, 2",
        "from moto.sagemaker import models as m\nB = m.SageMakerModelBackend\nC = B\nC.stop = f",
        "from moto.sagemaker import models as m\nsetattr(m.SageMakerModelBackend, 'stop', f)",
        "from moto.sagemaker import models as m\ndel m.SageMakerModelBackend.stop",
        "from unittest import mock\nfrom moto.events import models as e\nmock.patch.object(e.Rule, 'send', f)",
        "def t(monkeypatch):\n    from botocore import endpoint\n    monkeypatch.setattr(endpoint.Endpoint, 'x', 1)",
        "from unittest import mock\nmock.patch('moto.sts.models.STSBackend.assume_role', f)",
        "def t(monkeypatch):\n    monkeypatch.setattr('botocore.client.BaseClient.x', 1)",
    ],
)
def test_the_check_finds_each_kind_of_patch(source: str) -> None:
    assert len(patches(source)) == 1, source


@pytest.mark.parametrize(
    "source",
    [
        # moto's data is state, not code: a job's status, a backend's jobs
        "from moto.sagemaker import models as m\nm.sagemaker_backends['1']['r'].training_jobs['j'].status = 'x'",
        "from moto.sagemaker import models as m\njob = m.sagemaker_backends['1']['r'].training_jobs['j']\njob.status = 'x'",
        "import boto3\nboto3.DEFAULT_SESSION = None",  # boto3's own default session, a documented setting
        "from training_guard.adapters import clock\nclock.utcnow = f",
        "from unittest import mock\nimport os\nmock.patch.dict(os.environ, {})",
    ],
)
def test_the_check_lets_data_and_our_own_modules_be(source: str) -> None:
    assert patches(source) == [], source
