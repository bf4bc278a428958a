"""The picture of a metric guard's firing: the job's metric over the last hours with the guard's threshold. Pure.

Which notifications have one, and why a member's job gets a console link instead: docs/design/chat-delivery.md."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from training_guard import contract
from training_guard.config.frozen import frozen
from training_guard.config.model import GuardConfig
from training_guard.domain.metric_guards import _STATISTIC_NAMES, job_alarm_specs

CHART_HOURS = 3  # what a Metrics Insights alarm evaluates (domain.md section 4), so the breach is on the picture
MAX_HOSTS = 8  # lines of an instance metric's chart: the first hosts of a larger job
WIDTH, HEIGHT = 800, 400
METRIC_ALARM_KIND = "metric_alarm"  # policy.Kind.METRIC_ALARM (the notifier does not import the policy)
THRESHOLD_COLOUR = "#d62728"  # red: the line and its shaded bad side
# The side of the threshold a comparison calls bad: shaded on the graph (the annotation's `fill`).
BAD_SIDE = {">": "above", ">=": "above", "<": "below", "<=": "below"}


@frozen
class Chart:
    job: str
    metric: str
    threshold: float
    region: str
    widget: dict[str, Any]  # GetMetricWidgetImage's MetricWidget

    @property
    def filename(self) -> str:
        return f"{self.job}-{_safe(self.metric)}.png"

    @property
    def title(self) -> str:
        return f"{self.metric} of {self.job}, last {CHART_HOURS} h"

    @property
    def alt_text(self) -> str:
        return (
            f"Graph of {self.metric} for training job {self.job} over the last {CHART_HOURS} hours, with the guard's "
            f"threshold {self.threshold:g} drawn as a horizontal line"
        )


def chart_for(doc: Mapping[str, Any], config: GuardConfig) -> Chart | None:
    """The chart of a notification document: a `metric_alarm` in a known region; None for anything else."""
    rule = doc.get("rule")
    job = doc.get("job")
    region = doc.get("region")
    if doc.get("kind") != METRIC_ALARM_KIND or not isinstance(rule, Mapping) or not isinstance(job, Mapping):
        return None
    if not isinstance(region, str) or not region or not isinstance(job.get("name"), str):
        return None
    name, tags = str(rule.get("name") or ""), job.get("tags") or {}
    guard = config.metric_guard(name)
    if guard is not None:
        metric, stat, comparison, threshold, label = (
            guard.metric,
            guard.statistic,
            guard.comparison,
            guard.threshold,
            f"metric_guards.{guard.name}",
        )
    else:
        specs, _ = job_alarm_specs(job["name"], tags if isinstance(tags, Mapping) else {})
        spec = next((s for s in specs if s.metric == name), None)
        if spec is None:
            return None
        metric, stat, comparison, threshold = spec.metric, spec.statistic, spec.comparison, spec.threshold
        label = f"{contract.JOB_ALARM_TAG_PREFIX}{spec.metric}"
    widget = {
        "metrics": _lines(job, metric),
        "stat": _STATISTIC_NAMES[stat],
        "period": 60,
        "start": f"-PT{CHART_HOURS}H",
        "end": "P0D",
        "region": region,
        "title": f"{metric} of {job['name']}",
        "annotations": {"horizontal": [threshold_line(label, comparison, threshold)]},
        "legend": {"position": "bottom"},
        "yAxis": {"left": {"label": f"{metric} ({_STATISTIC_NAMES[stat]})", "showUnits": False}},
        "width": WIDTH,
        "height": HEIGHT,
    }
    return Chart(job=str(job["name"]), metric=metric, threshold=threshold, region=region, widget=widget)


def threshold_line(label: str, comparison: str, threshold: float) -> dict[str, Any]:
    """The guard's threshold on the graph: its value and its bad side in words ("> 5 is bad"), that side shaded."""
    line: dict[str, Any] = {
        "label": f"{label}: {comparison} {threshold:g} is bad",
        "value": threshold,
        "color": THRESHOLD_COLOUR,
    }
    if comparison in BAD_SIDE:
        line["fill"] = BAD_SIDE[comparison]
    return line


def _lines(job: Mapping[str, Any], metric: str) -> list[list[Any]]:
    name = str(job["name"])
    if metric not in contract.INSTANCE_METRICS:
        return [[contract.SAGEMAKER_TRAINING_NAMESPACE, metric, contract.JOB_DIMENSION, name, {"label": metric}]]
    count = job.get("instance_count")
    hosts = count if isinstance(count, int) and count > 0 else 1
    namespace, host = contract.SAGEMAKER_TRAINING_NAMESPACE, contract.HOST_DIMENSION
    return [
        [namespace, metric, host, f"{name}/algo-{n}", {"label": f"algo-{n}"}]
        for n in range(1, min(hosts, MAX_HOSTS) + 1)
    ]


GRAPH_LINK = "Graph"


def graph_link(chart: Chart, member: str | None) -> dict[str, str]:
    """The link to the graph in the CloudWatch console; a member's job names the account to sign in to."""
    label = GRAPH_LINK if member is None else f"{GRAPH_LINK} in account {member}"
    return {label: console_url(chart)}


def console_url(chart: Chart) -> str:
    """The same graph in the CloudWatch console's metrics view (`#metricsV2:graph=~...`, an undocumented form).

    Objects are `(key~value~...)`, lists `(~item~item)`, strings `'text`, other characters `*` and two hex digits."""
    region = chart.region
    graph = {k: v for k, v in chart.widget.items() if k not in ("width", "height", "title")}
    graph["view"] = "timeSeries"
    return f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#metricsV2:graph=~{_console(graph)}"


_PLAIN = re.compile(r"[A-Za-z0-9_.\-]")


def _console(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return "'" + "".join(c if _PLAIN.fullmatch(c) else "".join(f"*{b:02x}" for b in c.encode()) for c in value)
    if isinstance(value, Mapping):
        return "(" + "~".join(f"{k}~{_console(v)}" for k, v in value.items()) + ")"
    if isinstance(value, list | tuple):
        return "(" + "".join(f"~{_console(v)}" for v in value) + ")"
    raise TypeError(f"no console form for {type(value).__name__}")


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "metric"
