"""Suite-wide: the fault campaign's figures, printed at the end of every run."""

from __future__ import annotations

from typing import Any

import pytest

CAMPAIGN: dict[str, dict[str, Any]] = {}


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A dict the test fills with what it measured; reported under the test's name."""
    return CAMPAIGN.setdefault(request.node.name, {})


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not CAMPAIGN:
        return
    terminalreporter.section("fault campaign figures")
    for name, values in CAMPAIGN.items():
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        terminalreporter.write_line(f"{name}: {shown}")
