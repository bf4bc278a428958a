"""The layer contract of the Lambda package, from the code's own imports (inside functions and under TYPE_CHECKING
too): nothing imports upward, no module imports a handler but a handler, the core imports neither wing (log rules,
Slack app), no import cycle here or in local/, and the deployed code imports nothing of the CDK, moto or local tools."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "training_guard": ROOT / "functions" / "training_guard",
    "training_guard_local": ROOT / "local" / "training_guard_local",
}
# Lower layers never import higher ones (docs/design/layers.md).
LAYERS = ("contract", "config", "domain", "render", "services", "adapters", "handlers")
NEVER_DEPLOYED = ("aws_cdk", "constructs", "moto", "training_guard_local", "infra", "tests")


def modules(package: str) -> dict[str, Path]:
    root = PACKAGES[package]
    found = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        found[".".join(parts)] = path
    return found


def imported(path: Path, module: str) -> Iterator[tuple[str, int]]:
    """Every module name an import statement of the file names (a `from X import y` names X and X.y)."""
    base = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                target = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target, node.lineno
            for alias in node.names:
                yield f"{target}.{alias.name}", node.lineno


def graph(package: str) -> dict[str, dict[str, int]]:
    """module -> {module of the same package it imports: first line}."""
    known = modules(package)
    edges: dict[str, dict[str, int]] = {m: {} for m in known}
    for module, path in known.items():
        for name, line in imported(path, module):
            target = name
            while target and target not in known:
                target = target.rsplit(".", 1)[0] if "." in target else ""
            if target and target != module:
                edges[module].setdefault(target, line)
    return edges


def layer(module: str) -> int:
    part = module.split(".")[1] if "." in module else ""
    return LAYERS.index(part) if part in LAYERS else -1


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_every_module_of_the_lambda_package_is_in_a_layer() -> None:
    outside = [m for m in modules("training_guard") if m != "training_guard" and layer(m) < 0]
    assert outside == []


def test_nothing_imports_upward() -> None:
    upward = [
        f"{module}:{line} imports {target} ({LAYERS[layer(module)]} -> {LAYERS[layer(target)]})"
        for module, targets in graph("training_guard").items()
        for target, line in targets.items()
        if layer(target) > layer(module) >= 0
    ]
    assert upward == []


def test_only_handlers_import_handlers_and_handlers_import_only_the_composition_root() -> None:
    wrong = []
    for module, targets in graph("training_guard").items():
        for target, line in targets.items():
            if layer(target) != LAYERS.index("handlers") or target == "training_guard.handlers":
                continue
            if layer(module) != LAYERS.index("handlers") or target != "training_guard.handlers.wiring":
                wrong.append(f"{module}:{line} imports {target}")
    assert wrong == []


def is_wing(module: str) -> bool:
    """The log-rules wing: the `log_*` modules of every layer (its wiring lines live in the composition root)."""
    return module.rsplit(".", 1)[-1].startswith("log_")


def test_the_core_never_imports_the_log_rules_wing() -> None:
    wrong = [
        f"{module}:{line} imports {target}"
        for module, targets in graph("training_guard").items()
        for target, line in targets.items()
        if is_wing(target) and not is_wing(module) and module != "training_guard.handlers.wiring"
    ]
    assert wrong == []
    assert is_wing("training_guard.domain.log_rules")
    assert not is_wing("training_guard.domain.policy")


# The Slack app wing (app mode: the bot's posts, threads, cards, the graph's upload, buttons and clicks), module by module.
SLACK_APP_WING = frozenset(
    {
        "render.slack_actions",
        "services.threads",
        "services.clicks",
        "services.slack_app_delivery",
        "adapters.slack_app",
        "adapters.threads",
        "adapters.interactions",
        "handlers.interactions",
    }
)


def in_slack_app_wing(module: str) -> bool:
    """A module of the Slack app wing: one named above, or any `slack_app_*` module (its wiring lives in the root)."""
    name = module.removeprefix("training_guard.")
    return name in SLACK_APP_WING or name.rsplit(".", 1)[-1].startswith("slack_app_")


def test_the_core_never_imports_the_slack_app_wing() -> None:
    wrong = [
        f"{module}:{line} imports {target}"
        for module, targets in graph("training_guard").items()
        for target, line in targets.items()
        if in_slack_app_wing(target) and not in_slack_app_wing(module) and module != "training_guard.handlers.wiring"
    ]
    assert wrong == []
    # A renamed or moved module would silently leave the wing: every name above is a module of the package.
    assert {f"training_guard.{name}" for name in SLACK_APP_WING} <= set(modules("training_guard"))
    assert in_slack_app_wing("training_guard.services.slack_app_delivery")
    assert not in_slack_app_wing("training_guard.services.chat")
    assert not in_slack_app_wing("training_guard.render.slack_messages")


# The organization wing (a hub acting in its members' accounts: AssumeRole sessions, the member's ledger) and the cost
# wing (the Price List API). The core reaches them through ports it defines (MemberAccessPort, MemberSweepersPort,
# PricesPort); pricing arithmetic and "which accounts" are domain facts, as layers.md says.
OTHER_WINGS = {"organization": frozenset({"adapters.accounts"}), "cost": frozenset({"adapters.price_list"})}


@pytest.mark.parametrize("wing", sorted(OTHER_WINGS))
def test_only_the_composition_root_imports_the_organization_and_cost_wings(wing: str) -> None:
    members = {f"training_guard.{name}" for name in OTHER_WINGS[wing]}
    assert members <= set(modules("training_guard"))  # a renamed module would silently leave the wing
    wrong = [
        f"{module}:{line} imports {target}"
        for module, targets in graph("training_guard").items()
        for target, line in targets.items()
        if target in members and module not in members and module != "training_guard.handlers.wiring"
    ]
    assert wrong == []


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_cycle(package: str) -> None:
    assert cycles(graph(package)) == []


def test_the_deployed_code_imports_nothing_of_the_cdk_moto_or_the_local_tools() -> None:
    wrong = [
        f"{module}:{line} imports {name}"
        for module, path in modules("training_guard").items()
        for name, line in imported(path, module)
        if name.split(".")[0] in NEVER_DEPLOYED
    ]
    assert wrong == []


def test_the_contract_finds_what_it_forbids(tmp_path: Path) -> None:
    # The checks above read real imports: an upward import and a cycle written here are found.
    path = tmp_path / "m.py"
    path.write_text("from __future__ import annotations\ndef f():\n    from training_guard.services import responder\n")
    assert ("training_guard.services.responder", 3) in set(imported(path, "training_guard.domain.m"))
    assert layer("training_guard.domain.policy") < layer("training_guard.services.responder")
    assert cycles({"a": {"b": 1}, "b": {"a": 1}, "c": {"a": 1}}) == [["a", "b"]]


def test_the_package_readme_names_every_module() -> None:
    package = PACKAGES["training_guard"]
    readme = (package / "README.md").read_text(encoding="utf-8")
    missing = []
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).parts
        shown = "/".join(parts[1:] if parts[0] in LAYERS else parts)  # named within its layer's list
        if path.name != "__init__.py" and f"`{shown}`" not in readme:
            missing.append(shown)
    assert missing == []
