"""CloudWatch Logs subscription deliveries as Lambda receives them, for the log path's tests and campaigns."""

from __future__ import annotations

import base64
import copy
import gzip
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from training_guard import contract
from training_guard.domain.log_rules import LogEvent, StreamState

LOGS = Path(__file__).parent / "logs"
# The seed's MNIST job at learning rate 0.1: its log and its MetricDefinitions (Train_loss climbs, then nan).
MNIST_LOG = LOGS / "mnist_lr01.log"
MNIST_DEFINITIONS = tuple(
    (d["Name"], d["Regex"]) for d in json.loads((LOGS / "mnist_metric_definitions.json").read_text(encoding="utf-8"))
)


def mnist_lines() -> list[str]:
    return [line for line in MNIST_LOG.read_text(encoding="utf-8").splitlines() if line]


def events(lines: Sequence[str], *, t0_ms: int, first: int = 0, stream_id: int = 0) -> tuple[LogEvent, ...]:
    """Lines `first`, `first + 1`, ... one second apart, with ids as CloudWatch Logs gives them (56 digits, unique
    per event: `stream_id` keeps two streams' ids apart)."""
    return tuple(
        LogEvent(id=f"{stream_id:020d}{first + i:036d}", timestamp_ms=t0_ms + 1000 * (first + i), message=line)
        for i, line in enumerate(lines)
    )


def document(
    stream: str,
    logged: Sequence[LogEvent],
    *,
    owner: str,
    group: str = contract.TRAINING_LOG_GROUP,
    message_type: str = "DATA_MESSAGE",
) -> dict[str, Any]:
    """CloudWatch Logs' JSON document of one delivery (the CloudWatch Logs guide's "Subscription filters")."""
    return {
        "messageType": message_type,
        "owner": owner,
        "logGroup": group,
        "logStream": stream,
        "subscriptionFilters": [contract.LOG_SUBSCRIPTION_FILTER_NAME],
        "logEvents": [{"id": e.id, "timestamp": e.timestamp_ms, "message": e.message} for e in logged],
    }


def subscription(doc: dict[str, Any]) -> dict[str, Any]:
    """The document as Lambda receives it: `{"awslogs": {"data": base64(gzip(json))}}`."""
    return {"awslogs": {"data": base64.b64encode(gzip.compress(json.dumps(doc).encode())).decode()}}


def _scoped(name: str, account: str | None) -> str:
    """A member account's item, as the adapter keys it (`<account>/<name>`)."""
    return f"{account}/{name}" if account else name


class Killed(BaseException):
    """The runtime ended the invocation (a timeout): no except clause of the code runs."""


@dataclass
class FakeLogStates:
    """The state table's log items, with DynamoDB's semantics: versions, conditional puts, the reported flags."""

    items: dict[str, tuple[dict[str, Any], int]] = field(default_factory=dict)
    streams_of: dict[str, set[str]] = field(default_factory=dict)
    reported: set[tuple[str, str]] = field(default_factory=set)
    puts: int = 0
    kill_put: bool = False  # the invocation dies at the save
    before_put: Callable[[], None] | None = None  # another delivery runs just before this save

    def get(self, stream: str, *, account: str | None = None) -> tuple[StreamState | None, int]:
        doc, version = self.items.get(_scoped(stream, account), (None, 0))
        return (StreamState.from_json(copy.deepcopy(doc)) if doc is not None else None), version

    def put(
        self, job: str, stream: str, state: StreamState, *, version: int, now: datetime, account: str | None = None
    ) -> bool:
        if self.kill_put:
            raise Killed("timed out before the save")
        if self.before_put is not None:
            run, self.before_put = self.before_put, None
            run()
        self.streams_of.setdefault(_scoped(job, account), set()).add(stream)
        key = _scoped(stream, account)
        if key in self.items and self.items[key][1] != version:  # DynamoDB's `attribute_not_exists(pk) OR version = :v`
            return False
        self.puts += 1
        self.items[key] = (json.loads(json.dumps(state.to_json())), version + 1)
        return True

    def streams(self, job: str, *, account: str | None = None) -> list[str]:
        return sorted(self.streams_of.get(_scoped(job, account), ()))

    def first_report(self, job: str, problem: str, *, now: datetime, account: str | None = None) -> bool:
        if (_scoped(job, account), problem) in self.reported:
            return False
        self.reported.add((_scoped(job, account), problem))
        return True


@dataclass(frozen=True)
class LogJobPlan:
    """A job of a seeded fleet and its log: one stream per host, cut into batches as CloudWatch Logs delivers them."""

    name: str
    kind: str  # "stop": its loss turns nan on every host | "healthy": its loss falls 1 % a line
    streams: tuple[str, ...]
    batches: tuple[dict[str, Any], ...]  # CloudWatch Logs' documents, each stream's in the order written


def plan_log_fleet(
    count: int, seed: int, *, owner: str, t0_ms: int, lines: int = 60, batch_lines: int = 10
) -> list[LogJobPlan]:
    rng = random.Random(seed)
    plans = []
    for n in range(count):
        name = f"log-fleet-{seed % 1000}-{n}"
        kind = "stop" if rng.random() < 0.4 else "healthy"
        onset = rng.randint(20, lines - 5)
        written = [
            f"Train Epoch: {i // 10} [{i}] Train_loss={'nan' if kind == 'stop' and i >= onset else f'{2.0 * 0.99**i:.6f}'};"
            for i in range(lines)
        ]
        streams = tuple(f"{name}/algo-{host}-1764468600" for host in range(1, rng.randint(1, 3) + 1))
        batches = tuple(
            document(
                stream,
                events(written[i : i + batch_lines], t0_ms=t0_ms, first=i, stream_id=host),
                owner=owner,
            )
            for host, stream in enumerate(streams, start=1)
            for i in range(0, lines, batch_lines)
        )
        plans.append(LogJobPlan(name, kind, streams, batches))
    return plans


def log_deliveries(plans: Sequence[LogJobPlan], *, seed: int, max_copies: int = 3) -> list[dict[str, Any]]:
    """Every batch 1 to `max_copies` times, all shuffled: repeated, out of order within a stream, hosts interleaved."""
    rng = random.Random(seed)
    out = [copy.deepcopy(b) for plan in plans for b in plan.batches for _ in range(rng.randint(1, max_copies))]
    rng.shuffle(out)
    return out
