"""Per-request device emulation over CDP, applied to a prepared tab (DESIGN §6).

Creating a browser context per device shape costs a quarter of a second; the same emulation
applied to the warm tab costs three CDP calls. Playwright is not told: the service captures through
CDP itself and never calls Playwright's viewport APIs on these tabs.
"""

from __future__ import annotations

from render.browser import Tab
from render.devices import Viewport

DEFAULT_VIEWPORT = Viewport()
MAX_TOUCH_POINTS = 5


async def emulate(tab: Tab, viewport: Viewport, chrome_major: str) -> None:
    """Make the tab's page see this viewport, scale, mobile mode, touch and user agent."""
    if viewport == DEFAULT_VIEWPORT:
        return  # prepared tabs start out like this
    landscape = viewport.width > viewport.height
    await tab.cdp.send("Emulation.setDeviceMetricsOverride", {
        "width": viewport.width,
        "height": viewport.height,
        "deviceScaleFactor": viewport.scale,
        "mobile": viewport.mobile,
        "screenWidth": viewport.width,
        "screenHeight": viewport.height,
        "screenOrientation": {"type": "landscapePrimary", "angle": 90} if landscape
        else {"type": "portraitPrimary", "angle": 0},
    })
    if viewport.touch:
        await tab.cdp.send("Emulation.setTouchEmulationEnabled",
                           {"enabled": True, "maxTouchPoints": MAX_TOUCH_POINTS})
    if viewport.user_agent:
        await tab.cdp.send("Emulation.setUserAgentOverride",
                           {"userAgent": viewport.user_agent.format(chrome=chrome_major)})
