"""One capture in this process with its own short-lived browser (`screenshot-service take`)."""

from __future__ import annotations

import time

from render.browser import BrowserSupervisor
from render.capture import Output, capture
from render.options import TakeOptions
from render.settings import RenderSettings


async def take_once(options: TakeOptions, settings: RenderSettings) -> Output:
    """Start Chromium, capture, stop Chromium: the same pipeline the workers run."""
    supervisor = BrowserSupervisor(settings)
    try:
        tab = await supervisor.acquire()
        try:
            return await capture(options, tab, settings, time.monotonic() + options.timeout,
                                 supervisor.chrome_major)
        finally:
            await tab.close()
    finally:
        await supervisor.close()
