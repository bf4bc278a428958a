"""Dead-letter queues: where what could not be handled waits for an operator."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

DEAD_LETTER_RETENTION = Duration.days(14)  # SQS's maximum


class DeadLetterQueue(Construct):
    """An encrypted, TLS-only queue that keeps what could not be handled for 14 days."""

    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            retention_period=DEAD_LETTER_RETENTION,
        )
