"""The API's sweeper: every few seconds, the work whose process is gone is taken back (a job handed to a worker
that died before starting it, an async job whose worker died rendering it, a monitor whose runs stopped)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import anyio
import redis

from render.queue import endings, lanes
from render.queue.records import Absences
from service import monitor_schedule

log = logging.getLogger(__name__)
SWEEP_INTERVAL_SECONDS = 2


def start(connection: redis.Redis, lanes_offered: list[str], worker_grace: float, max_queue: int
          ) -> asyncio.Task[None]:
    """The sweeper, running in the background until `stop`ped."""
    return asyncio.create_task(_sweep(connection, lanes_offered, worker_grace, max_queue))


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _sweep(connection: redis.Redis, lanes_offered: list[str], worker_grace: float, max_queue: int) -> None:
    """Every few seconds: offer again the jobs handed to a worker that is gone before it started them
    (render.queue.lanes.sweep), finish the async jobs whose worker died rendering them
    (render.queue.endings.sweep_orphans), schedule again the monitors whose runs stopped
    (service.monitor_schedule.restart_stalled), and say which organisation refused for its share of the queue
    is back under it (render.queue.lanes.quieted)."""
    absences = Absences(worker_grace)
    while True:
        await asyncio.sleep(SWEEP_INTERVAL_SECONDS)
        try:
            await anyio.to_thread.run_sync(lanes.sweep, connection, lanes_offered, absences)
            await anyio.to_thread.run_sync(endings.sweep_orphans, connection, absences)
            await anyio.to_thread.run_sync(monitor_schedule.restart_stalled, connection)
            for org in await anyio.to_thread.run_sync(lanes.quieted, connection, lanes_offered, max_queue):
                log.info("organisation %s is back under its share of the queue: its new work is accepted again", org)
        except (redis.RedisError, OSError):
            log.warning("sweeping the lanes, orphaned async jobs and stalled monitors failed; retrying",
                        exc_info=True)
