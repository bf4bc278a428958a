"""`python -m training_guard_local.cdk_run ARGS...`: the pinned CDK CLI, with a hint after the failures new users meet.

The Makefile runs every `cdk` command (synth, diff, bootstrap, deploy) through this. The CLI's own output passes
through unchanged, line by line as it comes; the exit code is the CLI's. When the CLI fails with a message this
module knows, one more block says what it means and what to run. The messages are the CLI's own wording, as users
report them (the first two in aws/aws-cdk#13030 and in many READMEs that add a `cdk bootstrap` step):
- "Unable to resolve AWS account to use. It must be either configured when you define your CDK Stack, or through
  the environment": no usable credentials (or no region) for the environment-agnostic stack.
- "SSM parameter /cdk-bootstrap/<qualifier>/version not found. Has the environment been bootstrapped?": the account
  and region were never bootstrapped.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final, TextIO

CDK: Final = Path("node_modules/.bin/cdk")

HINTS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (
        re.compile(r"Unable to resolve AWS account to use"),
        "the CDK CLI found no usable AWS credentials (or no region) for this shell. Choose them first:\n"
        "  export AWS_PROFILE=NAME AWS_REGION=REGION    (a profile from `aws configure --profile NAME`,\n"
        "                                                or `aws sso login --profile NAME` for IAM Identity Center)\n"
        "then `make preflight` shows the account and region the deploy will use.",
    ),
    (
        re.compile(r"/cdk-bootstrap/\S+ not found|Has the environment been bootstrapped"),
        "this account and region have not been bootstrapped for the CDK yet: run `make bootstrap` once "
        "(with the same AWS_PROFILE and AWS_REGION), then deploy again.",
    ),
    (
        re.compile(r"ExpiredToken|security token included in the request is expired|[Tt]oken has expired"),
        "the credentials have expired: renew them (e.g. `aws sso login --profile NAME`) and run the command again.",
    ),
)


def quiet_node_banner() -> None:
    """Before jsii starts in this process: jsii prints a multi-line end-of-life banner (as Python bytes, on stderr) for
    an old Node.js unless told its version. The commands that start it say what the Node.js version means in their own
    words (preflight's nodejs check, the README's requirements); the Makefile exports the same variable."""
    if "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION" in os.environ:
        return
    try:
        version = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout  # noqa: S607
    except OSError:
        return
    major = version.strip().lstrip("v").split(".")[0]
    if major.isdigit():
        os.environ["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = major


def hints_for(lines: Iterable[str]) -> list[str]:
    """The hints whose message appears in the output, each once, in the order of HINTS."""
    text = "".join(lines)
    return [hint for pattern, hint in HINTS if pattern.search(text)]


def run(args: Sequence[str], *, cdk: Path = CDK, out: TextIO = sys.stdout) -> int:
    """Run the CLI, echo its output as it comes, and add the hints when it fails."""
    if not cdk.exists():
        print(f"{cdk} is missing: run `make install` first", file=sys.stderr)
        return 2
    seen: list[str] = []
    with subprocess.Popen(  # noqa: S603 - the project's pinned CLI with the Makefile's arguments
        [str(cdk), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        bufsize=1,
        env=os.environ,
    ) as cli:
        assert cli.stdout is not None
        for line in cli.stdout:
            out.write(line)
            out.flush()
            seen.append(line)
    if cli.returncode != 0:
        for hint in hints_for(seen):
            out.write(f"\ntraining-guard: {hint}\n")
    return cli.returncode


if __name__ == "__main__":
    try:
        sys.exit(run(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
