"""The dispatcher refuses new work once the lanes are full (SCREENSHOT_MAX_QUEUE)."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
import redis.asyncio as aioredis

from render.contract.wire import JobRequest
from render.queue.keys import LANE_KEY
from service.dispatch import Dispatcher
from service.errors import TemporaryUnavailable


def test_full_queue_is_temporary_unavailable(redis_url: str) -> None:
    # Database 1: no worker of the test service listens there to drain the lane.
    isolated = redis_url.rsplit("/", 1)[0] + "/1"

    async def main() -> None:
        async_redis = aioredis.Redis.from_url(isolated)
        sync_redis = redis.Redis.from_url(isolated)
        dispatcher = Dispatcher(async_redis, sync_redis, max_queue=2)
        try:
            await dispatcher.submit(JobRequest(reference="a1", organisation="o", options={}, trace_id="t",
                                               deadline=0.0, async_=True))
            assert await dispatcher.queue_depth() == 1
            job = JobRequest(reference="r1", organisation="o", options={}, trace_id="t", deadline=time.time() + 5)
            assert await dispatcher.run(job, wait_seconds=0.5) is None  # room for it; nobody answers
            assert await dispatcher.queue_depth() == 2
            with pytest.raises(TemporaryUnavailable, match="SCREENSHOT_MAX_QUEUE"):
                await dispatcher.run(job, wait_seconds=1)
            with pytest.raises(TemporaryUnavailable, match="SCREENSHOT_MAX_QUEUE"):
                await dispatcher.submit(job)
        finally:
            sync_redis.delete(LANE_KEY)
            await async_redis.aclose()
            sync_redis.close()

    asyncio.run(main())
