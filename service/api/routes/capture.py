"""`/take` and `/animate` (synchronous, cached, async and webhook captures); an async job's life: routes.jobs."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from animate.options import AnimateOptions, parse_animate_options
from render.contract import request_params
from render.contract.options import TakeOptions, parse_take_options
from render.net.policy import check_url
from service.api import cache, openapi
from service.api.auth import Caller, caller
from service.api.capture_path import (
    cached_result,
    new_reference,
    refresh,
    render_into_cache,
    run_capture,
    start_async,
)
from service.api.context import AppContext
from service.organisations import Organisation
from service.params import list_fields
from service.results import Presented, present_success

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1/screenshot", tags=["capture"])
TAKE_ARRAYS = list_fields(TakeOptions)
ANIMATE_ARRAYS = list_fields(AnimateOptions)
# The callers of the capture routes: a POST body held to its OpenAPI component's JSON types.
TAKE_CALLER = caller(TAKE_ARRAYS, "TakeOptions")
ANIMATE_CALLER = caller(ANIMATE_ARRAYS, "AnimateOptions")


@router.get("/take", openapi_extra=openapi.query_parameters("take"), responses=openapi.capture_responses("take"),
            summary="Take a screenshot (parameters in the query)")
async def take_get(request: Request, who: Annotated[Caller, Depends(TAKE_CALLER)]) -> Response:
    return await take(request, who)


@router.post("/take", openapi_extra=openapi.request_body("take"), responses=openapi.capture_responses("take"),
             summary="Take a screenshot (JSON body and/or query)")
async def take_post(request: Request, who: Annotated[Caller, Depends(TAKE_CALLER)]) -> Response:
    return await take(request, who)


@router.get("/animate", openapi_extra=openapi.query_parameters("animate"),
            responses=openapi.capture_responses("animate"),
            summary="Record a page: a video or a scroll animation (parameters in the query)")
async def animate_get(request: Request, who: Annotated[Caller, Depends(ANIMATE_CALLER)]) -> Response:
    return await take(request, who, parse_animate_options)


@router.post("/animate", openapi_extra=openapi.request_body("animate"),
             responses=openapi.capture_responses("animate"),
             summary="Record a page: a video or a scroll animation (JSON body and/or query)")
async def animate_post(request: Request, who: Annotated[Caller, Depends(ANIMATE_CALLER)]) -> Response:
    return await take(request, who, parse_animate_options)


async def take(request: Request, who: Caller,
               parse: Callable[[dict[str, Any]], TakeOptions] = parse_take_options) -> Response:
    """/take and /animate: synchronous, cached, async or with a webhook."""
    context: AppContext = request.app.state.context
    started = time.monotonic()
    trace_id = request.state.trace_id
    org = who.organisation
    options = parse(who.params.values)
    request_params.check(options)
    if options.webhook_url is not None:
        await check_url("webhook_url", options.webhook_url, context.policy, unresolvable_is_invalid=True)
    if options.cache:
        return await take_cached(context, org, options, trace_id)
    reference = new_reference()
    if options.async_:
        await start_async(context, org, options, reference, trace_id)
        headers = {"x-service-reference": reference, "x-service-trace-id": trace_id}
        if options.external_identifier is not None:
            headers["x-service-external-identifier"] = options.external_identifier
        return JSONResponse({"is_successful": True, "reference": reference}, status_code=202, headers=headers)
    result = await run_capture(context, org, options, reference, trace_id,
                               store=options.response_type == "json" or options.webhook_url is not None)
    context.metrics.request_seconds.observe(time.monotonic() - started)
    context.metrics.render_seconds.observe(result.rendering_seconds)
    if result.blocked_requests:
        context.metrics.blocked_requests.labels("private_network").inc(result.blocked_requests)
    return respond(present_success(options, result, reference, trace_id, context.links))


def respond(presented: Presented) -> Response:
    return Response(content=presented.body, status_code=presented.status, media_type=presented.media_type,
                    headers=presented.headers)


async def take_cached(context: AppContext, org: Organisation, options: TakeOptions, trace_id: str) -> Response:
    """Serve a live entry, or render once (however many identical requests arrive) and keep it. An entry past its
    TTL but within cache_stale_ttl is served at once and refreshed in the background."""
    digest = cache.cache_key(org.id, options)
    hit = await cached_result(context, options, digest)
    context.metrics.cache.labels("miss" if hit is None else "stale" if hit[2] else "hit").inc()
    if hit is None:
        reference = new_reference()
        wait = options.timeout + context.settings.service.result_wait_grace
        async with context.cache.single_flight(digest, reference, wait) as leader:
            if not leader:
                hit = await cached_result(context, options, digest)
            if hit is None:
                result = await render_into_cache(context, org, options, digest, reference, trace_id)
                cache_url = context.links.url(result.storage_key or "")[0]
                return respond(present_success(options, result, reference, trace_id, context.links, cache_url))
    result, reference, stale = hit
    if stale:
        context.cache.refresh_soon(refresh(context, org, options, digest, result, trace_id))
    cache_url = context.links.url(result.storage_key or "")[0]
    presented = present_success(options, result, reference, trace_id, context.links, cache_url)
    presented.headers["x-service-cache-stale"] = "true" if stale else "false"
    return respond(presented)
