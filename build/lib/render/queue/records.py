"""Job records, results' lifetime and worker heartbeats: what the API and the workers keep in Redis about
jobs and each other (the key names are in render.queue.keys)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import redis

from render.queue.keys import job_key

RESULT_TTL_SECONDS = 300  # a waiting API reads its result within its deadline
JOB_RECORD_TTL_SECONDS = 7 * 86400  # how long GET /jobs/{reference} knows a job, unless SCREENSHOT_JOB_RECORD_TTL
_job_record_ttl = JOB_RECORD_TTL_SECONDS
ALIVE_TTL_SECONDS = 3  # a worker refreshes alive:<name> every second
ABSENCES_KEPT = 1000


def local_heartbeat_file(pid: int | None = None) -> Path:
    """Touched by a worker at every heartbeat, Redis or not: a container's health check reads it."""
    return Path(tempfile.gettempdir()) / f"screenshot-service-worker-{pid or os.getpid()}.alive"


def unhealthy_file(pid: int | None = None) -> Path:
    """Written by a worker whose browser cannot render, with the reason (render.worker.health)."""
    return local_heartbeat_file(pid).with_suffix(".unhealthy")


def local_unhealthy_reasons(within_seconds: float) -> list[str]:
    """Why workers on this machine cannot render, from their reason files written within `within_seconds`."""
    now, reasons = time.time(), []
    for path in Path(tempfile.gettempdir()).glob("screenshot-service-worker-*.unhealthy"):
        try:
            if now - path.stat().st_mtime <= within_seconds:
                reasons.append(path.read_text())
        except FileNotFoundError:
            continue
    return reasons


def fresh_local_heartbeats(within_seconds: float) -> list[Path]:
    """Heartbeat files of workers on this machine that beat within the last `within_seconds`."""
    now = time.time()
    found = []
    for path in Path(tempfile.gettempdir()).glob("screenshot-service-worker-*.alive"):
        try:
            if now - path.stat().st_mtime <= within_seconds:
                found.append(path)
        except FileNotFoundError:
            continue  # its worker stopped meanwhile
    return found


class Absences:
    """Whether a worker whose heartbeat is missing is gone: only once it has stayed missing for
    `grace_seconds` (SCREENSHOT_WORKER_GRACE). A live worker's beats stop reaching Redis for a moment when
    Redis fails over (the new primary took 2.4 s to be promoted under load, tests/cluster/test_failover.py)
    or its network blinks; its heartbeat key may expire meanwhile, and its jobs must not be declared lost."""

    def __init__(self, grace_seconds: float) -> None:
        self._since: dict[str, float] = {}
        self.grace_seconds = grace_seconds

    def gone(self, worker: str, beating: bool) -> bool:
        """Note what Redis says of `worker` now; True once its absence has lasted the grace."""
        if beating:
            self._since.pop(worker, None)
            return False
        now = time.monotonic()
        if len(self._since) > ABSENCES_KEPT:  # workers long gone: forget them
            self._since = {name: since for name, since in self._since.items() if now - since < 3600}
        return now - self._since.setdefault(worker, now) >= self.grace_seconds


def keep_job_records_for(seconds: int) -> None:
    """This process's lifetime of job records (SCREENSHOT_JOB_RECORD_TTL; set once at start)."""
    global _job_record_ttl
    _job_record_ttl = seconds


def job_record_ttl() -> int:
    """Seconds a job's record (and what is owed for it) is kept after its last update."""
    return _job_record_ttl


def queued_fields(organisation: str, **more: str) -> dict[str, str]:
    """A new job's record: its organisation, `queued` since now, and `more` (an async job's payload, a monitor's id)."""
    return {"organisation": organisation, "status": "queued", "created": str(time.time()), **more}


def record_job(pipe: redis.client.Pipeline, reference: str, fields: dict[str, str]) -> None:
    """Queue an update of a job's record on `pipe`, keeping the record's lifetime."""
    pipe.hset(job_key(reference), mapping=fields)  # type: ignore[arg-type]
    pipe.expire(job_key(reference), _job_record_ttl)


def mark_job(connection: redis.Redis, reference: str, **fields: str) -> None:
    """Update a job's record (sync; workers)."""
    with connection.pipeline(transaction=False) as pipe:
        record_job(pipe, reference, fields)
        pipe.execute()


