from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import shutil
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from infra.app import build_app
from infra.components.config_layer import CONFIG_FILE, CONFIG_PATH
from infra.components.names import STACK_NAME
from infra.guard_config import FILE_CONTEXT_KEY
from infra.stack import TrainingGuardStack
from training_guard import contract
from training_guard.config.model import GuardConfig
from training_guard_local import template_cache

pytestmark = pytest.mark.infra


CDK_JSON = Path(__file__).resolve().parents[2] / "cdk.json"


def unordered(value: Any) -> Any:
    """An IAM `Action` or `Resource` list, compared as the set it is (the recommended feature flag
    `@aws-cdk/aws-iam:minimizePolicies` sorts them); a single value as it is."""
    return sorted(value, key=json.dumps) if isinstance(value, list) else value


def statement_rows(statements: list[dict[str, Any]]) -> list[tuple[Any, Any, Any]]:
    """(Sid, actions, resources) of each statement, in the policy's order."""
    return [(s.get("Sid"), unordered(s["Action"]), unordered(s["Resource"])) for s in statements]


def expected_rows(rows: list[tuple[Any, Any, Any]]) -> list[tuple[Any, Any, Any]]:
    """What `statement_rows` returns for these statements."""
    return [(sid, unordered(actions), unordered(resources)) for sid, actions, resources in rows]


SynthT = TypeVar("SynthT", bound="Synth")


_IGNORED_RULES = ("W3005",)
# cfn-lint's configuration files (cfnlint.config: the working folder's, then the home folder's)
_CFN_LINT_FILES = (".cfnlintrc", ".cfnlintrc.yaml", ".cfnlintrc.yml")


@functools.cache
def _cfn_lint_rules() -> Any:
    """cfn-lint's rules, loaded once per process (about 1.5 s each time `lint_file` loads them again). W3005 (a
    DependsOn already implied by a reference) is ignored: CDK writes such edges itself."""
    from cfnlint.core import get_rules  # type: ignore[import-untyped]

    return get_rules([], list(_IGNORED_RULES), [])


def clean_verdict(tool: str, inputs: list[bytes], run: Callable[[], list[str]]) -> list[str]:
    """What `run` finds in `inputs`, kept with the demo's templates (template_cache.py: `off` turns both off) under
    the hash of `tool` and `inputs` (the template, the tool's version and settings), as ruff and mypy keep their
    verdicts: a template already found clean is not linted again. Only a clean verdict (nothing found) is kept."""
    digest = hashlib.sha256(tool.encode())
    for part in inputs:
        digest.update(hashlib.sha256(part).digest())
    where = template_cache.folder()
    where, name = (where / "verdicts" if where else None), f"{tool}-{digest.hexdigest()[:32]}"
    if template_cache.load(where, name) == []:
        return []
    found = run()
    if not found:
        template_cache.store(where, name, [])
    return found


def settings_read(names: tuple[str, ...], env_prefixes: tuple[str, ...] = ()) -> bytes:
    """What a tool reads besides its arguments: these files in the working folder and the home folder (as they are,
    or their absence) and the environment variables with these prefixes; part of a verdict's key."""
    parts = []
    for folder in (Path.cwd(), Path.home()):
        for name in names:
            path = folder / name
            parts.append(f"{path}\0".encode() + (path.read_bytes() if path.is_file() else b"-"))
    parts += [f"{k}={v}".encode() for k, v in sorted(os.environ.items()) if env_prefixes and k.startswith(env_prefixes)]
    return b"\0".join(parts)


def cfn_lint(template: Path, *, keep: bool = True) -> list[str]:
    """cfn-lint's findings on a synthesized template, in-process (a command-line call pays 3.7 s to start); `keep`:
    a clean verdict is kept for the same template (`clean_verdict`), ~2.5 s a template."""

    def lint() -> list[str]:
        from cfnlint.api import lint  # type: ignore[import-untyped]

        return [f"{template.name}: {match}" for match in lint(text, rules=_cfn_lint_rules())]

    text = template.read_text()
    if not keep:
        return lint()
    inputs = [
        text.encode(),
        metadata.version("cfn-lint").encode(),
        repr(_IGNORED_RULES).encode(),
        settings_read(_CFN_LINT_FILES),
    ]
    return clean_verdict("cfn-lint", inputs, lint)


def shipped_context() -> dict[str, Any]:
    """The context the CDK CLI passes to the app from cdk.json."""
    context: dict[str, Any] = json.loads(CDK_JSON.read_text())["context"]
    return context


# What a synthesis depends on beyond template_cache.key's sources and libraries: cdk-nag fails it on a finding.
_SYNTH_LIBRARIES = ("cdk-nag",)
# The CDK App reads its context from a file this variable names (aws-cdk-lib's app.js), besides the CDK_* ones.
_APP_ENVIRONMENT = ("CONTEXT_OVERFLOW_LOCATION_ENV",)


def synthesis_key(context: dict[str, Any], kind: str, defined: list[Path] | None = None) -> str:
    """The hash of what a synthesis of the tests depends on: template_cache.key's (the app's sources, the CDK's
    versions, Python, `CDK_*`), cdk-nag's version, this module, the context with a configuration file's content in
    place of its (temporary) name, the Synth class and the files `defined` (where a subclass is written)."""
    hashed: dict[str, Any] = {**context, "synth class": kind}
    config = context.get(FILE_CONTEXT_KEY)
    if isinstance(config, str) and Path(config).is_file():
        hashed[FILE_CONTEXT_KEY] = {"file content": Path(config).read_text(encoding="utf-8")}
    hashed["libraries"] = {name: metadata.version(name) for name in _SYNTH_LIBRARIES}
    hashed["environment"] = {name: os.environ.get(name) for name in _APP_ENVIRONMENT}
    return template_cache.key(hashed, roots=[*template_cache.sources(), Path(__file__), CDK_JSON, *(defined or [])])


def _kept_synthesis(key: str) -> Path | None:
    where = template_cache.folder()
    return where / "syntheses" / key if where is not None else None


class Synth:
    """The app synthesized in-process with the context cdk.json gives the CLI and `context` over it.

    A cloud assembly synthesized (cdk-nag passed) is kept with the demo's templates under `synthesis_key`, and copied
    back for the same key: a test reads the files and `json`; only `app`, `stack` and `template` (jsii objects)
    synthesize again, when a test asks for them."""

    def __init__(self, outdir: Path, context: dict[str, Any] | None = None) -> None:
        # Bundling is exercised by its own tests; here the asset is the source folder as it is.
        self._context = {**shipped_context(), "aws:cdk:bundling-stacks": [], **(context or {})}
        self.outdir = outdir
        self.artifact_id = STACK_NAME
        # a subclass written elsewhere (OrgSynth) may read or make more: its file is part of the key
        defined = [Path(inspect.getfile(c)) for c in type(self).__mro__ if c is not object and c.__module__ != __name__]
        kept = _kept_synthesis(synthesis_key(self._context, type(self).__name__, defined))
        if kept is None or not _copied(kept, outdir):
            self._synthesize(outdir)
            if kept is not None:
                _keep(outdir, kept)
        self.json: dict[str, Any] = json.loads((outdir / f"{STACK_NAME}.template.json").read_text(encoding="utf-8"))

    def _synthesize(self, outdir: Path) -> None:
        app = App(outdir=str(outdir), context=self._context)
        self.app, self.stack = build_app(app)
        self.assembly = self.app.synth()  # raises on any unacknowledged cdk-nag finding
        self.template = Template.from_stack(self.stack)

    def __getattr__(self, name: str) -> Any:
        # A kept synthesis has no jsii objects: the first test that asks for one synthesizes the app again.
        if name not in ("app", "stack", "assembly", "template"):
            raise AttributeError(name)
        again = self.outdir.with_name(f"{self.outdir.name}-again")
        self._synthesize(again)
        return getattr(self, name)

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == kind}

    def one(self, kind: str, path_part: str = "") -> tuple[str, dict[str, Any]]:
        found = {k: v for k, v in self.resources(kind).items() if path_part in k}
        assert len(found) == 1, f"expected one {kind} matching {path_part!r}, found {list(found)}"
        return next(iter(found.items()))

    def shipped_config(self, function_path: str) -> GuardConfig:
        """What a function reads as its configuration: the file of its configuration layer, as
        staged in the cloud assembly (the asset CDK uploads), at the path its environment names."""
        _, fn = self.one("AWS::Lambda::Function", function_path)
        assert fn["Properties"]["Environment"]["Variables"][contract.ENV_CONFIG_FILE] == CONFIG_PATH
        layers = self.resources("AWS::Lambda::LayerVersion")
        [layer_id] = [ref["Ref"] for ref in fn["Properties"]["Layers"] if ref.get("Ref") in layers]
        object_key = layers[layer_id]["Properties"]["Content"]["S3Key"]
        manifest = json.loads((self.outdir / f"{self.artifact_id}.assets.json").read_text())
        [source] = [
            f["source"]
            for f in manifest["files"].values()
            if f["destinations"] and next(iter(f["destinations"].values()))["objectKey"] == object_key
        ]
        text = (self.outdir / source["path"] / CONFIG_FILE).read_text(encoding="utf-8")
        return GuardConfig.from_json(text, source=f"{function_path}: {CONFIG_FILE}")

    def report(self) -> dict[str, Any]:
        report: dict[str, Any] = json.loads((self.outdir / "validation-report.json").read_text())
        return report


# The one place an assembly names its checkout: an asset that is not staged (bundling skipped) keeps its source
# folder's absolute path in `<stack>.assets.json`. It is kept as this token and read back as the reader's checkout.
CHECKOUT = "{training-guard checkout}"
_CHECKOUT_ROOT = str(CDK_JSON.parent)


def _swap_checkout(folder: Path, old: str, new: str) -> None:
    """`old` at the start of a JSON string of the assets manifests, as `new`."""
    for assets in folder.glob("*.assets.json"):
        text = assets.read_text(encoding="utf-8")
        if f'"{old}' in text:
            assets.write_text(text.replace(f'"{old}', f'"{new}'), encoding="utf-8")


def _copied(kept: Path, outdir: Path) -> bool:
    """The kept cloud assembly copied to `outdir`; False when there is none (or it cannot be read)."""
    if not (kept / "manifest.json").is_file():
        return False
    try:
        shutil.copytree(kept, outdir, dirs_exist_ok=True)
        _swap_checkout(outdir, CHECKOUT, _CHECKOUT_ROOT)
        os.utime(kept)  # used: the last to be pruned
    except OSError:
        return False
    return True


def _keep(outdir: Path, kept: Path) -> None:
    """Keep a synthesized cloud assembly: copied whole beside its place, then renamed (a reader never sees half of
    it); a cache that cannot be written is only a slower next run."""
    partial = kept.with_name(f"{kept.name}.{os.getpid()}{_PARTIAL}")
    try:
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(outdir, partial)
        _swap_checkout(partial, _CHECKOUT_ROOT, CHECKOUT)
        os.replace(partial, kept)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    prune(kept.parent, KEPT_SYNTHESES)


# About three source versions' worth (a run synthesizes 35 configurations, ~0.4 MB each): older ones are pruned.
KEPT_SYNTHESES = 120
_PARTIAL = ".tmp"  # a folder being written or removed: never read, never counted
_STALE_PARTIAL_SECONDS = 24 * 3600  # one left by a process that died


def prune(where: Path, keep: int) -> None:
    """Remove all but the `keep` most recently used kept syntheses: each renamed first, so that a reader copies a
    whole one or finds none."""
    try:
        folders = [p for p in where.iterdir() if p.is_dir()]
        kept = sorted((p for p in folders if not p.name.endswith(_PARTIAL)), key=lambda p: p.stat().st_mtime)
        stale = [
            p for p in folders if p.name.endswith(_PARTIAL) and time.time() - p.stat().st_mtime > _STALE_PARTIAL_SECONDS
        ]
    except OSError:
        return
    for old in kept[: max(len(kept) - keep, 0)] + stale:
        going = old.with_name(f"{old.name}.{os.getpid()}.pruned{_PARTIAL}") if old in kept else old
        try:
            if going != old:
                os.replace(old, going)
        except OSError:
            continue
        shutil.rmtree(going, ignore_errors=True)


_SYNTHESIZED: dict[tuple[type, str], Synth] = {}


def synthesized(kind: type[SynthT], document: dict[str, Any], outdir: Path) -> SynthT:
    """The app synthesized (by `kind`, Synth or a subclass taking an outdir and the document) with the configuration
    file `document`, once per process: the tests of several modules read the same configuration's templates, and
    each synthesis costs about a second. Nothing changes a Synth once made (its tests read it). `outdir`: where a
    synthesis that is not made yet goes."""
    key = (kind, json.dumps(document, sort_keys=True))
    if key not in _SYNTHESIZED:
        _SYNTHESIZED[key] = kind(outdir, document)
    made = _SYNTHESIZED[key]
    assert isinstance(made, kind)
    return made


class ConfigSynth(Synth):
    """The app synthesized with the configuration file `document` (written beside the cloud assembly)."""

    file_name = "guard.json"

    def __init__(self, outdir: Path, document: dict[str, Any]) -> None:
        outdir.mkdir(parents=True, exist_ok=True)
        config_file = outdir / self.file_name
        config_file.write_text(json.dumps(document))
        super().__init__(outdir / "cdk.out", {"config": str(config_file)})


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return Synth(tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def stack(synth: Synth) -> TrainingGuardStack:
    return synth.stack
