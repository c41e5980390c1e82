"""RQ entry points, enqueued by dotted path (`render.jobs.capture`) with JSON payloads."""

from __future__ import annotations

from typing import Any

from render.protocol import JobRequest
from render.runtime import WorkerRuntime

_runtime: WorkerRuntime | None = None


def install(runtime: WorkerRuntime) -> None:
    """Make this process's warm runtime available to the jobs (called once at worker start)."""
    global _runtime
    _runtime = runtime


def capture(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one capture job; the result goes to Redis, RQ only keeps a short summary."""
    if _runtime is None:
        raise RuntimeError("render.jobs.capture runs only inside `screenshot-service worker`")
    result = _runtime.handle(JobRequest.from_json(payload))
    return {"ok": result.ok, "error_code": (result.error or {}).get("error_code")}
