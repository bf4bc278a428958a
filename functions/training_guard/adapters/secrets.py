"""Secrets Manager: webhook URLs, read through a small in-memory cache (5 minutes)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from training_guard.errors import ActionFailed

CACHE_SECONDS = 300.0


class CachedSecrets:
    def __init__(
        self, client: Any, *, max_age: float = CACHE_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._client = client
        self._max_age = max_age
        self._clock = clock
        self._cache: dict[str, tuple[float, str]] = {}

    def get(self, secret_id: str) -> str:
        now = self._clock()
        cached = self._cache.get(secret_id)
        if cached is not None and now - cached[0] < self._max_age:
            return cached[1]
        try:
            value = str(self._client.get_secret_value(SecretId=secret_id)["SecretString"])
        except ClientError as exc:
            raise ActionFailed(f"read secret {secret_id}", exc) from exc  # names the secret, never its value
        self._cache[secret_id] = (now, value)
        return value
