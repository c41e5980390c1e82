"""Image post-processing with pyvips: a pipeline of small named steps with a deadline between them.

Chromium encodes png, jpeg and webp itself; everything else (other formats, resizing, palette
PNGs) goes through here. libvips' operation cache is off: each worker handles one image at a time
and parallelism comes from the worker pool.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyvips

from render.contract.errors import CaptureTimeout, ErrorDetail, RequestNotValid, ResultingImageTooLarge
from render.contract.formats import FORMATS

pyvips.cache_set_max(0)

def check_output_size(width: int, height: int, fmt: str, max_pixels: int) -> None:
    """Refuse outputs the format cannot hold (its largest side: render.contract.formats) or beyond the pixel
    budget, before any work is done."""
    side = FORMATS[fmt].max_side if fmt in FORMATS else None
    if side is not None and (width > side or height > side):
        raise ResultingImageTooLarge(
            f"The image would be {width}x{height} pixels; {fmt} holds at most {side} pixels a side. "
            "Use a smaller viewport, device_scale_factor or image_width/image_height, or another format.")
    if width * height > max_pixels:
        raise ResultingImageTooLarge(
            f"The image would be {width}x{height} = {width * height} pixels, over the limit of "
            f"{max_pixels} (setting SCREENSHOT_MAX_IMAGE_PIXELS).")


def fit_size(width: int, height: int, target_width: int | None, target_height: int | None) -> tuple[int, int]:
    """Output size for `image_width`/`image_height`, keeping the aspect ratio (fit inside both)."""
    if target_width is None and target_height is None:
        return width, height
    scale_w = target_width / width if target_width else None
    scale_h = target_height / height if target_height else None
    scale = min(s for s in (scale_w, scale_h) if s is not None)
    return max(1, round(width * scale)), max(1, round(height * scale))


@dataclass(frozen=True)
class EncodeOptions:
    """How the final image is written."""

    format: str
    quality: int
    palette: bool = False  # png only: quantise to a palette at `quality`


Step = Callable[[pyvips.Image], pyvips.Image]


def resize(width: int, height: int) -> Step:
    """Scale to exactly `width` x `height` (the caller keeps the aspect ratio)."""

    def step(image: pyvips.Image) -> pyvips.Image:
        if (image.width, image.height) == (width, height):
            return image
        return image.resize(width / image.width, vscale=height / image.height, kernel="lanczos3")

    return step


def flatten(background: tuple[int, int, int] = (255, 255, 255)) -> Step:
    """Drop alpha onto a background, for formats without transparency."""

    def step(image: pyvips.Image) -> pyvips.Image:
        return image.flatten(background=list(background)) if image.hasalpha() else image

    return step


def jp2_psnr(quality: int) -> int:
    """libvips' `jp2ksave` Q is OpenJPEG's target PSNR in dB, not a JPEG-like quality: at 10 a page came
    out flat grey and at 20 barely readable. `image_quality` 0-100 maps onto 22-47 dB, where 0 is still a
    readable page and 100 close to lossless (measured on a saved Wikipedia page)."""
    return round(22 + quality / 4)


def encode(image: pyvips.Image, options: EncodeOptions) -> bytes:
    """Write the image in its output format, tuned for speed at the requested quality."""
    fmt = options.format
    q = max(options.quality, FORMATS[fmt].min_quality)
    image = image.cast("uchar") if image.format != "uchar" else image
    if fmt == "png":
        if options.palette:
            return bytes(image.pngsave_buffer(palette=True, Q=q, compression=6))
        return bytes(image.pngsave_buffer(compression=6))
    if fmt in ("jpeg", "jpg"):
        return bytes(flatten()(image).jpegsave_buffer(Q=q, optimize_coding=True, strip=True))
    if fmt == "webp":
        return bytes(image.webpsave_buffer(Q=q, effort=2, strip=True))
    if fmt == "avif":
        return bytes(image.heifsave_buffer(Q=q, compression="av1", effort=2, strip=True))
    if fmt == "heif":
        return bytes(image.heifsave_buffer(Q=q, compression="hevc", effort=0, strip=True))
    if fmt == "tiff":
        return bytes(flatten()(image).tiffsave_buffer(compression="jpeg", Q=q, strip=True))
    if fmt == "jp2":
        return bytes(image.jp2ksave_buffer(Q=jp2_psnr(q), lossless=False, strip=True))
    if fmt == "gif":
        return bytes(image.gifsave_buffer(effort=4, strip=True))
    raise ValueError(f"not an image format: {fmt}")


Source = Callable[[], pyvips.Image]


MAX_SLICES = 500  # full_page_slices: each is encoded and stored on its own


@dataclass(frozen=True)
class Slicing:
    """full_page_slices: bands of at most `height` rows, each repeating the `overlap` last rows of the one before."""

    height: int
    overlap: int

    def count(self, image_height: int) -> int:
        """How many bands an image `image_height` rows high makes."""
        return -(-max(1, image_height - self.overlap) // (self.height - self.overlap))

    def check(self, image_height: int) -> None:
        """Refuse, before any encoding, an image that would make more than MAX_SLICES bands."""
        count = self.count(image_height)
        if count > MAX_SLICES:
            raise RequestNotValid(
                f"full_page_slice_height: this {image_height} px image would make {count} slices, more than "
                f"{MAX_SLICES}; ask for taller slices (or less overlap).",
                [ErrorDetail("full_page_slice_height", f"too many slices ({count} > {MAX_SLICES})")])


@dataclass(frozen=True)
class Slice:
    """One horizontal band of a final image (full_page_slices), encoded like the image."""

    offset_y: int
    width: int
    height: int
    body: bytes


def cut_slices(image: pyvips.Image, slicing: Slicing, options: EncodeOptions) -> list[Slice]:
    """The final image cut top to bottom into bands (`slicing`), each encoded like the image; the last band
    ends at the bottom (one band when the image is not taller). `image` is the final one, before (or
    instead of) its own encoding: nothing is decoded again."""
    step = slicing.height - slicing.overlap
    slices = []
    for top in range(0, image.height, step):
        rows = min(slicing.height, image.height - top)
        slices.append(Slice(top, image.width, rows, encode(image.crop(0, top, image.width, rows), options)))
        if top + rows >= image.height:
            break
    return slices


def decode(data: bytes) -> pyvips.Image:
    """An encoded image, read as it is needed."""
    return pyvips.Image.new_from_buffer(data, "", access="sequential")


def process(source: Source, steps: list[Step], options: EncodeOptions, deadline: float,
            slicing: Slicing | None = None) -> tuple[bytes, int, int, list[Slice]]:
    """Source, steps, encode: the final bytes, their pixel size and, with `slicing`, the slices cut from the
    same final image."""
    image = run_pipeline(source(), steps, deadline)
    if slicing is None:
        return encode(image, options), image.width, image.height, []
    slicing.check(image.height)
    image = image.copy_memory()  # rendered once: the final encoding and every slice read it
    return encode(image, options), image.width, image.height, cut_slices(image, slicing, options)


def run_pipeline(image: pyvips.Image, steps: list[Step], deadline: float) -> pyvips.Image:
    """Apply each step with a deadline check between them; returns the image to encode."""
    for step in steps:
        if time.monotonic() > deadline:
            raise CaptureTimeout("The capture ran out of time while post-processing the image.")
        image = step(image)
    return image


def stitch(slices: list[tuple[bytes, int, int]]) -> pyvips.Image:
    """Join (png, skip_rows, rows) slices top to bottom, each cut to its rows."""
    parts = []
    for png, skip, rows in slices:
        image = pyvips.Image.new_from_buffer(png, "")
        rows = min(rows, image.height - skip)
        parts.append(image.crop(0, skip, image.width, rows) if (skip, rows) != (0, image.height) else image)
    # `join`, not `arrayjoin`: arrayjoin pads every cell to the largest, and the slices differ in height.
    return functools.reduce(lambda top, bottom: top.join(bottom, "vertical"), parts)


def decode_whole(data: bytes) -> pyvips.Image:
    """An encoded image, read for random access (cut in bands)."""
    return pyvips.Image.new_from_buffer(data, "")


def image_size(data: bytes) -> tuple[int, int]:
    """Pixel size of an encoded image, from its header only."""
    image = pyvips.Image.new_from_buffer(data, "")
    return image.width, image.height


def to_png(data: bytes) -> bytes:
    """Any image libvips reads, re-encoded as PNG (first frame or page)."""
    return bytes(pyvips.Image.new_from_buffer(data, "").write_to_buffer(".png"))


def top_png(data: bytes, width: int, height: int) -> bytes:
    """The top left `width` x `height` pixels of a PNG (at most all of it): a full page's first viewport."""
    image = pyvips.Image.new_from_buffer(data, "")
    return bytes(image.crop(0, 0, min(image.width, width), min(image.height, height)).write_to_buffer(".png"))


# metadata_quality's `blank`: an image whose pixels all but this share are within UNIFORM_TOLERANCE of its mean
# colour shows nothing (a white page with one line of text has about 0.5% of its pixels off it).
UNIFORM_SHARE = 0.001
UNIFORM_TOLERANCE = 24


def uniform_colour(data: bytes) -> tuple[int, ...] | None:
    """The colour an image is (nearly) all of, or None when it shows something; looked at 256 pixels wide."""
    # In memory: the thumbnail is read once, sequentially, and looked at several times.
    image = pyvips.Image.thumbnail_buffer(data, 256, height=256 * 64, size="down").copy_memory()
    if image.hasalpha():
        image = image.flatten(background=[255, 255, 255])
    mean = [image.extract_band(band).avg() for band in range(image.bands)]
    off = ((image - mean).abs() > UNIFORM_TOLERANCE).bandor()
    if off.avg() / 255 > UNIFORM_SHARE:
        return None
    return tuple(round(value) for value in mean)


# The blank-capture guard: a capture is one colour when every pixel is within this of the first one's.
ONE_COLOUR_TOLERANCE = 2  # lossy encoders leave a flat picture off by one here and there
_STRIP_ROWS = 128


def one_colour(data: bytes) -> tuple[int, ...] | None:
    """The colour every pixel of an encoded image is, or None as soon as a strip shows anything else. Read
    top-down in strips: a picture that shows something near its top costs one strip, not the whole decode."""
    image = pyvips.Image.new_from_buffer(data, "", access="sequential")
    if image.format != "uchar":
        image = image.cast("uchar")
    region = pyvips.Region.new(image)
    colour: list[int] | None = None
    for top in range(0, image.height, _STRIP_ROWS):
        rows = min(_STRIP_ROWS, image.height - top)
        strip = pyvips.Image.new_from_memory(region.fetch(0, top, image.width, rows), image.width, rows,
                                             image.bands, "uchar")
        if colour is None:
            colour = [int(strip.extract_band(band).getpoint(0, 0)[0]) for band in range(image.bands)]
        if (strip - colour).abs().max() > ONE_COLOUR_TOLERANCE:
            return None
    return tuple(colour or ())
