"""Health, readiness and metrics: outside the versioned API, unauthenticated, no secrets."""

from __future__ import annotations

import time

import redis
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from render.protocol import COUNTERS_KEY, WORKERS_SEEN_KEY
from service.context import AppContext
from service.organisations import text

router = APIRouter(tags=["operations"])
WORKER_SEEN_WITHIN_SECONDS = 30


@router.get("/healthz", summary="The process is up")
async def healthz() -> Response:
    return JSONResponse({"status": "ok"})


@router.get("/readyz", summary="Redis is reachable and a worker was seen recently")
async def readyz(request: Request) -> Response:
    context: AppContext = request.app.state.context
    try:
        await context.redis.ping()
        workers = await context.redis.zcount(WORKERS_SEEN_KEY, time.time() - WORKER_SEEN_WITHIN_SECONDS,
                                             "+inf")
    except (redis.RedisError, OSError):
        return JSONResponse({"status": "unavailable", "redis": False, "workers": 0}, status_code=503)
    ready = workers > 0
    return JSONResponse({"status": "ok" if ready else "unavailable", "redis": True, "workers": workers},
                          status_code=200 if ready else 503)


@router.get("/metrics", summary="Prometheus metrics")
async def metrics(request: Request) -> Response:
    context: AppContext = request.app.state.context
    context.metrics.queue_depth.set(await context.dispatcher.queue_depth())
    shared = await context.redis.hgetall(COUNTERS_KEY)
    context.metrics.shared.snapshot = {text(k): int(v) for k, v in shared.items()}
    return Response(generate_latest(context.metrics.registry), media_type=CONTENT_TYPE_LATEST)
