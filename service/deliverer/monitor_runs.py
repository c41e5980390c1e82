"""The firing of monitor runs, in the deliverer (`screenshot-service webhooks`): `fire` (the RQ job function
render.queue.rq_jobs.fire runs) schedules the monitor's next run first (service.monitor_schedule), then starts this
one as an async capture job whose worker compares it with the last success and records it
(render.queue.monitors.record_run).

A monitor runs one run at a time: a run due while the one before it still waits or renders (a slow page, a busy
fleet) is skipped, as a cron job that forbids overlap skips it, and the next comes at the schedule's next time.
Otherwise runs would overlap, each compared with whichever finished last, and a failure past
`pause_after_failures` would still find the next run under way.

A run is started once however often it fires: two schedulers moving it, a deliverer killed while firing it and the
run fired again after the restart (`resume_interrupted`) all meet the same `monitor-fired:<id>:<due>` claim and the
same run reference, and only a run whose job record does not exist yet is offered to the workers.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass

import orjson
import redis

from render.contract import sealing
from render.contract.errors import ServiceError
from render.contract.monitors import MonitorOrder, next_due
from render.contract.options import TakeOptions
from render.contract.wire import Capture, JobRequest, JobResult, Recorded
from render.queue import endings, lanes, monitors
from render.queue.keys import (
    COUNTERS_KEY,
    MONITORS_DUE_KEY,
    job_key,
    lane_key,
    monitor_fired_key,
)
from render.queue.ledger import settle_now
from render.queue.records import queued_fields
from service.errors import ConcurrencyLimitReached, ScreenshotsLimitReached, TemporaryUnavailable, over_share
from service.monitor_schedule import RETRIES, RETRY_SECONDS, run_reference, schedule_run, sealed_for
from service.organisations import organisation_by_id
from service.quota import hold_now, slot_hold
from service.settings import Settings
from service.times import iso_time

log = logging.getLogger(__name__)
FIRED_KEEP_SECONDS = 7 * 86400
FIRING_SECONDS = 30  # a claim this old whose run has no job record: its firer died before offering it


@dataclass
class Firing:
    """What `fire` needs of its deliverer process: settings and Redis."""

    settings: Settings
    redis: redis.Redis


_firing: Firing | None = None


def install(firing: Firing) -> None:
    global _firing  # noqa: PLW0603 (one deliverer process, installed once)
    _firing = firing


def fire(monitor_id: str, due: int, revision: int, attempt: int = 0) -> str:
    """RQ entry point: start the run of `monitor_id` due at `due`. Returns what it did (kept as RQ's result)."""
    if _firing is None:
        raise RuntimeError("monitor runs fire only inside `screenshot-service webhooks`")
    connection, settings = _firing.redis, _firing.settings
    monitor = monitors.load(connection, monitor_id)
    if monitor is None or monitor.spec.paused:
        connection.zrem(MONITORS_DUE_KEY, monitor_id)
    if monitor is None or monitor.revision != revision or monitor.spec.paused:
        return "dropped: the monitor was deleted, changed or paused since this run was scheduled"
    if not attempt:  # the chain goes on whatever becomes of this run
        schedule_run(connection, monitor_id, next_due(monitor.spec.schedule, due, time.time()), revision)
    reference = run_reference(monitor_id, due)
    if connection.exists(job_key(reference)):
        return f"already started as {reference}"
    running = monitors.under_way(connection, monitor_id)
    if running is not None:  # one run at a time: this one is skipped, the chain goes on
        connection.hincrby(COUNTERS_KEY, "monitor_skipped", 1)
        log.info("monitor %s: run due %s skipped, its run %s still under way", monitor_id, iso_time(due), running)
        return f"skipped: the run {running} is still under way"
    if not attempt and not claim(connection, monitor_id, due):
        return f"already started as {reference}"
    try:
        start_run(connection, settings, monitor, due, reference)
    except (ConcurrencyLimitReached, TemporaryUnavailable) as busy:
        if attempt < RETRIES:
            schedule_run(connection, monitor_id, due, revision, attempt + 1)
            return f"retrying in {RETRY_SECONDS} s: {busy.code}"
        fail_run(connection, settings, monitor, due, reference, busy)
        return f"failed: {busy.code}"
    except ServiceError as failed:  # the quota spent, the organisation revoked, its secrets unreadable here
        fail_run(connection, settings, monitor, due, reference, failed)
        return f"failed: {failed.code}"
    return f"started {reference}"


def claim(connection: redis.Redis, monitor_id: str, due: int) -> bool:
    """Whether this firing of the run due at `due` is the one to start it: the first, or one coming after a firing
    that died before it offered the run (its claim older than FIRING_SECONDS and still no job record)."""
    key = monitor_fired_key(monitor_id, due)
    now = time.time()
    if connection.set(key, repr(now), nx=True, ex=FIRED_KEEP_SECONDS):
        return True
    held = connection.get(key)
    if held is None or now - float(held) <= FIRING_SECONDS:
        return False
    return bool(connection.set(key, repr(now), xx=True, ex=FIRED_KEEP_SECONDS))


def _job(settings: Settings, monitor: monitors.Monitor, due: int, reference: str, options: TakeOptions | None
         ) -> JobRequest:
    spec, service = monitor.spec, settings.service
    webhook = None if spec.webhook_url is None else service.webhook_order(
        spec.webhook_url, sign=spec.webhook_sign, errors=spec.webhook_errors)
    order = MonitorOrder(monitor=monitor.id, due=due, threshold=spec.threshold)
    public, sealed = (spec.request, None) if options is None else sealing.seal_job(
        options, settings.render.job_secret, reference)
    return JobRequest(reference=reference, organisation=monitor.organisation, trace_id=uuid.uuid4().hex,
                      work=Capture(options=public, sealed=sealed, store=True),
                      answer=Recorded(timeout=float(spec.request.get("timeout", 60)), monitor=order),
                      webhook=webhook, enqueued_at=time.time())


def start_run(connection: redis.Redis, settings: Settings, monitor: monitors.Monitor, due: int,
              reference: str) -> None:
    """Reserve the run's slot and offer it to the workers as an async job (its record written with it)."""
    org = organisation_by_id(connection, monitor.organisation)
    if org is None or org.revoked:
        raise ScreenshotsLimitReached("The monitor's organisation is revoked.")
    options = TakeOptions.model_validate(sealing.open_job(
        monitor.spec.request, monitor.sealed, settings.render.job_secret, sealed_for(monitor.id)))
    job = _job(settings, monitor, due, reference, options)
    assert isinstance(job.answer, Recorded)
    hold_now(connection, org, reference, slot_hold(job.answer.timeout, settings.service.result_wait_grace, queued=True))
    record = queued_fields(org.id, monitor=monitor.id, payload=orjson.dumps(job.to_json()).decode())
    keys, args = lanes.offer_call(lane_key(options.servers_region or None), job, lanes.ASYNC, lanes.BATCH,
                                  settings.service.max_queue, record)
    offered = lanes.Offered.from_reply(lanes.OFFER.on(connection)(keys=keys, args=args))
    if not offered.added:
        settle_now(connection, org.id, reference, success=False)
        raise over_share(offered, settings.service.max_queue)
    monitors.started(connection, monitor.id, reference)
    log.info("monitor %s: run %s due %s started", monitor.id, reference, iso_time(due))


def fail_run(connection: redis.Redis, settings: Settings, monitor: monitors.Monitor, due: int, reference: str,
             error: ServiceError) -> None:
    """A run that could not start: recorded failed (and its webhook told with webhook_errors)."""
    job = _job(settings, monitor, due, reference, None)
    message = f"{error.message} The run due at {iso_time(due)} did not start."
    endings.end(connection, job, JobResult(reference, ok=False, error={
        "error_code": error.code, "error_message": message}))
