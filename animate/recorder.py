"""Recording a page: frames captured from the job's tab and piped to ffmpeg.

`default` records in real time: frame i is the newest capture at time i / fps (a capture slower than a
frame repeats the previous one, so the video always lasts `duration`). `scroll` steps through frames:
before frame i the page is scrolled to where the timeline says it is at i / fps, so the motion follows
the easing curve exactly whatever each capture costs; its frames are the ones Chromium pushes as it draws
them, each showing the offset scrolled to (animate/screencast.py), and captured only when none comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time

from animate.encoder import Encoder, VideoSpec
from animate.options import AnimateOptions
from animate.screencast import Screencast
from animate.timeline import Timeline, plan
from render.browser.tabs import Tab
from render.capture.pipeline import Environment, Output, open_page
from render.capture.screenshot import screenshot
from render.contract.errors import CaptureTimeout, ErrorDetail, SelectorNotFound

FRAME_QUALITY = 90
_EVEN_FORMATS = {"mp4", "webm", "avi", "mov"}

_FIND_LINK = """(hints) => {
  const links = [...document.querySelectorAll('a[href]')].filter(a => /^https?:/.test(a.href));
  const wanted = hints.map(h => h.toLowerCase());
  const match = links.find(a => wanted.some(h => (a.textContent || '').toLowerCase().includes(h)
                                              || a.href.toLowerCase().includes(h)));
  return match ? match.href : null;
}"""
# Scrolls, and says where the page came to (Chromium rounds the offset; the end of the page clamps it).
_SCROLL_TO = "(y) => { window.scrollTo({top: y, left: 0, behavior: 'instant'}); return window.scrollY; }"
_METRICS = """(selector) => {
  const root = document.scrollingElement || document.documentElement;
  const target = selector ? document.querySelector(selector) : null;
  return {maxScroll: Math.max(0, root.scrollHeight - innerHeight),
          target: target ? target.getBoundingClientRect().top + scrollY : null, found: !selector || !!target};
}"""


def video_spec(options: AnimateOptions, frame_width: int, frame_height: int, scale: float) -> VideoSpec:
    """Output size and crop for frames of `frame_width` x `frame_height` device pixels."""
    crop = None
    view_width, view_height = frame_width / scale, frame_height / scale
    ratio = options.ratio
    if ratio is not None:
        if frame_width / frame_height > ratio:
            kept_width, kept_height = round(frame_height * ratio), frame_height
        else:
            kept_width, kept_height = frame_width, round(frame_width / ratio)
        crop = ((frame_width - kept_width) // 2, (frame_height - kept_height) // 2, kept_width, kept_height)
        width, height = kept_width / scale, kept_height / scale
    elif options.width is not None and options.height is not None:
        width, height = options.width, options.height
    elif options.width is not None:
        width, height = options.width, options.width * view_height / view_width
    elif options.height is not None:
        width, height = options.height * view_width / view_height, options.height
    else:
        width, height = view_width, view_height
    width, height = max(2, round(width)), max(2, round(height))
    if options.format in _EVEN_FORMATS:  # 4:2:0 chroma needs even sides
        width, height = width - width % 2, height - height % 2
    return VideoSpec(options.frame_rate, options.format, width, height, crop, alpha=options.omit_background)


async def record(options: AnimateOptions, tab: Tab, env: Environment, deadline: float) -> Output:
    """The video `options` ask for; `deadline` is a `time.monotonic()` instant."""
    await open_page(options, tab, env, deadline)
    viewport = options.viewport
    first = await _frame(tab, options)
    frame_width, frame_height = _size_of(first)
    spec = video_spec(options, frame_width, frame_height, viewport.scale)
    encoder = Encoder(spec)
    try:
        if options.scenario == "scroll":
            await _scroll(options, tab, encoder, deadline, (frame_width, frame_height))
        else:
            await _real_time(options, tab, encoder, first, deadline)
        body = await asyncio.to_thread(encoder.finish)
    finally:
        encoder.close()
    return Output(body, options.format, options.content_type, spec.width, spec.height)


async def _frame(tab: Tab, options: AnimateOptions) -> bytes:
    fmt = "png" if options.omit_background else "jpeg"
    return await screenshot(tab, fmt, FRAME_QUALITY, fast=True, transparent=options.omit_background)


def _size_of(frame: bytes) -> tuple[int, int]:
    import pyvips

    image = pyvips.Image.new_from_buffer(frame, "")
    return image.width, image.height


def _check_time(deadline: float, options: AnimateOptions) -> None:
    if time.monotonic() > deadline:
        raise CaptureTimeout(f"The recording did not finish within timeout ({options.timeout} s); lower duration "
                             "or raise timeout.")


async def _real_time(options: AnimateOptions, tab: Tab, encoder: Encoder, first: bytes, deadline: float) -> None:
    fps = options.frame_rate
    total = options.duration * fps
    started = time.monotonic()
    frame, written = first, 0
    while written < total:
        _check_time(deadline, options)
        due = min(total, int((time.monotonic() - started) * fps) + 1)
        while written < due:  # a capture slower than a frame: the newest frame fills its slots
            await asyncio.to_thread(encoder.write, frame)
            written += 1
        next_at = started + written / fps
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        frame = await _frame(tab, options)


async def _timeline(options: AnimateOptions, tab: Tab) -> Timeline:
    metrics = await tab.page.evaluate(_METRICS, options.scroll_till_selector)
    if not metrics["found"]:
        raise SelectorNotFound(f"scroll_till_selector matched nothing: {options.scroll_till_selector!r}.",
                               [ErrorDetail("scroll_till_selector", "matched nothing")])
    target = metrics["target"]
    if target is not None:
        target -= options.scroll_till_selector_adjust_top or 0
    return plan(options, metrics["maxScroll"], target)


async def _scroll(options: AnimateOptions, tab: Tab, encoder: Encoder, deadline: float,
                  frame_size: tuple[int, int]) -> None:
    timeline = await _timeline(options, tab)
    duration_ms = options.duration * 1000
    navigate_at = options.navigate_after_ms if options.scroll_try_navigate else None
    fps = options.frame_rate
    total = duration_ms * fps // 1000
    if options.scroll_complete and navigate_at is None and 0 < timeline.completes < duration_ms:
        # Stop when the scroll completes, the last frame showing where it came to rest.
        total = min(total, math.floor(timeline.completes * fps / 1000) + 1)
    offset = 0.0  # when the current page's timeline started (ms): it restarts after a navigation
    writing: asyncio.Future[None] | None = None  # the previous frame, on its way to ffmpeg meanwhile
    shown: float | None = None  # the scroll offset of the previous frame
    # Transparent frames (omit_background) are PNG captures with the page's background taken out: captured.
    cast = None if options.omit_background else Screencast(tab, "jpeg", FRAME_QUALITY, frame_size)
    pushed = cast  # None once a frame was not pushed in time: captured from then on
    try:
        async with cast or contextlib.nullcontext():
            for index in range(total):
                _check_time(deadline, options)
                t = index * 1000 / fps
                if navigate_at is not None and t >= navigate_at:
                    navigate_at = None
                    if await _navigate(options, tab, deadline):
                        timeline, offset, shown = await _timeline(options, tab), t, None
                        if pushed is not None:
                            await pushed.restart()
                since = pushed.count if pushed is not None else 0
                at = float(await tab.run(_SCROLL_TO, timeline.position(t - offset)))
                frame = await pushed.frame_showing(at, since, moved=at != shown) if pushed is not None else None
                if frame is None:
                    # Captured instead, for the rest of the recording: a page whose frames were not pushed in
                    # time pays FRAME_WAIT_SECONDS once.
                    pushed = None
                    frame = await _frame(tab, options)
                shown = at
                if writing is not None:
                    await writing
                writing = asyncio.ensure_future(asyncio.to_thread(encoder.write, frame))
            if writing is not None:
                await writing
    finally:  # failed meanwhile: the frame on its way is let finish before the encoder is closed
        if writing is not None and not writing.done():
            await asyncio.gather(writing, return_exceptions=True)


async def _navigate(options: AnimateOptions, tab: Tab, deadline: float) -> bool:
    """Follow scroll_navigate_to_url or the first link matching the hints; False when there is none."""
    url = options.scroll_navigate_to_url or await tab.page.evaluate(_FIND_LINK, options.scroll_navigate_link_hints)
    if not url:
        return False
    left_ms = max(1000.0, (deadline - time.monotonic()) * 1000)
    await tab.page.goto(url, wait_until="load", timeout=min(left_ms, options.navigation_timeout * 1000))
    return True
