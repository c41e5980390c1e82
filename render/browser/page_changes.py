"""What each operation of a job does to its page, so that the page records every change by construction.

A job changes its page only through the tab's own operations (`Tab.send` for DevTools commands, and `Tab`'s
methods for what Playwright does: init scripts, bindings, routes, media, permissions); each records its `Effect`
from the tables here before it acts, and the wipe decides from that record whether the page can serve the
organisation's next job (render.browser.wiping). A DevTools command missing from CDP_EFFECTS is refused, so a new
page feature cannot change the page unseen; tests/unit/test_page_changes.py holds that no code reaches the page
another way.
"""

from __future__ import annotations

from enum import Enum


class Effect(Enum):
    """What an operation leaves on a page after its job."""

    NONE = "nothing: it reads, or what it changes is undone within the job"
    SETTINGS = "the page's own settings: the page is replaced by a new one in the same context"
    PERMISSIONS = "a permission granted to the context: the wipe resets the context's permissions"
    WIPED = "state the wipe clears anyway (cookies, storage, cache, history)"


# Every DevTools command the code sends on a job's tab, by what it leaves.
CDP_EFFECTS: dict[str, Effect] = {
    # Reads, and the tab's own request handling.
    "Runtime.evaluate": Effect.NONE,
    "Runtime.callFunctionOn": Effect.NONE,
    "DOM.enable": Effect.NONE,  # disabled again by the same caller
    "DOM.disable": Effect.NONE,
    "DOM.getDocument": Effect.NONE,
    "DOM.querySelectorAll": Effect.NONE,
    "DOM.resolveNode": Effect.NONE,
    "CSS.enable": Effect.NONE,
    "CSS.disable": Effect.NONE,
    "CSS.getPlatformFontsForNode": Effect.NONE,
    "Page.getFrameTree": Effect.NONE,
    "Page.bringToFront": Effect.NONE,
    "Page.captureScreenshot": Effect.NONE,  # beyond the viewport, the font families are restored after it
    "Page.setFontFamilies": Effect.NONE,  # only the restoring, on a session of its own
    "Page.startScreencast": Effect.NONE,  # stopped by the same recording
    "Page.stopScreencast": Effect.NONE,
    "Page.screencastFrameAck": Effect.NONE,
    "Fetch.enable": Effect.NONE,  # the tab's own pausing (Tab.pause_all, Tab.pause_only_credentials)
    "Fetch.continueRequest": Effect.NONE,
    "Fetch.failRequest": Effect.NONE,
    "HeapProfiler.collectGarbage": Effect.NONE,
    "SystemInfo.getProcessInfo": Effect.NONE,
    # The page's own settings.
    "Emulation.setDeviceMetricsOverride": Effect.SETTINGS,
    "Emulation.setTouchEmulationEnabled": Effect.SETTINGS,
    "Emulation.setUserAgentOverride": Effect.SETTINGS,
    "Emulation.setEmulatedMedia": Effect.SETTINGS,
    "Emulation.setTimezoneOverride": Effect.SETTINGS,
    "Emulation.setGeolocationOverride": Effect.SETTINGS,
    "Emulation.setDefaultBackgroundColorOverride": Effect.SETTINGS,
    "Page.setBypassCSP": Effect.SETTINGS,
    # What the wipe itself clears.
    "Network.clearBrowserCache": Effect.WIPED,
    "Network.clearBrowserCookies": Effect.WIPED,
    "Storage.clearDataForOrigin": Effect.WIPED,
    "Page.resetNavigationHistory": Effect.WIPED,
}

# What the tab's Playwright operations leave (the names of Tab's methods that do them).
PLAYWRIGHT_EFFECTS: dict[str, Effect] = {
    "add_init_script": Effect.SETTINGS,  # runs in every later document of the page
    "expose_binding": Effect.SETTINGS,
    "route_web_socket": Effect.SETTINGS,
    "emulate_media": Effect.SETTINGS,
    "grant_permissions": Effect.PERMISSIONS,
    "add_cookies": Effect.WIPED,
}


class UnknownCommand(LookupError):
    """A DevTools command whose effect on the page nobody has said (CDP_EFFECTS)."""
