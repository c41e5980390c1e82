"""The life of an async job in Redis, from its worker's claim to its end: whoever finishes it (its worker,
or an API's sweeper when the worker died) settles the quota, records the outcome and owes the webhook, so
the whole life of an async job survives the API that accepted it and the worker that took it.
"""

from __future__ import annotations

import logging
import time

import orjson
import redis
from rq.job import Job

from render.contract.errors import InternalError
from render.contract.wire import JobRequest, JobResult
from render.queue import deliveries
from render.queue.keys import (
    IN_FLIGHT_KEY,
    OFFERED_KEY,
    alive_key,
    job_key,
    reoffer_lock_key,
    sweep_lock_key,
)
from render.queue.ledger import settle_now
from render.queue.records import Absences, mark_job
from render.queue.redis_client import text

log = logging.getLogger(__name__)
SWEEP_LOCK_SECONDS = 60
UNCLAIMED_SECONDS = 3.0  # a live worker claims an async job within milliseconds of taking it from its queue


def claim(connection: redis.Redis, job: JobRequest, worker: str) -> None:
    """`worker` starts rendering `job`: its record says so and the sweepers watch it."""
    with connection.pipeline() as pipe:  # both or neither: the sweeper reads them together
        pipe.hset(job_key(job.reference), mapping={"status": "rendering", "worker": worker})
        pipe.sadd(IN_FLIGHT_KEY, job.reference)
        pipe.hdel(OFFERED_KEY, job.reference)  # claimed
        pipe.execute()


def finish(connection: redis.Redis, job: JobRequest, result: JobResult) -> None:
    """Settle the quota (charged only on success, slot freed), record the outcome, owe the webhook."""
    settle_now(connection, job.organisation, job.reference, success=result.ok)
    mark_job(connection, job.reference, **result.record_fields())
    # The request was kept for the sweeper while the job could be orphaned; the record outlives it by days.
    connection.hdel(job_key(job.reference), "payload")
    connection.srem(IN_FLIGHT_KEY, job.reference)
    deliveries.owe(connection, job, result)


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
        if not connection.set(sweep_lock_key(reference), "1", nx=True, ex=SWEEP_LOCK_SECONDS):
            continue  # another API is on it
        payload = record.get("payload")
        if not payload:
            connection.srem(IN_FLIGHT_KEY, reference)
            continue
        job = JobRequest.from_json(orjson.loads(payload))
        error = InternalError("The worker rendering this job stopped (it crashed or was killed); nothing was "
                              "charged. Submit it again.")
        log.warning("async job %s lost its worker %s; finished as failed", reference, record.get("worker"))
        finish(connection, job, JobResult(reference, ok=False, error=error.to_payload()))
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
        if connection.set(reoffer_lock_key(reference), "1", nx=True, ex=int(UNCLAIMED_SECONDS * 3)):
            log.warning("async job %s left its queue but no worker claimed it (a worker's connection broke as "
                        "it took it?); offered again", reference)
            connection.lpush(queue, reference)
            offered += 1
    return offered
