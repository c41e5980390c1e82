"""The end of every job, in one place: whoever ends a job (its worker; an API's sweep for an async job whose
worker died; the deliverer for a monitor run it could not start) settles its quota, writes its record and
answers the API waiting for it or keeps the outcome for GET /jobs/{reference}, in one transaction, then queues
what the job owes (its webhook, a monitor's run in its history). So the whole life of a job survives the API that
accepted it and the worker that took it.
"""

from __future__ import annotations

import logging

import orjson
import redis

from render.contract import sealing
from render.contract.errors import InternalError
from render.contract.wire import JobRequest, JobResult, Waiting
from render.queue import deliveries, lanes, monitors
from render.queue.keys import IN_FLIGHT_KEY, alive_key, job_key, result_key, sweep_lock_key
from render.queue.ledger import settle_on
from render.queue.records import RESULT_TTL_SECONDS, Absences, record_job
from render.queue.redis_client import text

log = logging.getLogger(__name__)
SWEEP_LOCK_SECONDS = 60
ANSWER_PURPOSE = b"job answer"  # what an answer is sealed for (render.contract.sealing)
# A result whose bodies are smaller goes whole in its notification (render.contract.wire.JobResult.to_message);
# far under Redis's limit on what a subscriber may have waiting (client-output-buffer-limit pubsub 8mb).
MESSAGE_LIMIT_BYTES = 256 * 1024


def end(connection: redis.Redis, job: JobRequest, result: JobResult, secret: str = "") -> None:
    """End `job` with `result`: the quota settled (a success charged, the slot freed) and the record written, for
    the job and each of its variants; then a waiting API answered (the result kept under `result_key` too: the
    notification may be lost), or the outcome kept in the record (nobody waits); all in one transaction. Then what
    the job owes: a monitor's run kept in its history, and the webhook's delivery. A recorded success keeps what GET
    /jobs/{reference} answers of it (the job's stored options and the result's facts) sealed with `secret`
    (SCREENSHOT_JOB_SECRET), as it may hold what the page or a vision provider said of the caller's data; without a
    secret it keeps none."""
    result.settled = True  # the waiting API has nothing left to settle
    with connection.pipeline(transaction=True) as pipe:
        for each in [result, *result.variants]:
            settle_on(pipe, job.organisation, each.reference, success=each.ok)
            record_job(pipe, each.reference, _record(job, each, secret))
        if isinstance(job.answer, Waiting):
            pipe.hset(result_key(job.reference), mapping=result.to_redis())
            pipe.expire(result_key(job.reference), RESULT_TTL_SECONDS)
            pipe.publish(job.answer.reply_channel, result.to_message(MESSAGE_LIMIT_BYTES))
        else:
            # The request was kept for the sweep while the job could be orphaned; the record outlives it by days.
            pipe.hdel(job_key(job.reference), "payload")
            pipe.srem(IN_FLIGHT_KEY, job.reference)
        pipe.execute()
    if job.monitor is not None:
        run = monitors.record_run(connection, job, result)  # its webhook told only if it should be
        if run is not None and job.webhook is not None:
            deliveries.enqueue(connection, deliveries.monitor_delivery(job, job.webhook, run), job.webhook)
    else:
        deliveries.owe(connection, job, result)


def _record(job: JobRequest, result: JobResult, secret: str) -> dict[str, str]:
    fields = result.record_fields()
    if result.ok and not isinstance(job.answer, Waiting) and job.monitor is None and secret:
        answer = orjson.dumps({"kind": job.kind, "options": job.options, "result": result.meta()})
        fields["answer"] = sealing.seal(answer, secret, job.reference, ANSWER_PURPOSE)
    return fields


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
        end(connection, job, JobResult(reference, ok=False, error=error.to_payload()))
        finished += 1
    return finished
