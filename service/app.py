"""The FastAPI application: `create_app(settings)` wires Redis, queue, storage, routes and errors."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import redis
import redis.asyncio as aioredis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from render.contract.errors import ErrorDetail, InternalError, RequestNotValid, ServiceError, documentation_at
from render.logs import trace_id_var
from render.net.policy import NetworkPolicy
from render.queue import async_jobs
from render.queue.keys import URL_SECRET_KEY
from render.queue.records import Absences
from render.queue.redis_client import aclose
from render.settings import region_labels
from service import openapi
from service.auth import request_facts
from service.cache import Cache
from service.context import AppContext
from service.dispatch import Dispatcher
from service.errors import MethodNotAllowed, RequestBodyTooLarge, RouteNotFound, TemporaryUnavailable
from service.jobs import JobRecords
from service.metrics import Metrics
from service.organisations import OrganisationStore
from service.quota import QuotaKeeper
from service.results import HOSTED_PREFIX, OWN_PREFIX, Links
from service.routes import account, bulk, capture, docs, operations, playground
from service.settings import Settings
from storage import StorageError, open_storage

log = logging.getLogger(__name__)
access_log = logging.getLogger("service.access")
QUIET_ROUTES = frozenset({"/healthz", "/readyz", "/metrics"})  # probes and scrapes: DEBUG, not INFO
SWEEP_INTERVAL_SECONDS = 2


def error_response(error: ServiceError, trace_id: str | None = None) -> JSONResponse:
    """The JSON error body of DESIGN §4 with the error's status."""
    headers = {"x-service-error-code": error.code}
    if trace_id:
        headers["x-service-trace-id"] = trace_id
    return JSONResponse(error.to_payload(), status_code=error.status, headers=headers)


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


async def _url_secret(settings: Settings, connection: aioredis.Redis) -> bytes:
    """The secret for local storage URLs: configured, or generated once and shared through Redis."""
    if settings.service.url_signing_secret:
        return settings.service.url_signing_secret.encode()
    await connection.set(URL_SECRET_KEY, secrets.token_hex(32), nx=True)
    secret = await connection.get(URL_SECRET_KEY)
    return secret.encode() if isinstance(secret, str) else bytes(secret or b"")


def create_app(settings: Settings) -> FastAPI:
    """The API application for these settings."""
    if not settings.service.redis_url:
        raise ValueError("the API needs SCREENSHOT_REDIS_URL (`screenshot-service run` sets it)")
    target = settings.service.redis()
    documentation_at(settings.service.base_url)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            connection = target.asyncio(max_connections=512)
            stack.push_async_callback(aclose, connection)
            sync_connection = target.sync()
            stack.callback(sync_connection.close)
            dispatcher = Dispatcher(connection, sync_connection, settings.service.max_queue,
                                    region_labels(settings.render.regions), settings.service.worker_grace)
            await dispatcher.start()
            stack.push_async_callback(dispatcher.stop)
            try:
                storage = open_storage(settings.storage)
            except StorageError as error:
                raise SystemExit(f"storage: {error}") from None
            url_secret = await _url_secret(settings, connection)
            context = AppContext(
                settings=settings, redis=connection, organisations=OrganisationStore(connection),
                quota=QuotaKeeper(connection), dispatcher=dispatcher, storage=storage,
                url_secret=url_secret, metrics=Metrics(),
                links=Links(storage, settings.service.base_url, url_secret, settings.storage.result_url_ttl),
                cache=Cache(connection), records=JobRecords(connection),
                policy=NetworkPolicy.from_settings(settings.render))
            await _bootstrap_organisation(context)
            app.state.context = context
            sweeper = asyncio.create_task(_sweep_orphans(sync_connection, settings.service.worker_grace))
            stack.push_async_callback(_cancel, sweeper)
            yield

    app = FastAPI(
        title="screenshot-service",
        version="1.0.0",
        description="Self-hosted screenshot capture API. Authenticate with the X-Access-Key header (or "
                    "?access_key=); every parameter of /take and /animate is typed below. The error reference "
                    "is at /errors.",
        lifespan=lifespan,
        default_response_class=JSONResponse,
        docs_url=None,  # service.routes.docs: served from pinned assets, not a CDN
        redoc_url=None,
        generate_unique_id_function=lambda route: route.name,  # operation ids: take_get, usage, ... for clients
    )
    app.openapi = functools.partial(openapi.document, app, settings.service.bulk_max_requests)  # type: ignore[method-assign]
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.service.max_body_bytes)
    if settings.service.hosted_header_names:
        app.add_middleware(HostedHeaderNames)
    # The outermost: every answer, errors included, is traced, counted and logged.
    app.add_middleware(TraceMiddleware, access_log=settings.service.access_log)

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, error: ServiceError) -> JSONResponse:
        if error.report:
            log.error("%s: %s (trace %s)", error.code, error.message, getattr(request.state, "trace_id", ""))
        return error_response(error, getattr(request.state, "trace_id", None))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        # Unknown paths and wrong methods answer with the error body too, never the framework's own.
        trace_id = getattr(request.state, "trace_id", None)
        where = f"{request.method} {request.url.path}"
        if error.status_code == 405:
            return error_response(MethodNotAllowed(f"{where}: method not allowed; see /docs for the routes."),
                                  trace_id)
        if error.status_code == 404:
            return error_response(RouteNotFound(f"{where}: no such route; see /docs for the routes."), trace_id)
        log.error("unexpected HTTP error %s on %s (trace %s)", error.status_code, where, trace_id)
        return error_response(InternalError(), trace_id)

    @app.exception_handler(RequestValidationError)
    async def invalid_route_parameter(request: Request, error: RequestValidationError) -> JSONResponse:
        # Parameters FastAPI checks itself (the signed links' `expires`): request_not_valid by name, not 422.
        details = [ErrorDetail(str(problem["loc"][-1]), str(problem["msg"])) for problem in error.errors()]
        names = ", ".join(detail.field for detail in details)
        return error_response(RequestNotValid(f"Parameters not valid: {names}.", details),
                              getattr(request.state, "trace_id", None))

    @app.exception_handler(redis.RedisError)
    async def redis_unavailable(request: Request, error: redis.RedisError) -> JSONResponse:
        trace_id = getattr(request.state, "trace_id", None)
        log.warning("redis unavailable: %s (trace %s)", type(error).__name__, trace_id)
        return error_response(TemporaryUnavailable(
            "The service's queue store (Redis) is unreachable; retry shortly."), trace_id)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, error: Exception) -> JSONResponse:
        trace_id = getattr(request.state, "trace_id", None)
        log.exception("unexpected error (trace %s)", trace_id)
        return error_response(InternalError(), trace_id)

    app.include_router(capture.router)
    app.include_router(bulk.router)
    app.include_router(account.router)
    app.include_router(operations.router)
    app.include_router(playground.router)
    docs.install(app)
    return app


async def _sweep_orphans(connection: redis.Redis, worker_grace: float) -> None:
    """Every few seconds: finish async jobs whose worker died (render.queue.async_jobs.sweep_orphans), offer again those
    lost on their way to a worker (render.queue.async_jobs.sweep_unclaimed)."""
    missing_since: dict[str, float] = {}
    absences = Absences(worker_grace)
    while True:
        await asyncio.sleep(SWEEP_INTERVAL_SECONDS)
        try:
            await anyio.to_thread.run_sync(async_jobs.sweep_orphans, connection, absences)
            await anyio.to_thread.run_sync(async_jobs.sweep_unclaimed, connection, missing_since)
        except (redis.RedisError, OSError):
            log.warning("sweeping orphaned async jobs failed; retrying", exc_info=True)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _bootstrap_organisation(context: AppContext) -> None:
    """Make sure the organisation of SCREENSHOT_ACCESS_KEY exists when the variable is set."""
    service = context.settings.service
    if not service.access_key:
        return
    await context.organisations.ensure(
        "default", service.access_key, signing_key=service.signing_key, quota=service.default_quota,
        concurrency=service.default_concurrency, require_signature=service.require_signature)
