"""Names as AWS accepts them, for input the guard checks before it uses it (Slack button values, the mute CLI).

Light on purpose: the Slack interactivity endpoint reads a click with it inside Slack's 3-second acknowledgement."""

from __future__ import annotations

import re

# SageMaker's API model (botocore's sagemaker service model): shape TrainingJobName, 1 to 63 characters.
JOB_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
# Same model, shape RuleConfigurationName: 1 to 256 characters of any kind.
RULE_NAME_MAX = 256
# An AWS account ID: "The regex pattern for an account ID string requires exactly 12 digits" (Organizations'
# DescribeAccount, https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/organizations/aws.sdk.kotlin.services.organizations.model/-describe-account-request/-builder/account-id.html).
ACCOUNT_ID = re.compile(r"[0-9]{12}")
