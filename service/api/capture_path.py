"""The one capture path of the API: what /take, /animate, bulk, compare and monitors do with a capture once its
request is read (routes present the outcome). A slot held (service.quota), the job sealed and handed to a
worker (service.api.dispatch) and settled; the cache's single flight and its background refresh; an async start; the
webhook of a synchronous capture; one page load for several outputs (bulk `optimize`); a sub-request's options.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

import anyio

from render.contract import request_params, sealing
from render.contract.errors import CaptureTimeout, ErrorDetail, RequestNotValid, ServiceError
from render.contract.options import TakeOptions, parse_take_options
from render.contract.timings import CACHE_HIT
from render.contract.wire import (
    Answer,
    Capture,
    JobRequest,
    JobResult,
    Recorded,
    Variant,
    Variants,
    Waiting,
    WebhookOrder,
    Work,
)
from render.queue import deliveries, lanes
from render.queue.records import queued_fields
from service.api import cache
from service.api.context import AppContext
from service.organisations import Organisation
from service.quota import slot_hold
from storage import StorageError

log = logging.getLogger(__name__)


def new_reference() -> str:
    """A job id: sortable by time, unguessable."""
    return f"{int(time.time() * 1000):x}{secrets.token_hex(8)}"


def new_job(org: Organisation, reference: str, trace_id: str, work: Work, answer: Answer,
            webhook: WebhookOrder | None = None) -> JobRequest:
    """Every job the API offers is made here: what it runs and how it is answered."""
    return JobRequest(reference=reference, organisation=org.id, trace_id=trace_id, work=work, answer=answer,
                      webhook=webhook, enqueued_at=time.time())


def capture_of(context: AppContext, options: TakeOptions, reference: str, **storing: Any) -> Capture:
    """A capture of `options`: what may be stored, and every secret of the job (credentials, the vision key)
    sealed for its worker in one token (render.contract.sealing), never stored as it is."""
    public, sealed = sealing.seal_job(options, context.settings.render.job_secret, reference)
    return Capture(options=public, sealed=sealed, model=options.job_kind, **storing)


def webhook_order(context: AppContext, options: TakeOptions) -> WebhookOrder | None:
    """Where the job's outcome goes, with this API's retry schedule; None without `webhook_url`."""
    if options.webhook_url is None:
        return None
    return context.settings.service.webhook_order(options.webhook_url, sign=options.webhook_sign,
                                                  errors=options.webhook_errors)


async def run_capture(context: AppContext, org: Organisation, options: TakeOptions, reference: str,
                      trace_id: str, *, store: bool = False, store_key: str | None = None,
                      keep_body: bool = False, interactive: bool = True) -> JobResult:
    """Hold a slot, run the job on a worker, settle the quota (unless the worker did, with its result);
    raise the job's error if it failed. `interactive`: a client waits for this capture alone (not a bulk entry,
    nor a background refresh), so it goes before batch work."""
    grace = context.settings.service.result_wait_grace
    await context.quota.hold(org, reference, slot_hold(options.timeout, grace))
    success = settled = False
    try:
        capture = capture_of(context, options, reference, store=store, store_key=store_key,
                             keep_body=keep_body or (store and options.response_type == "by_format"))
        job = new_job(org, reference, trace_id, capture,
                      Waiting(context.dispatcher.reply_channel, deadline=time.time() + options.timeout),
                      webhook_order(context, options))
        with context.metrics.in_flight.track_inprogress():
            job_class = (lanes.HEAVY if options.heavy else lanes.INTERACTIVE) if interactive else lanes.BATCH
            result = await context.dispatcher.run(job, wait_seconds=options.timeout + grace,
                                                  record=queued_fields(org.id), job_class=job_class)
        settled = result is not None and result.settled
        if result is None:
            result = JobResult(reference, ok=False, error=CaptureTimeout(
                f"No worker finished the capture within timeout ({options.timeout} s); the service may be "
                "overloaded: retry, or raise timeout.").to_payload())
            await context.records.finished(reference, result)
            if job.webhook is not None:  # no worker ended it: the API owes what the worker would have
                await anyio.to_thread.run_sync(deliveries.owe, context.dispatcher.sync_redis, job, result)
        if not result.ok:
            raise ServiceError.from_payload(result.error or {})
        success = True
        return result
    finally:
        # Shielded: a client hanging up must not leave the slot held until it expires.
        if not settled:
            await asyncio.shield(context.quota.settle(org, reference, success=success))


async def start_async(context: AppContext, org: Organisation, options: TakeOptions, reference: str,
                      trace_id: str) -> None:
    """Hold a slot and queue the job; the worker finishes it (quota, record, webhook)."""
    grace = context.settings.service.result_wait_grace
    await context.quota.hold(org, reference, slot_hold(options.timeout, grace, queued=True))
    try:
        job = new_job(org, reference, trace_id, capture_of(context, options, reference, store=True),
                      Recorded(timeout=options.timeout), webhook_order(context, options))
        await context.records.queued(reference, org.id, job=job)
        await context.dispatcher.submit(job)
    except BaseException:
        await asyncio.shield(context.quota.settle(org, reference, success=False))
        raise


async def cached_result(context: AppContext, options: TakeOptions, digest: str
                        ) -> tuple[JobResult, str, bool] | None:
    """A live entry whose object is still stored, with its bytes when the caller wants them; and whether it is
    stale (past its TTL, within cache_stale_ttl)."""
    hit = await context.cache.get(digest)
    if hit is None or not hit[0].storage_key:
        return None
    result, reference, stale = hit
    key = result.storage_key
    assert key is not None
    try:
        if await anyio.to_thread.run_sync(context.storage.stat, key) is None:
            return None
        if options.response_type == "by_format":
            result.body = await anyio.to_thread.run_sync(lambda: b"".join(context.storage.open(key)))
    except StorageError:
        return None
    result.rendering_seconds = 0.0  # nothing was rendered for this answer
    result.timings = dict(CACHE_HIT)
    return result, reference, stale


async def render_into_cache(context: AppContext, org: Organisation, options: TakeOptions, digest: str,
                            reference: str, trace_id: str, *, interactive: bool = True,
                            replacing: str | None = None) -> JobResult:
    """Render the entry and keep it for cache_ttl (and cache_stale_ttl past it); a refresh names the stale
    entry's object it is `replacing`, which it leaves as it is."""
    result = await run_capture(context, org, options, reference, trace_id,
                               store_key=cache.object_key(org.id, digest, options, replacing),
                               keep_body=options.response_type == "by_format", interactive=interactive)
    if "blank" not in result.metadata.get("quality", {}).get("flags", []):  # a blank shot: the next one tries again
        await context.cache.put(digest, result, reference, options.cache_ttl or cache.DEFAULT_TTL,
                                options.cache_stale_ttl or 0)
    return result


async def refresh(context: AppContext, org: Organisation, options: TakeOptions, digest: str, stale: JobResult,
                  trace_id: str) -> None:
    """A stale entry rendered again (charged as a capture), unless a render of it already runs."""
    reference = new_reference()
    if not await context.cache.take_refresh(digest, reference,
                                            options.timeout + context.settings.service.result_wait_grace):
        return
    try:
        await render_into_cache(context, org, options.model_copy(update={"response_type": "json"}), digest,
                                reference, trace_id, interactive=False, replacing=stale.storage_key)
        log.info("cache entry %s refreshed by %s", digest[:12], reference)
    except ServiceError as error:  # the stale entry stays until its window ends; the next request tries again
        log.info("cache entry %s not refreshed: %s: %s", digest[:12], error.code, error.message)
    except Exception:
        log.exception("cache entry %s not refreshed", digest[:12])
    finally:
        await context.cache.end_refresh(digest, reference)


async def run_page_once(context: AppContext, org: Organisation, variants: list[TakeOptions], trace_id: str
                        ) -> list[tuple[str, JobResult | ServiceError]] | None:
    """One job loading the page once for every variant: (reference, result or error) each, charged
    each. None when the organisation's concurrency cannot hold a slot per variant right now."""
    references = [new_reference() for _ in variants]
    grace = context.settings.service.result_wait_grace
    timeout = max(o.timeout for o in variants)
    held: list[str] = []
    try:
        for reference in references:
            await context.quota.hold(org, reference, slot_hold(timeout, grace))
            held.append(reference)
    except ServiceError:
        for reference in held:
            await context.quota.settle(org, reference, success=False)
        return None
    outcomes: list[tuple[str, JobResult | ServiceError]] = []
    try:
        # The page is loaded with the first variant's options, credentials included; the others only shape
        # outputs, so theirs are left out.
        page = capture_of(context, variants[0], references[0], store=variants[0].response_type == "json")
        others = [Variant(ref, sealing.public_options(o.to_payload()), o.response_type == "json")
                  for ref, o in zip(references[1:], variants[1:], strict=True)]
        job = new_job(org, references[0], trace_id, Variants(page, others),
                      Waiting(context.dispatcher.reply_channel, deadline=time.time() + timeout))
        for reference in references:
            await context.records.queued(reference, org.id)
        result = await context.dispatcher.run(job, wait_seconds=timeout + grace, job_class=lanes.BATCH)
        if result is None:
            error: ServiceError = CaptureTimeout(f"No worker finished the capture within timeout ({timeout} s).")
            outcomes = [(reference, error) for reference in references]
        elif not result.ok and not result.variants:  # the page itself failed: every variant with it
            failure = ServiceError.from_payload(result.error or {})
            outcomes = [(reference, failure) for reference in references]
        else:
            for each in [result, *result.variants]:  # their records: written by the worker
                outcomes.append((each.reference, each if each.ok else ServiceError.from_payload(each.error or {})))
        return outcomes
    finally:
        succeeded = {reference for reference, outcome in outcomes if isinstance(outcome, JobResult)}
        for reference in references:
            await asyncio.shield(context.quota.settle(org, reference, success=reference in succeeded))


def entry_options(params: dict[str, Any], answered_here: str | None = None) -> TakeOptions:
    """/take options of an entry of a JSON body (bulk, compare, monitors), or the error /take would answer.
    `answered_here`: the entry is answered by the request itself, so async, webhooks and the cache are refused,
    the message saying why ("with execute=true; ...")."""
    options = parse_take_options({k: _as_param(v) for k, v in params.items()})
    request_params.check(options)
    for name, alias in (("async_", "async"), ("webhook_url", "webhook_url"), ("cache", "cache")):
        if answered_here is not None and getattr(options, name):
            raise RequestNotValid(f"{alias} is not available {answered_here}.",
                                  [ErrorDetail(alias, f"not available {answered_here.split(';')[0]}")])
    return options


def _as_param(value: Any) -> Any:
    """JSON values as /take's JSON body carries them (numbers as text, like parse_body's)."""
    if isinstance(value, bool) or isinstance(value, list) or value is None:
        return value
    return str(value) if isinstance(value, int | float) else value
