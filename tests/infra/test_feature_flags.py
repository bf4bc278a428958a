"""cdk.json sets every CDK feature flag: `cdk synth` no longer reports "85 feature flags are not configured".

The recommended values come from the installed aws-cdk-lib itself (`recommended-feature-flags.json`
in its jsii assembly, what `cdk init` writes into a new project), so a CDK upgrade that adds a flag
fails here until cdk.json decides it. The flags changed the template in place only: IAM action
lists sorted, the key policy's two Secrets Manager statements merged into one, and the order of
two layers (see the commit that set them).
"""

from __future__ import annotations

import functools
import json
import tarfile
from pathlib import Path
from typing import Any

import aws_cdk
import pytest

from infra.app import FEATURE_FLAG_EXCEPTIONS
from tests.infra.conftest import Synth, shipped_context

RESTRICT_SQS_DECRYPTION = "@aws-cdk/aws-sns-subscriptions:restrictSqsDescryption"


@functools.cache
def recommended_flags() -> dict[str, Any]:
    [assembly] = (Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    # read as a stream up to the member (naming it would index all of the 38 MB archive first: 1.2 s a time)
    with tarfile.open(assembly, "r|gz") as tar:
        for info in tar:
            if info.name == "package/recommended-feature-flags.json":
                member = tar.extractfile(info)
                assert member is not None
                flags: dict[str, Any] = json.load(member)
                return flags
    raise AssertionError(f"{assembly.name} holds no recommended-feature-flags.json")


def test_cdk_json_sets_every_recommended_flag_to_its_recommended_value_but_the_explained_ones() -> None:
    recommended = recommended_flags()
    context = shipped_context()
    assert len(recommended) == 89  # aws-cdk-lib 2.275.0; the CLI counted 85 of them as unconfigured
    expected = {flag: FEATURE_FLAG_EXCEPTIONS.get(flag, (value, ""))[0] for flag, value in recommended.items()}
    flags = {key: value for key, value in context.items() if key.startswith("@aws-cdk")}
    assert flags == expected  # every flag set, none unknown (the v1 flag newStyleStackSynthesis is gone)


def test_each_exception_is_a_recommended_flag_set_otherwise_with_a_reason() -> None:
    recommended = recommended_flags()
    for flag, (value, reason) in FEATURE_FLAG_EXCEPTIONS.items():
        assert flag in recommended
        assert value != recommended[flag]
        assert len(reason) > 80


def test_restricting_sqs_decryption_to_the_topic_would_make_the_key_and_the_topic_depend_on_each_other(
    tmp_path: Path,
) -> None:
    # Why that flag stays off: with it, CDK's own template validation refuses the stack.
    with pytest.raises(RuntimeError, match=r"Circular dependency with \[EncryptionKey\w+ -> AlertingTopic\w+ ->"):
        Synth(tmp_path, {RESTRICT_SQS_DECRYPTION: True})


def test_the_key_policy_names_no_topic_or_queue(synth: Synth) -> None:
    # The shipped stack: nothing in the key policy refers to a resource encrypted with the key.
    _, key = synth.one("AWS::KMS::Key")
    policy = json.dumps(key["Properties"]["KeyPolicy"])
    assert '"Ref": "Alerting' not in policy
    assert '"Ref": "Chat' not in policy
