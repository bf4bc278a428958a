"""checkov on the synthesized template, in `make test`: the session's template (the shipped cdk.json context, no
bundling), scanned by checkov from its own locked environment (tools/checkov/, installed by `make test` and
`make scan`). `make scan` does the same for any configuration (CONFIG=file) from the command line."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from infra.components.names import STACK_NAME
from tests.infra.conftest import Synth

ROOT = Path(__file__).resolve().parents[2]
CHECKOV = ROOT / "tools" / "checkov" / ".venv" / "bin" / "checkov"


def test_checkov_fails_no_check_on_the_template(synth: Synth) -> None:
    assert CHECKOV.exists(), f"{CHECKOV.relative_to(ROOT)} is missing: `make test` or `make scan` installs it"
    template = synth.outdir / f"{STACK_NAME}.template.json"
    done = subprocess.run(
        [str(CHECKOV), "-f", str(template), "--framework", "cloudformation", "--compact", "--quiet", "--skip-download"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Failed checks: 0" in done.stdout, done.stdout
    assert re.search(r"Passed checks: [1-9]", done.stdout), done.stdout  # it scanned resources, not an empty file
