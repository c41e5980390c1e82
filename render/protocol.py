"""What crosses the queue between the API and the workers, as JSON.

The API pushes a `JobRequest` onto `SYNC_QUEUE_KEY` when its client waits for the result, or
enqueues an RQ job with one (async and webhook jobs); the worker stores a `JobResult` under
`result_key(reference)` and publishes the reference on the request's reply channel. Pure module:
the API imports it without Playwright.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import redis
from redis.typing import EncodableT, FieldT

QUEUE_NAME = "render"
# Captures a client waits for: `JobRequest` JSON pushed by the API, popped by the workers before RQ's queue.
SYNC_QUEUE_KEY = f"queue:{QUEUE_NAME}:waiting"
RESULT_TTL_SECONDS = 300


def lanes(region: str | None) -> tuple[str, str]:
    """The waiting lane (a Redis list) and the RQ queue's name for jobs of `servers_region` `region`;
    None: the common ones, which every worker serves."""
    if not region:
        return SYNC_QUEUE_KEY, QUEUE_NAME
    return f"queue:{QUEUE_NAME}@{region}:waiting", f"{QUEUE_NAME}@{region}"


WORKERS_SEEN_KEY = "workers:seen"  # worker name -> its last heartbeat (every second)
WORKERS_BUSY_KEY = "workers:busy"  # worker name -> its last heartbeat while rendering a job


JOB_RECORD_TTL_SECONDS = 7 * 86400  # how long GET /jobs/{reference} knows a job
ASYNC_JOB_FUNCTION = "service.jobs.capture_async"
OFFERED_KEY = "jobs:async:offered"  # async jobs in their queue, not yet claimed by a worker: reference -> queue key


COUNTERS_KEY = "metrics:counters"  # counts kept by workers and deliverers, exported by every API's /metrics
ALIVE_TTL_SECONDS = 3  # a worker refreshes alive:<name> every second
ABSENCES_KEPT = 1000


def local_heartbeat_file(pid: int | None = None) -> Path:
    """Touched by a worker at every heartbeat, Redis or not: a container's health check reads it."""
    return Path(tempfile.gettempdir()) / f"screenshot-service-worker-{pid or os.getpid()}.alive"


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


def alive_key(worker: str) -> str:
    """Exists while the worker `worker` is alive (its heartbeat)."""
    return f"alive:{worker}"


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


def job_key(reference: str) -> str:
    """Redis hash of a job's state for GET /jobs/{reference}: organisation, status, error, storage_key."""
    return f"job:{reference}"


def record_job(pipe: redis.client.Pipeline, reference: str, fields: dict[str, str]) -> None:
    """Queue an update of a job's record on `pipe`, keeping the record's lifetime."""
    pipe.hset(job_key(reference), mapping=fields)  # type: ignore[arg-type]
    pipe.expire(job_key(reference), JOB_RECORD_TTL_SECONDS)


def mark_job(connection: redis.Redis, reference: str, **fields: str) -> None:
    """Update a job's record (sync; workers)."""
    with connection.pipeline(transaction=False) as pipe:
        record_job(pipe, reference, fields)
        pipe.execute()


def result_key(reference: str) -> str:
    """Redis hash holding a finished job's result."""
    return f"result:{reference}"


@dataclass(frozen=True)
class JobRequest:
    """One capture to run: the validated options and where the answer goes."""

    reference: str
    organisation: str
    options: dict[str, Any]
    trace_id: str
    deadline: float  # UNIX seconds after which the job is abandoned
    reply_channel: str | None = None
    store_result: bool = False  # upload to storage (response_type=json) instead of returning bytes
    enqueued_at: float = 0.0  # UNIX seconds, for the queue-wait metric
    # {"key": the caller's provider key sealed by render.vision.seal, "prompt": ..., "max_tokens": ...}
    vision: dict[str, Any] | None = None
    store_key: str | None = None  # store the output under this key (the cache's), instead of the default
    keep_body: bool = False  # return the bytes even though they were stored
    async_: bool = False  # nobody waits: the deadline starts when a worker picks the job up
    timeout: float = 0.0  # the capture's timeout, for async jobs
    # Bulk `optimize`: further outputs of the same page, each {"reference", "options", "store"}; the
    # page is loaded once with `options` and every variant's output derived from it.
    variants: list[dict[str, Any]] | None = None
    kind: str = "take"  # the options model and routine: "take", or "animate" (registered by the worker command)
    # The caller's credentials for the target, taken out of `options` and sealed (render.sealing).
    sealed: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobRequest:
        return cls(**data)


@dataclass
class JobResult:
    """Outcome of a job: either the output (bytes or a stored object) or an error payload."""

    reference: str
    ok: bool
    rendering_seconds: float = 0.0
    content_type: str = ""
    size_bytes: int = 0
    format: str = ""
    width: int | None = None
    height: int | None = None
    storage_key: str | None = None
    error: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0  # UNIX seconds when a worker picked the job up
    finished_at: float = 0.0  # UNIX seconds when the result was ready
    body: bytes = b""
    variants: list[JobResult] = field(default_factory=list)  # the other outputs of an optimized job

    def meta(self) -> dict[str, Any]:
        """Everything but the bytes, JSON-safe."""
        data = asdict(self)
        data.pop("body")
        data["variants"] = [variant.meta() for variant in self.variants]
        return data

    def record_fields(self) -> dict[str, str]:
        """The finished job's fields in its record (`job_key`, GET /jobs/{reference})."""
        if self.ok:
            return {"status": "done", "storage_key": self.storage_key or "", "content_type": self.content_type}
        return {"status": "failed", "error": orjson.dumps(self.error or {}).decode()}

    def to_redis(self) -> dict[FieldT, EncodableT]:
        fields: dict[FieldT, EncodableT] = {"meta": orjson.dumps(self.meta()), "body": self.body}
        for index, variant in enumerate(self.variants):
            fields[f"body:{index}"] = variant.body
        return fields

    @classmethod
    def from_meta(cls, meta: dict[str, Any], body: bytes = b"") -> JobResult:
        meta = dict(meta)
        variants = [cls.from_meta(v) for v in meta.pop("variants", [])]
        return cls(**meta, body=body, variants=variants)

    @classmethod
    def from_redis(cls, fields: dict[bytes, bytes]) -> JobResult:
        result = cls.from_meta(orjson.loads(fields[b"meta"]), fields.get(b"body", b""))
        for index, variant in enumerate(result.variants):
            variant.body = fields.get(f"body:{index}".encode(), b"")
        return result
