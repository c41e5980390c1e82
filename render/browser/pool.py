"""The tabs a worker's jobs run on: the page kept for an organisation's next job, a spare tab prepared in
the background, or a new one, all on the supervised Chromium.

A worker runs one job at a time in each of its job slots (`JobSlot`), all on the one Chromium; a restart that is due
waits for every slot's job to end (render.browser.supervisor). With settings.reuse_contexts, the page of an
organisation's job is kept for the slot's next job of that organisation, wiped (render.browser.wiping): in each slot,
as in a worker of its own, the pages of the last settings.kept_pages organisations it served, each in its own
context, since the fair hand-off serves organisations in turn. (One page an organisation for all slots would be
still in its wipe, in the slot that served the last job, when the next job comes to the other slot: a new context
costs several wipes.) Otherwise (an organisation whose page is not kept, reuse off) the job takes the spare tab in
a fresh context, prepared in the background while the previous job ran; the spare is kept only while it can serve:
while a slot keeps no page, or its jobs switch to organisations whose pages are not kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from playwright.async_api import Browser, BrowserContext

from render.browser.chromium import Chromium
from render.browser.supervisor import Supervisor
from render.browser.tabs import CLOSE_TIMEOUT_SECONDS, Tab, bring_to_front, open_page, open_tab
from render.browser.wiping import wiped
from render.net.egress import EgressProxy
from render.settings import RenderSettings

log = logging.getLogger(__name__)
TAB_TIMEOUT_SECONDS = 30  # launching Chromium and opening a tab; a healthy one takes well under a second


class JobSlot:
    """A worker's job slot: its tabs are handed out one job at a time, its last job's clean-up first, and the pages
    it keeps for its organisations' next jobs."""

    def __init__(self) -> None:
        self.releasing: asyncio.Future[None] | None = None  # the last job's clean-up (release_soon)
        self.release_held = asyncio.Event()  # the clean-up waits for it (release_now)
        # The pages kept for organisations' next jobs (settings.reuse_contexts), the least recently served first.
        self.warm: dict[str, Tab] = {}
        self.switching = False  # the last job found no page kept for its organisation


class TabPool:
    """Hands out clean tabs on one supervised Chromium, one job at a time in each job slot."""

    def __init__(self, settings: RenderSettings, egress: EgressProxy | None = None) -> None:
        self.settings = settings
        self.egress = egress  # every connection goes through it, each context through a listener of its own
        self.chromium = Chromium(settings, egress.url if egress is not None else None)
        self.supervisor = Supervisor(self.chromium, restart_after=settings.jobs_per_browser)
        self._prepared: asyncio.Task[Tab] | None = None
        self.slot = JobSlot()  # the one a caller that names none uses
        self._slots = [self.slot]
        self._held: dict[int, Tab] = {}  # the tabs handed out whose jobs have not given them back, by identity
        self._closed = False
        self.reuses = 0  # jobs served a kept page, or a new page in a kept context (settings.reuse_contexts)
        self.memory_reliefs = 0  # times Chromium was told to free its caches (settings.chromium_memory_mb)

    @property
    def restarts(self) -> int:
        """Chromium's crashes found and restarts made."""
        return self.supervisor.restarts

    @property
    def chrome_version(self) -> str:
        """Full version of the running Chromium ("156.0.8078.79")."""
        return self.chromium.version

    async def _browser(self) -> Browser:
        await self.supervisor.ensure()
        assert self.chromium.browser is not None
        return self.chromium.browser

    async def _new_tab(self) -> Tab:
        return await open_tab(await self._browser(), self.chromium.version, self.egress)

    async def _new_page(self, context: BrowserContext) -> Tab:
        return await open_page(context, self.chromium.version)

    def new_slot(self) -> JobSlot:
        """Another job slot on this pool's Chromium."""
        slot = JobSlot()
        self._slots.append(slot)
        return slot

    async def acquire(self, owner: str | None = None, *, blank: bool = False, slot: JobSlot | None = None) -> Tab:
        """A clean tab at the default viewport for `slot`'s next job (its last job's clean-up done first): the page
        kept for `owner`, else the spare tab, else a new one. `blank`: a page whose document has an opaque origin of
        its own (an html or markdown source is written into it): a kept page's own about:blank keeps the origin of
        the page it unloaded, so the browser navigates it to about:blank anew (still far cheaper than a new page).
        The job holds Chromium until it gives the tab back (`release_soon`, `release`)."""
        slot = slot or self.slot
        releasing, slot.releasing = slot.releasing, None
        if releasing is not None:
            self.release_now(slot)
            await asyncio.gather(releasing, return_exceptions=True)
        await self.supervisor.hold()
        try:
            tab = await self._clean_tab(owner, blank, slot)
        except BaseException:
            self.supervisor.let_go()
            raise
        self._held[id(tab)] = tab
        return tab

    def _give_back(self, tab: Tab) -> None:
        """The job is done with `tab`: it holds Chromium no more."""
        if self._held.pop(id(tab), None) is not None:
            self.supervisor.let_go()

    async def _clean_tab(self, owner: str | None, blank: bool, slot: JobSlot) -> Tab:
        if self.supervisor.crashed():
            # Chromium died: whatever was being prepared on it will never finish.
            await self._discard_prepared()
            await self._discard_warm()
        warm = await self._warm_tab(owner, slot)
        if warm is not None:
            warm.begin_arrival()  # its own document ends the refusal of what the document left asks for
        if warm is not None and blank:
            # Navigated by the browser (not by its page), about:blank is a document of an opaque origin of its
            # own, with nothing of the origin the page held (tests/integration/test_context_reuse.py).
            await warm.page.goto("about:blank", timeout=TAB_TIMEOUT_SECONDS * 1000)
            warm.arrives()  # the job's document is written into it: no document request of its own
        return warm or await self._fresh_tab(spare=not self._keeps(owner), slot=slot)

    def _keeps(self, owner: str | None) -> bool:
        """Whether `owner`'s job runs on a page kept for its next job."""
        return owner is not None and self.settings.reuse_contexts

    async def _warm_tab(self, owner: str | None, slot: JobSlot) -> Tab | None:
        """The page `slot` kept for `owner`, if any (the others stay kept for their own organisations: they never
        share)."""
        if not slot.warm:
            return None
        tab = slot.warm.pop(owner, None) if owner is not None else None
        slot.switching = tab is None
        if tab is None:
            return None
        if not (tab.context.browser and tab.context.browser.is_connected()):
            await tab.close()
            return None
        try:
            # A page that is not its window's active tab gets no rendering updates in headless Chromium
            # (lazy loading, IntersectionObserver and animation frames would wait for it to be shown).
            await asyncio.wait_for(bring_to_front(tab), TAB_TIMEOUT_SECONDS)
        except Exception:
            log.warning("a kept page could not be brought to front; using a new context", exc_info=True)
            await tab.close()
            return None
        self.reuses += 1
        return tab

    def _spare_wanted(self) -> bool:
        """Whether a spare tab may serve a next job: a slot keeps no page, or its jobs switch to organisations whose
        pages are not kept."""
        return any(not slot.warm or slot.switching for slot in self._slots)

    async def _fresh_tab(self, *, spare: bool, slot: JobSlot) -> Tab:
        """The spare tab, else a new one; with `spare`, the next spare starts being created meanwhile."""
        tab = await self._spare_tab()
        if tab is None:
            tab = await asyncio.wait_for(self._new_tab(), TAB_TIMEOUT_SECONDS)
        if spare or slot.switching:
            self.prepare()  # the next job's tab is created while this one runs
        return tab

    async def _spare_tab(self) -> Tab | None:
        """The prepared tab, when it was made and its browser still runs."""
        prepared, self._prepared = self._prepared, None
        if prepared is None:
            return None
        try:
            tab = await asyncio.wait_for(prepared, TAB_TIMEOUT_SECONDS)
        except Exception:
            log.warning("prepared tab failed; creating one now", exc_info=True)
            return None
        if tab.context.browser and tab.context.browser.is_connected():
            return tab
        await tab.close()
        return None

    async def release(self, tab: Tab, *, healthy: bool = True, owner: str | None = None,
                      origins: Iterable[str] = (), slot: JobSlot | None = None) -> None:
        """Wipe and keep the job's page for its owner's next job in `slot` (or close its context), restart Chromium
        when due (once every other slot's job is over), and prepare a spare tab when one may serve."""
        slot = slot or self.slot
        self._give_back(tab)
        restart_due = self.supervisor.job_done(healthy=healthy)
        for helper in tab.helpers.values():
            helper.switch_off()
        # Measured while the page is wiped (the answer takes a round trip to Chromium).
        measuring = None if restart_due or not self.settings.chromium_memory_mb else asyncio.ensure_future(
            self.chromium.private_memory())
        kept = None
        if owner is not None and self._keeps(owner) and not restart_due and not tab.crashed \
                and not tab.credentials_used:
            kept = await wiped(tab, origins, self._new_page)
        if kept is not None:
            assert owner is not None
            slot.warm[owner] = kept  # the most recently served last
            while len(slot.warm) > self.settings.kept_pages:  # the least recently served goes
                await slot.warm.pop(next(iter(slot.warm))).close()
        elif not await tab.close():
            log.warning("a tab did not close within %s s; restarting chromium", CLOSE_TIMEOUT_SECONDS)
            restart_due = True
        if restart_due:
            await self._discard_prepared()
            await self._discard_warm()
            await self.supervisor.restart_when_idle()
        if measuring is not None:
            await self._relieve_memory(measuring, kept)
        if self._spare_wanted():
            self.prepare()
        else:
            await self._discard_prepared()  # the kept context serves the next job

    async def _relieve_memory(self, measuring: asyncio.Future[int], kept: Tab | None) -> None:
        """When the memory `measuring` found is over settings.chromium_memory_mb, have Chromium free its caches
        and the kept page's renderer collect the job's JavaScript garbage (memory pressure alone leaves it)."""
        try:
            held = await measuring
            if held > self.settings.chromium_memory_mb * len(self._slots) * 2**20:  # the budget is a slot's
                await asyncio.gather(self.chromium.relieve_memory(),
                                     *([kept.send("HeapProfiler.collectGarbage")] if kept else []))
                self.memory_reliefs += 1
                log.debug("chromium held %d MiB of private memory; told to free it", held // 2**20)
        except Exception:  # Chromium restarting or gone: the next job starts a new one anyway
            log.debug("could not measure or relieve chromium's memory", exc_info=True)

    def release_soon(self, tab: Tab, *, healthy: bool = True, owner: str | None = None,
                     origins: Iterable[str] = (), slot: JobSlot | None = None) -> None:
        """The job gives `tab` back; `release` in the background once `release_now` is called (the job's result
        is out) or `slot`'s next tab is asked for, whichever comes first: the clean-up (closing a context, wiping
        a page, preparing the spare) takes CPU the result's way out to the caller would otherwise share."""
        slot = slot or self.slot
        self._give_back(tab)
        held = slot.release_held = asyncio.Event()
        if self._keeps(owner) and not tab.crashed:
            tab.leave()  # the page refuses what it asks for from now on: asked of Chromium as the result goes out

        async def when_let() -> None:
            await held.wait()
            await self.release(tab, healthy=healthy, owner=owner, origins=origins, slot=slot)

        slot.releasing = asyncio.ensure_future(when_let())

    def release_now(self, slot: JobSlot | None = None) -> None:
        """Let the tab given to `release_soon` by `slot` be cleaned up now (from the loop's thread)."""
        (slot or self.slot).release_held.set()

    async def _discard_warm(self) -> None:
        for slot in self._slots:
            warm, slot.warm = slot.warm, {}
            for tab in warm.values():
                await tab.close()

    def prepare(self) -> None:
        """Start creating the next tab in the background (no-op when one is being prepared)."""
        if self._prepared is None and not self._closed:
            self._prepared = asyncio.ensure_future(self._new_tab())

    async def probe(self) -> None:
        """Raise unless a tab can be had now: Chromium launched, a page opened in a context of its own and a
        script run in it. The tab stays the spare, prepared for the next job."""
        if self._prepared is not None and self._prepared.done() and (
                self._prepared.cancelled() or self._prepared.exception() is not None):
            self._prepared = None  # a failed preparation: try again
        self.prepare()
        assert self._prepared is not None
        try:
            tab = await asyncio.wait_for(asyncio.shield(self._prepared), TAB_TIMEOUT_SECONDS)
            await asyncio.wait_for(tab.run("() => 1 + 1"), TAB_TIMEOUT_SECONDS)
        except BaseException:
            await self._discard_prepared()
            raise

    async def restart(self) -> None:
        """Close Chromium now; the next tab starts a new one."""
        await self._discard_prepared()
        await self._discard_warm()
        await self.supervisor.restart()

    async def _discard_prepared(self) -> None:
        prepared, self._prepared = self._prepared, None
        if prepared is None:
            return
        if not prepared.done():
            prepared.cancel()
        try:
            tab = await asyncio.wait_for(prepared, CLOSE_TIMEOUT_SECONDS)
        except BaseException:
            return
        await tab.close()

    async def close(self) -> None:
        """Stop Chromium and Playwright (after any clean-up still running)."""
        self._closed = True
        for slot in self._slots:
            if slot.releasing is not None:
                self.release_now(slot)
                await asyncio.gather(slot.releasing, return_exceptions=True)
        await self.restart()
        await self.chromium.close()
