"""Dead-letter queues: where what could not be handled waits for an operator."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

DEAD_LETTER_RETENTION = Duration.days(14)  # SQS's maximum


def encrypted_queue(scope: Construct, construct_id: str, *, key: kms.IKey, **props: Any) -> sqs.Queue:
    """Every queue of the guard: encrypted with its key and TLS-only."""
    return sqs.Queue(
        scope, construct_id, encryption=sqs.QueueEncryption.KMS, encryption_master_key=key, enforce_ssl=True, **props
    )


class DeadLetterQueue(Construct):
    """An encrypted, TLS-only queue that keeps what could not be handled for 14 days."""

    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.queue = encrypted_queue(self, "Queue", key=key, retention_period=DEAD_LETTER_RETENTION)
