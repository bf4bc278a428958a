"""Suite-wide: the fault campaign's figures, printed at the end of every run.

Under pytest-xdist (`make test` runs the suite on every core) each worker measures its own tests; a worker
hands its figures to the controller when it finishes (`workeroutput`), and the controller prints them all.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

CAMPAIGN: dict[str, dict[str, Any]] = {}


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A dict the test fills with what it measured; reported under the test's name."""
    return CAMPAIGN.setdefault(request.node.name, {})


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the figures to the controller
        workeroutput["campaign"] = json.dumps(CAMPAIGN, default=str)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist, on the controller: a worker finished; keep its figures."""
    CAMPAIGN.update(json.loads(getattr(node, "workeroutput", {}).get("campaign", "{}")))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not CAMPAIGN:
        return
    terminalreporter.section("fault campaign figures")
    for name, values in sorted(CAMPAIGN.items()):
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        terminalreporter.write_line(f"{name}: {shown}")
