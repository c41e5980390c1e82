"""The deliverer program (`screenshot-service webhooks`): serves the webhooks and monitors queues with RQ's
scheduler, and after a crash of a deliverer on this machine takes its scheduler lock and its interrupted
deliveries back at once. What each job does is in service.deliverer.webhooks and service.deliverer.monitor_runs.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

import redis
from rq import Queue, SimpleWorker, Worker
from rq.job import Job
from rq.registry import StartedJobRegistry
from rq.scheduler import SCHEDULER_KEY_TEMPLATE, RQScheduler
from rq.serializers import JSONSerializer

from render.queue import rq_jobs
from render.queue.keys import MONITOR_QUEUE, WEBHOOK_QUEUE
from render.queue.redis_client import RedisTarget, text
from render.queue.scripts import RELEASE_LOCK
from service.deliverer import monitor_runs, webhooks
from service.deliverer.webhooks import DeliveryFailed
from service.settings import Settings

log = logging.getLogger(__name__)
DELIVERER_TTL_SECONDS = 60  # RQ worker record TTL; a dead deliverer is noticed within it
DELIVERER_RESTART_SECONDS = 1.0  # before serving again after RQ's worker quit on a Redis error


class DeliveryWorker(SimpleWorker):
    """RQ's worker, except that a failed attempt (an expected outcome, logged by `deliver` in one line at
    INFO, or WARNING when given up) is not logged again as an ERROR with a stack trace."""

    def handle_exception(self, job: Job, *exc_info: Any) -> None:
        if isinstance(exc_info[1], DeliveryFailed):
            return
        super().handle_exception(job, *exc_info)

    def run_maintenance_tasks(self) -> None:
        """RQ's maintenance, after releasing the scheduler lock of a queue whose scheduler died on this machine
        since this deliverer started (found still alive then: a deliverer killed as this one started), so that
        this deliverer's scheduler takes it now rather than when the lock lapses (61 s) and a later maintenance
        comes. A scheduler of ours already running serves only the locks it took: it is started again."""
        released = [queue.name for queue in self.queues if release_stale_scheduler_lock(self.connection, queue.name)]
        if released and self.scheduler is not None:
            if self.scheduler._process is not None and self.scheduler._process.is_alive():
                self.stop_scheduler()  # it gives its locks back as it stops
            self.scheduler.acquire_locks(auto_start=True)
        super().run_maintenance_tasks()


def deliverer_connection(target: RedisTarget) -> redis.Redis:
    """The deliverer's Redis client, its timeout beyond RQ's blocking dequeue (worker_ttl - 15 s): redis-py's
    5 s default would cut that wait short when the queue is idle."""
    return target.sync(socket_timeout=DELIVERER_TTL_SECONDS)


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
    # Only if it still names the scheduler that was found dead.
    released = bool(RELEASE_LOCK.on(connection)(keys=[lock], args=[holder]))
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
    webhooks.install(webhooks.Courier(settings, connection))
    monitor_runs.install(monitor_runs.Firing(settings, connection))
    rq_jobs.register(deliver=webhooks.deliver, fire=monitor_runs.fire)  # what the queued jobs' names run here
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
