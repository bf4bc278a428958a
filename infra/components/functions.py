"""One factory for the guard's functions: they share runtime, architecture, layer and logging."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, RemovalPolicy, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.bundling import RUNTIME_PYTHON, function_code
from training_guard import contract

RUNTIME = lambda_.Runtime.PYTHON_3_13  # matches infra.bundling.RUNTIME_PYTHON (bytecode in the asset)
ARCHITECTURE = lambda_.Architecture.ARM_64
# The public Powertools layer, resolved at deploy time from its SSM parameter (no synth lookup).
# Pinned to the version in pyproject.toml so local runs and Lambda use the same Powertools.
POWERTOOLS_VERSION = "3.37.0"
POWERTOOLS_LAYER_PARAMETER = f"/aws/service/powertools/python/arm64/python{RUNTIME_PYTHON}/{POWERTOOLS_VERSION}"
DEFAULT_TIMEOUT = Duration.seconds(30)
LAMBDA_ENV_MAX_BYTES = 4096  # Lambda's limit on all environment variables of a function


class GuardFunction(Construct):
    """A function with its own role (nothing but its log group until granted more)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: str,
        description: str,
        environment: Mapping[str, str],
        dead_letter_queue: sqs.IQueue | None = None,
        timeout: Duration = DEFAULT_TIMEOUT,
        memory_size: int = 256,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=logs.RetentionDays.ONE_YEAR,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Training Guard {construct_id}: least privilege, no managed policies",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        env = {
            "POWERTOOLS_SERVICE_NAME": "training-guard",
            "POWERTOOLS_METRICS_NAMESPACE": contract.GUARD_METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": "INFO",
            **environment,
        }
        _check_environment_size(construct_id, env)
        layer_arn = ssm.StringParameter.value_for_string_parameter(self, POWERTOOLS_LAYER_PARAMETER)
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler,
            code=function_code(),
            layers=[lambda_.LayerVersion.from_layer_version_arn(self, "Powertools", layer_arn)],
            role=self.role,
            log_group=self.log_group,
            timeout=timeout,
            memory_size=memory_size,
            environment=env,
            dead_letter_queue=dead_letter_queue,
            reserved_concurrent_executions=reserved_concurrency,
            tracing=lambda_.Tracing.ACTIVE,
        )


def _check_environment_size(name: str, env: Mapping[str, str]) -> None:
    # Values only known at deploy time (names, ARNs) are counted at a generous 256 bytes.
    size = sum(len(k.encode()) + (256 if Token.is_unresolved(v) else len(v.encode())) for k, v in env.items())
    if size > LAMBDA_ENV_MAX_BYTES:
        raise ValueError(
            f"{name}: the environment is {size} bytes, over Lambda's {LAMBDA_ENV_MAX_BYTES}; "
            f"the configuration in {contract.ENV_CONFIG} is too large"
        )
