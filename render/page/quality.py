"""Quality flags of a capture (`metadata_quality`): what makes a shot worth a second look, found on the page
itself. `blank` (nothing shown: a near-uniform image, or a document without text or media), `bot_challenge`
(a bot check or CAPTCHA wall instead of the page: render/page/rules/challenges.toml), `http_error` (the main
document answered 4xx or 5xx, captured with ignore_host_errors), `consent_wall` (a consent banner still covers
the page) and `pending_requests` (requests in flight as the capture started, and still half a second later).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, Request, Response

from render.browser.tabs import Tab
from render.page.annoyances import consent_walls

HELPER = "pending_requests"
FLAGS = ("blank", "bot_challenge", "http_error", "consent_wall", "pending_requests")
WALL_TEXT = 1500  # a page with a CAPTCHA widget and at most this much text to read is a CAPTCHA wall
MAX_PENDING_LISTED = 10
# A request in flight as the capture starts counts when it is still in flight this long after: one that ends a
# moment later (an image answering as the shutter falls) is not what pending_requests warns of.
PENDING_GRACE_SECONDS = 0.5
_PAGE_SIDE = (Path(__file__).parent / "js" / "quality.js").read_text()


@cache
def challenge_rules() -> dict[str, Any]:
    """render/page/rules/challenges.toml as the page side takes it."""
    with (Path(__file__).parent / "rules" / "challenges.toml").open("rb") as rules:
        tables = tomllib.load(rules)
    widgets = tables.pop("CAPTCHA")["widgets"]
    vendors = [{"name": name, **table} for name, table in tables.items()]
    return {"vendors": vendors, "widgets": widgets, "wallText": WALL_TEXT}


class PendingRequests:
    """The job's requests that have started and not ended (finished or failed)."""

    def __init__(self, page: Page) -> None:
        self._page = page
        self._open: dict[Request, None] = {}  # in the order they started
        self._changed = asyncio.Event()
        self._listening = [("request", self._started), ("requestfinished", self._ended),
                           ("requestfailed", self._ended)]
        for event, handler in self._listening:
            page.on(event, handler)  # type: ignore[call-overload]

    def _started(self, request: Request) -> None:
        self._open[request] = None

    def _ended(self, request: Request) -> None:
        self._open.pop(request, None)
        self._changed.set()

    def switch_off(self) -> None:
        for event, handler in self._listening:
            self._page.remove_listener(event, handler)
        self._listening = []

    def now(self) -> list[Request]:
        """The requests in flight now."""
        return list(self._open)

    async def still_open(self, requests: list[Request], until: float) -> list[str]:
        """The URLs of `requests` still in flight at `until` (time.monotonic()), or sooner once all have ended."""
        while (left := until - time.monotonic()) > 0 and any(request in self._open for request in requests):
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)
        return [request.url for request in requests if request in self._open]


def watch_pending(tab: Tab) -> PendingRequests:
    """Counting the job's requests in flight from before its navigation; off when the job's tab is released."""
    pending = PendingRequests(tab.page)
    tab.attach(HELPER, pending)
    return pending


async def page_flags(tab: Tab, response: Response | None, pending: list[str], *,
                     look_for_blank: bool) -> dict[str, Any]:
    """The flags found on the page, by name, each with what shows it (`blank` only with `look_for_blank`: for
    images it is judged on the pixels instead)."""
    flags: dict[str, Any] = {}
    try:
        found = await tab.run(_PAGE_SIDE, challenge_rules())
        walls = await consent_walls(tab)
    except PlaywrightError:  # the page navigated away meanwhile: what it showed is not known
        found, walls = {"challenge": None, "empty": False}, []
    if look_for_blank and found["empty"]:
        flags["blank"] = {"reason": "the page shows no text, image, video, canvas, SVG or frame"}
    if found["challenge"]:
        flags["bot_challenge"] = found["challenge"]
    if response is not None and response.status >= 400:
        flags["http_error"] = {"status": response.status}
    if walls:
        flags["consent_wall"] = walls[0]
    if pending:
        flags["pending_requests"] = {"count": len(pending), "urls": pending[:MAX_PENDING_LISTED]}
    return flags


# Whether the page lays out text or media where a capture looks (the viewport, or the whole document): the
# blank-capture guard's question. Opacity and visibility are not asked: they are what may have hidden it.
_LAYS_OUT_CONTENT = """(wholePage) => {
  const right = wholePage ? Infinity : innerWidth, bottom = wholePage ? Infinity : innerHeight;
  const inView = (box) => box.width >= 2 && box.height >= 2 && box.right > (wholePage ? -Infinity : 0)
    && box.bottom > (wholePage ? -Infinity : 0) && box.left < right && box.top < bottom;
  const media = 'img, video, canvas, svg, iframe, picture, object, embed';
  if ([...document.querySelectorAll(media)].some((element) => inView(element.getBoundingClientRect()))) return true;
  if (!document.body) return false;
  const texts = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  for (let node = texts.nextNode(); node; node = texts.nextNode()) {
    if (!node.data.trim()) continue;
    range.selectNodeContents(node);
    if ([...range.getClientRects()].some(inView)) return true;
  }
  return false;
}"""


async def lays_out_content(tab: Tab, whole_page: bool) -> bool:
    """Whether the page has text or media laid out in the viewport (or anywhere, `whole_page`), shown or not."""
    try:
        return bool(await tab.run(_LAYS_OUT_CONTENT, whole_page))
    except PlaywrightError:  # navigated away meanwhile
        return False


def report(flags: dict[str, Any]) -> dict[str, Any]:
    """metadata.quality: the flags raised, in FLAGS' order, and what shows each."""
    return {"flags": [flag for flag in FLAGS if flag in flags], "details": {flag: flags[flag] for flag in FLAGS
                                                                           if flag in flags}}
