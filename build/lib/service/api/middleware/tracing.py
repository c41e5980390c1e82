"""Trace ids, the API's request metrics and the access log line."""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from render.logs import trace_id_var
from service.api.auth import request_facts

access_log = logging.getLogger("service.access")
QUIET_ROUTES = frozenset({"/healthz", "/readyz", "/metrics"})  # probes and scrapes: DEBUG, not INFO


class TraceMiddleware:
    """Give each request its trace id, count API answers by route and code, and write the access log line.

    The trace id is the caller's, from a W3C `traceparent` header (its trace-id part) or `X-Request-Id`, else
    a new one; every answer carries it as x-service-trace-id, and every log line of the request and of its
    job. Plain ASGI: Starlette's `@app.middleware("http")` runs the app in a task of its own and streams the
    response through a queue, about a millisecond a request.
    """

    def __init__(self, app: ASGIApp, access_log: bool = True) -> None:
        self.app = app
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        trace_id = caller_trace_id(dict(scope.get("headers", []))) or uuid.uuid4().hex
        scope.setdefault("state", {})["trace_id"] = trace_id
        trace_id_var.set(trace_id)
        facts: dict[str, str] = {}
        request_facts.set(facts)
        code, status = "ok", 0

        async def noting_send(message: Message) -> None:
            nonlocal code, status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                for name, value in headers:
                    if name == b"x-service-error-code":
                        code = value.decode("latin-1")
                if not any(name == b"x-service-trace-id" for name, _ in headers):
                    message = {**message, "headers": [*headers, (b"x-service-trace-id", trace_id.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, noting_send)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            context = getattr(scope["app"].state, "context", None)
            if context is not None and route.startswith("/v1/"):
                context.metrics.requests.labels(route, code).inc()
            if self.access_log:
                self._log(scope, route, status, code, facts, time.perf_counter() - started)

    @staticmethod
    def _log(scope: Scope, route: str, status: int, code: str, facts: dict[str, str], seconds: float) -> None:
        # The path only: a query string may hold an access key or a signature.
        fields = {"method": scope["method"], "path": scope["path"], "route": route, "status": status,
                  "duration_ms": round(seconds * 1000, 1), "organisation": facts.get("organisation")}
        if code != "ok":
            fields["error_code"] = code
        level = logging.DEBUG if route in QUIET_ROUTES else logging.INFO
        access_log.log(level, "%s %s %s %.0f ms", scope["method"], scope["path"], status or "-", seconds * 1000,
                       extra=fields)


_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-(?!0{32})([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:/+=-]{1,128}$")


def caller_trace_id(headers: dict[bytes, bytes]) -> str | None:
    """The trace id a caller sent: W3C traceparent's trace-id, else X-Request-Id when it is a plain token
    (anything else would let a caller write what it likes into the log)."""
    parent = headers.get(b"traceparent", b"").decode("latin-1").strip().lower()
    if match := _TRACEPARENT.match(parent):
        return match.group(1)
    request_id = headers.get(b"x-request-id", b"").decode("latin-1").strip()
    return request_id if _REQUEST_ID.match(request_id) else None
