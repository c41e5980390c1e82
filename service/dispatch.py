"""Hand jobs to the workers and wait for their results without blocking the event loop.

A job whose client waits is pushed as JSON onto `SYNC_QUEUE_KEY` (one Redis script, with the room
check and its record); async jobs go through RQ, whose records and retries they need. Each API process subscribes
once to its own reply channel; a waiting request is just a future in `_waiters`, so hundreds can
wait at once on one Redis connection. A periodic check of the result key covers a notification lost
while the subscription was reconnecting.
"""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial
from typing import Any

import anyio
import orjson
import redis
import redis.asyncio as aioredis
from rq import Queue
from rq.serializers import JSONSerializer

from render.contract.errors import InternalError
from render.contract.wire import JobRequest, JobResult
from render.queue.keys import OFFERED_KEY, alive_key, job_key, lanes, reply_channel, result_key
from render.queue.records import JOB_RECORD_TTL_SECONDS, Absences
from service.errors import TemporaryUnavailable

log = logging.getLogger(__name__)
RESULT_POLL_SECONDS = 1.0
UNCLAIMED_POLLS = 2  # a live worker claims a job within milliseconds of taking it
# KEYS: the waiting lane, RQ's queue, the job's record. ARGV: the most jobs that may wait, the job, the
# record's lifetime, then the record's fields and values. 1 when pushed (and recorded), 0 when full.
PUSH_IF_ROOM = """
if redis.call('LLEN', KEYS[1]) + redis.call('LLEN', KEYS[2]) >= tonumber(ARGV[1]) then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[2])
if #ARGV > 3 then
  redis.call('HSET', KEYS[3], unpack(ARGV, 4))
  redis.call('EXPIRE', KEYS[3], ARGV[3])
end
return 1
"""


class Dispatcher:
    """Enqueue a job, then await its `JobResult` (or None when the wait runs out)."""

    def __init__(self, async_redis: aioredis.Redis, sync_redis: redis.Redis, max_queue: int,
                 regions: list[str] | tuple[str, ...] = (), worker_grace: float = 5.0) -> None:
        self._redis = async_redis
        # Each region's lanes (servers_region), and the common ones under None.
        self._lanes = {region: lanes(region) for region in (None, *regions)}
        self._queues = {region: Queue(name, connection=sync_redis, serializer=JSONSerializer)
                        for region, (_, name) in self._lanes.items()}
        self.sync_redis = sync_redis
        self._max_queue = max_queue
        self.reply_channel = reply_channel()
        self._waiters: dict[str, asyncio.Future[None]] = {}
        self._absences = Absences(worker_grace)
        self._listener: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        self._push_if_room = async_redis.register_script(PUSH_IF_ROOM)

    async def start(self) -> None:
        self._listener = asyncio.create_task(self._listen())
        try:
            await asyncio.wait_for(self._subscribed.wait(), 10)
        except TimeoutError:
            log.warning("result subscription not ready; falling back to polling until it is")

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)

    async def _listen(self) -> None:
        while True:
            pubsub = self._redis.pubsub()
            try:
                await pubsub.subscribe(self.reply_channel)
                self._subscribed.set()
                async for message in pubsub.listen():
                    if message["type"] != "message":
                        continue
                    waiter = self._waiters.get(message["data"].decode())
                    if waiter is not None and not waiter.done():
                        waiter.set_result(None)
            except (redis.RedisError, OSError):
                log.warning("result subscription lost; reconnecting", exc_info=True)
                await asyncio.sleep(0.5)
            finally:
                await pubsub.aclose()

    def _region(self, job: JobRequest) -> str | None:
        region = job.options.get("servers_region") or None
        if region not in self._lanes:  # checked by the API before: a region this process was not started with
            raise TemporaryUnavailable(f"servers_region {region!r} has no lanes on this API process; retry.")
        return region

    async def queue_depth(self) -> int:
        """Jobs waiting for a worker, in every lane of every region."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for region, (waiting, _) in self._lanes.items():
                pipe.llen(waiting)
                pipe.llen(self._queues[region].key)
            return sum(await pipe.execute())

    def _full(self) -> TemporaryUnavailable:
        return TemporaryUnavailable(
            f"All workers are busy and {self._max_queue} requests are already waiting (setting "
            "SCREENSHOT_MAX_QUEUE); retry shortly or add workers.")

    async def _check_room(self, region: str | None) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.llen(self._lanes[region][0])
            pipe.llen(self._queues[region].key)
            if sum(await pipe.execute()) >= self._max_queue:
                raise self._full()

    async def submit(self, job: JobRequest, *, function: str, args: tuple[Any, ...], job_timeout: int,
                     ttl: int | None) -> None:
        """Enqueue without waiting (async jobs); `ttl`: seconds it may wait in the queue (None: forever)."""
        region = self._region(job)
        await self._check_room(region)
        # Known as offered until a worker claims it, so a job lost on its way to a worker is offered again
        # (render.queue.async_jobs.sweep_unclaimed).
        await self._redis.hset(OFFERED_KEY, job.reference, self._queues[region].key)
        await anyio.to_thread.run_sync(partial(
            self._queues[region].enqueue_call, func=function, args=args, job_id=job.reference, timeout=job_timeout,
            ttl=ttl, result_ttl=60, failure_ttl=3600))

    async def run(self, job: JobRequest, wait_seconds: float, record: dict[str, str] | None = None
                  ) -> JobResult | None:
        """Push onto the waiting lane (and write the job's `record`, when given) and wait; None when no
        result came within `wait_seconds`. A job still waiting at its deadline is answered by the worker
        that finally takes it (timeout error); the worker also records how the job ended."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters[job.reference] = waiter
        try:
            fields = [part for pair in (record or {}).items() for part in pair]
            region = self._region(job)
            lane, payload = self._lanes[region][0], orjson.dumps(job.to_json()).decode()
            pushed = await self._push_if_room(
                keys=[lane, self._queues[region].key, job_key(job.reference)],
                args=[self._max_queue, payload, JOB_RECORD_TTL_SECONDS, *fields])
            if not pushed:
                raise self._full()
            give_up = time.monotonic() + wait_seconds
            unclaimed = 0
            while True:
                left = give_up - time.monotonic()
                if left <= 0:
                    return None
                try:
                    await asyncio.wait_for(asyncio.shield(waiter), min(RESULT_POLL_SECONDS, left))
                except TimeoutError:
                    pass
                result = await self._take_result(job.reference)
                if result is not None:
                    return result
                unclaimed = await self._unclaimed(job.reference, lane, payload, unclaimed)
                if await self.worker_died(job.reference):
                    lost = JobResult(job.reference, ok=False, error=InternalError(
                        "The worker rendering this capture stopped (it crashed or was killed); nothing was "
                        "charged. Retry the request.").to_payload())
                    await self._redis.hset(job_key(job.reference), mapping=lost.record_fields())  # type: ignore[arg-type]
                    return lost
        finally:
            self._waiters.pop(job.reference, None)

    async def _unclaimed(self, reference: str, lane: str, payload: str, polls: int) -> int:
        """Polls in a row that found the job neither in its lane nor claimed by a worker. Redis hands a job to
        whichever worker's blocking pop waits longest, even one whose network is gone: the job leaves the lane
        and reaches no one (seen with a worker host's link down). A worker claims a job the moment it pops it
        (its name in the record), so a job unclaimed over two polls is offered again, at the head of its lane."""
        if await self._redis.hget(job_key(reference), "worker") or await self._redis.lpos(lane, payload) is not None:
            return 0  # claimed, or still waiting its turn (the lane is bounded by SCREENSHOT_MAX_QUEUE)
        if polls + 1 < UNCLAIMED_POLLS:
            return polls + 1
        log.warning("job %s left its lane but no worker claimed it (a worker's connection broke as it took "
                    "it?); offered again", reference)
        await self._redis.lpush(lane, payload)
        return 0

    async def worker_died(self, reference: str) -> bool:
        """True when the worker that took the job has stopped beating (killed, crashed, lost) for longer than
        a Redis failover or a network blink takes (render.queue.records.Absences)."""
        worker = await self._redis.hget(job_key(reference), "worker")
        if not worker:
            return False
        name = worker.decode() if isinstance(worker, bytes) else str(worker)
        return self._absences.gone(name, bool(await self._redis.exists(alive_key(name))))

    async def _take_result(self, reference: str) -> JobResult | None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(result_key(reference))
            pipe.delete(result_key(reference))
            fields, _ = await pipe.execute()
        return JobResult.from_redis(fields) if fields else None
