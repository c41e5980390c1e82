"""`/v1/monitors`: pages watched on a schedule. Create, list, show, change, delete a monitor, and read
its runs. Each run is a capture charged as one, compared with the monitor's last success by its worker; the
monitor's webhook is told of changes (service.deliverer.monitor_runs fires the runs, render.queue.monitors keeps them).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse

from render.contract import sealing
from render.contract.comparing import check_comparable
from render.contract.errors import ErrorDetail, NameNotResolved, RequestNotValid, ServiceError
from render.contract.monitors import KEEP_RUNS_MAX, MonitorSpec, next_due
from render.contract.validation import validate_all
from render.net.policy import check_url
from render.queue import monitors
from service import monitor_schedule
from service.api import openapi
from service.api.auth import Caller, body_caller, caller
from service.api.capture_path import entry_options
from service.api.context import AppContext
from service.api.routes.compare import in_side
from service.errors import MonitorNotFound
from service.organisations import Organisation
from service.results import present_run
from service.times import iso_time

router = APIRouter(prefix="/v1/monitors", tags=["monitors"])
T = TypeVar("T")
JSON_SECURED = openapi.json_body("MonitorSpec")


async def in_redis(context: AppContext, work: Callable[..., T], *args: Any) -> T:
    """A render.queue.monitors call (synchronous Redis) off the event loop."""
    return await anyio.to_thread.run_sync(work, context.dispatcher.sync_redis, *args)


def check_schedule(context: AppContext, spec: MonitorSpec) -> None:
    """Runs no closer than SCREENSHOT_MONITOR_MIN_INTERVAL."""
    least = context.settings.service.monitor_min_interval
    if spec.schedule.shortest_gap() < least:
        raise RequestNotValid(f"schedule: runs must be at least {least} s apart (SCREENSHOT_MONITOR_MIN_INTERVAL).",
                              [ErrorDetail("schedule", f"runs closer than {least} s")])


async def checked(context: AppContext, body: dict[str, Any], stored: monitors.Monitor | None = None
                  ) -> tuple[MonitorSpec, Any]:
    """A monitor's spec, every rule checked: the one path of create and change. Its request is validated as
    /take's (fields named `request.<name>`), unless a change keeps `stored`'s (options None then: its sealed
    secrets stay); the schedule's spacing and the webhook under the network policy, always."""
    spec = validate_all(MonitorSpec, {k: v for k, v in body.items() if k != "access_key"})
    options = None
    if stored is None or body.get("request") != stored.spec.request:
        try:
            options = entry_options(spec.request, "in a monitor; its runs are async and it has its own webhook_url")
        except ServiceError as error:
            raise in_side(error, "request") from None
        check_comparable(options, "request")
        if options.url is not None:  # its page under the policy now, not only at each run
            try:
                await check_url("url", options.url, context.policy)
            except NameNotResolved:  # it may resolve by its first run; that run says so if not
                pass
            except ServiceError as error:
                raise in_side(error, "request") from None
    check_schedule(context, spec)
    if spec.webhook_url is not None:
        await check_url("webhook_url", spec.webhook_url, context.policy, unresolvable_is_invalid=True)
    return spec, options


def shown(monitor: monitors.Monitor, context: AppContext) -> dict[str, Any]:
    """A monitor as the API shows it (its request without the secrets, which stay sealed)."""
    return {"id": monitor.id, **monitor.spec.model_dump(mode="json"), "paused_reason": monitor.paused_reason,
            "failures_in_row": monitor.failures_in_row, "created": iso_time(monitor.created),
            "updated": iso_time(monitor.updated),
            "next_run": iso_time(monitor.next_run) if monitor.next_run and not monitor.spec.paused else None,
            "last_run": present_run(monitor.last_run, context.links) if monitor.last_run else None}


async def owned(context: AppContext, org: Organisation, monitor_id: str) -> monitors.Monitor:
    monitor = await in_redis(context, monitors.load, monitor_id)
    if monitor is None or monitor.organisation != org.id:
        raise MonitorNotFound(f"No monitor {monitor_id} of this organisation is known.",
                              [ErrorDetail("monitor_id", "unknown")])
    return monitor


@router.post("", openapi_extra=JSON_SECURED, responses=openapi.json_responses("Monitor", 400, 413, success=201),
             status_code=201, summary="Create a monitor: a capture on a schedule, its webhook told of changes")
async def create(request: Request) -> Response:
    context: AppContext = request.app.state.context
    org, body, _ = await body_caller(request, "MonitorSpec")
    spec, options = await checked(context, body)
    most = context.settings.service.monitors_max
    monitor_id = f"mon_{secrets.token_hex(8)}"
    public, sealed = sealing.seal_job(options, context.settings.render.job_secret,
                                      monitor_schedule.sealed_for(monitor_id))
    now = time.time()
    monitor = monitors.Monitor(id=monitor_id, organisation=org.id, spec=spec.model_copy(update={"request": public}),
                               sealed=sealed, created=now, updated=now)
    if not await in_redis(context, monitors.create, monitor, most):  # counted and created in one step
        raise RequestNotValid(f"This organisation has {most} monitors, the most it may have "
                              "(SCREENSHOT_MONITORS_MAX): delete one first.", [ErrorDetail("monitors", "too many")])
    if not spec.paused:  # the first run at once: the baseline the next ones are compared with
        await in_redis(context, monitor_schedule.schedule_run, monitor_id, int(now), monitor.revision)
    stored = await owned(context, org, monitor_id)
    return JSONResponse(shown(stored, context), status_code=201)


@router.get("", openapi_extra={"security": openapi.SECURED}, responses=openapi.json_responses("Monitors", 400),
            summary="The organisation's monitors")
async def list_monitors(request: Request, who: Annotated[Caller, Depends(caller())]) -> Response:
    context: AppContext = request.app.state.context
    found = [await in_redis(context, monitors.load, monitor_id)
             for monitor_id in await in_redis(context, monitors.ids_of, who.organisation.id)]
    return JSONResponse({"monitors": [shown(monitor, context) for monitor in found if monitor is not None]})


@router.get("/{monitor_id}", openapi_extra={"security": openapi.SECURED},
            responses=openapi.json_responses("Monitor", 400, 404), summary="A monitor")
async def show(request: Request, monitor_id: str, who: Annotated[Caller, Depends(caller())]) -> Response:
    context: AppContext = request.app.state.context
    return JSONResponse(shown(await owned(context, who.organisation, monitor_id), context))


@router.patch("/{monitor_id}", openapi_extra=openapi.json_body("MonitorChange"),
              responses=openapi.json_responses("Monitor", 400, 404),
              summary="Change a monitor (pause, resume, new schedule, request or webhook)")
async def change(request: Request, monitor_id: str) -> Response:
    context: AppContext = request.app.state.context
    org, body, _ = await body_caller(request, "MonitorChange")
    if not (await request.body()).strip():  # `{}` changes nothing, as a merge does; no body at all is a mistake
        raise RequestNotValid("The body is required: a JSON object of the fields to change (`{}` changes nothing).",
                              [ErrorDetail("body", "missing")])
    monitor = await owned(context, org, monitor_id)
    merged = {**monitor.spec.model_dump(mode="json"), **{k: v for k, v in body.items() if k != "access_key"}}
    if body.get("request") is None:  # the stored request keeps its sealed secrets
        merged["request"] = monitor.spec.request
    spec, options = await checked(context, merged, monitor)
    sealed = monitor.sealed
    if options is not None:
        public, sealed = sealing.seal_job(options, context.settings.render.job_secret,
                                          monitor_schedule.sealed_for(monitor_id))
        spec = spec.model_copy(update={"request": public})
    await in_redis(context, monitor_schedule.cancel_run, monitor_id, monitor.next_run)
    updated = await in_redis(context, monitors.change, monitor, spec, sealed)
    if not spec.paused:
        due = next_due(spec.schedule, time.time(), time.time())
        await in_redis(context, monitor_schedule.schedule_run, monitor_id, due, updated.revision)
    return JSONResponse(shown(await owned(context, org, monitor_id), context))


@router.delete("/{monitor_id}", openapi_extra={"security": openapi.SECURED},
               responses=openapi.json_responses("Deleted", 400, 404),
               summary="Delete a monitor and its history (stored images expire with their links)")
async def delete(request: Request, monitor_id: str, who: Annotated[Caller, Depends(caller())]) -> Response:
    context: AppContext = request.app.state.context
    monitor = await owned(context, who.organisation, monitor_id)
    await in_redis(context, monitor_schedule.cancel_run, monitor_id, monitor.next_run)
    await in_redis(context, monitors.delete, monitor)
    return JSONResponse({"is_successful": True, "id": monitor_id})


@router.get("/{monitor_id}/runs", openapi_extra={"security": openapi.SECURED},
            responses=openapi.json_responses("MonitorRuns", 400, 404),
            summary="A monitor's runs, newest first: image and diff links, change score")
async def runs(request: Request, monitor_id: str, who: Annotated[Caller, Depends(caller())],
               limit: Annotated[int, Query(ge=1, le=KEEP_RUNS_MAX)] = 20) -> Response:
    context: AppContext = request.app.state.context
    await owned(context, who.organisation, monitor_id)
    found = await in_redis(context, monitors.runs, monitor_id, limit)
    return JSONResponse({"runs": [present_run(run, context.links) for run in found]})
