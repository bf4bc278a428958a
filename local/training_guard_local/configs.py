"""The configuration a command reads: one loader for simulate, slack-preview, demo --config and the deploy.

`deployed(FILE)` is what `make deploy CONFIG=FILE` deploys: cdk.json's `training-guard` context with the file layered
over it, read by the CDK app's own loader (infra/guard_config.py). Outside the project folder (no cdk.json) it is the
file alone, over the built-in defaults (`file_only`). Every mistake is one `UsageError` line, in the same words
whichever command reads the file.
"""

from __future__ import annotations

from pathlib import Path

from infra import guard_config
from infra.guard_config import Layered
from training_guard.config.model import ConfigError, GuardConfig
from training_guard_local.inputs import UsageError, parse_json, read_text

CDK_JSON = "cdk.json"
BUILT_IN = "the built-in defaults"


def deployed(path: Path | None) -> Layered:
    """The configuration a deploy from this folder would use, and its layers (bottom first)."""
    cdk_json = Path(CDK_JSON)
    if not cdk_json.is_file():
        return Layered(file_only(path), (str(path) if path is not None else BUILT_IN,))
    if path is not None:  # the file's own mistakes (a folder, binary, YAML, not JSON) named as for any input file
        parse_json(read_text(path, "config"), path, "config")
    try:
        return guard_config.from_cdk_json(cdk_json, str(path) if path is not None else None)
    except ConfigError as exc:
        raise UsageError(_one_line(exc)) from None


def file_only(path: Path | None) -> GuardConfig:
    """A configuration file (JSON) over the built-in defaults, or the defaults."""
    if path is None:
        return GuardConfig()
    data = parse_json(read_text(path, "config"), path, "config")
    try:
        return GuardConfig.from_dict(data, source=str(path))
    except ConfigError as exc:
        raise UsageError(_one_line(exc)) from None


def named(layered: Layered) -> str:
    """How a message names the configuration: the file, and what it is layered over."""
    *below, top = layered.layers
    return f"{top} (layered over {' + '.join(below)})" if below else top


def _one_line(exc: ConfigError) -> str:
    return " ".join(str(exc).split())
