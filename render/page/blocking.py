"""Blocking what a page loads: ads (EasyList), trackers (EasyPrivacy), URL patterns, resource types,
and the scripts of known chat widgets (render/page/annoyances.py).

The lists are Debian's (webext-ublock-origin-chromium), matched by the adblock engine (Brave's
adblock-rust), loaded once per worker on first use. Network rules abort matching requests; cosmetic
rules hide ad elements. Requests are intercepted only when a blocking option is set, so captures
without one pay nothing for it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
from functools import cached_property
from pathlib import Path
from typing import Any

import adblock
from playwright.async_api import WebSocketRoute

from render.browser.tabs import Tab
from render.contract.options import TakeOptions
from render.page.annoyances import Annoyances
from render.page.failure_rules import url_pattern
from render.page.styles import ADOPT_STYLE_SHEET, add_style_sheet

log = logging.getLogger(__name__)

LISTS_DIR = Path("/usr/share/chromium/extensions/ublock-origin/assets/thirdparties/easylist")
# Playwright's resource types in adblock-rust's vocabulary.
_ADBLOCK_TYPES = {"fetch": "xhr", "eventsource": "other", "manifest": "other", "texttrack": "media"}
# DevTools' resource types (Fetch.requestPaused) that Playwright's names (`block_resources`) spell otherwise; the
# rest are DevTools' own in lower case, and those Playwright has no name for are "other" (its toResourceType).
_PLAYWRIGHT_TYPES = {"CSPViolationReport": "cspreport", "Prefetch": "other", "SignedExchange": "other",
                     "Preflight": "other", "FedCM": "other"}

_PAGE_CLASSES_AND_IDS = """() => {
  const classes = new Set(), ids = new Set();
  for (const element of document.querySelectorAll('[class], [id]')) {
    for (const name of element.classList) classes.add(name);
    if (element.id) ids.add(element.id);
  }
  return [[...classes], [...ids]];
}"""
# The list's selectors for the page added, and the page's classes and ids returned, in one round trip.
_HIDE_AND_LIST = f"(css) => {{ if (css) ({ADOPT_STYLE_SHEET})(css); return ({_PAGE_CLASSES_AND_IDS})(); }}"


def release_freed_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim; elsewhere nothing happens)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


class FilterLists:
    """The EasyList and EasyPrivacy engines of one worker, each loaded when first needed."""

    def __init__(self, directory: Path = LISTS_DIR) -> None:
        self._directory = directory

    def _load(self, name: str) -> adblock.Engine:
        filters = adblock.FilterSet(debug=False)
        filters.add_filter_list((self._directory / name).read_text())
        engine = adblock.Engine(filters, optimize=True)
        del filters
        release_freed_memory()  # parsing EasyList leaves 12 of the worker's 45 MB free but held otherwise
        log.info("loaded %s", name)
        return engine

    @cached_property
    def ads(self) -> adblock.Engine:
        return self._load("easylist.txt")

    @cached_property
    def trackers(self) -> adblock.Engine:
        return self._load("easyprivacy.txt")


def wanted(options: TakeOptions) -> bool:
    """Whether any blocking option is set (only then are requests intercepted)."""
    return bool(options.block_ads or options.block_trackers or options.block_requests or options.block_resources
                or options.block_chats or options.block_socials)


def resource_type(devtools_type: str) -> str:
    """A DevTools resource type ("Image", "XHR") as Playwright names it ("image", "xhr")."""
    return _PLAYWRIGHT_TYPES.get(devtools_type, devtools_type.lower())


class RequestBlocker:
    """Fails a page's requests that the job's blocking options match; records what it blocked. It decides on
    the tab's own DevTools session, where each request pauses (`Tab.refuse_requests`): one round trip from
    Chromium to the worker and back, where Playwright's request routing took about half as long again (its
    driver pairs each paused request with its network events and hands a route object to the worker)."""

    def __init__(self, options: TakeOptions, lists: FilterLists, annoyances: Annoyances) -> None:
        self.blocked: list[str] = []
        self._annoyances = annoyances
        self._patterns = [url_pattern(p) for p in options.block_requests]
        self._types = set(options.block_resources)
        self._loaded: list[adblock.Engine] = []
        if options.block_ads:
            self._loaded.append(lists.ads)
        if options.block_trackers:
            self._loaded.append(lists.trackers)
        self._source = options.url or "about:blank"
        self._main_frame: str | None = None  # its DevTools id, once attached

    def refuses(self, paused: dict[str, Any]) -> bool:
        """Whether a paused request (Fetch.requestPaused) is blocked; recorded when it is."""
        url, kind = paused["request"]["url"], resource_type(paused.get("resourceType", "Other"))
        if kind == "document" and paused.get("frameId") == self._main_frame:
            return False  # the page itself is never blocked
        if not self._matches(url, kind):
            return False
        self.blocked.append(url)
        return True

    def _matches(self, url: str, kind: str) -> bool:
        """Whether the job blocks a request for `url` of Playwright's resource type `kind`."""
        if kind in self._types or any(p.match(url) for p in self._patterns) or self._annoyances.blocks(url):
            return True
        adblock_kind = "sub_frame" if kind == "document" else _ADBLOCK_TYPES.get(kind, kind)
        return any(engine.check_network_urls(url, self._source, adblock_kind).matched for engine in self._loaded)

    @property
    def changes_page(self) -> bool:
        """Whether the page gets what the job cannot take back: refusing WebSockets takes an init script in
        every document (the refusal of its requests is taken off when the page is wiped)."""
        return "websocket" in self._types

    async def attach(self, tab: Tab) -> None:
        self._main_frame = await tab.main_frame_id()
        await tab.refuse_requests(self.refuses)
        if "websocket" in self._types:
            # WebSockets are not paused with the page's requests: they have a route of their own.
            async def refuse(socket: WebSocketRoute) -> None:
                self.blocked.append(socket.url)
                await socket.close()

            await tab.route_web_socket("**/*", refuse)

    async def hide_ad_elements(self, tab: Tab) -> None:
        """Cosmetic rules: the list's selectors for this page, then the generic class/id rules it uses (one round
        trip to the page, a second only when such rules match)."""
        if not self._loaded:
            return
        selectors: set[str] = set()
        generic: list[tuple[adblock.Engine, set[str]]] = []
        for engine in self._loaded:
            specific = engine.url_cosmetic_resources(tab.page.url)
            selectors.update(specific.hide_selectors)
            if not specific.generichide:  # type: ignore[attr-defined]  # present, missing from the stubs
                generic.append((engine, set(specific.exceptions)))
        classes, ids = await tab.run(_HIDE_AND_LIST, _hiding(selectors))
        by_class_or_id: set[str] = set()
        for engine, exceptions in generic:
            by_class_or_id.update(engine.hidden_class_id_selectors(classes, ids, exceptions))
        if by_class_or_id - selectors:
            await add_style_sheet(tab, _hiding(by_class_or_id - selectors))


def _hiding(selectors: set[str]) -> str:
    """One rule per selector: a selector Chromium does not understand must not void the others."""
    return "\n".join(f"{selector} {{ display: none !important; }}" for selector in sorted(selectors))
