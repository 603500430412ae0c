"""Headless Chromium for the picture tests: render a page to a PNG and its DOM, read the PNG."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run")


def render_in_chromium(
    page: Path, scratch: Path, *, width: int = 1280, height: int = 2000
) -> tuple[Path, str]:
    """(the screenshot, the DOM after scripts ran) of `page` in headless Chromium; the test fails in
    CI and is skipped elsewhere when Chromium is not installed."""
    binary = shutil.which("chromium")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (.ci/run installs it with apt-get)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    flags = [*FLAGS, f"--user-data-dir={scratch / 'chromium-profile'}"]
    shot = scratch / "shot.png"
    subprocess.run(
        [binary, *flags, f"--screenshot={shot}", f"--window-size={width},{height}", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    dumped = subprocess.run(
        [binary, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    )
    return shot, dumped.stdout


def drawn_page(page: Path, scratch: Path) -> tuple[np.ndarray, str]:
    """`page` drawn by headless Chromium at 1280x2000: (its RGB pixels, its DOM), checked to be a
    real picture: a PNG of that size with more than 50 colours (not blank, not one colour)."""
    started = time.monotonic()
    shot, dom = render_in_chromium(page, scratch)
    elapsed = time.monotonic() - started
    assert shot.is_file() and shot.stat().st_size > 20_000, elapsed
    pixels = png_pixels(shot)
    assert pixels.shape == (2000, 1280, 3)
    assert len(np.unique(pixels.reshape(-1, 3)[::5], axis=0)) > 50  # not blank, not a single colour
    return pixels, dom


def pixels_of(pixels: np.ndarray, colour: str) -> int:
    """How many pixels have exactly the `#rrggbb` colour."""
    rgb = np.array([int(colour[k : k + 2], 16) for k in (1, 3, 5)])
    return int((pixels == rgb).all(axis=2).sum())


def png_pixels(path: Path) -> np.ndarray:
    """The RGB(A) pixels of an 8-bit, non-interlaced PNG (what Chromium writes), with stdlib zlib."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, header = 8, [], (0, 0, 0, 0, 0, 0, 0)
    while pos < len(data):
        (size,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + size]
        pos += 12 + size
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in {2, 6} and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    stride, raw = width * bpp, zlib.decompress(b"".join(chunks))
    out = np.zeros((height, stride), dtype=np.int64)
    prev = np.zeros(stride, dtype=np.int64)
    for y in range(height):
        kind_of_filter = raw[y * (stride + 1)]
        row = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int64)
        if kind_of_filter == 0:
            cur = row
        elif kind_of_filter == 2:
            cur = (row + prev) & 255
        else:
            values, up = row.tolist(), prev.tolist()
            for i in range(stride):
                a = values[i - bpp] if i >= bpp else 0
                b, c = up[i], (up[i - bpp] if i >= bpp else 0)
                if kind_of_filter == 1:
                    p = a
                elif kind_of_filter == 3:
                    p = (a + b) >> 1
                else:
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    p = a if pa <= pb and pa <= pc else b if pb <= pc else c
                values[i] = (values[i] + p) & 255
            cur = np.array(values, dtype=np.int64)
        out[y], prev = cur, cur
    return out.reshape(height, width, bpp)[:, :, :3]
