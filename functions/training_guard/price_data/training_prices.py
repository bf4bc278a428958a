"""Fallback hourly on-demand list prices of SageMaker *training* instances, used only when the Price List API
cannot be reached or answers nothing usable.

Every entry quotes a `GetProducts` (or offer file) result for the training usage type of one region
(`<REGION>-Train:<type>`), with the date it was read and where the quote was found. The AWS pricing page renders
its tables in the browser, so no AWS page could be quoted directly, and this project has read none of these
prices from AWS itself: each is **second-hand**, a public project's record of what the Price List API answered,
and is labelled so wherever it is shown ("shipped price table (<date>, second-hand)"). Two of the three records
are named below (repository and file); the third was found through the code search, which did not name its
repository. Replace an entry with a first-hand reading (`first_hand=True`) by running the command in
docs/cost.md. Prices are strings, exactly as `pricePerUnit.USD` arrives from the API, and go through the same
parser (`pricing.parse_usd`); a test parses every entry.

Entries the issue asked for and that could not be sourced (ml.p4d.24xlarge, ml.p5.48xlarge, ml.g5.xlarge,
ml.g5.12xlarge, ml.m5.xlarge, ml.c5.xlarge, ml.trn1.32xlarge, ml.p3.2xlarge) are absent on purpose: their
spend is unknown when the API is unreachable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class TablePrice:
    region: str
    instance_type: str
    usd_per_hour: str  # as the API's pricePerUnit.USD: a decimal string
    usage_type: str  # the Price List usage type the price belongs to
    as_of: str  # ISO date the price was read from the Price List API
    source: str  # where the quote was found
    first_hand: bool = False  # read from AWS by this project (else a public project's record of it)


TABLE_DATE: Final = "2026-09-22"  # the newest `as_of` below; shown with every price taken from this table

TRAINING_PRICES: Final[tuple[TablePrice, ...]] = (
    TablePrice(
        region="us-east-1",
        instance_type="ml.m5.large",
        usd_per_hour="0.115",
        usage_type="USE1-Train:ml.m5.large",
        as_of="2026-08-11",
        source="Price List Query API (GetProducts), SKU JMCWJEAPVJNFJ5P4, as recorded in "
        "github.com/SatsyilCorp/compass-demo docs/COST_MODEL.md (second-hand)",
    ),
    TablePrice(
        region="us-east-1",
        instance_type="ml.g5.2xlarge",
        usd_per_hour="1.515",
        usage_type="USE1-Train:ml.g5.2xlarge",
        as_of="2026-08-20",
        source="`aws pricing get-products --service-code AmazonSageMaker` filtered on the usage type, as recorded "
        "in github.com/aws-solutions-library-samples/guidance-for-accelerator-optimized-agentic-bidding-on-aws "
        "source/orchestrator/training_trigger.py (second-hand)",
    ),
    TablePrice(
        region="ap-northeast-1",
        instance_type="ml.g6.xlarge",
        usd_per_hour="1.634",
        usage_type="APN1-Train:ml.g6.xlarge",
        as_of="2026-09-22",
        source="Price List API offer file for ap-northeast-1, on-demand, USD, with the price list's publication "
        "date, as recorded in a public project's cost model (cost_model.py of a camera-analytics demo; the code "
        "search did not name its repository; second-hand)",
    ),
)
