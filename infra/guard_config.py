"""Where the CDK app finds the GuardConfig: `-c config=FILE`, else the `training-guard` context."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from constructs import Node

from training_guard.config import ConfigError, GuardConfig

CONTEXT_KEY = "training-guard"
FILE_CONTEXT_KEY = "config"


def load(node: Node) -> GuardConfig:
    """The validated configuration; `ConfigError` names every bad field."""
    path = node.try_get_context(FILE_CONTEXT_KEY)
    if path:
        file = Path(str(path))
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError([f"cannot read {file}: {exc.strerror or exc}"], f"-c {FILE_CONTEXT_KEY}={file}") from None
        return GuardConfig.from_json(text, source=str(file))
    data: Any = node.try_get_context(CONTEXT_KEY)
    if isinstance(data, str):  # `-c training-guard='{...}'` arrives as a string
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise ConfigError([f"(document): not valid JSON: {exc}"], f"context {CONTEXT_KEY!r}") from None
    return GuardConfig.from_dict(data, source=f"cdk.json context {CONTEXT_KEY!r}")
