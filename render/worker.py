"""`screenshot-service worker`: an RQ worker that keeps Chromium warm and never forks per job."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import socket
import uuid

import redis
from rq import Queue, SimpleWorker
from rq.serializers import JSONSerializer

from render import jobs
from render.options import TakeOptions
from render.protocol import QUEUE_NAME
from render.runtime import Work, WorkerRuntime
from render.settings import RenderSettings
from storage import StorageSettings, open_storage

log = logging.getLogger(__name__)
M_ARENA_MAX = -8  # glibc's mallopt parameter


def fewer_malloc_arenas() -> None:
    """Two glibc malloc arenas for the worker, its driver and Chromium instead of up to eight per core:
    their threads otherwise each keep freed memory of their own (about 10 MB less in all, measured)."""
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")  # the driver and Chromium start later, with this environment
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, 2)


def run_worker(redis_url: str, settings: RenderSettings, storage_settings: StorageSettings,
               *, burst: bool = False, kinds: dict[str, tuple[type[TakeOptions], Work]] | None = None) -> None:
    """Serve capture jobs until SIGTERM/SIGINT (finishing the current job first)."""
    fewer_malloc_arenas()
    connection = redis.Redis.from_url(redis_url)
    name = f"{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:6]}"
    runtime = WorkerRuntime(settings, open_storage(storage_settings), connection, name=name)
    for kind, (model, work) in (kinds or {}).items():
        runtime.register(kind, model, work)
    runtime.start()
    jobs.install(runtime)
    queue = Queue(QUEUE_NAME, connection=connection, serializer=JSONSerializer)
    worker = SimpleWorker([queue], connection=connection, serializer=JSONSerializer, name=name)
    log.info("worker %s serving queue %s", name, QUEUE_NAME)
    try:
        worker.work(burst=burst, logging_level="WARNING", with_scheduler=False)
    finally:
        runtime.stop()
