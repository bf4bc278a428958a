"""The configuration, shipped to every function as a tiny Lambda layer instead of in its environment.

Lambda allows 4 KB of environment variables per function, in aggregate; the configuration the
guard accepts (50 metric guards, 20 Slack webhooks) is several times that. A layer holds up to the
250 MB unzipped limit a function shares with its layers, and each function has room for 5 layers
(this one and Powertools). Lambda extracts a layer into /opt, so the file arrives at
/opt/training-guard/config.json and the environment holds only that path.
https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html
https://docs.aws.amazon.com/lambda/latest/dg/packaging-layers.html

The layer is built at synth time from a temporary directory holding only the file; it needs no
bundling, so it is the same whether a test skips bundling or not.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from aws_cdk import Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from training_guard.config.model import GuardConfig

LAMBDA_LAYER_ROOT = "/opt"  # where Lambda extracts a layer's content
CONFIG_FILE = "training-guard/config.json"  # inside the layer
CONFIG_PATH = f"{LAMBDA_LAYER_ROOT}/{CONFIG_FILE}"  # what the functions read
LAMBDA_MAX_LAYERS = 5  # per function
_CONSTRUCT_ID = "GuardConfig"


class ConfigLayer(Construct):
    """One layer version per stack holding the validated configuration as JSON."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: GuardConfig,
        architecture: lambda_.Architecture,
        runtime: lambda_.Runtime,
    ) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self.document = config.to_json()
        # The asset is copied into the cloud assembly when the layer is created, so the
        # directory is only needed until then.
        with tempfile.TemporaryDirectory(prefix="training-guard-config-") as tmp:
            file = Path(tmp) / CONFIG_FILE
            file.parent.mkdir(parents=True)
            file.write_text(self.document, encoding="utf-8")
            self.layer = lambda_.LayerVersion(
                self,
                "Layer",
                code=lambda_.Code.from_asset(tmp),
                description="Training Guard: the configuration (training-guard/config.json)",
                compatible_architectures=[architecture],
                compatible_runtimes=[runtime],
            )


def config_layer(
    scope: Construct, config: GuardConfig, *, architecture: lambda_.Architecture, runtime: lambda_.Runtime
) -> ConfigLayer:
    """The stack's configuration layer, created with the first function that needs it."""
    stack = Stack.of(scope)
    existing = stack.node.try_find_child(_CONSTRUCT_ID)
    if isinstance(existing, ConfigLayer):
        if existing.config != config:
            raise ValueError("every function of a stack must ship the same configuration")
        return existing
    return ConfigLayer(stack, _CONSTRUCT_ID, config=config, architecture=architecture, runtime=runtime)
