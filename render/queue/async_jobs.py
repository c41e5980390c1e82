"""The end of an async job's life in Redis (its start is render.queue.lanes): whoever finishes it (its
worker, or an API's sweeper when the worker died) settles the quota, records the outcome and owes the
webhook, so the whole life of an async job survives the API that accepted it and the worker that took it.
"""

from __future__ import annotations

import logging

import orjson
import redis

from render.contract import sealing
from render.contract.errors import InternalError
from render.contract.wire import JobRequest, JobResult
from render.queue import deliveries, lanes, monitors
from render.queue.keys import IN_FLIGHT_KEY, alive_key, job_key, sweep_lock_key
from render.queue.ledger import settle_now
from render.queue.records import Absences, mark_job
from render.queue.redis_client import text

log = logging.getLogger(__name__)
SWEEP_LOCK_SECONDS = 60


ANSWER_PURPOSE = b"job answer"  # what an answer is sealed for (render.contract.sealing)


def finish(connection: redis.Redis, job: JobRequest, result: JobResult, secret: str = "") -> None:
    """Settle the quota (charged only on success, slot freed), record the outcome, owe the webhook. A success's
    record keeps what GET /jobs/{reference} answers of it (the synchronous JSON answer: the job's stored options
    and the result's facts) sealed with `secret` (SCREENSHOT_JOB_SECRET), as it may hold what the page or a vision
    provider said of the caller's data; without a secret it keeps none."""
    settle_now(connection, job.organisation, job.reference, success=result.ok)
    fields = result.record_fields()
    if result.ok and job.monitor is None and secret:
        answer = orjson.dumps({"kind": job.kind, "options": job.options, "result": result.meta()})
        fields["answer"] = sealing.seal(answer, secret, job.reference, ANSWER_PURPOSE)
    mark_job(connection, job.reference, **fields)
    # The request was kept for the sweeper while the job could be orphaned; the record outlives it by days.
    connection.hdel(job_key(job.reference), "payload")
    connection.srem(IN_FLIGHT_KEY, job.reference)
    if job.monitor is None:
        deliveries.owe(connection, job, result)
        return
    run = monitors.record_run(connection, job, result)  # a monitor's run: its webhook told only if it should be
    if run is not None and job.webhook is not None:
        deliveries.enqueue(connection, deliveries.monitor_delivery(job, job.webhook, run), job.webhook)


def sweep_orphans(connection: redis.Redis, absences: Absences) -> int:
    """Finish the async jobs whose worker died while rendering them (its heartbeat lapsed) and that the sweep
    of lanes does not offer again (lost a second time; render.queue.lanes): failed, nothing charged, slot
    freed, `webhook_errors` receivers told. Run by every API every few seconds; a
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
        if record.get("lane") and lanes.held(connection, record["lane"], record.get("entry", ""), worker):
            continue  # still on its lane: the sweep of lanes offers it again (a first loss) or hands it here
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
