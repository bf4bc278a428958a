"""The `organization` section: what a hub accepts, and every mistake named with its field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training_guard.config.model import MAX_MEMBER_ACCOUNTS, ConfigError, GuardConfig, OrganizationConfig

HUB = "111122223333"
MEMBER_A = "444455556666"
MEMBER_B = "777788889999"
ROOT = Path(__file__).resolve().parents[2]


def organization(**overrides: object) -> dict[str, object]:
    return {"hub_account": HUB, "region": "eu-west-1", "members": [MEMBER_A, MEMBER_B], **overrides}


def problems(**overrides: object) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        GuardConfig.from_dict({"organization": organization(**overrides)})
    return raised.value.problems


def test_without_the_section_the_guard_is_a_single_account_guard() -> None:
    assert GuardConfig().organization is None
    assert GuardConfig.from_dict({}).organization is None


def test_the_defaults_of_a_hub() -> None:
    config = GuardConfig.from_dict({"organization": organization()})
    assert config.organization == OrganizationConfig(
        hub_account=HUB,
        region="eu-west-1",
        members=(MEMBER_A, MEMBER_B),
        organization_id=None,
        organizational_units=(),
        stack_set_call_as="SELF",
        bus_name="training-guard-hub",
        member_role_name="TrainingGuardMember",
    )


def test_a_hub_accepts_exactly_itself_and_its_members() -> None:
    org = GuardConfig.from_dict({"organization": organization()}).organization
    assert org is not None
    assert [org.accepts(a) for a in (HUB, MEMBER_A, MEMBER_B)] == [True, True, True]
    assert [org.accepts(a) for a in ("999999999999", None, "", MEMBER_A[:-1])] == [False, False, False, False]


def test_the_shipped_example_is_valid_and_names_two_members_and_an_ou() -> None:
    document = json.loads((ROOT / "configs" / "organization.json").read_text())
    config = GuardConfig.from_dict(document)
    assert config.organization is not None
    assert config.organization.members == (MEMBER_A, MEMBER_B)
    assert config.organization.organizational_units == ("ou-ab12-cdef3456",)


def test_a_round_trip_through_the_functions_json_keeps_the_section() -> None:
    config = GuardConfig.from_dict({"organization": organization(organization_id="o-a1b2c3d4e5")})
    assert GuardConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"hub_account": "1111"}, "organization.hub_account: an account ID is 12 digits: '1111'"),
        ({"region": "Europe"}, "organization.region: not a region name (e.g. eu-west-1): 'Europe'"),
        ({"members": []}, "organization.members: name at least one member account"),
        ({"members": [MEMBER_A, "12345678901a"]}, "organization.members[1]: an account ID is 12 digits"),
        ({"members": [MEMBER_A, MEMBER_A]}, f"organization.members[1]: duplicate member account {MEMBER_A}"),
        ({"members": [HUB]}, f"organization.members[0]: {HUB} is the hub account"),
        ({"organization_id": "o-short"}, "organization.organization_id: not an organization ID"),
        ({"organizational_units": ["ou-12"]}, "organization.organizational_units[0]: not an OU ID"),
        (
            {"organizational_units": ["ou-ab12-cdef3456", "ou-ab12-cdef3456"]},
            "organization.organizational_units[1]: duplicate deployment target",
        ),
        ({"stack_set_call_as": "ADMIN"}, "organization.stack_set_call_as: must be one of SELF, DELEGATED_ADMIN"),
        ({"bus_name": "default"}, "organization.bus_name: 'default' is the account's default bus"),
        ({"bus_name": "a/b"}, "organization.bus_name: a bus name is 1-256 letters"),
        ({"member_role_name": "x" * 25}, "organization.member_role_name: a role name here is 1-24"),
        ({"memebers": [MEMBER_A]}, "organization.memebers: unknown setting (did you mean 'members'?)"),
    ],
)
def test_each_mistake_is_named_with_its_field(overrides: dict[str, object], expected: str) -> None:
    found = problems(**overrides)
    assert any(p.startswith(expected) for p in found), found


def test_the_root_of_the_organization_is_a_deployment_target() -> None:
    config = GuardConfig.from_dict({"organization": organization(organizational_units=["r-ab12"])})
    assert config.organization is not None
    assert config.organization.organizational_units == ("r-ab12",)


def test_hub_account_region_and_members_are_required() -> None:
    with pytest.raises(ConfigError) as raised:
        GuardConfig.from_dict({"organization": {}})
    assert [p.split(":")[0] for p in raised.value.problems[:3]] == [
        "organization.hub_account",
        "organization.region",
        "organization.members",
    ]


def test_members_are_capped_at_the_limit_and_not_below_it() -> None:
    accounts = [f"{n:012d}" for n in range(1, MAX_MEMBER_ACCOUNTS + 2)]
    GuardConfig.from_dict({"organization": organization(members=accounts[:MAX_MEMBER_ACCOUNTS])})
    found = problems(members=accounts)
    assert any(
        p.startswith(f"organization.members: at most {MAX_MEMBER_ACCOUNTS} entries, got {MAX_MEMBER_ACCOUNTS + 1}")
        for p in found
    ), found
