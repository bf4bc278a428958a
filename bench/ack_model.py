"""The Slack acknowledgement on a cold start against Slack's 3 s, modelled from cited figures and this bench's own.

A cold acknowledgement is: Lambda's runtime init, the guard's imports, the handler (the signing secret read through
KMS, one DynamoDB PutItem, one SQS SendMessage to an SSE-KMS queue, the verification), then the 200. Where AWS
documents a number it is used; where it does not, a public measurement is used and said to be one; what neither
gives is not guessed: the model reports the time left for it instead (the headroom).

`python -m bench.ack_model [IMPORT_MS FIRST_CALL_MS]` prints the table; `make bench-report` writes it into
docs/benchmarks.md with this run's measured import and first-call times.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

# Slack: "you only have 3 seconds to respond before Slack registers a timeout error"
# (https://docs.slack.dev/tools/bolt-python/concepts/acknowledge).
SLACK_BUDGET_MS = 3000.0
# Lambda allocates CPU in proportion to memory; "at 1,769 MB, a function has the equivalent of one vCPU"
# (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html). Imports and the in-process handler are
# single-threaded CPU work: below one vCPU they are taken to slow down by 1769/memory (an assumption on top of the
# documented allocation; this machine's core is not a Graviton core either).
ONE_VCPU_MB = 1769
# Runtime init of a hello-world python3.13 arm64 zip function (no imports of its own), the slowest of 10 cold starts
# per memory size on 2025-12-21: maxday/lambda-perf data/2025/2025-12-21.json, rows
# lambda-perf-python313-zip-{256,512,1024}-arm64 (a public measurement; AWS publishes no cold-start figure).
# 1769 MB is not measured there: the 1024 MB figure is used (more CPU does not slow the runtime's start).
RUNTIME_INIT_MS = {256: 99.21, 512: 117.37, 1024: 105.29, 1769: 105.29}
LAMBDA_PERF_SOURCE = "https://github.com/maxday/lambda-perf (data/2025/2025-12-21.json, python3.13 zip arm64)"
# The first GetSecretValue of a function "could sometimes take up to a full second", read in CloudWatch logs (a
# public measurement: https://www.garudax.id/pulse/aws-lambda-functions-secrets-manager-performance-nalin-jayasuriya;
# AWS documents no latency). It includes Secrets Manager's own KMS Decrypt of the secret, done server-side (the
# function's kms:Decrypt is checked on that call), and the new TLS connection.
SECRET_FIRST_READ_MS = 1000.0
FIRST_READ_MEASUREMENT_PAGE = (
    "https://www.garudax.id/pulse/aws-lambda-functions-secrets-manager-performance-nalin-jayasuriya"
)
# DynamoDB PutItem: "consistent single-digit millisecond" performance is AWS's own claim for the service
# (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Introduction.html); a first request adds its TLS
# connection, for which AWS gives no figure. SQS SendMessage to an SSE-KMS queue: AWS documents no latency; SQS asks
# KMS for a data key at most once per KmsDataKeyReusePeriodSeconds (default 300 s,
# https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-server-side-encryption.html), so
# the first send after a quiet period may wait for KMS. Neither is modelled as a number: the headroom is what is left.
MEMORY_SIZES_MB = (256, 512, 1024, 1769)
# What the interactions function is given (infra/components/slack_app.py INTERACTION_MEMORY_MB): the smallest size
# whose cold acknowledgement leaves at least this much of Slack's 3 s to the two writes, the function URL and the
# network (a choice: a third of the budget).
REQUIRED_HEADROOM_MS = 1000.0


@dataclass(frozen=True)
class ColdAck:
    memory_mb: int
    runtime_init_ms: float
    imports_ms: float
    handler_ms: float
    secret_ms: float

    @property
    def modelled_ms(self) -> float:
        return self.runtime_init_ms + self.imports_ms + self.handler_ms + self.secret_ms

    @property
    def headroom_ms(self) -> float:
        """What is left of Slack's 3 s for PutItem, SendMessage, the function URL and the network."""
        return SLACK_BUDGET_MS - self.modelled_ms


def cpu_factor(memory_mb: int) -> float:
    return max(1.0, ONE_VCPU_MB / memory_mb)


def model(import_ms: float, first_call_ms: float) -> list[ColdAck]:
    """One row per memory size: `import_ms` is the acknowledgement's measured cold import on this machine (one
    core), `first_call_ms` its measured first in-process call on moto (clients built, no network)."""
    return [
        ColdAck(
            memory_mb=memory,
            runtime_init_ms=RUNTIME_INIT_MS[memory],
            imports_ms=import_ms * cpu_factor(memory),
            handler_ms=first_call_ms * cpu_factor(memory),
            secret_ms=SECRET_FIRST_READ_MS,
        )
        for memory in MEMORY_SIZES_MB
    ]


def smallest_that_holds(rows: list[ColdAck]) -> int | None:
    """The smallest memory size whose headroom is at least REQUIRED_HEADROOM_MS."""
    return next((r.memory_mb for r in rows if r.headroom_ms >= REQUIRED_HEADROOM_MS), None)


def as_rows(rows: list[ColdAck]) -> list[dict[str, Any]]:
    return [
        {
            "memory MB": r.memory_mb,
            "runtime init ms": round(r.runtime_init_ms),
            "imports ms": round(r.imports_ms),
            "handler (in-process) ms": round(r.handler_ms),
            "first secret read ms": round(r.secret_ms),
            "modelled ms": round(r.modelled_ms),
            "left for the writes and network ms": round(r.headroom_ms),
        }
        for r in rows
    ]


def section(import_ms: float, first_call_ms: float, configured_mb: int) -> list[str]:
    """The report's section: the model's table, its sources, and whether the configured memory holds."""
    rows = model(import_ms, first_call_ms)
    chosen = smallest_that_holds(rows)
    columns = list(as_rows(rows)[0])
    table = [
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
        *("| " + " | ".join(str(row[c]) for c in columns) + " |" for row in as_rows(rows)),
    ]
    held = next(r for r in rows if r.memory_mb == configured_mb) if configured_mb in MEMORY_SIZES_MB else None
    verdict = (
        f"the function is configured with {configured_mb} MB: {round(held.modelled_ms)} ms modelled, "
        f"{round(held.headroom_ms)} ms left (at least {REQUIRED_HEADROOM_MS:.0f} ms wanted): "
        + ("HOLDS" if held.headroom_ms >= REQUIRED_HEADROOM_MS else "DOES NOT HOLD")
        if held
        else f"the function is configured with {configured_mb} MB, a size the model does not compute"
    )
    return [
        "## Slack acknowledgement on a cold start: modelled against the 3 s",
        "",
        f"Cold import of the acknowledgement measured here: {import_ms} ms; its first in-process call on moto "
        f"(clients built, secret read, no network): {first_call_ms} ms. Both are CPU work on one core, scaled by "
        f"{ONE_VCPU_MB}/memory below one vCPU (Lambda allocates CPU in proportion to memory, one vCPU at "
        f"{ONE_VCPU_MB} MB: https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html; the scaling and "
        "this machine's core standing for a Graviton core are assumptions). Runtime init: the slowest of 10 cold "
        f"starts of a hello-world python3.13 arm64 function, a public measurement ({LAMBDA_PERF_SOURCE}). First "
        "secret read, with Secrets Manager's own KMS Decrypt and a new TLS connection: up to "
        f"{SECRET_FIRST_READ_MS:.0f} ms, a public measurement ({FIRST_READ_MEASUREMENT_PAGE}); AWS documents no "
        "latency for it. PutItem (AWS: single-digit "
        "milliseconds, https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Introduction.html), "
        "SendMessage to the SSE-KMS queue (AWS documents no latency; SQS may ask KMS for a data key on the first "
        "send after 300 s) and the function URL are not given a number: the last column is what is left for them.",
        "",
        *table,
        "",
        f"Smallest size leaving at least {REQUIRED_HEADROOM_MS:.0f} ms: "
        f"{chosen if chosen is not None else 'none'} MB; {verdict}.",
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    from infra.components.slack_app import INTERACTION_MEMORY_MB

    args = sys.argv[1:] if argv is None else argv
    # Without arguments: the acknowledgement's cold import and first click last written to docs/benchmarks.md.
    import_ms, first_call_ms = (float(args[0]), float(args[1])) if len(args) == 2 else (234.0, 20.5)
    print("\n".join(section(import_ms, first_call_ms, INTERACTION_MEMORY_MB)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
