"""Two shots of a page compared (the visual diff of monitors and `/compare`): the share of the newer
shot's pixels that changed, a perceptual score (SSIM), the boxes of the changed regions, and the newer shot with
its changes tinted.

Shots of a page that grew or shrank are aligned before they are compared, not reported as changed from the
first moved row down: the rows the two have in common at the top and at the bottom are matched first, and only
the band between them is compared in place (what is left over of the longer band is inserted, or removed, rows).
That is the common case of a page that changes: something added, removed or edited in one place.
"""

from __future__ import annotations

import array
from dataclasses import dataclass

import pyvips

THRESHOLD = 24  # a channel differing by more counts as changed: anti-aliasing and JPEG noise stay under it
TINT = (255, 0, 170)
BLOCK = 8  # changed regions are found on a grid of BLOCK x BLOCK pixels (a glyph's changes make one region)
MAX_BOXES = 100
SSIM_WIDTH = 512  # SSIM is computed on greyscale copies this wide
_C1, _C2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2


@dataclass(frozen=True)
class Comparison:
    """What changed from one shot to the next, in the newer shot's pixels."""

    width: int
    height: int
    changed_share: float  # of the newer shot's pixels
    ssim: float  # 1.0: the same picture
    boxes: list[tuple[int, int, int, int]]  # x, y, width, height of each changed region, largest first
    inserted_rows: int  # rows the newer shot has that the older one has not (a page that grew)
    removed_rows: int  # and the other way round
    diff: bytes  # PNG: the newer shot, its changes tinted


def _rgb(data: bytes) -> pyvips.Image:
    image = pyvips.Image.new_from_buffer(data, "", access="random")
    if image.hasalpha():
        image = image.flatten(background=[255, 255, 255])
    image = image.colourspace("srgb") if image.interpretation != "srgb" else image
    return image.extract_band(0, n=3).cast("uchar").copy_memory()


def _changed_rows(a: pyvips.Image, b: pyvips.Image) -> list[bool]:
    """For each row of two images of the same size, whether any of its pixels changed."""
    mask = ((a - b).abs() > THRESHOLD).bandor()
    _, rows = mask.project()
    counts = array.array("I")
    counts.frombytes(rows.cast("uint").write_to_memory())
    return [count > 0 for count in counts]


def _equal_ends(before: pyvips.Image, after: pyvips.Image) -> tuple[int, int]:
    """How many rows the two have in common at the top, and then at the bottom."""
    height = min(before.height, after.height)
    top_rows = _changed_rows(before.crop(0, 0, before.width, height), after.crop(0, 0, after.width, height))
    top = next((row for row, changed in enumerate(top_rows) if changed), height)
    left = height - top
    if not left:
        return top, 0
    bottom_rows = _changed_rows(before.crop(0, before.height - left, before.width, left),
                                after.crop(0, after.height - left, after.width, left))
    bottom = next((n for n, changed in enumerate(reversed(bottom_rows)) if changed), left)
    return top, bottom


def _same_width(before: pyvips.Image, after: pyvips.Image) -> tuple[pyvips.Image, pyvips.Image]:
    width = max(before.width, after.width)
    white = [255, 255, 255]
    return (before.embed(0, 0, width, before.height, extend="background", background=white),
            after.embed(0, 0, width, after.height, extend="background", background=white))


def aligned(before: pyvips.Image, after: pyvips.Image) -> tuple[pyvips.Image, int, int]:
    """`before` laid out on `after`'s rows (matched at the top and bottom, the band between compared in place,
    white where `after` has rows `before` has not), with the rows inserted and removed."""
    top, bottom = _equal_ends(before, after)
    middle_before, middle_after = before.height - top - bottom, after.height - top - bottom
    common = min(middle_before, middle_after)
    white = [255, 255, 255]
    parts = [before.crop(0, 0, before.width, top)] if top else []
    if common:
        parts.append(before.crop(0, top, before.width, common))
    if middle_after > common:  # inserted rows: nothing of `before` to hold against them
        parts.append(pyvips.Image.black(before.width, middle_after - common, bands=3).new_from_image(white)
                     .cast("uchar"))
    if bottom:
        parts.append(before.crop(0, before.height - bottom, before.width, bottom))
    laid = parts[0]
    for part in parts[1:]:  # not arrayjoin: it pads every part to the tallest
        laid = laid.join(part, "vertical")
    return laid.copy_memory(), max(0, middle_after - common), max(0, middle_before - common)


def _boxes(mask: pyvips.Image) -> list[tuple[int, int, int, int]]:
    """Bounding boxes of the changed regions (8-connected on the BLOCK grid), largest first."""
    grid = mask.shrink(BLOCK, BLOCK) if mask.width >= BLOCK and mask.height >= BLOCK else mask
    columns, rows = grid.width, grid.height
    cells = bytes(grid.write_to_memory())
    seen = bytearray(len(cells))
    boxes = []
    for start, value in enumerate(cells):
        if not value or seen[start]:
            continue
        seen[start] = 1
        stack, x0, y0, x1, y1 = [start], columns, rows, 0, 0
        while stack:
            cell = stack.pop()
            y, x = divmod(cell, columns)
            x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    nx, ny = x + dx, y + dy
                    if 0 <= nx < columns and 0 <= ny < rows:
                        other = ny * columns + nx
                        if cells[other] and not seen[other]:
                            seen[other] = 1
                            stack.append(other)
        # The grid's cells, a cell more on each side (shrink rounds), cut down to the changed pixels in them.
        scale_x, scale_y = mask.width / columns, mask.height / rows
        left, top = max(0, int((x0 - 1) * scale_x)), max(0, int((y0 - 1) * scale_y))
        right, bottom = min(mask.width, int((x1 + 2) * scale_x) + 1), min(mask.height, int((y1 + 2) * scale_y) + 1)
        x, y, width, height = mask.crop(left, top, right - left, bottom - top).find_trim(threshold=0, background=[0])
        if width and height:
            boxes.append((left + x, top + y, width, height))
    boxes.sort(key=lambda box: box[2] * box[3], reverse=True)
    return boxes[:MAX_BOXES]


def ssim(a: pyvips.Image, b: pyvips.Image) -> float:
    """Mean structural similarity of two images of the same size (Wang et al. 2004, a Gaussian window of
    sigma 1.5), on greyscale copies SSIM_WIDTH wide."""
    scale = min(1.0, SSIM_WIDTH / a.width)
    x, y = (image.colourspace("b-w").resize(scale).cast("float") for image in (a, b))
    blur = lambda image: image.gaussblur(1.5, precision="float")  # noqa: E731
    mu_x, mu_y = blur(x), blur(y)
    var_x = blur(x * x) - mu_x * mu_x
    var_y = blur(y * y) - mu_y * mu_y
    covar = blur(x * y) - mu_x * mu_y
    index = ((mu_x * mu_y * 2 + _C1) * (covar * 2 + _C2)) / ((mu_x * mu_x + mu_y * mu_y + _C1) * (var_x + var_y + _C2))
    return float(index.avg())


def compare(before: bytes, after: bytes, threshold: int = THRESHOLD) -> Comparison:
    """Compare two encoded shots (any format libvips reads), the second the newer; a pixel changed when one of
    its channels differs by more than `threshold` (0-255)."""
    old, new = _same_width(_rgb(before), _rgb(after))
    laid, inserted, removed = aligned(old, new)
    mask = ((laid - new).abs() > threshold).bandor().copy_memory()
    tinted = mask.ifthenelse((new * 0.45 + [value * 0.55 for value in TINT]).cast("uchar"), new)
    return Comparison(
        width=new.width, height=new.height, changed_share=round(mask.avg() / 255, 6), ssim=round(ssim(laid, new), 6),
        boxes=_boxes(mask), inserted_rows=inserted, removed_rows=removed, diff=tinted.pngsave_buffer(compression=1))
