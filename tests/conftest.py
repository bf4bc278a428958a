"""Suite-wide: the fault campaign's figures, printed at the end of every run; no test module leaves the process's
environment changed.

Under pytest-xdist (`make test` runs the suite on every core) each worker measures its own tests; a worker
hands its figures to the controller when it finishes (`workeroutput`), and the controller prints them all.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

CAMPAIGN: dict[str, dict[str, Any]] = {}


def pytest_configure(config: pytest.Config) -> None:
    """Set once per process what the code under test would set the first time it starts jsii (`make test` exports the
    same variable), so that no module is blamed for it."""
    from training_guard_local.cdk_run import quiet_node_banner

    quiet_node_banner()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Python's full collection walks every live object; a test process holds large long-lived heaps (moto's backends,
    botocore's models, jsii's proxies): the collector took 36-42 s of the unit tier's CPU on 2 workers, 30-36 s of it
    in full collections. What the imports made is frozen out of the collector's walks, and a full collection waits for
    100 times more young collections than Python's default 10 (gen0 and gen1 unchanged; refcounting frees everything
    but cycles). `make test` in alternating runs: 133 and 113 s -> 107 and 100 s; the largest process's peak RSS ~350
    -> ~800 MB."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 1000)


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}  # pytest's own, per phase


@pytest.fixture(scope="module", autouse=True)
def _environment_kept() -> Iterator[None]:
    """A module's tests and fixtures leave `os.environ` as they found it. Tests share a process (and an xdist worker
    runs whichever files it is given), so a variable left behind changes later tests by the order they run in: moto
    serves every request in the account MOTO_ACCOUNT_ID names, whatever the credentials say. Checked after the
    module's own fixtures are torn down (this one is set up first, so it ends last)."""
    before = _environment()
    yield
    after = _environment()
    if after != before:
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        for key in changed:  # the next module starts clean: one failure, not a cascade
            if key in before:
                os.environ[key] = before[key]
            else:
                del os.environ[key]
        pytest.fail(f"the module left the environment changed: {', '.join(changed)}", pytrace=False)


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
