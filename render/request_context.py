"""What the capture sends to the target: extra headers, cookies and an Authorization header."""

from __future__ import annotations

from urllib.parse import urlsplit

from playwright.async_api import Route

from render.browser import Tab
from render.options import TakeOptions
from render.request_params import parse_cookie, parse_headers


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


async def apply(tab: Tab, options: TakeOptions) -> None:
    """Headers for every request, cookies in the context, Authorization only to the target's origin."""
    headers = parse_headers(options.headers)
    if headers or options.authorization is not None:
        tab.dirty = True  # page-level headers and routes
    if headers:
        await tab.page.set_extra_http_headers(headers)
    if options.cookies:
        await tab.context.add_cookies([parse_cookie(raw, options.url, i)  # type: ignore[misc]
                                       for i, raw in enumerate(options.cookies)])
    if options.authorization is not None and options.url is not None:
        target = _origin(options.url)
        value = options.authorization

        async def add_authorization(route: Route) -> None:
            await route.continue_(headers={**route.request.headers, "authorization": value})

        # Interception only for the target's own origin: third parties never see the credential.
        await tab.page.route(lambda url: _origin(url) == target, add_authorization)
