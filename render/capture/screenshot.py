"""The one place a page is captured as an image: CDP `Page.captureScreenshot` on the job's tab."""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any

from playwright.async_api import Error as PlaywrightError

from render.browser.page_changes import Effect
from render.browser.tabs import Tab, bring_to_front

log = logging.getLogger(__name__)
CAPTURE_ATTEMPTS = 4
# A capture beyond the viewport pushes the page's preferences to its renderer, with Blink's built-in font
# families, whose `monospace` is "Courier New" (fontconfig: Liberation Mono) where a new page has the
# system's monospace (fontconfig's "Monospace": DejaVu Sans Mono on Debian). The capture itself is drawn so,
# as Playwright's own full page is; without a restore every later document of the page was too (a kept
# page's next jobs; a saved Wikipedia article laid out 1 px taller). Setting `fixed` back restores what a new
# page resolves, for every generic family and script (tests/integration/test_fidelity.py).
RESTORED_FONT_FAMILIES = {"fontFamilies": {"fixed": "Monospace"}}


async def screenshot(tab: Tab, fmt: str, quality: int, *, fast: bool, transparent: bool,
                     clip: dict[str, float] | None = None, beyond_viewport: bool = False) -> bytes:
    """Encoded bytes (png, jpeg or webp) of the viewport, or of `clip` (CSS pixels, page coordinates;
    device pixels out). `fast`: Chromium's `optimizeForSpeed` (a PNG's zlib at its fastest level, no row
    filters: the same pixels, more bytes), for an image re-encoded anyway or when the operator chose it
    for results (SCREENSHOT_PNG_COMPRESSION)."""
    if transparent:
        await tab.send("Emulation.setDefaultBackgroundColorOverride",
                           {"color": {"r": 0, "g": 0, "b": 0, "a": 0}})
    # The next job's tab is prepared while this one runs and may have taken the foreground; a
    # background tab commits no frames in headless Chromium, so its capture would fail.
    await bring_to_front(tab)
    params: dict[str, Any] = {"format": fmt, "fromSurface": True, "captureBeyondViewport": beyond_viewport,
                              "optimizeForSpeed": fast}
    if fmt != "png":
        params["quality"] = quality
    if clip is not None:
        params["clip"] = clip
    data = await _captured(tab, params)
    if beyond_viewport:
        await restore_font_families(tab)
    return data


async def _captured(tab: Tab, params: dict[str, Any]) -> bytes:
    for attempt in range(CAPTURE_ATTEMPTS):
        try:
            result = await tab.send("Page.captureScreenshot", params)
            return base64.b64decode(result["data"])
        except PlaywrightError as error:
            # Right after load the compositor may not have produced a frame yet (seen in about one
            # capture in ten); waiting for the next frame is far cheaper than always waiting for one.
            if "Unable to capture screenshot" not in error.message or attempt == CAPTURE_ATTEMPTS - 1:
                raise
            await asyncio.wait_for(tab.run("() => new Promise(r => requestAnimationFrame(() => r()))"), 2)
    raise AssertionError("unreachable")


async def restore_font_families(tab: Tab) -> None:
    """Give the page back a new page's font families after a capture beyond the viewport
    (RESTORED_FONT_FAMILIES). Chromium takes `Page.setFontFamilies` once per DevTools session: each restore
    goes through a session of its own (about 7 ms). When that fails the capture stands; the page is then not
    kept for another job as it is."""
    try:
        session = await tab.context.new_cdp_session(tab.page)
        try:
            await session.send("Page.setFontFamilies", RESTORED_FONT_FAMILIES)
        finally:
            await session.detach()
    except PlaywrightError:
        log.warning("could not restore the page's font families after a full page; replacing it", exc_info=True)
        tab.changed(Effect.SETTINGS, "font families not restored")
