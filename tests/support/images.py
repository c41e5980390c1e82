"""Reading outputs back: decoded images, colours at points, rasterised PDF pages."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pyvips


def decode(data: bytes) -> pyvips.Image:
    # Decoded into memory once: some loaders (jp2) fail on repeated region reads.
    return pyvips.Image.new_from_buffer(data, "").copy_memory()


def rgb_at(image: pyvips.Image, x: int, y: int) -> tuple[int, ...]:
    return tuple(round(v) for v in image.getpoint(x, y)[:3])


def near(colour: tuple[int, ...], expected: tuple[int, ...], tolerance: int = 12) -> bool:
    """Colours equal within `tolerance` per channel (lossy formats, anti-aliasing)."""
    return all(abs(a - b) <= tolerance for a, b in zip(colour, expected, strict=True))


def rasterise_first_page(pdf: bytes) -> pyvips.Image:
    """The PDF's first page as pixels, by poppler's pdftoppm (72 dpi)."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "in.pdf"
        source.write_bytes(pdf)
        subprocess.run(["pdftoppm", "-png", "-singlefile", "-r", "72", str(source), str(Path(tmp) / "page")],
                       check=True, capture_output=True)
        return decode((Path(tmp) / "page.png").read_bytes())
