"""The reference the fidelity suite compares with: a plain Playwright script on the same Chromium, written
as a user would write it (Playwright's own launch, a context of the wanted size, `page.screenshot`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pyvips
from playwright.sync_api import Browser, Page, Playwright, sync_playwright

from render.settings import RenderSettings

T = TypeVar("T")


# A page that hides itself while it loads (an A/B test's anti-flicker snippet) shows itself again.
SHOWN = """() => [document.documentElement, document.body].every((element) => !element || (
  getComputedStyle(element).opacity === '1' && getComputedStyle(element).visibility !== 'hidden'))"""


Box = tuple[float, float, float, float]  # x, y, width, height
# The page boxes of what moves for ever: elements whose CSS animations never end (a spinner's turn, a pulsing
# dot) and SVG pictures with an SMIL animation repeated indefinitely.
MOVING = """() => [
  ...document.getAnimations()
    .filter((animation) => animation.effect && animation.effect.target
      && animation.effect.getComputedTiming().endTime === Infinity)
    .map((animation) => animation.effect.target),
  ...[...document.querySelectorAll('svg *')]
    .filter((element) => ['animate', 'animateTransform', 'animateMotion'].includes(element.localName)
      && element.getAttribute('repeatCount') === 'indefinite')
    .map((element) => element.closest('svg')),
].map((element) => element.getBoundingClientRect())
  .filter((box) => box.width && box.height)
  .map((box) => [box.x + scrollX, box.y + scrollY, box.width, box.height])"""


class PlainBrowser:
    """Playwright's sync API keeps an event loop running on its thread: it gets a thread of its own, so
    the tests' own `asyncio.run` still works."""

    def __init__(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plain-browser")
        self._playwright: Playwright = self._run(lambda: sync_playwright().start())
        self.browser: Browser = self._run(lambda: self._playwright.chromium.launch(
            executable_path=RenderSettings().chromium_path))

    def _run(self, call: Callable[[], T]) -> T:
        return self._thread.submit(call).result()

    def capture(self, url: str, **options: Any) -> pyvips.Image:
        """See `_capture`."""
        return self._run(lambda: self._capture(url, **options))

    def capture_with_motion(self, url: str, **options: Any) -> tuple[pyvips.Image, list[Box]]:
        """`capture`, and the boxes (page coordinates, CSS px) of what was moving as it was taken: elements with
        animations running for ever (spinners), drawn at whatever moment the shutter falls."""
        moving: list[list[Box]] = []
        image = self._run(lambda: self._capture(url, after=lambda page: moving.append(page.evaluate(MOVING)),
                                                **options))
        return image, moving[0]

    def evaluate(self, url: str, script: str, **context: Any) -> Any:
        """What `script` returns in the page at `url`."""
        return self._run(lambda: self._evaluate(url, script, **context))

    def aria_snapshot(self, url: str) -> str:
        """Playwright's ARIA snapshot of the page's body at `url`, as a script asks for it."""
        return self._run(lambda: self._aria_snapshot(url))

    def close(self) -> None:
        self._run(self.browser.close)
        self._run(self._playwright.stop)
        self._thread.shutdown()

    def _capture(self, url: str, *, width: int = 1280, height: int = 1024, scale: float = 1,
                full_page: bool = False, scroll_delay_ms: int | None = None, shown: bool = False,
                after: Callable[[Page], object] | None = None, **context: Any) -> pyvips.Image:
        """The page at `url` as a plain script captures it; with `shown`, once the page no longer hides itself
        (its root and body neither transparent nor hidden, as a person waits for it: SHOWN); with
        `scroll_delay_ms`, scrolled to the bottom one viewport at a time first (lazy content), then back to the
        top."""
        page = self.browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=scale,
                                     **context)
        try:
            page.goto(url)
            if shown:
                page.wait_for_function(SHOWN, timeout=15_000)
            if scroll_delay_ms is not None:
                position = 0
                while position < page.evaluate("document.documentElement.scrollHeight"):
                    page.evaluate(f"window.scrollTo(0, {position})")
                    time.sleep(scroll_delay_ms / 1000)
                    position += height
                page.evaluate("window.scrollTo(0, 0)")
            image = pyvips.Image.new_from_buffer(page.screenshot(full_page=full_page), "")
            if after is not None:
                after(page)
            return image
        finally:
            page.close()

    def _aria_snapshot(self, url: str) -> str:
        page = self.browser.new_page()
        try:
            page.goto(url)
            return page.locator("body").aria_snapshot()
        finally:
            page.close()

    def _evaluate(self, url: str, script: str, **context: Any) -> Any:
        page = self.browser.new_page(**context)
        try:
            page.goto(url)
            return page.evaluate(script)
        finally:
            page.close()


def differing_region(a: pyvips.Image, b: pyvips.Image) -> str:
    """Where two images of one size differ: the box around every differing pixel, and what `a` has at its middle
    (for a failure's message: a banner's leftover, say, is told by where it is and its colour)."""
    a, b = (image.flatten() if image.hasalpha() else image for image in (a, b))
    columns, rows = (a != b).bandor().project()  # find_trim would smooth a few stray pixels away
    xs = [x for x, total in enumerate(columns.tolist()[0]) if total]
    ys = [y for y, [total] in enumerate(rows.tolist()) if total]
    if not xs:
        return "no pixel differs"
    left, top, width, height = xs[0], ys[0], xs[-1] - xs[0] + 1, ys[-1] - ys[0] + 1
    middle = [round(value) for value in a.getpoint(left + width // 2, top + height // 2)]
    return f"pixels differ in {width}x{height} at ({left}, {top}); the first image has {middle} at its middle"


def differing_pixels(a: pyvips.Image, b: pyvips.Image, tolerance: int = 0) -> int:
    """How many pixels differ (any band) by more than `tolerance` levels; sizes must match."""
    assert (a.width, a.height) == (b.width, b.height), f"{a.width}x{a.height} != {b.width}x{b.height}"
    a, b = (image.flatten() if image.hasalpha() else image for image in (a, b))
    differs = (a != b) if tolerance == 0 else ((a.cast("short") - b.cast("short")).abs() > tolerance)
    return int(differs.bandor().avg() / 255 * a.width * a.height + 0.5)
