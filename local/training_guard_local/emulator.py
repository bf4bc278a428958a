"""An emulated AWS account in-process (moto) in which the real handlers run.

Used by `training-guard simulate`, the integration tests and the demo. Nothing here reaches a
network: moto, and the extensions' answers in front of it (answers.py), intercept every boto3 call of the process while
the emulation is active.

One emulation can stand for several accounts and regions (`use(account, region)`): the guard is
deployed per account and region, and its handlers ignore events from any other account, so a
replay of events captured in several accounts plays each in its own. moto keeps one backend per
account and region and serves each request in the account `MOTO_ACCOUNT_ID` names
(https://docs.getmoto.org/en/latest/docs/multi_account.html); the guard's resources are created in
each account and region the first time it is used.

A hub and its members (`by_credentials=True`, the organization demo): moto serves each request in the account its
credentials belong to rather than the one `MOTO_ACCOUNT_ID` names, as AWS does. The hub is moto's default account (the
environment's credentials are moto's default account's); the functions reach a member only through a session
AssumeRole handed out for the member's role, and the emulation's own calls in a member (its SageMaker, its bus, its
roles) are made `in_account(...)`. What moto lacks for this (forwarding that keeps the event, AssumeRole that needs
the role) is in `accounts_ext`.

Time: the handlers read the clock through `training_guard.adapters.clock`; `deliver(event, at=...)` runs
the handler with the clock set to `at` (a replay decides as the guard would have when the event
arrived, not today).

Training logs: `put_log_events` writes a job's lines to moto's `/aws/sagemaker/TrainingJobs` (the group made the first
time, as SageMaker's first job makes it) and reads them back with their IDs; `deliver_logs` runs the log-rules handler
on a CloudWatch Logs subscription delivery (logs_ext.py builds it: moto delivers to Lambda only through Docker).

Prices: moto has no Price List API (it answers `GetProducts` with a 404, so every price falls back to the
shipped table). Given recorded answers (`price_answers`), the functions' `pricing` client is a real boto3
client whose `GetProducts` calls botocore's Stubber answers from the recording of the type asked for
(`RecordedPriceList`): the adapter's request, paging, parsing and caching all run, and nothing reaches AWS.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from moto import mock_aws

from training_guard import contract
from training_guard.adapters import clock
from training_guard.config.model import GuardConfig
from training_guard_local import accounts_ext, answers, cloudwatch_ext, logs_ext, sagemaker_ext

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
LOG_EVENTS_FUNCTION = "training-guard-log-events"
T = TypeVar("T")
MOTO_ACCOUNT_ENV = "MOTO_ACCOUNT_ID"  # the account moto serves requests in (its multi-account docs)

_ENV = {
    "AWS_ACCESS_KEY_ID": "emulated",
    "AWS_SECRET_ACCESS_KEY": "emulated",
    "AWS_SESSION_TOKEN": "emulated",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "POWERTOOLS_SERVICE_NAME": contract.SERVICE_NAME,
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
    remaining_ms: int = 30_000  # the time left at the start of the invocation: its function's timeout

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


# What the guard asks the Price List API (adapters/price_list.py; docs/cost.md "How a price is found"), written
# out here rather than imported so that a change to the request is caught by the recordings, not followed.
PRICE_LIST_SERVICE_CODE = "AmazonSageMaker"
PRICE_LIST_COMPONENT = "Training"
PRICE_LIST_FORMAT = "aws_v1"
# The Price List Query API's endpoints are us-east-1 and ap-south-1, whatever the region priced (docs/cost.md).
PRICE_LIST_API_REGION = "us-east-1"
PRICE_LIST_PAGE_SIZE = 100  # GetProducts MaxResults: 1 to 100 (botocore's pricing model, GetProductsMaxResults)
# "Each request is also limited to no more than 1000 different metrics"
# (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricData.html)
PUT_METRIC_DATA_MAX = 1000
NO_RECORDED_ANSWER = "NoRecordedAnswer"  # the emulation's own error code: no recording of what was asked


class RecordedPriceList:
    """The AWS Price List API played from recorded `GetProducts` answers, for the emulation.

    `answers`: (region, instance type) -> the pages of one recorded answer, in call order (a page with a
    `NextToken` is followed by the next). `client()` is a real boto3 `pricing` client under botocore's
    Stubber: each request must be the one the guard makes for a type and region (service code, the three
    `TERM_MATCH` filters, format, page size, the page's token; anything else raises botocore's
    StubAssertionError), and each answer is validated against the API model. A request for anything not
    recorded gets the client error
    `NoRecordedAnswer`: to the guard, a Price List API it cannot use (the shipped table, else unknown).
    `asked` lists every request: (region, instance type, page number or None when not recorded).
    """

    def __init__(self, answers: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]]) -> None:
        self.answers = {key: [dict(page) for page in pages] for key, pages in answers.items()}
        self.asked: list[tuple[str, str, int | None]] = []
        self._client: Any = None
        self._stubber: Any = None

    def client(self) -> Any:
        """The `pricing` client the functions get (one for the emulation: its Stubber stays active)."""
        if self._client is None:
            import boto3
            from botocore.stub import Stubber

            made = boto3.client("pricing", region_name=PRICE_LIST_API_REGION)
            self._stubber = Stubber(made)
            # The answer is queued when the request is built. Handlers registered first run in the order they were
            # registered, so this one, registered before the Stubber's, queues the answer it then checks.
            made.meta.events.register_first("before-parameter-build.*.*", self._queue_answer)
            self._stubber.activate()
            self._client = made
        return self._client

    def _queue_answer(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        """Queue the answer to this request, or refuse it, before the Stubber looks: a request refused here or by
        botocore's validation leaves nothing queued that a later request could be answered with."""
        if model.name != "GetProducts":
            return  # any other call finds nothing queued and fails in the Stubber: not part of the recording
        from botocore.exceptions import StubAssertionError
        from botocore.validate import validate_parameters

        validate_parameters(params, model.input_shape)
        filters = {f.get("Field"): f.get("Value") for f in params.get("Filters") or [] if isinstance(f, Mapping)}
        region, instance_type = str(filters.get("regionCode")), str(filters.get("instanceName"))
        token = params.get("NextToken")
        wanted = {"regionCode": region, "instanceName": instance_type, "component": PRICE_LIST_COMPONENT}
        expected: dict[str, Any] = {
            "ServiceCode": PRICE_LIST_SERVICE_CODE,
            "Filters": [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in wanted.items()],
            "FormatVersion": PRICE_LIST_FORMAT,
            "MaxResults": PRICE_LIST_PAGE_SIZE,
        }
        if token is not None:
            expected["NextToken"] = token
        if dict(params) != expected:
            raise StubAssertionError(
                operation_name=model.name,
                reason=f"not the request the recordings answer (expected {expected}, got {dict(params)})",
            )
        pages = self.answers.get((region, instance_type), [])
        tokens = [page.get("NextToken") for page in pages]
        index = 0 if token is None else tokens.index(token) + 1 if token in tokens else len(pages)
        if index < len(pages):
            self.asked.append((region, instance_type, index + 1))
            self._stubber.add_response("get_products", pages[index], expected)
        else:
            self.asked.append((region, instance_type, None))
            self._stubber.add_client_error(
                "get_products",
                service_error_code=NO_RECORDED_ANSWER,
                service_message=f"the emulation has no recorded GetProducts answer for {instance_type} in {region}",
                expected_params=expected,
            )


def function_arn(name: str, account: str = ACCOUNT, region: str = REGION) -> str:
    return f"arn:aws:lambda:{region}:{account}:function:{name}"


@dataclass
class Site:
    """The guard's resources in one emulated account and region."""

    account: str
    region: str
    topic_arn: str = ""
    queue_url: str = ""  # captures every notification published to the topic
    chat_queue_url: str = ""
    chat_dead_letters_url: str = ""
    events_dead_letters_url: str = ""
    webhook_secrets: dict[str, str] = field(default_factory=dict)


class _Discard(io.TextIOBase):
    """A text stream that keeps nothing (what the handlers print while the emulation is quiet)."""

    def write(self, text: str) -> int:
        return len(text)


@functools.cache
def kept_boto3_session() -> Any:
    """One boto3 session for the process (boto3's default session inside every emulation): made after moto was
    imported (at the top of this module), so moto's stubber is among its handlers, and kept, so its loader keeps the
    service models it has read. moto's own reset (a new session for each mock) read them again for every client:
    ~0.3 s an emulation. Its clients answer what the extensions answer in front of moto (answers.py), whichever was
    made first."""
    from training_guard_local.sessions import new_session

    session = new_session()
    answers.install(session)
    return session


@contextlib.contextmanager
def mock_aws_kept_session() -> Iterator[None]:
    """moto's `mock_aws` with boto3's default session kept for the process (`kept_boto3_session`) instead of one made
    anew for the mock, which reads every service model again for its first client (~50 ms each). That session keeps
    the credentials it resolved first: the emulations and the tests give moto's accounts fixed ones."""
    import boto3

    saved, boto3.DEFAULT_SESSION = boto3.DEFAULT_SESSION, kept_boto3_session()
    try:
        with mock_aws(config={"core": {"reset_boto3_session": False}}):
            yield
    finally:
        boto3.DEFAULT_SESSION = saved


class Emulation:
    """`with Emulation(config) as aws:` gives an emulated account with the guard's resources."""

    def __init__(
        self,
        config: GuardConfig | None = None,
        *,
        webhook_urls: Mapping[str, str] | None = None,
        slack_min_interval: float = 0.0,
        quiet: bool = True,
        handler_logs: bool = True,
        account: str = ACCOUNT,
        region: str = REGION,
        price_answers: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]] | None = None,
        by_credentials: bool = False,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`webhook_urls`: what each Slack webhook's secret holds (absent: the stack's placeholder).

        `quiet`: the handlers log warnings only, and their metrics (Powertools prints them) and
        Powertools' warnings are discarded. `handler_logs=False` discards their log lines too (the
        CLI's replays, whose result lines say what the logs would). `account`, `region`: where the
        emulation starts (`use` moves it). `price_answers`: recorded GetProducts answers by (region, instance
        type) that the functions' Price List API plays (`RecordedPriceList`); None: moto's 404. `by_credentials`: a hub
        and its members (module docstring); the emulation then stays in `account`, which must be moto's default.
        `sleep`: the responder's busy wait for a claim another invocation holds; a campaign that retries as Lambda does
        gives a no-op (the responder counts the time it waited itself), not seconds of real waiting.
        """
        if by_credentials and account != ACCOUNT:
            raise ValueError(f"a hub emulation runs in moto's default account {ACCOUNT}, whose credentials it has")
        self.config = config or GuardConfig()
        self.webhook_urls = dict(webhook_urls or {})
        self.slack_min_interval = slack_min_interval
        self.quiet = quiet
        self.handler_logs = handler_logs
        # moto, with boto3's default session the process's own (kept_boto3_session) while it runs
        self._mocked = contextlib.ExitStack()
        self._saved_env: dict[str, str | None] = {}
        self._config_dir: tempfile.TemporaryDirectory[str] | None = None
        self._sites: dict[tuple[str, str], Site] = {}
        self.default_account, self.default_region = account, region
        self._site = Site(account, region)
        self._clients: dict[tuple[str, str], Any] = {}
        self._function_clients: dict[str, dict[str, Any]] = {}  # region -> service -> the functions' client
        self.price_list = RecordedPriceList(price_answers) if price_answers is not None else None
        self._pricing: Callable[[], Any] | None = self.price_list.client if self.price_list is not None else None
        self.by_credentials = by_credentials
        self._sleep = sleep
        self._extensions = contextlib.ExitStack()
        self._entered = False
        # (account, region) -> the training log group's streams written -> the event IDs read back from each
        self._log_streams: dict[tuple[str, str], dict[str, set[str]]] = {}
        # function name -> its timeout in seconds, the time left its invocations start with (30 s otherwise)
        self.function_timeouts: dict[str, int] = {}

    # the current site's resources, by their historical names
    @property
    def account(self) -> str:
        return self._site.account

    @property
    def region(self) -> str:
        return self._site.region

    @property
    def topic_arn(self) -> str:
        return self._site.topic_arn

    @property
    def queue_url(self) -> str:
        return self._site.queue_url

    @property
    def chat_queue_url(self) -> str:
        return self._site.chat_queue_url

    @property
    def chat_dead_letters_url(self) -> str:
        return self._site.chat_dead_letters_url

    @property
    def events_dead_letters_url(self) -> str:
        return self._site.events_dead_letters_url

    def sites(self) -> list[tuple[str, str]]:
        """Every (account, region) used so far, in the order first used."""
        return list(self._sites)

    def __enter__(self) -> Emulation:
        if self._entered:  # a second entry would snapshot the first's environment, and its exit close the first's
            raise RuntimeError("this Emulation is already entered: enter it once at a time")
        self._entered = True
        try:
            return self._enter()
        except BaseException:
            self.__exit__(None, None, None)  # `with` calls no __exit__ for a failed __enter__: undo what was done
            raise

    def _enter(self) -> Emulation:
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
        self._mocked.enter_context(mock_aws_kept_session())
        sagemaker_ext.install(kept_boto3_session())
        sagemaker_ext.forget_stop_calls()
        cloudwatch_ext.install(kept_boto3_session())
        cloudwatch_ext.reset()
        first, self._site = self._site, Site("", "")
        self.use(first.account, first.region)
        if self.by_credentials:
            # Every request in the account of its credentials: the hub's (moto's default account), or a member's.
            os.environ.pop(MOTO_ACCOUNT_ENV, None)
            self._extensions.enter_context(accounts_ext.installed(kept_boto3_session()))
        return self

    @contextlib.contextmanager
    def in_account(self, account: str | None) -> Iterator[None]:
        """The emulation's own calls inside the block are served in `account` (None or the current one: as they are);
        no function of the guard runs inside it."""
        if account is None or account == self.account:
            yield
            return
        saved = os.environ.get(MOTO_ACCOUNT_ENV)
        os.environ[MOTO_ACCOUNT_ENV] = account
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop(MOTO_ACCOUNT_ENV, None)
            else:
                os.environ[MOTO_ACCOUNT_ENV] = saved

    def use(self, account: str, region: str) -> Site:
        """Act in this account and region from now on (the guard's resources are created there the
        first time): what the handlers see (the environment, their clients, the invoked function's
        ARN) becomes the stack deployed there."""
        previous = self._site
        if (account, region) == (previous.account, previous.region):
            return previous
        self._set_env(MOTO_ACCOUNT_ENV, account)
        self._set_env("AWS_REGION", region)
        self._set_env("AWS_DEFAULT_REGION", region)
        site = self._sites.get((account, region))
        self._site = site or Site(account, region)
        if site is None:
            site = self._sites[(account, region)] = self._site
            self._create_resources(site)
            site.events_dead_letters_url = self.client("sqs").create_queue(QueueName=EVENTS_DEAD_LETTERS)["QueueUrl"]
            if self.config.slack.enabled:
                self._create_chat(site)
        self._set_env(contract.ENV_TOPIC_ARN, site.topic_arn)
        self._set_env(contract.ENV_REJECTED_EVENTS_QUEUE_URL, site.events_dead_letters_url)
        if self.config.slack.enabled:
            self._set_env(contract.ENV_WEBHOOK_SECRETS, json.dumps(site.webhook_secrets))
            self._set_env(contract.ENV_DEAD_LETTER_QUEUE_URL, site.chat_dead_letters_url)
            self._set_env(contract.ENV_SLACK_MIN_INTERVAL, str(self.slack_min_interval))
            if self.config.slack.app_mode:
                # The stack gives it to the job-events function only (its card updates, chat.py).
                self._set_env(contract.ENV_CHAT_QUEUE_URL, site.chat_queue_url)
        self._install_root()
        return site

    def _install_root(self) -> None:
        """The functions' composition root for the current site: its settings read from the environment set here,
        its clients this region's (made once: moto reads each request's account from MOTO_ACCOUNT_ID)."""
        with handler_output_to_stderr():
            from training_guard.handlers import wiring
        clients = functools.partial(self.function_client, region=self.region)
        wiring.install(wiring.Root(clients, pricing=self._pricing, sleep=self._sleep))

    def rebuild_functions(self) -> None:
        """A new composition root for the functions: they read the environment once, as a container does, so a change
        to it reaches them only through a new one (as a new container would)."""
        self._install_root()

    def price_with(self, pricing: Callable[[], Any]) -> None:
        """The functions' Price List client from now on (moto has none): a test's stubbed one, say."""
        self._pricing = pricing
        self._install_root()

    def function_client(self, service: str, *, region: str | None = None) -> Any:
        """The client the functions use for `service` in `region` (the current one by default), made the way their
        container makes it (adapters/clients.py) and kept for the emulation."""
        from training_guard.adapters.clients import new_client

        region = region or self.region
        kept = self._function_clients.setdefault(region, {})
        made = kept.get(service)
        if made is None:
            with self._region(region):
                made = kept[service] = new_client(service)
        return made

    @contextlib.contextmanager
    def _region(self, region: str) -> Iterator[None]:
        """boto3 makes a client in the environment's region: this one while it is made."""
        saved = os.environ.get("AWS_DEFAULT_REGION"), os.environ.get("AWS_REGION")
        os.environ["AWS_DEFAULT_REGION"] = os.environ["AWS_REGION"] = region
        try:
            yield
        finally:
            for key, value in zip(("AWS_DEFAULT_REGION", "AWS_REGION"), saved, strict=True):
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def context(self, function_name: str = "training-guard-job-events") -> LambdaContext:
        """The Lambda context of the guard's function in the current account and region."""
        return LambdaContext(
            function_name=function_name,
            invoked_function_arn=function_arn(function_name, self.account, self.region),
            remaining_ms=self.function_timeouts.get(function_name, 30) * 1000,
        )

    def enter_context(self, manager: contextlib.AbstractContextManager[T]) -> T:
        """Enter `manager` for the rest of the emulation: it is exited first when the emulation ends, before moto's
        mock and the environment are restored (a `mock.patch.dict(os.environ, ...)` entered here snapshots the
        emulation's environment, so it must be undone while that environment still stands)."""
        return self._extensions.enter_context(manager)

    def _set_env(self, key: str, value: str) -> None:
        self._saved_env.setdefault(key, os.environ.get(key))
        os.environ[key] = value

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Every step runs even when one before it fails (moto stopped, the environment restored); the first failure
        # is raised after all of them.
        failures: list[BaseException] = []
        for step in (self._extensions.close, self._mocked.close, self._restore_env, self._tidy):
            try:
                step()
            except BaseException as failure:  # noqa: BLE001 - raised below, after the other steps
                failures.append(failure)
        self._entered = False
        if failures:
            raise failures[0]

    def _restore_env(self) -> None:
        saved, self._saved_env = self._saved_env, {}
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def _tidy(self) -> None:
        if self._config_dir is not None:
            self._config_dir.cleanup()
            self._config_dir = None
        self._clients.clear()
        self._function_clients.clear()
        # moto's accounts are gone with its mock: entered again, every site's resources are made again
        self._sites.clear()
        self._log_streams.clear()
        _forget_root()

    # --- resources ---------------------------------------------------------------------------
    def client(self, service: str) -> Any:
        """A client in the current region (and, through MOTO_ACCOUNT_ID, account); built once: a
        client per call cost more than the handler itself on long replays."""
        key = (service, self.region)
        made = self._clients.get(key)
        if made is None:
            import boto3

            made = self._clients[key] = boto3.client(service, region_name=self.region)
        return made

    def _create_resources(self, site: Site) -> None:
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
        site.topic_arn = sns.create_topic(Name=TOPIC)["TopicArn"]
        sqs = self.client("sqs")
        site.queue_url = sqs.create_queue(QueueName=CAPTURE_QUEUE)["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=site.queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sns.subscribe(
            TopicArn=site.topic_arn,
            Protocol="sqs",
            Endpoint=queue_arn,
            Attributes={"RawMessageDelivery": "true"},
        )

    def _create_chat(self, site: Site) -> None:
        """What the stack's chat path creates: webhook secrets, the chat queue and its DLQ."""
        secrets = self.client("secretsmanager")
        for name, hook in self.config.slack.webhooks.items():
            secret_name = hook.secret_name or f"training-guard/slack/{name}"
            value = self.webhook_urls.get(name, contract.WEBHOOK_PLACEHOLDER)
            site.webhook_secrets[name] = secrets.create_secret(Name=secret_name, SecretString=value)["ARN"]
        sqs = self.client("sqs")
        site.chat_dead_letters_url = sqs.create_queue(QueueName=CHAT_DEAD_LETTERS)["QueueUrl"]
        dlq_arn = self._queue_arn(site.chat_dead_letters_url)
        site.chat_queue_url = sqs.create_queue(
            QueueName=CHAT_QUEUE,
            Attributes={
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": CHAT_MAX_RECEIVES})
            },
        )["QueueUrl"]
        self.client("sns").subscribe(
            TopicArn=site.topic_arn,
            Protocol="sqs",
            Endpoint=self._queue_arn(site.chat_queue_url),
            Attributes={"RawMessageDelivery": "true"},
        )

    def _queue_arn(self, url: str) -> str:
        attributes = self.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return str(attributes["Attributes"]["QueueArn"])

    def pump_chat(self, *, rounds: int = 1, at: datetime | None = None) -> list[dict[str, Any]]:
        """Play the SQS event source mapping: batches from the chat queue to the real notifier.

        Messages the handler reports as failed stay in the queue and are received again on the
        next round (as after their visibility timeout); after CHAT_MAX_RECEIVES receives SQS's
        redrive policy moves them to the dead-letter queue. Returns each batch's response. Without
        Slack in the configuration there is no chat queue and nothing to pump. `at`: the notifier's
        clock (default: the real one).
        """
        if not self.chat_queue_url:
            return []
        slack_notifier = _handler_module("slack_notifier")
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
                response = self.invoke(slack_notifier.handler, event, self.context("slack-notifier"), at=at)
                responses.append(response)
                failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
                for message in batch:
                    if message["MessageId"] not in failed:
                        sqs.delete_message(QueueUrl=self.chat_queue_url, ReceiptHandle=message["ReceiptHandle"])
                if failed:
                    break  # the failed ones come back in the next round
        return responses

    def invoke(
        self, handler: Callable[..., Any], event: Any, context: LambdaContext, *, at: datetime | None = None
    ) -> dict[str, Any]:
        """Run one handler as Lambda would, on the clock `at` (None: the real clock).

        What the handler prints (Powertools' metrics) is discarded when quiet, else sent to stderr,
        never to stdout: the CLI's stdout is for its own results.
        """
        sink: Any = _Discard() if self.quiet else sys.stderr
        with contextlib.ExitStack() as stack:
            stack.enter_context(contextlib.redirect_stdout(sink))
            if at is not None:
                stack.enter_context(replay_clock(at))
            if self.quiet:
                stack.enter_context(warnings.catch_warnings())
                warnings.simplefilter("ignore")  # e.g. Powertools' "No application metrics to publish"
            if not self.handler_logs:
                stack.enter_context(_silenced(logging.getLogger(os.environ.get("POWERTOOLS_SERVICE_NAME", ""))))
            return dict(handler(event, context))

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
    def put_job(self, detail: Mapping[str, Any], *, account: str | None = None) -> None:
        sagemaker_ext.put_job(account or self.account, self.region, detail)

    def deliver(self, event: Any, *, at: datetime | None = None) -> dict[str, Any]:
        """Bring the emulated job to the event's state, run the real job-events handler on it.

        `at`: the clock the handler reads (a replay passes the event's time); None: the real clock.
        """
        detail = event.get("detail") if isinstance(event, Mapping) else None
        if (
            isinstance(detail, Mapping)
            and isinstance(detail.get("TrainingJobName"), str)
            and detail.get("TrainingJobStatus")
        ):
            with replay_clock(at) if at is not None else contextlib.nullcontext():
                self.put_job(detail)
        return self.invoke(_handler_module("job_events").handler, event, self.context(), at=at)

    def deliver_alarm(self, event: Any, *, at: datetime | None = None) -> dict[str, Any]:
        """Run the real alarm-events handler on a CloudWatch alarm state-change event."""
        return self.invoke(_handler_module("alarm_events").handler, event, self.context("alarm-events"), at=at)

    def sweep(self, *, at: datetime | None = None) -> dict[str, Any]:
        """Run the real sweeper handler once (as its schedule would)."""
        return self.invoke(_handler_module("sweeper").handler, {}, self.context("sweeper"), at=at)

    def put_metric(
        self, job: str, metric: str, values: list[float], *, at: datetime | None = None, account: str | None = None
    ) -> None:
        """Datapoints SageMaker would have scraped from the job's logs (namespace /aws/sagemaker/TrainingJobs), in the
        job's account (None: the current one)."""
        at = at or datetime.now(UTC)
        with self.in_account(account):
            self._put_metric_data(
                [
                    {
                        "MetricName": metric,
                        "Dimensions": [{"Name": contract.JOB_DIMENSION, "Value": job}],
                        "Value": value,
                        "Timestamp": at,
                    }
                    for value in values
                ]
            )

    def _put_metric_data(self, data: list[dict[str, Any]]) -> None:
        for start in range(0, len(data), PUT_METRIC_DATA_MAX):
            self.client("cloudwatch").put_metric_data(
                Namespace=contract.SAGEMAKER_TRAINING_NAMESPACE, MetricData=data[start : start + PUT_METRIC_DATA_MAX]
            )

    def put_host_metric(
        self,
        job: str,
        host: str,
        metric: str,
        values: Sequence[float],
        *,
        until: datetime,
        account: str | None = None,
    ) -> None:
        """An instance metric of one of the job's hosts as SageMaker publishes it: namespace
        /aws/sagemaker/TrainingJobs, dimension `Host = <job>/<host>` (`algo-1`, ...), one datapoint a minute, the
        last at `until` (docs/cost.md "How it is measured"; the sweeper reads them so), in the job's account (None:
        the current one)."""
        count = len(values)
        data = [
            {
                "MetricName": metric,
                "Dimensions": [{"Name": contract.HOST_DIMENSION, "Value": f"{job}/{host}"}],
                "Value": value,
                "Timestamp": until - timedelta(minutes=count - 1 - i),
            }
            for i, value in enumerate(values)
        ]
        with self.in_account(account):
            self._put_metric_data(data)

    def put_log_events(self, stream: str, events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """A job writes `events` ({"timestamp", "message"}, in order) to its stream of the training log group (made the
        first time, as SageMaker's first job makes it); returns them as CloudWatch Logs stored them, with their IDs."""
        logs = self.client("logs")
        group = contract.TRAINING_LOG_GROUP
        streams = self._log_streams.setdefault((self.account, self.region), {})
        if not streams and not logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]:
            logs.create_log_group(logGroupName=group)
        if stream not in streams:
            logs.create_log_stream(logGroupName=group, logStreamName=stream)
            streams[stream] = set()
        if not events:
            return []
        logs.put_log_events(
            logGroupName=group,
            logStreamName=stream,
            logEvents=[{"timestamp": int(e["timestamp"]), "message": str(e["message"])} for e in events],
        )
        seen = streams[stream]
        stored: list[dict[str, Any]] = []
        pages = logs.get_paginator("filter_log_events").paginate(
            logGroupName=group, logStreamNames=[stream], startTime=int(events[0]["timestamp"])
        )
        for page in pages:
            for found in page["events"]:
                if found["eventId"] not in seen:
                    seen.add(found["eventId"])
                    # AWS's event IDs are 56 digits (moto counts from 0): ordered as text as they are as numbers
                    event_id = str(found["eventId"]).zfill(56)
                    stored.append({"id": event_id, "timestamp": found["timestamp"], "message": found["message"]})
        return stored

    def deliver_logs(
        self, event: Any, *, at: datetime | None = None, handler: Callable[..., Any] | None = None
    ) -> dict[str, Any]:
        """Run the log-rules function (`handler`; None: the real one) on a CloudWatch Logs subscription delivery."""
        function = handler or _handler_module(logs_ext.LOG_EVENTS_HANDLER.rsplit(".", 2)[1]).handler
        return self.invoke(function, event, self.context(LOG_EVENTS_FUNCTION), at=at)

    def alarm_names(self) -> list[str]:
        alarms = self.client("cloudwatch").describe_alarms(AlarmNamePrefix=contract.ALARM_NAME_PREFIX)
        return sorted(a["AlarmName"] for a in alarms["MetricAlarms"])

    def notifications(self) -> list[dict[str, Any]]:
        """Drain the capture queue: the notification documents published since the last call.

        Also forgets what moto keeps of each publish and each deleted message (nothing reads it, and
        over a long replay it grew by kilobytes per event).
        """
        sqs = self.client("sqs")
        out: list[dict[str, Any]] = []
        while True:
            batch = sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get("Messages", [])
            out += [json.loads(message["Body"]) for message in batch]
            if batch:
                sqs.delete_message_batch(
                    QueueUrl=self.queue_url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
                )
            if len(batch) < 10:  # moto returns every visible message up to the maximum: the queue is empty
                break
        _forget_history(self.account, self.region, self.topic_arn, CAPTURE_QUEUE)
        return out

    def set_contributors(self, alarm_name: str, contributors: list[Mapping[str, str]]) -> None:
        """A fleet guard's contributors in ALARM now (moto evaluates no Metrics Insights alarm)."""
        cloudwatch_ext.set_contributors(self.account, self.region, alarm_name, contributors)

    def job_status(self, name: str | None, *, account: str | None = None) -> str | None:
        return sagemaker_ext.job_status(account or self.account, self.region, name) if name else None

    def finish_stopping(self, name: str, *, account: str | None = None) -> bool:
        return sagemaker_ext.finish_stopping(account or self.account, self.region, name)

    def job_tags(self, name: str) -> dict[str, str]:
        arn = f"arn:aws:sagemaker:{self.region}:{self.account}:training-job/{name}"
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


def _forget_history(account: str, region: str, topic_arn: str, queue_name: str) -> None:
    """moto keeps every message published to a topic, and every receipt handle deleted from a queue."""
    from moto.sns.models import sns_backends
    from moto.sqs.models import sqs_backends

    topic = sns_backends[account][region].topics.get(topic_arn)
    if topic is not None:
        topic.sent_notifications.clear()
    queue = sqs_backends[account][region].queues.get(queue_name)
    if queue is not None:
        queue.deleted_messages.clear()


@contextlib.contextmanager
def replay_clock(at: datetime) -> Iterator[None]:
    """The functions read the time through training_guard.adapters.clock; inside this block it is `at`."""
    real = clock.utcnow
    clock.utcnow = lambda: at
    try:
        yield
    finally:
        clock.utcnow = real


@contextlib.contextmanager
def _silenced(logger: logging.Logger) -> Iterator[None]:
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def _handler_module(name: str) -> Any:
    """A handler module, imported (the first time) with its Logger bound to stderr."""
    with handler_output_to_stderr():
        return importlib.import_module(f"training_guard.handlers.{name}")


def _forget_root() -> None:
    with handler_output_to_stderr():
        from training_guard.handlers import wiring

    wiring.reset()
