"""The Slack preview page reads mrkdwn as Slack does: only a raw `<@U…>` is a mention; escaped text is text."""

from __future__ import annotations

from training_guard_local.slack_preview import mrkdwn_to_html, page


def test_an_escaped_mention_is_literal_text_not_a_chip() -> None:
    shown = mrkdwn_to_html("job &lt;@U0ALICE&gt; named after a mention")
    assert "class='mention'" not in shown
    assert "&lt;@U0ALICE&gt;" in shown  # the browser shows <@U0ALICE>, as Slack does


def test_a_real_mention_and_a_link_are_rendered() -> None:
    shown = mrkdwn_to_html("<@U0ALICE> pressed *Stop now* on <https://console.aws.amazon.com/a_b_c|the job>")
    assert "<span class='mention'>@U0ALICE</span>" in shown
    assert "<b>Stop now</b>" in shown
    assert "<a href='https://console.aws.amazon.com/a_b_c'>the job</a>" in shown  # no _italic_ inside the URL


def test_a_message_text_without_blocks_is_mrkdwn_too() -> None:
    shown = page([("default", {"text": "<@U0ALICE> &amp; &lt;@U0BOB&gt;"})])
    assert "<span class='mention'>@U0ALICE</span> &amp; &lt;@U0BOB&gt;" in shown  # not escaped twice


def test_no_raw_html_gets_through() -> None:
    assert mrkdwn_to_html("a <b> <javascript:alert(1)|x>") == "a &lt;b&gt; &lt;javascript:alert(1)|x&gt;"
