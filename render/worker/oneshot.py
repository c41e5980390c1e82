"""One capture in this process with its own short-lived browser (`screenshot-service take`)."""

from __future__ import annotations

import time

from render.browser.pool import TabPool
from render.capture import archiving
from render.capture.pipeline import Environment, Output, capture
from render.contract.options import TakeOptions
from render.net.egress import EgressProxy
from render.net.policy import NetworkPolicy
from render.queue.archive_key import archive_key
from render.settings import RenderSettings


async def take_once(options: TakeOptions, settings: RenderSettings) -> Output:
    """Start Chromium, capture, stop Chromium: the same pipeline the workers run."""
    policy = NetworkPolicy.from_settings(settings)
    egress = EgressProxy(policy)
    await egress.start()
    tabs = TabPool(settings, egress)
    try:
        tab = await tabs.acquire()
        try:
            env = Environment(settings, policy, tabs.chrome_version, egress)
            output = await capture(options, tab, env, time.monotonic() + options.timeout)
        finally:
            await tab.close()
        if output.archive is not None:  # signed with SCREENSHOT_ARCHIVE_KEY_FILE's key: no Redis to keep one in
            archiving.pack_into(output, archive_key(settings.archive_key_file, None), settings)
        return output
    finally:
        await tabs.close()
        await egress.close()
