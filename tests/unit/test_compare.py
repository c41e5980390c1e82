"""render.output.compare: the visual diff of two shots, on pictures made with libvips (blocks, text, a band
inserted), checked on its numbers, boxes and tinted image."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import pyvips

from render.output.compare import TINT, compare

WHITE, BLACK = [255, 255, 255], [0, 0, 0]


def page(height: int = 400, width: int = 300, blocks: tuple[tuple[int, int, int, int, list[int]], ...] = ()) -> bytes:
    """A white page with filled rectangles (x, y, w, h, colour), as PNG."""
    image = pyvips.Image.black(width, height, bands=3).new_from_image(WHITE).cast("uchar")
    for x, y, w, h, colour in blocks:
        image = image.draw_rect(colour, x, y, w, h, fill=True)
    return image.pngsave_buffer()


def text_page(lines: list[str], width: int = 300) -> pyvips.Image:
    rendered = [pyvips.Image.text(line, dpi=96, font="DejaVu Sans 12") for line in lines]
    height = sum(line.height + 8 for line in rendered) + 20
    image = pyvips.Image.black(width, height, bands=3).new_from_image(WHITE).cast("uchar")
    y = 10
    for line in rendered:
        ink = (line > 0).ifthenelse(BLACK, WHITE).cast("uchar")
        image = image.insert(ink.crop(0, 0, min(ink.width, width - 10), ink.height), 5, y)
        y += line.height + 8
    return image


def test_the_same_shot_has_no_change() -> None:
    shot = page(blocks=((20, 30, 100, 40, [200, 30, 30]),))
    found = compare(shot, shot)
    assert (found.changed_share, found.ssim, found.boxes) == (0.0, 1.0, [])
    assert (found.inserted_rows, found.removed_rows, found.width, found.height) == (0, 0, 300, 400)


def test_a_changed_block_is_boxed_and_tinted() -> None:
    before = page(blocks=((20, 30, 100, 40, [200, 30, 30]),))
    after = page(blocks=((20, 30, 100, 40, [200, 30, 30]), (150, 200, 64, 32, [0, 0, 0])))
    found = compare(before, after)
    assert found.changed_share == pytest.approx(64 * 32 / (300 * 400), abs=1e-6)
    assert found.boxes == [(150, 200, 64, 32)]
    assert 0.8 < found.ssim < 1.0
    diff = pyvips.Image.new_from_buffer(found.diff, "")
    tinted = diff.getpoint(160, 210)
    assert tinted == [int(0 * 0.45 + c * 0.55) for c in TINT]  # the change (black), tinted over the newer shot
    assert diff.getpoint(30, 40) == [200, 30, 30]  # the rest as it is


def test_a_page_that_grew_is_aligned_not_changed_from_the_insert_down() -> None:
    header = (0, 0, 300, 50, [30, 30, 200])
    before = page(400, blocks=(header, (0, 300, 300, 60, [30, 160, 30])))
    # 100 rows inserted at y=100: the green band moves from 300 to 400.
    after = page(500, blocks=(header, (20, 120, 200, 40, [0, 0, 0]), (0, 400, 300, 60, [30, 160, 30])))
    found = compare(before, after)
    assert (found.inserted_rows, found.removed_rows) == (100, 0)
    assert found.changed_share == pytest.approx(200 * 40 / (300 * 500), abs=1e-6)  # only what was added shows
    assert found.boxes == [(20, 120, 200, 40)]
    shrunk = compare(after, before)
    assert (shrunk.inserted_rows, shrunk.removed_rows, shrunk.changed_share) == (0, 100, 0.0)


def test_edited_text_is_found_where_it_changed() -> None:
    before = text_page(["The price is 10 EUR", "Order now", "Delivery in two days"])
    after = text_page(["The price is 12 EUR", "Order now", "Delivery in two days"])
    found = compare(before.pngsave_buffer(), after.pngsave_buffer())
    assert 0 < found.changed_share < 0.01 and found.ssim > 0.95
    [(x, y, w, h)] = found.boxes
    assert y < 40 and h <= 24  # the first line only


def test_shots_of_different_widths_are_compared_on_the_wider() -> None:
    found = compare(page(200, 300), page(200, 320))
    assert (found.width, found.changed_share) == (320, 0.0)


def ffmpeg_ssim(before: bytes, after: bytes, tmp_path: Path) -> float:
    """ffmpeg's `ssim` filter on the greyscale of two pictures (its "All:" figure)."""
    paths = []
    for name, data in (("before.png", before), ("after.png", after)):
        (tmp_path / name).write_bytes(data)
        paths.append(str(tmp_path / name))
    run = subprocess.run(["ffmpeg", "-hide_banner", "-i", paths[0], "-i", paths[1], "-lavfi",
                          "[0:v]format=gray[a];[1:v]format=gray[b];[a][b]ssim", "-f", "null", "-"],
                         capture_output=True, text=True, check=True)
    found = re.search(r"All:([0-9.]+)", run.stderr)
    assert found, run.stderr[-500:]
    return float(found.group(1))


@pytest.mark.parametrize("change", ["block", "text"])
def test_ssim_agrees_with_ffmpeg(change: str, tmp_path: Path) -> None:
    """The perceptual score is SSIM as others compute it: ffmpeg's filter (8x8 windows, not Gaussian ones)
    gives the same figure within a few thousandths on a changed block and on edited text."""
    if change == "block":
        before = page(blocks=((20, 30, 100, 40, [200, 30, 30]),))
        after = page(blocks=((20, 30, 100, 40, [200, 30, 30]), (150, 200, 64, 32, [0, 0, 0])))
    else:
        lines = ["Prices include VAT.", "Shipping is free above 50 EUR.", "Order before noon."]
        before = text_page(lines).pngsave_buffer()
        after = text_page([lines[0], "Shipping is free above 80 EUR.", lines[2]]).pngsave_buffer()
    ours = compare(before, after).ssim
    theirs = ffmpeg_ssim(before, after, tmp_path)
    assert ours < 1 and theirs < 1
    assert ours == pytest.approx(theirs, abs=0.005)
