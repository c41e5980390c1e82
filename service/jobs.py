"""Jobs nobody waits for (async, webhooks), and every job's record for GET /jobs/{reference}.

`capture_async` runs in a render worker (enqueued by dotted path): it renders, stores the result,
settles the quota, records the outcome and queues the webhook, so the whole life of an async job
survives the API that accepted it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

import orjson
import redis
import redis.asyncio as aioredis
from rq.job import Job

from render.errors import InternalError
from render.protocol import (
    JOB_RECORD_TTL_SECONDS,
    OFFERED_KEY,
    Absences,
    JobRequest,
    JobResult,
    alive_key,
    job_key,
    mark_job,
)
from service import webhooks
from service.organisations import text
from service.quota import settle_now
from service.settings import Settings, load_settings

log = logging.getLogger(__name__)
IN_FLIGHT_KEY = "jobs:async:in-flight"  # references of async jobs a worker is rendering
SWEEP_LOCK_SECONDS = 60
UNCLAIMED_SECONDS = 3.0  # a live worker claims an async job within milliseconds of taking it from its queue


def webhook_delivery(job: JobRequest, result: JobResult, webhook: dict[str, Any]) -> webhooks.Delivery | None:
    """The delivery a finished job owes its webhook, if any (failures only with webhook_errors)."""
    if not result.ok and not webhook.get("errors"):
        return None
    meta = result.meta()
    return webhooks.Delivery(
        reference=job.reference, organisation=job.organisation, url=webhook["url"], sign=bool(webhook["sign"]),
        trace_id=job.trace_id, options=job.options, result=meta if result.ok else None,
        error=None if result.ok else result.error)


_settings: Settings | None = None


def _service_settings() -> Settings:
    global _settings
    if _settings is None:
        _settings = load_settings()
    return _settings


def capture_async(payload: dict[str, Any], webhook: dict[str, Any] | None) -> dict[str, Any]:
    """RQ entry point for async and webhook jobs: render, then finish everything the API would have."""
    from render import jobs as render_jobs  # the worker's side only: the API never loads Playwright

    worker = render_jobs.runtime()
    assert worker.redis is not None
    job = JobRequest.from_json(payload)
    # Time spent waiting in the queue is not the capture's: its timeout starts now.
    job = replace(job, deadline=time.time() + job.timeout)
    with worker.redis.pipeline() as pipe:  # both or neither: the sweeper reads them together
        pipe.hset(job_key(job.reference), mapping={"status": "rendering", "worker": worker.name})
        pipe.sadd(IN_FLIGHT_KEY, job.reference)
        pipe.hdel(OFFERED_KEY, job.reference)  # claimed
        pipe.execute()
    result = worker.handle(job)
    finish(worker.redis, job, result, webhook)
    return {"ok": result.ok, "error_code": (result.error or {}).get("error_code")}


def finish(connection: redis.Redis, job: JobRequest, result: JobResult, webhook: dict[str, Any] | None) -> None:
    """Settle the quota (charged only on success, slot freed), record the outcome, owe the webhook."""
    settle_now(connection, job.organisation, job.reference, success=result.ok)
    mark_job(connection, job.reference, **result.record_fields())
    # The request was kept for the sweeper while the job could be orphaned; the record outlives it by days.
    connection.hdel(job_key(job.reference), "payload")
    connection.srem(IN_FLIGHT_KEY, job.reference)
    if webhook is not None:
        delivery = webhook_delivery(job, result, webhook)
        if delivery is not None:
            settings = _service_settings().service
            webhooks.enqueue(connection, delivery, webhooks.schedule_of(settings.webhook_retry_schedule),
                             settings.webhook_timeout)


def sweep_orphans(connection: redis.Redis, absences: Absences) -> int:
    """Finish the async jobs whose worker died while rendering them (its heartbeat lapsed): failed,
    nothing charged, slot freed, `webhook_errors` receivers told. Run by every API every few seconds; a
    lock per job makes one of them do it. Returns how many it finished."""
    finished = 0
    for raw in connection.smembers(IN_FLIGHT_KEY):
        reference = text(raw)
        record = {text(k): text(v) for k, v in connection.hgetall(job_key(reference)).items()}
        if record.get("status") != "rendering":
            connection.srem(IN_FLIGHT_KEY, reference)  # finished meanwhile, or its record expired
            continue
        worker = record.get("worker", "")
        if not absences.gone(worker, bool(connection.exists(alive_key(worker)))):
            continue
        if not connection.set(f"sweep:{reference}", "1", nx=True, ex=SWEEP_LOCK_SECONDS):
            continue  # another API is on it
        payload = record.get("payload")
        if not payload:
            connection.srem(IN_FLIGHT_KEY, reference)
            continue
        parts = orjson.loads(payload)
        job = JobRequest.from_json(parts["job"])
        error = InternalError("The worker rendering this job stopped (it crashed or was killed); nothing was "
                              "charged. Submit it again.")
        log.warning("async job %s lost its worker %s; finished as failed", reference, record.get("worker"))
        finish(connection, job, JobResult(reference, ok=False, error=error.to_payload()), parts["webhook"])
        finished += 1
    return finished


def sweep_unclaimed(connection: redis.Redis, missing_since: dict[str, float]) -> int:
    """Offer again the async jobs that left their queue but reached no worker. Redis hands a queued job to
    whichever worker's blocking pop waits longest, even one whose network just went away: the job leaves the
    queue and nobody renders it. A job neither in its queue nor claimed for UNCLAIMED_SECONDS goes back to
    the head of its queue. `missing_since` (reference -> when first seen missing) is the caller's, kept
    between sweeps. Returns how many it offered again."""
    offered = 0
    now = time.monotonic()
    for raw_reference, raw_queue in connection.hgetall(OFFERED_KEY).items():
        reference, queue = text(raw_reference), text(raw_queue)
        if connection.hget(job_key(reference), "worker") or not Job.exists(reference, connection):
            connection.hdel(OFFERED_KEY, reference)  # claimed, or RQ let it expire in the queue
            missing_since.pop(reference, None)
            continue
        if connection.lpos(queue, reference) is not None:
            missing_since.pop(reference, None)
            continue
        if now - missing_since.setdefault(reference, now) < UNCLAIMED_SECONDS:
            continue
        missing_since.pop(reference, None)
        if connection.set(f"reoffer:{reference}", "1", nx=True, ex=int(UNCLAIMED_SECONDS * 3)):
            log.warning("async job %s left its queue but no worker claimed it (a worker's connection broke as "
                        "it took it?); offered again", reference)
            connection.lpush(queue, reference)
            offered += 1
    return offered


class JobRecords:
    """The API's side of job records (a synchronous job's is written by `Dispatcher.run` and its worker)."""

    def __init__(self, connection: aioredis.Redis) -> None:
        self._redis = connection

    @staticmethod
    def queued_fields(organisation: str) -> dict[str, str]:
        return {"organisation": organisation, "status": "queued", "created": str(time.time())}

    async def queued(self, reference: str, organisation: str, *, job: JobRequest | None = None,
                     webhook: dict[str, Any] | None = None) -> None:
        """A new job's record; an async `job` keeps what `sweep_orphans` needs to finish it if its worker dies."""
        fields = self.queued_fields(organisation)
        if job is not None:
            fields["payload"] = orjson.dumps({"job": job.to_json(), "webhook": webhook}).decode()
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(job_key(reference), mapping=fields)  # type: ignore[arg-type]
            pipe.expire(job_key(reference), JOB_RECORD_TTL_SECONDS)
            await pipe.execute()

    async def finished(self, reference: str, result: JobResult) -> None:
        await self._redis.hset(job_key(reference), mapping=result.record_fields())  # type: ignore[arg-type]

    async def get(self, reference: str) -> dict[str, str]:
        return {text(k): text(v) for k, v in (await self._redis.hgetall(job_key(reference))).items()}
