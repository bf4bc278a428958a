"""checkov on the synthesized template, in `make test`: the session's template (the shipped cdk.json context, no
bundling), scanned by checkov from its own locked environment (tools/checkov/, installed by `make test` and
`make scan`). `make scan` does the same for any configuration (CONFIG=file) from the command line."""

from __future__ import annotations

import contextlib
import re
import subprocess
from pathlib import Path

from infra.components.names import STACK_NAME
from tests.infra.conftest import Synth, clean_verdict, settings_read

ROOT = Path(__file__).resolve().parents[2]
CHECKOV = ROOT / "tools" / "checkov" / ".venv" / "bin" / "checkov"
CHECKOV_LOCK = ROOT / "tools" / "checkov" / "uv.lock"


def test_checkov_fails_no_check_on_the_template(synth: Synth) -> None:
    assert CHECKOV.exists(), f"{CHECKOV.relative_to(ROOT)} is missing: `make test` or `make scan` installs it"
    template = synth.outdir / f"{STACK_NAME}.template.json"
    options = ["--framework", "cloudformation", "--compact", "--quiet", "--skip-download"]
    said: list[str] = []

    def scan() -> list[str]:
        done = subprocess.run(
            [str(CHECKOV), "-f", str(template), *options],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        said.append(done.stdout + done.stderr)
        passed = done.returncode == 0 and "Failed checks: 0" in done.stdout
        return [] if passed and re.search(r"Passed checks: [1-9]", done.stdout) else [said[-1]]

    # a clean scan of this very template by this very checkov (its lock) and command is kept, as cfn-lint's is
    # checkov also reads .checkov.yaml (here and in the home folder) and CKV_* variables (CKV_SKIP_CHECK, ...)
    with contextlib.chdir(ROOT):
        settings = settings_read((".checkov.yaml", ".checkov.yml"), ("CKV_", "BC_"))
    inputs = [template.read_bytes(), CHECKOV_LOCK.read_bytes(), " ".join(options).encode(), settings]
    assert clean_verdict("checkov", inputs, scan) == [], said  # failed checks, or no resource scanned
