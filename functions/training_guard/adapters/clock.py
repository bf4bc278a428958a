"""The one place the functions read the time: a seam for the local emulation's scenario clock."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)
