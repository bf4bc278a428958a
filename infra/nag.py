"""cdk-nag: the checks the app runs at every synth, and each acknowledged finding with its reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Stack, Validations
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

# Findings that stay, each with the reason it is right for this stack.
ACKNOWLEDGED: dict[str, str] = {
    "AwsSolutions::AwsSolutions-IAM5[Resource::*]": (
        "Only actions without resource-level permissions use Resource *: X-Ray tracing "
        "(xray:PutTraceSegments, xray:PutTelemetryRecords), the list prices of training instances "
        "(pricing:GetProducts: AWS Price List supports no resource ARN in a policy, "
        "https://docs.aws.amazon.com/service-authorization/latest/reference/list_awspricelist.html) and the "
        "sweeper's reads sagemaker:ListTrainingJobs (the log rules' stall check's too) and cloudwatch:GetMetricData "
        "(the weekly digest's too); the "
        "Slack app mode notifier's cloudwatch:GetMetricWidgetImage (a metric's graph, read-only); and the sweeper's "
        "alarm reads "
        "(cloudwatch:DescribeAlarms by name prefix, DescribeAlarmContributors), read-only, where a "
        "narrower scope silently returns fewer alarms (infra/components/metric_guards.py)."
    ),
    "AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:cloudwatch:<AWS::Region>:<AWS::AccountId>:alarm:training-guard-job-*]": (  # noqa: E501 (a rule id)
        "Per-job alarms are named after jobs only known at run time; the pattern confines create, "
        "describe and delete to the guard's own training-guard-job-* alarms in this account and region."
    ),
    "AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:training-job/*]": (  # noqa: E501 (a rule id)
        "The guard watches every training job of its account and region; job names are only known "
        "at run time. The statement is limited to Describe/Stop/AddTags on training jobs of this "
        "account and region."
    ),
    "AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/sagemaker/TrainingJobs:*]": (  # noqa: E501 (a rule id)
        "The ARN of the one log group /aws/sagemaker/TrainingJobs in the form CloudWatch Logs gives it (':*', its "
        "streams): the log rules' subscription calls (create the group, describe, put and delete the guard's own "
        "filter) reach no other group (infra/components/log_rules.py)."
    ),
    "AwsSolutions::AwsSolutions-SQS3": (
        "The flagged queue is the dead-letter queue of the EventBridge target and the functions' "
        "on-failure destination; cdk-nag only recognises SQS redrive as DLQ use."
    ),
    "Serverless::Serverless-LambdaDLQ": (
        "Asynchronous failures go to an on-failure destination (the same encrypted queue), whose "
        "record carries the error as well as the event; a DeadLetterConfig too would deliver each "
        "failure twice."
    ),
    "AwsSolutions::AwsSolutions-SMG4": (
        "The secrets hold Slack incoming-webhook URLs, which only Slack can issue; there is no API "
        "for a rotation Lambda. Rotate by creating a new webhook in Slack and putting its URL in "
        "the secret (README, Slack)."
    ),
    "Serverless::Serverless-LambdaEventSourceMappingDestination": (
        "SQS event source mappings do not support on-failure destinations; the chat queue's redrive "
        "policy moves a message to its dead-letter queue after 5 receives, and the notifier parks "
        "permanently undeliverable messages there itself."
    ),
    "AwsSolutions::AwsSolutions-L1": (
        "The functions run Python 3.13 (supported until 2029) rather than 3.14 so that the asset can "
        "ship bytecode compiled by the same minor version: about 35 ms less per cold start, measured "
        "by make bench (docs/benchmarks.md)."
    ),
    "Serverless::Serverless-LambdaLatestVersion": (
        "Python 3.13 rather than 3.14 on purpose: see AwsSolutions-L1 (bytecode in the asset, faster cold starts)."
    ),
    "Serverless::Serverless-SQSRedrivePolicy": (
        "The queues without a redrive policy are themselves the dead-letter queues: the last stop of "
        "a failed event, redriven by an operator (see README, Operations)."
    ),
}


def add_checks(app: App) -> None:
    Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))


def acknowledge_findings(stack: Stack) -> None:
    for rule_id, reason in ACKNOWLEDGED.items():
        Validations.of(stack).acknowledge(Acknowledgment(id=rule_id, reason=reason))
