"""Webhook deliveries as queued work: what a finished job owes its webhook, put on the `webhooks` queue.

Whoever finishes a job queues its delivery (the API for a synchronous capture with `webhook_url`, the worker
for an async job, the API's sweeper for one whose worker died); `screenshot-service webhooks` posts it
(`render.queue.rq_jobs.deliver`), and RQ's scheduler brings failed attempts back on the job's schedule.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import redis
from rq import Queue, Retry
from rq.serializers import JSONSerializer

from render.contract.wire import JobRequest, JobResult, WebhookOrder
from render.queue.keys import DELIVER_FUNCTION, WEBHOOK_QUEUE, webhook_owed_key
from render.queue.records import job_record_ttl, record_job


@dataclass(frozen=True)
class Delivery:
    """What to post where: enough to rebuild the body of the synchronous answer."""

    reference: str
    organisation: str
    url: str
    sign: bool
    trace_id: str
    options: dict[str, Any]  # the job's options payload
    result: dict[str, Any] | None = None  # JobResult fields (no body: by_format bytes are in storage)
    error: dict[str, Any] | None = None  # the error payload when the job failed
    monitor: dict[str, Any] | None = None  # a monitor's run: {"id", "run"} (render.queue.monitors.run_of)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def delivery_for(job: JobRequest, result: JobResult, webhook: WebhookOrder) -> Delivery | None:
    """The delivery a finished job owes its webhook, if any (failures only with webhook_errors)."""
    if not result.ok and not webhook.errors:
        return None
    return Delivery(
        reference=job.reference, organisation=job.organisation, url=webhook.url, sign=webhook.sign,
        trace_id=job.trace_id, options=job.options, result=result.meta() if result.ok else None,
        error=None if result.ok else result.error)


def monitor_delivery(job: JobRequest, webhook: WebhookOrder, run: dict[str, Any]) -> Delivery:
    """What a monitor's run owes its webhook: the run's record (the courier adds fresh links)."""
    assert job.monitor is not None
    return Delivery(reference=job.reference, organisation=job.organisation, url=webhook.url, sign=webhook.sign,
                    trace_id=job.trace_id, options=job.options, monitor={"id": job.monitor.monitor, "run": run})


def enqueue(connection: redis.Redis, delivery: Delivery, webhook: WebhookOrder) -> bool:
    """Queue the first attempt; RQ retries it on the schedule (len(schedule) + 1 attempts in all). The job's
    reference is the delivery's idempotency key: a job finished twice (a worker thought lost that comes
    back) queues one delivery, and a receiver sees the same `x-service-reference` / `idempotency-key` on
    every attempt. False when the delivery was queued before."""
    queue = Queue(WEBHOOK_QUEUE, connection=connection, serializer=JSONSerializer)
    schedule = webhook.schedule
    retry = Retry(max=len(schedule), interval=schedule) if schedule else None
    owed = webhook_owed_key(delivery.reference)
    with connection.pipeline() as pipe:
        try:
            pipe.watch(owed)
            if pipe.exists(owed):
                return False
            pipe.multi()
            pipe.set(owed, "1", ex=job_record_ttl())
            queue.enqueue_call(DELIVER_FUNCTION, args=(delivery.to_json(),), job_id=f"webhook-{delivery.reference}",
                               retry=retry, timeout=int(webhook.timeout) + 30, result_ttl=86400,
                               failure_ttl=7 * 86400, pipeline=pipe)
            record_job(pipe, delivery.reference, {"webhook": "pending", "webhook_attempts": "0"})
            pipe.execute()
        except redis.WatchError:
            return False  # owed by another finisher at this very moment
    return True


def owe(connection: redis.Redis, job: JobRequest, result: JobResult) -> None:
    """Queue the delivery `job` owes its webhook for `result`, if it has one and owes one."""
    if job.webhook is not None and (delivery := delivery_for(job, result, job.webhook)) is not None:
        enqueue(connection, delivery, job.webhook)
