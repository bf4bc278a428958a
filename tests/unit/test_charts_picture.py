"""The metric chart a person sees in the job's Slack thread (issue 28, section 4): axes with values, a time axis, the
threshold labelled with its value and bad side, a legend, no datapoint cut at the edge. Drawn by the emulation's
stand-in for GetMetricWidgetImage from the widget charts.py asks CloudWatch for."""

from __future__ import annotations

import struct
import zlib
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from training_guard.config.model import GuardConfig
from training_guard.render.charts import chart_for
from training_guard_local import metric_widget_ext as ext

NOW = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
LOSS = [2.3, 2.1, 1.9, 2.4, 3.5, 4.8, 6.2, 7.9, 9.6, 15.0]  # the last, at `now`, on the top tick


def widget() -> dict[str, Any]:
    config = GuardConfig.from_dict({"metric_guards": [{"name": "loss-high", "metric": "train:loss", "threshold": 5}]})
    doc = {"kind": "metric_alarm", "rule": {"name": "loss-high"}, "region": "us-east-1", "job": {"name": "job-a"}}
    chart = chart_for(doc, config)
    assert chart is not None
    return chart.widget


def datapoints() -> list[Any]:
    return [
        SimpleNamespace(
            namespace="/aws/sagemaker/TrainingJobs",
            name="train:loss",
            value=value,
            timestamp=NOW - timedelta(minutes=len(LOSS) - 1 - n),
            dimensions=[SimpleNamespace(name="TrainingJobName", value="job-a")],
        )
        for n, value in enumerate(LOSS)
    ]


def pixels(png: bytes) -> tuple[int, int, list[list[tuple[int, int, int]]]]:
    """(width, height, rows of RGB) of the stand-in's PNG (8-bit RGB, filter 0 on every row)."""
    width, height = struct.unpack(">II", png[16:24])
    raw = zlib.decompress(png[png.index(b"IDAT") + 4 : png.index(b"IEND") - 8])
    stride = width * 3 + 1
    return (
        width,
        height,
        [
            [tuple(raw[y * stride + 1 + x * 3 : y * stride + 4 + x * 3]) for x in range(width)]  # type: ignore[misc]
            for y in range(height)
        ],
    )


def count(rows: list[list[tuple[int, int, int]]], colour: tuple[int, int, int], y0: int, y1: int) -> int:
    return sum(row.count(colour) for row in rows[y0:y1])


def test_the_chart_shows_values_times_the_labelled_threshold_its_bad_side_and_a_legend() -> None:
    width, height, rows = pixels(ext.render(widget(), datapoints(), NOW))
    low, high, ticks = ext.value_ticks([*LOSS, 5.0])
    assert (low, high, ticks) == (0.0, 20.0, [0.0, 5.0, 10.0, 15.0, 20.0])  # 15 on a tick: one step above it
    bottom = height - ext.BOTTOM_MARGIN
    threshold_y = next(y for y in range(height) if rows[y].count(ext.THRESHOLD_COLOUR) > width // 3)  # dashed
    # the bad side (> 5) is shaded, the good side is not
    assert count(rows, ext.BAD_SIDE_COLOUR, ext.TOP_MARGIN, threshold_y) > 10_000
    assert count(rows, ext.BAD_SIDE_COLOUR, threshold_y + 3, bottom) == 0
    # the threshold's label ("... > 5 is bad") in red just above its line; the value ticks left of the axis
    assert count(rows, ext.THRESHOLD_COLOUR, threshold_y - 21, threshold_y - 4) > 200
    assert sum(row[: ext.LEFT_MARGIN - 4].count(ext.AXIS_COLOUR) for row in rows[ext.TOP_MARGIN - 10 : bottom]) > 100
    # the time axis's labels under the plot, the title and the axis label above it, the legend at the bottom
    assert count(rows, ext.AXIS_COLOUR, bottom + 9, bottom + 25) > 300
    assert count(rows, ext.TEXT_COLOUR, 0, 24) > 200
    assert count(rows, ext.LINE_COLOURS[0], height - 22, height) >= 90  # the line's swatch
    assert count(rows, ext.TEXT_COLOUR, height - 22, height) > 300  # its name and "threshold"


def test_no_datapoint_is_cut_at_the_edge_of_the_plot() -> None:
    width, height, rows = pixels(ext.render(widget(), datapoints(), NOW))
    colour = ext.LINE_COLOURS[0]
    plot = range(ext.TOP_MARGIN, height - ext.BOTTOM_MARGIN + 1)
    right = width - 16
    # The last datapoint (at `now`, the highest value) is a whole dot inside the plot: nothing of it at its edges.
    assert all(rows[y][right] != colour for y in plot)
    assert all(rows[ext.TOP_MARGIN][x] != colour for x in range(ext.LEFT_MARGIN, right))
    assert any(colour in row for row in rows[ext.TOP_MARGIN : height - ext.BOTTOM_MARGIN])  # ... and it is drawn


def test_the_time_axis_has_round_times_and_at_most_six() -> None:
    ticks = ext.time_ticks(NOW - timedelta(hours=3), NOW)
    assert [t.strftime("%H:%M") for t in ticks] == ["00:00", "01:00", "02:00", "03:00"]
    assert len(ext.time_ticks(NOW - timedelta(minutes=9, seconds=30), NOW)) <= 6
    ticks = ext.time_ticks(NOW - timedelta(minutes=4, seconds=30), NOW)
    assert [t.strftime("%H:%M") for t in ticks] == ["02:56", "02:57", "02:58", "02:59", "03:00"]  # none before start


def test_a_threshold_at_the_top_of_the_values_is_drawn_below_the_frame_not_on_it() -> None:
    # A guard "< 0.6" over values of 0.4-0.45: the axis ends a step above 0.6, so its line is not the plot's edge.
    low, high, ticks = ext.value_ticks([0.42, 0.44, 0.43, 0.45, 0.6])
    assert (low, len(ticks)) == (0.0, 5)
    assert high == pytest.approx(0.8)
