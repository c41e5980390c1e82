"""A worker's heartbeat: every second, for each of its job slots (each named in the lanes as a worker of its own),
`alive:<name>` (expires in ALIVE_TTL_SECONDS, so a killed worker's jobs are known dead within seconds), the
last-seen time /readyz counts and whether it is busy; and its browser's counts for /metrics, and a file touched for a
container's health check, Redis or not."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import redis

from render.queue.keys import COUNTERS_KEY, WORKERS_BUSY_KEY, WORKERS_SEEN_KEY, alive_key
from render.queue.records import ALIVE_TTL_SECONDS, local_heartbeat_file, unhealthy_file
from render.queue.redis_client import away

log = logging.getLogger(__name__)
HEARTBEAT_SECONDS = 1


async def beat_forever(connection: redis.Redis, slots: Callable[[], dict[str, bool]],
                       counts: Callable[[], dict[str, int]], unhealthy: Callable[[], str | None] = lambda: None
                       ) -> None:
    """Beat until cancelled; `slots` gives each job slot's name and whether it is busy now; `counts` are running
    totals, of which each beat adds what is new to COUNTERS_KEY.
    While `unhealthy` gives a reason (its browser cannot render) the worker is alive (its jobs are not taken
    back) but not ready: /readyz does not count it, and its heartbeat file is left to go stale while the
    reason is written beside it for the health check."""
    reported: dict[str, int] = {}  # the counts already added to COUNTERS_KEY
    heartbeat_file = local_heartbeat_file()
    reason_file = unhealthy_file()

    def beat() -> None:
        reason = unhealthy()
        if reason is None:
            heartbeat_file.touch()
            reason_file.unlink(missing_ok=True)
        else:
            reason_file.write_text(reason)
        now_counts = counts()
        with connection.pipeline(transaction=False) as pipe:
            for name, busy in slots().items():
                pipe.set(alive_key(name), "1", ex=ALIVE_TTL_SECONDS)
                if reason is None:
                    pipe.zadd(WORKERS_SEEN_KEY, {name: time.time()})
                else:
                    pipe.zrem(WORKERS_SEEN_KEY, name)
                if busy:
                    pipe.zadd(WORKERS_BUSY_KEY, {name: time.time()})
                else:
                    pipe.zrem(WORKERS_BUSY_KEY, name)
            for field, count in now_counts.items():
                if count > reported.get(field, 0):
                    pipe.hincrby(COUNTERS_KEY, field, count - reported.get(field, 0))
            pipe.execute()
        reported.update(now_counts)

    while True:
        try:
            await asyncio.to_thread(beat)
        except redis.RedisError as error:
            if away(error):  # lost, or refusing writes for now: said once a second, without a trace
                log.warning("heartbeat failed: %s", error)
            else:
                log.warning("heartbeat failed", exc_info=True)
        await asyncio.sleep(HEARTBEAT_SECONDS)
