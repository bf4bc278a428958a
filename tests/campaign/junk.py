"""Seeded junk for the bad-input campaign: JSON-shaped values of every type, and real payloads with one place
broken.

A plain `random.Random(seed)`, not Hypothesis: the campaign wants thousands of inputs, and Hypothesis spends about
10 ms drawing each recursive JSON value (10 s per thousand on a 2-core machine) against microseconds here. What
Hypothesis adds, shrinking, matters little for inputs this small: a failing one is printed (its first 400
characters) with its number, and the same seed makes the same inputs again. Its edge values are kept: the integers
and floats at the limits of int64 and IEEE 754 (NaN, infinities, -0.0, the smallest subnormal), empty and
whitespace strings, C0 and C1 control characters, non-ASCII text, digits that are not ASCII ("²" passes
str.isdigit() and fails int()), more digits than int() reads, strings that look like numbers, booleans, nulls or
timestamps.
"""

from __future__ import annotations

import copy
import random
from typing import Any

EDGE_INTS = (0, 1, -1, 2, 255, 256, 2**31 - 1, -(2**31), 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 10**30)
EDGE_FLOATS = (0.0, -0.0, 0.5, -1.5, 1e-7, 1e16, 1.7976931348623157e308, -1e308, 5e-324)
NON_FINITE = (float("nan"), float("inf"), float("-inf"))
EDGE_TEXT = (
    "",
    " ",
    "\t\n",
    "\x00",
    "null",
    "None",
    "true",
    "false",
    "0",
    "-1",
    "1e999",
    "NaN",
    "Infinity",
    "[]",
    "{}",
    "2026-12-01T00:00:00Z",
    "2026-13-45T25:61:61Z",
    "1764547200000",
    "InProgress",
    "IssuesFound",
    "Stopped",
    "arn:aws:sagemaker:us-east-1:123456789012:training-job/x",
    "ü",
    "日本語のジョブ",
    "🙂" * 3,
    "\u202e\u200b",
    "²",  # str.isdigit() says yes, int() says no
    "\u0661\u0662",  # Arabic-Indic digits
    "\uff11\uff12",  # fullwidth digits
    "9" * 5000,  # past int()'s 4,300 digits
    "\x85",
    "\u3000",
)
# A number where a number was, as a careless producer might write it.
NUMBER_LOOKALIKES = (
    "1",
    "²",
    "\uff11\uff12",
    "\u0661\u0662",
    "9" * 5000,
    "-1",
    "+1",
    " 1",
    "1.0",
    "1e3",
    "0x10",
    "NaN",
    "",
    1.5,
    -1,
    2**63,
)
# What a random string is made of: printable ASCII mostly, then control characters and a few scripts.
ALPHABET = (
    [chr(c) for c in range(32, 127)] * 4
    + [chr(c) for c in (*range(0, 32), *range(127, 160))]
    + list("éßøΩЖ中文ジョブ🙂\u00a0\u2028²³\u0661\u0662\uff13")
)


class Junk:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def text(self, max_size: int = 40) -> str:
        if self.rng.random() < 0.3:
            return self.rng.choice(EDGE_TEXT)
        return "".join(self.rng.choices(ALPHABET, k=self.rng.randint(0, max_size)))

    def scalar(self) -> Any:
        kind = self.rng.randrange(5)
        if kind == 0:
            return None
        if kind == 1:
            return self.rng.random() < 0.5
        if kind == 2:
            return self.rng.choice(EDGE_INTS) if self.rng.random() < 0.5 else self.rng.randint(-(10**6), 10**6)
        if kind == 3:
            pick = self.rng.random()
            if pick < 0.15:
                return self.rng.choice(NON_FINITE)
            return self.rng.choice(EDGE_FLOATS) if pick < 0.5 else self.rng.uniform(-1e6, 1e6)
        return self.text()

    def value(self, max_leaves: int = 25) -> Any:
        """A JSON-shaped value: a scalar, or lists and objects of them nested up to `max_leaves` scalars."""
        budget = [self.rng.randint(1, max_leaves)]

        def grow(depth: int) -> Any:
            if budget[0] <= 1 or depth > 6 or self.rng.random() < 0.4:
                budget[0] -= 1
                return self.scalar()
            if self.rng.random() < 0.5:
                return [grow(depth + 1) for _ in range(self.rng.randint(0, 5)) if budget[0] > 0]
            return {self.text(20): grow(depth + 1) for _ in range(self.rng.randint(0, 6)) if budget[0] > 0}

        return grow(0)

    def lookalike(self, value: Any) -> Any:
        """What a careless producer might put where `value` was: a number as text (ASCII or not), text for text."""
        if isinstance(value, bool):
            return self.rng.choice(("true", "false", 1, 0, None))
        if isinstance(value, int | float) or (isinstance(value, str) and value.replace(".", "", 1).isdigit()):
            return self.rng.choice(NUMBER_LOOKALIKES)
        if isinstance(value, str):
            return self.rng.choice(EDGE_TEXT)
        return self.value()

    def mutated(self, originals: list[dict[str, Any]]) -> Any:
        """A real payload with one place replaced by junk, deleted, truncated or blown up."""
        value = copy.deepcopy(self.rng.choice(originals))
        path = self.rng.choice(paths(value)[1:])
        parent = value
        for key in path[:-1]:
            parent = parent[key]
        action = self.rng.choice(["replace", "lookalike", "delete", "huge", "truncate"])
        if action == "replace":
            parent[path[-1]] = self.value()
        elif action == "lookalike":
            parent[path[-1]] = self.lookalike(parent[path[-1]])
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "huge":
            parent[path[-1]] = "x" * 300_000
        elif action == "truncate" and isinstance(parent[path[-1]], str):
            parent[path[-1]] = parent[path[-1]][: self.rng.randint(0, 3)]
        return value


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value, as the keys and indexes that reach it (the value itself first)."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, (*prefix, i))
    return out
