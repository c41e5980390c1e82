"""RQ entry points, enqueued by dotted path (`render.jobs.capture`) with JSON payloads."""

from __future__ import annotations

from typing import Any

from render.protocol import JobRequest, mark_job
from render.runtime import WorkerRuntime

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


def capture(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one capture job whose caller waits; the result goes to Redis, RQ only keeps a short summary."""
    worker = runtime()
    job = JobRequest.from_json(payload)
    if worker.redis is not None:
        mark_job(worker.redis, job.reference, status="rendering", worker=worker.name)
    result = worker.handle(job)
    return {"ok": result.ok, "error_code": (result.error or {}).get("error_code")}
