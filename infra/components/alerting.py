"""The notification topic: one message per transition, encrypted, TLS-only.

Every subscription has a dead-letter queue, so a notification SNS cannot deliver (a bouncing
address, a deleted queue) is kept rather than lost.
"""

from __future__ import annotations

from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.components.queues import DeadLetterQueue


class Alerting(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey, emails: tuple[str, ...]) -> None:
        super().__init__(scope, construct_id)
        self._key = key
        self._dead_letters: sqs.IQueue | None = None
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="Training Guard",
            master_key=key,
            enforce_ssl=True,
        )
        for email in emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email, dead_letter_queue=self.dead_letters))

    @property
    def dead_letters(self) -> sqs.IQueue:
        """The subscriptions' dead-letter queue, created with the first subscription."""
        if self._dead_letters is None:
            self._dead_letters = DeadLetterQueue(self, "DeadLetters", key=self._key).queue
        return self._dead_letters
