#!/usr/bin/env python3
"""Draws the app's PNG icons (for the web app manifest and the home screen) from the same shapes as
web/static/icon.svg: a house on a dark rounded square. Standard library only (zlib for PNG), so the
icons are reproducible without an image tool:

    python3 web/make-icons.py     # writes web/static/icon-192.png, icon-512.png, icon-maskable-512.png

The maskable icon fills the whole square (launchers cut their own shape) and keeps the house inside
the central safe circle (80 % of the size).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
BACKGROUND = (0x1D, 0x35, 0x57)
HOUSE = (0xF1, 0xFA, 0xEE)
# icon.svg's house, in its 32 x 32 view box: "M16 5 5 15h3v11h6v-7h4v7h6V15h3z".
HOUSE_POLYGON = [(16, 5), (5, 15), (8, 15), (8, 26), (14, 26), (14, 19), (18, 19), (18, 26), (24, 26), (24, 15), (27, 15)]
CORNER = 7  # the rounded square's corner radius (rx) in the view box
SUBSAMPLES = 4  # per pixel and axis: anti-aliased edges


def spans(polygon, y):
    """The x intervals inside `polygon` (even-odd) on the horizontal line at `y`."""
    crossings = []
    for (x0, y0), (x1, y1) in zip(polygon, polygon[1:] + polygon[:1]):
        if (y0 <= y < y1) or (y1 <= y < y0):
            crossings.append(x0 + (y - y0) * (x1 - x0) / (y1 - y0))
    crossings.sort()
    return list(zip(crossings[::2], crossings[1::2]))


def rounded_square_span(y, size, radius):
    """The x interval inside a size x size square with rounded corners at `y`, or None."""
    if not 0 <= y < size:
        return None
    dy = max(radius - y, y - (size - radius), 0)
    if dy == 0:
        return (0, size)
    inset = radius - (radius * radius - dy * dy) ** 0.5
    return (inset, size - inset)


def add_span(row, x0, x1, weight):
    """Adds coverage `weight` for [x0, x1) (pixel units) to `row`, with fractional ends."""
    x0, x1 = max(x0, 0), min(x1, len(row))
    if x1 <= x0:
        return
    first, last = int(x0), int(x1)
    if first == last:
        row[first] += (x1 - x0) * weight
        return
    row[first] += (first + 1 - x0) * weight
    for x in range(first + 1, last):
        row[x] += weight
    if last < len(row):
        row[last] += (x1 - last) * weight


def render(size: int, maskable: bool) -> bytes:
    scale = size / 32
    house_scale = scale * (0.8 if maskable else 1.0)
    offset = (size - 32 * house_scale) / 2
    house = [(offset + x * house_scale, offset + y * house_scale) for x, y in HOUSE_POLYGON]
    weight = 1 / (SUBSAMPLES * SUBSAMPLES)
    rows = []
    for py in range(size):
        back = [0.0] * size
        front = [0.0] * size
        for sub in range(SUBSAMPLES):
            y = py + (sub + 0.5) / SUBSAMPLES
            square = (0, size) if maskable else rounded_square_span(y, size, CORNER * scale)
            if square:
                add_span(back, square[0], square[1], weight * SUBSAMPLES)
            for x0, x1 in spans(house, y):
                add_span(front, x0, x1, weight * SUBSAMPLES)
        line = bytearray([0])  # filter type 0
        for b, f in zip(back, front):
            b, f = min(b, 1.0), min(f, 1.0)
            colour = [round(h * f + k * (1 - f)) for h, k in zip(HOUSE, BACKGROUND)]
            line += bytes(colour) + bytes([round(255 * max(b, f))])
        rows.append(bytes(line))
    return png(size, size, b"".join(rows))


def png(width: int, height: int, raw: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def main():
    for name, size, maskable in (("icon-192.png", 192, False), ("icon-512.png", 512, False), ("icon-maskable-512.png", 512, True)):
        (STATIC / name).write_bytes(render(size, maskable))
        print(f"wrote {STATIC / name}")


if __name__ == "__main__":
    main()
