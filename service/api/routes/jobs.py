"""`/jobs/{reference}` (beyond the spec): an async job's state and answer, and its cancellation.

GET answers the state (queued; rendering, with the stage an async job is in; done, failed, cancelled) and, for a
done job, what the synchronous JSON answer would have held (screenshot_url, format, size_bytes, metadata...), with
fresh links. DELETE cancels a job that no worker has started: it is never rendered and nothing is charged (its
concurrency slot is freed at once); a job already rendering runs to its end and is charged if it succeeds, as the
answer says.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from animate.options import AnimateOptions
from render.contract import sealing
from render.contract.errors import ErrorDetail, InternalError
from render.contract.options import TakeOptions
from render.contract.wire import JobResult
from render.queue.endings import ANSWER_PURPOSE
from render.queue.lane_scripts import Cancel
from render.queue.records import job_record_ttl
from service.api import openapi
from service.api.auth import Caller, caller
from service.api.context import AppContext
from service.errors import JobNotFound
from service.organisations import Organisation
from service.results import present_success

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1/screenshot", tags=["capture"])
# What DELETE says of a job it could not cancel, by its state.
NOT_CANCELLED = {
    "rendering": "A worker is rendering it: it runs to its end and is charged if it succeeds.",
    "queued": "It is a synchronous capture (its client waits for it) or a monitor's run (pause the monitor): it "
              "is not cancelled by reference.",
    "done": "It had finished: it was charged.",
    "failed": "It had failed: nothing was charged.",
    "cancelled": "It was cancelled before: nothing was charged.",
}


async def own_record(context: AppContext, org: Organisation, reference: str) -> dict[str, str]:
    """The job's record, if it is this organisation's (404 otherwise, as for a job nobody knows)."""
    record = await context.records.get(reference)
    if record.get("organisation") != org.id:
        raise JobNotFound(f"No job {reference} of this organisation is known (jobs are kept "
                          f"{job_record_ttl() / 86400:g} days: SCREENSHOT_JOB_RECORD_TTL).",
                          [ErrorDetail("reference", "unknown")])
    return record


def answer_of(context: AppContext, reference: str, record: dict[str, str]) -> dict[str, Any]:
    """A done job's synchronous JSON answer (links signed now), from the facts its finisher recorded."""
    bare = {"screenshot_url": context.links.url(record["storage_key"])[0]} if record.get("storage_key") else {}
    if "answer" not in record:  # a synchronous job's, or one finished before answers were recorded
        return bare
    try:
        stored = orjson.loads(sealing.unseal(record["answer"], context.settings.render.job_secret, reference,
                                             ANSWER_PURPOSE))
    except sealing.Unsealable:  # sealed with a secret this API does not have (rotated since)
        log.warning("the answer of job %s could not be opened (SCREENSHOT_JOB_SECRET changed?)", reference)
        return bare
    model = AnimateOptions if stored.get("kind") == "animate" else TakeOptions
    options = model.model_validate({**stored["options"], "response_type": "json"})
    presented = present_success(options, JobResult.from_meta(stored["result"]), reference,
                                record.get("trace_id", ""), context.links)
    answer: dict[str, Any] = orjson.loads(presented.body)
    return answer


async def state_of(context: AppContext, reference: str, record: dict[str, str]) -> dict[str, Any]:
    # A sync job whose worker died is answered failed by its waiting API; an async one (its request kept in
    # `payload`) is offered again once, or finished by the sweep of orphans.
    if record.get("status") == "rendering" and "payload" not in record and await context.dispatcher.worker_died(
            reference):
        record["status"] = "failed"
        record["error"] = json.dumps(InternalError(
            "The worker rendering this capture stopped (it crashed or was killed); send it again.").to_payload())
    body: dict[str, Any] = {"is_successful": True, "reference": reference, "status": record.get("status")}
    if record.get("status") == "rendering" and record.get("stage"):  # an async job's (render.contract.timings)
        body["stage"] = record["stage"]
    if record.get("status") == "failed" and record.get("error"):
        error = json.loads(record["error"])
        body["error_code"] = error.get("error_code")
        body["error_message"] = error.get("error_message")
    if record.get("status") == "done":
        body.update({name: value for name, value in answer_of(context, reference, record).items()
                     if name != "is_successful"})
    if "webhook" in record:
        body["webhook"] = {"status": record["webhook"], "attempts": int(record.get("webhook_attempts", 0))}
    return body


@router.get("/jobs/{reference}", openapi_extra={"security": openapi.SECURED},
            responses=openapi.json_responses("Job", 400, 404),
            summary="State of a job (beyond the spec): queued, rendering, done (with its answer), failed, cancelled")
async def job_status(request: Request, reference: str, who: Annotated[Caller, Depends(caller())]) -> Response:
    context: AppContext = request.app.state.context
    record = await own_record(context, who.organisation, reference)
    return JSONResponse(await state_of(context, reference, record))


@router.delete("/jobs/{reference}", openapi_extra={"security": openapi.SECURED},
               responses=openapi.json_responses("Cancellation", 400, 404),
               summary="Cancel an async job no worker has started (beyond the spec): never rendered, not charged")
async def cancel_job(request: Request, reference: str, who: Annotated[Caller, Depends(caller())]) -> Response:
    context: AppContext = request.app.state.context
    org = who.organisation
    await own_record(context, org, reference)
    cancelled = await context.records.cancel(reference) == Cancel.CANCELLED
    if cancelled:
        await context.quota.settle(org, reference, success=False)  # the slot freed, nothing charged
        log.info("job %s of organisation %s cancelled before it started", reference, org.id)
    record = await own_record(context, org, reference)
    body = await state_of(context, reference, record)
    status = str(body.get("status"))
    body["cancelled"] = cancelled
    if cancelled:
        body["charged"] = False
        body["message"] = "Cancelled before any worker started it: it will not be rendered; nothing was charged."
    else:
        if status in ("done", "failed", "cancelled"):
            body["charged"] = status == "done"
        body["message"] = NOT_CANCELLED.get(status, NOT_CANCELLED["queued"])
    return JSONResponse(body)
