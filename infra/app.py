"""`cdk synth` entry point. Offline: no lookups, no credentials, no network."""

from __future__ import annotations

import os
import sys

from aws_cdk import App

from infra import guard_config
from infra.nag import add_checks
from infra.stack import TrainingGuardStack
from training_guard.config import ConfigError

STACK_NAME = "TrainingGuard"


def build_app(app: App | None = None, *, checks: bool = True) -> tuple[App, TrainingGuardStack]:
    app = app or App(outdir=os.environ.get("CDK_OUTDIR", "cdk.out"))
    config = guard_config.load(app.node)
    if checks:
        add_checks(app)
    stack = TrainingGuardStack(
        app,
        STACK_NAME,
        config=config,
        description="Training Guard: stops SageMaker training jobs on rule findings and notifies once",
    )
    return app, stack


def main() -> int:
    try:
        app, _ = build_app()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
