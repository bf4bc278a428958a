"""The configuration's generated documents follow its declarations, and the schema agrees with the reader.

The README table and `configs/schema.json` are generated from `training_guard.config.model`; these tests
fail when either is stale. The schema must accept every configuration the project ships and reject
the broken ones the reader rejects (validated with the `jsonschema` package, a dev dependency).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from training_guard.config.model import ConfigError, GuardConfig, MetricGuard
from training_guard_local import config_docs

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = f"run `{config_docs.COMMAND}` and commit the result"


def shipped_configurations() -> list[tuple[str, Any]]:
    shipped: list[tuple[str, Any]] = [
        ("cdk.json", json.loads((ROOT / "cdk.json").read_text())["context"]["training-guard"])
    ]
    for path in sorted((ROOT / "configs").glob("*.json")):
        if path.name != "schema.json":
            shipped.append((f"configs/{path.name}", json.loads(path.read_text())))
    for path in sorted((ROOT / "local" / "training_guard_local" / "scenarios").glob("*.json")):
        shipped.append((f"scenarios/{path.name}", json.loads(path.read_text())["config"]))
    return shipped


SHIPPED = shipped_configurations()
GUARD = {"name": "loss", "metric": "train:loss", "threshold": 5}
# A broken configuration and the field path the reader names for it.
BROKEN: list[tuple[dict[str, Any], str]] = [
    ({"dry_rn": True}, "dry_rn"),
    ({"dry_run": "yes"}, "dry_run"),
    ({"min_training_minutes": -1}, "min_training_minutes"),
    ({"min_training_minutes": 1.5}, "min_training_minutes"),
    ({"dedup_ttl_days": 30}, "dedup_ttl_days"),
    ({"rules": {"debugger_default": "STOP"}}, "rules.debugger_default"),
    ({"rules": {"actions": {"LossNotDecreasing": "halt"}}}, "rules.actions.LossNotDecreasing"),
    ({"rules": {"$schema": "./schema.json"}}, "rules.$schema"),
    ({"tags": {"exempt": ""}}, "tags.exempt"),
    ({"tags": {"exempt": "   "}}, "tags.exempt"),
    ({"jobs": {"include_prefixes": "prod-"}}, "jobs.include_prefixes"),
    ({"emails": ["not-an-address"]}, "emails[0]"),
    ({"slack": {"webhooks": {"bad name": {}}, "default": "bad name"}}, "slack.webhooks.bad name"),
    ({"slack": {"webhooks": {"a": {}}, "by_severity": {"urgent": "a"}}}, "slack.by_severity.urgent"),
    ({"slack": {"min_severity": "debug"}}, "slack.min_severity"),
    ({"q_developer": {"slack_workspace_id": "t0123", "slack_channel_id": "C0123"}}, "q_developer.slack_workspace_id"),
    ({"q_developer": {"slack_workspace_id": "T0123"}}, "q_developer.slack_channel_id"),
    ({"metric_guards": [{"name": "loss", "metric": "train:loss"}]}, "metric_guards[0].threshold"),
    ({"metric_guards": [{**GUARD, "statistic": "P99"}]}, "metric_guards[0].statistic"),
    ({"metric_guards": [{**GUARD, "periods": 181}]}, "metric_guards[0].periods"),
    ({"metric_guards": [{**GUARD, "action": "ignore"}]}, "metric_guards[0].action"),
    ({"metric_guards": [{**GUARD, "colour": "red"}]}, "metric_guards[0].colour"),
    ({"metric_guards": [GUARD] * 51}, "metric_guards"),
    ({"stall": {"minutes": 4}}, "stall.minutes"),
    ({"stall": {"action": "ignore"}}, "stall.action"),
]


def test_the_readme_configuration_table_is_generated_from_the_declarations() -> None:
    reference = (ROOT / config_docs.REFERENCE).read_text(encoding="utf-8")
    assert config_docs.with_table(reference) == reference, f"{config_docs.REFERENCE}'s table is stale: {REGENERATE}"


def test_the_committed_schema_is_generated_from_the_declarations() -> None:
    committed = (ROOT / "configs" / "schema.json").read_text(encoding="utf-8")
    assert committed == config_docs.schema_text(), f"configs/schema.json is stale: {REGENERATE}"


def test_the_example_configuration_names_the_schema_for_editors() -> None:
    example = json.loads((ROOT / "configs" / "example.json").read_text())
    assert example["$schema"] == "./schema.json"


def test_the_table_has_a_row_for_every_leaf_setting_with_its_default() -> None:
    table = config_docs.table()
    assert "| `dedup_ttl_days` | `35` |" in table
    assert "| `metric_guards[].datapoints` | `3`, or `periods` if fewer |" in table
    assert "| `slack.webhooks.<name>.secret_name` | `null` |" in table
    assert "| `q_developer.slack_workspace_id` | required |" in table
    assert (
        "| `rules.debugger_default` | `stop` | what a Debugger rule's `IssuesFound` leads to | one of `stop`" in table
    )


def _defaults(node: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A document holding every default the schema states, sections filled in from $defs."""
    doc: dict[str, Any] = {}
    for name, prop in node["properties"].items():
        refs = [p["$ref"] for p in prop.get("anyOf", []) if "$ref" in p]
        if "default" in prop:
            doc[name] = prop["default"]
        elif refs:
            doc[name] = _defaults(schema["$defs"][refs[0].rsplit("/", 1)[1]], schema)
    return doc


def test_the_schema_states_the_dataclass_defaults() -> None:
    schema = config_docs.schema()
    assert GuardConfig.from_dict(_defaults(schema, schema)) == GuardConfig()
    guard_defaults = _defaults(schema["$defs"]["MetricGuard"], schema)
    read = GuardConfig.from_dict({"metric_guards": [{**guard_defaults, **GUARD}]}).metric_guards[0]
    assert read == MetricGuard(name="loss", metric="train:loss", threshold=5.0)


def test_every_choice_the_schema_offers_is_accepted_by_the_reader() -> None:
    schema = config_docs.schema()
    defs = schema["$defs"]
    choices = {
        "rules.debugger_default": defs["RulePolicy"]["properties"]["debugger_default"]["enum"],
        "rules.actions": defs["RulePolicy"]["properties"]["actions"]["additionalProperties"]["enum"],
        "slack.min_severity": defs["SlackConfig"]["properties"]["min_severity"]["enum"],
        "metric_guards.comparison": defs["MetricGuard"]["properties"]["comparison"]["enum"],
        "metric_guards.statistic": defs["MetricGuard"]["properties"]["statistic"]["examples"],
        "metric_guards.action": defs["MetricGuard"]["properties"]["action"]["enum"],
        "stall.action": defs["StallGuard"]["properties"]["action"]["enum"],
    }
    assert choices["stall.action"] == ["notify", "stop"]
    for value in choices["rules.debugger_default"]:
        assert GuardConfig.from_dict({"rules": {"debugger_default": value}}).rules.debugger_default == value
    for value in choices["rules.actions"]:
        assert GuardConfig.from_dict({"rules": {"actions": {"R": value}}}).rules.actions == {"R": value}
    for value in choices["slack.min_severity"]:
        assert GuardConfig.from_dict({"slack": {"min_severity": value}}).slack.min_severity == value
    for key in ("comparison", "statistic", "action"):
        for value in choices[f"metric_guards.{key}"]:
            guard = GuardConfig.from_dict({"metric_guards": [{**GUARD, key: value}]}).metric_guards[0]
            assert getattr(guard, key) == value
    for value in choices["stall.action"]:
        stall = GuardConfig.from_dict({"stall": {"action": value}}).stall
        assert stall is not None
        assert stall.action == value


@pytest.mark.parametrize(("name", "data"), SHIPPED, ids=[name for name, _ in SHIPPED])
def test_every_shipped_configuration_is_read(name: str, data: Any) -> None:
    GuardConfig.from_dict(data, source=name)


@pytest.mark.parametrize(("data", "path"), BROKEN, ids=[path for _, path in BROKEN])
def test_a_broken_configuration_is_rejected_by_the_reader_naming_the_field(data: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        GuardConfig.from_dict(data)
    assert any(p.startswith(f"{path}: ") for p in caught.value.problems), caught.value.problems


@functools.cache
def _validator() -> Any:
    """The committed schema, checked against the 2020-12 metaschema once per process (~70 ms each time)."""
    import jsonschema  # type: ignore[import-untyped]

    schema = json.loads((ROOT / "configs" / "schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    _validator()


@pytest.mark.parametrize(("name", "data"), SHIPPED, ids=[name for name, _ in SHIPPED])
def test_every_shipped_configuration_validates_against_the_schema(name: str, data: Any) -> None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator().iter_errors(data)]
    assert errors == [], name


@pytest.mark.parametrize(("data", "path"), BROKEN, ids=[path for _, path in BROKEN])
def test_a_broken_configuration_is_rejected_by_the_schema(data: dict[str, Any], path: str) -> None:
    assert not _validator().is_valid(data), path


def _tree(tmp_path: Path, readme: str) -> Path:
    (tmp_path / "configs").mkdir()
    (tmp_path / config_docs.REFERENCE).parent.mkdir(exist_ok=True)
    (tmp_path / config_docs.REFERENCE).write_text(readme, encoding="utf-8")
    return tmp_path


def test_check_reports_a_stale_table_with_a_diff_and_write_repairs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _tree(tmp_path, f"# Title\n\n{config_docs.START}\n| old | table |\n{config_docs.END}\n\nAfter.\n")
    assert config_docs.main(["--check", "--root", str(root)]) == 1
    out, err = capsys.readouterr()
    assert "-| old | table |" in out
    assert "+| `dry_run` | `false` |" in out
    assert config_docs.COMMAND in err
    assert config_docs.main(["--write", "--root", str(root)]) == 0
    assert config_docs.main(["--check", "--root", str(root)]) == 0
    readme = (root / config_docs.REFERENCE).read_text()
    assert readme.startswith(f"# Title\n\n{config_docs.START}\n| Setting |")
    assert readme.endswith(f"{config_docs.END}\n\nAfter.\n")
    assert json.loads((root / "configs" / "schema.json").read_text()) == config_docs.schema()


def test_a_readme_without_markers_is_an_error_not_a_rewrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path, "# Title\n")
    assert config_docs.main(["--write", "--root", str(root)]) == 2
    assert "config-table:start" in capsys.readouterr().err
    assert (root / config_docs.REFERENCE).read_text() == "# Title\n"
