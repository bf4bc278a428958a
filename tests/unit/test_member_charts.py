"""The graph of a member account's job in Slack app mode (issues 14 and 16).

The notifier runs in the hub and draws a metric guard's graph with GetMetricWidgetImage on the hub's CloudWatch; a
member's training metrics are in the member account's CloudWatch. Drawn in the hub, a member job's graph would be an
empty picture of a metric the hub does not have. So a member's job gets no picture: its reply links the same graph in
the CloudWatch console, the link naming the account to be signed in to, and GetMetricWidgetImage is not called. The
hub's own jobs keep their picture. Checked with the real adapter (MetricCharts) on a botocore Stubber with the
API's response shape: a call that is not expected fails the test."""

from __future__ import annotations

import json
from typing import Any, cast

import boto3
import pytest
from botocore.stub import Stubber

from tests.helpers import NOW
from tests.unit.test_slack_app_mode import CHANNEL, HUB, MEMBER, AppRig, Parked, metric_document
from training_guard.adapters.cloudwatch import MetricCharts
from training_guard.config.model import GuardConfig
from training_guard.domain.accounts import scoped
from training_guard.render.charts import chart_for, console_url, graph_link
from training_guard.services.chat import ChatDelivery, MessageResult, delivery_key
from training_guard.services.slack_app_delivery import chart_key

PNG = b"\x89PNG\r\n\x1a\n drawn by CloudWatch"


@pytest.fixture
def cloudwatch() -> Any:
    client = boto3.client("cloudwatch", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def graph_buttons(blocks: list[dict[str, Any]]) -> dict[str, str]:
    """The message's link buttons to a graph (the document's own links, to the job and its logs, aside)."""
    return {
        e["text"]["text"]: e["url"]
        for b in blocks
        if b["type"] == "actions"
        for e in b["elements"]
        if "url" in e and "Graph" in e["text"]["text"]
    }


def test_a_hub_jobs_graph_is_drawn_by_the_hubs_cloudwatch_and_uploaded(cloudwatch: Any) -> None:
    client, stubber = cloudwatch
    stubber.add_response("get_metric_widget_image", {"MetricWidgetImage": PNG})
    rig = AppRig(charts=cast(Any, MetricCharts(client)))
    result = rig.chat(organization=True).deliver(metric_document(account=HUB), now=NOW)
    assert result.delivered == ["default"]
    [(_, _, png, _)] = rig.bot.uploads
    assert png == PNG
    [parent] = rig.bot.parents(CHANNEL)
    [reply] = rig.bot.replies(CHANNEL, parent)
    assert graph_buttons(reply["blocks"]) == {}  # the picture, no link


def test_a_member_jobs_graph_is_not_drawn_in_the_hub_the_reply_links_it_in_the_members_console(
    cloudwatch: Any,
) -> None:
    client, _ = cloudwatch  # no response queued: a GetMetricWidgetImage call would fail the delivery
    rig = AppRig(charts=cast(Any, MetricCharts(client)))
    body = metric_document(account=MEMBER)
    result = rig.chat(organization=True).deliver(body, now=NOW)
    assert result.delivered == ["default"]
    assert result.errors == []
    assert rig.bot.uploads == []
    [parent] = rig.bot.parents(CHANNEL)
    [reply] = rig.bot.replies(CHANNEL, parent)
    chart = chart_for(json.loads(body), rig.config)
    assert chart is not None
    assert graph_buttons(reply["blocks"]) == {f"Open Graph in account {MEMBER}": console_url(chart)}
    # nothing is claimed for a picture that is never drawn, and a redelivery draws none either
    transition = scoped(MEMBER, json.loads(body)["transition"])
    assert delivery_key(transition, "default") in rig.ledger.items  # the reply's claim, under the member's key
    assert chart_key(transition, "default") not in rig.ledger.items
    again = rig.chat(organization=True).deliver(body, now=NOW)
    assert again.skipped == ["default"]
    assert rig.bot.uploads == []


def test_without_an_organization_every_job_is_the_hubs_and_keeps_its_picture(cloudwatch: Any) -> None:
    client, stubber = cloudwatch
    stubber.add_response("get_metric_widget_image", {"MetricWidgetImage": PNG})
    rig = AppRig(charts=cast(Any, MetricCharts(client)))
    rig.chat().deliver(metric_document(account=MEMBER), now=NOW)  # an account, but no organization: the guard's own
    assert [png for (_, _, png, _) in rig.bot.uploads] == [PNG]


def test_in_webhook_mode_a_member_jobs_link_names_its_account_and_the_hubs_does_not() -> None:
    from tests.fakes import FakeLedger
    from tests.unit.test_slack_app_mode import NoSender, NoUrls

    config = GuardConfig.from_dict(
        {
            "slack": {"webhooks": {"default": {}}},
            "metric_guards": [{"name": "loss-high", "metric": "train:loss", "threshold": 5}],
            "organization": {"hub_account": HUB, "region": "eu-west-1", "members": [MEMBER]},
        }
    )
    chat = ChatDelivery(
        config.slack,
        urls=NoUrls(),
        sender=NoSender(),
        ledger=FakeLedger(),
        parker=Parked(),
        ttl_seconds=1,
        organization=config.organization,
        config=config,
    )
    member = chat._read(metric_document(account=MEMBER), MessageResult())
    hub = chat._read(metric_document(account=HUB), MessageResult())
    assert list(graph_buttons(member.blocks)) == [f"Open Graph in account {MEMBER}"]
    assert list(graph_buttons(hub.blocks)) == ["Open Graph"]


def test_graph_link_labels() -> None:
    config = GuardConfig.from_dict({"metric_guards": [{"name": "loss-high", "metric": "train:loss", "threshold": 5}]})
    chart = chart_for(json.loads(metric_document()), config)
    assert chart is not None
    assert graph_link(chart, None) == {"Graph": console_url(chart)}
    assert graph_link(chart, MEMBER) == {f"Graph in account {MEMBER}": console_url(chart)}
