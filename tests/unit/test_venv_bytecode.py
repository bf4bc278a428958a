"""tools/venv_bytecode.py: a new clone's .venv starts with the bytecode an earlier run compiled, and it is used."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import load_tool

venv_bytecode = load_tool("venv_bytecode")
SOURCE = "def answer():\n    return 42\n"
INIT_MTIME = 1_780_000_000


def make_venv(root: Path, source_file: Path) -> Path:
    """A venv-shaped directory whose package's source is a hard link to `source_file`, as uv links from its cache."""
    package = root / "lib" / "python3.11" / "site-packages" / "pkg"
    package.mkdir(parents=True)
    os.link(source_file, package / "mod.py")
    init = package / "__init__.py"
    init.write_text("")
    # one mtime in every venv, as uv's links from its cache share theirs: a .pyc records its source's mtime in whole
    # seconds, so venvs made a second apart would otherwise disagree about __init__ and the counts below would flake
    os.utime(init, (INIT_MTIME, INIT_MTIME))
    return root


def import_in(venv: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """`pkg.mod` imported from `venv` by a new Python, which reports where its code says it came from."""
    site = venv_bytecode.site_packages(venv)
    program = "import pkg.mod as m; print(m.answer(), m.answer.__code__.co_filename)"
    return subprocess.run(
        [sys.executable, *flags, "-c", program],
        env={**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": ""},
        capture_output=True,
        text=True,
        check=True,
    )


@pytest.fixture
def cached_source(tmp_path: Path) -> Path:
    source = tmp_path / "uv-cache-mod.py"
    source.write_text(SOURCE)
    return source


def test_a_second_venv_gets_the_first_ones_bytecode_and_python_uses_it(tmp_path: Path, cached_source: Path) -> None:
    first = make_venv(tmp_path / "clone-a" / ".venv", cached_source)
    store = tmp_path / "store"
    assert "42" in import_in(first).stdout  # compiles and writes the bytecode
    assert venv_bytecode.save(first, store) == 2  # pkg/__init__ and pkg/mod
    assert venv_bytecode.save(first, store) == 0  # already kept

    second = make_venv(tmp_path / "clone-b" / ".venv", cached_source)
    assert venv_bytecode.restore(second, store) == 2
    compiled = venv_bytecode.site_packages(second) / "pkg" / "__pycache__" / f"mod.{sys.implementation.cache_tag}.pyc"
    assert compiled.exists()
    kept = os.stat(compiled)
    ran = import_in(second, "-v")  # -v names each module loaded from a .pyc ("matches" the source)
    assert f"matches {venv_bytecode.site_packages(second) / 'pkg' / 'mod.py'}" in ran.stderr
    assert ran.stdout.split() == ["42", str(venv_bytecode.site_packages(second) / "pkg" / "mod.py")]  # its own path
    assert os.stat(compiled).st_ino == kept.st_ino  # used as it was, not written again


def test_a_stale_kept_file_is_compiled_again_and_the_store_keeps_the_new_one(
    tmp_path: Path, cached_source: Path
) -> None:
    first = make_venv(tmp_path / "a" / ".venv", cached_source)
    store = tmp_path / "store"
    import_in(first)
    venv_bytecode.save(first, store)

    firsts = venv_bytecode.site_packages(first) / "pkg" / "__pycache__" / f"mod.{sys.implementation.cache_tag}.pyc"
    before = (os.stat(firsts).st_ino, firsts.read_bytes())

    changed = tmp_path / "changed-mod.py"
    changed.write_text(SOURCE.replace("42", "43") + "# longer\n")
    second = make_venv(tmp_path / "b" / ".venv", changed)
    assert venv_bytecode.restore(second, store) == 2
    assert import_in(second).stdout.startswith("43")  # the kept .pyc of "42" is not used
    assert venv_bytecode.save(second, store) == 1  # the new mod's bytecode replaces the stale one
    assert (os.stat(firsts).st_ino, firsts.read_bytes()) == before  # the first clone's file is never written into
    assert not [p for p in store.rglob("*") if p.name.endswith(".tmp")]
    third = make_venv(tmp_path / "c" / ".venv", changed)
    venv_bytecode.restore(third, store)
    assert "matches" in import_in(third, "-v").stderr


def test_packages_the_venv_lacks_and_files_it_has_are_left_alone(tmp_path: Path, cached_source: Path) -> None:
    store = tmp_path / "store"
    (store / "gone" / "__pycache__").mkdir(parents=True)
    (store / "gone" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"kept")
    (store / "pkg" / "__pycache__").mkdir(parents=True)
    (store / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"kept")
    (store / "pkg" / "__pycache__" / "mod.cpython-311.pyc.12345").write_bytes(b"half")  # a rename's temporary
    venv = make_venv(tmp_path / ".venv", cached_source)
    (venv_bytecode.site_packages(venv) / "pkg" / "__pycache__").mkdir()
    own = venv_bytecode.site_packages(venv) / "pkg" / "__pycache__" / "mod.cpython-311.pyc"
    own.write_bytes(b"own")
    assert venv_bytecode.restore(venv, store) == 0
    assert own.read_bytes() == b"own"
    assert not (venv_bytecode.site_packages(venv) / "gone").exists()


def test_a_store_that_cannot_be_written_costs_the_run_nothing(
    tmp_path: Path, cached_source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = make_venv(tmp_path / ".venv", cached_source)
    import_in(venv)
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert venv_bytecode.main(["save", str(venv), str(blocked / "store")]) == 0
    assert "venv_bytecode save: " in capsys.readouterr().err
    store = tmp_path / "store"
    (store / "pkg").mkdir(parents=True)
    (store / "pkg" / "__pycache__").write_text("a file where the folder goes")  # one file cannot be kept
    assert venv_bytecode.save(venv, store) == 0
    assert "(not kept)" in capsys.readouterr().err
    assert venv_bytecode.main(["restore", str(venv), str(tmp_path / "none")]) == 0
    assert venv_bytecode.main(["keep", str(venv), str(tmp_path)]) == 2


def test_a_store_on_another_file_system_is_copied_to_once(
    tmp_path: Path, cached_source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = make_venv(tmp_path / ".venv", cached_source)
    import_in(venv)
    store = tmp_path / "store"

    def cross_device(source: object, target: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(venv_bytecode.os, "link", cross_device)
    assert venv_bytecode.save(venv, store) == 2
    kept = store / "pkg" / "__pycache__" / f"mod.{sys.implementation.cache_tag}.pyc"
    compiled = venv_bytecode.site_packages(venv) / "pkg" / "__pycache__" / kept.name
    assert kept.read_bytes() == compiled.read_bytes()
    assert os.stat(kept).st_ino != os.stat(compiled).st_ino  # a copy
    assert venv_bytecode.save(venv, store) == 0  # the same bytecode of the same source: not copied again
    monkeypatch.undo()
    again = make_venv(tmp_path / "again" / ".venv", cached_source)
    assert venv_bytecode.restore(again, store) == 2
    assert "matches" in import_in(again, "-v").stderr


def test_a_temporary_name_another_process_holds_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source, target = tmp_path / "new.pyc", tmp_path / "m.pyc"
    source.write_bytes(b"new")
    target.write_bytes(b"old")
    taken = tmp_path / "m.pyc.0000.tmp"
    os.link(tmp_path / "m.pyc", taken)  # e.g. another clone's file, linked under that name
    monkeypatch.setattr(venv_bytecode.secrets, "token_hex", lambda _: "0000")
    with pytest.raises(FileExistsError):
        venv_bytecode.link(source, target)
    assert taken.read_bytes() == b"old"
    assert target.read_bytes() == b"old"


def test_the_editable_projects_finder_and_a_missing_venv_are_not_kept(tmp_path: Path, cached_source: Path) -> None:
    venv = make_venv(tmp_path / ".venv", cached_source)
    site = venv_bytecode.site_packages(venv)
    (site / "__pycache__").mkdir()
    (site / "__pycache__" / "__editable___training_guard_0_1_0_finder.cpython-311.pyc").write_bytes(b"clone's path")
    store = tmp_path / "store"
    assert venv_bytecode.save(venv, store) == 0
    assert not (store / "__pycache__").exists()
    assert venv_bytecode.save(tmp_path / "no-venv", store) == 0
    assert venv_bytecode.restore(tmp_path / "no-venv", store) == 0


def test_a_save_removes_the_other_stores_unused_for_thirty_days(tmp_path: Path, cached_source: Path) -> None:
    cache = tmp_path / "cache"
    now = time.time()
    current, old, recent, unmarked = (f"bytecode-{n:016x}" for n in range(4))
    ages = {current: 40, old: 40, recent: 10, unmarked: 45, "checkov-abc": 90, "bytecode-mine": 90, "templates": 90}
    for name, days in ages.items():
        (cache / name).mkdir(parents=True)
        if name != unmarked:
            (cache / name / ".used").touch()
            os.utime(cache / name / ".used", (now - days * 86400,) * 2)
        os.utime(cache / name, (now - days * 86400,) * 2)
    venv = make_venv(tmp_path / ".venv", cached_source)
    venv_bytecode.save(venv, cache / current)
    # the saved-to store is marked used and kept; of the others, only stores named as the Makefile names them go
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [current, recent, "checkov-abc", "bytecode-mine", "templates"]
    )
    assert (cache / current / ".used").stat().st_mtime > now - 60
    venv_bytecode.restore(venv, cache / recent)  # a restore marks its store used
    assert not venv_bytecode.prune(cache / current, now=now + 25 * 86400)
    assert not venv_bytecode.prune(cache / "bytecode-mine", now=now + 90 * 86400)  # not a store the Makefile names


def test_a_store_that_cannot_be_marked_used_is_still_restored(
    tmp_path: Path, cached_source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = make_venv(tmp_path / "a" / ".venv", cached_source)
    store = tmp_path / f"bytecode-{0:016x}"
    import_in(first)
    venv_bytecode.save(first, store)

    def refused(self: Path, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(self))  # another user's store (root is never refused)

    monkeypatch.setattr(Path, "touch", refused)
    second = make_venv(tmp_path / "b" / ".venv", cached_source)
    assert venv_bytecode.restore(second, store) == 2
    assert "matches" in import_in(second, "-v").stderr
