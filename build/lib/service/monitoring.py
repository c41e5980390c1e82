"""Kept for one release: runs of monitors queued before render.queue.rq_jobs named `fire` by this module's path.
The firing is service.deliverer.monitor_runs; the schedule, service.monitor_schedule."""

from __future__ import annotations

from service.deliverer.monitor_runs import fire

__all__ = ["fire"]
