"""Installs uv at an exact version into an environment kept with the caches (the Makefile's $(UV_PIN) target).

    python tools/install_uv.py ENV VERSION

The environment is made once per machine (its path names the uv version and the Python): two clones making it at
once take a lock, and the second finds it made. A marker written last (`.uv-VERSION-installed`) says it is whole: an
install cut short (killed, disk full) is made again by the next run, and the Makefile's uv target is that marker, so
a new UV_VERSION installs the new uv in a checkout that has the old one.
Standard library only: this runs before any environment exists.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path


def marker(env: Path, version: str) -> Path:
    """Written last by `install`: the environment's uv is whole, at `version` (the Makefile's prerequisite)."""
    return env / f".uv-{version}-installed"


def installed(env: Path, version: str) -> bool:
    """uv is in the environment, whole (an install cut short leaves no marker), at the pinned version."""
    return marker(env, version).exists() and os.access(env / "bin" / "uv", os.X_OK)


def pip_installs_elsewhere() -> bool:
    """This Python's pip can install into another environment (pip --python, 22.3 or newer)."""
    try:
        version = importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        return False
    numbers = re.match(r"(\d+)\.(\d+)", version)  # "24.1b1" is 24.1
    return numbers is not None and (int(numbers[1]), int(numbers[2])) >= (22, 3)


def install(env: Path, version: str) -> None:
    print(f"==> installing uv {version} into {env}", flush=True)
    shutil.rmtree(env, ignore_errors=True)
    quiet = ["install", "--quiet", "--disable-pip-version-check", f"uv=={version}"]
    if pip_installs_elsewhere():
        # a venv made without pip, filled by this Python's pip: seeding the venv with pip (ensurepip) took 9 of the
        # 13 s this step took on a 2-core machine
        venv.create(env, with_pip=False, symlinks=True)
        command = [sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), *quiet]
    else:
        venv.create(env, with_pip=True, symlinks=True)
        command = [str(env / "bin" / "python"), "-m", "pip", *quiet]
    subprocess.run(command, check=True)  # noqa: S603 - pip, from this Python or the new environment
    shown = subprocess.run(  # noqa: S603 - the environment's own uv
        [str(env / "bin" / "uv"), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()
    if shown[1:2] != [version]:
        raise RuntimeError(f"{env / 'bin' / 'uv'} says it is {' '.join(shown)}, not uv {version}")
    marker(env, version).touch()


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """An exclusive lock on `path` (released when it closes); on a file system without locks, none."""
    with open(path, "a") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX)
        except OSError as refused:
            print(f"no lock on {path} ({refused}): going on without it", file=sys.stderr)
        yield


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: install_uv.py ENV VERSION", file=sys.stderr)
        return 2
    env, version = Path(argv[0]), argv[1]
    if installed(env, version):
        return 0
    env.parent.mkdir(parents=True, exist_ok=True)
    with locked(f"{env}.lock"):
        if not installed(env, version):
            try:
                install(env, version)
            except (OSError, subprocess.CalledProcessError, RuntimeError) as failed:
                print(f"installing uv {version} into {env} failed: {failed}", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
