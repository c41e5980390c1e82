"""A worker process's long-lived state: an event loop thread running the warm browser.

RQ calls jobs synchronously in the worker's main thread (SimpleWorker: no fork per job). Each job
is handed to the browser's event loop with a hard deadline; when a job overruns it, Chromium is
restarted so a stuck page can never hold the worker.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

import orjson
import redis

from render import imaging, sealing, vision
from render.blocking import FilterLists
from render.browser import BrowserSupervisor, Tab
from render.capture import Environment, Output, capture, capture_variants, monotonic_deadline
from render.consent import consent_rule_set
from render.egress import EgressProxy
from render.errors import (
    CaptureTimeout,
    ErrorDetail,
    InternalError,
    NameNotResolved,
    PageCrashed,
    RequestNotValid,
    ServiceError,
    StorageAccessDenied,
)
from render.logs import trace_id_var
from render.network_policy import AddressNotAllowed, NetworkPolicy
from render.options import TakeOptions
from render.protocol import (
    ALIVE_TTL_SECONDS,
    COUNTERS_KEY,
    RESULT_TTL_SECONDS,
    WORKERS_BUSY_KEY,
    WORKERS_SEEN_KEY,
    JobRequest,
    JobResult,
    alive_key,
    local_heartbeat_file,
    record_job,
    result_key,
)
from render.settings import RenderSettings
from storage import Storage, StorageError, object_key
from storage.paths import filled

log = logging.getLogger(__name__)
T = TypeVar("T")
Work = Callable[[Any, Tab, Environment, float], Awaitable[Output]]  # (options, tab, env, deadline) -> Output
HEARTBEAT_SECONDS = 1


MAX_SLICES = 500  # full_page_slices: each is encoded and stored on its own


def _overran(options: TakeOptions) -> CaptureTimeout:
    return CaptureTimeout(f"The capture did not finish within timeout ({options.timeout} s).")


class WorkerRuntime:
    """Owns the browser loop thread; `handle` runs one job to a published result."""

    def __init__(self, settings: RenderSettings, storage: Storage, connection: redis.Redis | None,
                 name: str = "worker") -> None:
        self.settings = settings
        self.storage = storage
        self.redis = connection
        self.name = name
        self.busy = False  # rendering a job right now
        self.loop = asyncio.new_event_loop()
        self.policy = NetworkPolicy.from_settings(settings)
        # Every connection of the browser goes through the egress proxy: the policy, name overrides and
        # upstream proxies all apply there.
        self.egress = EgressProxy(self.policy)
        self.loop.run_until_complete(self.egress.start())
        self.supervisor = BrowserSupervisor(settings, self.egress.url)
        self.lists = FilterLists()  # ad and tracker lists, loaded on first use
        self._thread = threading.Thread(target=self.loop.run_forever, name="browser-loop", daemon=True)
        self._heartbeat_task: concurrent.futures.Future[None] | None = None
        self.last_acquire_seconds = 0.0  # time the last job waited for its tab (profiling)
        self.kinds: dict[str, tuple[type[TakeOptions], Work]] = {"take": (TakeOptions, capture)}

    def start(self) -> None:
        """Start the loop thread, begin warming Chromium, and heartbeat for /readyz."""
        self._thread.start()
        self.call_soon(self.supervisor.prepare)
        rules = consent_rule_set(self.settings)
        if rules is None:
            log.error("autoconsent is not installed (SCREENSHOT_CONSENT_RULES_DIR, or deploy/npm/node_modules of "
                      "the checkout): block_cookie_banners will only hide banners on evidence, not opt out. "
                      "Install it with `make` (npm ci in deploy/npm).")
        else:
            log.info("block_cookie_banners: autoconsent %s", rules.version)
        if self.redis is not None:
            self._heartbeat_task = asyncio.run_coroutine_threadsafe(self._heartbeat(), self.loop)

    def call_soon(self, func: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(func, *args)

    def stop(self) -> None:
        """Close Chromium and stop the loop."""
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            local_heartbeat_file().unlink(missing_ok=True)
        future = asyncio.run_coroutine_threadsafe(self.supervisor.close(), self.loop)
        try:
            future.result(timeout=15)
        except Exception:
            log.warning("browser did not close cleanly", exc_info=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)

    async def _heartbeat(self) -> None:
        """Every second: `alive:<name>` (expires in ALIVE_TTL_SECONDS, so a killed worker's jobs are known
        dead within seconds) and the last-seen time /readyz counts."""
        assert self.redis is not None
        connection = self.redis

        reported: dict[str, int] = {}  # the supervisor's counts already added to COUNTERS_KEY

        heartbeat_file = local_heartbeat_file()

        def beat() -> None:
            heartbeat_file.touch()
            counts = {"browser_restarts": self.supervisor.restarts, "contexts_reused": self.supervisor.reuses,
                      "browser_memory_reliefs": self.supervisor.memory_reliefs}
            with connection.pipeline(transaction=False) as pipe:
                pipe.set(alive_key(self.name), "1", ex=ALIVE_TTL_SECONDS)
                pipe.zadd(WORKERS_SEEN_KEY, {self.name: time.time()})
                if self.busy:
                    pipe.zadd(WORKERS_BUSY_KEY, {self.name: time.time()})
                else:
                    pipe.zrem(WORKERS_BUSY_KEY, self.name)
                for field, count in counts.items():
                    if count > reported.get(field, 0):
                        pipe.hincrby(COUNTERS_KEY, field, count - reported.get(field, 0))
                pipe.execute()
            reported.update(counts)

        while True:
            try:
                await asyncio.to_thread(beat)
            except redis.RedisError:
                log.warning("heartbeat failed", exc_info=True)
            await asyncio.sleep(HEARTBEAT_SECONDS)

    def register(self, kind: str, model: type[TakeOptions], work: Work) -> None:
        """Jobs of `kind` are validated with `model` and run by `work` (the worker command registers
        /animate's recorder here: render never imports animate)."""
        self.kinds[kind] = (model, work)

    def render(self, options: TakeOptions, unix_deadline: float, *, owner: str | None = None) -> Output:
        """Run one capture on the loop thread, enforcing the deadline from this thread too. `owner` (an
        organisation) may get the browser context its previous job left, wiped."""
        return self._run(options, unix_deadline, lambda tab, env, deadline: capture(options, tab, env, deadline),
                         owner=owner)

    def render_variants(self, variants: list[TakeOptions], unix_deadline: float, *,
                        owner: str | None = None) -> list[Output | ServiceError]:
        """One page load, one output per variant (bulk `optimize`)."""
        return self._run(variants[0], unix_deadline,
                         lambda tab, env, deadline: capture_variants(variants, tab, env, deadline), owner=owner)

    def _run(self, options: TakeOptions, unix_deadline: float,
             work: Callable[[Tab, Environment, float], Awaitable[T]], *, owner: str | None = None) -> T:
        future = asyncio.run_coroutine_threadsafe(self._on_tab(options, unix_deadline, work, owner), self.loop)
        hard_limit = unix_deadline - time.time() + self.settings.deadline_grace_seconds
        try:
            return future.result(timeout=max(0.0, hard_limit))
        except concurrent.futures.TimeoutError:
            # The page did not yield even to cancellation: kill Chromium, it restarts lazily.
            future.cancel()
            log.error("capture overran its deadline; restarting chromium")
            asyncio.run_coroutine_threadsafe(self.supervisor.restart(), self.loop).result(timeout=30)
            raise _overran(options) from None

    async def _on_tab(self, options: TakeOptions, unix_deadline: float,
                      work: Callable[[Tab, Environment, float], Awaitable[T]], owner: str | None) -> T:
        deadline = monotonic_deadline(unix_deadline)
        started = time.monotonic()
        tab = await self.supervisor.acquire(owner, blank=options.url is None)
        self.last_acquire_seconds = time.monotonic() - started
        healthy = True
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                env = Environment(self.settings, self.policy, self.supervisor.chrome_version, self.egress, self.lists)
                return await work(tab, env, deadline)
        except Exception as error:
            if tab.crashed:  # whatever step failed, and however, the page's renderer had died
                raise PageCrashed(options.url or "the page") from None
            if isinstance(error, TimeoutError):
                raise _overran(options) from None
            if not isinstance(error, ServiceError):
                healthy = tab.context.browser is not None and tab.context.browser.is_connected()
            raise
        finally:
            # Every origin the job's browser reached went through the egress: their storage is wiped (with
            # every origin the context held before).
            self.supervisor.release_soon(tab, healthy=healthy, owner=owner, origins=self.egress.origins)

    def handle(self, job: JobRequest) -> JobResult:
        """Run a queued job and publish its result; never raises for capture failures."""
        self.busy = True  # the heartbeat reports it: the API's screenshot_workers{state="busy"}
        try:
            return self._handle(job)
        finally:
            self.busy = False

    def _handle(self, job: JobRequest) -> JobResult:
        started = time.monotonic()
        started_at = time.time()
        trace_id_var.set(job.trace_id)
        if time.time() >= job.deadline:
            log.info("job %s expired in the queue", job.reference)
            result = JobResult(job.reference, ok=False, error=CaptureTimeout(
                "The request waited in the queue past its timeout; try again or add workers.").to_payload())
            self._publish(job, result)
            return result
        try:
            model, work = self.kinds[job.kind]
            options = model.model_validate({**job.options, **self._secrets(job)})
            if job.variants:
                result = self._handle_variants(job, options, started)
            else:
                output = self._run(options, job.deadline, lambda tab, env, deadline: work(options, tab, env, deadline),
                                   owner=job.organisation)
                result = self._finish(job, options, output, started)
        except ServiceError as error:
            if error.report:
                log.error("job %s failed: %s", job.reference, error.message)
            result = JobResult(job.reference, ok=False, error=error.to_payload(),
                               rendering_seconds=time.monotonic() - started)
        except Exception:
            log.exception("job %s failed unexpectedly (trace %s)", job.reference, job.trace_id)
            result = JobResult(job.reference, ok=False, error=InternalError().to_payload(),
                               rendering_seconds=time.monotonic() - started)
        result.started_at, result.finished_at = started_at, time.time()
        self._publish(job, result)
        return result

    def _secrets(self, job: JobRequest) -> dict[str, Any]:
        """The job's sealed credentials, opened for this run only."""
        if job.sealed is None:
            return {}
        try:
            return sealing.unseal_secrets(job.sealed, self.settings.job_secret, job.reference)
        except sealing.Unsealable:
            raise RequestNotValid(
                "The worker could not read this job's credentials (cookies, headers, authorization, proxy): the "
                "API and the workers must share SCREENSHOT_JOB_SECRET (it changed, or the service restarted "
                "while the job waited). Send the request again.") from None

    def _finish(self, job: JobRequest, options: TakeOptions, output: Output, started: float) -> JobResult:
        """An output made a result: vision asked, content and result stored as the job says."""
        result = JobResult(
            job.reference, ok=True, rendering_seconds=time.monotonic() - started,
            content_type=output.content_type, size_bytes=len(output.body), format=output.format,
            width=output.width, height=output.height, body=output.body,
            extra={"acquire_seconds": round(self.last_acquire_seconds, 4),
                   "blocked_requests": output.blocked_requests, "metadata": output.metadata})
        log.debug("job %s: waited %.3f s for its tab, %.3f s in all", job.reference,
                  self.last_acquire_seconds, result.rendering_seconds)
        if job.vision is not None:
            result.extra["vision"] = {"completion": self._ask_vision(job, output)}
        if output.content is not None:
            body, extension, content_type = output.content
            result.extra["content_key"] = self._put(
                object_key(job.organisation, f"{job.reference}-content", extension), body, content_type)
        if options.full_page_slices:
            self._store_slices(job, options, output, result)
        if options.store:
            self._upload_to_caller(job, options, output, result)
        if job.store_result or job.store_key:
            self._store(job, options, result)
        return result

    def _upload_to_caller(self, job: JobRequest, options: TakeOptions, output: Output, result: JobResult) -> None:
        """store=true: the output in the caller's bucket, with the caller's credentials, through the egress
        proxy (the network policy); any failure is storage_access_denied (not charged)."""
        from storage.destination import Destination, upload  # boto3: imported by the jobs that need it

        if options.storage_access_key_id is None or options.storage_secret_access_key is None:
            raise StorageAccessDenied("store=true needs storage_access_key_id and storage_secret_access_key; "
                                      "this job's credentials did not reach the worker. Send the request again.")
        assert options.storage_path is not None and options.storage_bucket is not None  # the options' rule
        destination = Destination(
            bucket=options.storage_bucket,
            key=filled(options.storage_path, options.file_extension, reference=job.reference, url=options.url),
            access_key_id=options.storage_access_key_id, secret_access_key=options.storage_secret_access_key,
            endpoint=options.storage_endpoint or self.settings.store_endpoint or None,
            storage_class=options.storage_class, acl=options.storage_acl)
        try:  # refused by name here; the egress checks the address it connects to again
            asyncio.run_coroutine_threadsafe(self.policy.checked_address(destination.host), self.loop).result(30)
        except AddressNotAllowed as refused:
            raise StorageAccessDenied(
                f"storage_endpoint: {refused}; operators can open it with SCREENSHOT_ALLOWED_NETWORKS.") from None
        except (OSError, concurrent.futures.TimeoutError, NameNotResolved):
            raise StorageAccessDenied(f"storage_endpoint: {destination.host} does not resolve.") from None
        try:
            location = upload(destination, output.body, output.content_type, self.egress.url)
        except StorageError as error:
            raise StorageAccessDenied(f"Could not upload to bucket {destination.bucket!r}: {error}.") from None
        result.extra["store"] = {"bucket": destination.bucket, "key": destination.key,
                                 "location": location if options.storage_return_location else None}

    def _store_slices(self, job: JobRequest, options: TakeOptions, output: Output, result: JobResult) -> None:
        """full_page_slices: each band of the final image stored, and a manifest of them (the API serves it
        with fresh links: service/routes/account.py)."""
        step = options.full_page_slice_height - options.full_page_slice_overlap_height
        count = -(-max(1, (output.height or 1) - options.full_page_slice_overlap_height) // step)
        if count > MAX_SLICES:
            raise RequestNotValid(
                f"full_page_slice_height: this {output.height} px image would make {count} slices, more than "
                f"{MAX_SLICES}; ask for taller slices (or less overlap).",
                [ErrorDetail("full_page_slice_height", f"too many slices ({count} > {MAX_SLICES})")])
        palette = output.format == "png" and "image_quality" in options.model_fields_set
        pieces = imaging.cut_slices(output.body, options.full_page_slice_height,
                                    options.full_page_slice_overlap_height,
                                    imaging.EncodeOptions(output.format, options.image_quality, palette=palette))
        slices = []
        for index, piece in enumerate(pieces):
            key = self._put(object_key(job.organisation, f"{job.reference}-slice-{index}", options.file_extension),
                            piece.body, output.content_type)
            slices.append({"index": index, "offset_y": piece.offset_y, "width": piece.width,
                           "height": piece.height, "key": key})
        result.extra["slices"] = slices
        result.extra["slices_manifest"] = self._put(
            object_key(job.organisation, f"{job.reference}-slices", "json"),
            orjson.dumps({"slices": slices}), "application/json")

    def _handle_variants(self, job: JobRequest, options: TakeOptions, started: float) -> JobResult:
        """The first output's result, carrying the others' in `variants` (each may have failed alone)."""
        assert job.variants is not None
        jobs = [job] + [replace(job, reference=v["reference"], options=v["options"], store_result=v["store"],
                                store_key=None, keep_body=False, vision=None, variants=None)
                        for v in job.variants]
        every = [options] + [TakeOptions.model_validate(v["options"]) for v in job.variants]
        results: list[JobResult] = []
        outputs = self.render_variants(every, job.deadline, owner=job.organisation)
        for each, each_options, output in zip(jobs, every, outputs, strict=True):
            try:
                if isinstance(output, ServiceError):
                    raise output
                results.append(self._finish(each, each_options, output, started))
            except ServiceError as error:
                results.append(JobResult(each.reference, ok=False, error=error.to_payload(),
                                         rendering_seconds=time.monotonic() - started))
        first = results[0]
        first.variants = results[1:]
        return first

    def _ask_vision(self, job: JobRequest, output: Output) -> str:
        """The provider's completion for the final image; the key is opened here, used once, dropped."""
        assert job.vision is not None
        image, media_type = output.body, vision.PROVIDER_FORMATS.get(output.format)
        if media_type is None:
            image, media_type = imaging.to_png(output.body), "image/png"
        settings = self.settings
        return vision.ask(
            image, media_type, job.vision.get("prompt"), job.vision.get("max_tokens"),
            api_key=vision.unseal(job.vision["key"], settings.job_secret, job.reference),
            base_url=settings.vision_base_url, model=settings.vision_model, deadline=job.deadline,
            timeout=settings.vision_timeout)

    def _store(self, job: JobRequest, options: TakeOptions, result: JobResult) -> None:
        key = job.store_key or object_key(job.organisation, job.reference, options.file_extension)
        result.storage_key = self._put(key, result.body, result.content_type)
        if not job.keep_body:
            result.body = b""

    def _put(self, key: str, body: bytes, content_type: str) -> str:
        try:
            self.storage.put(key, body, content_type)
        except StorageError as error:
            raise StorageAccessDenied(f"Could not store the result: {error}") from None
        return key

    def _publish(self, job: JobRequest, result: JobResult) -> None:
        if self.redis is None or job.reply_channel is None:
            return
        with self.redis.pipeline(transaction=False) as pipe:
            for each in [result, *result.variants]:  # GET /jobs/{reference} knows at once
                record_job(pipe, each.reference, each.record_fields())
            pipe.hset(result_key(job.reference), mapping=result.to_redis())
            pipe.expire(result_key(job.reference), RESULT_TTL_SECONDS)
            pipe.publish(job.reply_channel, job.reference)
            pipe.execute()
