"""The CLI's and the emulation's boto3 sessions: each its own, the models they read parsed once per process."""

from __future__ import annotations

import json
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


def test_built_in_extras_merged_into_a_shared_model_stay_what_each_session_reads() -> None:
    """botocore merges Secrets Manager's built-in sdk-extras into its model in place: the same merge every time."""
    made = [new_session(region_name="eu-west-1").client("secretsmanager") for _ in range(3)]
    assert [c.meta.service_model.service_id for c in made] == ["Secrets Manager"] * 3
    plain = boto3.Session(region_name="eu-west-1").client("secretsmanager")
    assert [c.meta.endpoint_url for c in made] == [plain.meta.endpoint_url] * 3
    required = made[2].meta.service_model.operation_model("PutSecretValue").input_shape.required_members
    assert required == plain.meta.service_model.operation_model("PutSecretValue").input_shape.required_members


def test_a_data_path_of_its_own_keeps_its_extras_to_its_session(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """botocore merges a data path's sdk-extras into the model it read, in place: never into the shared one."""
    extras = tmp_path / "sagemaker" / "2017-07-24" / "service-2.sdk-extras.json"
    extras.parent.mkdir(parents=True)
    extras.write_text(json.dumps({"version": 1.0, "merge": {"metadata": {"serviceFullName": "From the data path"}}}))

    def full_name() -> str:
        client = new_session(region_name="eu-west-1").client("sagemaker")
        return str(client.meta.service_model.metadata["serviceFullName"])

    assert full_name() == "Amazon SageMaker Service"
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    assert full_name() == "From the data path"
    assert loader_of(new_session()).search_paths[0] == str(tmp_path)
    monkeypatch.delenv("AWS_DATA_PATH")
    assert full_name() == "Amazon SageMaker Service"


def test_a_missing_profile_in_the_environment_is_refused_where_boto3_refuses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "nowhere")
    with pytest.raises(ProfileNotFound):
        boto3.Session()
    with pytest.raises(ProfileNotFound):
        new_session()


def test_a_missing_profile_named_is_refused_where_boto3_refuses_it() -> None:
    with pytest.raises(ProfileNotFound):
        boto3.Session(profile_name="elsewhere")
    with pytest.raises(ProfileNotFound):
        new_session(profile_name="elsewhere")


def test_a_profiles_data_path_is_the_named_profiles(tmp_path: Path) -> None:
    (tmp_path / "config").write_text(f"[profile lab]\ndata_path = {tmp_path / 'models'}\nregion = eu-west-1\n")
    assert loader_of(new_session(profile_name="lab")).search_paths[0] == str(tmp_path / "models")
