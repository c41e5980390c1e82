"""`POST /compare`: two shots of a page compared: what changed (share of pixels, SSIM, boxes) and a diff image.

Each side is either /take parameters, captured now (charged as a capture), or the reference of an earlier image
result of the organisation. The comparison itself runs on a worker (libvips) as a compare job and is not
charged; the three images are stored and linked like any result.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response

from render.contract.comparing import Change, CompareJob, CompareRequest, check_comparable
from render.contract.errors import CaptureTimeout, ErrorDetail, RequestNotValid, ServiceError
from render.contract.formats import FORMATS
from render.contract.options import TakeOptions
from render.contract.validation import validate_all
from render.contract.wire import Compare, JobResult, Waiting
from render.net.policy import check_url
from render.queue.records import queued_fields
from service.api import openapi
from service.api.auth import body_caller
from service.api.capture_path import entry_options, new_job, new_reference, run_capture
from service.api.context import AppContext
from service.errors import within
from service.organisations import Organisation
from service.times import iso_time

router = APIRouter(prefix="/v1/screenshot", tags=["capture"])
COMPARE_TIMEOUT_SECONDS = 60  # a compare job's own deadline: two 16,000 x 60,000 px shots take a few seconds
SIDES = ("before", "after")


def in_side(error: ServiceError, side: str) -> ServiceError:
    """`error` of one side (or of a monitor's request), its message and fields naming it (`before.format`)."""
    return within(error, side, side)


def side_options(side: str, params: dict[str, Any]) -> TakeOptions | str:
    """A side's /take options, or the reference it names."""
    if "reference" in params:
        reference = params["reference"]
        if set(params) != {"reference"} or not isinstance(reference, str) or not reference:
            raise RequestNotValid(f"{side} is either /take parameters or {{\"reference\": ...}} alone.",
                                  [ErrorDetail(f"{side}.reference", "a reference, with no other field")])
        return reference
    try:
        options = entry_options({k: v for k, v in params.items() if k not in ("access_key", "signature")},
                                "in a compare; it answers itself")
    except ServiceError as error:
        raise in_side(error, side) from None
    check_comparable(options, side)
    return options


def both_sides(wanted: CompareRequest) -> dict[str, TakeOptions | str]:
    """Each side's options or reference; the problems of both sides at once."""
    sides: dict[str, TakeOptions | str] = {}
    problems: list[ServiceError] = []
    for side in SIDES:
        try:
            sides[side] = side_options(side, getattr(wanted, side))
        except ServiceError as error:
            problems.append(error)
    if len(problems) == 1 or (problems and not all(isinstance(p, RequestNotValid) for p in problems)):
        raise problems[0]
    if problems:
        raise RequestNotValid("; ".join(problem.message for problem in problems),
                              [detail for problem in problems for detail in problem.details])
    return sides


async def earlier_shot(context: AppContext, org: Organisation, side: str, reference: str) -> str:
    """The storage key of an earlier image result of `org`, or an error naming the side."""
    record = await context.records.get(reference)
    field = f"{side}.reference"
    if record.get("organisation") != org.id:
        raise RequestNotValid(f"{side}: no result {reference} of this organisation is known.",
                              [ErrorDetail(field, "unknown reference")])
    if record.get("status") != "done" or not record.get("storage_key"):
        raise RequestNotValid(f"{side}: the job {reference} has no stored result (it is {record.get('status')}; "
                              "results are stored with response_type=json, async or a webhook).",
                              [ErrorDetail(field, "no stored result")])
    if not record.get("content_type", "").startswith("image/"):
        raise RequestNotValid(f"{side}: the result of {reference} is not an image.",
                              [ErrorDetail(field, "not an image result")])
    return record["storage_key"]


async def shots(context: AppContext, org: Organisation, sides: dict[str, TakeOptions | str], trace_id: str
                ) -> dict[str, tuple[str, str]]:
    """(reference, storage key) of each side: earlier results looked up, the others captured (at once when the
    organisation's concurrency allows both)."""
    found: dict[str, tuple[str, str]] = {}
    for side, wanted in sides.items():
        if isinstance(wanted, str):
            found[side] = (wanted, await earlier_shot(context, org, side, wanted))

    async def capture(side: str, options: TakeOptions) -> None:
        reference = new_reference()
        try:
            result = await run_capture(context, org, options, reference, trace_id, store=True)
        except ServiceError as error:
            raise in_side(error, side) from None
        assert result.storage_key is not None
        found[side] = (reference, result.storage_key)

    to_capture = [(side, wanted) for side, wanted in sides.items() if isinstance(wanted, TakeOptions)]
    if len(to_capture) == 2 and org.concurrency >= 2:
        try:
            async with asyncio.TaskGroup() as group:
                for side, options in to_capture:
                    group.create_task(capture(side, options))
        except ExceptionGroup as failed:  # a side's own error, the first side's when both failed (not a 500)
            errors = [error for error in failed.exceptions if isinstance(error, ServiceError)]
            if not errors:
                raise
            raise min(errors, key=lambda error: error.message.startswith("after")) from None
    else:
        for side, options in to_capture:
            await capture(side, options)
    return found


async def run_compare(context: AppContext, org: Organisation, before: str, after: str, threshold: int,
                      trace_id: str, *, keep_body: bool) -> JobResult:
    """The compare job on a worker: the diff stored, the change in `metadata["comparison"]`."""
    reference = new_reference()
    job = new_job(org, reference, trace_id, Compare(CompareJob(before, after, threshold), keep_body=keep_body),
                  Waiting(context.dispatcher.reply_channel, deadline=time.time() + COMPARE_TIMEOUT_SECONDS))
    result = await context.dispatcher.run(job, wait_seconds=COMPARE_TIMEOUT_SECONDS
                                          + context.settings.service.result_wait_grace,
                                          record=queued_fields(org.id))
    if result is None:
        raise CaptureTimeout(f"No worker compared the shots within {COMPARE_TIMEOUT_SECONDS} s; the service may be "
                             "overloaded: retry.")
    if not result.ok:
        raise ServiceError.from_payload(result.error or {})
    return result


@router.post("/compare", openapi_extra=openapi.json_body("CompareRequest"),
             responses=openapi.compare_responses(),
             summary="Compare two shots of a page: what changed, and a diff image")
async def compare(request: Request) -> Response:
    context: AppContext = request.app.state.context
    org, body, _ = await body_caller(request, "CompareRequest")
    wanted = validate_all(CompareRequest, body)
    sides = both_sides(wanted)
    for side, options in sides.items():  # both sides' pages under the policy before either is captured or charged
        if isinstance(options, TakeOptions) and options.url is not None:
            try:
                await check_url("url", options.url, context.policy)
            except ServiceError as error:
                raise in_side(error, side) from None
    trace_id = request.state.trace_id
    found = await shots(context, org, sides, trace_id)
    result = await run_compare(context, org, found["before"][1], found["after"][1], wanted.threshold, trace_id,
                               keep_body=wanted.response_type == "by_format")
    change = Change.from_json(result.metadata["comparison"])
    changed = change.changed(wanted.change_threshold)
    assert result.storage_key is not None
    links = {"diff": context.links.url(result.storage_key),
             **{side: context.links.url(found[side][1]) for side in SIDES}}
    headers = {"x-service-reference": result.reference, "x-service-trace-id": trace_id,
               "x-service-changed": "true" if changed else "false",
               "x-service-change-share": f"{change.changed_share:.6f}", "x-service-change-ssim": f"{change.ssim:.6f}",
               **{f"x-service-{name}-url": url for name, (url, _) in links.items()}}
    if wanted.response_type == "by_format":
        return Response(result.body, media_type=FORMATS["png"].media_type, headers=headers)
    answer = {"is_successful": True, "reference": result.reference, "changed": changed, "change": change.to_json(),
              **{name: {"url": url, "expires": iso_time(expires),
                        **({"reference": found[name][0]} if name in found else {})}
                 for name, (url, expires) in links.items()}}
    return Response(orjson.dumps(answer), media_type="application/json", headers=headers)
