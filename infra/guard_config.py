"""Where the CDK app finds the GuardConfig: the `training-guard` context of cdk.json, with the file
named by `-c config=FILE` (`make deploy CONFIG=FILE`) layered over it.

A file states only what differs from cdk.json (docs/configuration.md):

- objects merge key by key, at every depth: a file that sets only `dry_run` keeps cdk.json's
  Slack webhook, and `{"rules": {"actions": {"Overtraining": "stop"}}}` adds one rule action;
- any other value replaces the one beneath it, lists included (`emails`, `metric_guards`,
  `jobs.exclude_prefixes`): a list is one setting, not a set of settings;
- a key set to null removes the value beneath it, so the setting takes its built-in default:
  `"slack": null` turns Slack off, `"q_developer": null` turns Q Developer off, and
  `"slack": {"webhooks": {"default": null}}` removes one webhook.

Pure Python (no jsii), so `training-guard plan` and `preflight` read the configuration exactly as
the app does without starting Node.js.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from training_guard.config.model import ConfigError, GuardConfig

if TYPE_CHECKING:
    from constructs import Node

CONTEXT_KEY = "training-guard"
FILE_CONTEXT_KEY = "config"
BASE_SOURCE = f"cdk.json context {CONTEXT_KEY!r}"


@dataclass(frozen=True)
class Layered:
    """The configuration the app deploys, and where it came from."""

    config: GuardConfig
    layers: tuple[str, ...]  # bottom first: the cdk.json context, then the file (if any)

    @property
    def source(self) -> str:
        return " + ".join(self.layers)


def load(node: Node) -> GuardConfig:
    """The validated configuration; `ConfigError` names every bad field."""
    return resolve(node.try_get_context(CONTEXT_KEY), node.try_get_context(FILE_CONTEXT_KEY)).config


def from_cdk_json(cdk_json: Path, config_file: str | None) -> Layered:
    """What the app reads when the CDK CLI runs in the folder of this cdk.json."""
    document = _json_file(cdk_json, unreadable=str(cdk_json))
    context = document.get("context") if isinstance(document, Mapping) else None
    return resolve((context or {}).get(CONTEXT_KEY) if isinstance(context, Mapping) else None, config_file)


def resolve(context_value: Any, config_file: Any) -> Layered:
    """The cdk.json context value (an object, or JSON text from `-c training-guard=...`) with the
    file layered over it; validated once, as a whole."""
    base = _context_document(context_value)
    if not config_file or not isinstance(base, Mapping):  # a context that is no object is reported alone
        return Layered(GuardConfig.from_dict(base, source=BASE_SOURCE), (BASE_SOURCE,))
    file = Path(str(config_file))
    top = _json_file(file, unreadable=f"-c {FILE_CONTEXT_KEY}={file}")
    layers = (BASE_SOURCE, str(file))
    source = f"{file} (layered over {BASE_SOURCE})"
    if not isinstance(top, Mapping):  # reported by the reader, in its words
        return Layered(GuardConfig.from_dict(top, source=source), layers)
    return Layered(GuardConfig.from_dict(layer(base, top), source=source), layers)


def _json_file(file: Path, *, unreadable: str) -> Any:
    """The file's JSON document; each way it is not one is a ConfigError naming the file (`unreadable`: the source
    named when the file cannot be read at all)."""
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"cannot read {file}: {exc.strerror or exc}"], unreadable) from None
    except UnicodeDecodeError as exc:  # a binary file named by mistake
        raise ConfigError([f"(document): not UTF-8 text: {exc.reason} at byte {exc.start}"], str(file)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError([f"(document): not valid JSON: {exc}"], str(file)) from None


def layer(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`top` over `base`: objects merge recursively, other values replace, null removes."""
    merged = dict(base)
    for key, value in top.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping):
            below = merged.get(key)
            merged[key] = layer(below if isinstance(below, Mapping) else {}, value)
        else:
            merged[key] = value
    return merged


def _context_document(value: Any) -> Any:
    if isinstance(value, str):  # `-c training-guard='{...}'` arrives as a string
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError([f"(document): not valid JSON: {exc}"], f"context {CONTEXT_KEY!r}") from None
    return {} if value is None else value
