"""The configuration's documents, generated from its declarations in `training_guard.config.model`.

Two documents follow from the `setting()` declarations of `GuardConfig` and its nested classes:
the configuration table in docs/configuration.md (between the `config-table` markers) and the JSON Schema
`configs/schema.json` (draft 2020-12), which editors use to complete and check a configuration
file that names it with `"$schema": "./schema.json"`.

    make config-docs   # regenerate both (python -m training_guard_local.config_docs --write in the venv)
    python -m training_guard_local.config_docs --check   # exit 1, with a diff, when either is stale

This module lives outside the Lambda package: no function imports it.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from training_guard.config.model import SCHEMA_KEY, Declared, GuardConfig, Setting, settings_of

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = "docs/configuration.md"  # the README links to it
SCHEMA = "configs/schema.json"
START = "<!-- config-table:start -->"
END = "<!-- config-table:end -->"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
COMMAND = "make config-docs"  # the venv's python, installed first

# Where the README says more about a setting (presentation only: the meaning stays in config.py).
_SEE = {
    "slack.webhooks": "see [Slack](../README.md#slack)",
    "q_developer": "see [Amazon Q Developer](../README.md#amazon-q-developer-in-chat-applications)",
    "metric_guards": "see [Metric guards](../README.md#metric-guards-jobs-without-debugger)",
}


# --- The reference table ----------------------------------------------------------------------------------


def table() -> str:
    """The reference's configuration section between the markers: the table and how to regenerate it."""
    lines = ["| Setting | Default | Meaning | Allowed |", "| --- | --- | --- | --- |"]
    lines += [f"| {' | '.join(_cell(c) for c in row)} |" for row in rows()]
    lines += [
        "",
        "Generated from the declarations in `functions/training_guard/config/model.py`, like the JSON Schema",
        "[configs/schema.json](../configs/schema.json) (a configuration file that starts with",
        f'`"{SCHEMA_KEY}": "./schema.json"` gets completion and checks in editors); regenerate both with',
        f"`{COMMAND}`.",
    ]
    return "\n".join(lines)


def rows(cls: type = GuardConfig, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(setting path, default, meaning, allowed values) for every setting, depth first."""
    out: list[tuple[str, str, str, str]] = []
    for d in settings_of(cls):
        path = f"{prefix}{d.name}"
        nested = d.item_kind == "section"
        if not nested or d.optional or d.kind != "section":
            meaning = d.setting.doc + (f"; {_SEE[path]}" if path in _SEE else "")
            out.append((f"`{path}`", _default_text(d), meaning, _allowed_text(d)))
        if nested:
            below = {"list": f"{path}[].", "map": f"{path}.<name>."}.get(d.kind, f"{path}.")
            out += rows(d.item, below)
    return out


def _default_text(d: Declared) -> str:
    if d.setting.derived_default is not None:
        return d.setting.derived_default.describe
    if d.required:
        return "required"
    value = _jsonable(d.default_value())
    return f"`{value if isinstance(value, str) else json.dumps(value)}`"


def _allowed_text(d: Declared) -> str:
    s = d.setting
    parts: list[str] = []
    if s.minimum is not None or s.maximum is not None:
        low = "" if s.minimum is None else f"from {s.minimum} "
        high = "" if s.maximum is None else f"to {s.maximum}"
        parts.append(f"{low}{high}".strip())
    choices = _choices(d)
    if choices:
        parts.append("one of " + ", ".join(f"`{c}`" for c in choices) + (" (any case)" if s.ignore_case else ""))
    if s.pattern is not None:
        parts.append(f"matches `{s.pattern}`")
    if s.keys is not None:
        parts.append("keys: " + ", ".join(f"`{k}`" for k in s.keys))
    if s.key_pattern is not None:
        parts.append(f"names match `{s.key_pattern}`")
    if s.max_items is not None:
        parts.append(f"at most {s.max_items} entries")
    if parts and s.why:
        parts[-1] += f" ({s.why})"
    return "; ".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


# --- The JSON Schema -----------------------------------------------------------------------------------


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a configuration document."""
    defs: dict[str, Any] = {}
    root = _object_schema(GuardConfig, defs)
    root["properties"] = {
        SCHEMA_KEY: {"type": "string", "description": "the JSON Schema of this file, for editors (ignored)"},
        **root["properties"],
    }
    return {
        "$schema": DRAFT,
        "title": "Training Guard configuration",
        "description": (
            "The training-guard context of cdk.json, or a file named with -c config=FILE. "
            f"Generated by `{COMMAND}`: do not edit by hand."
        ),
        **root,
        "$defs": dict(sorted(defs.items())),
    }


def _object_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    declared = settings_of(cls)
    out: dict[str, Any] = {"type": "object"}
    if cls.__doc__ and cls is not GuardConfig and not cls.__doc__.startswith(f"{cls.__name__}("):
        out["description"] = cls.__doc__.strip()
    out["properties"] = {d.name: _property_schema(d, defs) for d in declared}
    required = [d.name for d in declared if d.required]
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def _property_schema(d: Declared, defs: dict[str, Any]) -> dict[str, Any]:
    s = d.setting
    if d.kind == "list":
        value: dict[str, Any] = {"type": "array", "items": _value_schema(d.item_kind, d.item, s, defs, item=True)}
        if s.max_items is not None:
            value["maxItems"] = s.max_items
    elif d.kind == "map":
        member = _value_schema(d.item_kind, d.item, s, defs, item=True)
        # a section in a map may be null, like any section: `"webhooks": {"default": null}`
        value = {"type": "object", "additionalProperties": _nullable(member) if d.item_kind == "section" else member}
        if s.max_items is not None:
            value["maxProperties"] = s.max_items
        if s.keys is not None:
            value["propertyNames"] = {"enum": list(s.keys)}
        elif s.key_pattern is not None:
            value["propertyNames"] = {"pattern": s.key_pattern}
    else:
        value = _value_schema(d.kind, d.item, s, defs, item=False)
    # The reader takes null as absence for an optional setting, a section and a map.
    if d.optional or d.kind in ("section", "map"):
        value = _nullable(value)
    described: dict[str, Any] = {"description": _description(d), **value}
    if not d.required and d.setting.derived_default is None and (d.kind != "section" or d.optional):
        described["default"] = _jsonable(d.default_value())
    return described


def _value_schema(kind: str, tp: Any, s: Setting, defs: dict[str, Any], *, item: bool) -> dict[str, Any]:
    if kind == "section":
        if tp.__name__ not in defs:
            defs[tp.__name__] = {}  # reserved first: a class may be reached twice
            defs[tp.__name__] = _object_schema(tp, defs)
        return {"$ref": f"#/$defs/{tp.__name__}"}
    if kind == "bool":
        return {"type": "boolean"}
    if kind == "number":
        return {"type": "number"}
    if kind == "int":
        bounds = {"minimum": s.minimum, "maximum": s.maximum}
        return {"type": "integer", **{k: v for k, v in bounds.items() if v is not None}}
    if kind == "enum":
        return {"type": "string", "enum": list(s.choices or (m.value for m in tp))}
    # text: in a list the reader wants a non-empty string, elsewhere one that is not blank
    out: dict[str, Any] = {"type": "string", "minLength": 1}
    if s.choices is not None and s.ignore_case:
        out["pattern"] = "^(?:" + "|".join(_any_case(c) for c in s.choices) + ")$"
        out["examples"] = list(s.choices)
    elif s.choices is not None:
        out["enum"] = list(s.choices)
    elif s.pattern is not None:
        out["pattern"] = s.pattern
    elif not item:
        out["pattern"] = r"\S"
    return out


def _nullable(value: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in value:
        return {"anyOf": [value, {"type": "null"}]}
    return {**value, "type": [value["type"], "null"]}


def _any_case(choice: str) -> str:
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in choice)


def _description(d: Declared) -> str:
    text = d.setting.doc
    if d.setting.derived_default is not None:
        text += f". Default: {d.setting.derived_default.describe}"
    if d.setting.why and (d.setting.minimum is not None or d.setting.choices or d.setting.max_items):
        text += f"; {d.setting.why}"
    return text


def _choices(d: Declared) -> tuple[str, ...]:
    if d.setting.choices is not None:
        return d.setting.choices
    if d.item_kind == "enum":
        return tuple(m.value for m in d.item)
    return ()


def _jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return _jsonable(asdict(value))
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def schema_text() -> str:
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


# --- Writing and checking ------------------------------------------------------------------------------


class MarkersMissing(ValueError):
    """The reference has no pair of config-table markers to write between."""


def with_table(readme: str) -> str:
    """The reference's text with the generated table between the markers."""
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        raise MarkersMissing(f"{REFERENCE} needs the markers {START} and {END}, in that order")
    return f"{readme[: start + len(START)]}\n{table()}\n{readme[end:]}"


def expected(root: Path) -> dict[Path, str]:
    """Each generated file and the text it should hold."""
    readme = root / REFERENCE
    return {readme: with_table(readme.read_text(encoding="utf-8")), root / SCHEMA: schema_text()}


def stale(root: Path) -> list[str]:
    """A unified diff per generated file that differs from what the declarations give (empty: all current)."""
    diffs = []
    for path, text in expected(root).items():
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            name = str(path.relative_to(root))
            diffs.append(
                "".join(
                    difflib.unified_diff(
                        current.splitlines(keepends=True), text.splitlines(keepends=True), name, f"{name} (generated)"
                    )
                )
            )
    return diffs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m training_guard_local.config_docs",
        description="Generate the configuration table of docs/configuration.md and configs/schema.json.",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite both files")
    mode.add_argument("--check", action="store_true", help="exit 1, printing a diff, when either is stale")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this checkout)")
    args = parser.parse_args(argv)
    try:
        if args.write:
            for path, text in expected(args.root).items():
                if not path.exists() or path.read_text(encoding="utf-8") != text:
                    path.write_text(text, encoding="utf-8")
                    print(f"wrote {path.relative_to(args.root)}")
            return 0
        diffs = stale(args.root)
    except (MarkersMissing, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if diffs:
        sys.stdout.write("".join(diffs))
        print(f"\nThe configuration documents are stale: run `{COMMAND}`.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
