"""Hand jobs to the workers and wait for their results without blocking the event loop.

Every capture job is offered on its lane, in its organisation's stream of its class, all read by the workers as
one consumer group (one script with the fair admission check and the job's record: render.queue.lanes); a job is
handed to one worker, which is written down in the same step, and offered again only when that worker is proven
gone before starting it. Each API process subscribes once to its own reply channel; a waiting request is just a
future in `_waiters`, so hundreds can wait at once on one Redis connection. The notification carries the result itself
when it is small (render.contract.wire.JobResult.to_message), and the worker has settled the job's quota with
it: a capture costs the API no round trip after the worker is done. A periodic check of the result key covers
a notification lost while the subscription was reconnecting.
"""

from __future__ import annotations

import asyncio
import logging
import time

import redis
import redis.asyncio as aioredis

from render.contract.errors import InternalError
from render.contract.wire import JobRequest, JobResult
from render.queue import lanes
from render.queue.keys import alive_key, job_key, lane_key, reply_channel, result_key
from render.queue.lane_scripts import INTERACTIVE
from render.queue.records import Absences
from render.queue.redis_client import replicas_have_async
from service.errors import TemporaryUnavailable, over_share

log = logging.getLogger(__name__)
RESULT_POLL_SECONDS = 1.0


class Dispatcher:
    """Enqueue a job, then await its `JobResult` (or None when the wait runs out)."""

    def __init__(self, async_redis: aioredis.Redis, sync_redis: redis.Redis, max_queue: int,
                 regions: list[str] | tuple[str, ...] = (), worker_grace: float = 5.0) -> None:
        self._redis = async_redis
        # Each region's lane (servers_region), and the common one under None.
        self._lanes = {region: lane_key(region) for region in (None, *regions)}
        self.sync_redis = sync_redis
        self._max_queue = max_queue
        self.reply_channel = reply_channel()
        self._waiters: dict[str, asyncio.Future[JobResult | None]] = {}
        self._forgetting: set[asyncio.Task[None]] = set()
        self._absences = Absences(worker_grace)
        self._listener: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        self._offer = lanes.OFFER.on(async_redis)
        self._waiting = lanes.WAITING.on(async_redis)

    @property
    def lanes(self) -> list[str]:
        """The lanes this API offers jobs on (swept by its sweeper)."""
        return list(self._lanes.values())

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
                    reference, result = JobResult.from_message(message["data"])
                    waiter = self._waiters.get(reference)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(result)  # None: the result is under its key
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
        return int(await self._waiting(keys=self.lanes))

    async def _offer_job(self, job: JobRequest, answer: str, job_class: str, record: dict[str, str] | None) -> None:
        keys, args = lanes.offer_call(self._lanes[self._region(job)], job, answer, job_class, self._max_queue, record)
        offered = lanes.Offered.from_reply(await self._offer(keys=keys, args=args))
        if not offered.added:
            if offered.newly_noisy:
                log.warning("organisation %s is over its share of the queue (%d jobs waiting, its share %d of %d): "
                            "its new work is refused until it drains", job.organisation, offered.waiting,
                            offered.share, self._max_queue)
            raise over_share(offered, self._max_queue)
        await replicas_have_async(self._redis)  # accepted means it survives a failover

    async def submit(self, job: JobRequest) -> None:
        """Offer an async job without waiting (batch work); the worker that renders it finishes it."""
        await self._offer_job(job, lanes.ASYNC, lanes.BATCH, None)

    async def run(self, job: JobRequest, wait_seconds: float, record: dict[str, str] | None = None, *,
                  job_class: str = INTERACTIVE) -> JobResult | None:
        """Offer the job (and write its `record`, when given) and wait; None when no result came within
        `wait_seconds`. `job_class`: INTERACTIVE or HEAVY when its client waits for it, BATCH when it does not
        really (a bulk entry's, a cache refresh's).
        A job still waiting at its deadline is answered by the worker that finally takes it (timeout error);
        the worker also records how the job ended."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters[job.reference] = waiter
        try:
            await self._offer_job(job, lanes.SYNC, job_class, record)
            give_up = time.monotonic() + wait_seconds
            while True:
                left = give_up - time.monotonic()
                if left <= 0:
                    return None
                try:
                    result = await asyncio.wait_for(asyncio.shield(waiter), min(RESULT_POLL_SECONDS, left))
                except TimeoutError:
                    result = None
                if result is not None:
                    self._forget_soon(job.reference)
                    return result
                if waiter.done():  # notified, the result under its key: wait for the next notice after this
                    waiter = self._waiters[job.reference] = asyncio.get_running_loop().create_future()
                result = await self._take_result(job.reference)
                if result is not None:
                    return result
                if await self.worker_died(job.reference):
                    lost = JobResult(job.reference, ok=False, error=InternalError(
                        "The worker rendering this capture stopped (it crashed or was killed); nothing was "
                        "charged. Retry the request.").to_payload())
                    await self._redis.hset(job_key(job.reference), mapping=lost.record_fields())  # type: ignore[arg-type]
                    return lost
        finally:
            self._waiters.pop(job.reference, None)

    async def worker_died(self, reference: str) -> bool:
        """True when the worker that took the job has stopped beating (killed, crashed, lost) for longer than
        a Redis failover or a network blink takes (render.queue.records.Absences)."""
        worker = await self._redis.hget(job_key(reference), "worker")
        if not worker:
            return False
        name = worker.decode() if isinstance(worker, bytes) else str(worker)
        return self._absences.gone(name, bool(await self._redis.exists(alive_key(name))))

    def _forget_soon(self, reference: str) -> None:
        """The result key of a result the notification brought, deleted after the answer is on its way."""
        task = asyncio.create_task(self._forget(reference))
        self._forgetting.add(task)
        task.add_done_callback(self._forgetting.discard)

    async def _forget(self, reference: str) -> None:
        try:
            await self._redis.unlink(result_key(reference))
        except (redis.RedisError, OSError):  # it expires anyway (RESULT_TTL_SECONDS)
            log.debug("could not delete the result of %s", reference, exc_info=True)

    async def _take_result(self, reference: str) -> JobResult | None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(result_key(reference))
            pipe.delete(result_key(reference))
            fields, _ = await pipe.execute()
        return JobResult.from_redis(fields) if fields else None
