"""The emulation's DescribeAlarmContributors (moto lacks it): AWS's shapes and errors."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from training_guard_local.emulator import Emulation

pytestmark = pytest.mark.integration


def test_contributors_set_in_the_emulation_are_listed_with_the_apis_shape() -> None:
    with Emulation() as aws:
        aws.set_contributors("training-guard-loss", [{"TrainingJobName": "job-a"}])
        [contributor] = aws.client("cloudwatch").describe_alarm_contributors(AlarmName="training-guard-loss")[
            "AlarmContributors"
        ]
        assert contributor["ContributorAttributes"] == {"TrainingJobName": "job-a"}
        assert set(contributor) == {
            "ContributorId",
            "ContributorAttributes",
            "StateReason",
            "StateTransitionedTimestamp",
        }
        aws.set_contributors("training-guard-loss", [])
        assert (
            aws.client("cloudwatch").describe_alarm_contributors(AlarmName="training-guard-loss")["AlarmContributors"]
            == []
        )


def test_an_unknown_alarm_is_resource_not_found_and_a_new_emulation_forgets_the_last() -> None:
    with Emulation() as aws:
        aws.set_contributors("training-guard-loss", [{"TrainingJobName": "job-a"}])
    with Emulation() as aws, pytest.raises(ClientError, match="ResourceNotFoundException"):
        aws.client("cloudwatch").describe_alarm_contributors(AlarmName="training-guard-loss")
