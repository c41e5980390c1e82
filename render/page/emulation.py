"""Per-request emulation over CDP, applied to a prepared tab (bench/README.md: why): device, media, place and time.

Creating a browser context per device shape costs a quarter of a second; the same emulation
applied to the warm tab costs three CDP calls. Playwright is not told: the service captures through
CDP itself and never calls Playwright's viewport APIs on these tabs.
"""

from __future__ import annotations

from render.browser.client_hints import HIDE_USER_AGENT_DATA, user_agent_override
from render.browser.tabs import Tab
from render.contract.devices import Viewport
from render.contract.options import TakeOptions

DEFAULT_VIEWPORT = Viewport()
MAX_TOUCH_POINTS = 5


async def emulate(tab: Tab, viewport: Viewport, chrome_version: str) -> None:
    """Make the tab's page see this viewport, scale, mobile mode, touch and user agent (with the client
    hints and navigator.platform that agent's browser has: render.browser.client_hints)."""
    if viewport == DEFAULT_VIEWPORT:
        return  # prepared tabs start out like this
    await tab.send("Emulation.setDeviceMetricsOverride", viewport.device_metrics())
    if viewport.touch:
        await tab.send("Emulation.setTouchEmulationEnabled",
                           {"enabled": True, "maxTouchPoints": MAX_TOUCH_POINTS})
    if viewport.user_agent:
        agent = viewport.user_agent.format(chrome=chrome_version.split(".")[0])
        override, without_client_hints = user_agent_override(agent, chrome_version)
        await tab.send("Emulation.setUserAgentOverride", override)
        if without_client_hints:
            await tab.add_init_script(HIDE_USER_AGENT_DATA)


async def emulate_page(tab: Tab, options: TakeOptions) -> None:
    """Colour scheme, reduced motion, media type, time zone, geolocation and CSP bypass, before load."""
    features = []
    if options.dark_mode is not None:
        features.append({"name": "prefers-color-scheme", "value": "dark" if options.dark_mode else "light"})
    if options.reduced_motion or options.reduce_motion:
        features.append({"name": "prefers-reduced-motion", "value": "reduce"})
    # Without an explicit media_type Chromium's own defaults stay: screen for images, print for PDF.
    media = options.media_type if "media_type" in options.model_fields_set else ""
    if features or media:
        await tab.send("Emulation.setEmulatedMedia", {"media": media, "features": features})
    if options.time_zone is not None:
        await tab.send("Emulation.setTimezoneOverride", {"timezoneId": options.time_zone})
    if options.geolocation_latitude is not None:
        await tab.grant_permissions(["geolocation"])
        await tab.send("Emulation.setGeolocationOverride", {
            "latitude": options.geolocation_latitude, "longitude": options.geolocation_longitude,
            "accuracy": options.geolocation_accuracy})
    if options.bypass_csp:
        await tab.send("Page.setBypassCSP", {"enabled": True})
