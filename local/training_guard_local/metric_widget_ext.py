"""What moto's CloudWatch lacks for Slack app mode's picture: `GetMetricWidgetImage`, as a stand-in.

moto 5.2 does not implement GetMetricWidgetImage (its CloudWatch responses have no such method). For the emulation
only, `install()` answers it in front of moto, through botocore's events (answers.py), with the API's shape:
`MetricWidgetImage`, the PNG's bytes (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricWidgetImage.html).
The guard's real adapter (adapters/cloudwatch.py MetricCharts) calls it through boto3, so its request (the MetricWidget
JSON, OutputFormat png) is built and validated as for AWS, and the answer is checked against the API's output shape.

The picture is a stand-in, not CloudWatch's drawing, but shows what CloudWatch's does: each `metrics` line of the
widget as a polyline of the datapoints moto holds (per `period`, by `stat`), each `annotations.horizontal` line as a
dashed red line with its label and its `fill` side shaded, the value axis (`yAxis.left.label`, round ticks), the time
axis in UTC and a legend, on a white canvas of the widget's `width` x `height`, its text in a pixel font
(pixel_font.py). The time axis starts at the widget's `start` (`-PT3H`)
or at the first datapoint, whichever is later, so that a scenario of minutes is not a sliver at the right edge; it
ends at `end` (`P0D`: now, the scenario's clock). `drawn` lists every widget drawn, for the demo to say so.

Hand-written (zlib and struct, no imaging library) because the guard's dependencies have none, and a stand-in picture
in the emulation does not justify adding one to the lock.
"""

from __future__ import annotations

import json
import math
import re
import struct
import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

from moto.cloudwatch.models import cloudwatch_backends

from training_guard.adapters import clock
from training_guard.render.charts import HEIGHT, WIDTH
from training_guard_local import answers
from training_guard_local.pixel_font import ADVANCE, glyph, text_width

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The widget's width and height in pixels are 1 to 2000 (the Metric Widget Structure page,
# https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-Metric-Widget-Structure.html; charts.py).
MAX_PIXELS = 2000
DEFAULT_WIDTH, DEFAULT_HEIGHT = WIDTH, HEIGHT  # a widget without them: the size the guard asks for
LEFT_MARGIN, TOP_MARGIN, BOTTOM_MARGIN = 80, 52, 76  # pixels: value ticks, title and axis label, times and legend
TEXT_SCALE = 2  # the font's pixels drawn 2 x 2: readable in a Slack thread
DOT_RADIUS = 4
LINE_COLOURS = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (148, 103, 189), (140, 86, 75), (227, 119, 194))
THRESHOLD_COLOUR = (214, 39, 40)
GRID_COLOUR = (230, 230, 230)
AXIS_COLOUR = (90, 90, 90)
TEXT_COLOUR = (30, 30, 30)
BAD_SIDE_COLOUR = (253, 232, 232)  # the threshold's bad side, lightly shaded

drawn: list[dict[str, Any]] = []  # every widget drawn since reset(), in order


def reset() -> None:
    drawn.clear()


def install(session: Any = None) -> None:
    """Answer GetMetricWidgetImage in front of moto (idempotent; `answers.install`)."""
    answers.install(session)
    answers.answer("cloudwatch", "GetMetricWidgetImage", _get_metric_widget_image)


def _get_metric_widget_image(call: answers.Call, model: Any) -> answers.Reply:
    widget = json.loads(str(call.params["MetricWidget"]))
    drawn.append(widget)
    data = cloudwatch_backends[call.account][call.region].metric_data
    return answers.reply(model, {"MetricWidgetImage": render(widget, data)})


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
        names = [item for item in line if not isinstance(item, dict)]  # a trailing {"label": ...} draws nothing
        namespace, metric, dimensions = names[0], names[1], dict(zip(names[2::2], names[3::2], strict=False))
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
    """The stand-in PNG of a widget from moto's datapoints (`now`: the functions' clock): the title, the value axis
    with its label and ticks, the time axis in UTC, the threshold with its label and its bad side shaded, the lines
    with their datapoints (never cut at the plot's edge) and a legend."""
    now = now or clock.utcnow()
    width = min(max(int(widget.get("width") or DEFAULT_WIDTH), 1), MAX_PIXELS)
    height = min(max(int(widget.get("height") or DEFAULT_HEIGHT), 1), MAX_PIXELS)
    lines = series(widget, data, now)
    annotations = [a for a in (widget.get("annotations") or {}).get("horizontal", []) if "value" in a]
    thresholds = [float(a["value"]) for a in annotations]
    points = [p for line in lines for p in line]
    end = now - _offset(widget.get("end"))
    start = now - _offset(widget.get("start"))
    if points:
        start = max(start, min(at for at, _ in points) - timedelta(minutes=1))
    low, high, ticks = value_ticks([v for _, v in points] + thresholds)
    canvas = Canvas(width, height)
    labels = [_label_of(line, n) for n, line in enumerate(widget.get("metrics") or [])]
    canvas.text(LEFT_MARGIN, 6, str(widget.get("title") or ""), TEXT_COLOUR, scale=TEXT_SCALE)
    axis_label = str(((widget.get("yAxis") or {}).get("left") or {}).get("label") or "")
    canvas.text(LEFT_MARGIN, 28, axis_label, AXIS_COLOUR, scale=TEXT_SCALE)
    left, right, top, bottom = LEFT_MARGIN, width - 16, TOP_MARGIN, height - BOTTOM_MARGIN
    inset = DOT_RADIUS + 2  # no datapoint's dot is cut at the plot's edges

    def x(at: datetime) -> int:
        span = (end - start).total_seconds() or 1.0
        return round(left + inset + (right - left - 2 * inset) * (at - start).total_seconds() / span)

    def y(value: float) -> int:
        return round(bottom - (bottom - top - inset) * (value - low) / ((high - low) or 1.0))  # a dot on top: whole

    for annotation, value in zip(annotations, thresholds, strict=True):  # the bad side, shaded first
        if annotation.get("fill") == "above":
            canvas.rect(left + 1, top, right, y(value), BAD_SIDE_COLOUR)
        elif annotation.get("fill") == "below":
            canvas.rect(left + 1, y(value), right, bottom - 1, BAD_SIDE_COLOUR)
    for value in ticks:  # the grid and the value axis's ticks
        canvas.line(left, y(value), right, y(value), GRID_COLOUR)
        text = _number(value)
        canvas.text(left - 8 - text_width(text, TEXT_SCALE), y(value) - 7, text, AXIS_COLOUR, scale=TEXT_SCALE)
    for at in time_ticks(start, end):  # the time axis, in UTC as every message says a time
        canvas.line(x(at), bottom, x(at), bottom + 5, AXIS_COLOUR)
        text = at.strftime("%H:%M")
        at_x = min(x(at) - text_width(text, TEXT_SCALE) // 2, width - 2 - text_width(text, TEXT_SCALE))  # never cut
        canvas.text(at_x, bottom + 9, text, AXIS_COLOUR, scale=TEXT_SCALE)
    canvas.text(right - text_width("UTC", TEXT_SCALE), bottom + 29, "UTC", AXIS_COLOUR, scale=TEXT_SCALE)
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
            canvas.dot(px, py, colour, radius=DOT_RADIUS)
    for annotation, value in zip(annotations, thresholds, strict=True):  # last: no line hides a label
        text = str(annotation.get("label") or _number(value))
        label_y = y(value) - 21 if y(value) - 21 >= top else y(value) + 6  # above its line, below at the top
        # On a white box at the left (a firing's datapoints cross the line at the right).
        canvas.rect(left + 5, label_y - 3, left + 11 + text_width(text, TEXT_SCALE), label_y + 16, (255, 255, 255))
        canvas.text(left + 8, label_y, text, THRESHOLD_COLOUR, scale=TEXT_SCALE)
    _legend(canvas, labels, threshold=bool(annotations), left=left, top=height - 22)
    return canvas.png()


def _legend(canvas: Canvas, labels: Sequence[str], *, threshold: bool, left: int, top: int) -> None:
    """The legend: each line's colour and name, then the threshold's dashed red line."""
    for number, label in enumerate(labels):
        colour = LINE_COLOURS[number % len(LINE_COLOURS)]
        canvas.rect(left, top + 5, left + 18, top + 9, colour)
        canvas.text(left + 24, top, label, TEXT_COLOUR, scale=TEXT_SCALE)
        left += 24 + text_width(label, TEXT_SCALE) + 20
    if threshold:
        canvas.line(left, top + 7, left + 18, top + 7, THRESHOLD_COLOUR, dash=5, width=2)
        canvas.text(left + 24, top, "threshold", TEXT_COLOUR, scale=TEXT_SCALE)


def _label_of(line: Sequence[Any], number: int) -> str:
    """A metric line's name in the legend: its own `label`, else its last dimension's value, else its metric."""
    options = line[-1] if line and isinstance(line[-1], dict) else {}
    names = [item for item in line if not isinstance(item, dict)]
    return str(options.get("label") or (names[3] if len(names) > 3 else names[1] if len(names) > 1 else number))


def value_ticks(values: Sequence[float]) -> tuple[float, float, list[float]]:
    """The value axis: its low and high ends (round numbers beyond every value, so no dot is cut) and its ticks."""
    low, high = min([0.0, *values]), max([0.0, *values])
    if high - low <= 0:
        high = low + 1.0
    step = _nice((high - low) / 4)
    top = high
    low, high = math.floor(low / step) * step, math.ceil(high / step) * step
    if high < top or math.isclose(
        high, top
    ):  # a value (a threshold, often) on the frame reads as the frame: one more step above it
        high += step
    count = round((high - low) / step)
    return low, high, [low + step * n for n in range(count + 1)]


def _nice(span: float) -> float:
    """The round step (1, 2 or 5 times a power of ten) nearest above `span`."""
    power = 10.0 ** math.floor(math.log10(span))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= span)


def time_ticks(start: datetime, end: datetime) -> list[datetime]:
    """Round times (every 1 to 120 minutes) on the time axis, at most six."""
    span = (end - start).total_seconds()
    minutes = next((m for m in (1, 2, 5, 10, 15, 30, 60, 120) if span / (m * 60) <= 5), 180)  # <= 6 ticks
    first = start.replace(second=0, microsecond=0)
    first += timedelta(minutes=(-first.minute) % minutes)
    if first < start:  # a start within a minute: its minute is left of the axis
        first += timedelta(minutes=minutes)
    ticks = []
    while first <= end:
        ticks.append(first)
        first += timedelta(minutes=minutes)
    return ticks


def _number(value: float) -> str:
    return f"{round(value, 9):g}"


class Canvas:
    """An RGB picture, white, with lines and dots (Bresenham), written as a PNG (zlib-compressed scanlines)."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(b"\xff" * (width * height * 3))

    def set(self, px: int, py: int, colour: tuple[int, int, int]) -> None:
        if 0 <= px < self.width and 0 <= py < self.height:
            at = (py * self.width + px) * 3
            self.pixels[at : at + 3] = bytes(colour)

    def rect(self, x0: int, y0: int, x1: int, y1: int, colour: tuple[int, int, int]) -> None:
        for py in range(min(y0, y1), max(y0, y1) + 1):
            for px in range(min(x0, x1), max(x0, x1) + 1):
                self.set(px, py, colour)

    def text(self, px: int, py: int, text: str, colour: tuple[int, int, int], *, scale: int = 1) -> None:
        """`text` from its top left, in the pixel font, each font pixel `scale` x `scale`."""
        for n, char in enumerate(text):
            for gx, gy in glyph(char):
                left, top = px + (n * ADVANCE + gx) * scale, py + gy * scale
                self.rect(left, top, left + scale - 1, top + scale - 1, colour)

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
