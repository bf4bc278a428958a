from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from training_guard.config.model import GuardConfig
from training_guard_local.emulator import Emulation


@pytest.fixture
def aws() -> Iterator[Emulation]:
    with Emulation(GuardConfig()) as emulation:
        yield emulation


@pytest.fixture
def emulation_with() -> Iterator[Callable[[GuardConfig], Emulation]]:
    """Start an emulation with a given config: `aws = emulation_with(GuardConfig(...))`."""
    started: list[Emulation] = []

    def start(config: GuardConfig) -> Emulation:
        emulation = Emulation(config)
        started.append(emulation)
        return emulation.__enter__()

    yield start
    for emulation in reversed(started):
        emulation.__exit__(None, None, None)
