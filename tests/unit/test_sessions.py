"""The CLI's and the emulation's boto3 sessions: each its own, the models they read parsed once per process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ProfileNotFound

from training_guard_local.sessions import new_session


def loader_of(session: boto3.Session) -> Any:
    return session._session.get_component("data_loader")  # the loader the session made (what is shared)


@pytest.fixture(autouse=True)
def no_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_DATA_PATH"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))


def test_two_sessions_share_what_was_parsed_and_a_plain_one_does_not() -> None:
    first, second = loader_of(new_session()), loader_of(new_session())
    assert first is not second  # each session its own loader, as botocore makes it
    assert first.load_data("endpoints") is second.load_data("endpoints")
    assert loader_of(boto3.Session()).load_data("endpoints") is not first.load_data("endpoints")


def test_clients_of_a_second_session_answer_as_the_firsts() -> None:
    made = [new_session(region_name="eu-west-1").client("sagemaker") for _ in range(2)]
    assert [c.meta.endpoint_url for c in made] == ["https://api.sagemaker.eu-west-1.amazonaws.com"] * 2
    assert made[1].meta.service_model.operation_model("StopTrainingJob").input_shape.required_members == [
        "TrainingJobName"
    ]


def test_aws_data_path_is_searched_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    assert loader_of(new_session()).search_paths[0] == str(tmp_path)


def test_a_missing_profile_is_refused_where_boto3_refuses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "nowhere")
    with pytest.raises(ProfileNotFound):
        new_session()
    with pytest.raises(ProfileNotFound):
        new_session(profile_name="elsewhere")
