"""In-memory stand-ins for the Slack app mode's DynamoDB adapters (threads, mutes, replay markers).

Each keeps the semantics of its adapter (conditional writes, one item per key); tests/integration/test_slack_app.py
runs the same contract against both, so a unit test decided by a fake means what it says.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime

from training_guard.domain.mutes import RECORD_TTL_SECONDS, Mute, Mutes
from training_guard.services.threads import ClaimOutcome, ParentClaim, ThreadRecord, lease_expiry


class FakeThreads:
    def __init__(self) -> None:
        self.items: dict[str, ThreadRecord] = {}
        self.expires: dict[str, int] = {}
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def read(self, key: str) -> ThreadRecord | None:
        with self._lock:
            self.calls.append("read")
            return self.items.get(key)

    def claim(self, key: str, *, holder: str, now: datetime, lease_seconds: int, ttl_seconds: int) -> ParentClaim:
        with self._lock:
            self.calls.append("claim")
            old = self.items.get(key)
            epoch = int(now.timestamp())
            if old is None or (old.ts is None and old.lease_until is not None and old.lease_until < epoch):
                self.items[key] = ThreadRecord(holder=holder, lease_until=lease_expiry(now, lease_seconds))
                self.expires[key] = epoch + ttl_seconds
                return ParentClaim(ClaimOutcome.GRANTED)
            return ParentClaim(ClaimOutcome.POSTED if old.ts else ClaimOutcome.BUSY, old)

    def record_parent(
        self, key: str, *, holder: str, ts: str, card_version: int, now: datetime, ttl_seconds: int
    ) -> ThreadRecord:
        with self._lock:
            self.calls.append("record_parent")
            old = self.items.get(key)
            if old is not None and old.ts is None and old.holder == holder:
                self.items[key] = ThreadRecord(ts=ts, card_version=card_version)
                self.expires[key] = int(now.timestamp()) + ttl_seconds
                return self.items[key]
            return old if old is not None and old.ts else ThreadRecord(ts=ts, card_version=card_version)

    def release(self, key: str, *, holder: str) -> None:
        with self._lock:
            self.calls.append("release")
            old = self.items.get(key)
            if old is not None and old.ts is None and old.holder == holder:
                del self.items[key]

    def advance_card(self, key: str, version: int) -> bool:
        with self._lock:
            self.calls.append("advance_card")
            old = self.items.get(key)
            if old is None or old.ts is None or old.card_version >= version:
                return False
            self.items[key] = replace(old, card_version=version)
            return True


class FakeMutes:
    def __init__(self) -> None:
        self.items: dict[str, dict[str, Mute]] = {}
        self.expires: dict[str, int] = {}
        self.reads = 0

    def read(self, job: str, account: str | None = None) -> Mutes:
        self.reads += 1
        return Mutes(tuple(sorted(self.items.get(_scope(job, account), {}).values(), key=lambda m: m.key)))

    def put(self, job: str, mute: Mute, *, account: str | None = None, now: datetime) -> None:
        scope = _scope(job, account)
        self.items.setdefault(scope, {})[mute.key] = mute
        self.expires[scope] = int(now.timestamp()) + RECORD_TTL_SECONDS

    def remove(self, job: str, key: str, *, account: str | None = None) -> bool:
        return self.items.get(_scope(job, account), {}).pop(key, None) is not None

    def in_force(self, scope: str, now: datetime) -> bool:
        """Whether the job `scope` (`<account>/<job>` for a member's) has a mute that has not ended (what the stop's
        one write checks, on the marker the real store keeps)."""
        entries = self.items.get(scope, {})
        return any(m.until is None or m.until > now for m in entries.values())

    def jobs(self) -> list[tuple[str, Mutes]]:
        return [
            (scope, Mutes(tuple(sorted(m.values(), key=lambda x: x.key))))
            for scope, m in sorted(self.items.items())
            if m
        ]


def _scope(job: str, account: str | None) -> str:
    return f"{account}/{job}" if account else job


class FakeReplayMarkers:
    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def first_time(self, signature: str, timestamp: int, *, expires_at: int) -> bool:
        key = f"{timestamp}:{signature}"
        if key in self.seen:
            return False
        self.seen[key] = expires_at
        return True
