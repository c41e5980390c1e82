"""The FastAPI application: `create_app(settings)` wires Redis, queue, storage, routes and errors."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import redis
import redis.asyncio as aioredis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from render.contract.errors import ErrorDetail, InternalError, RequestNotValid, ServiceError, documentation_at
from render.contract.formats import register_media_types
from render.net.policy import NetworkPolicy
from render.queue import async_jobs, lanes
from render.queue.keys import URL_SECRET_KEY
from render.queue.records import Absences, keep_job_records_for
from render.queue.redis_client import aclose
from render.settings import region_labels
from service import monitor_schedule, openapi
from service.cache import Cache
from service.context import AppContext
from service.dispatch import Dispatcher
from service.errors import MethodNotAllowed, RouteNotFound, TemporaryUnavailable
from service.jobs import JobRecords
from service.metrics import Metrics
from service.middleware.body_limit import BodyLimitMiddleware
from service.middleware.errors import error_response
from service.middleware.hosted_names import HostedHeaderNames
from service.middleware.tracing import TraceMiddleware
from service.organisations import OrganisationStore
from service.quota import QuotaKeeper
from service.results import Links
from service.routes import account, bulk, capture, compare, docs, monitors, operations, playground
from service.settings import Settings
from storage import StorageError, open_storage

log = logging.getLogger(__name__)
SWEEP_INTERVAL_SECONDS = 2










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
    keep_job_records_for(settings.service.job_record_ttl)
    documentation_at(settings.service.base_url)
    register_media_types()  # local storage's objects served with their format's content type

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
            sweeper = asyncio.create_task(_sweep(sync_connection, dispatcher.lanes, settings.service.worker_grace))
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
    app.include_router(compare.router)
    app.include_router(monitors.router)
    app.include_router(account.router)
    app.include_router(operations.router)
    app.include_router(playground.router)
    docs.install(app)
    return app


async def _sweep(connection: redis.Redis, lanes_offered: list[str], worker_grace: float) -> None:
    """Every few seconds: offer again the jobs handed to a worker that is gone before it started them
    (render.queue.lanes.sweep), finish the async jobs whose worker died rendering them
    (render.queue.async_jobs.sweep_orphans), schedule again the monitors whose runs stopped
    (service.monitor_schedule.restart_stalled)."""
    absences = Absences(worker_grace)
    while True:
        await asyncio.sleep(SWEEP_INTERVAL_SECONDS)
        try:
            await anyio.to_thread.run_sync(lanes.sweep, connection, lanes_offered, absences)
            await anyio.to_thread.run_sync(async_jobs.sweep_orphans, connection, absences)
            await anyio.to_thread.run_sync(monitor_schedule.restart_stalled, connection)
        except (redis.RedisError, OSError):
            log.warning("sweeping the lanes, orphaned async jobs and stalled monitors failed; retrying",
                        exc_info=True)


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
