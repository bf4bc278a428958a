"""The Price List adapter against botocore's Stubber (the real request and response shapes): the API call in
us-east-1, the state-table cache with its TTL, the container's memory, and the shipped table when the API
cannot be reached or answers nothing usable."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from botocore.stub import Stubber

from tests.helpers import EVENTS_DIR
from training_guard.adapters import price_list
from training_guard.adapters.price_list import PriceList, pricing_client
from training_guard.domain.pricing import PriceQuote, get_products_filters

if TYPE_CHECKING:
    from mypy_boto3_pricing import PricingClient


NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
EPOCH = int(NOW.timestamp())
TABLE = "guard-state"
M5_KEY = {"pk": {"S": "price#us-east-1#ml.m5.large"}}


def pages(name: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((EVENTS_DIR / "pricing" / f"{name}.json").read_text())
    return data


def client(service: str) -> Any:
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def request(region: str, instance_type: str, token: str | None = None) -> dict[str, Any]:
    expected: dict[str, Any] = {
        "ServiceCode": "AmazonSageMaker",
        "Filters": get_products_filters(region, instance_type),
        "FormatVersion": "aws_v1",
        "MaxResults": 100,
    }
    if token:
        expected["NextToken"] = token
    return expected


class Setup:
    def __init__(self, *, with_table: bool = True) -> None:
        self.pricing = client("pricing")
        self.dynamodb = client("dynamodb")
        self.price_stub = Stubber(self.pricing)
        self.table_stub = Stubber(self.dynamodb)
        self.memory: price_list.Memory = {}
        self.adapter = PriceList(
            self.pricing,
            dynamodb=self.dynamodb if with_table else None,
            table=TABLE if with_table else None,
            memory=self.memory,
        )

    def __enter__(self) -> Setup:
        self.price_stub.activate()
        self.table_stub.activate()
        return self

    def __exit__(self, *exc: object) -> None:
        self.price_stub.deactivate()
        self.table_stub.deactivate()

    def table_miss(self, key: dict[str, Any] = M5_KEY) -> None:
        self.table_stub.add_response("get_item", {}, {"TableName": TABLE, "Key": key})

    def verify(self) -> None:
        self.price_stub.assert_no_pending_responses()
        self.table_stub.assert_no_pending_responses()


def cached_item(usd: str, expires: int) -> dict[str, Any]:
    return {
        "pk": {"S": "price#us-east-1#ml.m5.large"},
        "usd_per_hour": {"N": usd},
        "source": {"S": "price-list-api"},
        "as_of": {"S": "2026-08-11"},
        "reference": {"S": "JMCWJEAPVJNFJ5P4"},
        "expires_at": {"N": str(expires)},
    }


def test_a_price_from_the_api_is_cached_in_the_state_table_for_a_day_and_in_memory() -> None:
    with Setup() as s:
        s.table_miss()
        (page,) = pages("get_products_ml_m5_large_us_east_1")
        s.price_stub.add_response("get_products", page, request("us-east-1", "ml.m5.large"))
        s.table_stub.add_response(
            "put_item",
            {},
            {
                "TableName": TABLE,
                "Item": {
                    "pk": {"S": "price#us-east-1#ml.m5.large"},
                    "usd_per_hour": {"N": "0.115"},
                    "source": {"S": "price-list-api"},
                    "expires_at": {"N": str(EPOCH + 86400)},
                    "as_of": {"S": "2026-08-11"},
                    "reference": {"S": "JMCWJEAPVJNFJ5P4"},
                },
            },
        )
        first = s.adapter.hourly_price("us-east-1", "ml.m5.large", now=NOW)
        # Within the day, the same container asks neither the table nor the API again (no stubbed response left).
        again = s.adapter.hourly_price("us-east-1", "ml.m5.large", now=NOW + timedelta(hours=23))
        s.verify()
    expected = PriceQuote("ml.m5.large", "us-east-1", 0.115, "price-list-api", "2026-08-11", "JMCWJEAPVJNFJ5P4")
    assert first == again == expected
    assert s.adapter.problems == []


def test_an_answer_on_two_pages_is_read_whole() -> None:
    first, second = pages("get_products_ml_g5_2xlarge_us_east_1_two_pages")
    with Setup(with_table=False) as s:
        s.price_stub.add_response("get_products", first, request("us-east-1", "ml.g5.2xlarge"))
        s.price_stub.add_response("get_products", second, request("us-east-1", "ml.g5.2xlarge", "page-2-token"))
        got = s.adapter.hourly_price("us-east-1", "ml.g5.2xlarge", now=NOW)
        s.verify()
    assert got is not None
    assert (got.usd_per_hour, got.source, got.reference) == (1.515, "price-list-api", "TESTSKUG52XL0001")


def test_an_answer_that_never_ends_is_cut_short_and_said_so() -> None:
    endless = {"FormatVersion": "aws_v1", "PriceList": [], "NextToken": "again"}
    with Setup(with_table=False) as s:
        s.price_stub.add_response("get_products", endless, request("us-east-1", "ml.m5.large"))
        for _ in range(price_list.MAX_PAGES - 1):
            s.price_stub.add_response("get_products", endless, request("us-east-1", "ml.m5.large", "again"))
        got = s.adapter.hourly_price("us-east-1", "ml.m5.large", now=NOW)
        s.verify()
    assert got is not None
    assert got.source == "table"  # nothing usable read: the shipped table
    assert "GetProducts ml.m5.large in us-east-1: stopped after 5 pages" in s.adapter.problems


def test_a_live_state_table_item_is_used_without_asking_the_api_and_kept_in_memory_until_it_expires() -> None:
    with Setup() as s:
        s.table_stub.add_response(
            "get_item", {"Item": cached_item("0.115", EPOCH + 60)}, {"TableName": TABLE, "Key": M5_KEY}
        )
        got = s.adapter.hourly_price("us-east-1", "ml.m5.large", now=NOW)
        assert s.adapter.hourly_price("us-east-1", "ml.m5.large", now=NOW + timedelta(seconds=59)) == got
        s.verify()
    assert got is not None
    assert (got.usd_per_hour, got.source, got.as_of) == (0.115, "price-list-api", "2026-08-11")
    assert s.memory["price#us-east-1#ml.m5.large"][0] == EPOCH + 60  # the item's expiry, not a new day


def test_an_expired_item_not_yet_deleted_by_dynamodb_is_ignored() -> None:
    with Setup() as s:
        s.table_stub.add_response("get_item", {"Item": cached_item("9.99", EPOCH)}, {"TableName": TABLE, "Key": M5_KEY})
        (page,) = pages("get_products_ml_m5_large_us_east_1")
        s.price_stub.add_response("get_products", page, request("us-east-1", "ml.m5.large"))
        s.table_stub.add_response("put_item", {})
        got = s.adapter.hourly_price("us-east-1", "ml.m5.large", now=NOW)
        s.verify()
    assert got is not None
    assert got.usd_per_hour == 0.115


def test_a_failing_api_falls_back_to_the_shipped_table_marked_as_such_and_is_not_asked_again_at_once() -> None:
    with Setup(with_table=False) as s:
        s.price_stub.add_client_error("get_products", "ThrottlingException", "Rate exceeded")
        got = s.adapter.hourly_price("us-east-1", "ml.m5.large", now=NOW)
        # Within the retry delay the container does not call the API again (no stubbed response is left).
        soon = s.adapter.hourly_price("us-east-1", "ml.m5.large", now=NOW + timedelta(seconds=899))
        s.price_stub.add_client_error("get_products", "ThrottlingException", "Rate exceeded")
        later = s.adapter.hourly_price("us-east-1", "ml.m5.large", now=NOW + timedelta(seconds=900))
        s.verify()
    assert got == soon == later
    assert got is not None
    assert (got.source, got.as_of, got.usd_per_hour) == ("table", "2026-08-11", 0.115)
    assert got.label() == "shipped price table (2026-08-11, second-hand)"
    assert s.adapter.problems == ["GetProducts ml.m5.large in us-east-1 failed: ThrottlingException"] * 2


def test_an_unreachable_api_and_a_type_the_table_lacks_is_unknown_not_invented() -> None:
    class Unreachable:
        def get_products(self, **_: Any) -> dict[str, Any]:
            raise EndpointConnectionError(endpoint_url="https://api.pricing.us-east-1.amazonaws.com/")

    adapter = PriceList(cast("PricingClient", Unreachable()), memory={})
    assert adapter.hourly_price("us-east-1", "ml.p5.48xlarge", now=NOW) is None
    assert adapter.problems[0].startswith("GetProducts ml.p5.48xlarge in us-east-1 failed: Could not connect")


def test_an_empty_answer_falls_back_to_the_table_and_is_remembered_for_the_day() -> None:
    with Setup(with_table=False) as s:
        (page,) = pages("get_products_empty")
        s.price_stub.add_response("get_products", page, request("ap-northeast-1", "ml.g6.xlarge"))
        got = s.adapter.hourly_price("ap-northeast-1", "ml.g6.xlarge", now=NOW)
        again = s.adapter.hourly_price("ap-northeast-1", "ml.g6.xlarge", now=NOW + timedelta(hours=23))
        s.verify()
    assert got == again
    assert got is not None
    assert (got.source, got.usd_per_hour) == ("table", 1.634)
    assert s.adapter.problems == ["GetProducts: ml.g6.xlarge in ap-northeast-1: no products"]


def test_products_that_disagree_are_not_cached_and_the_table_answers() -> None:
    with Setup() as s:
        s.table_miss({"pk": {"S": "price#ap-northeast-1#ml.g6.xlarge"}})
        (page,) = pages("get_products_disagreeing_products")
        s.price_stub.add_response("get_products", page, request("ap-northeast-1", "ml.g6.xlarge"))
        got = s.adapter.hourly_price("ap-northeast-1", "ml.g6.xlarge", now=NOW)
        s.verify()  # no put_item: a disagreement is not a price
    assert got is not None
    assert got.source == "table"
    assert "disagree" in s.adapter.problems[0]


def test_a_failing_state_table_does_not_stop_the_price() -> None:
    with Setup() as s:
        s.table_stub.add_client_error("get_item", "ProvisionedThroughputExceededException")
        (page,) = pages("get_products_ml_m5_large_us_east_1")
        s.price_stub.add_response("get_products", page, request("us-east-1", "ml.m5.large"))
        s.table_stub.add_client_error("put_item", "AccessDeniedException")
        got = s.adapter.hourly_price("us-east-1", "ml.m5.large", now=NOW)
        s.verify()
    assert got is not None
    assert (got.source, got.usd_per_hour) == ("price-list-api", 0.115)
    assert [p.split(" failed")[0] for p in s.adapter.problems] == [
        "read cached price price#us-east-1#ml.m5.large",
        "cache price price#us-east-1#ml.m5.large",
    ]


def test_prices_of_a_jobs_types_are_asked_once_each() -> None:
    with Setup(with_table=False) as s:
        (page,) = pages("get_products_ml_m5_large_us_east_1")
        s.price_stub.add_response("get_products", page, request("us-east-1", "ml.m5.large"))
        s.price_stub.add_client_error("get_products", "ThrottlingException")
        got = s.adapter.prices("us-east-1", ("ml.m5.large", "ml.p5.48xlarge"), now=NOW)
        s.verify()
    assert got["ml.m5.large"] is not None
    assert got["ml.p5.48xlarge"] is None


def test_the_client_calls_the_price_list_endpoint_in_us_east_1_whatever_the_jobs_region(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    made = pricing_client()
    assert made.meta.region_name == "us-east-1"
    assert made.meta.endpoint_url == "https://api.pricing.us-east-1.amazonaws.com"


def test_importing_the_adapter_does_not_load_boto3() -> None:
    functions = Path(__file__).resolve().parents[2] / "functions"
    code = "import sys, training_guard.adapters.price_list; print('boto3' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(functions)}, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_the_pricing_client_is_made_when_the_api_is_first_asked_and_only_once() -> None:
    """Cold start: a function that prices nothing, or finds every price cached, never makes the client."""
    made: list[Any] = []
    stubbed = client("pricing")
    stub = Stubber(stubbed)

    def factory() -> Any:
        made.append(stubbed)
        return stubbed

    adapter = PriceList(pricing_factory=factory, memory={})
    assert made == []
    (page,) = pages("get_products_ml_m5_large_us_east_1")
    stub.add_response("get_products", page, request("us-east-1", "ml.m5.large"))
    stub.add_response("get_products", page, request("us-west-2", "ml.m5.large"))
    with stub:
        adapter.hourly_price("us-east-1", "ml.m5.large", now=NOW)
        adapter.hourly_price("us-east-1", "ml.m5.large", now=NOW)  # remembered: not asked again
        adapter.hourly_price("us-west-2", "ml.m5.large", now=NOW)  # asked again, of the same client
    assert made == [stubbed]


def test_problems_are_handed_over_once_for_the_caller_to_log() -> None:
    with Setup(with_table=False) as s:
        s.price_stub.add_client_error("get_products", "ThrottlingException")
        s.adapter.hourly_price("us-east-1", "ml.m5.large", now=NOW)
    assert s.adapter.take_problems() == ["GetProducts ml.m5.large in us-east-1 failed: ThrottlingException"]
    assert s.adapter.take_problems() == []
