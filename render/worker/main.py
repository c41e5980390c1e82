"""`screenshot-service worker`: keeps Chromium warm, never forks per job, and serves the capture jobs of its
lanes (render.queue.lanes), those whose client waits and async ones alike, in each of its job slots
(settings.worker_slots) on the one browser."""

from __future__ import annotations

import _thread
import contextlib
import ctypes
import logging
import os
import signal
import socket
import threading
import time
import uuid

import orjson
import redis

from render.contract.options import TakeOptions
from render.contract.wire import JobRequest, JobResult, Recorded
from render.queue import endings, lanes
from render.queue.keys import lane_key
from render.queue.redis_client import RedisTarget, away, replicas_have
from render.settings import RenderSettings
from render.worker.cpus import CpuPinning
from render.worker.runtime import Work, WorkerRuntime, WorkerSlot
from storage import StorageSettings, open_storage

log = logging.getLogger(__name__)
M_ARENA_MAX = -8  # glibc's mallopt parameter
TAKE_BLOCK_SECONDS = 30  # the longest blocking read of the lanes
# The longest blocking read of a job slot on a thread of its own: it sees the worker stopping within this.
SLOT_BLOCK_SECONDS = 2
RECONNECT_SECONDS = 1.0
SOCKET_MARGIN_SECONDS = 15  # beyond the longest blocking read, for a loaded Redis to answer
UNHEALTHY_SLEEP_SECONDS = 0.5  # between looks at whether a probe of the browser is due (render.worker.health)


def fewer_malloc_arenas() -> None:
    """Two glibc malloc arenas for the worker, its driver and Chromium instead of up to eight per core:
    their threads otherwise each keep freed memory of their own."""
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")  # the driver and Chromium start later, with this environment
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, 2)


class CaptureWorker:
    """One job slot of a worker: takes jobs from its lanes (render.queue.lanes) one at a time, under the slot's
    name, and serves them on the warm runtime: a job whose client waits is rendered and published on its reply
    channel; an async job is also finished (quota, record, webhook). The first slot's runs on the main thread and
    takes the signals for all: the first SIGTERM/SIGINT stops every slot once its job in hand is done (at once
    when idle; a slot on a thread of its own within SLOT_BLOCK_SECONDS); a second one stops the worker now. Redis
    away (lost, or its primary refusing writes for now, as NOREPLICAS) never ends the worker: what it could not
    write is kept and written before its next job."""

    def __init__(self, connection: redis.Redis, runtime: WorkerRuntime, lanes_served: list[str],
                 slot: WorkerSlot | None = None, interactive_reserve: float = 0.0,
                 stopping: threading.Event | None = None) -> None:
        self.connection = connection
        self.runtime = runtime
        self.lanes = lanes_served  # regions' lanes first, the common one last
        self.slot = slot or runtime.slots[0]
        self.name = self.slot.name
        self.interactive_reserve = interactive_reserve  # settings.interactive_reserve (render.queue.lanes.take)
        # A batch job's CPUs are the whole browser's: pinned only when no other slot's job shares that browser.
        self.cpus = CpuPinning(interactive_reserve,
                               enabled=runtime.settings.pin_batch_work and len(runtime.slots) == 1)
        self.stopping = stopping or threading.Event()  # shared by the worker's slots
        self._serving = False
        self._undone: list[lanes.Taken] = []  # served, but Redis was away when they were to leave the lane
        # Async jobs rendered whose outcome Redis would not take yet (lost, or refusing writes)
        self._unfinished: list[tuple[lanes.Taken, JobRequest, JobResult]] = []

    def work(self, burst: bool = False, others: tuple[threading.Thread, ...] = ()) -> None:
        """Serve until stopped (burst: until the lanes are empty); on the main thread, the signals' too, and then
        wait for the `others` slots' threads to end."""
        main = threading.current_thread() is threading.main_thread()
        previous = {number: signal.signal(number, self._on_signal)
                    for number in (signal.SIGTERM, signal.SIGINT)} if main else {}
        block_seconds = None if burst else TAKE_BLOCK_SECONDS if main else SLOT_BLOCK_SECONDS
        try:
            try:
                self._serve_until_stopped(burst, block_seconds)
            except _Stop:
                pass
            for other in others:
                other.join()
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def _serve_until_stopped(self, burst: bool, block_seconds: float | None) -> None:
        while not self.stopping.is_set():
            try:
                while self._unfinished:
                    self._finish_later(*self._unfinished[0])
                while self._undone:
                    lanes.done(self.connection, self.name, self._undone[0])
                    self._undone.pop(0)
                if not self.runtime.can_render():  # no job for a worker whose browser cannot render
                    time.sleep(UNHEALTHY_SLEEP_SECONDS)
                    continue
                taken = lanes.take(self.connection, self.name, self.lanes, block_seconds, self.interactive_reserve)
                if not taken and burst:
                    return
                if taken:
                    self._serve(taken[0])
            except redis.RedisError as error:
                if not away(error):
                    raise
                log.warning("worker %s: Redis cannot serve it now (%s); retrying in %s s", self.name, error,
                            RECONNECT_SECONDS)
                time.sleep(RECONNECT_SECONDS)

    def _on_signal(self, number: int, _frame: object) -> None:
        if self.stopping.is_set():
            log.warning("worker %s stopping now (second signal)", self.name)
            raise SystemExit(128 + number)
        self.stopping.set()
        if not self._serving:
            raise _Stop  # idle: break off the blocking read (a job taken meanwhile is offered again)
        log.info("worker %s stops after its current job", self.name)

    def _serve(self, taken: lanes.Taken) -> None:
        """Render one job, if it is still this worker's; the entry leaves the lane either way."""
        self._serving = True
        try:
            try:
                job = JobRequest.from_json(orjson.loads(taken.job))
            except (ValueError, TypeError, KeyError, AttributeError):  # not a JobRequest's JSON
                log.error("worker %s dropped a malformed job from %s: %.200s", self.name, taken.lane, taken.job)
                self._leave(taken)
                return
            self.cpus.for_job(reserved_batch=taken.reserved)
            started = lanes.start(self.connection, self.name, taken)
            if started == lanes.Start.NOT_OWN:
                log.warning("job %s was taken back from worker %s (it seemed gone); left to the worker it "
                            "went to", taken.reference, self.name)
                return
            if started == lanes.Start.CANCELLED:  # its owner cancelled it before it started (DELETE /jobs/{reference})
                log.info("job %s was cancelled before it started; dropped", taken.reference)
                self._leave(taken)
                return
            # A recorded job's time waiting in the lane is not the capture's: its timeout starts now.
            job = job.started(time.time())
            self._end(taken, job, self.runtime.handle(job, self.slot))
        finally:
            self._serving = False

    def _end(self, taken: lanes.Taken, job: JobRequest, result: JobResult, again: bool = False) -> None:
        """The job ended (render.queue.endings: quota, record, answer, webhook), then its entry off the lane. When
        Redis will not take a recorded job's ending now, it is kept and written before the next job (the loop
        retries), so a render is never lost nor done again for a refused write; a waiting API whose answer could
        not be published answers by itself (retryable)."""
        recorded = isinstance(job.answer, Recorded)
        try:
            endings.end(self.connection, job, result, self.runtime.settings.job_secret)
            if recorded:
                replicas_have(self.connection)  # its outcome and webhook survive a failover
        except Exception as error:
            if recorded and isinstance(error, redis.RedisError) and away(error):
                if not again:
                    log.warning("worker %s could not finish job %s now; keeps its outcome and tries again",
                                self.name, job.reference)
                self._unfinished.append((taken, job, result))
                raise
            log.exception("worker %s could not finish job %s", self.name, job.reference)
        self._leave(taken)

    def _finish_later(self, taken: lanes.Taken, job: JobRequest, result: JobResult) -> None:
        """`_end` once Redis is back: unless the sweep took the job back meanwhile (this worker's heartbeat
        was missing past SCREENSHOT_WORKER_GRACE), whose new worker then renders and finishes it once."""
        held = lanes.held(self.connection, taken.lane, taken.entry, self.name)
        self._unfinished.pop(0)
        if held:
            self._end(taken, job, result, again=True)
        else:
            log.warning("job %s was taken back from worker %s while Redis was away; left to its new worker",
                        job.reference, self.name)

    def _leave(self, taken: lanes.Taken) -> None:
        """The entry off its lane; retried before the next job when Redis is away now."""
        self._undone.append(taken)
        lanes.done(self.connection, self.name, taken)
        self._undone.remove(taken)


class _Stop(Exception):
    """Raised by the signal handler to end an idle worker's blocking read."""


def worker_connection(target: RedisTarget) -> redis.Redis:
    """The worker's Redis client. redis-py's default socket timeout (5 s) would cut its blocking read short
    whenever it idles (seen as "lost Redis (Timeout reading from socket)" every few seconds)."""
    return target.sync(socket_timeout=TAKE_BLOCK_SECONDS + SOCKET_MARGIN_SECONDS)


def run_worker(target: RedisTarget, settings: RenderSettings, storage_settings: StorageSettings,
               *, burst: bool = False, kinds: dict[str, tuple[type[TakeOptions], Work]] | None = None) -> None:
    """Serve capture jobs until SIGTERM/SIGINT (finishing the current job first)."""
    fewer_malloc_arenas()
    connection = worker_connection(target)
    name = f"{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:6]}"
    runtime = WorkerRuntime(settings, open_storage(storage_settings), connection, name=name)
    for _ in range(settings.worker_slots - 1):
        runtime.add_slot()
    for kind, (model, work) in (kinds or {}).items():
        runtime.register(kind, model, work)
    runtime.start()
    # A region's jobs first (only workers of that region take them), then those that name none.
    served = [*(lane_key(region) for region in settings.served_regions()), lane_key(None)]
    stopping = threading.Event()
    first, *others = [CaptureWorker(connection, runtime, served, slot, settings.interactive_reserve, stopping)
                      for slot in runtime.slots]
    failed: list[str] = []

    def serve_slot(slot: CaptureWorker) -> None:
        try:
            slot.work(burst=burst)
        except Exception:
            log.exception("job slot %s failed; the worker stops", slot.name)
            failed.append(slot.name)
            _thread.interrupt_main(signal.SIGTERM)  # as if stopped: the other slots end their jobs first

    threads = tuple(threading.Thread(target=serve_slot, args=(other,), name=f"slot-{other.name}", daemon=True)
                    for other in others)
    log.info("worker %s serving %s in %d job slot(s)", name, ", ".join(served), len(runtime.slots))
    try:
        for thread in threads:
            thread.start()
        first.work(burst=burst, others=threads)
    finally:
        runtime.stop()
    if failed:
        raise SystemExit(f"job slot {failed[0]} failed")
