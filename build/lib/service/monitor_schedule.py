"""Monitor runs on RQ's own scheduling, as the API and the deliverers both keep them: each due run is an RQ job on
the `monitors` queue, scheduled with `Queue.enqueue_at` under an id made of the monitor and the due time, and
moved to the queue when due by the one RQ scheduler holding the queue's lock (the deliverers'). The API schedules
a monitor's first run and takes runs back when it changes; its sweep schedules again a chain that broke
(`restart_stalled`); the deliverer's firing (service.deliverer.monitor_runs) schedules each next run.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from datetime import UTC, datetime, timedelta

import redis
from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from render.queue import monitors
from render.queue.keys import (
    FIRE_FUNCTION,
    MONITOR_QUEUE,
    MONITORS_DUE_KEY,
    monitor_key,
)
from render.queue.redis_client import text
from service.times import iso_time

log = logging.getLogger(__name__)
STALLED_SECONDS = 20  # a run this overdue whose job does not wait to fire any more: its chain broke (firing takes ms)
RETRY_SECONDS = 10  # a run that finds no free slot or a full lane tries again this much later...
RETRIES = 30  # ...this many times (five minutes), then fails


def sealed_for(monitor_id: str) -> str:
    """What a monitor's secrets are sealed for (render.contract.sealing): the monitor, not one of its runs."""
    return f"monitor:{monitor_id}"


def run_reference(monitor_id: str, due: int) -> str:
    """A run's job reference, the same every time its due run fires: sortable by time like any reference."""
    return f"{due * 1000:x}{hashlib.sha256(f'{monitor_id}:{due}'.encode()).hexdigest()[:16]}"


def queue_of(connection: redis.Redis) -> Queue:
    return Queue(MONITOR_QUEUE, connection=connection, serializer=JSONSerializer)


def schedule_run(connection: redis.Redis, monitor_id: str, due: int, revision: int, attempt: int = 0) -> None:
    """The run of `monitor_id` due at `due` (UNIX seconds), as an RQ job RQ's scheduler moves to the queue when
    due. Scheduling it again changes nothing: the job's id is the monitor, the due time and the attempt."""
    job_id = f"monitor-{monitor_id}-{due}" + (f"-retry{attempt}" if attempt else "")
    when = datetime.fromtimestamp(due, UTC) + timedelta(seconds=RETRY_SECONDS * attempt)
    queue_of(connection).enqueue_at(when, FIRE_FUNCTION, args=(monitor_id, due, revision, attempt), job_id=job_id,
                                    result_ttl=86400, failure_ttl=7 * 86400, job_timeout=60)
    if not attempt:
        connection.hset(monitor_key(monitor_id), "next_run", str(due))
        connection.zadd(MONITORS_DUE_KEY, {monitor_id: due})


def cancel_run(connection: redis.Redis, monitor_id: str, due: int | None) -> None:
    """Take a scheduled run back (a monitor changed or deleted); one that fires anyway finds it outdated."""
    connection.zrem(MONITORS_DUE_KEY, monitor_id)
    if due is not None:
        with contextlib.suppress(NoSuchJobError):  # already fired, or taken back before
            queue_of(connection).scheduled_job_registry.remove(f"monitor-{monitor_id}-{due}", delete_job=True)


def waiting(connection: redis.Redis, job_id: str) -> bool:
    """Whether the run job `job_id` still waits to fire: scheduled (for a scheduler, maybe one taking a dead one's
    lock over) or queued (for a deliverer). A job that ended, failed, or started and has not ended since the
    sweep's grace does not (its deliverer died while firing it, before it scheduled the next run)."""
    try:
        status = Job.fetch(job_id, connection=connection, serializer=JSONSerializer).get_status(refresh=False)
    except NoSuchJobError:
        return False
    return status in (JobStatus.SCHEDULED, JobStatus.QUEUED, JobStatus.DEFERRED)


def restart_stalled(connection: redis.Redis, now: float | None = None) -> int:
    """Schedule again the monitors whose next run is STALLED_SECONDS overdue and no longer waits to fire (a firing
    that died or failed before it scheduled the next run, or Redis losing the job): the APIs' sweep calls it every
    few seconds. The run then fires once, now; the claim of a firing that did start it keeps it from starting
    twice. Returns how many it scheduled again."""
    now = time.time() if now is None else now
    restarted = 0
    stalled: list[tuple[bytes, float]] = connection.zrangebyscore(  # type: ignore[assignment]
        MONITORS_DUE_KEY, "-inf", now - STALLED_SECONDS, withscores=True)
    for raw_id, score in stalled:
        monitor_id, due = text(raw_id), int(score)
        if waiting(connection, f"monitor-{monitor_id}-{due}"):
            continue
        monitor = monitors.load(connection, monitor_id)
        if monitor is None or monitor.spec.paused:
            connection.zrem(MONITORS_DUE_KEY, monitor_id)
            continue
        log.warning("monitor %s: its run due %s did not fire and its next was not scheduled; scheduled again",
                    monitor_id, iso_time(due))
        schedule_run(connection, monitor_id, int(now), monitor.revision)
        restarted += 1
    return restarted
