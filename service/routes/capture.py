"""`/take` (and the not yet built `/animate` and `/bulk`)."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from render import request_params, vision
from render.errors import CaptureTimeout, ErrorDetail, RequestNotValid, ServiceError
from render.options import TakeOptions, parse_take_options
from render.protocol import JobRequest, JobResult
from service import metadata
from service.auth import authenticate
from service.context import AppContext
from service.organisations import Organisation
from service.params import RawParams, collect, list_fields, parse_body
from storage.local import sign_file_url

router = APIRouter(prefix="/v1/screenshot", tags=["capture"])
TAKE_ARRAYS = list_fields(TakeOptions)
SLOT_MARGIN_SECONDS = 5

_TAKE_DOC = {
    "parameters": [
        {"name": name, "in": "query", "required": False, "description": info.description,
         "schema": {"type": "string"}}
        for name, info in ((f.alias or n, f) for n, f in TakeOptions.model_fields.items())
    ],
}
_TAKE_BODY = {"requestBody": {"content": {"application/json": {"schema": TakeOptions.model_json_schema(
    by_alias=True)}}}}


async def read_params(request: Request, arrays: frozenset[str]) -> RawParams:
    """Query string plus JSON body (POST), credentials separated out."""
    body = parse_body(await request.body()) if request.method == "POST" else {}
    return collect(method=request.method, raw_query=request.url.query, body=body,
                   header_key=request.headers.get("x-access-key"), array_params=arrays)


def new_reference() -> str:
    """A job id: sortable by time, unguessable."""
    return f"{int(time.time() * 1000):x}{secrets.token_hex(8)}"


@router.get("/take", openapi_extra=_TAKE_DOC, summary="Take a screenshot (parameters in the query)")
async def take_get(request: Request) -> Response:
    return await take(request)


@router.post("/take", openapi_extra=_TAKE_BODY, summary="Take a screenshot (JSON body and/or query)")
async def take_post(request: Request) -> Response:
    return await take(request)


async def take(request: Request) -> Response:
    context: AppContext = request.app.state.context
    started = time.monotonic()
    params = await read_params(request, TAKE_ARRAYS)
    org = await authenticate(params, context.organisations)
    options = parse_take_options(params.values)
    request_params.check(options)
    reference = new_reference()
    result = await run_capture(context, org, options, reference, request.state.trace_id)
    context.metrics.request_seconds.observe(time.monotonic() - started)
    context.metrics.render_seconds.observe(result.rendering_seconds)
    if result.extra.get("blocked_requests"):
        context.metrics.blocked_requests.labels("private_network").inc(result.extra["blocked_requests"])
    return capture_response(context, options, result, reference, request.state.trace_id)


async def run_capture(context: AppContext, org: Organisation, options: TakeOptions, reference: str,
                      trace_id: str) -> JobResult:
    """Reserve a slot, run the job on a worker, settle the quota; raise the job's error if it failed."""
    grace = context.settings.service.result_wait_grace
    await context.quota.reserve(org, reference, options.timeout + grace + SLOT_MARGIN_SECONDS)
    success = False
    try:
        job = JobRequest(
            reference=reference, organisation=org.id, options=options.to_payload(), trace_id=trace_id,
            deadline=time.time() + options.timeout, reply_channel=context.dispatcher.reply_channel,
            store_result=options.response_type == "json", enqueued_at=time.time(),
            vision=vision_request(context, options, reference))
        result = await context.dispatcher.run(job, wait_seconds=options.timeout + grace,
                                              job_timeout=int(options.timeout + grace))
        if result is not None and result.started_at:
            context.metrics.queue_wait_seconds.observe(max(0.0, result.started_at - job.enqueued_at))
        if result is None:
            raise CaptureTimeout(
                f"No worker finished the capture within timeout ({options.timeout} s); the service may be "
                "overloaded: retry, or raise timeout.")
        if not result.ok:
            raise ServiceError.from_payload(result.error or {})
        success = True
        return result
    finally:
        # Shielded: a client hanging up must not leave the slot held until it expires.
        await asyncio.shield(context.quota.settle(org, reference, success=success))


def vision_request(context: AppContext, options: TakeOptions, reference: str) -> dict[str, Any] | None:
    """What the worker needs to ask the vision provider, the caller's key sealed for this job."""
    if options.vision_provider_api_key is None:
        return None
    secret = context.settings.render.job_secret
    if not secret:
        raise RequestNotValid(
            "Vision is not available: this server's API and workers share no SCREENSHOT_JOB_SECRET, so the "
            "key could not reach a worker without being stored. Ask the operator to set it.",
            [ErrorDetail("vision_provider_api_key", "not accepted by this server")])
    return {"key": vision.seal(options.vision_provider_api_key, secret, reference),
            "prompt": options.vision_prompt, "max_tokens": options.vision_max_tokens}


def success_headers(result: JobResult, reference: str, trace_id: str, options: TakeOptions) -> dict[str, str]:
    """The headers every successful capture carries (DESIGN §4)."""
    headers = {
        "x-service-rendering-seconds": f"{result.rendering_seconds:.3f}",
        "x-service-size-bytes": str(result.size_bytes),
        "x-service-reference": reference,
        "x-service-trace-id": trace_id,
    }
    if options.external_identifier is not None:
        headers["x-service-external-identifier"] = options.external_identifier
    return headers


def result_url(context: AppContext, key: str) -> tuple[str, float]:
    """A time-limited URL for a stored object (the backend's own, or one signed for /files) and the
    UNIX time it expires."""
    ttl = context.settings.storage.result_url_ttl
    expires = int(time.time()) + ttl
    url = context.storage.client_url(key, ttl)
    if url is not None:
        return url, expires
    return sign_file_url(context.settings.service.base_url, context.url_secret, key, expires), expires


def capture_response(context: AppContext, options: TakeOptions, result: JobResult, reference: str,
                     trace_id: str) -> Response:
    """by_format: the bytes; json: the DESIGN §4 body; empty: status and headers only. Metadata headers
    go with all three."""
    content_key = result.extra.get("content_key")
    fields, metadata_headers = metadata.present(options, result,
                                                result_url(context, content_key) if content_key else None)
    headers = {**success_headers(result, reference, trace_id, options), **metadata_headers}
    if options.response_type == "by_format":
        return Response(content=result.body, media_type=result.content_type, headers=headers)
    if options.response_type == "empty":
        return Response(status_code=200, headers=headers)
    body: dict[str, Any] = {
        "is_successful": True,
        "screenshot_url": result_url(context, result.storage_key)[0] if result.storage_key else None,
        "format": options.format,
        "size_bytes": result.size_bytes,
        **fields,
    }
    return JSONResponse(body, headers=headers)


def _not_built(route: str, issue: str) -> RequestNotValid:
    return RequestNotValid(f"{route} is not available on this server yet ({issue}).",
                           [ErrorDetail("request", f"{route} is not built yet")])


@router.api_route("/animate", methods=["GET", "POST"], summary="Record a page (not built yet)")
async def animate(request: Request) -> Response:
    raise _not_built("/animate", "page recordings are planned")


@router.post("/bulk", summary="Several screenshots in one request (not built yet)")
async def bulk(request: Request) -> Response:
    raise _not_built("/bulk", "bulk requests are planned")
