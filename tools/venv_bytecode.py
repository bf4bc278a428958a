"""The bytecode of .venv's packages, kept with the caches so that a new clone starts with it (the Makefile).

    python tools/venv_bytecode.py restore VENV STORE    after uv sync: the kept bytecode, linked into VENV
    python tools/venv_bytecode.py save VENV STORE       after a run: what the run compiled, linked into STORE

A new clone's .venv has the packages' sources (uv links them from its cache) and none of their bytecode: each process
of its first test run compiled what it imported (boto3, moto, aws-cdk-lib...; two pytest workers compiled the same
modules side by side), ~17 s of CPU on a 2-core machine. STORE is one per uv.lock and Python (the Makefile's key), a
mirror of site-packages' __pycache__ directories.

A kept file can never be wrong, only stale: Python checks each .pyc against its source's modification time and size
(which uv's links share with its cache) and compiles the source again when they differ, and it names the code after the
file it loaded it for (importlib's `_fix_co_filename`), not the clone that compiled it. Files are hard links, both ways:
Python replaces a .pyc by renaming a new file over it and never writes into one, and a save links a new file in under
a temporary name and renames it over the old, so two clones saving at once each leave a whole file.
Standard library only: a restore runs before the tests' environment is used.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if len(found) != 1:
        raise SystemExit(f"{venv}: expected one lib/python3*/site-packages, found {len(found)}")
    return found[0]


def kept_files(root: Path) -> Iterator[Path]:
    """Every .pyc in a __pycache__ directory under `root`, relative to it (a rename's temporary files excluded)."""
    for directory, _, files in os.walk(root):
        if os.path.basename(directory) == "__pycache__":
            for name in files:
                if name.endswith(".pyc"):
                    yield Path(directory, name).relative_to(root)


def link(source: Path, target: Path) -> None:
    """`target` becomes `source`'s file, replaced whole (a link under a temporary name, renamed over it)."""
    temporary = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        os.link(source, temporary)
    except OSError:  # another file system: a copy
        shutil.copy2(source, temporary)
    os.replace(temporary, target)


def restore(venv: Path, store: Path) -> int:
    """Links each kept .pyc whose package is in the environment and which it does not have yet."""
    site = site_packages(venv)
    restored = 0
    if not store.is_dir():
        return 0
    for relative in kept_files(store):
        target = site / relative
        if not target.parent.parent.is_dir() or target.exists():  # a package this environment lacks, or has compiled
            continue
        target.parent.mkdir(exist_ok=True)
        link(store / relative, target)
        restored += 1
    return restored


def save(venv: Path, store: Path) -> int:
    """Links each .pyc of the environment that the store lacks or holds another file for."""
    site = site_packages(venv)
    saved = 0
    for relative in kept_files(site):
        kept = store / relative
        if kept.exists() and os.path.samefile(kept, site / relative):
            continue
        kept.parent.mkdir(parents=True, exist_ok=True)
        link(site / relative, kept)
        saved += 1
    return saved


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in ("restore", "save"):
        print("usage: venv_bytecode.py restore|save VENV STORE", file=sys.stderr)
        return 2
    action, venv, store = argv[0], Path(argv[1]), Path(argv[2])
    try:
        (restore if action == "restore" else save)(venv, store)
    except OSError as failed:  # a cache that cannot be read or written costs time, never the run
        print(f"venv_bytecode {action}: {failed} (the bytecode is compiled as it is imported instead)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
