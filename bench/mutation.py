"""`make mutation`: mutation testing of the guard's core with mutmut 3, one module at a time.

    python -m bench.mutation                      # every module of MODULES
    python -m bench.mutation --modules policy     # only these (comma- or space-separated)
    python -m bench.mutation --report-only        # rewrite docs/mutation.md from its data (EXPLAINED edited)

For each module mutmut mutates that one file and runs, for every mutant, those tests of the module's row
that reach the mutated function (mutmut records which in a first clean run). The results go to
docs/mutation.md: the score of each module, every surviving mutant as a one-line diff, and for each
survivor left on purpose the reason it does not matter (EXPLAINED). Modules not run this time keep their
last results; the first result of a module stays as its baseline while its test files stay the same.

Why a driver rather than a bare `mutmut run`: mutmut reads one `[mutmut]` section (setup.cfg), so one run
would mutate every module against every test file, hours on 2 cores. Here each module runs in a fresh
process with its own file and test files set on mutmut's configuration, from an empty mutants/, so no
verdict cached for another module or for older code leaks into the figures.

Why `src`: mutmut names a mutant's module after its file path and strips only a leading `src.`; the tests
import `training_guard.domain.policy`, so the code must be reached as src/training_guard/... The driver links
src -> functions (git-ignored) and leaves it, so that `mutmut show NAME` / `mutmut browse` work after a run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "mutation.md"
LINK = ROOT / "src"
KILLED = frozenset({"killed", "timeout", "caught by type check"})  # a timeout is a mutant the tests stopped
_DATA = re.compile(r"<!-- mutation-data (?P<json>\{.*\}) -->", re.DOTALL)


@dataclass(frozen=True)
class Target:
    source: str  # as mutmut sees it, through the src link
    tests: tuple[str, ...]  # the test files that cover the module, fast enough to run per mutant


MODULES: dict[str, Target] = {
    "policy": Target("src/training_guard/domain/policy.py", ("tests/unit/test_policy.py",)),
    "metric_guards": Target("src/training_guard/domain/metric_guards.py", ("tests/unit/test_metric_guards.py",)),
    "adapters/ledger": Target(
        "src/training_guard/adapters/ledger.py",
        (
            "tests/integration/test_ledger_contract.py",  # the ledger's contract on moto and on the fake
            "tests/unit/test_limits.py",  # the longest keys DynamoDB must take
        ),
    ),
    "responder": Target(
        "src/training_guard/services/responder.py",
        (
            "tests/unit/test_responder.py",
            "tests/unit/test_tags_unknown.py",  # an event without Tags
            "tests/unit/test_limits.py",
            "tests/unit/test_spend.py",  # the spend of a notification and what a stop avoided (the meter)
            "tests/unit/test_slack_app_mode.py",  # Stop now (stop_requested) and the mutes a decision reads
            "tests/campaign/test_duplicates.py",
            "tests/integration/test_metric_guards.py",  # the alarm path end to end on moto
            "tests/unit/test_accounts.py",  # responder_in: the responder of the event's account
        ),
    ),
    "once": Target("src/training_guard/services/once.py", ("tests/unit/test_once.py",)),
    "chat": Target(
        "src/training_guard/services/chat.py",
        (
            "tests/unit/test_slack_messages.py",  # webhook delivery, once per (transition, webhook), parking
            "tests/unit/test_slack_app_mode.py",  # app mode: threads, cards, charts
            "tests/unit/test_chat_delivery.py",  # each result list, ledger key, park and retry; routing; budget
            "tests/unit/test_member_charts.py",  # a member's job: a graph link, no picture
        ),
    ),
    "slack_app_delivery": Target(
        "src/training_guard/services/slack_app_delivery.py",
        (
            "tests/unit/test_slack_app_mode.py",  # app mode: threads, cards, charts
            "tests/unit/test_chat_delivery.py",  # each result list, ledger key, park and retry
            "tests/unit/test_member_charts.py",  # a member's job: a graph link, no picture
        ),
    ),
    "sweeper": Target(
        "src/training_guard/services/sweeper.py",
        (
            "tests/unit/test_sweeper.py",
            "tests/unit/test_sweeper_resilience.py",  # a failing read or job never ends the sweep
            "tests/integration/test_metric_guards.py",
            "tests/unit/test_limits.py",
        ),
    ),
}


@dataclass(frozen=True)
class Explained:
    """A survivor left on purpose: the mutated function, text in the removed and added lines, and why."""

    function: str
    removed: str
    added: str
    reason: str


# Each entry matches survivors whose one-line diff contains `removed` and `added` in `function`.
EXPLAINED: dict[str, tuple[Explained, ...]] = {
    "policy": (
        Explained(
            "stop_cause",
            'job.secondary_status or ""',
            'job.secondary_status or "XXXX"',
            "equivalent: without a secondary status both look up a key that no stop cause has, and get None",
        ),
    ),
    "metric_guards": (
        Explained(
            "_parse_tag",
            '(match.group("action") or "notify").lower()',
            '(match.group("action") or "NOTIFY").lower()',
            "equivalent: the default is lower-cased before use, so NOTIFY and notify are the same action",
        ),
        Explained(
            "parse_alarm_event",
            "dimensions: Mapping[str, Any] = {}",
            "dimensions: Mapping[str, Any] = None",
            "equivalent: both branches that follow assign dimensions before it is read",
        ),
    ),
    "adapters/ledger": (
        *(
            Explained(
                function,
                removed,
                added,
                "equivalent: DynamoDB lists its reserved words, AND, OR, SET and REMOVE among them, as not "
                "case-sensitive (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ReservedWords.html); "
                "moto parses both spellings",
            )
            for function, removed, added in (
                ("DynamoLedger.claim", "attribute_not_exists(#pk) OR (#state", "attribute_not_exists(#pk) or (#state"),
                ("DynamoLedger.claim_stop", "attribute_not_exists(#pk) OR #rule", "attribute_not_exists(#pk) or #rule"),
                ("DynamoLedger.complete", 'UpdateExpression="SET #state', 'UpdateExpression="set #state'),
                ("_stop_update", '"UpdateExpression": "SET "', '"UpdateExpression": "set "'),
                (
                    "DynamoLedger.claim_first_stop",
                    '" AND (attribute_not_exists(#until) OR',
                    '" and (attribute_not_exists(#until) or',
                ),
                ("DynamoLedger.confirm_stop", 'UpdateExpression="SET #confirmed', 'UpdateExpression="set #confirmed'),
                ("DynamoLedger.drop_stop", 'UpdateExpression="REMOVE "', 'UpdateExpression="remove "'),
                ("DynamoLedger.fold", 'UpdateExpression="ADD #folded', 'UpdateExpression="add #folded'),
                ("DynamoLedger.record_stop_spend", '"SET spend_avoided_usd', '"set spend_avoided_usd'),
                (
                    "DynamoLedger.release_stop_lease",
                    'UpdateExpression="REMOVE lease_until"',
                    'UpdateExpression="remove lease_until"',
                ),
            )
        ),
        *(
            Explained(
                "DynamoLedger.claim_stop",
                "previous = _record(old) if old else self.get_stop(record.job)",
                added,
                "a refused write returns the record that refused it (ReturnValuesOnConditionCheckFailure=ALL_OLD), "
                "on AWS and on moto: the read is there for a response without it, which neither gives",
            )
            for added in ("if (old) or True else", "self.get_stop(None)")
        ),
        Explained(
            "DynamoLedger.claim_stop",
            "(previous.lease_until or 0) >",
            "(previous.lease_until or 1) >",
            "equivalent: a record without a lease compares 0 or 1 with an epoch of today, and both are smaller",
        ),
        *(
            Explained(
                "DynamoLedger.claim",
                'old.get("state", {})',
                added,
                "equivalent: every item under a transition key has a state (claim writes in_progress, complete "
                "sets done), so the default is never used",
            )
            for added in ('old.get("state", None)', 'old.get("state", ).')
        ),
    ),
    "once": (
        Explained(
            "once.__init__",
            "self._held: Held | None = None",
            'self._held: Held | None = ""',
            "read only in __exit__, which Python calls after __enter__ has set it: the initial value is never seen",
        ),
    ),
    "responder": (
        *(
            Explained(
                "Responder._react",
                'outcome="done", keep_if_unrecorded=True',
                added,
                "the block sets held.outcome (the outcome, or folded) before it ends, and an exception releases the "
                "claim: the outcome once() starts with is never recorded",
            )
            for added in ("outcome=None,", 'outcome="XXdoneXX",', 'outcome="DONE",')
        ),
        Explained(
            "Responder._held",
            "lease_seconds=self.lease_seconds,",
            "lease_seconds=None,",
            "with `acquire` (the responder's busy-waiting claim, which passes its own lease) once() never claims "
            "with this value",
        ),
        *(
            Explained(
                "Responder._stop",
                'rule = decision.finding.name if decision.finding else "?"',
                added,
                "equivalent: a stop always carries its finding (policy.decide_finding is the only place that plans "
                "one), so the fallback is never used",
            )
            for added in ("if (decision.finding) or True else", 'else "XX?XX"')
        ),
        *(
            Explained(
                "Responder.handle_alarm",
                removed,
                added,
                "equivalent: nothing reads a JobEvent's time, source or detail type, and the reaction to an alarm "
                "reads its job from the job argument, not the event (only account, region and event_id are read)",
            )
            for removed, added in (
                ("time=alarm.time,", "time=None,"),
                ("source=contract.CLOUDWATCH_EVENT_SOURCE,", "source=None,"),
                ("detail_type=contract.ALARM_STATE_CHANGE,", "detail_type=None,"),
                ("job=job,", "job=None,"),
            )
        ),
        *(
            Explained(
                "_replace_tags",
                "tags_known=True)",
                added,
                "equivalent today: tags_known is read once, before the tags are listed (Responder.handle); nothing "
                "reads it on the job that has them",
            )
            for added in ("tags_known=None)", "tags=dict(tags), )", "tags_known=False)")
        ),
        *(
            Explained(
                "Responder.stop_requested",
                removed,
                added,
                "equivalent: nothing reads a JobEvent's time, source, detail type or job (the reaction reads the job "
                "argument and the notification's time is `now`), nor a Receipt's job or event_id here",
            )
            for removed, added in (
                ("time=now,", "time=None,"),
                ("source=policy.STOP_REQUEST,", "source=None,"),
                ('detail_type="Stop now",', "detail_type=None,"),
                ('detail_type="Stop now",', 'detail_type="XXStop nowXX",'),
                ('detail_type="Stop now",', 'detail_type="stop now",'),
                ('detail_type="Stop now",', 'detail_type="STOP NOW",'),
                ("job=job,", "job=None,"),
                ("receipt = Receipt(job=name, event_id=request_id)", "Receipt(job=None, event_id=request_id)"),
                ("receipt = Receipt(job=name, event_id=request_id)", "Receipt(job=name, event_id=None)"),
            )
        ),
        *(
            Explained(
                "Responder.stop_requested",
                removed,
                added,
                "equivalent: a Stop now that is not a duplicate always records its outcome (STOP_REQUESTED is never "
                "folded), and policy.decide_stop_request plans only STOP or WOULD_STOP, whose outcomes are all in the "
                "map (stopped, already ended, already stopping, would stop)",
            )
            for removed, added in (
                ("if receipt.outcomes else None", "if (receipt.outcomes) or True else None"),
                ("if outcome", "if (outcome) or True"),
                ('}.get(outcome, f"{name}: {decision.reason}")', "}.get(outcome, None)"),
                ('}.get(outcome, f"{name}: {decision.reason}")', "}.get(outcome, )"),
            )
        ),
        *(
            Explained(
                "Responder._react",
                "spend=spend or known_spend",
                added,
                "equivalent in value: given no spend, _show_on_card prices the job itself (the same list price, from "
                "the container's memory or the state table's cache)",
            )
            for added in ("spend=None", "spend=spend and known_spend")
        ),
        Explained(
            "Responder.__init__",
            "self.account_scope: str | None = None",
            'self.account_scope: str | None = ""',
            "equivalent: every reader takes an empty scope as none (`self.account_scope or account`, mutes_key's "
            "`if account`)",
        ),
    ),
    "chat": (
        *(
            Explained(
                "ChatDelivery._read",
                "return Message(text, blocks, transition, [], doc, member)",
                added,
                "equivalent: a card-only document read in webhook mode has no target, so nothing reads the "
                "message's text, blocks, transition, document or member",
            )
            for added in (
                "Message(None, blocks, transition, [], doc, member)",
                "Message(text, None, transition, [], doc, member)",
                "Message(text, blocks, None, [], doc, member)",
                "Message(text, blocks, transition, [], None, member)",
                "Message(text, blocks, transition, [], doc, None)",
                "Message(text, blocks, transition, [], member)",
                "Message(text, blocks, transition, [], doc, )",
            )
        ),
        *(
            Explained(
                "ChatDelivery._read",
                "return Message(text, blocks, transition, list(self.slack.targets), doc, member)",
                added,
                "equivalent: a test notification is posted as a message of its own (no thread, no card, so no "
                "member is read) and has no graph, with or without its document",
            )
            for added in (
                "list(self.slack.targets), None, member)",
                "list(self.slack.targets), doc, None)",
                "list(self.slack.targets), doc, )",
            )
        ),
    ),
    "slack_app_delivery": (
        *(
            Explained(
                "AppMode.buttons",
                'if slack_messages.is_test(doc) or doc.get("kind") == slack_messages.DIGEST_KIND:',
                added,
                "equivalent: render() draws a digest with render_digest, which shows no buttons, and buttons() "
                "offers none on a test notification (its job is not running); the clause only skips work",
            )
            for added in (
                "is_test(doc) and doc.get(",
                "doc.get(None) ==",
                'doc.get("XXkindXX") ==',
                'doc.get("KIND") ==',
            )
        ),
        Explained(
            "AppMode._card_only",
            "raise ParentBusy(key)",
            "raise ParentBusy(None)",
            "equivalent: AppMode._post catches ParentBusy and reads nothing of it (the message is sent back busy)",
        ),
        Explained(
            "AppMode._card_only",
            "card_text, card_blocks = _card(doc, member)",
            "_card(doc, None)",
            "equivalent: a card-only document is a job's end, and a card of an ended job has no Stop now "
            "(stop_button), the one element that names the member",
        ),
        Explained(
            "AppMode._chart_once",
            "thread = self._thread(chat, bot, message.doc, channel, message.member, now=now)",
            "self._thread(chat, bot, message.doc, channel, None, now=now)",
            "equivalent: a graph is drawn only for the hub's own jobs (member is None, charts.py), so member is "
            "always None here",
        ),
        Explained(
            "_failed",
            'permanent = bool(getattr(exc, "permanent", False))',
            'bool(getattr(exc, "permanent", None))',
            "equivalent: bool(None) is False",
        ),
    ),
    "sweeper": (
        *(
            Explained(
                "Sweeper._event",
                removed,
                added,
                "equivalent: nothing reads a JobEvent's time, source or detail type (only its account, region, "
                "event_id and job)",
            )
            for removed, added in (
                ("time=now,", "time=None,"),
                ("source=SWEEP_SOURCE,", "source=None,"),
                ('detail_type="Reconciliation",', "detail_type="),
            )
        ),
        *(
            Explained(
                "Sweeper._stall",
                removed,
                added,
                "equivalent: a stall's receipt is read only for its notifications, and the reaction reads the job "
                "from its job argument, not from the event",
            )
            for removed, added in (
                ('receipt = Receipt(job=job.name, event_id="")', "receipt = Receipt("),
                ("event = self._event(job, now, account, region)", "event = self._event(None, now, account, region)"),
            )
        ),
        Explained(
            "Sweeper._stalls",
            "total_seconds() // 60)",
            "total_seconds() / 60)",
            "equivalent: int() truncates a positive quotient the same way (the minutes shown)",
        ),
        Explained(
            "Sweeper._stalls",
            "action = Action.NOTIFY",
            "action = None",
            "equivalent at run time: the policy stops only on Action.STOP, so None notifies like NOTIFY (the "
            "never-published outcome is pinned as notified; mypy rejects None)",
        ),
        Explained(
            "Sweeper._with_tags",
            "tags_known=True) if job.arn else job",
            "if job.arn else job",
            "equivalent today: tags_known is read only by Responder.handle, before it lists tags; the stall path "
            "never reads it",
        ),
        Explained(
            "Sweeper.sweep",
            'alarm.job or ""',
            'alarm.job or "XXXX"',
            "equivalent: _firing keeps only alarms whose job is running, so alarm.job is never empty",
        ),
        Explained(
            "Sweeper.sweep",
            'still_running.pop(alarm.job or "", None)',
            'still_running.pop(alarm.job or "", )',
            "equivalent: the job is in still_running (_firing's filter) and is popped at most once: a second alarm "
            "with the same finding has the same transition key (a duplicate), with another the stop record refuses "
            "it (already stopping)",
        ),
    ),
}


def say(text: str = "") -> None:
    print(text, flush=True)


# --- the worker: one module, inside one process ----------------------------------------------------------
def _one_line(lines: list[str]) -> str:
    return " ".join(" ".join(line.split()) for line in lines if line.strip())


def _diff_of(diff: str) -> tuple[str, str]:
    body = [line for line in diff.splitlines() if not line.startswith(("---", "+++", "@@"))]
    removed = _one_line([line[1:] for line in body if line.startswith("-")])
    added = _one_line([line[1:] for line in body if line.startswith("+")])
    return removed, added


def worker(name: str, out: Path) -> int:
    """Runs mutmut on one module (in this process) and writes what it found to `out` as JSON."""
    target = MODULES[name]
    # Imported by name: mutmut is heavy (pytest, libcst), lives only in the worker process and is installed
    # by `make mutation` alone, so the type checker of `make test` must not need it.
    mutmut_main = importlib.import_module("mutmut.__main__")
    config = importlib.import_module("mutmut.configuration").config
    source_data = importlib.import_module("mutmut.mutation.data").SourceFileMutationData
    diff_of_mutant = importlib.import_module("mutmut.mutation.diff_apply").get_diff_for_mutant
    status_by_exit_code = importlib.import_module("mutmut.stats").status_by_exit_code
    names_of = importlib.import_module("mutmut.utils.format_utils").orig_function_and_class_names_from_key

    settings = config()
    settings.only_mutate = [target.source]
    settings.pytest_add_cli_args_test_selection = list(target.tests)
    started = time.monotonic()
    try:
        mutmut_main._run((), None)  # the body of `mutmut run`; it exits early with a message on a broken setup
    except SystemExit as stop:
        if stop.code:
            return stop.code if isinstance(stop.code, int) else 1
    seconds = time.monotonic() - started
    data = source_data(path=target.source)
    data.load()
    counts: dict[str, int] = {}
    survivors = []
    for key, code in sorted(data.exit_code_by_key.items(), key=lambda kv: _mutant_order(kv[0])):
        status = status_by_exit_code[code]
        counts[status] = counts.get(status, 0) + 1
        if status in KILLED or status == "skipped":
            continue
        removed, added = _diff_of(diff_of_mutant(key, path=target.source))
        function, class_name = names_of(key)
        survivors.append(
            {
                "mutant": key,
                "status": status,
                "function": f"{class_name}.{function}" if class_name else function,
                "removed": removed,
                "added": added,
            }
        )
    version = metadata.version("mutmut")
    out.write_text(
        json.dumps({"seconds": round(seconds, 1), "counts": counts, "survivors": survivors, "mutmut": version})
    )
    return 0


def _mutant_order(key: str) -> tuple[str, int]:
    head, _, number = key.rpartition("__mutmut_")
    return head, int(number) if number.isdigit() else 0


# --- the driver --------------------------------------------------------------------------------------------
def ensure_link() -> None:
    if LINK.is_symlink() and LINK.resolve() == (ROOT / "functions").resolve():
        return
    if LINK.exists() or LINK.is_symlink():
        raise SystemExit(f"{LINK.name} exists and is not a link to functions/: move it away to run mutmut")
    LINK.symlink_to("functions", target_is_directory=True)


def score(result: dict[str, Any]) -> tuple[int, int]:
    """(killed, mutants): skipped mutants (pragma no mutate) are not counted; 'no tests' counts as surviving."""
    counts: dict[str, int] = result["counts"]
    killed = sum(n for status, n in counts.items() if status in KILLED)
    total = sum(n for status, n in counts.items() if status != "skipped")
    return killed, total


def percent(killed: int, total: int) -> str:
    return f"{100 * killed / total:.1f} %" if total else "n/a"


def explain(module: str, survivor: dict[str, Any]) -> str | None:
    for known in EXPLAINED.get(module, ()):
        if (
            survivor["function"] == known.function
            and known.removed in survivor["removed"]
            and known.added in survivor["added"]
        ):
            return known.reason
    return None


def read_results(path: Path = REPORT) -> dict[str, Any]:
    """The results embedded in docs/mutation.md (module -> {latest, baseline}); empty if there are none."""
    try:
        match = _DATA.search(path.read_text(encoding="utf-8"))
    except OSError:
        return {}
    if not match:
        return {}
    data: dict[str, Any] = json.loads(match.group("json"))
    return data


def scores(path: Path = REPORT) -> list[dict[str, str]]:
    """One row per module of docs/mutation.md: module, score now, score at the first measurement."""
    rows = []
    results = read_results(path)
    for module in ordered(results):
        latest, baseline = results[module]["latest"], results[module]["baseline"]
        rows.append(
            {
                "module": module,
                "killed / mutants": "{} / {}".format(*score(latest)),
                "score": percent(*score(latest)),
                "first measured": f"{percent(*score(baseline))} ({baseline['date'][:10]})",
            }
        )
    return rows


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)  # noqa: S603, S607 - git on our own tree
    except (OSError, subprocess.CalledProcessError):
        return ""
    return out.stdout.strip()


def run_module(name: str, index: int, count: int) -> dict[str, Any] | None:
    target = MODULES[name]
    say(
        f"==> [{index}/{count}] {name}: mutating {target.source.removeprefix('src/')} against {', '.join(target.tests)}"
    )
    shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        code = subprocess.call(  # noqa: S603 - this interpreter, this module
            [sys.executable, "-m", "bench.mutation", "--worker", name, "--out", str(out)], cwd=ROOT
        )
        if code != 0 or not out.exists():
            say(f"    {name}: mutmut stopped (exit {code}); its last results are kept")
            return None
        result: dict[str, Any] = json.loads(out.read_text())
    dirty = _git("status", "--porcelain", "--", "functions/" + target.source.removeprefix("src/"), *target.tests)
    result.update(
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        commit=_git("rev-parse", "--short", "HEAD") + (" with uncommitted changes" if dirty else ""),
        tests=list(target.tests),
    )
    killed, total = score(result)
    say(f"    {name}: {killed} / {total} killed ({percent(killed, total)}) in {result['seconds']:.0f} s")
    return result


def ordered(results: dict[str, Any]) -> list[str]:
    return [m for m in MODULES if m in results] + [m for m in results if m not in MODULES]


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """What a replaced baseline keeps: its counts, when, at which commit, against which tests."""
    return {key: result[key] for key in ("counts", "date", "commit", "tests")}


def _measured(result: dict[str, Any]) -> str:
    killed, total = score(result)
    return f"{percent(killed, total)} ({killed} / {total}, {result['date'][:10]}, {result['commit']})"


def render(results: dict[str, Any]) -> str:
    machine = f"{platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}"
    versions = ", ".join(sorted({str(results[m]["latest"].get("mutmut", "unknown")) for m in results}))
    lines = [
        "# Mutation testing",
        "",
        f"Written by `make mutation` (mutmut {versions}; {machine}); `make mutation MODULES=policy` reruns one "
        "module and keeps the others' last results. Each module is mutated alone, and each mutant is run against "
        "those tests of the module's row that reach the mutated function. Score = killed / mutants; a timeout "
        "counts as killed, a mutant that no test reaches (`no tests`) as surviving. The tests are a module's "
        "fast covering files, not the whole suite: a survivor here may still be caught by a slower layer. "
        "`first measured` is a module's first run, kept as its baseline while its test files stay the same; "
        "earlier baselines (other test files) are listed under the module.",
        "",
        "| module | tests | killed / mutants | score | first measured | run time | measured |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for module in ordered(results):
        latest, baseline = results[module]["latest"], results[module]["baseline"]
        killed, total = score(latest)
        first = _measured(baseline)
        lines.append(
            f"| {module} | {', '.join(f'`{t}`' for t in latest['tests'])} | {killed} / {total} | "
            f"{percent(killed, total)} | {first} | {latest['seconds']:.0f} s | {latest['date']}, {latest['commit']} |"
        )
    for module in ordered(results):
        latest = results[module]["latest"]
        survivors = latest["survivors"]
        unexplained = sum(1 for s in survivors if explain(module, s) is None)
        lines += [
            "",
            f"## {module}",
            "",
            f"{len(survivors)} surviving mutant(s), {unexplained} without a reason given"
            + (
                ": each is a gap in the tests until it is killed or explained in `bench/mutation.py`."
                if unexplained
                else "."
            ),
        ]
        for earlier in results[module].get("earlier", ()):
            tests = ", ".join(f"`{t}`" for t in earlier["tests"])
            lines += ["", f"Earlier baseline, against {tests}: {_measured(earlier)}."]
        if survivors:
            lines.append("")
        for s in survivors:
            why = explain(module, s)
            status = "" if s["status"] == "survived" else f" ({s['status']})"
            diff = f"`- {_clip(s['removed'])}` -> `+ {_clip(s['added'])}`"
            lines.append(f"- `{s['function']}`{status}: {diff}: {why or '**not explained**'}")
    lines += ["", f"<!-- mutation-data {json.dumps(results, sort_keys=True)} -->", ""]
    return "\n".join(lines)


def _clip(text: str, limit: int = 110) -> str:
    text = text.replace("`", "'")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--modules", default="", help=f"comma- or space-separated subset of: {', '.join(MODULES)}")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite docs/mutation.md from its own data (after editing EXPLAINED)",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.out)
    chosen = [m for m in re.split(r"[,\s]+", args.modules) if m] or list(MODULES)
    unknown = [m for m in chosen if m not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; choose from {', '.join(MODULES)}")
    results = read_results()
    if args.report_only:
        REPORT.write_text(render(results), encoding="utf-8")
        return 0
    ensure_link()
    failed = []
    started = time.monotonic()
    for index, name in enumerate(chosen, start=1):
        result = run_module(name, index, len(chosen))
        if result is None:
            failed.append(name)
            continue
        entry = results.setdefault(name, {"baseline": result})
        if entry["baseline"]["tests"] != result["tests"]:
            # A baseline compares like with like (the same test files); the one it replaces is kept as history.
            entry.setdefault("earlier", []).append(_summary(entry["baseline"]))
            entry["baseline"] = result
        entry["latest"] = result
        REPORT.write_text(render(results), encoding="utf-8")  # after each module: a stopped run keeps what it did
    say(f"written to {REPORT.relative_to(ROOT)} in {time.monotonic() - started:.0f} s")
    for row in scores():
        say(f"  {row['module']:<16} {row['killed / mutants']:>11}  {row['score']:>7}  (first: {row['first measured']})")
    if failed:
        say(f"mutmut could not run: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
