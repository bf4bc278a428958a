"""boto3 clients with the guard's retry policy, built once per execution environment."""

from __future__ import annotations

from functools import cache
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

# Standard retry mode: exponential backoff with jitter on throttling and 5xx, bounded attempts,
# short timeouts so a stuck call fails inside the function's time budget and is retried.
RETRY_CONFIG = Config(
    # total_max_attempts counts the first try too (max_attempts would count retries only)
    retries={"mode": "standard", "total_max_attempts": 5},
    connect_timeout=3,
    read_timeout=10,
)


@cache
def client(service: str) -> Any:
    return boto3.client(service, config=RETRY_CONFIG)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def error_message(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Message", ""))
