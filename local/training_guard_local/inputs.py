"""What the commands read and write for a user: each mistake becomes one line naming the problem.

Every file a command reads (a configuration, events, a scenario, metric definitions, a log) goes
through `read_text` / `read_json`, and every file it writes through `check_writable` before the work
starts, so that a missing file, a folder, a binary or non-UTF-8 file, YAML where JSON is expected or
an unwritable output path is reported as `UsageError` (printed as one line, exit 2), never as a
traceback and never after minutes of work.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PROFILE = 3
EXIT_AWS_CONFIG = 4
EXIT_CREDENTIALS = 5
EXIT_NETWORK = 6
EXIT_REGION = 7
EXIT_OUTPUT = 8
EXIT_PIPE = 9


class UsageError(Exception):
    """Bad input to the command; printed as one line on stderr, exit 2."""


# YAML's tell-tales at the start of a line: a document marker, or `key: value` / `- item` outside JSON.
_YAML_LINE = re.compile(r"^(---\s*$|%YAML|[A-Za-z_][\w.-]*\s*:(\s|$)|-\s+\S)")


def read_text(path: Path, what: str) -> str:
    """The whole file as UTF-8 text; `what` names it in errors ("config", "events", ...)."""
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder, not a {what} file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    return decode(data, path, what)


def decode(data: bytes, source: Path | str, what: str) -> str:
    if b"\x00" in data[:8192]:
        raise UsageError(f"{source}: not a text file (binary data); the {what} must be UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{source}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); save the {what} as UTF-8"
        ) from None


def parse_json(text: str, source: Path | str, what: str) -> Any:
    """JSON, or one line: where it is not JSON, and that it looks like YAML when it does."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if looks_like_yaml(text):
            raise UsageError(
                f"{source}: looks like YAML; {_plural(what)} are JSON (not JSON: {exc.msg} at line {exc.lineno})"
            ) from None
        raise UsageError(f"{source}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def read_json(path: Path, what: str) -> Any:
    return parse_json(read_text(path, what), path, what)


def looks_like_yaml(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return bool(lines) and not lines[0].lstrip().startswith(("{", "[")) and bool(_YAML_LINE.match(lines[0]))


def _plural(what: str) -> str:
    return {"config": "configurations", "scenario": "scenarios", "definitions": "metric definitions"}.get(what, what)


def check_writable(path: Path, what: str) -> None:
    """Before any work: the file can be created or replaced (its folder exists, it is no folder)."""
    if path.is_dir():
        raise UsageError(f"{path}: is a folder; name the {what} file to write")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"{path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{path}: not writable")
