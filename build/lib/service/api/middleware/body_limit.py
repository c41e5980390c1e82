"""Request bodies bounded by SCREENSHOT_MAX_BODY_BYTES, by header or while they stream."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.error_answer import error_response
from service.errors import RequestBodyTooLarge


class BodyLimitMiddleware:
    """Refuse bodies over SCREENSHOT_MAX_BODY_BYTES with 413, by header or while streaming."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _error(self) -> JSONResponse:
        return error_response(RequestBodyTooLarge(
            f"The request body is larger than {self.max_bytes} bytes (setting SCREENSHOT_MAX_BODY_BYTES)."))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._error()(scope, receive, send)
                return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise RequestBodyTooLarge(
                        f"The request body is larger than {self.max_bytes} bytes "
                        "(setting SCREENSHOT_MAX_BODY_BYTES).")
            return message

        await self.app(scope, limited_receive, send)
