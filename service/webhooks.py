"""Webhook deliveries: signed POSTs of a finished job's result, retried on a schedule, kept in Redis.

A delivery is an RQ job on the `webhooks` queue. RQ's scheduler (run by the `webhooks` worker) brings
failed attempts back after each interval of the schedule, so a restart of any process loses nothing.
Each attempt rebuilds the body (fresh result URLs), signs it with the organisation's signing key and
posts it through an egress proxy enforcing the network policy, so a webhook can never reach the
service's own network, even when its name is rebound after the API checked it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import redis
from rq import Queue, SimpleWorker, Worker, get_current_job
from rq.job import Job
from rq.registry import StartedJobRegistry
from rq.scheduler import SCHEDULER_KEY_TEMPLATE, RQScheduler
from rq.serializers import JSONSerializer

from render.contract.errors import ServiceError, documentation_at
from render.contract.options import TakeOptions
from render.contract.wire import JobResult
from render.logs import trace_id_var
from render.net.egress import EgressProxy
from render.net.policy import NetworkPolicy
from render.net.traffic import REFUSED_HEADER
from render.queue import rq_jobs
from render.queue.deliveries import Delivery
from render.queue.keys import COUNTERS_KEY, MONITOR_QUEUE, URL_SECRET_KEY, WEBHOOK_QUEUE
from render.queue.records import mark_job
from render.queue.redis_client import RedisTarget, text
from service import monitor_runs, signatures
from service.organisations import signing_key_of
from service.results import Links, Presented, present_error, present_monitor_run, present_success, with_hosted_names
from service.settings import Settings
from storage import open_storage

log = logging.getLogger(__name__)
USER_AGENT = "screenshot-service-webhooks/1"
DELIVERER_TTL_SECONDS = 60  # RQ worker record TTL; a dead deliverer is noticed within it
DELIVERER_RESTART_SECONDS = 1.0  # before serving again after RQ's worker quit on a Redis error


def signature(body: bytes, signing_key: str) -> str:
    """X-Service-Signature: hex HMAC-SHA256 of the raw body."""
    return signatures.sign(body, signing_key)


class DeliveryFailed(Exception):
    """This attempt got no 2xx; RQ schedules the next one."""


class Courier:
    """One deliverer process's state: storage, links and an egress proxy on a loop thread."""

    def __init__(self, settings: Settings, connection: redis.Redis) -> None:
        self.settings = settings
        self.redis = connection
        documentation_at(settings.service.base_url)
        self.storage = open_storage(settings.storage)
        self._links: Links | None = None
        self.loop = asyncio.new_event_loop()
        self.egress = EgressProxy(NetworkPolicy.from_settings(settings.render))
        self.loop.run_until_complete(self.egress.start())
        threading.Thread(target=self.loop.run_forever, name="egress", daemon=True).start()

    @property
    def links(self) -> Links:
        """URLs signed like the API's: its secret is configured, or made by the API and kept in Redis."""
        if self._links is None:
            secret = self.settings.service.url_signing_secret or self.redis.get(URL_SECRET_KEY)
            if not secret:
                raise DeliveryFailed("the API has not started yet (no URL signing secret in Redis)")
            self._links = Links(self.storage, self.settings.service.base_url,
                                secret.encode() if isinstance(secret, str) else bytes(secret),
                                self.settings.storage.result_url_ttl)
        return self._links

    def present(self, delivery: Delivery) -> Presented:
        if delivery.monitor is not None:  # a monitor's run: the run as GET /v1/monitors/{id}/runs shows it
            return present_monitor_run(delivery.monitor["id"], delivery.monitor["run"], delivery.reference,
                                       delivery.trace_id, self.links)
        options = TakeOptions.model_validate(delivery.options)
        if delivery.error is not None:
            return present_error(ServiceError.from_payload(delivery.error), delivery.reference, delivery.trace_id,
                                 options)
        assert delivery.result is not None
        result = JobResult.from_meta(delivery.result)
        if options.response_type == "by_format" and result.storage_key:
            result.body = b"".join(self.storage.open(result.storage_key))
        return present_success(options, result, delivery.reference, delivery.trace_id, self.links)

    async def _begin_attempt(self) -> None:
        self.egress.begin_job(None)

    def deliver(self, delivery: Delivery, attempt: int) -> int:
        """Post once; the receiver's status, or DeliveryFailed."""
        presented = self.present(delivery)
        headers = {**presented.headers, "user-agent": USER_AGENT, "idempotency-key": delivery.reference,
                   "content-type": presented.media_type or "application/octet-stream"}
        if delivery.sign:
            key = signing_key_of(self.redis, delivery.organisation)
            if key:
                headers["x-service-signature"] = signature(presented.body, key)
        if self.settings.service.hosted_header_names:
            headers = with_hosted_names(headers)
        mark_job(self.redis, delivery.reference, webhook="delivering", webhook_attempts=str(attempt))
        # Each attempt's connections and bookkeeping are its own (else they would grow for the process's life).
        asyncio.run_coroutine_threadsafe(self._begin_attempt(), self.loop).result(5)
        try:
            with httpx.Client(proxy=self.egress.url, timeout=self.settings.service.webhook_timeout,
                              trust_env=False, follow_redirects=False) as client:
                response = client.post(delivery.url, content=presented.body, headers=headers)
        except httpx.HTTPError as error:
            raise DeliveryFailed(f"attempt {attempt} to {delivery.url}: {type(error).__name__}") from None
        marker = response.headers.get(REFUSED_HEADER)
        if marker:  # the egress proxy's own answer: refused by the policy, or nothing to connect to
            raise DeliveryFailed(f"attempt {attempt} to {delivery.url}: {marker}: {response.text}")
        if not 200 <= response.status_code < 300:
            raise DeliveryFailed(f"attempt {attempt} to {delivery.url}: HTTP {response.status_code}")
        mark_job(self.redis, delivery.reference, webhook="delivered")
        return response.status_code


_courier: Courier | None = None


class DeliveryWorker(SimpleWorker):
    """RQ's worker, except that a failed attempt (an expected outcome, logged by `deliver` in one line at
    INFO, or WARNING when given up) is not logged again as an ERROR with a stack trace."""

    def handle_exception(self, job: Job, *exc_info: Any) -> None:
        if isinstance(exc_info[1], DeliveryFailed):
            return
        super().handle_exception(job, *exc_info)


def install(courier: Courier) -> None:
    global _courier
    _courier = courier


def deliver(payload: dict[str, Any]) -> dict[str, Any]:
    """RQ entry point: one attempt. Raising makes RQ schedule the next attempt (or give up)."""
    if _courier is None:
        raise RuntimeError("webhook deliveries run only inside `screenshot-service webhooks`")
    delivery = Delivery(**payload)
    trace_id_var.set(delivery.trace_id)  # this attempt's log lines carry the request's trace id
    job = get_current_job()
    retry_max = (job.retries_left or 0) if job is not None else 0
    attempts_before = 0
    if job is not None and job.meta.get("attempts") is not None:
        attempts_before = int(job.meta["attempts"])
    attempt = attempts_before + 1
    if job is not None:
        job.meta["attempts"] = attempt
        job.save_meta()
    try:
        status = _courier.deliver(delivery, attempt)
    except DeliveryFailed as failed:
        last = retry_max == 0
        _courier.redis.hincrby(COUNTERS_KEY, "webhook_given_up" if last else "webhook_failed_attempts", 1)
        mark_job(_courier.redis, delivery.reference, webhook="failed" if last else "retrying")
        if last:
            log.warning("webhook of %s given up after %d attempts: %s", delivery.reference, attempt, failed)
        else:
            log.info("webhook of %s not delivered (%s); retrying", delivery.reference, failed)
        raise
    _courier.redis.hincrby(COUNTERS_KEY, "webhook_delivered", 1)
    return {"status": status, "attempt": attempt}


def deliverer_connection(target: RedisTarget) -> redis.Redis:
    """The deliverer's Redis client, its timeout beyond RQ's blocking dequeue (worker_ttl - 15 s): redis-py's
    5 s default would cut that wait short when the queue is idle."""
    return target.sync(socket_timeout=DELIVERER_TTL_SECONDS)


# Deletes the lock only if it still names the scheduler that was found dead.
_RELEASE_IF_HELD_BY = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def release_stale_scheduler_lock(connection: redis.Redis, queue_name: str) -> bool:
    """Release the scheduler lock of `queue_name` when the scheduler holding it ran on this machine and is
    gone (its deliverer was killed, and `run` ended its process group): this deliverer's own scheduler then
    takes over at once, instead of after the lock's TTL (61 s) and a maintenance cycle. A lock held on
    another machine, or by a live process, is left alone. True when it released one."""
    lock = RQScheduler.get_locking_key(queue_name)
    holder = connection.get(lock)
    if holder is None:
        return False
    record = {text(k): text(v) for k, v in connection.hgetall(SCHEDULER_KEY_TEMPLATE % text(holder)).items()}
    if record.get("hostname") != socket.gethostname() or not record.get("pid", "").isdigit():
        return False
    if _alive(int(record["pid"])):
        return False
    released = bool(connection.eval(_RELEASE_IF_HELD_BY, 1, lock, holder))
    if released:
        log.warning("the %s scheduler lock was held by a scheduler that died (pid %s); released", queue_name,
                    record["pid"])
    return released


def resume_interrupted(connection: redis.Redis, queue: Queue) -> int:
    """Put back at the head of the queue the deliveries a deliverer of this machine was making when it died:
    RQ would notice them only once their started entry expires (the attempt's timeout) and a maintenance
    cycle runs, a minute or two later. The receiver may have had the interrupted attempt: the next one
    carries the same idempotency key. Returns how many it put back."""
    registry = StartedJobRegistry(queue=queue)
    resumed = 0
    for job_id, _execution in registry.get_job_and_execution_ids():
        job = queue.fetch_job(job_id)
        if job is None or not job.worker_name:
            continue
        record = {text(k): text(v) for k, v in connection.hgetall(Worker.redis_worker_namespace_prefix
                                                                   + job.worker_name).items()}
        if record.get("hostname") != socket.gethostname() or not record.get("pid", "").isdigit():
            continue
        if _alive(int(record["pid"])):
            continue
        registry.remove_executions(job)
        queue.enqueue_job(job, at_front=True)
        resumed += 1
        log.warning("the delivery of %s was interrupted (its deliverer, pid %s, died); sent again",
                    job_id.removeprefix("webhook-"), record["pid"])
    return resumed


def run_deliverer(settings: Settings, *, burst: bool = False) -> None:
    """Serve the webhooks and monitors queues (with RQ's scheduler, which brings retries back and moves monitor
    runs to their queue when due) until SIGTERM."""

    connection = deliverer_connection(settings.service.redis())
    install(Courier(settings, connection))
    monitor_runs.install(monitor_runs.Firing(settings, connection))
    rq_jobs.register(deliver=deliver, fire=monitor_runs.fire)  # what the queued jobs' names run here
    queues = [Queue(name, connection=connection, serializer=JSONSerializer) for name in (WEBHOOK_QUEUE, MONITOR_QUEUE)]
    for queue in queues:
        release_stale_scheduler_lock(connection, queue.name)
        resume_interrupted(connection, queue)
    # After a crash elsewhere, the dead scheduler's lock in Redis lapses within 61 s; a short TTL and
    # maintenance interval let a deliverer take it over within about two minutes, so retries resume by
    # themselves.
    log.info("webhook deliverer serving queue %s", WEBHOOK_QUEUE)
    while True:
        worker = DeliveryWorker(queues, connection=connection, serializer=JSONSerializer,
                                disable_default_exception_handler=True, worker_ttl=DELIVERER_TTL_SECONDS,
                                maintenance_interval=30)
        lost: Exception | None = None
        try:
            worker.work(burst=burst, logging_level="WARNING", with_scheduler=True)
        except redis.RedisError as error:  # raised by RQ's own teardown when Redis refused it too
            lost = error
        # RQ's worker quits on any Redis error it does not expect in its loop (a Sentinel failover's old
        # primary answering NOREPLICAS or READONLY): serve again rather than end, unless told to stop (RQ
        # notes when SIGTERM or SIGINT came, idle or busy; its `_stop_requested` only when busy).
        if burst or getattr(worker, "_shutdown_requested_date", None) is not None:
            return
        log.warning("the webhook deliverer's worker stopped (%s); serving again in %g s",
                    lost or "a Redis error", DELIVERER_RESTART_SECONDS)
        time.sleep(DELIVERER_RESTART_SECONDS)
