"""One factory for the guard's functions: they share runtime, architecture, layer and logging."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import jsii
from aws_cdk import BundlingOptions, CfnResource, DockerImage, Duration, ILocalBundling, RemovalPolicy, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.bundling import FUNCTIONS_DIR, RUNTIME_PYTHON, bundle
from infra.components.config_layer import CONFIG_PATH, config_layer
from training_guard import contract
from training_guard.config.model import GuardConfig

RUNTIME = lambda_.Runtime.PYTHON_3_13  # matches infra.bundling.RUNTIME_PYTHON (bytecode in the asset)
ARCHITECTURE = lambda_.Architecture.ARM_64
# The public Powertools layer, resolved at deploy time from its SSM parameter (no synth lookup).
# Pinned to the version in pyproject.toml so local runs and Lambda use the same Powertools.
POWERTOOLS_VERSION = "3.37.0"
POWERTOOLS_LAYER_PARAMETER = f"/aws/service/powertools/python/arm64/python{RUNTIME_PYTHON}/{POWERTOOLS_VERSION}"
DEFAULT_TIMEOUT = Duration.seconds(30)
# Lambda's limit on all environment variables of a function, in aggregate.
# https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html
LAMBDA_ENV_MAX_BYTES = 4096


@jsii.implements(ILocalBundling)
class _LocalBundler:
    def try_bundle(self, output_dir: str, options: object) -> bool:  # jsii passes both positionally
        bundle(Path(output_dir))
        return True


def function_code() -> lambda_.Code:
    """The functions' code: the asset `infra.bundling.bundle` fills, without Docker."""
    return lambda_.Code.from_asset(
        str(FUNCTIONS_DIR),
        exclude=["**/__pycache__", "**/*.pyc"],
        bundling=BundlingOptions(
            # Required by the API, never pulled: the local bundler always succeeds or raises.
            image=DockerImage.from_registry(f"public.ecr.aws/sam/build-python{RUNTIME_PYTHON}"),
            # jsii calls try_bundle(output_dir, options) positionally, unlike the typed stub.
            local=_LocalBundler(),  # type: ignore[arg-type]
        ),
    )


class GuardFunction(Construct):
    """A function with its own role (nothing but its log group until granted more), the
    configuration in a layer beside Powertools, and its log group encrypted with the guard's key."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: str,
        description: str,
        config: GuardConfig,
        key: kms.IKey,
        environment: Mapping[str, str],
        dead_letter_queue: sqs.IQueue | None = None,
        timeout: Duration = DEFAULT_TIMEOUT,
        memory_size: int = 256,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=logs.RetentionDays.ONE_YEAR,
            encryption_key=key,  # the key policy lets CloudWatch Logs of this account use it
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Training Guard {construct_id}: least privilege, no AWS managed policies",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        env = {
            "POWERTOOLS_SERVICE_NAME": contract.SERVICE_NAME,
            "POWERTOOLS_METRICS_NAMESPACE": contract.GUARD_METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": "INFO",
            contract.ENV_CONFIG_FILE: CONFIG_PATH,
            **environment,
        }
        _check_environment_size(construct_id, env)
        # The configuration may name the layer instead, where the public parameter does not exist.
        layer_arn = config.powertools_layer_arn or ssm.StringParameter.value_for_string_parameter(
            self, POWERTOOLS_LAYER_PARAMETER
        )
        self.config_layer = config_layer(self, config, architecture=ARCHITECTURE, runtime=RUNTIME).layer
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler,
            code=function_code(),
            layers=[lambda_.LayerVersion.from_layer_version_arn(self, "Powertools", layer_arn), self.config_layer],
            role=self.role,
            log_group=self.log_group,
            timeout=timeout,
            memory_size=memory_size,
            environment=env,
            # Names, URLs and a path, no secret; encrypted at rest with the guard's key all the same.
            # https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars-encryption.html
            environment_encryption=key,
            dead_letter_queue=dead_letter_queue,
            tracing=lambda_.Tracing.ACTIVE,
        )
        cfn_function = self.function.node.default_child
        assert isinstance(cfn_function, CfnResource)
        cfn_function.add_metadata("checkov", {"skip": [dict(skip) for skip in CHECKOV_SKIPS]})


# checkov findings that are right for these functions, each with the reason (kept in the template).
CHECKOV_SKIPS = (
    {
        "id": "CKV_AWS_116",
        "comment": "Asynchronous failures go to an on-failure destination (the function's encrypted dead-letter "
        "queue), whose record carries the error as well as the event; a DeadLetterConfig too would deliver "
        "each failure twice.",
    },
    {
        "id": "CKV_AWS_117",
        "comment": "The functions call only AWS APIs and Slack over TLS and reach no private resource; a VPC "
        "would add NAT gateways or endpoints and nothing to protect.",
    },
    {
        "id": "CKV_AWS_115",
        "comment": "No reserved concurrency on purpose: a reservation must leave 100 unreserved executions, so "
        "the stack would fail to create in accounts with a concurrency quota of 10; the ledger makes every "
        "reaction idempotent, and the chat path is bounded by its event source's maximum concurrency.",
    },
)


def _check_environment_size(name: str, env: Mapping[str, str]) -> None:
    # Values only known at deploy time (names, ARNs) are counted at a generous 256 bytes.
    size = sum(len(k.encode()) + (256 if Token.is_unresolved(v) else len(v.encode())) for k, v in env.items())
    if size > LAMBDA_ENV_MAX_BYTES:
        raise ValueError(
            f"{name}: the environment is {size} bytes, over Lambda's {LAMBDA_ENV_MAX_BYTES} "
            "(the configuration belongs in its layer, not in the environment)"
        )
