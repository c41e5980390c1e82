"""One capture in this process with its own short-lived browser (`screenshot-service take`)."""

from __future__ import annotations

import time

from render.browser import BrowserSupervisor
from render.capture import Environment, Output, capture
from render.egress import EgressProxy
from render.network_policy import NetworkPolicy
from render.options import TakeOptions
from render.settings import RenderSettings


async def take_once(options: TakeOptions, settings: RenderSettings) -> Output:
    """Start Chromium, capture, stop Chromium: the same pipeline the workers run."""
    policy = NetworkPolicy.from_settings(settings)
    egress = EgressProxy(policy)
    await egress.start()
    supervisor = BrowserSupervisor(settings, egress.url)
    try:
        tab = await supervisor.acquire()
        try:
            env = Environment(settings, policy, supervisor.chrome_version, egress)
            return await capture(options, tab, env, time.monotonic() + options.timeout)
        finally:
            await tab.close()
    finally:
        await supervisor.close()
        await egress.close()
