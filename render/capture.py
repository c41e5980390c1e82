"""One capture in a prepared tab: load, wait, and produce the requested output."""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass
from typing import Any

from playwright.async_api import Error as PlaywrightError

from render import imaging
from render.browser import Tab
from render.documents import html_to_markdown
from render.emulation import emulate
from render.errors import ResultingImageTooLarge
from render.navigation import load_source
from render.network_policy import check_main_url
from render.options import IMAGE_FORMATS, TakeOptions
from render.settings import RenderSettings

CAPTURE_ATTEMPTS = 4
# Chromium encodes these itself; the others go through pyvips.
CHROMIUM_FORMATS = {"png": "png", "jpeg": "jpeg", "jpg": "jpeg", "webp": "webp"}
CSS_PX_PER_INCH = 96
PAPER_INCHES = {  # width, height in portrait
    "a0": (33.1, 46.8), "a1": (23.4, 33.1), "a2": (16.54, 23.4), "a3": (11.7, 16.54),
    "a4": (8.27, 11.7), "a5": (5.83, 8.27), "a6": (4.13, 5.83),
    "letter": (8.5, 11), "legal": (8.5, 14), "tabloid": (11, 17),
}


@dataclass
class Output:
    """A finished capture."""

    body: bytes
    format: str
    content_type: str
    width: int | None = None
    height: int | None = None


async def capture(options: TakeOptions, tab: Tab, settings: RenderSettings, deadline: float,
                  chrome_major: str) -> Output:
    """Run one capture; `deadline` is a `time.monotonic()` instant."""
    viewport = options.viewport
    if options.url is not None:
        await check_main_url(options.url, settings)
    if options.format in IMAGE_FORMATS:
        _check_planned_size(options, settings)
    await emulate(tab, viewport, chrome_major)
    await load_source(tab.page, options, deadline)
    if options.delay:
        await asyncio.sleep(options.delay)
    if options.format in IMAGE_FORMATS:
        output = await _image(options, tab, settings, deadline)
    elif options.format == "pdf":
        output = Output(await _pdf(options, tab), "pdf", imaging.CONTENT_TYPES["pdf"])
    elif options.format == "html":
        output = Output((await tab.page.content()).encode(), "html", imaging.CONTENT_TYPES["html"])
    else:
        markdown = html_to_markdown(await tab.page.content())
        output = Output(markdown.encode(), "markdown", imaging.CONTENT_TYPES["markdown"])
    if len(output.body) > settings.max_result_bytes:
        raise ResultingImageTooLarge(
            f"The result is {len(output.body)} bytes, over the limit of {settings.max_result_bytes} "
            "(setting SCREENSHOT_MAX_RESULT_BYTES).")
    return output


def _device_size(options: TakeOptions) -> tuple[int, int]:
    viewport = options.viewport
    return round(viewport.width * viewport.scale), round(viewport.height * viewport.scale)


def _check_planned_size(options: TakeOptions, settings: RenderSettings) -> None:
    """Refuse before loading anything when the output cannot be produced."""
    width, height = _device_size(options)
    out_w, out_h = imaging.fit_size(width, height, options.image_width, options.image_height)
    imaging.check_output_size(out_w, out_h, options.format, settings.max_image_pixels)
    imaging.check_output_size(width, height, "png", settings.max_image_pixels)  # the capture itself


async def _screenshot(tab: Tab, fmt: str, quality: int, *, fast: bool, transparent: bool) -> bytes:
    if transparent:
        await tab.cdp.send("Emulation.setDefaultBackgroundColorOverride",
                           {"color": {"r": 0, "g": 0, "b": 0, "a": 0}})
    # The next job's tab is prepared while this one runs and may have taken the foreground; a
    # background tab commits no frames in headless Chromium, so its capture would fail.
    await tab.cdp.send("Page.bringToFront")
    params: dict[str, Any] = {"format": fmt, "fromSurface": True, "captureBeyondViewport": False,
                              "optimizeForSpeed": fast}
    if fmt != "png":
        params["quality"] = quality
    for attempt in range(CAPTURE_ATTEMPTS):
        try:
            result = await tab.cdp.send("Page.captureScreenshot", params)
            return base64.b64decode(result["data"])
        except PlaywrightError as error:
            # Right after load the compositor may not have produced a frame yet (seen in about one
            # capture in ten); waiting for the next frame is far cheaper than always waiting for one.
            if "Unable to capture screenshot" not in error.message or attempt == CAPTURE_ATTEMPTS - 1:
                raise
            await _next_frame(tab)
    raise AssertionError("unreachable")


async def _next_frame(tab: Tab) -> None:
    await asyncio.wait_for(tab.page.evaluate("() => new Promise(r => requestAnimationFrame(() => r()))"), 2)


async def _image(options: TakeOptions, tab: Tab, settings: RenderSettings, deadline: float) -> Output:
    fmt = options.format
    width, height = _device_size(options)
    target = imaging.fit_size(width, height, options.image_width, options.image_height)
    palette = fmt == "png" and "image_quality" in options.model_fields_set
    native = CHROMIUM_FORMATS.get(fmt)
    if native is not None and target == (width, height) and not palette:
        body = await _screenshot(tab, native, options.image_quality, fast=False,
                                 transparent=options.omit_background)
        actual_w, actual_h = imaging.image_size(body)
        return Output(body, fmt, imaging.CONTENT_TYPES[fmt], actual_w, actual_h)
    # pyvips re-encodes anyway, so Chromium's PNG only needs to be fast, not small.
    raw = await _screenshot(tab, "png", 100, fast=True, transparent=options.omit_background)
    encode_options = imaging.EncodeOptions(fmt, options.image_quality, palette=palette)
    # libvips work is CPU-bound; keep the event loop (and the next tab's preparation) running.
    body, actual_w, actual_h = await asyncio.to_thread(_process, raw, target, encode_options, deadline)
    return Output(body, fmt, imaging.CONTENT_TYPES[fmt], actual_w, actual_h)


def _process(raw: bytes, target: tuple[int, int], encode_options: imaging.EncodeOptions,
             deadline: float) -> tuple[bytes, int, int]:
    image = imaging.run_pipeline(raw, [imaging.resize(*target)], encode_options, deadline)
    return imaging.encode(image, encode_options), image.width, image.height


async def _pdf(options: TakeOptions, tab: Tab) -> bytes:
    margin = {
        side: getattr(options, f"pdf_margin_{side}") or options.pdf_margin
        for side in ("top", "right", "bottom", "left")
    }
    scale = 1.0
    page_ranges = ""
    if options.pdf_fit_one_page:
        scale = await _fit_one_page_scale(options, tab, margin)
        page_ranges = "1"
    return await tab.page.pdf(
        format=options.pdf_paper_format,
        landscape=options.pdf_landscape,
        print_background=options.pdf_print_background,
        margin=margin,  # type: ignore[arg-type]  # a PdfMargins TypedDict
        scale=scale,
        page_ranges=page_ranges,
    )


def css_length_to_px(value: str) -> float:
    """`10mm`, `1in`, `2cm`, `12px` or a bare number (pixels) to CSS pixels."""
    units = {"px": 1.0, "in": 96.0, "cm": 96 / 2.54, "mm": 96 / 25.4}
    value = value.strip().lower()
    for unit, factor in units.items():
        if value.endswith(unit):
            return float(value[: -len(unit)]) * factor
    return float(value)


async def _fit_one_page_scale(options: TakeOptions, tab: Tab, margin: dict[str, str]) -> float:
    """Scale at which the whole document fits one sheet (Chromium allows 0.1 to 2)."""
    await tab.page.emulate_media(media="print")
    content = await tab.page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
    width_in, height_in = PAPER_INCHES[options.pdf_paper_format]
    if options.pdf_landscape:
        width_in, height_in = height_in, width_in
    px = css_length_to_px
    usable_w = width_in * CSS_PX_PER_INCH - px(margin["left"]) - px(margin["right"])
    usable_h = height_in * CSS_PX_PER_INCH - px(margin["top"]) - px(margin["bottom"])
    scale = min(usable_w / max(1, content[0]), usable_h / max(1, content[1]), 1.0)
    return max(0.1, scale)


def monotonic_deadline(unix_deadline: float) -> float:
    """Convert a wall-clock deadline from the queue into this process's monotonic clock."""
    return time.monotonic() + (unix_deadline - time.time())
