"""The bytecode of .venv's packages, kept with the caches so that a new clone starts with it (the Makefile).

    python tools/venv_bytecode.py restore VENV STORE    after uv sync: the kept bytecode, linked into VENV
    python tools/venv_bytecode.py save VENV STORE       after a run: what the run compiled, linked into STORE
                                                        (and other bytecode-<hash> stores unused for 30 days
                                                        removed)

A new clone's .venv has the packages' sources (uv links them from its cache) and none of their bytecode: each process
of its first test run compiled what it imported (boto3, moto, aws-cdk-lib...; two pytest workers compiled the same
modules side by side), ~17 s of CPU on a 2-core machine. STORE is one per uv.lock and Python (the Makefile's key), a
mirror of site-packages' __pycache__ directories.

A kept file can never be wrong, only stale: Python checks each .pyc against its source's modification time and size
(which uv's links share with its cache) and compiles the source again when they differ, and it names the code after the
file it loaded it for (importlib's `_fix_co_filename`), not the clone that compiled it. Files are hard links, both ways
(copies when the store is on another file system): Python replaces a .pyc by renaming a new file over it and never
writes into one, and so does this (a link or copy made under a new name of its own, renamed over the old), so two
clones saving at once each leave a whole file and no clone's file is ever changed in place. Errors cost the run time,
never its result: a file that cannot be kept or restored is compiled when imported, as without a store.
Standard library only: a restore runs before the tests' environment is used.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

USED = ".used"  # touched by each restore and save
UNUSED_DAYS = 30
STORE_NAME = re.compile(r"bytecode-[0-9a-f]{16}")  # the Makefile's: bytecode-<hash of uv.lock and Python>


def site_packages(venv: Path) -> Path | None:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    return found[0] if len(found) == 1 else None  # none: no environment (yet), nothing to keep


def kept_files(root: Path) -> Iterator[Path]:
    """Every .pyc in a __pycache__ directory under `root`, relative to it: not a rename's temporary files, nor the
    bytecode of the finder uv writes for the editable project (its source names the clone's own folders)."""
    for directory, _, files in os.walk(root):
        if os.path.basename(directory) == "__pycache__":
            for name in files:
                if name.endswith(".pyc") and not name.startswith("__editable__"):
                    yield Path(directory, name).relative_to(root)


def same(a: Path, b: Path) -> bool:
    """The same file, or (a copy, across file systems) the same bytecode of the same source: a .pyc's 16-byte header
    holds its source's modification time and size."""
    if os.path.samefile(a, b):
        return True
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as one, open(b, "rb") as other:
        return one.read(16) == other.read(16)


def link(source: Path, target: Path) -> None:
    """`target` becomes `source`'s file, replaced whole: a hard link (or, across file systems, a copy) made under a
    name of its own that nothing else can hold, then renamed over it. Nothing is ever written into an existing file:
    a .pyc may be linked from other clones."""
    temporary = target.with_name(f"{target.name}.{secrets.token_hex(8)}.tmp")
    made = False  # a name already taken raises FileExistsError below: another's file is never touched
    try:
        try:
            os.link(source, temporary)
            made = True
        except OSError as refused:
            if refused.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                raise
            with open(temporary, "xb") as written:  # "x": a new file, never another's
                made = True
                with open(source, "rb") as read:
                    shutil.copyfileobj(read, written)
            shutil.copystat(source, temporary)
        os.replace(temporary, target)
        made = False
    finally:
        if made:  # ours, and not renamed: a copy cut short
            temporary.unlink(missing_ok=True)


def restore(venv: Path, store: Path) -> int:
    """Links each kept .pyc whose package is in the environment and which it does not have yet."""
    site = site_packages(venv)
    if site is None or not store.is_dir():
        return 0
    used(store)
    restored = 0
    for relative in kept_files(store):
        target = site / relative
        if not target.parent.parent.is_dir() or target.exists():  # a package this environment lacks, or has compiled
            continue
        try:
            target.parent.mkdir(exist_ok=True)
            link(store / relative, target)
        except OSError as failed:
            print(f"venv_bytecode restore: {failed} (compiled when imported)", file=sys.stderr)
            continue
        restored += 1
    return restored


def save(venv: Path, store: Path) -> int:
    """Links each .pyc of the environment that the store lacks or holds other bytecode for."""
    site = site_packages(venv)
    if site is None:
        return 0
    store.mkdir(parents=True, exist_ok=True)
    used(store)
    prune(store)
    saved = 0
    for relative in kept_files(site):
        kept = store / relative
        try:
            if kept.exists() and same(kept, site / relative):
                continue
            kept.parent.mkdir(parents=True, exist_ok=True)
            link(site / relative, kept)
        except OSError as failed:  # a file gone while walking, a folder another user made
            print(f"venv_bytecode save: {failed} (not kept)", file=sys.stderr)
            continue
        saved += 1
    return saved


def used(store: Path) -> None:
    """Marks the store used, if it can (a store another user made is read, never marked)."""
    with contextlib.suppress(OSError):
        (store / USED).touch()


def prune(store: Path, *, now: float | None = None) -> list[Path]:
    """Removes the other stores beside `store` unused for UNUSED_DAYS (one per uv.lock and Python that was): once the
    clones that shared one are gone, it holds the only copy of its files (~75 MB). Only stores named as the Makefile
    names them, beside a store so named, are ever removed; a store that was never marked is judged by its folder."""
    if not STORE_NAME.fullmatch(store.name):
        return []
    oldest = (time.time() if now is None else now) - UNUSED_DAYS * 86400
    removed = []
    for other in store.parent.iterdir():
        if other == store or not STORE_NAME.fullmatch(other.name) or other.is_symlink() or not other.is_dir():
            continue
        marker = other / USED
        try:
            last_used = (marker if marker.exists() else other).stat().st_mtime
        except OSError:
            continue
        if last_used < oldest:
            shutil.rmtree(other, ignore_errors=True)
            removed.append(other)
    return removed


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
