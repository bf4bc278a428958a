"""Campaign: Slack failing (429 bursts, 5xx) while SNS loses some responses (so it delivers twice).

Every transition ends delivered to Slack exactly once, or waits in the dead-letter queue: none is
dropped, none is shown twice, however often SNS, SQS or the notifier's retries repeat it.
"""

from __future__ import annotations

import json
import random
import types
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from tests.campaign.streams import plan_fleet
from tests.faults import answer
from tests.helpers import readme_campaign_row
from training_guard.adapters.clients import RETRY_CONFIG
from training_guard.config.model import GuardConfig
from training_guard_local.emulator import Emulation
from training_guard_local.slack_listener import Reply, SlackListener

SEED = 11


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlackListener]:
    monkeypatch.setattr("training_guard.adapters.slack.BACKOFF_FACTOR", 0.001)
    monkeypatch.setattr("training_guard.adapters.slack.SEND_TIMEOUT_SECONDS", 0.3)
    # Slack's 429s are waited for Retry-After plus up to 1 s of jitter; the jitter only slows the campaign down
    monkeypatch.setattr("training_guard.adapters.slack.random", types.SimpleNamespace(random=lambda: 0.0))
    with SlackListener() as listener:
        yield listener


def test_slack_and_sns_failing_lose_nothing_and_show_nothing_twice(
    slack: SlackListener, figures: dict[str, Any]
) -> None:
    rng = random.Random(SEED)
    replies = []
    for _ in range(600):
        roll = rng.random()
        if roll < 0.2:
            replies.append(Reply(429, "rate_limited", {"Retry-After": "0"}))
        elif roll < 0.35:
            replies.append(Reply(500, "internal_error"))
        elif roll < 0.4:
            replies.append(Reply(503, "service_unavailable"))
        elif roll < 0.43:
            # overloaded: slow and failing; the client times out first and retries
            replies.append(Reply(503, "service_unavailable", delay=0.5))
        else:
            replies.append(Reply(200, "ok"))
    slack.script("default", *replies)
    lost = Counter[str]()

    def lose_response(request: Any, **_: Any) -> AWSResponse | None:
        # SNS accepted the publish (moto acts on it: botocore runs every handler) but the answer is lost: a 500
        if rng.random() < 0.3:
            lost["sns"] += 1
            body = b"<ErrorResponse><Error><Type>Receiver</Type><Code>InternalFailure</Code><Message>x</Message></Error></ErrorResponse>"
            return answer(request.url, 500, body)
        return None

    def retry_at_once(response: Any, attempts: int, **_: Any) -> int | None:
        # the SDK publishes again, within its attempts; its back-off (up to seconds) is not waited here
        lost_answer = response is not None and response[0] is not None and response[0].status_code == 500
        return 0 if lost_answer and attempts < RETRY_CONFIG.retries["total_max_attempts"] else None

    config = GuardConfig.from_dict({"slack": {"webhooks": {"default": {}}}})
    plans = plan_fleet(60, SEED)
    with Emulation(config, webhook_urls={"default": slack.url("default")}) as aws:
        sns = aws.function_client("sns")
        sns.meta.events.register_first("before-send.sns.Publish", lose_response)
        sns.meta.events.register_first("needs-retry.sns.Publish", retry_at_once)
        for plan in plans:
            for event in plan.events:
                aws.deliver(event)
        announced = {n["title"] for n in aws.notifications()}
        rounds = aws.pump_chat(rounds=8)
        dead = aws.chat_dead_letters()
    # Slack's fallback text is "<marker> <title>: <reason>"
    delivered = Counter(r.body["text"].split(" ", 1)[1].split(": ", 1)[0] for r in slack.received("default"))
    titles = {t.split(": ", 1)[0] for t in announced}
    waiting = {json.loads(d["body"])["title"].split(": ", 1)[0] for d in dead}
    assert all(count == 1 for count in delivered.values()), [t for t, c in delivered.items() if c > 1]
    assert set(delivered) | waiting == titles  # nothing dropped
    assert not set(delivered) & waiting  # nothing both shown and dead-lettered
    attempts = Counter(r.status for r in slack.received("default", delivered_only=False))
    timeouts = sum(1 for r in replies[: len(slack.requests)] if r.delay)
    figures.update(
        transitions=len(titles),
        delivered_once=len(delivered),
        dead_lettered=len(dead),
        sns_lost_responses=lost["sns"],
        slack_429=attempts[429],
        slack_5xx=attempts[500] + attempts[503],
        slack_timeouts=timeouts,
        notifier_batches=len(rounds),
    )
    f, times = figures, "\N{MULTIPLICATION SIGN}"
    assert readme_campaign_row("Slack failing") == (
        f"{f['transitions']} transitions: {f['delivered_once']} delivered exactly once, {f['dead_lettered']} "
        f"dead-lettered, {f['sns_lost_responses']} duplicate SNS deliveries suppressed, {f['slack_429']} {times} 429, "
        f"{f['slack_5xx']} {times} 5xx, {f['slack_timeouts']} timeouts"
    )
