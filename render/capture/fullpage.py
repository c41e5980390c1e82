"""Full-page captures, of any height, exactly as a person scrolling the page in its viewport sees it.

1. With `full_page_scroll` (the default) the page is scrolled step by step first, so lazy content
   loads; the scroll stops at the height cap or after half the remaining time (an endless page). Each
   step waits `full_page_scroll_delay` ms when the request gives it; otherwise only as long as the page
   needs: two frames (its intersection observers run, its lazy images start), then until the images in
   view have loaded and the requests the step started have ended, at most 400 ms (the spec's default
   delay, which a quiet page would otherwise wait at every step).
2. The height is the document's, capped by `full_page_max_height` and the pixel budget
   (SCREENSHOT_MAX_IMAGE_PIXELS), so a growing page can never exhaust the worker's memory.
3. The viewport is never resized, so `vh` units, `position: fixed` and `position: sticky` keep their
   meaning: fixed elements appear where the first screen has them, sticky ones where the document puts
   them at the top of the page, each once.
   - `default`: one capture of the whole page beyond the viewport (CDP `captureBeyondViewport`, as
     Playwright's `full_page`): Chromium renders it exactly at any height, past its compositor's texture
     size (tests/integration/test_fidelity.py holds pages up to 40,000 px against a plain browser's).
   - `by_sections`: the page is scrolled one viewport at a time and each view captured (for pages that
     draw what scrolls into view); sticky elements are first pinned where they stand at the top, fixed
     ones hidden after the first view, and the views are stitched with pyvips, row-exact.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from render.browser.tabs import Tab
from render.capture.screenshot import screenshot
from render.contract.devices import Viewport
from render.contract.errors import CaptureTimeout
from render.contract.options import TakeOptions
from render.output import imaging
from render.page import motion
from render.page.navigation import InflightTracker

# Scrolls are instant whatever the page's scroll-behavior (Bootstrap makes the root's smooth): a smooth
# scroll would still be on its way when the view is read or captured.
_TO_TOP = "() => window.scrollTo({top: 0, left: 0, behavior: 'instant'})"
SCROLL_TIME_SHARE = 0.5  # of the remaining time, the most the lazy-load scroll may use

# The page's size as Playwright measures it for `full_page`: horizontal overflow included.
_SIZE = """() => {
  const root = document.documentElement, body = document.body || root;
  return [Math.max(body.scrollWidth, root.scrollWidth, body.offsetWidth, root.offsetWidth, body.clientWidth,
                   root.clientWidth),
          Math.max(body.scrollHeight, root.scrollHeight, body.offsetHeight, root.offsetHeight, body.clientHeight,
                   root.clientHeight)];
}"""
_HIDE_FIXED = """() => {
  for (const element of document.querySelectorAll('*')) {
    if (getComputedStyle(element).position === 'fixed') element.style.setProperty('visibility', 'hidden', 'important');
  }
}"""
# A sticky element moves with the scroll; pinned (relative, offset to where it stands now, at the top of
# the page) it scrolls away like the content around it and shows once, where the document puts it.
_PIN_STICKY = """() => {
  for (const element of document.querySelectorAll('*')) {
    const style = getComputedStyle(element);
    if (style.position !== 'sticky') continue;
    const stuck = element.getBoundingClientRect();
    const set = (name, value) => element.style.setProperty(name, value, 'important');
    if (style.zIndex === 'auto') set('isolation', 'isolate');  // sticky made a stacking context
    set('position', 'relative');
    for (const side of ['top', 'left']) set(side, '0px');
    for (const side of ['bottom', 'right']) set(side, 'auto');
    const inFlow = element.getBoundingClientRect();
    set('top', `${stuck.top - inFlow.top}px`);
    set('left', `${stuck.left - inFlow.left}px`);
  }
}"""
_TWO_FRAMES = "() => new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve)))"
_SCROLL_TO = "y => window.scrollTo({top: y, left: 0, behavior: 'instant'})"
# One step of the lazy-load scroll as the page needs it: scrolled, two frames for the page to see it (the
# intersection observers' callbacks and the native lazy images' loads start in them), then until every
# image now in view has loaded or failed, within `limit` ms of the scroll. The requests the step started
# (an observer's fetch of more content) are waited for by the worker, which sees them.
_STEP = """async ([y, limit]) => {
  const until = performance.now() + limit;
  window.scrollTo({top: y, left: 0, behavior: 'instant'});
  for (let i = 0; i < 2; i++) await new Promise((resolve) => requestAnimationFrame(resolve));
  const loading = () => Array.from(document.images).filter((image) => {
    if (image.complete || !image.getClientRects().length) return false;
    const box = image.getBoundingClientRect();
    return box.bottom >= 0 && box.top <= innerHeight && box.right >= 0 && box.left <= innerWidth;
  });
  for (let waiting = loading(); waiting.length && performance.now() < until; waiting = loading()) {
    await Promise.race([
      Promise.all(waiting.map((image) => new Promise((resolve) => {
        image.addEventListener('load', resolve, { once: true });
        image.addEventListener('error', resolve, { once: true });
      }))),
      new Promise((resolve) => setTimeout(resolve, until - performance.now())),
    ]);
  }
}"""
STEP_LIMIT_SECONDS = 0.4  # the longest a step waits for the page without full_page_scroll_delay (the spec's 400)


@dataclass(frozen=True)
class Section:
    """One capture (PNG, unless `capture_sections` was given a final format) and which of its device-pixel rows
    belong to the final image."""

    image: bytes
    skip_rows: int
    rows: int


async def page_size(tab: Tab, viewport: Viewport) -> tuple[int, int]:
    """The document's width (at least the viewport's; a phone's page without a viewport meta tag is laid
    out 980 wide, and is that wide, as in Playwright) and height, in CSS pixels."""
    width, height = await tab.run(_SIZE)
    return max(int(width), viewport.width), int(height)


def height_cap(options: TakeOptions, width: int, scale: float, max_pixels: int) -> int:
    """The tallest capture of this width allowed, in CSS pixels."""
    budget = int(max_pixels // max(1, round(width * scale) * scale))
    return max(1, min(options.full_page_max_height or budget, budget))


async def scroll_for_lazy_content(tab: Tab, options: TakeOptions, viewport: Viewport, cap: int,
                                  deadline: float) -> None:
    """Scroll down in steps so lazy-loaded content appears, then back to the top. With
    `full_page_scroll_delay` each step waits that long; without it, each waits as long as the page needs
    (`_step`), at most STEP_LIMIT_SECONDS."""
    step = options.full_page_scroll_by or viewport.height
    stop_at = time.monotonic() + max(0.0, deadline - time.monotonic()) * SCROLL_TIME_SHARE
    fixed = options.full_page_scroll_delay
    requests = None if fixed is not None else InflightTracker(tab.page)
    try:
        position = 0
        while position < min((await page_size(tab, viewport))[1], cap) and time.monotonic() < stop_at:
            if requests is None:
                await tab.run(_SCROLL_TO, position)
                await asyncio.sleep((fixed or 0) / 1000)
            else:
                until = min(time.monotonic() + STEP_LIMIT_SECONDS, stop_at)
                await tab.run(_STEP, [position, round(STEP_LIMIT_SECONDS * 1000)])
                await requests.wait_none(until)
            position += step
    finally:
        if requests is not None:
            requests.detach()
    await tab.run(_TO_TOP)
    await tab.run(_TWO_FRAMES)


async def _capture(tab: Tab, clip: dict[str, float] | None, beyond: bool) -> bytes:
    return await screenshot(tab, "png", 100, fast=True, transparent=False, clip=clip, beyond_viewport=beyond)


async def capture_sections(tab: Tab, options: TakeOptions, viewport: Viewport, max_pixels: int,
                           deadline: float, final_format: str | None = None, fast_final: bool = True
                           ) -> tuple[list[Section], int, int]:
    """The page as sections, top to bottom, and the whole's width and height in device pixels. With
    `final_format` (a format Chromium writes, when nothing is done to the image afterwards), a page taken
    in one capture comes in that format, encoded once (`fast_final`: for speed rather than size)."""
    scale = viewport.scale
    if options.full_page_scroll is not False:
        width = (await page_size(tab, viewport))[0]
        await scroll_for_lazy_content(tab, options, viewport, height_cap(options, width, scale, max_pixels),
                                      deadline)
        if options.reduce_motion:  # what the scroll set moving (reveal-on-scroll effects)
            await motion.reduce(tab.page)
    width, height = await page_size(tab, viewport)
    height = min(height, height_cap(options, width, scale, max_pixels))
    device_width = round(width * scale)
    clip: dict[str, float] = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
    if options.full_page_algorithm == "by_sections":
        sections = await _by_sections(tab, options, viewport, width, height, deadline)
        return sections, device_width, sum(piece.rows for piece in sections)
    if final_format is not None:
        whole = await screenshot(tab, final_format, options.image_quality, fast=fast_final, transparent=False,
                                 clip=clip, beyond_viewport=True)
    else:
        whole = await _capture(tab, clip, beyond=True)
    return [Section(whole, 0, round(height * scale))], device_width, round(height * scale)


async def _by_sections(tab: Tab, options: TakeOptions, viewport: Viewport, width: int, height: int,
                       deadline: float) -> list[Section]:
    scale = viewport.scale
    section = viewport.height
    await tab.run(_TO_TOP)
    await tab.run(_PIN_STICKY)
    sections: list[Section] = []
    top = 0
    while top < height:
        if time.monotonic() > deadline:
            raise CaptureTimeout(f"The full-page capture did not finish within timeout ({options.timeout} s).")
        actual = float(await tab.run(
            "y => { window.scrollTo({top: y, left: 0, behavior: 'instant'}); return window.scrollY; }", top))
        await tab.run(_TWO_FRAMES)
        if options.reduce_motion:
            await motion.reduce(tab.page)
        # The view; with horizontal overflow, the whole width of the rows in view.
        wide = width > viewport.width
        clip = {"x": 0, "y": actual, "width": width, "height": section, "scale": 1} if wide else None
        png = await _capture(tab, clip, beyond=wide)
        rows = min(section, height - top)
        # At the bottom the browser cannot scroll as far as asked: skip what was already taken. A page
        # that got shorter meanwhile (an animation ended, content went away) gives what its view still has.
        skip = round((top - actual) * scale)
        taken = min(round(rows * scale), imaging.image_size(png)[1] - skip)
        if taken <= 0:
            break
        sections.append(Section(png, skip, taken))
        if top == 0:
            await tab.run(_HIDE_FIXED)  # fixed elements: once, where the first screen has them
        top += section
    await tab.run(_TO_TOP)
    return sections
