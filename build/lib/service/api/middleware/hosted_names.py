"""The hosted API's header names beside ours (SCREENSHOT_HOSTED_HEADER_NAMES)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.results import HOSTED_PREFIX, OWN_PREFIX


class HostedHeaderNames:
    """Each x-service-* response header also under the hosted API's x-screenshotone-* name (setting
    SCREENSHOT_HOSTED_HEADER_NAMES)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def renaming_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                own = OWN_PREFIX.encode()
                headers += [(HOSTED_PREFIX.encode() + name[len(own):], value) for name, value in headers
                            if name.lower().startswith(own)]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, renaming_send)
