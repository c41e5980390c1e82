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
import threading
from typing import Any

import httpx
import redis
from rq import get_current_job

from render.contract.errors import ServiceError, documentation_at
from render.contract.options import TakeOptions
from render.contract.wire import JobResult
from render.logs import trace_id_var
from render.net.egress import EgressProxy
from render.net.policy import NetworkPolicy
from render.net.traffic import REFUSED_HEADER
from render.queue.deliveries import Delivery
from render.queue.keys import COUNTERS_KEY, URL_SECRET_KEY
from render.queue.records import mark_job
from service import signatures
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
