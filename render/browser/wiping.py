"""Wiping a job's page so the same organisation's next job can reuse it (settings.reuse_contexts).

The page is unloaded (about:blank), its history reset and the storage, cache, cookies and permissions of
every origin it reached wiped. From the end of its job until the next job starts loading, every request the page
makes is refused (`Tab.leave`): nothing the document asks for as it is left reaches the next job. Creating a page costs
Chromium about as much CPU as loading and capturing a simple one; navigating the kept page costs nothing extra.
A job that changed the page's own settings (device emulation, routes, init scripts, listeners: `Tab.dirty`, from
what the tab's operations recorded) gets
its page replaced by a new one in the same context instead (the one left stays open, refusing, until the next
wipe closes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable

from playwright.async_api import BrowserContext, Frame

from render.browser.page_changes import Effect
from render.browser.tabs import CLOSE_TIMEOUT_SECONDS, Tab
from render.net.traffic import web_origin

log = logging.getLogger(__name__)
# sessionStorage and window.name belong to the tab, not to an origin's storage: forgotten in every frame.
FORGET_TAB_STATE = "() => { try { sessionStorage.clear(); } finally { if (window === top) window.name = ''; } }"
# The main frame forgets, then unloads its document (its scripts stop, its requests are cancelled).
FORGET_AND_UNLOAD = ("() => { try { sessionStorage.clear(); } catch { /* an opaque origin has none */ } "
                     "window.name = ''; location.replace('about:blank'); }")
# The tab's name again, in the about:blank it was unloaded to: the unloaded document's pagehide or unload handlers may
# have named it after the forgetting above (the storage they wrote goes with the clearing of their origins).
FORGET_NAME = "window.name = ''"
# A kept context whose jobs reached more origins than this is closed rather than wiped origin by origin.
MAX_HELD_ORIGINS = 200


async def wiped(tab: Tab, origins: Iterable[str], new_page: Callable[[BrowserContext], Awaitable[Tab]]
                ) -> Tab | None:
    """Unload the job's page (or replace it through `new_page`, when the job changed its settings), wipe what
    the job left in the context (cookies, storage and cache of every origin it reached, permissions): the
    page to keep. None when that fails or costs more than a new context (the caller then closes it)."""
    held = tab.held_origins | set(origins) | {origin for frame in tab.page.frames
                                              if (origin := web_origin(frame.url))}
    if len(held) > MAX_HELD_ORIGINS:
        return None  # a new context holds nothing, and costs less than wiping them all every job
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT_SECONDS):
            # Before the unload: what the document asks for as it is left (a `keepalive` beacon from its pagehide
            # handler, which Chromium may pause after the page already shows about:blank) is refused, up to the
            # next job's loading; the context's listener on the egress proxy may already serve that job.
            # Meanwhile the popups the job's page opened (and a page left by the job before) are closed.
            await asyncio.gather(tab.leave(), *(other.close() for other in tab.context.pages if other != tab.page))
            written = tab.page.url == "about:blank"
            if written:
                # Nothing was loaded from a URL (a refused job, an html or markdown source): unloading
                # this document swaps its renderer host, after which the page's CDP session is lost.
                tab.changed(Effect.SETTINGS, "its document was written, not loaded")
            # What the document cannot add to as it is left (its requests are refused), cleared while it unloads:
            # the HTTP cache, and the permissions a job granted (only the service grants any). Its cookies and
            # storage after: its pagehide or unload handlers may still write them.
            await asyncio.gather(tab.send("Network.clearBrowserCache"),
                                 *([tab.context.clear_permissions()] if tab.permissions_granted else []),
                                 *([] if written else [unload(tab)]))
            kept = tab
            if tab.dirty:
                if written:
                    await tab.page.close()
                # Else the page left stays open, unloaded and refusing, until the context's next wipe closes it with
                # its other pages: what it still asks for is refused on its own session, never sent.
                kept = await new_page(tab.context)
                kept.listener = tab.listener  # the context's
            kept.held_origins = held
            # Independent of one another: sent together. The context's cookies straight over the page's session
            # (Playwright's `clear_cookies` asks the same of Chromium, through more of its driver's work).
            await asyncio.gather(
                *([kept.send("Page.resetNavigationHistory"), kept.send("Runtime.evaluate", {
                    "expression": FORGET_NAME})] if kept is tab else []),
                *(kept.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"})
                  for origin in sorted(held)),
                kept.send("Network.clearBrowserCookies"))
            kept.forget_changes()  # what the jobs left is undone (a new page has nothing to forget)
    except Exception:
        log.warning("could not wipe a page for reuse; closing its context", exc_info=True)
        return None
    return kept


async def unload(tab: Tab) -> None:
    """Forget the job's document: sessionStorage and window.name, then the document itself (its history is
    reset with the wipe). Navigated from the page itself, about:blank stays in the page's renderer, which
    the next job then reuses for the same site."""
    main = tab.page.main_frame
    with contextlib.suppress(Exception):  # a frame may be gone or detached meanwhile
        await asyncio.gather(*(frame.evaluate(FORGET_TAB_STATE) for frame in tab.page.frames if frame != main))
    # A plain event, not `wait_for_url`: Playwright's waiters send the driver about nine messages each.
    unloaded = asyncio.get_running_loop().create_future()

    def on_navigated(frame: Frame) -> None:
        if frame == main and frame.url == "about:blank" and not unloaded.done():
            unloaded.set_result(None)

    tab.page.on("framenavigated", on_navigated)
    try:
        # Straight to CDP: Playwright's evaluate costs a few milliseconds more (its utility world, its
        # serialisation), on the way to the next job's page.
        await tab.send("Runtime.evaluate", {"expression": f"({FORGET_AND_UNLOAD})()"})
        await unloaded
    finally:
        tab.page.remove_listener("framenavigated", on_navigated)
