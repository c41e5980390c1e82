"""Chromium behind a supervisor: lazy start, restart on crash and after N jobs, a warm page ready.

A worker runs one job at a time. With settings.reuse_contexts, the page of an organisation's job is
kept for its next job: unloaded (about:blank), its history reset, and the storage, cache, cookies and
permissions of every origin it reached wiped. Creating a page costs Chromium about as much CPU as loading
and capturing a simple one; navigating the kept page costs nothing extra. A job that changed the page's
own settings (device emulation, routes, init scripts, listeners: `Tab.dirty`) gets its page replaced by a
new one in the same context instead. Otherwise (another organisation, reuse off) the job takes a spare
tab in a fresh context, prepared in the background (DESIGN §6); the spare is kept only while it can serve:
with no kept page, or while jobs switch between organisations. Every tab starts at the default viewport;
device emulation is applied per job over CDP (`render.emulation`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from playwright.async_api import Browser, BrowserContext, CDPSession, Frame, Page, Playwright, async_playwright

from render.client_hints import user_agent_override
from render.devices import DEFAULT_HEIGHT, DEFAULT_WIDTH, desktop_user_agent
from render.egress import web_origin
from render.settings import RenderSettings
from render.trust import chromium_home

log = logging.getLogger(__name__)

NO_SERVICE_WORKERS = "delete Navigator.prototype.serviceWorker;"
# sessionStorage and window.name belong to the tab, not to an origin's storage: forgotten in every frame.
FORGET_TAB_STATE = "() => { try { sessionStorage.clear(); } finally { if (window === top) window.name = ''; } }"
# The main frame forgets, then unloads its document (its scripts stop, its requests are cancelled).
FORGET_AND_UNLOAD = ("() => { try { sessionStorage.clear(); } catch { /* an opaque origin has none */ } "
                     "window.name = ''; location.replace('about:blank'); }")
CLOSE_TIMEOUT_SECONDS = 10
TAB_TIMEOUT_SECONDS = 30  # launching Chromium and opening a tab; a healthy one takes well under a second
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
# Playwright's driver is a Node process; V8's default young generation (16 MB semi-spaces) made it about
# 40 MB larger for no measurable speed. Only young garbage is bounded: the old generation must stay
# free to hold a large screenshot on its way through.
DRIVER_NODE_OPTIONS = "--max-semi-space-size=1"

# Flags for a quiet, deterministic headless Chromium with no calls home. Feature switches are in the
# lists below: Chromium keeps only the last --disable-features (and --enable-features) it is given.
CHROMIUM_ARGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--disable-gpu",
    "--hide-scrollbars",
    "--mute-audio",
    "--disable-dev-shm-usage",
    # Software compositing in the browser process instead of a GPU process of its own (no GPU here): one
    # process and about 10 MB less.
    "--in-process-gpu",
    # WebRTC sends UDP (STUN, TURN, media) straight from the renderer's sockets, around the egress proxy and
    # so around the network policy. With this policy it uses only what goes through the proxy (TURN over a
    # CONNECT tunnel, which the policy checks); measured: a page's STUN requests to loopback stopped.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    # navigator.webdriver is true under automation, and some pages and consent banners hide from such
    # visitors; a screenshot shows what people see (issue 19).
    "--disable-blink-features=AutomationControlled",
]
# Playwright's own lists (its chromiumSwitches, version pinned in requirements.lock; a unit test checks they
# are still complete). Playwright puts them on the command line first, so ours, last, must repeat them.
PLAYWRIGHT_DISABLED_FEATURES = [
    "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "MediaRouter", "PaintHolding",
    "ThirdPartyStoragePartitioning", "AvoidCorsURLLoaderRestartOnRedirect", "TcpPortRandomizationWin",
    "OptimizationHints", "NetworkTimeServiceQuerying", "AimEnabled", "PreconnectToSearch", "msForceBrowserSignIn",
    "msEdgeUpdateLaunchServicesPreferredVersion",
]
PLAYWRIGHT_ENABLED_FEATURES = ["CDPScreenshotNewSurface", "SkipListAccountsWithoutGaiaCookies"]
DISABLED_FEATURES = [
    *PLAYWRIGHT_DISABLED_FEATURES,
    # A new frame host, Blink frame and compositor for every document: half of a navigation's CPU (a kept
    # page navigates twice a job: to its URL, then to about:blank). Measured with Chromium 156 over raw CDP:
    # about:blank 25 -> 10 ms of CPU, a simple page 28 -> 18.
    "RenderDocument",
    # Chromium's own spare renderer duplicates what the supervisor's prepared tab does (~6% CPU a job).
    "SpareRendererForSitePerProcess",
    # Headless Chromium also builds the omnibox's WebUI popups for every window, renderers nothing ever
    # shows that kept about 120 MB (measured with Chromium 156).
    "WebUIOmniboxPopup", "WebUIOmniboxAimPopup", "WebUIOmniboxFullPopup",
]
# Without its sandbox (`--no-sandbox`), Chromium's zygotes (two processes that only fork renderers) and a
# network service process of its own isolate nothing: the network service runs in the browser process and
# renderers are started directly. Measured with Chromium 156 under load: about 140 MB less RSS summed over
# the worker's processes (25 MB PSS), no slower. With the sandbox on, both stay as they are.
UNSANDBOXED_ARGS = ["--no-sandbox", "--no-zygote", "--enable-features=NetworkServiceInProcess2"]
# settings.chromium_low_memory. Smaller caches and a smaller JavaScript heap limit; the 4-bit tiles Chromium
# uses on low-end phones need 512 MB of RAM or less, so captures stay the same pixel for pixel.
LOW_MEMORY_ARGS = ["--enable-low-end-device-mode"]
FEATURE_SWITCHES = ("--disable-features=", "--enable-features=")
# Chromium frees its caches (decoded images, fonts, tiles) on this signal; a page's JavaScript garbage stays.
MEMORY_PRESSURE = ("Memory.simulatePressureNotification", {"level": "critical"})


def chromium_arguments(extra: list[str], *, sandbox: bool = True, low_memory: bool = False) -> list[str]:
    """CHROMIUM_ARGS (with UNSANDBOXED_ARGS without the sandbox, LOW_MEMORY_ARGS in low-memory mode), then
    `extra` (the operator's), with every feature list merged into one switch each."""
    features = {FEATURE_SWITCHES[0]: list(DISABLED_FEATURES), FEATURE_SWITCHES[1]: list(PLAYWRIGHT_ENABLED_FEATURES)}
    args = []
    ours = [*CHROMIUM_ARGS, *([] if sandbox else UNSANDBOXED_ARGS), *(LOW_MEMORY_ARGS if low_memory else [])]
    for arg in [*ours, *extra]:
        switch = next((prefix for prefix in FEATURE_SWITCHES if arg.startswith(prefix)), None)
        if switch is None:
            args.append(arg)
        else:
            features[switch] += [name for name in arg[len(switch):].split(",") if name not in features[switch]]
    return [*args, *(switch + ",".join(names) for switch, names in features.items())]


# Requests with a user or password in their URL (XMLHttpRequest.open with credentials, a page navigating to
# http://user:password@host/) are paused, to be seen: Chromium keeps such credentials in its HTTP auth cache,
# which no DevTools command clears, so a page that used some is not kept. Only URLs holding an "@" pause.
CREDENTIAL_URLS = {"patterns": [{"urlPattern": "*@*", "requestStage": "Request"}]}
# A kept context whose jobs reached more origins than this is closed rather than wiped origin by origin.
MAX_HELD_ORIGINS = 200


# Debian's shell wrappers and the binaries they start.
DEBIAN_BINARIES = {
    Path("/usr/bin/chromium"): Path("/usr/lib/chromium/chromium"),
    Path("/usr/bin/chromium-headless-shell"): Path("/usr/lib/chromium/chromium-headless-shell"),
}


def private_bytes(pid: int) -> int:
    """Memory only `pid` holds (resident, not file-backed or shared), from /proc; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/statm").read_text().split()
    except OSError:
        return 0
    return (int(fields[1]) - int(fields[2])) * PAGE_SIZE


def sandboxed(setting: str) -> bool:
    """Whether Chromium runs with its sandbox: `auto` means unless root, where Chromium refuses it."""
    if setting == "auto":
        return os.geteuid() != 0
    return setting == "on"


def chromium_binary(configured: str) -> str:
    """The Chromium executable to launch.

    Debian's /usr/bin/chromium is a shell wrapper that adds flags from /etc/chromium.d: it loads every
    installed extension (uBlock Origin among them, which would silently block content in every
    capture), turns on GPU rasterization and exports Google API keys. Captures must be deterministic,
    so the wrapper's own binary is launched directly, with only the flags set here (and the
    headless shell's wrapper is skipped too: one process less).
    """
    binary = DEBIAN_BINARIES.get(Path(configured))
    return str(binary) if binary is not None and binary.exists() else configured


class PageHelper(Protocol):
    """Something a job installed in its page for the page's lifetime, off between jobs."""

    def switch_off(self) -> None: ...


@dataclass
class Tab:
    """A page in its own context, with a CDP session for captures."""

    context: BrowserContext
    page: Page
    cdp: CDPSession
    # Set by whatever changes the page's own settings for a job (emulation, routes, init scripts,
    # listeners, extra headers): such a page is not reused for the next job.
    dirty: bool = False
    # Every origin whose documents this context has held (what the egress proxy saw and what the frames
    # showed, over all its jobs): all are wiped after each job, so state written to an origin without
    # a connection of that job's (an inherited about:blank, say) is wiped too.
    held_origins: set[str] = field(default_factory=set)
    crashed: bool = False  # its renderer died (the page's "crash" event)
    # A request of the page carried a user or password in its URL (CREDENTIAL_URLS): the context may hold
    # them in its HTTP auth cache, so it is not kept.
    credentials_used: bool = False
    # Who continues the page's paused requests when one asks to see them all (render.request_context).
    on_request: Callable[[dict[str, Any]], None] | None = None
    # Page-side helpers installed for the page's lifetime (an init script with its binding: render.consent),
    # by name. A job switches on the ones it wants; all are switched off when it is over, so they do not
    # make the page dirty.
    helpers: dict[str, PageHelper] = field(default_factory=dict)
    _continuing: set[asyncio.Future[None]] = field(default_factory=set, repr=False)

    def paused(self, event: dict[str, Any]) -> None:
        """A request paused by Fetch (CREDENTIAL_URLS, or every request for `on_request`)."""
        parts = urlsplit(event["request"]["url"])
        if parts.username or parts.password:
            self.credentials_used = True
        if self.on_request is not None:
            self.on_request(event)
        else:
            task = asyncio.ensure_future(self._continue(event["requestId"]))
            self._continuing.add(task)  # held until done: the loop keeps only a weak reference
            task.add_done_callback(self._continuing.discard)

    async def _continue(self, request_id: str) -> None:
        with contextlib.suppress(Exception):  # cancelled meanwhile, or the page closed
            await self.cdp.send("Fetch.continueRequest", {"requestId": request_id})

    async def close(self) -> bool:
        """Close the tab's context; False when it did not close in time (a hung renderer)."""
        try:
            await asyncio.wait_for(self.context.close(), CLOSE_TIMEOUT_SECONDS)
        except TimeoutError:
            return False
        except Exception:  # the browser may already be gone; nothing left to free then
            log.debug("context close failed", exc_info=True)
        return True


class BrowserSupervisor:
    """Owns one Chromium and hands out fresh tabs, one job at a time."""

    def __init__(self, settings: RenderSettings, proxy_url: str | None = None) -> None:
        self._settings = settings
        self._proxy_url = proxy_url
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._jobs_since_start = 0
        self._prepared: asyncio.Task[Tab] | None = None
        # The page kept from the last job (settings.reuse_contexts), and its owner.
        self._warm: tuple[str, Tab] | None = None
        self._releasing: asyncio.Task[None] | None = None
        self._switching = False  # the last job found a page kept for another organisation
        self._closed = False
        self.restarts = 0
        self.reuses = 0  # jobs served a kept page, or a new page in a kept context (settings.reuse_contexts)
        self.memory_reliefs = 0  # times Chromium was told to free its caches (settings.chromium_memory_mb)
        self._browser_cdp: tuple[Browser, CDPSession] | None = None
        # Chromium's own home, holding the extra certificate authorities when some are configured.
        self._home: Path | None = None
        if settings.ca_certificates:
            self._home = Path(tempfile.mkdtemp(prefix="screenshot-chromium-home-"))
            try:
                chromium_home(Path(settings.ca_certificates), self._home)
            except BaseException:
                shutil.rmtree(self._home, ignore_errors=True)
                raise

    @property
    def chrome_major(self) -> str:
        """Major version of the running Chromium, for user agents that match it."""
        return self.chrome_version.split(".")[0]

    @property
    def chrome_version(self) -> str:
        """Full version of the running Chromium ("156.0.8078.79")."""
        return self._browser.version if self._browser else "0.0.0.0"

    async def _ensure_browser(self) -> Browser:
        if self._browser is not None and self._browser.is_connected():
            return self._browser
        if self._browser is not None:
            log.warning("chromium disconnected; restarting")
            self.restarts += 1
        if self._playwright is None:
            os.environ.setdefault("NODE_OPTIONS", DRIVER_NODE_OPTIONS)  # the driver inherits the environment
            self._playwright = await async_playwright().start()
        sandbox = sandboxed(self._settings.chromium_sandbox)
        args = chromium_arguments(shlex.split(self._settings.chromium_args), sandbox=sandbox,
                                  low_memory=self._settings.chromium_low_memory)
        if self._proxy_url is not None:
            # Everything through the egress proxy, loopback included (Chromium bypasses it by default).
            args += [f"--proxy-server={self._proxy_url}", "--proxy-bypass-list=<-loopback>"]
        try:
            self._browser = await self._playwright.chromium.launch(
                executable_path=chromium_binary(self._settings.chromium_path),
                args=args,
                chromium_sandbox=sandbox,
                env={**os.environ, "HOME": str(self._home)} if self._home else None,
            )
        except Exception:
            if sandbox:
                log.error("Chromium did not start with its sandbox on. In a container the sandbox needs user "
                          "namespaces: run the worker with deploy/seccomp-chromium.json (Docker: --security-opt "
                          "seccomp=deploy/seccomp-chromium.json) or see README, Deploying; as a last resort "
                          "set SCREENSHOT_CHROMIUM_SANDBOX=off.")
            raise
        self._jobs_since_start = 0
        return self._browser

    async def _new_tab(self) -> Tab:
        browser = await self._ensure_browser()
        context = await browser.new_context(
            viewport={"width": DEFAULT_WIDTH, "height": DEFAULT_HEIGHT},
            user_agent=desktop_user_agent(self.chrome_major),
            service_workers="block",
            accept_downloads=False,
        )
        try:
            # service_workers="block" alone still lets a page register one (seen with Chromium 156):
            # the API is removed from every frame before any page script runs.
            await context.add_init_script(NO_SERVICE_WORKERS)
            return await self._new_page(context)
        except BaseException:
            await context.close()
            raise

    async def _new_page(self, context: BrowserContext) -> Tab:
        page = await context.new_page()
        cdp = await context.new_cdp_session(page)
        tab = Tab(context, page, cdp)
        # The default agent's client hints: Chrome's brands, not "HeadlessChrome" (render.client_hints).
        override, _ = user_agent_override(desktop_user_agent(self.chrome_major), self.chrome_version)
        await cdp.send("Emulation.setUserAgentOverride", override)
        page.once("crash", lambda _page: setattr(tab, "crashed", True))
        cdp.on("Fetch.requestPaused", tab.paused)
        await cdp.send("Fetch.enable", CREDENTIAL_URLS)
        return tab

    async def acquire(self, owner: str | None = None, *, blank: bool = False) -> Tab:
        """A clean tab at the default viewport: the page kept for `owner`, else the spare tab, else a new
        one. `blank`: a page whose document has an opaque origin of its own (an html or markdown source is
        written into it; a kept page's about:blank keeps the origin of the page it unloaded)."""
        releasing, self._releasing = self._releasing, None
        if releasing is not None:
            await asyncio.gather(releasing, return_exceptions=True)
        if self._browser is not None and not self._browser.is_connected():
            # Chromium died: whatever was being prepared on it will never finish.
            await self._discard_prepared()
            await self._discard_warm()
        warm = await self._warm_tab(owner)
        if warm is not None and blank:
            await warm.page.close()
            fresh = await self._new_page(warm.context)
            fresh.held_origins = warm.held_origins
            warm = fresh
        return warm or await self._fresh_tab(spare=not self._keeps(owner))

    def _keeps(self, owner: str | None) -> bool:
        """Whether `owner`'s job runs on a page kept for its next job."""
        return owner is not None and self._settings.reuse_contexts

    async def _warm_tab(self, owner: str | None) -> Tab | None:
        """The page kept for `owner`, if any; another owner's kept context is closed (they never share)."""
        warm, self._warm = self._warm, None
        if warm is None:
            return None
        kept_for, tab = warm
        self._switching = kept_for != owner
        if kept_for != owner or not (tab.context.browser and tab.context.browser.is_connected()):
            await tab.close()
            return None
        try:
            # A page that is not its window's active tab gets no rendering updates in headless Chromium
            # (lazy loading, IntersectionObserver and animation frames would wait for it to be shown).
            await asyncio.wait_for(tab.page.bring_to_front(), TAB_TIMEOUT_SECONDS)
        except Exception:
            log.warning("a kept page could not be brought to front; using a new context", exc_info=True)
            await tab.close()
            return None
        self.reuses += 1
        return tab

    def _spare_wanted(self) -> bool:
        """Whether a spare tab may serve the next job: no page is kept, or jobs switch organisations."""
        return self._warm is None or self._switching

    async def _fresh_tab(self, *, spare: bool) -> Tab:
        """The spare tab, else a new one; with `spare`, the next spare starts being created meanwhile."""
        tab = await self._spare_tab()
        if tab is None:
            tab = await asyncio.wait_for(self._new_tab(), TAB_TIMEOUT_SECONDS)
        if spare or self._switching:
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
                      origins: Iterable[str] = ()) -> None:
        """Wipe and keep the job's page for its owner's next job (or close its context), restart Chromium
        when due, and prepare a spare tab when one may serve."""
        self._jobs_since_start += 1
        for helper in tab.helpers.values():
            helper.switch_off()
        restart_due = not healthy or self._jobs_since_start >= self._settings.jobs_per_browser
        # Measured while the page is wiped (the answer takes a round trip to Chromium).
        measuring = None if restart_due or not self._settings.chromium_memory_mb else asyncio.ensure_future(
            self._private_memory())
        kept = (owner is not None and self._keeps(owner) and not restart_due and not tab.crashed
                and not tab.credentials_used and await self._keep(tab, owner, origins))
        if not kept:
            if not await tab.close():
                log.warning("a tab did not close within %s s; restarting chromium", CLOSE_TIMEOUT_SECONDS)
                restart_due = True
        if restart_due:
            await self.restart()
        if measuring is not None:
            await self._relieve_memory(measuring, self._warm[1] if kept and self._warm else None)
        if self._spare_wanted():
            self.prepare()
        else:
            await self._discard_prepared()  # the kept context serves the next job

    async def _browser_session(self) -> CDPSession:
        """A CDP session with the running Chromium itself (not one of its pages); never starts one."""
        browser = self._browser
        if browser is None or not browser.is_connected():
            raise RuntimeError("chromium is not running")
        if self._browser_cdp is None or self._browser_cdp[0] is not browser:
            self._browser_cdp = (browser, await browser.new_browser_cdp_session())
        return self._browser_cdp[1]

    async def _private_memory(self) -> int:
        """Bytes of private memory Chromium's processes hold now."""
        processes = await (await self._browser_session()).send("SystemInfo.getProcessInfo")
        return sum(private_bytes(process["id"]) for process in processes["processInfo"])

    async def _relieve_memory(self, measuring: asyncio.Future[int], kept: Tab | None) -> None:
        """When the memory `measuring` found is over settings.chromium_memory_mb, have Chromium free its caches
        and the kept page's renderer collect the job's JavaScript garbage (memory pressure alone leaves it)."""
        try:
            held = await measuring
            if held > self._settings.chromium_memory_mb * 2**20:
                await asyncio.gather((await self._browser_session()).send(*MEMORY_PRESSURE),
                                     *([kept.cdp.send("HeapProfiler.collectGarbage")] if kept else []))
                self.memory_reliefs += 1
                log.debug("chromium held %d MiB of private memory; told to free it", held // 2**20)
        except Exception:  # Chromium restarting or gone: the next job starts a new one anyway
            log.debug("could not measure or relieve chromium's memory", exc_info=True)

    def release_soon(self, tab: Tab, *, healthy: bool = True, owner: str | None = None,
                     origins: Iterable[str] = ()) -> None:
        """`release` in the background, so the job's result goes out before the clean-up."""
        self._releasing = asyncio.ensure_future(self.release(tab, healthy=healthy, owner=owner, origins=origins))

    async def _keep(self, tab: Tab, owner: str, origins: Iterable[str]) -> bool:
        """Unload the job's page (or replace it, when the job changed its settings), wipe what the job left
        in the context (cookies, storage and cache of every origin it reached, permissions) and keep the
        page for `owner`. False when that fails (the caller then closes the context)."""
        held = tab.held_origins | set(origins) | {origin for frame in tab.page.frames
                                                  if (origin := web_origin(frame.url))}
        if len(held) > MAX_HELD_ORIGINS:
            return False  # a new context holds nothing, and costs less than wiping them all every job
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT_SECONDS):
                for other in tab.context.pages:
                    if other != tab.page:
                        await other.close()  # popups the job's page opened
                if tab.page.url == "about:blank":
                    # Nothing was loaded from a URL (a refused job, an html or markdown source): unloading
                    # this document swaps its renderer host, after which the page's CDP session is lost.
                    tab.dirty = True
                if not tab.dirty:
                    await self._unload(tab)
                kept = tab
                if tab.dirty:
                    await tab.page.close()
                    kept = await self._new_page(tab.context)
                kept.held_origins = held
                # Independent of one another: sent together.
                await asyncio.gather(
                    *(kept.cdp.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"})
                      for origin in sorted(held)),
                    kept.cdp.send("Network.clearBrowserCache"), tab.context.clear_cookies(),
                    tab.context.clear_permissions())
        except Exception:
            log.warning("could not wipe a page for reuse; closing its context", exc_info=True)
            return False
        self._warm = (owner, kept)
        return True

    @staticmethod
    async def _unload(tab: Tab) -> None:
        """Forget the job's document: sessionStorage and window.name, then the document itself and the
        history. Navigated from the page itself, about:blank stays in the page's renderer, which the next
        job then reuses for the same site."""
        main = tab.page.main_frame
        with contextlib.suppress(Exception):  # a frame may be gone or detached meanwhile
            await asyncio.gather(*(frame.evaluate(FORGET_TAB_STATE) for frame in tab.page.frames if frame != main))
        # A plain event, not `wait_for_url`: Playwright's waiters send the driver about nine messages each.
        unloaded = asyncio.get_running_loop().create_future()

        def on_navigated(frame: Frame) -> None:
            if frame == main and frame.url == "about:blank" and not unloaded.done():
                unloaded.set_result(None)

        tab.page.on("framenavigated", on_navigated)
        try:
            await main.evaluate(FORGET_AND_UNLOAD)
            await unloaded
        finally:
            tab.page.remove_listener("framenavigated", on_navigated)
        await tab.cdp.send("Page.resetNavigationHistory")

    async def _discard_warm(self) -> None:
        warm, self._warm = self._warm, None
        if warm is not None:
            await warm[1].close()

    def prepare(self) -> None:
        """Start creating the next tab in the background (no-op when one is being prepared)."""
        if self._prepared is None and not self._closed:
            self._prepared = asyncio.ensure_future(self._new_tab())

    async def restart(self) -> None:
        """Close Chromium now; the next tab starts a new one."""
        await self._discard_prepared()
        await self._discard_warm()
        if self._browser is not None:
            browser, self._browser = self._browser, None
            self.restarts += 1
            try:
                await asyncio.wait_for(browser.close(), 10)
            except Exception:
                log.warning("chromium did not close cleanly", exc_info=True)

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
        if self._releasing is not None:
            await asyncio.gather(self._releasing, return_exceptions=True)
        await self.restart()
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
