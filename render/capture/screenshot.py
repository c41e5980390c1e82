"""The one place a page is captured as an image: CDP `Page.captureScreenshot` on the job's tab."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from playwright.async_api import Error as PlaywrightError

from render.browser.tabs import Tab, bring_to_front

CAPTURE_ATTEMPTS = 4


async def screenshot(tab: Tab, fmt: str, quality: int, *, fast: bool, transparent: bool,
                     clip: dict[str, float] | None = None, beyond_viewport: bool = False) -> bytes:
    """Encoded bytes (png, jpeg or webp) of the viewport, or of `clip` (CSS pixels, page coordinates;
    device pixels out). `fast`: Chromium's `optimizeForSpeed` (a PNG's zlib at its fastest level, no row
    filters: the same pixels, more bytes), for an image re-encoded anyway or when the operator chose it
    for results (SCREENSHOT_PNG_COMPRESSION)."""
    if transparent:
        tab.dirty = True
        await tab.cdp.send("Emulation.setDefaultBackgroundColorOverride",
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
