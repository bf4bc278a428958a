"""The demo's synthesized templates, kept between runs.

Synthesizing boots the CDK's JavaScript runtime (jsii) and loads the construct library into it: about 10 s of a
2-core machine for the first synthesis in a process, most of a demo's set-up, paid again by every `make demo` and
every test that runs the demo in a process of its own. The templates depend only on what `key` hashes: the app's
sources (infra/, the function code the assets are made of, this module and the demo's synthesis), the context the
demo synthesizes with (the scenario's configuration), the CDK's library versions, the Python version and the
`CDK_*` environment. A template is reused only for the same key, so a change to any of them synthesizes again.

The cache is a folder of JSON files, one per key: `$TRAINING_GUARD_TEMPLATE_CACHE` if set (`off` turns it off), else
`$XDG_CACHE_HOME/training-guard/templates` (`~/.cache/...`), outside the checkout as uv's and mypy's caches are, so a
fresh clone of the same sources reuses them. It is only ever a shortcut: an unreadable, corrupt or unwritable cache
means synthesizing, never a failure.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

CACHE_ENV = "TRAINING_GUARD_TEMPLATE_CACHE"
OFF = "off"
_LIBRARIES = ("aws-cdk-lib", "constructs")
_SKIPPED_PARTS = frozenset({"__pycache__"})


def sources() -> list[Path]:
    """The folders and files synthesis reads: the CDK app, the function code (assets, the configuration layer), the
    demo's synthesis and this module."""
    here = Path(__file__).resolve().parent
    return [
        _folder_of("infra.app"),  # infra/: found, not imported (importing it boots jsii, what the cache saves)
        _folder_of("training_guard.contract"),  # functions/training_guard/
        here / "demo.py",
        here / "template_cache.py",
    ]


def _folder_of(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(module)
    return Path(spec.origin).resolve().parent


def _files(roots: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for root in roots:
        if root.is_file():
            found.append(root)
            continue
        found += sorted(p for p in root.rglob("*") if p.is_file() and not _SKIPPED_PARTS & set(p.parts))
    return found


def _version(library: str) -> str:
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return "-"


def key(context: Mapping[str, Any], roots: Iterable[Path] | None = None, env: Mapping[str, str] | None = None) -> str:
    """The hash of everything a template depends on (see the module's docstring)."""
    env = os.environ if env is None else env
    digest = hashlib.sha256()
    digest.update(json.dumps(context, sort_keys=True, separators=(",", ":")).encode())
    digest.update(repr(sys.version_info[:2]).encode())
    for library in _LIBRARIES:
        digest.update(f"\0{library}={_version(library)}".encode())
    for name in sorted(k for k in env if k.startswith("CDK_")):
        digest.update(f"\0{name}={env[name]}".encode())
    for path in _files(sources() if roots is None else roots):
        digest.update(f"\0{path.name}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:32]


def shown(path: Path) -> str:
    """`path` as the demo prints it: the home folder as ~."""
    try:
        return f"~/{path.relative_to(Path.home())}"
    except ValueError:
        return str(path)


def folder(env: Mapping[str, str] | None = None) -> Path | None:
    """Where the templates are kept; None: the cache is off."""
    env = os.environ if env is None else env
    chosen = env.get(CACHE_ENV)
    if chosen == OFF:
        return None
    if chosen:
        return Path(chosen)
    return project_cache(env) / "templates"


def project_cache(env: Mapping[str, str] | None = None) -> Path:
    """The project's folder of machine caches, outside any checkout (as uv's and mypy's are):
    `$XDG_CACHE_HOME/training-guard`, else `~/.cache/training-guard`."""
    env = os.environ if env is None else env
    return Path(env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "training-guard"


def load(where: Path | None, name: str) -> list[Any] | None:
    """The stored value under `name`, or None (off, missing, unreadable or not what `store` wrote)."""
    if where is None:
        return None
    try:
        value = json.loads((where / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, list) else None


def store(where: Path | None, name: str, value: list[Any]) -> Path | None:
    """Keep `value` under `name` (written whole, then renamed: a reader never sees half a file). The path, or None
    when the cache is off or cannot be written."""
    if where is None:
        return None
    written: str | None = None
    try:
        where.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=where, suffix=".tmp", delete=False) as out:
            written = out.name
            json.dump(value, out, separators=(",", ":"))
        target = where / f"{name}.json"
        os.replace(written, target)
    except OSError:
        if written is not None:
            Path(written).unlink(missing_ok=True)
        return None
    return target
