"""The RQ job functions the workers run (enqueued by dotted path: render.queue.keys.ASYNC_JOB_FUNCTION), and
the worker process's warm runtime they run on."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from render.contract.wire import JobRequest
from render.queue import async_jobs
from render.worker.runtime import WorkerRuntime

_runtime: WorkerRuntime | None = None


def install(runtime: WorkerRuntime) -> None:
    """Make this process's warm runtime available to the jobs (called once at worker start)."""
    global _runtime
    _runtime = runtime


def runtime() -> WorkerRuntime:
    """This worker process's runtime."""
    if _runtime is None:
        raise RuntimeError("capture jobs run only inside `screenshot-service worker`")
    return _runtime


def capture_async(payload: dict[str, Any]) -> dict[str, Any]:
    """RQ entry point for async and webhook jobs: render, then finish everything the API would have."""
    worker = runtime()
    assert worker.redis is not None
    job = JobRequest.from_json(payload)
    # Time spent waiting in the queue is not the capture's: its timeout starts now.
    job = replace(job, deadline=time.time() + job.timeout)
    async_jobs.claim(worker.redis, job, worker.name)
    result = worker.handle(job)
    async_jobs.finish(worker.redis, job, result)
    return {"ok": result.ok, "error_code": (result.error or {}).get("error_code")}
