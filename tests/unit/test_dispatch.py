"""The dispatcher refuses new work once the lanes are full (SCREENSHOT_MAX_QUEUE), and takes a worker's result
from its notification, the quota already settled with it."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
import redis.asyncio as aioredis

from render.contract.wire import JobResult
from render.queue.endings import MESSAGE_LIMIT_BYTES, end
from render.queue.keys import LANE_KEY, result_key
from service.api.dispatch import Dispatcher
from service.errors import TemporaryUnavailable
from service.organisations import Organisation
from service.quota import QuotaKeeper
from tests.support.jobs import recorded_job, waiting_job


def test_full_queue_is_temporary_unavailable(redis_url: str) -> None:
    # Database 1: no worker of the test service listens there to drain the lane.
    isolated = redis_url.rsplit("/", 1)[0] + "/1"

    async def main() -> None:
        async_redis = aioredis.Redis.from_url(isolated)
        sync_redis = redis.Redis.from_url(isolated)
        dispatcher = Dispatcher(async_redis, sync_redis, max_queue=2)
        try:
            await dispatcher.submit(recorded_job("a1"))
            assert await dispatcher.queue_depth() == 1
            job = waiting_job("r1", deadline=time.time() + 5)
            assert await dispatcher.run(job, wait_seconds=0.5) is None  # room for it; nobody answers
            assert await dispatcher.queue_depth() == 2
            with pytest.raises(TemporaryUnavailable, match="SCREENSHOT_MAX_QUEUE"):
                await dispatcher.run(job, wait_seconds=1)
            with pytest.raises(TemporaryUnavailable, match="SCREENSHOT_MAX_QUEUE"):
                await dispatcher.submit(job)
        finally:
            sync_redis.flushdb()
            await async_redis.aclose()
            sync_redis.close()

    asyncio.run(main())


def test_a_worker_publishes_its_result_with_the_quota_settled_and_the_api_takes_it_from_the_notice(
        redis_url: str) -> None:
    """The worker's one round trip (render.queue.endings.end) settles the slot (a success
    charged once, a failure not at all), records the job and notifies the waiting API with the result itself
    when it is small; a large one the API reads from its key. Either way the key is gone afterwards."""
    isolated = redis_url.rsplit("/", 1)[0] + "/2"  # no worker of the test service reads this database
    org = Organisation(id=f"t{time.monotonic_ns()}", name="t", quota=10, concurrency=5, signing_key=None,
                       require_signature=False)

    async def main() -> None:
        async_redis = aioredis.Redis.from_url(isolated)
        sync_redis = redis.Redis.from_url(isolated)
        dispatcher = Dispatcher(async_redis, sync_redis, max_queue=10)
        keeper = QuotaKeeper(async_redis)
        await dispatcher.start()
        try:
            for reference, ok, body in (("small", True, b"\x89PNG\n" * 10), ("failed", False, b""),
                                        ("large", True, b"x" * (MESSAGE_LIMIT_BYTES + 1))):
                await keeper.hold(org, reference, 60)
                job = waiting_job(reference, org.id, reply_channel=dispatcher.reply_channel,
                                  deadline=time.time() + 5)
                waiting = asyncio.create_task(dispatcher.run(job, wait_seconds=5))
                while not await async_redis.xlen(f"{LANE_KEY}:interactive:{org.id}"):  # offered
                    await asyncio.sleep(0.01)
                sent = JobResult(reference, ok=ok, format="png", body=body,
                                 error=None if ok else {"error_code": "timeout"})
                await asyncio.to_thread(end, sync_redis, job, sent)
                got = await waiting
                assert got is not None and got.settled and got.ok is ok and got.body == body
                await async_redis.delete(*[key async for key in async_redis.scan_iter(f"{LANE_KEY}*")])
                for _ in range(100):
                    if not await async_redis.exists(result_key(reference)):
                        break
                    await asyncio.sleep(0.01)
                assert not await async_redis.exists(result_key(reference))
                assert await keeper.settle(org, reference, success=True) is False  # nothing left to settle
            usage = await keeper.usage(org)
            assert usage.used == 2 and usage.concurrency_remaining == 5
        finally:
            await dispatcher.stop()
            await async_redis.flushdb()
            await async_redis.aclose()
            sync_redis.close()

    asyncio.run(main())
