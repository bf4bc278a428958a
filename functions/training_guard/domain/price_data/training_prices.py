"""Fallback hourly on-demand list prices of SageMaker *training* instances, used only when the Price List API
cannot be reached or answers nothing usable. Every entry is second-hand and cited (docs/design/pricing.md).

Not found with a citation, so unknown (tests/unit/test_pricing.py reads this list): ml.p3.2xlarge in us-east-1 and
us-west-2; ml.p4d.24xlarge in us-west-2 and eu-west-1; ml.g5.xlarge and ml.m5.xlarge in us-east-1 and us-west-2;
ml.p5.48xlarge, ml.g5.12xlarge, ml.c5.xlarge and ml.trn1.32xlarge anywhere; every ml.g6 size in us-east-1, us-west-2
and eu-west-1."""

from __future__ import annotations

from typing import Final

from training_guard.config.frozen import frozen


@frozen
class TablePrice:
    region: str
    instance_type: str
    usd_per_hour: str  # as the record prints it (the API's pricePerUnit.USD is a decimal string)
    usage_type: str  # the Price List usage type the price belongs to
    as_of: str  # ISO date the price applied: read from the API, the offer file's publication, or the bill
    source: str  # what the record is, in words (shown with the price as its reference)
    first_hand: bool = False  # read from AWS by this project (else a public record of it)
    repository: str | None = None  # GitHub owner/name of the record; None only when the search did not name it
    path: str | None = None
    commit: str | None = None
    usage_type_quoted: bool = True  # the record states the usage type (else: its component, type and region)


# The newest `as_of` below; shown with every price taken from this table
TABLE_DATE: Final = "2026-09-22"

TRAINING_PRICES: Final[tuple[TablePrice, ...]] = (
    TablePrice(
        region="us-east-1",
        instance_type="ml.m5.large",
        usd_per_hour="0.115",
        usage_type="USE1-Train:ml.m5.large",
        as_of="2026-08-11",
        source="Price List Query API (GetProducts), SKU JMCWJEAPVJNFJ5P4, usage type USE1-Train:ml.m5.large, "
        "as recorded in github.com/SatsyilCorp/compass-demo docs/COST_MODEL.md (second-hand)",
        repository="SatsyilCorp/compass-demo",
        path="docs/COST_MODEL.md",
        commit="0b353753da77f21e9d1f4c4f99087b4118b80ec5",
    ),
    TablePrice(
        region="us-east-1",
        instance_type="ml.g5.2xlarge",
        usd_per_hour="1.515",
        usage_type="USE1-Train:ml.g5.2xlarge",
        as_of="2026-08-20",
        source="`aws pricing get-products --service-code AmazonSageMaker` filtered on "
        "usagetype=USE1-Train:ml.g5.2xlarge, as recorded in "
        "github.com/aws-solutions-library-samples/guidance-for-accelerator-optimized-agentic-bidding-on-aws "
        "source/orchestrator/training_trigger.py (second-hand)",
        repository="aws-solutions-library-samples/guidance-for-accelerator-optimized-agentic-bidding-on-aws",
        path="source/orchestrator/training_trigger.py",
        commit="6a1ceb1f0e87b1fda6aca7c4edac09aff13e6949",
    ),
    TablePrice(
        region="ap-northeast-1",
        instance_type="ml.g6.xlarge",
        usd_per_hour="1.634",
        usage_type="APN1-Train:ml.g6.xlarge",
        as_of="2026-09-22",
        source="Price List API offer file for ap-northeast-1, on-demand, USD, usage type APN1-Train:ml.g6.xlarge, "
        "with the price list's publication date, as recorded in a public project's cost model (cost_model.py of "
        "a camera-analytics demo; the code search did not name its repository; second-hand)",
    ),
    TablePrice(
        region="us-east-1",
        instance_type="ml.p4d.24xlarge",
        usd_per_hour="25.251",
        usage_type="USE1-Train:ml.p4d.24xlarge",
        as_of="2026-07-27",
        source="SageMaker Price List rates 'verified live 2026-07-27, us-east-1' for ml.p4d.24xlarge "
        "(Hosting/Training $25.251, Cluster/HyperPod $25.910), as recorded in github.com/spore-host/truffle "
        "pkg/aws/sagemaker_pricing.go and CHANGELOG.md 0.48.0 (second-hand)",
        repository="spore-host/truffle",
        path="pkg/aws/sagemaker_pricing.go",
        commit="21bfbe8dc295509ea870a277b5ff8ecac5d267e2",
        usage_type_quoted=False,
    ),
    TablePrice(
        region="eu-west-1",
        instance_type="ml.p3.2xlarge",
        usd_per_hour="4.131",
        usage_type="EU-Train:ml.p3.2xlarge",
        as_of="2023-12-31",
        source="AWS bill for December 2023 (the month's last day is the date), line '$4.131 per Training "
        "ml.p3.2xlarge hour in EU (Ireland)', as published in github.com/aws-samples/sagemaker-ssh-helper "
        "Sample_Costs.md (second-hand)",
        repository="aws-samples/sagemaker-ssh-helper",
        path="Sample_Costs.md",
        commit="b6bf9ba39119784eb6ce6683ae9a6a2ed8ef4cd3",
        usage_type_quoted=False,
    ),
    TablePrice(
        region="eu-west-1",
        instance_type="ml.g5.xlarge",
        usd_per_hour="1.57",
        usage_type="EU-Train:ml.g5.xlarge",
        as_of="2023-12-31",
        source="AWS bill for December 2023 (the month's last day is the date), line '$1.57 per Training "
        "ml.g5.xlarge hour in Europe (Ireland)', as published in github.com/aws-samples/sagemaker-ssh-helper "
        "Sample_Costs.md (second-hand)",
        repository="aws-samples/sagemaker-ssh-helper",
        path="Sample_Costs.md",
        commit="b6bf9ba39119784eb6ce6683ae9a6a2ed8ef4cd3",
        usage_type_quoted=False,
    ),
    TablePrice(
        region="eu-west-1",
        instance_type="ml.m5.xlarge",
        usd_per_hour="0.257",
        usage_type="EU-Train:ml.m5.xlarge",
        as_of="2023-12-31",
        source="AWS bill for December 2023 (the month's last day is the date), line '$0.257 per Training "
        "ml.m5.xlarge hour in EU (Ireland)', as published in github.com/aws-samples/sagemaker-ssh-helper "
        "Sample_Costs.md (second-hand)",
        repository="aws-samples/sagemaker-ssh-helper",
        path="Sample_Costs.md",
        commit="b6bf9ba39119784eb6ce6683ae9a6a2ed8ef4cd3",
        usage_type_quoted=False,
    ),
)
