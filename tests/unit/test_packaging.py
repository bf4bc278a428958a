"""The wheel holds every package of the source tree: the editable install used by `make` hides a package missing
from `[tool.setuptools] packages` (it imports from the folders), a built wheel would not."""

from __future__ import annotations

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
