"""The suite's own guard (tests/conftest.py): a test module that leaves the environment changed fails, and the next
module starts with the environment restored."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).parents[1] / "conftest.py"


def test_a_module_fixture_that_leaves_a_variable_set_fails_and_the_next_module_starts_clean(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TG_SUITE_DELETED", "was set")
    monkeypatch.setenv("TG_SUITE_CHANGED", "before")
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    pytester.makepyfile(
        test_a_leaky="""
import os
import pytest

@pytest.fixture(scope="module")
def emulated():
    os.environ["MOTO_ACCOUNT_ID"] = "123456789012"  # set, never restored
    yield

def test_uses_it(emulated):
    assert os.environ["MOTO_ACCOUNT_ID"] == "123456789012"
""",
        test_b_after="""
import os

def test_the_environment_is_clean():
    assert "MOTO_ACCOUNT_ID" not in os.environ
""",
        test_b_changes="""
import os

def test_changes_and_deletes():
    os.environ["TG_SUITE_CHANGED"] = "after"
    del os.environ["TG_SUITE_DELETED"]
""",
        test_bb_after="""
import os

def test_both_are_back():
    assert os.environ["TG_SUITE_CHANGED"] == "before"
    assert os.environ["TG_SUITE_DELETED"] == "was set"
""",
        test_c_tidy="""
import os
import pytest

@pytest.fixture(scope="module")
def emulated():
    os.environ["TG_SUITE_PROBE"] = "set"
    yield
    del os.environ["TG_SUITE_PROBE"]

def test_uses_it(emulated, monkeypatch):
    monkeypatch.setenv("TG_SUITE_OTHER", "x")
""",
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:xdist", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5, errors=2)
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_uses_it*", "the module left the environment changed: MOTO_ACCOUNT_ID"]
    )
    result.stdout.fnmatch_lines(["ERROR test_a_leaky.py::test_uses_it*"])
    result.stdout.fnmatch_lines(["the module left the environment changed: TG_SUITE_CHANGED, TG_SUITE_DELETED"])
