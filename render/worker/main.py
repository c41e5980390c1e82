"""`screenshot-service worker`: an RQ worker that keeps Chromium warm, never forks per job, and serves the
captures a client waits for from a lane of their own."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import socket
import time
import uuid

import orjson
import redis
from rq import Queue, SimpleWorker
from rq.job import Job
from rq.serializers import JSONSerializer
from rq.worker import WorkerStatus

from render.contract.options import TakeOptions
from render.contract.wire import JobRequest
from render.queue.keys import SYNC_QUEUE_KEY, lanes
from render.queue.records import record_job
from render.queue.redis_client import RedisTarget
from render.settings import RenderSettings
from render.worker import jobs
from render.worker.runtime import Work, WorkerRuntime
from storage import StorageSettings, open_storage

log = logging.getLogger(__name__)
M_ARENA_MAX = -8  # glibc's mallopt parameter
RQ_HEARTBEAT_SECONDS = 30  # RQ's own worker record, while synchronous captures keep the worker busy
RECONNECT_SECONDS = 1.0
SOCKET_MARGIN_SECONDS = 15  # beyond the longest blocking pop, for a loaded Redis to answer


def fewer_malloc_arenas() -> None:
    """Two glibc malloc arenas for the worker, its driver and Chromium instead of up to eight per core:
    their threads otherwise each keep freed memory of their own (about 10 MB less in all, measured)."""
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")  # the driver and Chromium start later, with this environment
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, 2)


class CaptureWorker(SimpleWorker):
    """RQ's worker, plus the lane for captures whose client waits (`SYNC_QUEUE_KEY`).

    The API pushes such a job onto a plain Redis list and waits on its reply channel, so RQ's job
    record, registries and result (about 5 ms of Redis and Python a job, on each side) buy nothing for
    it. The worker blocks on that list and RQ's queue at once, the waiting lane first; an RQ job
    (async captures) is put back at the head of its queue and taken RQ's way.
    """

    def __init__(self, queues: list[Queue], *, runtime: WorkerRuntime, waiting_lanes: list[str] | None = None,
                 **kwargs: object) -> None:
        super().__init__(queues, **kwargs)  # type: ignore[arg-type]
        self.runtime = runtime
        self.waiting_lanes = waiting_lanes or [SYNC_QUEUE_KEY]  # regions' lanes first, the common one last
        self._rq_heartbeat_due = 0.0

    def dequeue_job_and_maintain_ttl(self, timeout: int | None,
                                     max_idle_time: int | None = None) -> tuple[Job, Queue] | None:
        keys = [*self.waiting_lanes, *self.queue_keys()]
        self.set_state(WorkerStatus.IDLE)
        while not self._stop_requested:
            try:
                self._keep_rq_informed()
                popped = self._pop(keys, timeout)
                if popped is None:
                    if timeout is None:
                        return None  # burst: nothing left
                    continue
                key, value = (item.decode() for item in popped)
                if key in self.waiting_lanes:
                    self._capture_now(value, key)
                    continue
                self.connection.lpush(key, value)  # another worker may take it first: then wait again
                found = super().dequeue_job_and_maintain_ttl(None)
                if found is not None:
                    return found
            except (redis.ConnectionError, redis.TimeoutError) as error:  # RQ would quit on a timeout
                log.warning("worker %s lost Redis (%s); retrying in %s s", self.name, error, RECONNECT_SECONDS)
                time.sleep(RECONNECT_SECONDS)
        return None

    def _keep_rq_informed(self) -> None:
        """RQ's heartbeat and registry maintenance, as RQ's own loop would do them between jobs."""
        if time.monotonic() >= self._rq_heartbeat_due:
            self.heartbeat()
            self._rq_heartbeat_due = time.monotonic() + RQ_HEARTBEAT_SECONDS
        if self.should_run_maintenance_tasks:
            self.run_maintenance_tasks()

    def _pop(self, keys: list[str], timeout: int | None) -> tuple[bytes, bytes] | None:
        """The next job (key, value): blocking up to `timeout` s, or what is there now when None (burst)."""
        if timeout is not None:
            blocking = min(timeout, RQ_HEARTBEAT_SECONDS)
            return self.connection.blpop(keys, blocking)  # type: ignore[return-value]
        for key in keys:
            value = self.connection.lpop(key)
            if value is not None:
                return key.encode(), value  # type: ignore[return-value]
        return None

    def _capture_now(self, payload: str, lane: str) -> None:
        """Render one waiting client's job and publish its result; a SIGTERM meanwhile stops the worker after it."""
        try:
            job = JobRequest.from_json(orjson.loads(payload))
        except (ValueError, TypeError, KeyError):
            log.error("worker %s dropped a malformed job from %s: %.200s", self.name, lane, payload)
            return
        with self.connection.pipeline(transaction=False) as pipe:
            self.set_state(WorkerStatus.BUSY, pipeline=pipe)  # RQ's signal handler reads it
            record_job(pipe, job.reference, {"status": "rendering", "worker": self.name})
            pipe.execute()
        try:
            self.runtime.handle(job)
        except Exception:  # publishing failed (Redis lost): the waiting API gives up at its deadline
            log.exception("worker %s could not finish job %s", self.name, job.reference)
        finally:
            self.set_state(WorkerStatus.IDLE)


def worker_connection(target: RedisTarget) -> redis.Redis:
    """The worker's Redis client. redis-py's default socket timeout (5 s) would cut its blocking pop short
    whenever it idles: RQ raises the timeout only for connections opened after the worker is made, and the
    runtime opens the first one before (seen as "lost Redis (Timeout reading from socket)" every few seconds)."""
    return target.sync(socket_timeout=RQ_HEARTBEAT_SECONDS + SOCKET_MARGIN_SECONDS)


def run_worker(target: RedisTarget, settings: RenderSettings, storage_settings: StorageSettings,
               *, burst: bool = False, kinds: dict[str, tuple[type[TakeOptions], Work]] | None = None) -> None:
    """Serve capture jobs until SIGTERM/SIGINT (finishing the current job first)."""
    fewer_malloc_arenas()
    connection = worker_connection(target)
    name = f"{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:6]}"
    runtime = WorkerRuntime(settings, open_storage(storage_settings), connection, name=name)
    for kind, (model, work) in (kinds or {}).items():
        runtime.register(kind, model, work)
    runtime.start()
    jobs.install(runtime)
    # A region's jobs first (only workers of that region take them), then those that name none.
    served = [*(lanes(region) for region in settings.served_regions()), lanes(None)]
    queues = [Queue(name, connection=connection, serializer=JSONSerializer) for _, name in served]
    worker = CaptureWorker(queues, runtime=runtime, waiting_lanes=[waiting for waiting, _ in served],
                           connection=connection, serializer=JSONSerializer, name=name)
    log.info("worker %s serving %s and queues %s", name, ", ".join(waiting for waiting, _ in served),
             ", ".join(queue.name for queue in queues))
    try:
        worker.work(burst=burst, logging_level="WARNING", with_scheduler=False)
    finally:
        runtime.stop()
