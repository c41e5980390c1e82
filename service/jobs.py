"""Jobs nobody waits for (async, webhooks), and every job's record for GET /jobs/{reference}.

`capture_async` runs in a render worker (enqueued by dotted path): it renders, stores the result,
settles the quota, records the outcome and queues the webhook, so the whole life of an async job
survives the API that accepted it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

import orjson
import redis.asyncio as aioredis

from render.protocol import JOB_RECORD_TTL_SECONDS, JobRequest, JobResult, job_key, mark_job
from service import webhooks
from service.organisations import text
from service.quota import settle_now
from service.settings import Settings, load_settings

log = logging.getLogger(__name__)


def outcome_fields(result: JobResult) -> dict[str, str]:
    """A finished job's record fields."""
    if result.ok:
        return {"status": "done", "storage_key": result.storage_key or "", "content_type": result.content_type}
    return {"status": "failed", "error": orjson.dumps(result.error or {}).decode()}


def webhook_delivery(job: JobRequest, result: JobResult, webhook: dict[str, Any]) -> webhooks.Delivery | None:
    """The delivery a finished job owes its webhook, if any (failures only with webhook_errors)."""
    if not result.ok and not webhook.get("errors"):
        return None
    meta = result.meta()
    return webhooks.Delivery(
        reference=job.reference, organisation=job.organisation, url=webhook["url"], sign=bool(webhook["sign"]),
        trace_id=job.trace_id, options=job.options, result=meta if result.ok else None,
        error=None if result.ok else result.error)


_settings: Settings | None = None


def _service_settings() -> Settings:
    global _settings
    if _settings is None:
        _settings = load_settings()
    return _settings


def capture_async(payload: dict[str, Any], webhook: dict[str, Any] | None) -> dict[str, Any]:
    """RQ entry point for async and webhook jobs: render, then finish everything the API would have."""
    from render import jobs as render_jobs  # the worker's side only: the API never loads Playwright

    worker = render_jobs.runtime()
    assert worker.redis is not None
    job = JobRequest.from_json(payload)
    # Time spent waiting in the queue is not the capture's: its timeout starts now.
    job = replace(job, deadline=time.time() + job.timeout)
    mark_job(worker.redis, job.reference, status="rendering", worker=worker.name)
    result = worker.handle(job)
    settle_now(worker.redis, job.organisation, job.reference, success=result.ok)
    mark_job(worker.redis, job.reference, **outcome_fields(result))
    if webhook is not None:
        delivery = webhook_delivery(job, result, webhook)
        if delivery is not None:
            settings = _service_settings().service
            webhooks.enqueue(worker.redis, delivery, webhooks.schedule_of(settings.webhook_retry_schedule),
                             settings.webhook_timeout)
    return {"ok": result.ok, "error_code": (result.error or {}).get("error_code")}


class JobRecords:
    """The API's side of job records."""

    def __init__(self, connection: aioredis.Redis) -> None:
        self._redis = connection

    async def queued(self, reference: str, organisation: str) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(job_key(reference), mapping={"organisation": organisation, "status": "queued",
                                                   "created": str(time.time())})
            pipe.expire(job_key(reference), JOB_RECORD_TTL_SECONDS)
            await pipe.execute()

    async def finished(self, reference: str, result: JobResult) -> None:
        await self._redis.hset(job_key(reference), mapping=outcome_fields(result))  # type: ignore[arg-type]

    async def get(self, reference: str) -> dict[str, str]:
        return {text(k): text(v) for k, v in (await self._redis.hgetall(job_key(reference))).items()}
