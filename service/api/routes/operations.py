"""Health, readiness, metrics and the error reference: outside the versioned API, unauthenticated, no
secrets."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import redis
from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from render.queue.keys import COUNTERS_KEY, QUEUE_WAIT_PREFIX, WORKERS_BUSY_KEY, WORKERS_SEEN_KEY
from render.queue.lane_scripts import CLASSES
from render.queue.redis_client import text
from service.api import error_reference, openapi
from service.api.context import AppContext
from service.errors import RouteNotFound

router = APIRouter(tags=["operations"])
WORKER_SEEN_WITHIN_SECONDS = 30
READINESS_TIMEOUT_SECONDS = 2.0  # well under the probes' timeout (deploy/k8s: 5 s)
HEARTBEAT_FRESH_SECONDS = 3  # workers beat every second: older than this, gone (or stuck)


@router.get("/healthz", responses=openapi.health_responses(), summary="The process is up")
async def healthz() -> Response:
    return JSONResponse({"status": "ok"})


@router.get("/readyz", responses=openapi.health_responses(),
            summary="Redis is reachable and a worker was seen recently")
async def readyz(request: Request) -> Response:
    context: AppContext = request.app.state.context
    try:  # a probe answers at once: Redis's clients would retry for seconds (render.queue.redis_client)
        async with asyncio.timeout(READINESS_TIMEOUT_SECONDS):
            workers = await context.redis.zcount(WORKERS_SEEN_KEY, time.time() - WORKER_SEEN_WITHIN_SECONDS,
                                                 "+inf")
    except (redis.RedisError, OSError, TimeoutError):
        return JSONResponse({"status": "unavailable", "redis": False, "workers": 0}, status_code=503)
    ready = workers > 0
    return JSONResponse({"status": "ok" if ready else "unavailable", "redis": True, "workers": workers},
                          status_code=200 if ready else 503)


@router.get("/errors", responses=openapi.text_responses("text/html"),
            summary="What each error code means and what to do about it")
async def errors() -> Response:
    return HTMLResponse(error_reference.page())


@router.get("/errors/{code}", responses=openapi.text_responses("text/html", 404),
            summary="One error code: what it means and what to do (each error body's "
            "documentation_url)")
async def error(code: str) -> Response:
    if code not in error_reference.ENTRIES:
        raise RouteNotFound(f"errors: no error code {code[:64]!r}; GET /errors lists them all.")
    return HTMLResponse(error_reference.page(code))


BACKLOG_SHOWN = 5  # organisations with their own series in screenshot_queue_backlog (a bounded label set)


async def backlog(context: AppContext) -> list[tuple[str, int]]:
    """The organisations with the most jobs waiting, over every lane, then the others together as `other`."""
    waiting: Counter[str] = Counter()
    for lane in context.dispatcher.lanes:
        for org, count in (await context.redis.hgetall(f"{lane}:waiting")).items():
            waiting[text(org)] += int(count)
    largest = waiting.most_common(BACKLOG_SHOWN)
    return [*largest, ("other", sum(waiting.values()) - sum(count for _, count in largest))]


@router.get("/metrics", responses=openapi.text_responses("text/plain"), summary="Prometheus metrics")
async def metrics(request: Request) -> Response:
    context: AppContext = request.app.state.context
    context.metrics.queue_depth.set(await context.dispatcher.queue_depth())
    now = time.time()
    async with context.redis.pipeline(transaction=False) as pipe:
        pipe.zcount(WORKERS_SEEN_KEY, now - HEARTBEAT_FRESH_SECONDS, "+inf")
        pipe.zcount(WORKERS_BUSY_KEY, now - HEARTBEAT_FRESH_SECONDS, "+inf")
        alive, busy = await pipe.execute()
    context.metrics.workers.labels("busy").set(min(busy, alive))
    context.metrics.workers.labels("idle").set(max(alive - busy, 0))
    shared = await context.redis.hgetall(COUNTERS_KEY)
    context.metrics.shared.snapshot = {text(k): int(v) for k, v in shared.items()}
    context.metrics.shared.waits = {job_class: {text(k): float(v) for k, v in (
        await context.redis.hgetall(QUEUE_WAIT_PREFIX + job_class)).items()} for job_class in CLASSES}
    context.metrics.shared.backlog = await backlog(context)
    return Response(generate_latest(context.metrics.registry), media_type=CONTENT_TYPE_LATEST)
