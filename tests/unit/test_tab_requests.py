"""What a tab's own DevTools session pauses (render.browser.tabs): every request while jobs block, only those with
credentials in their URL once a job blocks nothing, and Chromium asked only when that changes."""

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
        return {}


def _tab() -> tuple[Tab, _Session]:
    session = _Session()
    return Tab(cast(BrowserContext, None), cast(Page, None), cast(CDPSession, session)), session


def _paused(url: str) -> dict[str, Any]:
    return {"requestId": url, "request": {"url": url}, "resourceType": "Image", "frameId": "top"}


def test_jobs_that_block_in_a_row_ask_chromium_once_and_a_job_that_does_not_puts_the_watch_back() -> None:
    tab, session = _tab()

    async def jobs() -> None:
        await tab.refuse_requests(lambda paused: "ad" in paused["request"]["url"])  # a job that blocks
        tab.paused(_paused("http://site.test/ad.png"))
        tab.paused(_paused("http://site.test/logo.png"))
        await asyncio.sleep(0)
        tab.stop_refusing()  # its wipe
        tab.paused(_paused("http://site.test/ad.png"))  # what the page asks for as it is left: continued
        await tab.refuse_requests(lambda paused: False)  # the next job blocks too
        tab.stop_refusing()
        await tab.pause_only_credentials()  # a job that blocks nothing
        await tab.pause_only_credentials()  # and the next
        await asyncio.sleep(0)

    asyncio.run(jobs())
    enables = [params for method, params in session.sent if method == "Fetch.enable"]
    assert enables == [EVERY_URL, CREDENTIAL_URLS]
    answers = [(method, params["requestId"]) for method, params in session.sent if method != "Fetch.enable"]
    assert answers == [("Fetch.failRequest", "http://site.test/ad.png"),
                       ("Fetch.continueRequest", "http://site.test/logo.png"),
                       ("Fetch.continueRequest", "http://site.test/ad.png")]


def test_target_headers_keep_every_request_paused() -> None:
    tab, session = _tab()

    async def job() -> None:
        tab.on_request = lambda paused: None  # render.page.request_context's
        await tab.pause_all()
        await tab.pause_only_credentials()  # the job blocks nothing, but its headers need every request

    asyncio.run(job())
    assert [params for method, params in session.sent if method == "Fetch.enable"] == [EVERY_URL]
