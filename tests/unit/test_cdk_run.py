"""The CDK CLI wrapper: output passes through, the exit code is kept, known failures get their hint."""

from __future__ import annotations

import io
import stat
from pathlib import Path

from training_guard_local import cdk_run

ACCOUNT = (
    "Unable to resolve AWS account to use. It must be either configured when you define your CDK Stack, "
    "or through the environment"
)
BOOTSTRAP = (
    " ❌ Deployment failed: Error: TrainingGuard: SSM parameter /cdk-bootstrap/hnb659fds/version not found. "
    "Has the environment been bootstrapped? Please run 'cdk bootstrap'"
)


def fake_cli(tmp_path: Path, output: str, code: int) -> Path:
    script = tmp_path / "cdk"
    (tmp_path / "out.txt").write_text(output, encoding="utf-8")
    script.write_text(f"#!/bin/sh\ncat '{tmp_path / 'out.txt'}'\necho \"args: $*\" >&2\nexit {code}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_a_failure_the_cli_explains_badly_gets_the_hint_and_keeps_its_exit_code(tmp_path):
    out = io.StringIO()
    code = cdk_run.run(["deploy", "--no-notices"], cdk=fake_cli(tmp_path, ACCOUNT + "\n", 1), out=out)
    assert code == 1
    text = out.getvalue()
    assert text.startswith(ACCOUNT)
    assert "args: deploy --no-notices" in text  # stderr passes through too
    assert "export AWS_PROFILE=NAME AWS_REGION=REGION" in text
    assert "make bootstrap" not in text


def test_an_unbootstrapped_account_is_sent_to_make_bootstrap(tmp_path):
    out = io.StringIO()
    assert cdk_run.run(["deploy"], cdk=fake_cli(tmp_path, BOOTSTRAP + "\n", 1), out=out) == 1
    assert "run `make bootstrap` once" in out.getvalue()


def test_success_adds_nothing_even_when_a_known_message_was_printed(tmp_path):
    out = io.StringIO()
    assert cdk_run.run(["synth"], cdk=fake_cli(tmp_path, ACCOUNT + "\n", 0), out=out) == 0
    assert "training-guard:" not in out.getvalue()


def test_an_unknown_failure_gets_no_hint(tmp_path):
    out = io.StringIO()
    assert cdk_run.run(["deploy"], cdk=fake_cli(tmp_path, "something else broke\n", 3), out=out) == 3
    assert "training-guard:" not in out.getvalue()


def test_a_missing_cli_says_how_to_install_it(tmp_path, capsys):
    assert cdk_run.run(["synth"], cdk=tmp_path / "nope") == 2
    assert "make install" in capsys.readouterr().err


def test_each_hint_once_and_in_order():
    assert len(cdk_run.hints_for([ACCOUNT, "\n", BOOTSTRAP, ACCOUNT])) == 2
