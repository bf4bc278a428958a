"""Placeholder registered by cli.py; the real command lands in this session (issue 12)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Register the sub-command on the CLI's sub-parsers."""
    parser: argparse.ArgumentParser = commands.add_parser("plan", help="(in progress)")
    return parser
