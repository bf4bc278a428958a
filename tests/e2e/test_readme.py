"""The README says what is true: every command block marked `<!-- checked -->` is run, and what it shows is
what the command prints.

A checked block is a ```console block right after the marker. Its `$ ` lines are commands (a trailing `\\`
continues one), run in order by bash from the project root, each with the earlier `NAME=value` lines of the block
in effect; the other lines are what they print (stdout and stderr together). Every shown line must appear in the
output, in order, with any lines between them (the README shows excerpts); a shown line ending in `...` or `…`
matches any line that starts with what comes before it, and a `…` inside a line stands for any text left out there
(`{"job": "j", …"duplicates": 1, …}`); a line that is only `...` marks a gap and matches nothing.
A block that only plays the demo (`make demo`, `.venv/bin/training-guard demo --scenario NAME`) is not run here: the
e2e module that plays that scenario checks it against its own run (`check_demo_block`), see DEMO_CHECKED_IN.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKER = "<!-- checked -->"
ELLIPSES = ("...", "…")


@dataclass
class Block:
    line: int  # where it starts in its file, for the failure message
    commands: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    source: str = "README.md"  # the file it is in: the README or a page of docs/


def checked_blocks(text: str, source: str = "README.md") -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        assert lines[i + 1].strip() == "```console", f"{source} line {i + 2}: a checked block is a ```console block"
        block = Block(line=i + 2, source=source)
        pending = ""
        for body in lines[i + 2 :]:
            if body.strip() == "```":
                break
            if pending or body.startswith("$ "):
                command = (pending + " " + body.removeprefix("$ ").strip()).strip()
                pending = command[:-1].rstrip() if command.endswith("\\") else ""
                if not pending:
                    block.commands.append(command)
            else:
                block.shown.append(body.rstrip())
        blocks.append(block)
    return blocks


def matches(shown: str, actual: str) -> bool:
    for ellipsis in ELLIPSES:
        if shown.endswith(ellipsis):
            shown = shown.removesuffix(ellipsis) + "…"
            break
    pieces = shown.split("…")  # text left out inside a line (a JSON line's other keys): any text, in order
    if len(pieces) == 1:
        return actual == shown
    if not actual.startswith(pieces[0]):
        return False
    at = len(pieces[0])
    for piece in pieces[1:-1]:
        found = actual.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return actual.endswith(pieces[-1]) and len(actual) - len(pieces[-1]) >= at


def missing(shown: list[str], output: list[str]) -> str | None:
    """The first shown line not found, in order, in the output (None: all found)."""
    at = 0
    for line in shown:
        if not line.strip() or line.strip() in ELLIPSES:
            continue
        while at < len(output) and not matches(line, output[at]):
            at += 1
        if at == len(output):
            return line
        at += 1
    return None


def run(block: Block) -> list[str]:
    assignments: list[str] = []
    output: list[str] = []
    for shown_command in block.commands:
        if re.fullmatch(r"[A-Z_]+=\S+", shown_command):
            assignments.append(shown_command)
            continue
        script = "; ".join([*assignments, shown_command])
        done = subprocess.run(  # the README's own commands, from the project root
            ["bash", "-c", script],  # noqa: S607
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
        )
        output += (done.stdout + done.stderr).splitlines()
    return [line.rstrip() for line in output]


def check(block: Block, output: list[str]) -> None:
    first_missing = missing(block.shown, output)
    assert first_missing is None, (
        f"{block.source} line {block.line}: this shown line is not in the output (in order):\n  {first_missing}\n"
        "output was:\n" + "\n".join(output[:200])
    )


# The README's blocks and those of the pages it hands its reference to (docs/slack-app.md, ...).
BLOCKS = checked_blocks(README.read_text(encoding="utf-8")) + [
    block
    for page in sorted((ROOT / "docs").glob("*.md"))
    for block in checked_blocks(page.read_text(encoding="utf-8"), f"docs/{page.name}")
]

# A block that only runs the demo is checked by the e2e module that plays that scenario anyway (a demo costs seconds
# of CPU): against what `cli.demo_of`, the function behind `training-guard demo`, printed there.
DEMO_COMMAND = re.compile(r"(?:make demo|\.venv/bin/training-guard demo)(?: --scenario (\w+))?")
DEMO_CHECKED_IN = {
    "seed": "tests/e2e/test_demo.py",
    "organization": "tests/e2e/test_demo_organization.py",
    "slack_app": "tests/e2e/test_demo_slack_app.py",
}


def demo_scenario(block: Block) -> str | None:
    """The scenario a block does nothing but play (`make demo`: seed), or None."""
    found = DEMO_COMMAND.fullmatch(block.commands[0]) if len(block.commands) == 1 else None
    return (found.group(1) or "seed") if found else None


def check_demo_block(scenario: str, printed: str) -> None:
    """The README's block that plays `scenario` shows lines of what the demo printed."""
    [block] = [b for b in BLOCKS if demo_scenario(b) == scenario]
    check(block, [line.rstrip() for line in printed.splitlines()])


def test_the_readme_has_checked_blocks() -> None:
    assert len(BLOCKS) >= 1


def test_every_demo_block_is_checked_by_the_module_that_plays_its_scenario() -> None:
    played = {demo_scenario(b) for b in BLOCKS} - {None}
    assert played <= DEMO_CHECKED_IN.keys(), f"add a check_demo_block call for {played - DEMO_CHECKED_IN.keys()}"
    for scenario, module in DEMO_CHECKED_IN.items():
        assert f'check_demo_block("{scenario}", ' in (ROOT / module).read_text(encoding="utf-8"), module


COMMAND_BLOCKS = [b for b in BLOCKS if demo_scenario(b) is None]


@pytest.mark.parametrize(
    "block", COMMAND_BLOCKS, ids=[f"{b.source} line {b.line}: {b.commands[-1][:60]}" for b in COMMAND_BLOCKS]
)
def test_a_checked_readme_block_shows_what_its_commands_print(block: Block) -> None:
    check(block, run(block))


def test_the_matcher_finds_lines_in_order_with_gaps_and_prefixes() -> None:
    output = ["a", "b 1", "c", "d"]
    assert missing(["a", "...", "c"], output) is None
    assert missing(["b ...", "d"], output) is None
    assert missing(["c", "a"], output) == "a"  # order matters
    assert missing(["b"], output) == "b"  # no prefix match without an ellipsis


def test_an_ellipsis_inside_a_line_stands_for_the_text_left_out_there() -> None:
    line = '{"job": "j", "stopped": false, "titles": [], "duplicates": 1, "job_status": "Stopping"}'
    assert matches('{"job": "j", "stopped": false, …"duplicates": 1, …}', line)
    assert matches('{"job": "j", …', line)
    assert not matches('{"job": "j", …"duplicates": 2, …}', line)
    assert not matches('{"job": "j", …"titles": …"stopped"…}', line)  # in order
    assert not matches('{"job": "k", …}', line)
