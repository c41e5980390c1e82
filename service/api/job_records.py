"""The API's side of job records for GET /jobs/{reference} (an async job's life after its queue is in
render.queue.endings)."""

from __future__ import annotations

import orjson
import redis.asyncio as aioredis

from render.contract.wire import JobRequest, JobResult
from render.queue.keys import job_key
from render.queue.lane_scripts import CANCEL, Cancel
from render.queue.records import job_record_ttl, queued_fields
from render.queue.redis_client import text


class JobRecords:
    """The API's side of job records (a synchronous job's is written by `Dispatcher.run` and its worker)."""

    def __init__(self, connection: aioredis.Redis) -> None:
        self._redis = connection
        self._cancel = CANCEL.on(connection)

    async def queued(self, reference: str, organisation: str, *, job: JobRequest | None = None) -> None:
        """A new job's record; an async `job` keeps what `sweep_orphans` needs to finish it if its worker dies."""
        fields = queued_fields(organisation)
        if job is not None:
            fields["payload"] = orjson.dumps(job.to_json()).decode()
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(job_key(reference), mapping=fields)  # type: ignore[arg-type]
            pipe.expire(job_key(reference), job_record_ttl())
            await pipe.execute()

    async def finished(self, reference: str, result: JobResult) -> None:
        await self._redis.hset(job_key(reference), mapping=result.record_fields())  # type: ignore[arg-type]

    async def get(self, reference: str) -> dict[str, str]:
        return {text(k): text(v) for k, v in (await self._redis.hgetall(job_key(reference))).items()}

    async def cancel(self, reference: str) -> Cancel:
        """Mark an async job no worker has started `cancelled`; TOO_LATE when it cannot be (started, ended, or a
        synchronous job), MONITOR_RUN for a monitor's run."""
        return Cancel(int(await self._cancel(keys=[job_key(reference)])))
