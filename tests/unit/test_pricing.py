"""Prices, spend and GPUs (issue 15): parsing GetProducts answers, the shipped tables, the spend arithmetic at
its edges, and normalising a host's GPU utilisation by the instance's GPU count."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import botocore.session
import pytest

from tests.helpers import EVENTS_DIR, load_event
from training_guard.domain import pricing
from training_guard.domain.events import InstanceGroup, parse_job
from training_guard.domain.price_data import gpu_counts, training_prices
from training_guard.domain.pricing import (
    PriceQuote,
    Spend,
    compute_spend,
    gpu_count,
    has_gpus,
    job_instance_types,
    job_spend,
    normalised_utilisation,
    parse_price_list,
    parse_usd,
    table_quote,
)

if TYPE_CHECKING:
    from mypy_boto3_pricing import PricingClient


PRICING_EVENTS = EVENTS_DIR / "pricing"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def recorded(name: str) -> list[Any]:
    """Every PriceList item of a recorded GetProducts answer (all its pages)."""
    pages = json.loads((PRICING_EVENTS / f"{name}.json").read_text())
    return [item for page in pages for item in page["PriceList"]]


def quote(instance_type: str, usd: float, source: str = pricing.SOURCE_API, as_of: str = "2026-11-01") -> PriceQuote:
    """A price made up for the arithmetic (not a claim about AWS's prices)."""
    return PriceQuote(instance_type, "us-east-1", usd, source, as_of, "TESTSKU")


def product(**attributes: Any) -> str:
    """One PriceList item (a JSON string) for ml.m5.large in us-east-1 at 0.115 USD/h, attributes overridable."""
    attrs = {"regionCode": "us-east-1", "instanceName": "ml.m5.large", "component": "Training"} | attributes
    dims = {"R": {"unit": "Hrs", "pricePerUnit": {"USD": "0.1150000000"}}}
    return json.dumps(
        {"product": {"attributes": attrs, "sku": "S"}, "terms": {"OnDemand": {"T": {"priceDimensions": dims}}}}
    )


# --- The request and the answer ---------------------------------------------------------------------------
def test_the_request_selects_one_training_instance_type_in_one_region_by_exact_match() -> None:
    assert pricing.get_products_filters("eu-west-1", "ml.p4d.24xlarge") == [
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "eu-west-1"},
        {"Type": "TERM_MATCH", "Field": "instanceName", "Value": "ml.p4d.24xlarge"},
        {"Type": "TERM_MATCH", "Field": "component", "Value": "Training"},
    ]
    assert pricing.PRICE_LIST_SERVICE_CODE == "AmazonSageMaker"
    assert pricing.price_cache_key("eu-west-1", "ml.p4d.24xlarge") == "price#eu-west-1#ml.p4d.24xlarge"


def test_one_product_gives_its_hourly_usd_price_its_sku_and_the_price_lists_date() -> None:
    parsed = parse_price_list(
        recorded("get_products_ml_m5_large_us_east_1"), region="us-east-1", instance_type="ml.m5.large"
    )
    assert parsed.quote == PriceQuote(
        "ml.m5.large", "us-east-1", 0.115, "price-list-api", "2026-08-11", "JMCWJEAPVJNFJ5P4"
    )
    assert parsed.products == 1
    assert parsed.quote.label() == "AWS Price List API (2026-08-11)"


def test_products_without_on_demand_terms_priced_in_another_currency_or_at_zero_are_skipped() -> None:
    items = recorded("get_products_ml_g5_2xlarge_us_east_1_two_pages")
    parsed = parse_price_list(items, region="us-east-1", instance_type="ml.g5.2xlarge")
    assert parsed.quote is not None
    assert (parsed.quote.usd_per_hour, parsed.quote.reference, parsed.products) == (1.515, "TESTSKUG52XL0001", 4)


def test_products_that_disagree_give_no_price_and_say_why() -> None:
    parsed = parse_price_list(
        recorded("get_products_disagreeing_products"), region="ap-northeast-1", instance_type="ml.g6.xlarge"
    )
    assert parsed.quote is None
    assert parsed.reason == "ml.g6.xlarge in ap-northeast-1: products disagree (1.634, 2 USD/h)"


def test_products_that_agree_give_the_price() -> None:
    parsed = parse_price_list([product(), product()], region="us-east-1", instance_type="ml.m5.large")
    assert parsed.quote is not None
    assert parsed.quote.usd_per_hour == 0.115


def test_no_products_is_no_price() -> None:
    parsed = parse_price_list(recorded("get_products_empty"), region="us-east-1", instance_type="ml.m5.large")
    assert (parsed.quote, parsed.reason, parsed.products) == (None, "ml.m5.large in us-east-1: no products", 0)


@pytest.mark.parametrize(
    "item",
    [
        "not json",
        "[1, 2]",
        42,
        None,
        product(instanceName="ml.m5.xlarge"),
        product(regionCode="eu-west-1"),
        product(component="Hosting"),
        product(platoinstancetype="SpotTraining"),
        json.dumps(
            {
                "product": {},
                "terms": {
                    "OnDemand": {"T": {"priceDimensions": {"R": {"unit": "GB-Mo", "pricePerUnit": {"USD": "0.1"}}}}}
                },
            }
        ),
        json.dumps(
            {
                "product": {},
                "terms": {
                    "OnDemand": {"T": {"priceDimensions": {"R": {"unit": "Hrs", "pricePerUnit": {"USD": "-1"}}}}}
                },
            }
        ),
        json.dumps({"product": {}, "terms": {"OnDemand": []}}),
        json.dumps({"product": {}, "terms": {"Reserved": {}}}),
    ],
    ids=[
        "not-json",
        "json-not-an-object",
        "a-number",
        "null",
        "another-type",
        "another-region",
        "hosting",
        "spot",
        "monthly-unit",
        "negative",
        "terms-not-a-map",
        "no-on-demand",
    ],
)
def test_an_item_that_is_not_this_types_hourly_on_demand_training_price_is_ignored(item: Any) -> None:
    parsed = parse_price_list([item], region="us-east-1", instance_type="ml.m5.large")
    assert parsed.quote is None
    assert parsed.reason == "ml.m5.large in us-east-1: none of 1 products has a usable hourly USD price"


def test_a_decoded_product_and_a_unit_in_other_case_are_accepted() -> None:
    decoded = json.loads(product().replace('"Hrs"', '"HRS"'))
    parsed = parse_price_list([decoded], region="us-east-1", instance_type="ml.m5.large")
    assert parsed.quote is not None
    assert parsed.quote.usd_per_hour == 0.115
    assert parsed.quote.as_of is None  # no publicationDate: undated, not invented


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0.1150000000", 0.115),
        ("32", 32.0),
        (1.5, 1.5),
        ("0", None),
        ("0.0000000000", None),
        ("-0.1", None),
        ("NaN", None),
        ("Infinity", None),
        ("1e999", None),
        ("", None),
        ("12,5", None),
        (True, None),
        (None, None),
    ],
)
def test_a_usd_price_is_a_positive_finite_decimal(value: Any, expected: float | None) -> None:
    assert parse_usd(value) == expected


# --- The shipped tables -----------------------------------------------------------------------------------
# Usage-type prefixes of the table's regions, as AWS's own records spell them: USE1 and APN1 in the entries'
# GetProducts records, EU in the eu-west-1 bill of aws-samples/sagemaker-ssh-helper (EU-MI-AdvInstances-Hrs).
REGION_PREFIXES = {"us-east-1": "USE1", "ap-northeast-1": "APN1", "eu-west-1": "EU"}
TRAINING_TYPES = set(
    botocore.session.get_session().get_service_model("sagemaker").shape_for("TrainingInstanceType").enum
)
ENTRIES = training_prices.TRAINING_PRICES
# Asked for by issue 28 and found with no citation: they must stay absent (the module's docstring lists them).
NOT_FOUND = [
    ("us-east-1", "ml.p3.2xlarge"),
    ("us-west-2", "ml.p3.2xlarge"),
    ("us-west-2", "ml.p4d.24xlarge"),
    ("eu-west-1", "ml.p4d.24xlarge"),
    *((region, t) for region in ("us-east-1", "us-west-2", "eu-west-1") for t in ("ml.p5.48xlarge", "ml.g5.12xlarge")),
    *((region, t) for region in ("us-east-1", "us-west-2", "eu-west-1") for t in ("ml.c5.xlarge", "ml.trn1.32xlarge")),
    ("us-west-2", "ml.g5.xlarge"),
    ("us-west-2", "ml.m5.xlarge"),
    ("us-east-1", "ml.g5.xlarge"),
    ("us-east-1", "ml.m5.xlarge"),
    ("us-east-1", "ml.g6.xlarge"),
    *(("us-east-1", f"ml.g6.{size}") for size in ("2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")),
]


def _ids(entry: training_prices.TablePrice) -> str:
    return f"{entry.region}-{entry.instance_type}"


@pytest.mark.parametrize("entry", ENTRIES, ids=_ids)
def test_every_table_entry_parses_and_names_its_training_usage_type_date_and_source(
    entry: training_prices.TablePrice,
) -> None:
    assert parse_usd(entry.usd_per_hour) is not None
    assert entry.instance_type in TRAINING_TYPES
    assert entry.usage_type == f"{REGION_PREFIXES[entry.region]}-Train:{entry.instance_type}"
    assert date.fromisoformat(entry.as_of) <= date.fromisoformat(training_prices.TABLE_DATE)
    assert entry.source
    table = table_quote(entry.region, entry.instance_type)
    assert table is not None
    assert (table.source, table.as_of, table.reference) == ("table", entry.as_of, entry.source)
    # None is a first-hand reading yet: each says it is another project's record of the API's answer.
    assert not entry.first_hand
    assert "second-hand" in entry.source
    assert table.label() == f"shipped price table ({entry.as_of}, second-hand)"


@pytest.mark.parametrize("entry", ENTRIES, ids=_ids)
def test_every_table_entry_cites_a_repository_path_and_commit_or_says_the_search_did_not_name_one(
    entry: training_prices.TablePrice,
) -> None:
    if entry.repository is None:
        assert (entry.path, entry.commit) == (None, None)
        assert "did not name its repository" in entry.source
        return
    assert re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", entry.repository)
    assert entry.path
    assert entry.commit
    assert re.fullmatch(r"[0-9a-f]{40}", entry.commit)
    assert f"github.com/{entry.repository} {entry.path}" in entry.source


@pytest.mark.parametrize("entry", ENTRIES, ids=_ids)
def test_an_entry_quotes_its_usage_type_or_names_its_training_component_and_instance_type(
    entry: training_prices.TablePrice,
) -> None:
    if entry.usage_type_quoted:
        assert entry.usage_type in entry.source
        return
    assert "Training" in entry.source
    assert entry.instance_type in entry.source


@pytest.mark.parametrize("entry", ENTRIES, ids=_ids)
def test_every_table_price_has_the_shape_of_an_hourly_list_price(entry: training_prices.TablePrice) -> None:
    assert re.fullmatch(r"\d+\.\d+", entry.usd_per_hour)  # a decimal as AWS prints it, no sign, no exponent
    usd = parse_usd(entry.usd_per_hour)
    # A guard against a slipped decimal point, not a claim about AWS's prices.
    assert usd is not None
    assert 0.01 <= usd <= 200.0


def test_the_table_has_one_entry_per_type_and_region_and_its_date_is_its_newest_entry() -> None:
    keys = [(e.region, e.instance_type) for e in ENTRIES]
    assert len(keys) == len(set(keys))
    assert max(e.as_of for e in ENTRIES) == training_prices.TABLE_DATE


def test_a_type_or_region_the_table_lacks_is_unknown() -> None:
    assert table_quote("us-east-1", "ml.p5.48xlarge") is None
    assert table_quote("eu-west-1", "ml.m5.large") is None


@pytest.mark.parametrize(("region", "instance_type"), NOT_FOUND)
def test_a_type_issue_28_asked_for_and_no_record_gives_stays_unknown(region: str, instance_type: str) -> None:
    assert table_quote(region, instance_type) is None
    said = training_prices.__doc__ or ""  # the module says what is missing, so a reader is not left guessing
    assert instance_type in said or (instance_type.startswith("ml.g6.") and "every ml.g6 size" in said)


def test_a_p3_2xlarge_job_in_eu_west_1_is_priced_from_the_table_when_the_api_is_out_of_reach() -> None:
    from botocore.exceptions import EndpointConnectionError

    from training_guard.adapters.price_list import PriceList

    class Unreachable:
        def get_products(self, **_: Any) -> dict[str, Any]:
            raise EndpointConnectionError(endpoint_url="https://api.pricing.us-east-1.amazonaws.com/")

    got = PriceList(cast("PricingClient", Unreachable()), memory={}).hourly_price("eu-west-1", "ml.p3.2xlarge", now=NOW)
    assert got is not None
    assert (got.source, got.usd_per_hour, got.as_of) == ("table", 4.131, "2023-12-31")
    describe = {
        "TrainingJobName": "p3",
        "TrainingJobStatus": "InProgress",
        "ResourceConfig": {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 1},
        "TrainingStartTime": NOW - 2 * HOUR,
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
    }
    spend = spend_from_describe(describe, {"ml.p3.2xlarge": got}, now=NOW)
    assert spend.so_far_usd == pytest.approx(2 * 4.131)
    assert spend.avoided_usd == pytest.approx(22 * 4.131)
    assert spend.price_source == "shipped price table (2023-12-31, second-hand)"
    (used,) = spend.quotes
    assert used.reference is not None
    assert "github.com/aws-samples/sagemaker-ssh-helper Sample_Costs.md" in used.reference


def test_the_pricing_module_loads_neither_boto3_nor_botocore() -> None:
    functions = Path(__file__).resolve().parents[2] / "functions"
    code = "import sys, training_guard.domain.pricing; print([m for m in ('boto3', 'botocore') if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(functions)}, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


# --- Spend ------------------------------------------------------------------------------------------------
def spend_from_describe(describe: dict[str, Any], prices: Mapping[str, PriceQuote | None], *, now: datetime) -> Spend:
    """A DescribeTrainingJob response priced as the responder prices it: parsed by events.parse_job, then job_spend."""
    return job_spend(parse_job(describe), prices, now=now)


def describe(**fields: Any) -> dict[str, Any]:
    """A DescribeTrainingJob response: 2 x ml.p3.2xlarge, started an hour before NOW, max runtime 3 hours."""
    base: dict[str, Any] = {
        "TrainingJobName": "job",
        "TrainingJobStatus": "InProgress",
        "ResourceConfig": {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3 * 3600},
        "TrainingStartTime": NOW - HOUR,
    }
    return base | fields


P3 = {"ml.p3.2xlarge": quote("ml.p3.2xlarge", 3.0)}


def test_spend_so_far_is_count_times_price_times_hours_and_a_stop_avoids_up_to_the_rest_of_the_max_runtime() -> None:
    spend = spend_from_describe(describe(), P3, now=NOW)
    assert (spend.hourly_usd, spend.so_far_usd, spend.avoided_usd) == (6.0, 6.0, 12.0)
    assert (spend.billed_seconds, spend.seconds_left) == (3600.0, 7200.0)
    assert (spend.estimate, spend.upper_bound, spend.unknown_instance_types, spend.notes) == (True, False, (), ())
    assert spend.price_source == "AWS Price List API (2026-11-01)"


def test_heterogeneous_instance_groups_are_summed() -> None:
    groups = [
        {"InstanceGroupName": "gpu", "InstanceType": "ml.p3.2xlarge", "InstanceCount": 2},
        {"InstanceGroupName": "cpu", "InstanceType": "ml.m5.large", "InstanceCount": 3},
    ]
    prices = P3 | {"ml.m5.large": quote("ml.m5.large", 0.5, source="table", as_of="2026-08-11")}
    spend = spend_from_describe(describe(ResourceConfig={"InstanceGroups": groups}), prices, now=NOW - HOUR / 2)
    assert spend.hourly_usd == 2 * 3.0 + 3 * 0.5
    assert spend.so_far_usd == pytest.approx(7.5 / 2)
    assert spend.price_source == "AWS Price List API (2026-11-01); shipped price table (2026-08-11)"
    assert [q.instance_type for q in spend.quotes] == ["ml.p3.2xlarge", "ml.m5.large"]


def test_a_price_for_only_one_of_two_groups_is_unknown_spend_not_a_smaller_number() -> None:
    groups = [
        {"InstanceGroupName": "gpu", "InstanceType": "ml.p3.2xlarge", "InstanceCount": 2},
        {"InstanceGroupName": "new", "InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
    ]
    spend = spend_from_describe(
        describe(ResourceConfig={"InstanceGroups": groups}), P3 | {"ml.p5.48xlarge": None}, now=NOW
    )
    assert (spend.hourly_usd, spend.so_far_usd, spend.avoided_usd) == (None, None, None)
    assert spend.unknown_instance_types == ("ml.p5.48xlarge",)
    assert "no price for ml.p5.48xlarge" in spend.notes


def test_an_unknown_instance_type_is_unknown_spend() -> None:
    spend = spend_from_describe(describe(), {}, now=NOW)
    assert (spend.so_far_usd, spend.avoided_usd, spend.price_source) == (None, None, None)
    assert spend.unknown_instance_types == ("ml.p3.2xlarge",)
    assert spend.as_dict()["so_far_usd"] is None


def test_no_instance_count_is_unknown_spend_rather_than_one_instance() -> None:
    spend = spend_from_describe(describe(ResourceConfig={"InstanceType": "ml.p3.2xlarge"}), P3, now=NOW)
    assert (spend.hourly_usd, spend.so_far_usd) == (None, None)
    assert "no instance count for ml.p3.2xlarge" in spend.notes


def test_no_resource_config_is_unknown_spend() -> None:
    spend = spend_from_describe(describe(ResourceConfig=None), P3, now=NOW)
    assert (spend.so_far_usd, spend.avoided_usd) == (None, None)
    assert spend.notes[0] == "no instance type: price unknown"


def test_without_a_start_time_spend_so_far_is_unknown_and_a_stop_avoids_up_to_the_whole_max_runtime() -> None:
    spend = spend_from_describe(describe(TrainingStartTime=None), P3, now=NOW)
    assert spend.so_far_usd is None
    assert spend.avoided_usd == 6.0 * 3
    assert "no TrainingStartTime: spend so far unknown" in spend.notes


def test_without_a_max_runtime_spend_avoided_is_unknown() -> None:
    spend = spend_from_describe(describe(StoppingCondition={}), P3, now=NOW)
    assert (spend.so_far_usd, spend.avoided_usd, spend.seconds_left) == (6.0, None, None)
    assert "no MaxRuntimeInSeconds: spend avoided unknown" in spend.notes


def test_a_clock_before_the_start_time_counts_nothing_spent_never_a_negative_amount() -> None:
    spend = spend_from_describe(describe(TrainingStartTime=NOW + HOUR), P3, now=NOW)
    assert (spend.so_far_usd, spend.avoided_usd) == (0.0, 18.0)
    assert "clock before TrainingStartTime: counted as not started" in spend.notes


def test_past_the_max_runtime_nothing_is_left_to_avoid() -> None:
    spend = spend_from_describe(describe(TrainingStartTime=NOW - 4 * HOUR), P3, now=NOW)
    assert (spend.so_far_usd, spend.avoided_usd, spend.seconds_left) == (24.0, 0.0, 0.0)


def test_managed_spot_training_flags_the_list_price_as_an_upper_bound() -> None:
    spend = spend_from_describe(describe(EnableManagedSpotTraining=True), P3, now=NOW)
    assert spend.upper_bound is True
    assert spend.as_dict()["upper_bound"] is True
    assert "managed spot training: the list price is an upper bound" in spend.notes
    assert spend_from_describe(describe(EnableManagedSpotTraining=False), P3, now=NOW).upper_bound is False


def test_after_the_job_ended_the_billable_time_replaces_the_estimate() -> None:
    ended = describe(
        TrainingJobStatus="Stopped",
        TrainingEndTime=NOW - HOUR / 2,
        BillableTimeInSeconds=900,
        TrainingTimeInSeconds=1800,
        EnableManagedSpotTraining=True,
    )
    spend = spend_from_describe(ended, P3, now=NOW + 10 * HOUR)
    assert (spend.estimate, spend.billed_seconds, spend.so_far_usd) == (False, 900.0, 6.0 / 4)
    assert spend.seconds_left == 3 * 3600 - 1800  # the max runtime counts training time, not billed time


def test_an_ended_job_without_billable_time_is_estimated_up_to_its_end_not_to_now() -> None:
    ended = describe(TrainingJobStatus="Failed", TrainingEndTime=NOW - HOUR / 2)
    spend = spend_from_describe(ended, P3, now=NOW + 10 * HOUR)
    assert (spend.estimate, spend.billed_seconds, spend.so_far_usd) == (True, 1800.0, 3.0)


def test_a_stopping_job_is_still_billed_up_to_now() -> None:
    spend = spend_from_describe(describe(TrainingJobStatus="Stopping", BillableTimeInSeconds=1), P3, now=NOW)
    assert (spend.estimate, spend.so_far_usd) == (True, 6.0)


def test_the_selected_instance_type_of_instance_preferences_is_what_is_billed() -> None:
    config = {
        "InstanceType": "ml.m5.large",
        "InstanceCount": 9,
        "SelectedInstanceType": "ml.p3.2xlarge",
        "SelectedInstanceCount": 1,
    }
    assert parse_job(describe(ResourceConfig=config)).billed_instances == (InstanceGroup("ml.p3.2xlarge", 1),)
    assert spend_from_describe(describe(ResourceConfig=config), P3, now=NOW).so_far_usd == 3.0


def test_the_instance_types_to_price_are_listed_once_in_order() -> None:
    groups = [
        {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 1},
        {"InstanceType": "ml.m5.large", "InstanceCount": 1},
        {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 4},
        {"InstanceCount": 1},
    ]
    job = parse_job(describe(ResourceConfig={"InstanceGroups": groups}))
    assert job_instance_types(job) == ("ml.p3.2xlarge", "ml.m5.large")


def test_a_recorded_event_with_epoch_millisecond_strings_and_floats_is_priced() -> None:
    failed = load_event("failed")["detail"]  # 510 s of ml.p3.2xlarge, timestamps in epoch milliseconds
    spend = spend_from_describe(failed, P3, now=NOW)
    assert spend.so_far_usd == pytest.approx(3.0 * 510 / 3600)
    stopped = load_event("stopped_max_runtime")["detail"]  # ran its max runtime (start has half a millisecond)
    assert spend_from_describe(stopped, P3, now=NOW).as_dict()["avoided_usd"] == 0.0


def test_the_json_form_has_the_documented_fields_in_cents_and_null_when_unknown() -> None:
    spend = compute_spend(
        [InstanceGroup("ml.p3.2xlarge", 1)],
        P3,
        start=NOW - timedelta(seconds=100),
        end=None,
        now=NOW,
        ended=False,
        max_runtime_seconds=None,
    )
    doc = spend.as_dict()
    assert doc["so_far_usd"] == 0.08  # 3 USD/h for 100 s = 0.0833...
    assert doc["avoided_usd"] is None
    assert doc["avoided_label"] == "up to"
    assert doc["price_source"] == "AWS Price List API (2026-11-01)"
    assert doc["list_price"] is True
    assert doc["prices"] == [
        {
            "instance_type": "ml.p3.2xlarge",
            "region": "us-east-1",
            "usd_per_hour": 3.0,
            "source": "price-list-api",
            "as_of": "2026-11-01",
            "reference": "TESTSKU",
        }
    ]
    assert json.loads(json.dumps(doc)) == doc


# --- GPUs -------------------------------------------------------------------------------------------------
GPU_TRAINING_TYPES = {t for t in TRAINING_TYPES if re.match(r"ml\.[pg]\d", t)}


def test_every_gpu_training_type_botocore_knows_has_a_cited_count_or_is_listed_as_uncited() -> None:
    counted = set(gpu_counts.GPU_COUNTS)
    assert counted.isdisjoint(gpu_counts.UNCITED_GPU_TRAINING_TYPES)
    assert counted | gpu_counts.UNCITED_GPU_TRAINING_TYPES == GPU_TRAINING_TYPES


def test_every_count_names_its_aws_source() -> None:
    for instance_type, (count, source) in gpu_counts.GPU_COUNTS.items():
        assert count >= 1, instance_type
        assert source in (gpu_counts.EC2_GUIDE, gpu_counts.BATCH_GUIDE), instance_type


# The types issue 28 names: each has a cited count, is a GPU type listed as uncited, or has no GPU at all.
ISSUE_28_GPUS = {
    "ml.p3.2xlarge": 1,
    "ml.p4d.24xlarge": 8,
    "ml.p5.48xlarge": None,  # no AWS page giving its count could be consulted: uncited, never guessed
    "ml.g5.xlarge": 1,
    "ml.g5.12xlarge": 4,
    "ml.g6.xlarge": 1,
    "ml.g6.12xlarge": 4,
    "ml.m5.xlarge": 0,
    "ml.c5.xlarge": 0,
    "ml.trn1.32xlarge": 0,  # Trainium, not a GPU: the idle-GPU guard has nothing to normalise
}


@pytest.mark.parametrize(("instance_type", "gpus"), ISSUE_28_GPUS.items())
def test_the_types_people_train_on_have_a_cited_gpu_count_or_say_why_not(instance_type: str, gpus: int | None) -> None:
    if gpus is None:
        assert instance_type in gpu_counts.UNCITED_GPU_TRAINING_TYPES
        assert has_gpus(instance_type)
    elif gpus == 0:
        assert not has_gpus(instance_type)
    else:
        assert gpu_counts.GPU_COUNTS[instance_type][1] in (gpu_counts.EC2_GUIDE, gpu_counts.BATCH_GUIDE)
    assert gpu_count(instance_type) == (gpus or None)


@pytest.mark.parametrize("instance_type", sorted(gpu_counts.GPU_COUNTS))
def test_a_host_at_100_percent_of_every_gpu_is_100_percent(instance_type: str) -> None:
    count = gpu_count(instance_type)
    assert count is not None
    assert normalised_utilisation(100.0 * count, instance_type) == 100.0


def test_one_idle_gpu_of_eight_is_seven_eighths() -> None:
    assert gpu_count("ml.p4d.24xlarge") == 8
    assert gpu_count("p4d.24xlarge") == 8  # the EC2 name too
    assert normalised_utilisation(700.0, "ml.p4d.24xlarge") == 87.5
    assert normalised_utilisation(0.0, "ml.g5.12xlarge") == 0.0


@pytest.mark.parametrize("instance_type", [None, "", "ml.m5.large", "ml.p5.48xlarge", "ml.nonsense"])
def test_a_type_without_a_known_gpu_count_cannot_be_normalised(instance_type: str | None) -> None:
    assert gpu_count(instance_type) is None
    assert normalised_utilisation(50.0, instance_type) is None


def test_a_non_finite_host_value_is_not_normalised() -> None:
    assert normalised_utilisation(float("nan"), "ml.g5.xlarge") is None
