"""An emulated AWS account in-process (moto) in which the real handlers run.

Used by `training-guard simulate`, the integration tests and the demo. Nothing here reaches a
network: moto intercepts every boto3 call of the process while the emulation is active.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from moto import mock_aws

from training_guard import contract
from training_guard.config import GuardConfig
from training_guard_local import cloudwatch_ext, sagemaker_ext

ACCOUNT = "123456789012"  # moto's default account
REGION = "us-east-1"
TABLE = "training-guard-state"
TOPIC = "training-guard-notifications"
CAPTURE_QUEUE = "training-guard-capture"
CHAT_QUEUE = "training-guard-chat"
EVENTS_DEAD_LETTERS = "training-guard-events-dead-letters"
CHAT_DEAD_LETTERS = "training-guard-chat-dead-letters"
CHAT_MAX_RECEIVES = 5  # as the stack's redrive policy
FUNCTION_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:training-guard-job-events"

_ENV = {
    "AWS_ACCESS_KEY_ID": "emulated",
    "AWS_SECRET_ACCESS_KEY": "emulated",
    "AWS_SESSION_TOKEN": "emulated",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "POWERTOOLS_SERVICE_NAME": "training-guard",
    "POWERTOOLS_METRICS_NAMESPACE": contract.GUARD_METRICS_NAMESPACE,
}


@dataclass(frozen=True)
class LambdaContext:
    """The part of the Lambda context object the handlers and Powertools read."""

    function_name: str = "training-guard-job-events"
    function_version: str = "$LATEST"
    invoked_function_arn: str = FUNCTION_ARN
    memory_limit_in_mb: int = 256
    aws_request_id: str = "emulated-request"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


class Emulation:
    """`with Emulation(config) as aws:` gives an emulated account with the guard's resources."""

    def __init__(
        self,
        config: GuardConfig | None = None,
        *,
        webhook_urls: Mapping[str, str] | None = None,
        slack_min_interval: float = 0.0,
        quiet: bool = True,
    ) -> None:
        """`webhook_urls`: what each Slack webhook's secret holds (absent: the stack's placeholder)."""
        self.config = config or GuardConfig()
        self.webhook_urls = dict(webhook_urls or {})
        self.slack_min_interval = slack_min_interval
        self.quiet = quiet
        self._mock = mock_aws()
        self._saved_env: dict[str, str | None] = {}
        self._config_dir: tempfile.TemporaryDirectory[str] | None = None
        self.topic_arn = ""
        self.queue_url = ""
        self.chat_queue_url = ""
        self.chat_dead_letters_url = ""
        self.events_dead_letters_url = ""

    def __enter__(self) -> Emulation:
        env = dict(_ENV)
        # As the stack does: the configuration is a JSON file the environment names (the stack ships
        # it in a layer at /opt/training-guard/config.json), never inline.
        self._config_dir = tempfile.TemporaryDirectory(prefix="training-guard-emulation-")
        config_file = Path(self._config_dir.name) / "config.json"
        config_file.write_text(self.config.to_json(), encoding="utf-8")
        env[contract.ENV_CONFIG_FILE] = str(config_file)
        self._saved_env[contract.ENV_CONFIG] = os.environ.pop(contract.ENV_CONFIG, None)
        env[contract.ENV_TABLE] = TABLE
        if self.quiet:
            env["POWERTOOLS_LOG_LEVEL"] = "WARNING"
            env["POWERTOOLS_METRICS_DISABLED"] = "true"
        for key, value in env.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        self._mock.start()
        sagemaker_ext.install()
        cloudwatch_ext.install()
        cloudwatch_ext.reset()
        self._create_resources()
        self._set_env(contract.ENV_TOPIC_ARN, self.topic_arn)
        self.events_dead_letters_url = self.client("sqs").create_queue(QueueName=EVENTS_DEAD_LETTERS)["QueueUrl"]
        self._set_env(contract.ENV_REJECTED_EVENTS_QUEUE_URL, self.events_dead_letters_url)
        if self.config.slack.enabled:
            self._create_chat()
        _reset_handler_caches()
        return self

    def _set_env(self, key: str, value: str) -> None:
        self._saved_env.setdefault(key, os.environ.get(key))
        os.environ[key] = value

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._mock.stop()
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if self._config_dir is not None:
            self._config_dir.cleanup()
            self._config_dir = None
        _reset_handler_caches()

    # --- resources ---------------------------------------------------------------------------
    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(service, region_name=REGION)

    def _create_resources(self) -> None:
        self.client("dynamodb").create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": contract.TABLE_PARTITION_KEY, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": contract.TABLE_PARTITION_KEY, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        self.client("dynamodb").update_time_to_live(
            TableName=TABLE,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": contract.TABLE_TTL_ATTRIBUTE},
        )
        sns = self.client("sns")
        self.topic_arn = sns.create_topic(Name=TOPIC)["TopicArn"]
        sqs = self.client("sqs")
        self.queue_url = sqs.create_queue(QueueName=CAPTURE_QUEUE)["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sns.subscribe(
            TopicArn=self.topic_arn,
            Protocol="sqs",
            Endpoint=queue_arn,
            Attributes={"RawMessageDelivery": "true"},
        )

    def _create_chat(self) -> None:
        """What the stack's chat path creates: webhook secrets, the chat queue and its DLQ."""
        secrets = self.client("secretsmanager")
        secret_ids: dict[str, str] = {}
        for name, hook in self.config.slack.webhooks.items():
            secret_name = hook.secret_name or f"training-guard/slack/{name}"
            value = self.webhook_urls.get(name, contract.WEBHOOK_PLACEHOLDER)
            secret_ids[name] = secrets.create_secret(Name=secret_name, SecretString=value)["ARN"]
        sqs = self.client("sqs")
        self.chat_dead_letters_url = sqs.create_queue(QueueName=CHAT_DEAD_LETTERS)["QueueUrl"]
        dlq_arn = self._queue_arn(self.chat_dead_letters_url)
        self.chat_queue_url = sqs.create_queue(
            QueueName=CHAT_QUEUE,
            Attributes={
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": CHAT_MAX_RECEIVES})
            },
        )["QueueUrl"]
        self.client("sns").subscribe(
            TopicArn=self.topic_arn,
            Protocol="sqs",
            Endpoint=self._queue_arn(self.chat_queue_url),
            Attributes={"RawMessageDelivery": "true"},
        )
        self._set_env(contract.ENV_WEBHOOK_SECRETS, json.dumps(secret_ids))
        self._set_env(contract.ENV_DEAD_LETTER_QUEUE_URL, self.chat_dead_letters_url)
        self._set_env(contract.ENV_SLACK_MIN_INTERVAL, str(self.slack_min_interval))

    def _queue_arn(self, url: str) -> str:
        attributes = self.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return str(attributes["Attributes"]["QueueArn"])

    def pump_chat(self, *, rounds: int = 1) -> list[dict[str, Any]]:
        """Play the SQS event source mapping: batches from the chat queue to the real notifier.

        Messages the handler reports as failed stay in the queue and are received again on the
        next round (as after their visibility timeout); after CHAT_MAX_RECEIVES receives SQS's
        redrive policy moves them to the dead-letter queue. Returns each batch's response.
        """
        with handler_output_to_stderr():
            from training_guard.handlers import slack_notifier
        sqs = self.client("sqs")
        responses: list[dict[str, Any]] = []
        for _ in range(rounds):
            while True:
                batch = sqs.receive_message(
                    QueueUrl=self.chat_queue_url, MaxNumberOfMessages=5, VisibilityTimeout=0
                ).get("Messages", [])
                if not batch:
                    break
                event = {
                    "Records": [
                        {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"]}
                        for m in batch
                    ]
                }
                with handler_output_to_stderr():
                    response = dict(slack_notifier.handler(event, LambdaContext(function_name="slack-notifier")))
                responses.append(response)
                failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
                for message in batch:
                    if message["MessageId"] not in failed:
                        sqs.delete_message(QueueUrl=self.chat_queue_url, ReceiptHandle=message["ReceiptHandle"])
                if failed:
                    break  # the failed ones come back in the next round
        return responses

    def chat_dead_letters(self) -> list[dict[str, Any]]:
        """Messages in the chat dead-letter queue: body and the reason attribute (if parked)."""
        return self._dead_letters(self.chat_dead_letters_url)

    def events_dead_letters(self) -> list[dict[str, Any]]:
        """Unusable events the job-events and alarm-events handlers parked, with their reason."""
        return self._dead_letters(self.events_dead_letters_url)

    def _dead_letters(self, url: str) -> list[dict[str, Any]]:
        sqs = self.client("sqs")
        out: list[dict[str, Any]] = []
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]).get(
            "Messages", []
        ):
            reason = m.get("MessageAttributes", {}).get("reason", {}).get("StringValue")
            out.append({"body": m["Body"], "reason": reason})
        return out

    # --- driving the guard ---------------------------------------------------------------------
    def put_job(self, detail: Mapping[str, Any]) -> None:
        sagemaker_ext.put_job(ACCOUNT, REGION, detail)

    def deliver(self, event: Any) -> dict[str, Any]:
        """Bring the emulated job to the event's state, run the real job-events handler on it."""
        detail = event.get("detail") if isinstance(event, Mapping) else None
        if (
            isinstance(detail, Mapping)
            and isinstance(detail.get("TrainingJobName"), str)
            and detail.get("TrainingJobStatus")
        ):
            self.put_job(detail)
        with handler_output_to_stderr():
            from training_guard.handlers import job_events

            return dict(job_events.handler(event, LambdaContext()))

    def deliver_alarm(self, event: Any) -> dict[str, Any]:
        """Run the real alarm-events handler on a CloudWatch alarm state-change event."""
        with handler_output_to_stderr():
            from training_guard.handlers import alarm_events

            return dict(alarm_events.handler(event, LambdaContext(function_name="alarm-events")))

    def sweep(self) -> dict[str, Any]:
        """Run the real sweeper handler once (as its schedule would)."""
        with handler_output_to_stderr():
            from training_guard.handlers import sweeper

            return dict(sweeper.handler({}, LambdaContext(function_name="sweeper")))

    def put_metric(self, job: str, metric: str, values: list[float], *, at: datetime | None = None) -> None:
        """Datapoints SageMaker would have scraped from the job's logs (namespace /aws/sagemaker/TrainingJobs)."""
        at = at or datetime.now(UTC)
        self.client("cloudwatch").put_metric_data(
            Namespace=contract.SAGEMAKER_TRAINING_NAMESPACE,
            MetricData=[
                {
                    "MetricName": metric,
                    "Dimensions": [{"Name": contract.JOB_DIMENSION, "Value": job}],
                    "Value": value,
                    "Timestamp": at,
                }
                for value in values
            ],
        )

    def alarm_names(self) -> list[str]:
        alarms = self.client("cloudwatch").describe_alarms(AlarmNamePrefix=contract.ALARM_NAME_PREFIX)
        return sorted(a["AlarmName"] for a in alarms["MetricAlarms"])

    def notifications(self) -> list[dict[str, Any]]:
        """Drain the capture queue: the notification documents published since the last call."""
        sqs = self.client("sqs")
        out: list[dict[str, Any]] = []
        while True:
            batch = sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get("Messages", [])
            if not batch:
                return out
            for message in batch:
                out.append(json.loads(message["Body"]))
                sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])

    def set_contributors(self, alarm_name: str, contributors: list[Mapping[str, str]]) -> None:
        """A fleet guard's contributors in ALARM now (moto evaluates no Metrics Insights alarm)."""
        cloudwatch_ext.set_contributors(ACCOUNT, REGION, alarm_name, contributors)

    def job_status(self, name: str) -> str | None:
        return sagemaker_ext.job_status(ACCOUNT, REGION, name)

    def finish_stopping(self, name: str) -> bool:
        return sagemaker_ext.finish_stopping(ACCOUNT, REGION, name)

    def job_tags(self, name: str) -> dict[str, str]:
        arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name}"
        tags = self.client("sagemaker").list_tags(ResourceArn=arn)["Tags"]
        return {t["Key"]: t["Value"] for t in tags}


@contextlib.contextmanager
def handler_output_to_stderr() -> Iterator[None]:
    """Powertools writes logs and metrics to stdout; the CLI's stdout is for its own results.

    The handler module binds its Logger to `sys.stdout` when first imported, so the first import
    must happen inside this block too.
    """
    with contextlib.redirect_stdout(sys.stderr):
        yield


def _reset_handler_caches() -> None:
    with handler_output_to_stderr():
        from training_guard.handlers import wiring

    wiring.reset()
