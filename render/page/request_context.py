"""What the capture sends to the target: the caller's headers, cookies and Authorization.

The caller's `headers` and `authorization` are meant for the target, so they go only to the url's origin
(with an html or markdown source, which has none, to every request the page makes). No redirect to
another origin carries them, as browsers and HTTP clients do for Authorization: Playwright's
`route.continue_(headers=...)` would (it re-applies them to every hop of a redirect and its handler never
sees the hop), so they are set over a CDP session of the service's own, whose `Fetch.requestPaused` comes
for every hop, and each hop gets them or loses them by its own origin.

Credentials in the url (`http://user:password@host/`) are sent the same way, as HTTP Basic, and the
address loaded has none: Chromium would otherwise keep them in its HTTP auth cache, which no CDP command
clears, and send them in the organisation's next job on the same kept context.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any
from urllib.parse import unquote, urlsplit

from render.browser.tabs import Tab
from render.contract.options import TakeOptions
from render.contract.request_params import parse_cookie, parse_headers
from render.contract.sealing import without_credentials
from render.net.traffic import web_origin

log = logging.getLogger(__name__)
def without_url_credentials(options: TakeOptions) -> TakeOptions:
    """`options` with the url's user and password moved to `authorization` as HTTP Basic (an explicit
    `authorization` wins)."""
    if options.url is None:
        return options
    parts = urlsplit(options.url)
    if parts.username is None and parts.password is None:
        return options
    credentials = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    basic = "Basic " + base64.b64encode(credentials.encode()).decode()
    return options.model_copy(update={"url": without_credentials(options.url),
                                      "authorization": options.authorization or basic})


class TargetHeaders:
    """Adds the caller's headers to the requests meant for the target, hop by hop."""

    def __init__(self, tab: Tab, headers: dict[str, str], target: str | None) -> None:
        self._tab = tab
        self._headers = headers
        self._names = {name.lower() for name in headers}
        self._target = target
        self._chains: dict[str, str | None] = {}  # network id -> origin of its first hop (html sources)
        self._pending: set[asyncio.Task[None]] = set()

    async def attach(self) -> None:
        await self._tab.intercept_requests(self._paused)

    def _meant_for(self, url: str, network_id: str | None) -> bool:
        origin = web_origin(url)
        if self._target is not None:
            return origin == self._target
        first = self._chains.setdefault(network_id or url, origin)  # the page chose the first hop
        return origin == first

    def _paused(self, event: dict[str, Any]) -> None:
        task = asyncio.ensure_future(self._continue(event))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _continue(self, event: dict[str, Any]) -> None:
        request = event["request"]
        # What an earlier hop was given is taken back (only our values: the page's own headers stay).
        headers = {name: value for name, value in request["headers"].items()
                   if not (name.lower() in self._names and value in self._headers.values())}
        if self._meant_for(request["url"], event.get("networkId")):
            headers.update(self._headers)
        try:
            await self._tab.send("Fetch.continueRequest", {
                "requestId": event["requestId"],
                "headers": [{"name": name, "value": value} for name, value in headers.items()]})
        except Exception:  # the request was cancelled, or its page closed, meanwhile
            log.debug("could not continue a request", exc_info=True)


async def apply(tab: Tab, options: TakeOptions) -> None:
    """Cookies in the context; headers and Authorization to the target's origin only (no url: to every
    request the page makes), never across a redirect to another origin."""
    headers = parse_headers(options.headers)
    if options.authorization is not None and options.url is not None:
        headers = {name: value for name, value in headers.items() if name.lower() != "authorization"}
        headers["Authorization"] = options.authorization
    if options.cookies:
        await tab.add_cookies([parse_cookie(raw, options.url, i) for i, raw in enumerate(options.cookies)])
    if headers:
        await TargetHeaders(tab, headers, web_origin(options.url) if options.url else None).attach()
