"""Lambda code bundled without Docker.

The asset holds the `training_guard` package and the pure-Python runtime dependencies listed in
`functions/requirements.txt`, copied from the installed (pinned) distributions: no network, no
Docker, identical on every machine. A dependency with compiled code is refused with a message
(it would need `pip install --platform manylinux2014_aarch64 --only-binary=:all:`). Powertools
and boto3 are not bundled: they come from the pinned public Powertools layer and the runtime.

Bytecode: Lambda cannot write `__pycache__` into /var/task, so an asset without bytecode is
compiled again at every cold start (about 35 ms for this package and slack_sdk, measured by
`make bench`). When an interpreter of the runtime's exact minor version is on this machine, the
asset ships hash-checked bytecode compiled by it; otherwise it ships source only and says so.

No CDK here: `make bench` and its tests bundle without booting jsii. The asset's CDK side (`function_code`, the
local bundler jsii calls) is in `infra/components/functions.py`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

RUNTIME_PYTHON = "3.13"  # the functions' runtime; bytecode must come from the same minor version
FUNCTIONS_DIR = Path(__file__).resolve().parent.parent / "functions"
PACKAGE = "training_guard"
REQUIREMENTS = FUNCTIONS_DIR / "requirements.txt"
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyi", "py.typed", "README.md")
# Top-level packages some distributions ship that the functions never import:
# slack_sdk also installs `slack`, its deprecated pre-3.0 alias.
_UNUSED_TOP_LEVEL = frozenset({"slack"})


class BundlingError(RuntimeError):
    pass


def requirements(path: Path = REQUIREMENTS) -> list[tuple[str, str]]:
    """(name, version) pairs from a file of `name==version` lines."""
    pins = []
    for raw in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.\-+]+)", line)
        if not match:
            raise BundlingError(f"{path}: {line!r} is not pinned as name==version")
        pins.append((match.group(1), match.group(2)))
    return pins


def copy_distribution(name: str, version: str, target: Path) -> None:
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise BundlingError(f"{name}=={version} is not installed; run `make install`") from None
    if dist.version != version:
        raise BundlingError(f"{name} {dist.version} is installed but {REQUIREMENTS.name} pins {version}")
    wheel = dist.read_text("WHEEL") or ""
    if "Root-Is-Purelib: true" not in wheel:
        raise BundlingError(f"{name} has compiled code; bundle it with pip --platform manylinux2014_aarch64")
    for file in dist.files or []:
        parts = file.parts
        if parts[0].endswith((".dist-info", ".data")) or parts[0] in ("..", "bin", *_UNUSED_TOP_LEVEL):
            continue
        if "__pycache__" in parts or source_is_stub(parts[-1]):
            continue
        source = Path(str(dist.locate_file(file)))
        if source.suffix == ".pyc" or not source.is_file():
            continue
        destination = target / Path(*parts)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)


def source_is_stub(name: str) -> bool:
    return name.endswith(".pyi") or name == "py.typed"


def bytecode_compiler(version: str = RUNTIME_PYTHON) -> str | None:
    """An interpreter of exactly `version` on this machine (PATH, then pyenv), or None."""
    candidates = [shutil.which(f"python{version}")]
    candidates += [str(p) for p in sorted(Path.home().glob(f".pyenv/versions/{version}*/bin/python{version}"))]
    for candidate in filter(None, candidates):
        try:
            found = subprocess.run(  # noqa: S603 - an interpreter found on this machine, a fixed snippet
                [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if found == version:
            return candidate
    return None


def compile_bytecode(output_dir: Path, compiler: str | None) -> bool:
    if compiler is None:
        print(
            f"note: no Python {RUNTIME_PYTHON} on this machine; the Lambda asset ships source only "
            "(cold starts compile it, about 35 ms more)",
            file=sys.stderr,
        )
        return False
    subprocess.run(  # noqa: S603 - the interpreter found above, compiling our own asset
        [compiler, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", str(output_dir)],
        check=True,
    )
    return True


def bundle(output_dir: Path, *, compiler: str | None = None, bytecode: bool = True) -> bool:
    """Fill `output_dir` with the asset; True when it holds bytecode for the runtime."""
    shutil.copytree(FUNCTIONS_DIR / PACKAGE, output_dir / PACKAGE, ignore=_IGNORED, dirs_exist_ok=True)
    for name, version in requirements():
        copy_distribution(name, version, output_dir)
    return bytecode and compile_bytecode(output_dir, compiler or bytecode_compiler())
