"""tools/install_uv.py: uv made once per machine, at the pinned version, one clone at a time."""

from __future__ import annotations

import fcntl
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import load_tool

install_uv = load_tool("install_uv")


def fake_uv(env: Path, version: str, *, whole: bool = True) -> None:
    (env / "bin").mkdir(parents=True, exist_ok=True)
    uv = env / "bin" / "uv"
    uv.write_text(f"#!/bin/sh\necho 'uv {version} (fake)'\n")
    uv.chmod(0o755)
    if whole:
        install_uv.marker(env, version).touch()


def test_uv_counts_as_installed_only_whole_and_at_the_pinned_version(tmp_path: Path) -> None:
    env = tmp_path / "uv-env"
    assert not install_uv.installed(env, "0.13.9")
    fake_uv(env, "0.13.9", whole=False)  # an install cut short: no marker
    assert not install_uv.installed(env, "0.13.9")
    fake_uv(env, "0.13.9")
    assert install_uv.installed(env, "0.13.9")
    assert not install_uv.installed(env, "0.13.10")
    (env / "bin" / "uv").chmod(0o644)  # written, not yet made executable
    assert not install_uv.installed(env, "0.13.9")


def test_install_writes_its_marker_last_and_only_for_the_version_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = tmp_path / "uv-env"
    said = {"version": "0.13.9"}

    def run(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        if command[-1] == "--version":
            return subprocess.CompletedProcess(command, 0, stdout=f"uv {said['version']} (x86_64-unknown-linux-gnu)\n")
        assert not install_uv.marker(env, "0.13.9").exists()  # pip runs before the marker exists
        fake_uv(env, said["version"], whole=False)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(install_uv.venv, "create", lambda path, **_: Path(path).mkdir(parents=True))
    monkeypatch.setattr(install_uv.subprocess, "run", run)
    install_uv.install(env, "0.13.9")
    assert install_uv.installed(env, "0.13.9")

    said["version"] = "0.13.8"  # pip installed something else
    with pytest.raises(RuntimeError, match=r"says it is uv 0\.13\.8"):
        install_uv.install(env, "0.13.9")
    assert not install_uv.installed(env, "0.13.9")


@pytest.mark.parametrize(("pip", "elsewhere"), [("22.2.2", False), ("22.3", True), ("24.1b1", True), ("dev", False)])
def test_pips_own_version_decides_how_uv_is_installed(
    monkeypatch: pytest.MonkeyPatch, pip: str, elsewhere: bool
) -> None:
    monkeypatch.setattr(install_uv.importlib.metadata, "version", lambda _: pip)
    assert install_uv.pip_installs_elsewhere() is elsewhere


def test_a_second_clone_waits_for_the_first_and_then_finds_uv_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = tmp_path / "cache" / "uv-env"
    made: list[Path] = []

    def install(env: Path, version: str) -> None:
        made.append(env)
        fake_uv(env, version)

    monkeypatch.setattr(install_uv, "install", install)
    env.parent.mkdir(parents=True)
    with open(f"{env}.lock", "a") as first:  # the first clone, installing
        fcntl.flock(first, fcntl.LOCK_EX)
        second = threading.Thread(target=install_uv.main, args=([str(env), "0.13.9"],))
        second.start()
        time.sleep(0.2)
        assert second.is_alive()  # waiting on the lock
        assert not made
        fake_uv(env, "0.13.9")  # the first one's uv
    second.join(timeout=5)
    assert not second.is_alive()
    assert made == []  # found made under the lock: not installed again
    assert install_uv.main([str(env), "0.13.9"]) == 0


def test_another_version_is_installed_over_the_old_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = tmp_path / "uv-env"
    fake_uv(env, "0.13.8")
    made: list[str] = []
    monkeypatch.setattr(install_uv, "install", lambda env, version: made.append(version))
    assert install_uv.main([str(env), "0.13.9"]) == 0
    assert made == ["0.13.9"]


def test_a_failed_install_says_so_and_exits_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail(env: Path, version: str) -> None:
        raise install_uv.subprocess.CalledProcessError(1, ["pip"])

    monkeypatch.setattr(install_uv, "install", fail)
    assert install_uv.main([str(tmp_path / "uv-env"), "0.13.9"]) == 1
    assert "installing uv 0.13.9 into" in capsys.readouterr().err
    assert install_uv.main([]) == 2
