"""`stop_requires_tag`: the policy and the IAM condition on StopTrainingJob decide alike, for every tag value.

The policy deciding "stop" where IAM refuses would only meet AccessDenied, be retried and dead-lettered;
IAM allowing where the policy refuses would leave the opt-in to the code alone. Both read
`contract.STOP_OPT_IN_*`; this test evaluates the synthesized condition with IAM's documented semantics
(StringEquals is case-sensitive; https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html)
and compares it with the policy's decision.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.helpers import NOW
from tests.infra.conftest import ConfigSynth, synthesized
from training_guard.config.model import GuardConfig
from training_guard.domain.events import DEBUGGER, Finding, TrainingJob
from training_guard.domain.policy import Plan, decide

TAG = "training-guard:guarded"
VALUES = ("true", "True", "TRUE", " true", "true ", "yes", "1", "", "false")
OPERATORS = {  # IAM string condition operators: value in the request vs value in the policy
    "StringEquals": lambda actual, wanted: actual == wanted,
    "StringEqualsIgnoreCase": lambda actual, wanted: actual.lower() == wanted.lower(),
}


def iam_allows(condition: dict[str, dict[str, str]], tags: dict[str, str]) -> bool:
    [(operator, keys)] = condition.items()
    [(key, wanted)] = keys.items()
    tag = key.removeprefix("aws:ResourceTag/")
    return tag in tags and OPERATORS[operator](tags[tag], wanted)


@pytest.fixture(scope="module")
def stop_condition(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    synth = synthesized(ConfigSynth, {"stop_requires_tag": TAG}, tmp_path_factory.mktemp("opt-in"))
    _, policy = synth.one("AWS::IAM::Policy", "JobEventsHandler")
    [stop] = [
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "StopOptedInTrainingJobs"
    ]
    condition: dict[str, dict[str, str]] = stop["Condition"]
    return condition


@pytest.mark.parametrize("value", VALUES)
def test_the_policy_stops_exactly_the_jobs_iam_lets_it_stop(
    stop_condition: dict[str, dict[str, str]], value: str
) -> None:
    config = GuardConfig.from_dict({"stop_requires_tag": TAG})
    job = TrainingJob(
        name="mnist-1",
        status="InProgress",
        arn="arn:aws:sagemaker:us-east-1:123456789012:training-job/mnist-1",
        rules=(Finding(name="VanishingGradient", source=DEBUGGER, status="IssuesFound"),),
        training_start_time=NOW - timedelta(minutes=30),
        tags={TAG: value},
    )
    [decision] = decide(job, config, now=NOW)
    assert (decision.plan is Plan.STOP) == iam_allows(stop_condition, {TAG: value})
