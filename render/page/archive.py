"""The page's traffic kept for its web archive (`archive=true`, `format=wacz`; render/output/wacz.py): every request
of the job's page that was answered, with its headers, its POST body, its answer's status, headers and decoded body.

Recorded from the page's own request events, attached before the navigation and switched off when the job's tab
is released (`Tab.helpers`), so a kept page records nothing of another job. A request the network policy refused
was never answered (what the browser got is the egress proxy's own refusal) and is not kept. What the caller sent
as secrets (`cookies`, `authorization`, `headers`, a user and password in the url or `proxy`) is replaced by
`[redacted]` wherever it shows, in every form render/page/recording.py knows. WebSocket,
EventSource and beacon traffic is not recorded.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from playwright.async_api import Page, Request

from render.browser.tabs import Tab
from render.contract.archives import Exchange
from render.contract.options import TakeOptions
from render.net.traffic import REFUSED_HEADER
from render.page.recording import REDACTED, RequestLog, quietly

HELPER = "archive"
_UNRECORDED_TYPES = ("websocket", "eventsource", "ping")  # the streams and beacons a WARC of this kind leaves out


class ArchiveRecorder(RequestLog):
    """Every answered request of one job's page, made into exchanges when the capture is done."""

    def __init__(self, page: Page, options: TakeOptions) -> None:
        super().__init__(page, options, _UNRECORDED_TYPES)
        self._forms = [form.encode() for form in self.secrets.forms]

    async def exchanges(self) -> list[Exchange]:
        """What the page requested and was answered so far, secrets redacted, in the order it asked."""
        self.switch_off()
        found = await asyncio.gather(*(self._exchange(request, datetime.fromtimestamp(when, UTC))
                                       for request, when in self.requests))
        return [exchange for exchange in found if exchange is not None]

    def _clean(self, data: bytes) -> bytes:
        for form in self._forms:
            data = data.replace(form, REDACTED.encode())
        return data

    def _text(self, text: str) -> str:
        return self._clean(text.encode()).decode("utf-8", "replace")

    def _sent(self, headers: list[dict[str, str]]) -> list[tuple[str, str]]:
        """The request's headers, the caller's secrets redacted; HTTP/2's pseudo-headers left to the request line."""
        return [(header["name"], self._text(self.secrets.sent_value(header["name"], header["value"])))
                for header in headers if not header["name"].startswith(":")]

    async def _exchange(self, request: Request, when: datetime) -> Exchange | None:
        response = await quietly(request.response(), None)
        if response is None or response.headers.get(REFUSED_HEADER):
            return None  # refused (the egress's own answer), failed or not answered in time: nothing to replay
        redirect = 300 <= response.status < 400
        body = b""
        if not redirect and request in self.finished:
            body = await quietly(response.body(), None) or b""
        headers = await quietly(request.headers_array(), [])
        answered = await quietly(response.headers_array(), [])
        return Exchange(
            url=self._text(request.url), method=request.method, request_headers=self._sent(headers),
            request_body=self._clean(request.post_data_buffer) if request.post_data_buffer is not None else None,
            status=response.status, reason=response.status_text,
            response_headers=[(h["name"], self._text(h["value"])) for h in answered if not h["name"].startswith(":")],
            body=self._clean(body), when=when)


def record(tab: Tab, options: TakeOptions) -> ArchiveRecorder | None:
    """A recorder on the job's page when `archive` or `format=wacz` asks for one, switched off when the job's tab is
    released."""
    if not options.recorded:
        return None
    recorder = ArchiveRecorder(tab.page, options)
    tab.attach(HELPER, recorder)
    return recorder
