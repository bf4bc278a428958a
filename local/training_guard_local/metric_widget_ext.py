"""What moto's CloudWatch lacks for Slack app mode's picture: `GetMetricWidgetImage`, as a stand-in.

moto 5.2 does not implement GetMetricWidgetImage (its CloudWatch responses have no such method). For the emulation
only, `install()` teaches moto to answer it with the API's shape: `MetricWidgetImage`, the PNG's bytes
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricWidgetImage.html). The guard's real
adapter (adapters/cloudwatch.py MetricCharts) calls it through boto3, so its request (the MetricWidget JSON,
OutputFormat png) and the response's parsing run as in AWS.

The picture is a stand-in, not CloudWatch's drawing: each `metrics` line of the widget as a polyline of the
datapoints moto holds (per `period`, by `stat`), and each `annotations.horizontal` line as a dashed red line, on a
white canvas of the widget's `width` x `height`, without text. The time axis starts at the widget's `start` (`-PT3H`)
or at the first datapoint, whichever is later, so that a scenario of minutes is not a sliver at the right edge; it
ends at `end` (`P0D`: now, the scenario's clock). `drawn` lists every widget drawn, for the demo to say so.

Hand-written (zlib and struct, no imaging library) because the guard's dependencies have none, and a stand-in picture
in the emulation does not justify adding one to the lock.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

from moto.cloudwatch import responses as cw_responses
from moto.core.responses import ActionResult

from training_guard import clock
from training_guard.charts import HEIGHT, WIDTH

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The widget's width and height in pixels are 1 to 2000 (the Metric Widget Structure page,
# https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-Metric-Widget-Structure.html; charts.py).
MAX_PIXELS = 2000
DEFAULT_WIDTH, DEFAULT_HEIGHT = WIDTH, HEIGHT  # a widget without them: the size the guard asks for
MARGIN = 40  # pixels around the plot
LINE_COLOURS = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (148, 103, 189), (140, 86, 75), (227, 119, 194))
THRESHOLD_COLOUR = (214, 39, 40)
GRID_COLOUR = (230, 230, 230)
AXIS_COLOUR = (120, 120, 120)

drawn: list[dict[str, Any]] = []  # every widget drawn since reset(), in order


def reset() -> None:
    drawn.clear()


def install() -> None:
    """Teach moto's CloudWatch GetMetricWidgetImage (idempotent)."""
    cw_responses.CloudWatchResponse.get_metric_widget_image = _get_metric_widget_image  # type: ignore[attr-defined]


def _get_metric_widget_image(self: Any) -> ActionResult:
    widget = json.loads(self._get_param("MetricWidget"))
    drawn.append(widget)
    return ActionResult({"MetricWidgetImage": render(widget, self.cloudwatch_backend.metric_data)})


_DURATION = re.compile(r"^-?P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+)S)?)?$")


def _offset(value: Any) -> timedelta:
    """A relative time of the widget (`-PT3H`, `P0D`) as the time before now."""
    match = _DURATION.match(str(value or "P0D"))
    if match is None:
        raise ValueError(f"the stand-in reads relative times only (-PT3H, P0D), got {value!r}")
    parts = {k: int(v or 0) for k, v in match.groupdict().items()}
    return timedelta(days=parts["d"], hours=parts["h"], minutes=parts["m"], seconds=parts["s"])


def _aggregate(values: Sequence[float], stat: str) -> float:
    if stat == "Minimum":
        return min(values)
    if stat == "Average":
        return sum(values) / len(values)
    if stat == "Sum":
        return sum(values)
    if stat == "SampleCount":
        return float(len(values))
    return max(values)  # Maximum, and the percentiles (the stand-in draws the worst)


def series(widget: dict[str, Any], data: Iterable[Any], now: datetime) -> list[list[tuple[datetime, float]]]:
    """Each metric line's points in the widget's window, one per period."""
    start, end = now - _offset(widget.get("start")), now - _offset(widget.get("end"))
    period = int(widget.get("period") or 60)
    stat = str(widget.get("stat") or "Average")
    data = list(data)
    out = []
    for line in widget.get("metrics") or []:
        namespace, metric, dimensions = line[0], line[1], dict(zip(line[2::2], line[3::2], strict=False))
        buckets: dict[datetime, list[float]] = defaultdict(list)
        for datum in data:
            if datum.namespace != namespace or datum.name != metric:
                continue
            if {d.name: d.value for d in datum.dimensions} != dimensions:
                continue
            at = datum.timestamp if datum.timestamp.tzinfo else datum.timestamp.replace(tzinfo=UTC)
            if start <= at <= end:
                bucket = at - timedelta(seconds=at.timestamp() % period)
                buckets[bucket].append(float(datum.value))
        out.append([(at, _aggregate(values, stat)) for at, values in sorted(buckets.items())])
    return out


def render(widget: dict[str, Any], data: Iterable[Any], now: datetime | None = None) -> bytes:
    """The stand-in PNG of a widget from moto's datapoints (`now`: the functions' clock)."""
    now = now or clock.utcnow()
    width = min(max(int(widget.get("width") or DEFAULT_WIDTH), 1), MAX_PIXELS)
    height = min(max(int(widget.get("height") or DEFAULT_HEIGHT), 1), MAX_PIXELS)
    lines = series(widget, data, now)
    thresholds = [float(a["value"]) for a in (widget.get("annotations") or {}).get("horizontal", []) if "value" in a]
    points = [p for line in lines for p in line]
    end = now - _offset(widget.get("end"))
    start = now - _offset(widget.get("start"))
    if points:
        start = max(start, min(at for at, _ in points) - timedelta(minutes=1))
    values = [v for _, v in points] + thresholds
    low, high = min([0.0, *values]), max([1.0, *values]) * 1.1
    canvas = Canvas(width, height)
    left, right, top, bottom = MARGIN, width - MARGIN // 2, MARGIN // 2, height - MARGIN

    def x(at: datetime) -> int:
        span = (end - start).total_seconds() or 1.0
        return round(left + (right - left) * (at - start).total_seconds() / span)

    def y(value: float) -> int:
        return round(bottom - (bottom - top) * (value - low) / ((high - low) or 1.0))

    for i in range(1, 5):  # the grid: quarters of the value range
        canvas.line(left, y(low + (high - low) * i / 5), right, y(low + (high - low) * i / 5), GRID_COLOUR)
    canvas.line(left, top, left, bottom, AXIS_COLOUR)
    canvas.line(left, bottom, right, bottom, AXIS_COLOUR)
    for value in thresholds:
        canvas.line(left, y(value), right, y(value), THRESHOLD_COLOUR, dash=8, width=2)
    for number, line in enumerate(lines):
        colour = LINE_COLOURS[number % len(LINE_COLOURS)]
        xy = [(x(at), y(value)) for at, value in line]
        for (x0, y0), (x1, y1) in pairwise(xy):
            canvas.line(x0, y0, x1, y1, colour, width=3)
        for px, py in xy:
            canvas.dot(px, py, colour, radius=3)
    return canvas.png()


class Canvas:
    """An RGB picture, white, with lines and dots (Bresenham), written as a PNG (zlib-compressed scanlines)."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(b"\xff" * (width * height * 3))

    def set(self, px: int, py: int, colour: tuple[int, int, int]) -> None:
        if 0 <= px < self.width and 0 <= py < self.height:
            at = (py * self.width + px) * 3
            self.pixels[at : at + 3] = bytes(colour)

    def dot(self, px: int, py: int, colour: tuple[int, int, int], *, radius: int) -> None:
        for dy in range(-radius, radius + 1):
            for dx in range(-radius, radius + 1):
                if dx * dx + dy * dy <= radius * radius:
                    self.set(px + dx, py + dy, colour)

    def line(
        self, x0: int, y0: int, x1: int, y1: int, colour: tuple[int, int, int], *, dash: int = 0, width: int = 1
    ) -> None:
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        error, step = dx + dy, 0
        while True:
            if not dash or (step // dash) % 2 == 0:
                for offset in range(width):  # thick across the line: down for a flat one, right for a steep one
                    if dx >= -dy:
                        self.set(x0, y0 + offset, colour)
                    else:
                        self.set(x0 + offset, y0, colour)
            if (x0, y0) == (x1, y1):
                return
            step += 1
            doubled = 2 * error
            if doubled >= dy:
                error += dy
                x0 += sx
            if doubled <= dx:
                error += dx
                y0 += sy

    def png(self) -> bytes:
        row = self.width * 3
        raw = b"".join(b"\x00" + bytes(self.pixels[i * row : (i + 1) * row]) for i in range(self.height))
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)  # 8-bit RGB
        return PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b"")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
