"""What a tab's own DevTools session pauses (render.browser.tabs): every request while jobs block, only those with
credentials in their URL once a job blocks nothing, and Chromium asked only when that changes; everything the page
asks for from its wipe until the next job's own document, refused."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from playwright.async_api import BrowserContext, CDPSession, Page

from render.browser.tabs import CREDENTIAL_URLS, EVERY_URL, Tab


class _Session:
    """Records what is sent to Chromium."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    async def send(self, method: str, params: Any = None) -> dict[str, Any]:
        self.sent.append((method, params))
        return {"frameTree": {"frame": {"id": "top"}}} if method == "Page.getFrameTree" else {}


def _tab() -> tuple[Tab, _Session]:
    session = _Session()
    return Tab(cast(BrowserContext, None), cast(Page, None), cast(CDPSession, session)), session


def _paused(url: str, kind: str = "Image", frame: str = "top") -> dict[str, Any]:
    return {"requestId": url, "request": {"url": url}, "resourceType": kind, "frameId": frame}


def _answers(session: _Session) -> list[tuple[str, str]]:
    return [(method, params["requestId"]) for method, params in session.sent if method.startswith("Fetch.") and
            method != "Fetch.enable"]


def test_jobs_that_block_in_a_row_ask_chromium_once_and_a_job_that_does_not_puts_the_watch_back() -> None:
    tab, session = _tab()

    async def jobs() -> None:
        await tab.refuse_requests(lambda paused: "ad" in paused["request"]["url"])  # a job that blocks
        tab.paused(_paused("http://site.test/ad.png"))
        tab.paused(_paused("http://site.test/logo.png"))
        await tab.leave()  # its wipe
        tab.begin_arrival()  # the next job, which blocks too
        await tab.refuse_requests(lambda paused: False)
        tab.paused(_paused("http://site.test/beacon"))  # what the page left asks for: refused
        tab.paused(_paused("http://site.test/", "Document"))  # the job's own document
        tab.paused(_paused("http://site.test/logo.png"))
        await tab.leave()
        tab.begin_arrival()
        tab.paused(_paused("http://site.test/late-beacon"))
        await tab.pause_only_credentials()  # a job that blocks nothing: narrowed, and the page left is no more
        await tab.pause_only_credentials()
        await tab.leave()
        tab.begin_arrival()
        await tab.pause_only_credentials()  # and the next: its page pauses everything again while it is left
        await asyncio.sleep(0)

    asyncio.run(jobs())
    enables = [params for method, params in session.sent if method == "Fetch.enable"]
    assert enables == [EVERY_URL, CREDENTIAL_URLS, EVERY_URL, CREDENTIAL_URLS]
    assert _answers(session) == [("Fetch.failRequest", "http://site.test/ad.png"),
                                 ("Fetch.continueRequest", "http://site.test/logo.png"),
                                 ("Fetch.failRequest", "http://site.test/beacon"),
                                 ("Fetch.continueRequest", "http://site.test/"),
                                 ("Fetch.continueRequest", "http://site.test/logo.png"),
                                 ("Fetch.failRequest", "http://site.test/late-beacon")]


def test_a_page_being_left_refuses_everything_until_the_next_jobs_own_document() -> None:
    """A document of a frame, or the main frame's before the next job began (a navigation the page left had under
    way), is refused like any other request; a job that loads no document from the network arrives by itself."""
    tab, session = _tab()

    async def jobs() -> None:
        await tab.leave()
        tab.paused(_paused("http://site.test/next", "Document"))  # the left page's own navigation, under way
        tab.begin_arrival()
        tab.paused(_paused("http://site.test/frame", "Document", "child"))
        tab.paused(_paused("http://site.test/ping", "Ping"))
        tab.arrives()  # an html source, written into a new about:blank
        tab.paused(_paused("http://site.test/picture.png"))
        tab.begin_arrival()  # a job on a page that was not left: nothing refused
        tab.paused(_paused("http://site.test/other.png"))
        await asyncio.sleep(0)

    asyncio.run(jobs())
    assert _answers(session) == [("Fetch.failRequest", "http://site.test/next"),
                                 ("Fetch.failRequest", "http://site.test/frame"),
                                 ("Fetch.failRequest", "http://site.test/ping"),
                                 ("Fetch.continueRequest", "http://site.test/picture.png"),
                                 ("Fetch.continueRequest", "http://site.test/other.png")]


def test_target_headers_keep_every_request_paused() -> None:
    tab, session = _tab()

    async def job() -> None:
        tab.on_request = lambda paused: None  # render.page.request_context's
        await tab.pause_all()
        await tab.pause_only_credentials()  # the job blocks nothing, but its headers need every request

    asyncio.run(job())
    assert [params for method, params in session.sent if method == "Fetch.enable"] == [EVERY_URL]


def test_a_job_that_never_loaded_leaves_neither_its_blocking_nor_its_arrival_behind() -> None:
    """A job that blocked and failed before its document was asked for (it never arrived): its page's next wipe
    takes its blocking off and waits for the next job's own arrival again, so the organisation's next job, which
    blocks nothing, has nothing refused once it loads."""
    tab, session = _tab()

    async def jobs() -> None:
        await tab.leave()
        tab.begin_arrival()
        await tab.refuse_requests(lambda paused: True)  # blocks everything, then fails before its navigation
        await tab.leave()  # its wipe
        tab.paused(_paused("http://site.test/", "Document"))  # the left page's own navigation: not an arrival
        tab.begin_arrival()
        await tab.pause_only_credentials()
        tab.paused(_paused("http://site.test/picture.png"))
        await asyncio.sleep(0)

    asyncio.run(jobs())
    assert _answers(session) == [("Fetch.failRequest", "http://site.test/"),
                                 ("Fetch.continueRequest", "http://site.test/picture.png")]
