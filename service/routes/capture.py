"""`/take` and `/animate` (synchronous, cached, async and webhook captures) and job status."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from animate.options import AnimateOptions, parse_animate_options
from render.contract import request_params, sealing
from render.contract.errors import CaptureTimeout, ErrorDetail, InternalError, ServiceError
from render.contract.options import TakeOptions, parse_take_options
from render.contract.timings import CACHE_HIT
from render.contract.wire import JobRequest, JobResult, WebhookOrder
from render.net.policy import check_url
from render.queue import deliveries
from render.queue.records import job_record_ttl
from service import cache, openapi
from service.auth import Caller, caller
from service.context import AppContext
from service.errors import JobNotFound
from service.organisations import Organisation
from service.params import list_fields
from service.quota import slot_hold
from service.results import Presented, present_success
from storage import StorageError

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1/screenshot", tags=["capture"])
TAKE_ARRAYS = list_fields(TakeOptions)
ANIMATE_ARRAYS = list_fields(AnimateOptions)

def new_reference() -> str:
    """A job id: sortable by time, unguessable."""
    return f"{int(time.time() * 1000):x}{secrets.token_hex(8)}"


@router.get("/take", openapi_extra=openapi.query_parameters("take"), responses=openapi.capture_responses("take"),
            summary="Take a screenshot (parameters in the query)")
async def take_get(request: Request, who: Annotated[Caller, Depends(caller(TAKE_ARRAYS))]) -> Response:
    return await take(request, who)


@router.post("/take", openapi_extra=openapi.request_body("take"), responses=openapi.capture_responses("take"),
             summary="Take a screenshot (JSON body and/or query)")
async def take_post(request: Request, who: Annotated[Caller, Depends(caller(TAKE_ARRAYS))]) -> Response:
    return await take(request, who)


@router.get("/animate", openapi_extra=openapi.query_parameters("animate"),
            responses=openapi.capture_responses("animate"),
            summary="Record a page: a video or a scroll animation (parameters in the query)")
async def animate_get(request: Request, who: Annotated[Caller, Depends(caller(ANIMATE_ARRAYS))]) -> Response:
    return await take(request, who, parse_animate_options)


@router.post("/animate", openapi_extra=openapi.request_body("animate"),
             responses=openapi.capture_responses("animate"),
             summary="Record a page: a video or a scroll animation (JSON body and/or query)")
async def animate_post(request: Request, who: Annotated[Caller, Depends(caller(ANIMATE_ARRAYS))]) -> Response:
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
    if options.webhook_url is not None:
        await enqueue_webhook(context, org, options, reference, trace_id, result)
    return respond(present_success(options, result, reference, trace_id, context.links))


def respond(presented: Presented) -> Response:
    return Response(content=presented.body, status_code=presented.status, media_type=presented.media_type,
                    headers=presented.headers)


def webhook_order(context: AppContext, options: TakeOptions) -> WebhookOrder | None:
    """Where the job's outcome goes, with this API's retry schedule; None without `webhook_url`."""
    if options.webhook_url is None:
        return None
    return context.settings.service.webhook_order(options.webhook_url, sign=options.webhook_sign,
                                                  errors=options.webhook_errors)


async def enqueue_webhook(context: AppContext, org: Organisation, options: TakeOptions, reference: str,
                          trace_id: str, result: JobResult) -> None:
    """A synchronous capture with webhook_url: the receiver gets what the caller got."""
    job = JobRequest(reference=reference, organisation=org.id, options=sealing.public_options(options.to_payload()),
                     trace_id=trace_id, deadline=0, webhook=webhook_order(context, options))
    await anyio.to_thread.run_sync(deliveries.owe, context.dispatcher.sync_redis, job, result)


async def start_async(context: AppContext, org: Organisation, options: TakeOptions, reference: str,
                      trace_id: str) -> None:
    """Reserve a slot and queue the job; the worker finishes it (quota, record, webhook)."""
    grace = context.settings.service.result_wait_grace
    await context.quota.reserve(org, reference, slot_hold(options.timeout, grace, queued=True))
    try:
        job = JobRequest(
            reference=reference, organisation=org.id, **job_options(context, options, reference), trace_id=trace_id,
            deadline=0.0, store_result=True, enqueued_at=time.time(), async_=True, timeout=options.timeout,
            kind=options.job_kind, webhook=webhook_order(context, options))
        await context.records.queued(reference, org.id, job=job)
        await context.dispatcher.submit(job)
    except BaseException:
        await asyncio.shield(context.quota.settle(org, reference, success=False))
        raise


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
        context.cache.refresh_soon(refresh(context, org, options, digest, trace_id))
    cache_url = context.links.url(result.storage_key or "")[0]
    presented = present_success(options, result, reference, trace_id, context.links, cache_url)
    presented.headers["x-service-cache-stale"] = "true" if stale else "false"
    return respond(presented)


async def render_into_cache(context: AppContext, org: Organisation, options: TakeOptions, digest: str,
                            reference: str, trace_id: str) -> JobResult:
    """Render the entry and keep it for cache_ttl (and cache_stale_ttl past it)."""
    result = await run_capture(context, org, options, reference, trace_id,
                               store_key=cache.object_key(org.id, digest, options),
                               keep_body=options.response_type == "by_format")
    if "blank" not in result.metadata.get("quality", {}).get("flags", []):  # a blank shot: the next one tries again
        await context.cache.put(digest, result, reference, options.cache_ttl or cache.DEFAULT_TTL,
                                options.cache_stale_ttl or 0)
    return result


async def refresh(context: AppContext, org: Organisation, options: TakeOptions, digest: str, trace_id: str) -> None:
    """A stale entry rendered again (charged as a capture), unless a render of it already runs."""
    reference = new_reference()
    if not await context.cache.take_refresh(digest, reference,
                                            options.timeout + context.settings.service.result_wait_grace):
        return
    try:
        await render_into_cache(context, org, options.model_copy(update={"response_type": "json"}), digest,
                                reference, trace_id)
        log.info("cache entry %s refreshed by %s", digest[:12], reference)
    except ServiceError as error:  # the stale entry stays until its window ends; the next request tries again
        log.info("cache entry %s not refreshed: %s: %s", digest[:12], error.code, error.message)
    except Exception:
        log.exception("cache entry %s not refreshed", digest[:12])
    finally:
        await context.cache.end_refresh(digest, reference)


async def cached_result(context: AppContext, options: TakeOptions, digest: str
                        ) -> tuple[JobResult, str, bool] | None:
    """A live entry whose object is still stored, with its bytes when the caller wants them; and whether it is
    stale (past its TTL, within cache_stale_ttl)."""
    hit = await context.cache.get(digest)
    if hit is None or not hit[0].storage_key:
        return None
    result, reference, stale = hit
    key = result.storage_key
    assert key is not None
    try:
        if await anyio.to_thread.run_sync(context.storage.stat, key) is None:
            return None
        if options.response_type == "by_format":
            result.body = await anyio.to_thread.run_sync(lambda: b"".join(context.storage.open(key)))
    except StorageError:
        return None
    result.rendering_seconds = 0.0  # nothing was rendered for this answer
    result.timings = dict(CACHE_HIT)
    return result, reference, stale


async def run_capture(context: AppContext, org: Organisation, options: TakeOptions, reference: str,
                      trace_id: str, *, store: bool = False, store_key: str | None = None,
                      keep_body: bool = False) -> JobResult:
    """Reserve a slot, run the job on a worker, settle the quota (unless the worker did, with its result);
    raise the job's error if it failed."""
    grace = context.settings.service.result_wait_grace
    await context.quota.reserve(org, reference, slot_hold(options.timeout, grace))
    success = settled = False
    try:
        job = JobRequest(
            reference=reference, organisation=org.id, **job_options(context, options, reference), trace_id=trace_id,
            deadline=time.time() + options.timeout, reply_channel=context.dispatcher.reply_channel,
            store_result=store, enqueued_at=time.time(), store_key=store_key,
            keep_body=keep_body or (store and options.response_type == "by_format"), kind=options.job_kind)
        with context.metrics.in_flight.track_inprogress():
            result = await context.dispatcher.run(job, wait_seconds=options.timeout + grace,
                                                  record=context.records.queued_fields(org.id))
        settled = result is not None and result.settled
        if result is not None and result.started_at:
            context.metrics.queue_wait_seconds.observe(max(0.0, result.started_at - job.enqueued_at))
        if result is None:
            result = JobResult(reference, ok=False, error=CaptureTimeout(
                f"No worker finished the capture within timeout ({options.timeout} s); the service may be "
                "overloaded: retry, or raise timeout.").to_payload())
            await context.records.finished(reference, result)
        if not result.ok:
            if options.webhook_url is not None:
                await enqueue_webhook(context, org, options, reference, trace_id, result)
            raise ServiceError.from_payload(result.error or {})
        success = True
        return result
    finally:
        # Shielded: a client hanging up must not leave the slot held until it expires.
        if not settled:
            await asyncio.shield(context.quota.settle(org, reference, success=success))


def job_options(context: AppContext, options: TakeOptions, reference: str) -> dict[str, Any]:
    """The JobRequest fields of `options`: what may be stored, and every secret of the job (credentials, the
    vision key) sealed for its worker in one token (render.contract.sealing), never stored as it is."""
    public, sealed = sealing.seal_job(options, context.settings.render.job_secret, reference)
    return {"options": public, "sealed": sealed}


@router.get("/jobs/{reference}", openapi_extra={"security": openapi.SECURED},
            responses=openapi.json_responses("Job", 400, 404),
            summary="State of a job (beyond the spec): queued, rendering, done, failed")
async def job_status(request: Request, reference: str, who: Annotated[Caller, Depends(caller())]) -> Response:
    context: AppContext = request.app.state.context
    org = who.organisation
    record = await context.records.get(reference)
    if record.get("organisation") != org.id:
        raise JobNotFound(f"No job {reference} of this organisation is known (jobs are kept "
                          f"{job_record_ttl() / 86400:g} days: SCREENSHOT_JOB_RECORD_TTL).",
                          [ErrorDetail("reference", "unknown")])
    # A sync job whose worker died is answered failed by its waiting API; an async one (its request kept in
    # `payload`) is offered again once, or finished by the sweep of orphans.
    if record.get("status") == "rendering" and "payload" not in record and await context.dispatcher.worker_died(
            reference):
        record["status"] = "failed"
        record["error"] = json.dumps(InternalError(
            "The worker rendering this capture stopped (it crashed or was killed); send it again.").to_payload())
    body: dict[str, Any] = {"is_successful": True, "reference": reference, "status": record.get("status")}
    if record.get("status") == "failed" and record.get("error"):
        error = json.loads(record["error"])
        body["error_code"] = error.get("error_code")
        body["error_message"] = error.get("error_message")
    if record.get("status") == "done" and record.get("storage_key"):
        body["screenshot_url"] = context.links.url(record["storage_key"])[0]
    if "webhook" in record:
        body["webhook"] = {"status": record["webhook"], "attempts": int(record.get("webhook_attempts", 0))}
    return JSONResponse(body)
