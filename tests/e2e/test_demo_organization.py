"""`make demo SCENARIO=organization`: one hub and two member accounts on moto, through the synthesized hub and member
stacks. The diverging job in member A is stopped through A's role, B's job of the same name is only notified, an
outsider's events are ignored and counted, the sweep takes every account, and the summary groups the jobs by
account."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.test_readme import check_demo_block
from training_guard_local import scenario as scenarios
from training_guard_local.cli import demo_of, main
from training_guard_local.demo import Demo

pytestmark = pytest.mark.e2e

HUB = "123456789012"
MEMBER_A = "444455556666"
MEMBER_B = "777788889999"
OUTSIDER = "999999999999"
ROLE_A = f"arn:aws:iam::{MEMBER_A}:role/TrainingGuardMember"
ROLE_B = f"arn:aws:iam::{MEMBER_B}:role/TrainingGuardMember"
HUB_BUS_ARN = f"arn:aws:events:us-east-1:{HUB}:event-bus/training-guard-hub"
SCENARIO = scenarios.resolve("organization")


@dataclass(frozen=True)
class Played:
    code: int
    out: str

    def summary(self) -> dict[str, tuple[str, dict[str, list[str]]]]:
        """The summary by account: each account's line, and its jobs' rows (cells stripped) by job key."""
        text = self.out.split("\nSummary by account\n", 1)[1].split("\n  Spend:", 1)[0]
        accounts: dict[str, tuple[str, dict[str, list[str]]]] = {}
        rows: dict[str, list[str]] = {}
        for line in text.splitlines()[2:]:  # under the header and its rule
            heading = re.match(r"^  ([0-9]{12}) · (.*)$", line)
            if heading:
                rows = {}
                accounts[heading[1]] = (heading[2], rows)
            elif "│" in line:
                cells = [cell.strip() for cell in line.split("│")]
                rows[cells[0]] = cells[1:]
        return accounts

    def at(self, minute: str) -> str:
        """Every line the timeline printed at one minute (`+00:06`): its steps and what followed each."""
        lines: list[str] = []
        inside = False
        for line in self.out.splitlines():
            if line.startswith(("[", "Summary")):
                inside = line.startswith(f"[{minute}]")
            if inside:
                lines.append(line)
        return "\n".join(lines)


@pytest.fixture(scope="module")
def played() -> Played:
    out = io.StringIO()
    code = demo_of("organization", out=out).run()  # what `training-guard demo --scenario organization` runs
    return Played(code, out.getvalue())


def test_the_readmes_organization_block_is_what_the_demo_printed(played: Played) -> None:
    check_demo_block("organization", played.out)


def test_the_organization_scenario_meets_its_expectations(played: Played) -> None:
    assert played.code == 0, played.out
    assert "All expectations met." in played.out


def test_the_hub_stacks_rules_are_installed_on_its_default_bus_and_on_the_hub_bus(played: Played) -> None:
    out = played.out
    job_pattern = '{"detail-type": ["SageMaker Training Job State Change"], "source": ["aws.sagemaker"]}'
    assert re.search(rf"rule JobEventsRule\w+: {re.escape(job_pattern)} -> training_guard.handlers.job_events", out)
    assert re.search(
        rf"rule MemberJobEvents\w+ on bus training-guard-hub: {re.escape(job_pattern)} -> "
        "training_guard.handlers.job_events.handler",
        out,
    )
    assert re.search(r"rule MemberAlarmEvents\w+ on bus training-guard-hub: .* -> .*alarm_events.handler", out)
    # each member's forwarding rules: the single-account patterns, to the hub bus
    assert re.search(rf"rule ForwardingJobEvents\w+: {re.escape(job_pattern)} -> {re.escape(HUB_BUS_ARN)}", out)
    assert re.search(rf"rule ForwardingAlarmEvents\w+: .*training-guard-.* -> {re.escape(HUB_BUS_ARN)}", out)
    assert (
        "role TrainingGuardMember: trusted by the hub's TrainingGuardHub-JobEvents-us-east-1, "
        "TrainingGuardHub-AlarmEvents-us-east-1, TrainingGuardHub-Sweeper-us-east-1, "
        "TrainingGuardHub-LogEvents-us-east-1 (aws:PrincipalArn)" in out  # the log rules stop members' jobs too
    )
    assert f"installed in {MEMBER_A}, {MEMBER_B}; and in {OUTSIDER}, of the StackSet's units but not a member" in out
    assert "StackSet TrainingGuardMembers in the hub's template: SERVICE_MANAGED, automatic deployment" in out


def test_the_diverging_job_in_a_is_stopped_once_through_as_role(played: Played) -> None:
    at6 = played.at("+00:06")
    assert f"mnist-a in {MEMBER_A}: InProgress/Training; VanishingGradient=IssuesFound" in at6
    assert f"StopTrainingJob called in {MEMBER_A} via {ROLE_A}; stopped (issues_found)" in at6
    assert played.out.count("StopTrainingJob called") == 2  # A's job and the hub's own, once each
    assert "slack #research-a │ 🔴 Stopped pytorch-mnist-lr01-2026-11-30-02-10-00" in at6
    assert f"EventBridge in {MEMBER_A}: its default bus's forwarding rule -> hub bus training-guard-hub" in played.out


def test_bs_job_of_the_same_name_is_notified_and_never_stopped(played: Played) -> None:
    at7 = played.at("+00:07")
    assert (
        f"mnist-b in {MEMBER_B}: InProgress/Training; VanishingGradient=InProgress, LossNotDecreasing=IssuesFound"
        in (at7)
    )
    assert "guard: notified (issues_found)" in at7
    assert "slack #research-b │ 🟠 Rule LossNotDecreasing found issues in pytorch-mnist-lr01" in at7
    assert f"StopTrainingJob called in {MEMBER_B}" not in played.out


def test_the_outsiders_events_are_ignored_counted_and_its_role_never_assumed(played: Played) -> None:
    ignored = f"ignored: event from account {OUTSIDER}, not a member of this guard's organization"
    assert played.out.count(ignored) == 2
    assert f"{ignored}; EventsFromOtherAccounts +1 (1 so far)" in played.at("+00:02")
    assert f"{ignored}; EventsFromOtherAccounts +1 (2 so far)" in played.at("+00:09")


def test_the_hubs_own_job_is_stopped_with_its_own_credentials(played: Played) -> None:
    assert f"StopTrainingJob called in {HUB} with the hub's own credentials; stopped (metric_alarm)" in played.at(
        "+00:10"
    )
    assert "slack #platform │ 🔴 Stopped resnet50-no-debugger" in played.at("+00:10")


def test_the_sweep_takes_the_hub_then_each_member_through_its_role(played: Played) -> None:
    sweep = played.at("+00:16")
    lines = [line.split("guard: ", 1)[1] for line in sweep.splitlines() if "running job(s)" in line]
    swept = [line.split(":", 1)[0] for line in lines]
    # the hub first; the members in an order that turns with every sweep (sweeper.member_order: by the clock)
    assert swept[0] == f"{HUB} (hub, own credentials)"
    assert sorted(swept[1:]) == [
        f"{MEMBER_A} (via role TrainingGuardMember)",
        f"{MEMBER_B} (via role TrainingGuardMember)",
    ]
    [b] = [line for line in lines if line.startswith(MEMBER_B)]
    assert "1 running job(s), 0 reconciled, 1 stalled" in b
    assert re.search(r"guard: +stalled: mnist-b", sweep)
    assert "slack #research-b │ 🟠 pytorch-mnist-lr01-2026-11-30-02-10-00: no new metrics" in sweep
    assert OUTSIDER not in sweep


def test_the_summary_groups_the_jobs_by_account(played: Played) -> None:
    summary = played.summary()
    assert list(summary) == [HUB, MEMBER_A, MEMBER_B, OUTSIDER]
    assert {account: list(rows) for account, (_, rows) in summary.items()} == {
        HUB: ["resnet"],
        MEMBER_A: ["mnist-a"],
        MEMBER_B: ["mnist-b"],
        OUTSIDER: ["outsider"],
    }
    assert summary[HUB][0] == "the hub: its own jobs, with its own credentials; 1 stop(s)"
    assert summary[MEMBER_A][0] == f"member: AssumeRole {ROLE_A} x1; 1 stop(s), via {ROLE_A}"
    assert summary[MEMBER_B][0] == f"member: AssumeRole {ROLE_B} x1; 0 stop(s)"
    assert summary[OUTSIDER][0] == (
        "not a member: 2 event(s) ignored (EventsFromOtherAccounts); its role never assumed; 0 stop(s)"
    )
    # what it did, Slack messages, final status
    assert [summary[MEMBER_A][1]["mnist-a"][i] for i in (1, 4, 5)] == ["stopped", "1", "Stopped"]
    assert [summary[MEMBER_B][1]["mnist-b"][i] for i in (1, 4, 5)] == ["notified, notified", "2", "InProgress"]
    assert [summary[OUTSIDER][1]["outsider"][i] for i in (1, 4, 5)] == ["ignored", "0", "InProgress"]
    assert [summary[HUB][1]["resnet"][i] for i in (1, 4, 5)] == ["stopped", "1", "Stopped"]


def test_outcomes_that_differ_from_the_expectations_fail_the_demo(tmp_path: Path) -> None:
    data = json.loads(SCENARIO.read_text())
    data["expect"]["mnist-a"]["stopped_via"] = "hub"
    data["expect"]["outsider"]["ignored_events"] = 1
    data["expect"]["mnist-b"]["stopped_via"] = ROLE_B
    path = tmp_path / "organization.json"
    path.write_text(json.dumps(data))
    out = io.StringIO()
    assert Demo(scenarios.load(path), out=out).run() == 1
    text = out.getvalue()
    assert f"✗ mnist-a: stopped via {ROLE_A}, expected hub" in text
    assert f"✗ mnist-b: stopped via None, expected {ROLE_B}" in text
    assert "✗ outsider: 2 event(s) ignored as another account's, expected 1" in text


def test_the_scenario_runs_by_name_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    """`make demo SCENARIO=organization` is `training-guard demo --scenario organization`; a wrong hub exits 2."""
    assert scenarios.resolve("organization") == SCENARIO
    example = Path(__file__).parents[2] / "configs" / "organization.json"
    assert main(["demo", "--scenario", "organization", "--config", str(example)]) == 2
    err = capsys.readouterr().err
    assert "organization.hub_account: the demo's hub is moto's default account 123456789012" in err
    assert f"--config {example} (layered over cdk.json context 'training-guard') names 111122223333" in err
