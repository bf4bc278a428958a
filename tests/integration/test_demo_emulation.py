"""What the emulation adds for the demo's cost lines: the Price List API played from recorded GetProducts answers
(botocore's Stubber behind the functions' own `pricing_client` seam) and instance metrics per host."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, ParamValidationError, StubAssertionError

from tests.helpers import EVENTS_DIR
from training_guard import contract
from training_guard.adapters.cloudwatch import TrainingMetrics
from training_guard.adapters.price_list import PriceList
from training_guard.config.model import GuardConfig
from training_guard.domain.pricing import SOURCE_API, SOURCE_TABLE
from training_guard.handlers import wiring
from training_guard_local.emulator import NO_RECORDED_ANSWER, TABLE, Emulation

pytestmark = pytest.mark.integration

G5 = "ml.g5.2xlarge"
PAGES: list[dict[str, Any]] = json.loads(
    (EVENTS_DIR / "pricing" / "get_products_ml_g5_2xlarge_us_east_1_two_pages.json").read_text()
)
NOW = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)


@pytest.fixture
def aws() -> Iterator[Emulation]:
    with Emulation(GuardConfig(), price_answers={("us-east-1", G5): PAGES}) as emulation:
        yield emulation


def guard_request(instance_type: str, **more: Any) -> dict[str, Any]:
    """The GetProducts request the guard makes, as docs/cost.md states it."""
    return {
        "ServiceCode": "AmazonSageMaker",
        "Filters": [
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-east-1"},
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
            {"Type": "TERM_MATCH", "Field": "component", "Value": "Training"},
        ],
        "FormatVersion": "aws_v1",
        "MaxResults": 100,
        **more,
    }


def test_the_functions_price_list_reads_both_recorded_pages_once_then_its_cache(aws: Emulation) -> None:
    prices = wiring.root().price_list  # what the handlers price with, built as in Lambda
    quote = prices.hourly_price("us-east-1", G5, now=NOW)
    assert quote is not None
    assert (quote.usd_per_hour, quote.source, quote.as_of, quote.reference) == (
        1.515,
        SOURCE_API,
        "2026-08-20",
        "TESTSKUG52XL0001",
    )
    assert aws.price_list is not None
    assert aws.price_list.asked == [("us-east-1", G5, 1), ("us-east-1", G5, 2)]
    assert prices.take_problems() == []
    # cached in the state table as the API's answer, for a day, as for a real answer
    item = aws.client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": f"price#us-east-1#{G5}"}})["Item"]
    assert (item["usd_per_hour"], item["source"]) == ({"N": "1.515"}, {"S": SOURCE_API})
    assert int(item[contract.TABLE_TTL_ATTRIBUTE]["N"]) == int(NOW.timestamp()) + 86400
    # a new container's price list finds it there: the recording is not asked again
    fresh = PriceList(
        pricing_factory=wiring.root().pricing_client, dynamodb=aws.client("dynamodb"), table=TABLE, memory={}
    )
    again = fresh.hourly_price("us-east-1", G5, now=NOW + timedelta(hours=1))
    assert again is not None
    assert again.usd_per_hour == 1.515
    assert len(aws.price_list.asked) == 2


def test_a_type_without_a_recording_is_refused_as_an_api_the_guard_cannot_use(aws: Emulation) -> None:
    prices = wiring.root().price_list
    # ml.m5.large: the shipped table's entry; ml.g5.12xlarge: no entry, so unknown (never $0)
    table = prices.hourly_price("us-east-1", "ml.m5.large", now=NOW)
    assert table is not None
    assert (table.source, table.usd_per_hour) == (SOURCE_TABLE, 0.115)
    assert prices.hourly_price("us-east-1", "ml.g5.12xlarge", now=NOW) is None
    assert prices.take_problems() == [
        f"GetProducts ml.m5.large in us-east-1 failed: {NO_RECORDED_ANSWER}",
        f"GetProducts ml.g5.12xlarge in us-east-1 failed: {NO_RECORDED_ANSWER}",
    ]
    assert aws.price_list is not None
    assert aws.price_list.asked == [("us-east-1", "ml.m5.large", None), ("us-east-1", "ml.g5.12xlarge", None)]
    with pytest.raises(ClientError) as caught:
        wiring.root().pricing_client().get_products(**guard_request("ml.p3.2xlarge"))
    assert caught.value.response["Error"]["Code"] == NO_RECORDED_ANSWER
    assert "no recorded GetProducts answer for ml.p3.2xlarge in us-east-1" in str(caught.value)


def test_a_request_unlike_the_guards_is_refused_and_leaves_no_answer_behind(aws: Emulation) -> None:
    client = wiring.root().pricing_client()
    with pytest.raises(StubAssertionError):  # another page size than the guard's: the recording does not apply
        client.get_products(**{**guard_request(G5), "MaxResults": 50})
    with pytest.raises(ParamValidationError):  # a request botocore refuses (MaxResults is an integer)
        client.get_products(**{**guard_request(G5), "MaxResults": "100"})
    # Neither left an answer queued: the guard's own requests are answered page by page, as recorded
    assert client.get_products(**guard_request(G5))["NextToken"] == "page-2-token"
    assert "NextToken" not in client.get_products(**guard_request(G5, NextToken="page-2-token"))
    with pytest.raises(ClientError) as caught:  # a token the recording never gave: no such page
        client.get_products(**guard_request(G5, NextToken="page-9-token"))
    assert caught.value.response["Error"]["Code"] == NO_RECORDED_ANSWER
    assert aws.price_list is not None
    assert aws.price_list.asked == [("us-east-1", G5, 1), ("us-east-1", G5, 2), ("us-east-1", G5, None)]


def test_the_functions_root_plays_the_recordings_only_inside_the_emulation_that_has_them() -> None:
    with Emulation(GuardConfig(), price_answers={}) as aws:
        assert aws.price_list is not None
        with pytest.raises(ClientError) as caught:
            wiring.root().pricing_client().get_products(**guard_request(G5))
        assert caught.value.response["Error"]["Code"] == NO_RECORDED_ANSWER
    with Emulation(GuardConfig()) as plain:  # without recordings: moto's answer (it has no Price List API)
        assert plain.price_list is None
        with pytest.raises(ClientError) as caught:
            wiring.root().pricing_client().get_products(**guard_request(G5))
        assert caught.value.response["Error"]["Code"] != NO_RECORDED_ANSWER


def test_every_emulation_uses_its_own_kept_boto3_session_and_gives_the_default_one_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = boto3.session.Session()  # the caller's own default session
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", before)
    with Emulation(GuardConfig()) as first:
        inside = boto3.DEFAULT_SESSION
        assert inside is not before
        first.client("sns").list_topics()  # answered by moto
    assert boto3.DEFAULT_SESSION is before
    with Emulation(GuardConfig()):
        assert boto3.DEFAULT_SESSION is inside  # its loaded service models kept: clients in milliseconds
    assert boto3.DEFAULT_SESSION is before


def test_host_metrics_are_one_datapoint_a_minute_under_the_host_dimension_the_sweeper_reads(aws: Emulation) -> None:
    until = datetime.now(UTC).replace(second=0, microsecond=0)  # CloudWatch keeps recent datapoints
    aws.put_host_metric("llm-job", "algo-2", "GPUUtilization", [40.0, 30.0, 20.0], until=until)
    read = TrainingMetrics(aws.client("cloudwatch")).host_averages(
        ["llm-job/algo-1", "llm-job/algo-2"],
        metric="GPUUtilization",
        since=until - timedelta(minutes=10),
        until=until + timedelta(minutes=1),
    )
    assert list(read) == ["llm-job/algo-2"]
    assert sorted((at.replace(tzinfo=UTC), value) for at, value in read["llm-job/algo-2"]) == [
        (until - timedelta(minutes=2), 40.0),
        (until - timedelta(minutes=1), 30.0),
        (until, 20.0),
    ]
