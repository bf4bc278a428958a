"""An event may lack `Tags` (domain.md §1): the guard must then read them before a decision turns on them."""

from __future__ import annotations

from tests.fakes import FakeJobs, FakeLedger, FakePublisher
from tests.helpers import NOW, load_event
from training_guard.config.model import GuardConfig
from training_guard.domain.events import parse_event
from training_guard.services.responder import Responder


def finding_without_tags() -> dict[str, object]:
    event = load_event("vanishing_gradient_issues_found")
    del event["detail"]["Tags"]
    return event


def world(tags: dict[str, str], config: GuardConfig | None = None) -> tuple[Responder, FakeJobs, FakePublisher]:
    parsed = parse_event(finding_without_tags())
    assert parsed.job.arn is not None
    jobs = FakeJobs(jobs={parsed.job.name: parsed.job}, tags_by_arn={parsed.job.arn: tags})
    publisher = FakePublisher()
    return Responder(config or GuardConfig(), jobs, FakeLedger(), publisher), jobs, publisher


def test_an_event_without_tags_says_its_tags_are_unknown_not_empty() -> None:
    job = parse_event(finding_without_tags()).job
    assert (job.tags, job.tags_known) == ({}, False)
    assert parse_event(load_event("vanishing_gradient_issues_found")).job.tags_known is True


def test_an_exempt_job_whose_event_lacks_tags_is_not_stopped() -> None:
    guard, jobs, publisher = world({"training-guard:exempt": "true"})
    receipt = guard.handle(parse_event(finding_without_tags()), now=NOW)
    assert jobs.stop_calls == []
    assert receipt.outcomes == ["would_stop"]
    assert "exemption tag" in publisher.published[0].reason


def test_an_opted_in_job_whose_event_lacks_tags_is_stopped() -> None:
    config = GuardConfig.from_dict({"stop_requires_tag": "training-guard:guarded"})
    guard, jobs, _ = world({"training-guard:guarded": "true"}, config)
    assert guard.handle(parse_event(finding_without_tags()), now=NOW).stopped is True
    assert len(jobs.stop_calls) == 1


def test_an_event_with_tags_is_trusted_without_another_call() -> None:
    event = load_event("vanishing_gradient_issues_found")
    parsed = parse_event(event)

    class CountingJobs(FakeJobs):
        listed: int = 0

        def tags(self, arn: str) -> dict[str, str]:
            self.listed += 1
            return super().tags(arn)

    jobs = CountingJobs(jobs={parsed.job.name: parsed.job})
    Responder(GuardConfig(), jobs, FakeLedger(), FakePublisher()).handle(parsed, now=NOW)
    assert jobs.listed == 0
