"""The Lambda asset is built without Docker and holds runtime code only."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import pytest

from infra import bundling


def zipped_size(folder: Path) -> int:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.tell()


def test_asset_holds_the_runtime_package_and_its_pinned_dependencies_only(tmp_path: Path) -> None:
    bundling.bundle(tmp_path, bytecode=False)
    top = sorted(p.name for p in tmp_path.iterdir())
    assert top == ["training_guard"]  # no CDK, moto, boto3, Powertools or slack_sdk (the standard library does Slack)
    files = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert "training_guard/handlers/job_events.py" in files
    assert "training_guard/handlers/slack_notifier.py" in files
    assert not any("__pycache__" in f or f.endswith((".pyc", ".pyi")) for f in files)
    assert zipped_size(tmp_path) < 2 * 1024 * 1024


def test_the_asset_ships_bytecode_for_the_runtime_when_a_matching_python_exists(tmp_path: Path) -> None:
    compiler = bundling.bytecode_compiler()
    shipped = bundling.bundle(tmp_path, compiler=compiler)
    compiled = (
        sorted(p.name for p in (tmp_path / "training_guard" / "handlers" / "__pycache__").glob("*.pyc"))
        if shipped
        else []
    )
    if compiler is None:  # a machine without Python 3.13: source only, and the bundler says so
        assert shipped is False
    else:
        assert shipped is True
        assert "job_events.cpython-313.pyc" in compiled


def test_without_a_matching_python_the_asset_is_source_only_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bundling.compile_bytecode(tmp_path, None) is False
    assert "no Python 3.13 on this machine" in capsys.readouterr().err


def test_pure_python_dependencies_are_copied_from_the_installed_pinned_version(tmp_path: Path) -> None:
    from importlib import metadata

    version = metadata.version("slack_sdk")
    bundling.copy_distribution("slack_sdk", version, tmp_path)
    assert (tmp_path / "slack_sdk" / "webhook" / "client.py").is_file()
    assert not list(tmp_path.glob("*.dist-info"))


def test_a_version_mismatch_is_refused(tmp_path: Path) -> None:
    with pytest.raises(bundling.BundlingError, match=re.escape("is installed but requirements.txt pins 0.0.1")):
        bundling.copy_distribution("slack_sdk", "0.0.1", tmp_path)


def test_compiled_dependencies_are_refused_with_a_hint(tmp_path: Path) -> None:
    from importlib import metadata

    version = metadata.version("rpds_py")  # jsonschema's, compiled (Rust); the runtime has no compiled dependency
    with pytest.raises(bundling.BundlingError, match="manylinux2014_aarch64"):
        bundling.copy_distribution("rpds_py", version, tmp_path)


def test_requirements_must_be_pinned(tmp_path: Path) -> None:
    file = tmp_path / "requirements.txt"
    file.write_text("# comment\nslack-sdk==3.47.0  # pinned\n\n")
    assert bundling.requirements(file) == [("slack-sdk", "3.47.0")]
    file.write_text("slack-sdk>=3\n")
    with pytest.raises(bundling.BundlingError, match="not pinned as name==version"):
        bundling.requirements(file)
