"""The worker process's warm runtime, for the RQ jobs that render (`service.jobs.capture_async`)."""

from __future__ import annotations

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
