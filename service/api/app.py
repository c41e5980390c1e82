"""The FastAPI application: `create_app(settings)` wires Redis, queue, storage, routes and errors."""

from __future__ import annotations

import functools
import secrets
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import redis.asyncio as aioredis
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from render.contract.errors import documentation_at
from render.contract.formats import register_media_types
from render.net.policy import NetworkPolicy
from render.queue.keys import URL_SECRET_KEY
from render.queue.records import keep_job_records_for
from render.queue.redis_client import aclose
from render.settings import region_labels
from service.api import handlers, openapi, sweeper
from service.api.cache import Cache
from service.api.context import AppContext
from service.api.dispatch import Dispatcher
from service.api.job_records import JobRecords
from service.api.metrics import Metrics
from service.api.middleware.body_limit import BodyLimitMiddleware
from service.api.middleware.hosted_names import HostedHeaderNames
from service.api.middleware.tracing import TraceMiddleware
from service.api.routes import account, bulk, capture, compare, docs, files, jobs, monitors, operations, playground
from service.organisations import OrganisationStore
from service.quota import QuotaKeeper
from service.results import Links
from service.settings import Settings
from storage import StorageError, open_storage

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
            await context.organisations.ensure_configured(settings.service)
            app.state.context = context
            stack.push_async_callback(sweeper.stop, sweeper.start(
                sync_connection, dispatcher.lanes, settings.service.worker_grace, settings.service.max_queue))
            yield

    app = FastAPI(
        title="screenshot-service",
        version="1.0.0",
        description="Self-hosted screenshot capture API. Authenticate with the X-Access-Key header (or "
                    "?access_key=); every parameter of /take and /animate is typed below. The error reference "
                    "is at /errors.",
        lifespan=lifespan,
        default_response_class=JSONResponse,
        docs_url=None,  # service.api.routes.docs: served from pinned assets, not a CDN
        redoc_url=None,
        generate_unique_id_function=lambda route: route.name,  # operation ids: take_get, usage, ... for clients
    )
    app.openapi = functools.partial(openapi.document, app, settings.service.bulk_max_requests)  # type: ignore[method-assign]
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.service.max_body_bytes)
    if settings.service.hosted_header_names:
        app.add_middleware(HostedHeaderNames)
    # The outermost: every answer, errors included, is traced, counted and logged.
    app.add_middleware(TraceMiddleware, access_log=settings.service.access_log)

    handlers.install(app)

    app.include_router(capture.router)
    app.include_router(jobs.router)
    app.include_router(bulk.router)
    app.include_router(compare.router)
    app.include_router(monitors.router)
    app.include_router(account.router)
    app.include_router(files.router)
    app.include_router(operations.router)
    app.include_router(playground.router)
    docs.install(app)
    return app
