"""Installs uv at an exact version into an environment kept with the caches (the Makefile's $(UV) target).

    python tools/install_uv.py ENV VERSION

The environment is made once per machine (its path names the uv version and the Python): two clones making it at
once take a lock, and the second finds it made. Standard library only: this runs before any environment exists.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import shutil
import subprocess
import sys
import venv
from pathlib import Path


def installed(env: Path, version: str) -> bool:
    """uv is in the environment, at the pinned version."""
    uv = env / "bin" / "uv"
    if not uv.exists():
        return False
    shown = subprocess.run(  # noqa: S603 - the environment's own uv
        [str(uv), "--version"], capture_output=True, text=True, check=False
    ).stdout.split()
    return shown[1:2] == [version]


def pip_installs_elsewhere() -> bool:
    """This Python's pip can install into another environment (pip --python, 22.3 or newer)."""
    try:
        version = importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        return False
    return tuple(int(part) for part in version.split(".")[:2]) >= (22, 3)


def install(env: Path, version: str) -> None:
    print(f"==> installing uv {version} into {env}", flush=True)
    shutil.rmtree(env, ignore_errors=True)
    quiet = ["install", "--quiet", "--disable-pip-version-check", f"uv=={version}"]
    if pip_installs_elsewhere():
        # a venv made without pip, filled by this Python's pip: seeding the venv with pip (ensurepip) took 9 of the
        # 13 s this step took on a 2-core machine
        venv.create(env, with_pip=False)
        command = [sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), *quiet]
    else:
        venv.create(env, with_pip=True)
        command = [str(env / "bin" / "python"), "-m", "pip", *quiet]
    subprocess.run(command, check=True)  # noqa: S603 - pip, from this Python or the new environment


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: install_uv.py ENV VERSION", file=sys.stderr)
        return 2
    env, version = Path(argv[0]), argv[1]
    if installed(env, version):
        return 0
    env.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{env}.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        if not installed(env, version):
            try:
                install(env, version)
            except subprocess.CalledProcessError as failed:
                print(
                    f"installing uv {version} failed (exit {failed.returncode}): see pip's output above",
                    file=sys.stderr,
                )
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
