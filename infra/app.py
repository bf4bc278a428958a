"""`cdk synth` entry point. Offline: no lookups, no credentials, no network."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

from infra import guard_config
from infra.components.names import STACK_NAME
from infra.partitions import TARGET_PARTITIONS_CONTEXT, check_partitions
from training_guard.config.model import ConfigError

if TYPE_CHECKING:
    from aws_cdk import App

    from infra.stack import TrainingGuardStack

__all__ = ["FEATURE_FLAG_EXCEPTIONS", "STACK_NAME", "build_app", "main"]

# CDK feature flags. cdk.json sets every flag the installed aws-cdk-lib recommends (its
# recommended-feature-flags.json, what `cdk init` writes), so `cdk synth` reports none as unconfigured
# and a CDK upgrade that adds one fails tests/infra/test_feature_flags.py until it is set. These differ
# from the recommendation, each for its reason:
FEATURE_FLAG_EXCEPTIONS: dict[str, tuple[object, str]] = {
    "@aws-cdk/aws-sns-subscriptions:restrictSqsDescryption": (
        False,
        "With it, the key policy lets SNS decrypt only for the notification topic, by naming the topic; the "
        "topic is encrypted with that key, so key and topic would depend on each other and CloudFormation "
        "refuses the template (circular dependency, F3004). The key already lets SNS use it only on behalf "
        "of this account (encryption.SID_CONDITIONED_SERVICES).",
    ),
    "@aws-cdk/core:target-partitions": (
        ["aws"],
        "The guard runs in the aws partition only: its Price List client signs in us-east-1, which credentials of "
        "the China or GovCloud partitions cannot do, and the Powertools layer parameter exists in none of their "
        "regions. build_app refuses any other partition here or in the deploy region (infra/partitions.py).",
    ),
    "@aws-cdk/core:enableAdditionalMetadataCollection": (
        False,
        "It widens the usage data the CDK reports about the app (property keys, boolean and enum values); "
        "the project turns the CDK CLI's telemetry off (Makefile) and reports no more than the default.",
    ),
}


DESCRIPTION = "Training Guard: stops SageMaker training jobs on rule findings and notifies once"


def build_app(app: App | None = None, *, checks: bool = True) -> tuple[App, TrainingGuardStack]:
    from aws_cdk import App

    from infra.nag import add_checks
    from infra.stack import TrainingGuardStack

    app = app or App(outdir=os.environ.get("CDK_OUTDIR", "cdk.out"))
    config = guard_config.load(app.node)
    check_partitions({TARGET_PARTITIONS_CONTEXT: app.node.try_get_context(TARGET_PARTITIONS_CONTEXT)}, os.environ)
    if checks:
        add_checks(app)
    if config.organization is not None:
        # One guard for many accounts: the hub (this stack's name, so its tools find it), the member stack and the
        # StackSet that rolls it out (docs/organization.md). Imported here: a single-account app never loads it.
        from infra import organization

        hub, _ = organization.build(app, config, description=DESCRIPTION)
        return app, hub
    stack = TrainingGuardStack(app, STACK_NAME, config=config, description=DESCRIPTION)
    return app, stack


def check_context_config() -> None:
    """The configuration in the context the CDK CLI hands the app (CDK_CONTEXT_JSON), checked before the CDK is
    imported: a mistake is reported in a fraction of a second instead of after booting jsii (seconds). Context the
    CLI passes another way, or none, is left to `build_app`, which checks it the same way: a context too large for one
    environment variable is split by the CLI between CDK_CONTEXT_JSON and a file (CONTEXT_OVERFLOW_LOCATION_ENV,
    aws-cdk's writeContextToEnv), and half of it is not what `App` reads."""
    if os.environ.get("CONTEXT_OVERFLOW_LOCATION_ENV"):
        return
    try:
        context = json.loads(os.environ.get("CDK_CONTEXT_JSON") or "null")
    except ValueError:
        return
    if isinstance(context, dict):
        guard_config.resolve(context.get(guard_config.CONTEXT_KEY), context.get(guard_config.FILE_CONTEXT_KEY))


def main() -> int:
    try:
        check_context_config()
        app, _ = build_app()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
