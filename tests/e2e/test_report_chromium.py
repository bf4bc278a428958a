"""The report's HTML page, rendered by headless Chromium from Debian's packages: the chart really draws.

`training-guard report --html` runs against the synthesized stack deployed on moto and seeded with stop
records and metrics (tests/integration/test_report.py); Chromium takes a screenshot of the page, and the
PNG must be a real image with the chart's bars in it. Chromium is required: without it this test fails and
says how to install it (a browser a package downloads at install time cannot be fetched on these machines).

The README's screenshot is made the same way:

    .venv/bin/python -m tests.e2e.test_report_chromium docs/report.png
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

INSTALL_HINT = (
    "headless Chromium is needed to render the report's HTML: install Debian's package with "
    "`sudo apt-get update && sudo apt-get install -y chromium` (or point CHROMIUM at a chromium binary)"
)
WINDOW = (1100, 1140)  # the page at its natural width, tall enough for the charts and both tables
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
WHITE_ENOUGH = 245  # a channel above this on all three is background


def find_chromium() -> str:
    """The chromium binary: $CHROMIUM, else `chromium` on PATH; missing is a failure that says how to install it."""
    named = os.environ.get("CHROMIUM")
    found = shutil.which(named) if named else shutil.which("chromium")
    if not found:
        pytest.fail(INSTALL_HINT, pytrace=False)
    return found


def screenshot(page: Path, png: Path, *, window: tuple[int, int] = WINDOW) -> None:
    """Chromium, headless, with nothing that reaches the network and a throwaway profile, photographs the page."""
    chromium = find_chromium()
    with tempfile.TemporaryDirectory(prefix="training-guard-chromium-") as profile:
        command = [
            chromium,
            "--headless",
            "--no-sandbox",  # containers and CI runners have no user namespaces for the sandbox
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",  # small /dev/shm in containers
            "--hide-scrollbars",
            "--force-color-profile=srgb",  # the page's colours land in the PNG unchanged
            "--force-device-scale-factor=1",
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            f"--window-size={window[0]},{window[1]}",
            page.resolve().as_uri(),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0 or not png.exists():
        raise AssertionError(f"chromium failed ({done.returncode}): {done.stderr[-2000:]}")


# --- reading the PNG (the standard library has no image reader; Pillow is not a dependency) -----------------------


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    rows: list[bytes]  # RGB or RGBA, 8 bits per channel
    channels: int

    def pixels(self) -> Iterator[tuple[int, int, int]]:
        step = self.channels
        for row in self.rows:
            for x in range(0, len(row), step):
                yield row[x], row[x + 1], row[x + 2]


def read_png(data: bytes) -> Image:
    """An 8-bit, non-interlaced RGB or RGBA PNG, decoded (what Chromium writes)."""
    assert data[:8] == PNG_SIGNATURE, "not a PNG"
    position, idat, header = 8, b"", b""
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        position += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert (depth, interlace) == (8, 0), f"unexpected PNG: depth {depth}, interlace {interlace}"
    channels = {2: 3, 6: 4}[colour]
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        if kind == 1:  # Sub
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif kind == 2:  # Up
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous, strict=True))
        elif kind == 3:  # Average
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:  # Paeth
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b = previous[i]
                c = previous[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return Image(width, height, rows, channels)


def rgb(colour: str) -> tuple[int, int, int]:
    value = int(colour.lstrip("#"), 16)
    return value >> 16, (value >> 8) & 0xFF, value & 0xFF


# --- the seeded deployment's report ---------------------------------------------------------------------------------


@contextmanager
def seeded_report_page(folder: Path) -> Iterator[Path]:
    """`training-guard report --since 7d --html` on the seeded moto deployment: the page's path."""
    from tests.integration import test_report as seeded
    from tests.integration.deployed import deployed
    from training_guard.config.model import GuardConfig
    from training_guard_local import cli, doctor, report

    page = folder / "report.html"
    with pytest.MonkeyPatch.context() as patch, deployed(GuardConfig()) as stack:
        seeded.seed(stack)
        patch.setattr(doctor, "connect", lambda environ, region: stack.aws())
        patch.setattr(report, "utcnow", lambda: seeded.NOW)
        assert cli.main(["report", "--since", "7d", "--html", str(page)]) == 0
        yield page


def test_the_report_page_renders_its_chart_in_headless_chromium(tmp_path: Path) -> None:
    from training_guard_local import report_html

    find_chromium()  # fails first, with the install line, when there is none
    png = tmp_path / "report.png"
    with seeded_report_page(tmp_path) as page:
        screenshot(page, png)
    data = png.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > 10_000  # a page of text and charts, not an empty frame
    image = read_png(data)
    assert (image.width, image.height) == WINDOW
    colours: dict[tuple[int, int, int], int] = {}
    not_white = 0
    for pixel in image.pixels():
        if min(pixel) <= WHITE_ENOUGH:
            not_white += 1
            colours[pixel] = colours.get(pixel, 0) + 1
    assert not_white > image.width * image.height // 50, "the page is (almost) blank"
    # the bars are drawn in their colours: 5 stop bars, 2 would-have-stopped bars, spend bars
    assert colours.get(rgb(report_html.STOPPED_COLOUR), 0) > 5 * 1000
    assert colours.get(rgb(report_html.WOULD_STOP_COLOUR), 0) > 2 * 1000
    assert colours.get(rgb(report_html.SPEND_COLOUR), 0) > 1000


def test_without_chromium_the_test_fails_and_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.fail.Exception) as failed:
        find_chromium()
    assert "sudo apt-get update && sudo apt-get install -y chromium" in str(failed.value)


def test_the_png_reader_reads_every_filter() -> None:
    """A 3x5 RGB image written with each of the five row filters decodes to the same pixels."""
    pixels = [bytes([10 * x + y, 200 - 10 * x, 7 * y]) for y in range(5) for x in range(3)]
    width, height, channels = 3, 5, 3
    plain = [b"".join(pixels[y * width : (y + 1) * width]) for y in range(height)]
    raw = bytearray()
    previous = bytes(width * channels)
    for y, line in enumerate(plain):
        kind = y  # rows 0..4: None, Sub, Up, Average, Paeth
        out = bytearray()
        for i, value in enumerate(line):
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            p = a + b - c
            paeth = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c
            predictor = [0, a, b, (a + b) >> 1, paeth][kind]
            out.append((value - predictor) & 0xFF)
        raw += bytes([kind]) + out
        previous = line

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = (
        PNG_SIGNATURE
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(bytes(raw)))
        + chunk(b"IEND", b"")
    )
    image = read_png(png)
    assert image.rows == plain


if __name__ == "__main__":
    # The README's screenshot: python -m tests.e2e.test_report_chromium docs/report.png
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/report.png")
    with (
        tempfile.TemporaryDirectory() as scratch,
        contextlib.redirect_stdout(io.StringIO()),  # the report's text: only the picture is wanted
        seeded_report_page(Path(scratch)) as made,
    ):
        screenshot(made, target)
    print(f"wrote {target}", file=sys.stderr)
