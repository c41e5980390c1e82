"""A worker process's long-lived state: an event loop thread running the warm browser.

Each of the worker's job slots (settings.worker_slots: the main thread's, and one thread each for the others)
takes jobs from its lanes under a name of its own and calls `handle` for each (no fork per job). Each job is
handed to the browser's event loop with a hard deadline; when a job overruns it, Chromium is restarted so a stuck
page can never hold the worker.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import redis

from render.browser.pool import JobSlot, TabPool
from render.browser.tabs import Tab
from render.capture.pipeline import Environment, Output, capture, capture_variants, monotonic_deadline
from render.contract import sealing
from render.contract.errors import (
    BrowserGone,
    CaptureTimeout,
    InternalError,
    PageCrashed,
    ServiceError,
)
from render.contract.options import TakeOptions
from render.contract.timings import stage_listener
from render.contract.wire import Capture, Compare, JobRequest, JobResult, Recorded, Variants
from render.logs import trace_id_var
from render.net.egress import EgressProxy
from render.net.policy import NetworkPolicy
from render.page.blocking import FilterLists
from render.page.consent import consent_rule_set
from render.queue.keys import job_key
from render.queue.records import local_heartbeat_file, unhealthy_file
from render.settings import RenderSettings
from render.worker.comparing import compare_run, run_compare_job
from render.worker.finishing import Finisher
from render.worker.health import BrowserHealth
from render.worker.heartbeat import beat_forever
from storage import Bounded

log = logging.getLogger(__name__)
T = TypeVar("T")
Work = Callable[[Any, Tab, Environment, float], Awaitable[Output]]  # (options, tab, env, deadline) -> Output
PROBE_TIMEOUT_SECONDS = 70  # launching Chromium and opening a tab (TabPool's 30 s each) and some slack


@dataclass
class WorkerSlot:
    """One of the worker's job slots: its name in the lanes and the heartbeat, its turn on the tab pool, and
    whether it renders a job now."""

    name: str
    tabs: JobSlot
    busy: bool = False  # the heartbeat reports it: the API's screenshot_workers{state="busy"}
    last_acquire_seconds: float = 0.0  # the time its last job waited for its tab (profiling)


def _overran(options: TakeOptions) -> CaptureTimeout:
    return CaptureTimeout(f"The capture did not finish within timeout ({options.timeout} s).")


class WorkerRuntime:
    """Owns the browser loop thread; `handle` runs one job to a published result."""

    def __init__(self, settings: RenderSettings, storage: Bounded, connection: redis.Redis | None,
                 name: str = "worker") -> None:
        self.settings = settings
        self.storage = storage
        self.redis = connection
        self.name = name
        self.loop = asyncio.new_event_loop()
        self.policy = NetworkPolicy.from_settings(settings)
        # Every connection of the browser goes through the egress proxy: the policy, name overrides and
        # upstream proxies all apply there.
        self.egress = EgressProxy(self.policy)
        self.loop.run_until_complete(self.egress.start())
        self.tabs = TabPool(settings, self.egress)
        # The first slot is named as the worker; the others after it (`add_slot`).
        self.slots = [WorkerSlot(name, self.tabs.slot)]
        self.lists = FilterLists()  # ad and tracker lists, loaded on first use
        self.finisher = Finisher(settings, storage, connection, self.policy, self.loop, self.egress.url)
        self._thread = threading.Thread(target=self.loop.run_forever, name="browser-loop", daemon=True)
        self._heartbeat_task: concurrent.futures.Future[None] | None = None
        self.kinds: dict[str, tuple[type[TakeOptions], Work]] = {"take": (TakeOptions, capture)}
        self.health = BrowserHealth()  # whether Chromium runs here; the worker takes no job while it does not

    def add_slot(self) -> WorkerSlot:
        """One more job slot on the same browser, named after the worker (before `start`)."""
        slot = WorkerSlot(f"{self.name}.{len(self.slots)}", self.tabs.new_slot())
        self.slots.append(slot)
        return slot

    def start(self) -> None:
        """Start the loop thread and heartbeat for /readyz; Chromium is started by the first `can_render`."""
        self._thread.start()
        rules = consent_rule_set(self.settings)
        if rules is None:
            log.error("autoconsent is not installed (SCREENSHOT_CONSENT_RULES_DIR, or deploy/npm/node_modules of "
                      "the checkout): block_cookie_banners will only hide banners on evidence, not opt out. "
                      "Install it with `make` (npm ci in deploy/npm).")
        else:
            log.info("block_cookie_banners: autoconsent %s", rules.version)
        if self.redis is not None:
            self._heartbeat_task = asyncio.run_coroutine_threadsafe(beat_forever(
                self.redis, lambda: {slot.name: slot.busy for slot in self.slots}, counts=self._counts,
                unhealthy=lambda: self.health.reason), self.loop)

    def can_render(self) -> bool:
        """Whether this worker can take a job: yes while its browser is healthy; otherwise a probe when one is
        due (launch Chromium, open a tab, run a script), and no until one succeeds (render.worker.health)."""
        if self.health.reason is None:
            return True
        if not self.health.probe_due():
            return False
        try:
            asyncio.run_coroutine_threadsafe(self.tabs.probe(), self.loop).result(timeout=PROBE_TIMEOUT_SECONDS)
        except Exception as error:
            what = "Chromium could not start" if not self.tabs.chromium.alive() else "Chromium could not open a page"
            self.health.failed(what, error)
            return False
        self.health.recovered()
        return True

    def call_soon(self, func: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(func, *args)

    def stop(self) -> None:
        """Close Chromium and stop the loop."""
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            local_heartbeat_file().unlink(missing_ok=True)
            unhealthy_file().unlink(missing_ok=True)
        future = asyncio.run_coroutine_threadsafe(self.tabs.close(), self.loop)
        try:
            future.result(timeout=15)
        except Exception:
            log.warning("browser did not close cleanly", exc_info=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)

    def _counts(self) -> dict[str, int]:
        """The browser's and the store's running totals the heartbeat reports (/metrics)."""
        failures = self.finisher.storage.failures
        return {"browser_restarts": self.tabs.restarts, "contexts_reused": self.tabs.reuses,
                "browser_memory_reliefs": self.tabs.memory_reliefs, "storage_timeouts": failures["timeout"],
                "storage_errors": failures["error"], "storage_retries": failures["retried"]}

    def register(self, kind: str, model: type[TakeOptions], work: Work) -> None:
        """Jobs of `kind` are validated with `model` and run by `work` (the worker command registers
        /animate's recorder here: render never imports animate)."""
        self.kinds[kind] = (model, work)

    def render(self, options: TakeOptions, unix_deadline: float, *, owner: str | None = None,
               slot: WorkerSlot | None = None) -> Output:
        """Run one capture on the loop thread, enforcing the deadline from this thread too. `owner` (an
        organisation) may get the browser context its previous job left, wiped. `slot`: the job slot it runs in
        (the first when none is given)."""
        return self._run(options, unix_deadline, lambda tab, env, deadline: capture(options, tab, env, deadline),
                         owner=owner, slot=slot or self.slots[0])

    def render_variants(self, variants: list[TakeOptions], unix_deadline: float, *, owner: str | None = None,
                        slot: WorkerSlot | None = None) -> list[Output | ServiceError]:
        """One page load, one output per variant (bulk `optimize`)."""
        return self._run(variants[0], unix_deadline,
                         lambda tab, env, deadline: capture_variants(variants, tab, env, deadline), owner=owner,
                         slot=slot or self.slots[0])

    def _run(self, options: TakeOptions, unix_deadline: float,
             work: Callable[[Tab, Environment, float], Awaitable[T]], *, owner: str | None, slot: WorkerSlot) -> T:
        try:
            return self._run_once(options, unix_deadline, work, owner, slot)
        except BrowserGone:
            # Nothing of the job left the worker yet (uploads and deliveries come after the capture): it runs
            # once more, on the Chromium the pool starts in place of the dead one.
            if time.time() >= unix_deadline:
                raise
            log.warning("chromium stopped under a job; running it again on a new one")
            return self._run_once(options, unix_deadline, work, owner, slot)

    def _run_once(self, options: TakeOptions, unix_deadline: float,
                  work: Callable[[Tab, Environment, float], Awaitable[T]], owner: str | None, slot: WorkerSlot) -> T:
        future = asyncio.run_coroutine_threadsafe(self._on_tab(options, unix_deadline, work, owner, slot),
                                                  self.loop)
        hard_limit = unix_deadline - time.time() + self.settings.deadline_grace_seconds
        try:
            return future.result(timeout=max(0.0, hard_limit))
        except concurrent.futures.TimeoutError:
            # The page did not yield even to cancellation: kill Chromium, it restarts lazily.
            future.cancel()
            log.error("capture overran its deadline; restarting chromium")
            asyncio.run_coroutine_threadsafe(self.tabs.restart(), self.loop).result(timeout=30)
            raise _overran(options) from None

    async def _on_tab(self, options: TakeOptions, unix_deadline: float,
                      work: Callable[[Tab, Environment, float], Awaitable[T]], owner: str | None,
                      slot: WorkerSlot) -> T:
        deadline = monotonic_deadline(unix_deadline)
        started = time.monotonic()
        tab = await self.tabs.acquire(owner, blank=options.url is None, slot=slot.tabs)
        slot.last_acquire_seconds = time.monotonic() - started
        healthy = True
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                env = Environment(self.settings, self.policy, self.tabs.chrome_version, self.egress, self.lists)
                return await work(tab, env, deadline)
        except Exception as error:
            if not self.tabs.chromium.alive():  # whatever step failed, and however, Chromium itself had died
                healthy = False
                self.health.browser_died(tab.context.browser)  # counted once for every slot's job it took
                raise BrowserGone() from None
            if tab.crashed:  # whatever step failed, and however, the page's renderer had died
                raise PageCrashed(options.url or "the page") from None
            if isinstance(error, TimeoutError):
                raise _overran(options) from None
            if not isinstance(error, ServiceError):
                healthy = tab.context.browser is not None and tab.context.browser.is_connected()
            raise
        finally:
            # The page's traffic ends with its job (render.net.egress): a beacon it sends as it is wiped is refused.
            self.egress.end_job(tab.listener)
            # Every origin the job's browser reached went through the egress: their storage is wiped (with
            # every origin the context held before).
            self.tabs.release_soon(tab, healthy=healthy, owner=owner, origins=self.egress.traffic(tab.listener).origins,
                                   slot=slot.tabs)

    def handle(self, job: JobRequest, slot: WorkerSlot | None = None) -> JobResult:
        """Run a queued job (a recorded one `started` already) in `slot` (the first when none is given) to its
        result, which its worker then ends (render.queue.endings); never raises for capture failures. The job's
        tab is cleaned up meanwhile (render.browser.pool.TabPool.release_soon)."""
        slot = slot or self.slots[0]
        slot.busy = True
        try:
            return self._handle(job, slot)
        finally:
            slot.busy = False
            self.call_soon(self.tabs.release_now, slot.tabs)

    def _handle(self, job: JobRequest, slot: WorkerSlot) -> JobResult:
        started = time.monotonic()
        started_at = time.time()
        trace_id_var.set(job.trace_id)
        recorded = isinstance(job.answer, Recorded)
        stage_listener.set(self._stage_reporter(job.reference) if recorded and self.redis is not None else None)
        if time.time() >= job.deadline:
            log.info("job %s expired in the queue", job.reference)
            return JobResult(job.reference, ok=False, error=CaptureTimeout(
                "The request waited in the queue past its timeout; try again or add workers.").to_payload())
        try:
            work = job.work
            if isinstance(work, Compare):  # two stored shots: no browser
                result = run_compare_job(job, work, self.storage)
            elif isinstance(work, Variants):
                result = self._render_variants(job, work, started, slot)
            else:
                result = self._render(job, work, started, slot)
                compare_run(self.storage, self.redis, job, result)  # a monitor run: what changed
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
        return result

    def _stage_reporter(self, reference: str) -> Callable[[str], None]:
        """An async job's stages written to its record as they begin (`stage`: what GET /jobs/{reference} shows
        of a rendering job); one write a stage, best effort."""
        key, told = job_key(reference), [""]

        def report(stage: str) -> None:
            if stage == told[0]:
                return
            told[0] = stage
            try:
                assert self.redis is not None
                self.redis.hset(key, "stage", stage)
            except redis.RedisError:
                log.debug("could not record the stage of job %s", reference, exc_info=True)

        return report

    def _options(self, job: JobRequest, capture: Capture) -> TakeOptions:
        """The capture's options, its sealed secrets opened, validated by its model."""
        model, _ = self.kinds[capture.model]
        return model.model_validate(sealing.open_job(capture.options, capture.sealed, self.settings.job_secret,
                                                     job.reference))

    def _render(self, job: JobRequest, capture: Capture, started: float, slot: WorkerSlot) -> JobResult:
        options = self._options(job, capture)
        _, work = self.kinds[capture.model]
        output = self._run(options, job.deadline, lambda tab, env, deadline: work(options, tab, env, deadline),
                           owner=job.organisation, slot=slot)
        return self.finisher.result(job, capture, options, output, started, slot.last_acquire_seconds)

    def _render_variants(self, job: JobRequest, variants: Variants, started: float, slot: WorkerSlot) -> JobResult:
        """The first output's result, carrying the others' in `variants` (each may have failed alone)."""
        captures = [(job.reference, variants.page)] + [(v.reference, Capture(options=v.options, store=v.store))
                                                       for v in variants.others]
        every = [self._options(job, variants.page)] + [TakeOptions.model_validate(v.options)
                                                       for v in variants.others]
        results: list[JobResult] = []
        outputs = self.render_variants(every, job.deadline, owner=job.organisation, slot=slot)
        for (reference, one), each_options, output in zip(captures, every, outputs, strict=True):
            each = replace(job, reference=reference, work=one)
            try:
                if isinstance(output, ServiceError):
                    raise output
                results.append(self.finisher.result(each, one, each_options, output, started,
                                                    slot.last_acquire_seconds))
            except ServiceError as error:
                results.append(JobResult(each.reference, ok=False, error=error.to_payload(),
                                         rendering_seconds=time.monotonic() - started))
        first = results[0]
        first.variants = results[1:]
        return first

