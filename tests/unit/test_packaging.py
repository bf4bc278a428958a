"""The wheel holds every package of the source tree: the editable install used by `make` hides a package missing
from `[tool.setuptools] packages` (it imports from the folders), a built wheel would not."""

from __future__ import annotations

import ast
import functools
import importlib.util
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_of_the_tree_is_listed_for_the_wheel() -> None:
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(settings["packages"])
    roots = {name: ROOT / folder for name, folder in settings["package-dir"].items()} | {"infra": ROOT / "infra"}
    found = set(roots)  # each root is a package, with or without an __init__.py
    for name, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            relative = init.parent.relative_to(folder).parts
            found.add(".".join((name, *relative)))
    assert found == listed


def _aws_cdk_modules_checked() -> set[str]:
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    return {
        module
        for override in overrides
        if override.get("follow_imports") == "normal"
        for module in override["module"]
        if module.split(".")[0] == "aws_cdk"
    }


@functools.cache
def _aws_cdk_modules_imported() -> frozenset[str]:
    """Every aws_cdk module the code imports, whatever the form (`import aws_cdk.x`, `from aws_cdk import x`,
    parenthesized, `from aws_cdk.x import Y`); found without importing aws_cdk (that would start jsii)."""
    spec = importlib.util.find_spec("aws_cdk")
    assert spec is not None
    assert spec.submodule_search_locations
    package = Path(next(iter(spec.submodule_search_locations)))
    found: set[str] = set()
    for folder in ("functions", "infra", "local", "tests", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if "aws_cdk" not in text:  # no import of it, whatever the form (the parse is what costs)
                continue
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Import):
                    found.update(a.name for a in node.names if a.name.split(".")[0] == "aws_cdk")
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    parts = node.module.split(".")
                    if parts[0] != "aws_cdk":
                        continue
                    found.add(node.module)
                    found.update(
                        f"{node.module}.{a.name}" for a in node.names if package.joinpath(*parts[1:], a.name).is_dir()
                    )
    return frozenset(found)


def test_mypy_checks_every_aws_cdk_module_the_code_imports() -> None:
    """pyproject skips aws-cdk-lib's modules for mypy (Any) except those listed: a module imported but not listed
    would be unchecked without a word."""
    missing = _aws_cdk_modules_imported() - _aws_cdk_modules_checked()
    assert not missing, f"add to the follow_imports = normal list in pyproject.toml: {sorted(missing)}"


def test_the_import_scan_sees_the_aws_cdk_modules_the_stacks_use() -> None:
    assert "aws_cdk.aws_ec2" not in _aws_cdk_modules_checked()
    assert {"aws_cdk.aws_lambda", "aws_cdk.assertions", "aws_cdk"} <= _aws_cdk_modules_imported()
