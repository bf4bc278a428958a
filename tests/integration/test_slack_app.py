"""Slack app mode against the local Slack Web API: slack_sdk's real WebClient over HTTP on 127.0.0.1.

The bot adapter (post, reply, update, upload), its errors as the guard classifies them, the thread record that
makes the parent exactly once (DynamoDB on moto, two notifications at once), the mute records, and signed
interaction payloads posted to the real handler.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from training_guard.adapters.slack import Deadline
from training_guard.adapters.slack_app import OUT_OF_TIME, SlackApp, SlackAppError, bot_token
from training_guard_local.slack_web_api import DEFAULT_CHANNEL, Fault, SlackWebApi

pytestmark = pytest.mark.integration

BLOCKS = [{"type": "section", "text": {"type": "mrkdwn", "text": "*mnist-1* stopped"}}]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@pytest.fixture
def slack(tmp_path: Path) -> Iterator[SlackWebApi]:
    with SlackWebApi(files_dir=tmp_path, channels=(DEFAULT_CHANNEL, "C0OTHER")) as api:
        yield api


def app(slack: SlackWebApi, **kwargs: object) -> SlackApp:
    options: dict[str, object] = {"min_interval": 0.0, "backoff_factor": 0.01}
    options.update(kwargs)
    return SlackApp(slack.token, base_url=slack.base_url, **options)  # type: ignore[arg-type]


def failure(call: object) -> SlackAppError:
    with pytest.raises(SlackAppError) as caught:
        call()  # type: ignore[operator]
    return caught.value


# --- the bot adapter ----------------------------------------------------------------------------------------


def test_a_parent_gets_a_ts_a_reply_lands_in_its_thread_and_the_parent_is_updated_in_place(slack: SlackWebApi) -> None:
    bot = app(slack)
    parent = bot.post_parent(DEFAULT_CHANNEL, "mnist-1: finding", BLOCKS)
    reply = bot.reply(DEFAULT_CHANNEL, parent.ts, "stopped at 04:12", [])
    bot.update(DEFAULT_CHANNEL, parent.ts, "mnist-1: stopped", BLOCKS)

    [shown] = slack.history(DEFAULT_CHANNEL)
    assert (shown.ts, shown.text, shown.blocks) == (parent.ts, "mnist-1: stopped", BLOCKS)
    assert shown.edits == [{"text": "mnist-1: finding", "blocks": BLOCKS}]
    assert [r.ts for r in slack.replies(DEFAULT_CHANNEL, parent.ts)] == [reply.ts]
    assert parent.channel == reply.channel == DEFAULT_CHANNEL
    assert reply.ts != parent.ts


def test_a_png_goes_into_the_thread_through_the_three_upload_calls_and_is_saved(
    slack: SlackWebApi, tmp_path: Path
) -> None:
    bot = app(slack)
    parent = bot.post_parent(DEFAULT_CHANNEL, "card", BLOCKS)
    file_id = bot.upload_png(
        DEFAULT_CHANNEL, parent.ts, PNG, filename="train-loss.png", title="train:loss, last 3 h", alt_text="loss"
    )

    [reply] = slack.replies(DEFAULT_CHANNEL, parent.ts)
    [shared] = reply.files
    assert shared.id == file_id
    assert (shared.name, shared.title, shared.alt_txt) == ("train-loss.png", "train:loss, last 3 h", "loss")
    assert shared.path is not None
    assert shared.path.parent == tmp_path
    assert shared.path.read_bytes() == PNG
    calls = [c.method for c in slack.calls if c.method != "chat.postMessage"]
    assert calls == ["files.getUploadURLExternal", "upload", "files.completeUploadExternal"]
    assert slack.called("files.getUploadURLExternal")[0].params["length"] == str(len(PNG))


def test_auth_test_names_the_workspace_and_the_bot(slack: SlackWebApi) -> None:
    identity = app(slack).identity()
    assert identity["team_id"] == "T0EMULATED"
    assert identity["bot_id"] == "B0TRAINGUARD"


def test_a_wrong_token_is_a_permanent_failure_and_is_not_shown(slack: SlackWebApi) -> None:
    token = "xoxb-1-2-notthetoken"
    bot = SlackApp(token, base_url=slack.base_url, min_interval=0.0)
    error = failure(lambda: bot.post_parent(DEFAULT_CHANNEL, "x", BLOCKS))
    assert (error.error, error.permanent, error.status) == ("invalid_auth", True, 200)
    assert token not in str(error)
    assert len(slack.called("chat.postMessage")) == 1  # not retried


def test_an_unknown_channel_is_permanent_and_tried_once(slack: SlackWebApi) -> None:
    error = failure(lambda: app(slack).post_parent("C0NOSUCH", "x", BLOCKS))
    assert (error.error, error.permanent) == ("channel_not_found", True)
    assert len(slack.called("chat.postMessage")) == 1


def test_updating_a_message_that_does_not_exist_is_permanent(slack: SlackWebApi) -> None:
    error = failure(lambda: app(slack).update(DEFAULT_CHANNEL, "1700000000.000001", "x", BLOCKS))
    assert (error.error, error.permanent) == ("message_not_found", True)


def test_a_reply_to_a_thread_that_does_not_exist_is_refused(slack: SlackWebApi) -> None:
    error = failure(lambda: app(slack).reply(DEFAULT_CHANNEL, "1700000000.000001", "x", BLOCKS))
    assert (error.error, error.permanent) == ("thread_not_found", True)
    assert slack.history(DEFAULT_CHANNEL) == []


def test_a_rate_limit_is_waited_out_as_retry_after_says_then_the_post_goes_through(slack: SlackWebApi) -> None:
    slack.fail("chat.postMessage", Fault.ratelimited(retry_after=1))
    started = time.monotonic()
    posted = app(slack).post_parent(DEFAULT_CHANNEL, "x", BLOCKS)
    assert time.monotonic() - started >= 1.0
    assert [c.status for c in slack.called("chat.postMessage")] == [429, 200]
    assert [m.ts for m in slack.history(DEFAULT_CHANNEL)] == [posted.ts]


def test_a_rate_limit_longer_than_the_guard_waits_is_transient_at_once(slack: SlackWebApi) -> None:
    slack.fail("chat.postMessage", Fault.ratelimited(retry_after=30))
    started = time.monotonic()
    error = failure(lambda: app(slack).post_parent(DEFAULT_CHANNEL, "x", BLOCKS))
    assert time.monotonic() - started < 1.0
    assert (error.error, error.permanent, error.status) == ("ratelimited", False, 429)


def test_a_rate_limit_beyond_the_invocations_time_left_is_transient_at_once(slack: SlackWebApi) -> None:
    deadline = Deadline()
    deadline.time_left = lambda: 14.0  # one attempt fits, a 3 s wait and another does not
    slack.fail("chat.postMessage", Fault.ratelimited(retry_after=3))
    error = failure(lambda: app(slack, deadline=deadline).post_parent(DEFAULT_CHANNEL, "x", BLOCKS))
    assert (error.error, error.permanent) == ("ratelimited", False)
    assert len(slack.called("chat.postMessage")) == 1


def test_server_errors_are_retried_with_backoff_then_transient(slack: SlackWebApi) -> None:
    slack.fail("chat.update", *[Fault.server_error(503)] * 4)
    bot = app(slack)
    parent = bot.post_parent(DEFAULT_CHANNEL, "x", BLOCKS)
    error = failure(lambda: bot.update(DEFAULT_CHANNEL, parent.ts, "y", BLOCKS))
    assert (error.error, error.permanent, error.status) == ("service_unavailable", False, 503)
    assert len(slack.called("chat.update")) == 4  # the first try and slack_sdk's three retries


def test_a_server_error_then_success_updates_once(slack: SlackWebApi) -> None:
    slack.fail("chat.update", Fault.server_error(500))
    bot = app(slack)
    parent = bot.post_parent(DEFAULT_CHANNEL, "x", BLOCKS)
    bot.update(DEFAULT_CHANNEL, parent.ts, "y", BLOCKS)
    assert slack.history(DEFAULT_CHANNEL)[0].text == "y"


def test_an_error_slack_calls_transient_is_transient_even_with_http_200(slack: SlackWebApi) -> None:
    slack.fail("chat.postMessage", Fault("internal_error"))
    error = failure(lambda: app(slack).post_parent(DEFAULT_CHANNEL, "x", BLOCKS))
    assert (error.error, error.permanent, error.status) == ("internal_error", False, 200)


def test_a_failed_upload_post_is_transient_and_shares_nothing(slack: SlackWebApi) -> None:
    bot = app(slack)
    parent = bot.post_parent(DEFAULT_CHANNEL, "x", BLOCKS)
    slack.fail("upload", Fault("upload_refused", status=500))
    error = failure(lambda: bot.upload_png(DEFAULT_CHANNEL, parent.ts, PNG, filename="a.png", title="a", alt_text="a"))
    assert error.permanent is False
    assert "127.0.0.1" not in str(error)  # the upload URL is a ticket
    assert slack.replies(DEFAULT_CHANNEL, parent.ts) == []
    assert slack.called("files.completeUploadExternal") == []


def test_nothing_is_started_without_the_time_to_finish_it(slack: SlackWebApi) -> None:
    deadline = Deadline()
    deadline.time_left = lambda: 20.0  # one call (12 s) fits, an upload's three do not
    bot = app(slack, deadline=deadline)
    parent = bot.post_parent(DEFAULT_CHANNEL, "x", BLOCKS)
    error = failure(lambda: bot.upload_png(DEFAULT_CHANNEL, parent.ts, PNG, filename="a.png", title="a", alt_text="a"))
    assert (error.error, error.permanent) == (OUT_OF_TIME, False)
    deadline.time_left = lambda: 5.0
    assert failure(lambda: bot.reply(DEFAULT_CHANNEL, parent.ts, "x", BLOCKS)).error == OUT_OF_TIME
    assert [c.method for c in slack.calls] == ["chat.postMessage"]


def test_posts_to_one_channel_are_a_second_apart_and_other_channels_do_not_wait(slack: SlackWebApi) -> None:
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    bot = app(slack, min_interval=1.0, clock=lambda: now[0], sleep=sleep)
    parent = bot.post_parent(DEFAULT_CHANNEL, "a", BLOCKS)
    now[0] += 0.25
    bot.reply(DEFAULT_CHANNEL, parent.ts, "b", BLOCKS)
    bot.post_parent("C0OTHER", "c", BLOCKS)
    bot.update(DEFAULT_CHANNEL, parent.ts, "d", BLOCKS)  # an edit posts nothing: not paced
    assert slept == [0.75]


def test_a_secret_still_holding_the_placeholder_is_a_permanent_failure_naming_the_fix() -> None:
    assert bot_token("tg/slack/bot-token", " xoxb-1-2-abc\n") == "xoxb-1-2-abc"
    with pytest.raises(SlackAppError) as caught:
        bot_token("tg/slack/bot-token", "REPLACE-ME: put the bot token in this secret")
    assert caught.value.permanent is True
    assert "put-secret-value --secret-id tg/slack/bot-token" in str(caught.value)
