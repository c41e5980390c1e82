"""The dispatcher refuses new work once the queue is full (SCREENSHOT_MAX_QUEUE)."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
import redis.asyncio as aioredis

from render.contract.wire import JobRequest
from service.dispatch import Dispatcher
from service.errors import TemporaryUnavailable


def test_full_queue_is_temporary_unavailable(redis_url: str) -> None:
    # Database 1: no worker of the test service listens there to drain the queue.
    isolated = redis_url.rsplit("/", 1)[0] + "/1"

    async def main() -> None:
        async_redis = aioredis.Redis.from_url(isolated)
        sync_redis = redis.Redis.from_url(isolated)
        dispatcher = Dispatcher(async_redis, sync_redis, max_queue=1)
        sync_redis.rpush(dispatcher._queues[None].key, "someone-else")
        try:
            job = JobRequest(reference="r1", organisation="o", options={}, trace_id="t", deadline=time.time() + 5)
            with pytest.raises(TemporaryUnavailable, match="SCREENSHOT_MAX_QUEUE"):
                await dispatcher.run(job, wait_seconds=1)
        finally:
            sync_redis.delete(dispatcher._queues[None].key)
            await async_redis.aclose()
            sync_redis.close()

    asyncio.run(main())
