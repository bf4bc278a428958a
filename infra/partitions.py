"""The partitions the guard can run in: only `aws`. Checked at synth, before anything is built.

The Price List client signs in us-east-1 whatever the job's region, and "you cannot use IAM credentials from one
partition to interact with resources in a different partition" (AWS Fault Isolation Boundaries, Partitions:
https://docs.aws.amazon.com/whitepapers/latest/aws-fault-isolation-boundaries/partitions.html); the Powertools
layer's SSM parameter exists in none of the China or GovCloud regions (docs/limits.md).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from training_guard.config.model import ConfigError

SUPPORTED_PARTITIONS = ("aws",)
TARGET_PARTITIONS_CONTEXT = "@aws-cdk/core:target-partitions"
# The region the CDK CLI deploys to (it sets this from the profile or AWS_REGION before it runs the app).
DEPLOY_REGION_VARIABLE = "CDK_DEFAULT_REGION"
_WHY = "the guard runs only in the aws partition (its Price List client signs in us-east-1, an aws region)"


@functools.cache  # a new botocore session reads its endpoint data again: ~0.1 s a call
def partition_of(region: str) -> str | None:
    """The partition botocore's endpoint data puts `region` in; None for a region it does not know."""
    from botocore.exceptions import UnknownRegionError
    from botocore.session import get_session

    try:
        return str(get_session().get_partition_for_region(region))
    except UnknownRegionError:
        return None


def partition_problems(target_partitions: Any, environ: Mapping[str, str]) -> list[str]:
    """What the context and the deploy region say that the guard cannot run in, as configuration problems."""
    problems: list[str] = []
    if isinstance(target_partitions, list):
        others = [p for p in target_partitions if p not in SUPPORTED_PARTITIONS]
        if others:
            problems.append(
                f"{TARGET_PARTITIONS_CONTEXT} (cdk.json context) names {', '.join(map(str, others))}: {_WHY}; "
                f'set it to ["aws"]'
            )
    region = environ.get(DEPLOY_REGION_VARIABLE)
    partition = partition_of(region) if region else None
    if partition is not None and partition not in SUPPORTED_PARTITIONS:
        problems.append(
            f"region {region} is in the {partition} partition: {_WHY}; deploy to a region of the aws partition"
        )
    return problems


def check_partitions(context: Mapping[str, Any], environ: Mapping[str, str]) -> None:
    """Raise `ConfigError` (one line per problem, exit 1 at synth) when the app targets another partition."""
    problems = partition_problems(context.get(TARGET_PARTITIONS_CONTEXT), environ)
    if problems:
        raise ConfigError(problems, source="the deployment target")
