"""The three sides every scenario is taken by: the plain Playwright script a team would write, the floor (one warm
page, `goto` and `Page.captureScreenshot`) and the service as deployed, called over HTTP; a shot and a scenario."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import redis
import redis.asyncio as aioredis
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import async_playwright

from bench.pages import SITE_ADDRESS
from render.browser.chromium import PAGE_SIZE, chromium_arguments, chromium_binary, sandboxed
from render.settings import RenderSettings
from service.organisations import OrganisationStore
from tests.support.servers import (
    memory_kib,
    process_tree,
    redis_server,
    resident_pages,
    running_service,
)

VIEWPORT = {"width": 1280, "height": 1024}


@dataclass(frozen=True)
class Shot:
    """One capture: seconds end to end, and the service's `x-service-rendering-seconds`."""

    seconds: float
    rendering: float | None = None



@dataclass(frozen=True)
class Scenario:
    """One page and output, captured the same way by both sides (where the plain script can)."""

    name: str
    path: str
    format: str = "png"
    full_page: bool = False
    service_params: tuple[tuple[str, str], ...] = ()
    plain: bool = True  # the plain script runs it too
    # The scenario it is compared with (the same page without the option), taken again in alternation with
    # this one, so that the option's cost is read from shots of the same moments of the machine.
    against: str | None = None



SIMPLE = Scenario("simple page, png", "/bench/simple.html")
MAGIC = {"png": b"\x89PNG", "jpeg": b"\xff\xd8", "webp": b"RIFF"}

class PlainScript:
    """A hand-written Playwright script: warm browser, new context per shot, page.screenshot. It runs on an
    event loop of its own in a thread, so its shots can alternate with the service's."""

    def __init__(self, base: str, chromium: str) -> None:
        self.base, self.chromium = base, chromium
        self.failures: list[str] = []  # shots Chromium refused, taken again
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> PlainScript:
        self._thread.start()
        self._call(self._launch())
        return self

    def __exit__(self, *exc: object) -> None:
        self._call(self._close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def _launch(self) -> None:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        self._playwright = await async_playwright().start()
        self._browser = await self._playwright.chromium.launch(executable_path=chromium_binary(self.chromium),
                                                               args=args)

    async def _close(self) -> None:
        await self._browser.close()
        await self._playwright.stop()

    async def _shot(self, scenario: Scenario) -> float:
        import pyvips

        started = time.perf_counter()
        context = await self._browser.new_context(viewport=VIEWPORT)
        try:
            page = await context.new_page()
            await page.goto(self.base + scenario.path)
            if scenario.format == "webp":
                png = await page.screenshot(type="png", full_page=scenario.full_page)
                pyvips.Image.new_from_buffer(png, "").webpsave_buffer(Q=80)
            else:
                await page.screenshot(type=scenario.format, full_page=scenario.full_page,
                                      **({"quality": 80} if scenario.format == "jpeg" else {}))
        finally:
            await context.close()
        return time.perf_counter() - started

    def shot(self, scenario: Scenario = SIMPLE) -> Shot:
        """One shot; taken again when Chromium could not capture it (headless Chromium sometimes refuses a
        40,000 px page's `page.screenshot`), counted in `failures`."""
        try:
            return Shot(self._call(self._shot(scenario)))
        except PlaywrightError as error:
            self.failures.append(f"{scenario.name}: {str(error).splitlines()[0]}")
            return Shot(self._call(self._shot(scenario)))

    def parallel(self, clients: int, shots: int) -> tuple[list[Shot], float]:
        """`shots` simple-page shots by `clients` concurrent loops; the shots and the wall time."""

        async def run() -> tuple[list[Shot], float]:
            async def client(count: int) -> list[float]:
                return [await self._shot(SIMPLE) for _ in range(count)]

            started = time.perf_counter()
            per_client = await asyncio.gather(*(client(shots // clients) for _ in range(clients)))
            return [Shot(t) for ts in per_client for t in ts], time.perf_counter() - started

        return self._call(run())  # type: ignore[no-any-return]


class Floor:
    """The fastest a capture can be here: one warm page kept open, `goto` and CDP `Page.captureScreenshot`,
    nothing else (no new context, no checks, no encoding beyond Chromium's own). Its Chromium is launched
    with the service's own flags (render.browser.chromium.chromium_arguments: software compositing in the
    browser process, the low-memory mode, ...), so that it is the service's limit, full pages included; it
    runs on the plain script's Playwright and event loop, between its shots."""

    def __init__(self, plain: PlainScript) -> None:
        self.plain = plain

    def __enter__(self) -> Floor:
        self.plain._call(self._open())
        return self

    def __exit__(self, *exc: object) -> None:
        self.plain._call(self._browser.close())

    async def _open(self) -> None:
        settings = RenderSettings()
        sandbox = sandboxed(settings.chromium_sandbox)
        self._browser = await self.plain._playwright.chromium.launch(
            executable_path=chromium_binary(self.plain.chromium), chromium_sandbox=sandbox,
            args=chromium_arguments(shlex.split(settings.chromium_args), sandbox=sandbox,
                                    low_memory=settings.chromium_low_memory))
        self._context = await self._browser.new_context(viewport=VIEWPORT)
        self._page = await self._context.new_page()
        self._cdp = await self._context.new_cdp_session(self._page)

    async def _shot(self, scenario: Scenario) -> float:
        started = time.perf_counter()
        await self._page.goto(self.plain.base + scenario.path)
        fmt = "jpeg" if scenario.format == "jpeg" else "webp" if scenario.format == "webp" else "png"
        params: dict[str, Any] = {"format": fmt, "optimizeForSpeed": True}
        if fmt != "png":
            params["quality"] = 80
        if scenario.full_page:
            width, height = await self._page.evaluate(
                "() => [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": width, "height": height,
                                                             "scale": 1})
        for attempt in range(4):  # as the service: right after load the compositor may have no frame yet
            try:
                await self._cdp.send("Page.captureScreenshot", params)
                break
            except PlaywrightError as error:
                if "Unable to capture screenshot" not in error.message or attempt == 3:
                    raise
                await self._page.evaluate("() => new Promise(r => requestAnimationFrame(() => r()))")
        return time.perf_counter() - started

    def shot(self, scenario: Scenario = SIMPLE) -> Shot:
        return Shot(self.plain._call(self._shot(scenario)))

    def parallel(self, pages: int, shots: int) -> tuple[list[Shot], float]:
        """The floor's throughput: `shots` simple-page shots by `pages` warm pages of its Chromium, each a context
        and a DevTools session of its own, in concurrent loops (goto + Page.captureScreenshot); the shots and the
        wall time. What the service's throughput is measured against as its limit."""

        async def run() -> tuple[list[Shot], float]:
            contexts = [await self._browser.new_context(viewport=VIEWPORT) for _ in range(pages)]
            try:
                warm = []
                for context in contexts:
                    page = await context.new_page()
                    warm.append((page, await context.new_cdp_session(page)))

                async def loop(page: Any, cdp: Any, count: int) -> list[float]:
                    times = []
                    for _ in range(count):
                        started = time.perf_counter()
                        await page.goto(self.plain.base + SIMPLE.path)
                        await cdp.send("Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True})
                        times.append(time.perf_counter() - started)
                    return times

                started = time.perf_counter()
                per_page = await asyncio.gather(*(loop(page, cdp, shots // pages) for page, cdp in warm))
                return [Shot(t) for ts in per_page for t in ts], time.perf_counter() - started
            finally:
                for context in contexts:
                    await context.close()

        return self.plain._call(run())  # type: ignore[no-any-return]


async def _new_key(redis_url: str) -> str:
    connection = aioredis.Redis.from_url(redis_url)
    try:
        created = await OrganisationStore(connection).create("bench", quota=10**9, concurrency=100)
        return created.access_key
    finally:
        await connection.aclose()


def worker_memory(workers: list[int]) -> dict[str, float | None]:
    """The workers' memory now, per worker on average, MiB: RSS with every page counted once, of Python and
    Chromium (the issue's words) and of the whole worker (with Playwright's Node driver), as a container's
    limit sees it (None unless run as root, which may read page frame numbers); RSS summed over the
    processes (a page shared by several counted in each); PSS (a shared page split between its processes)."""
    trees = [process_tree(pid) for pid in workers]

    def counted_once(pids: list[int]) -> float | None:
        pages: set[int] = set()
        for pid in pids:
            found = resident_pages(pid)
            if found is None:
                return None
            pages |= found
        return len(pages) * PAGE_SIZE / 2**20

    def average(values: list[float | None]) -> float | None:
        return None if None in values else sum(values) / len(values)  # type: ignore[arg-type]

    def driver(pid: int) -> bool:
        with contextlib.suppress(OSError):
            return os.path.basename(os.readlink(f"/proc/{pid}/exe")) == "node"
        return False

    def part(pid: int, root: int) -> str:
        return "driver" if driver(pid) else "python" if pid == root else "chromium"

    by_part = {name: sum((counted_once([pid for pid in tree if part(pid, tree[0]) == name]) or 0.0) for tree in trees)
               / len(trees) for name in ("python", "driver", "chromium")}  # per worker
    return {"rss_mib": average([counted_once(tree) for tree in trees]),
            **{f"rss_{name}_mib": value for name, value in by_part.items()},
            "rss_python_chromium_mib": average([counted_once([pid for pid in tree if not driver(pid)])
                                                for tree in trees]),
            "rss_summed_mib": sum(memory_kib(pid, "Rss") for tree in trees for pid in tree) / 1024 / len(workers),
            "pss_mib": sum(memory_kib(pid, "Pss") for tree in trees for pid in tree) / 1024 / len(workers)}


class Service:
    """The service as deployed (redis-server, API, workers, the webhook deliverer), called over HTTP."""

    def __init__(self, base: str, workers: int, chromium: str, slots: int = 1) -> None:
        self.base, self.workers, self.chromium, self.slots = base, workers, chromium, slots
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Service:
        tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory()))
        redis_url = self.redis_url = self._stack.enter_context(redis_server(tmp))
        # The production path: network policy on (every connection through the egress proxy), with only
        # the benchmark site's address opened.
        running = self._stack.enter_context(running_service(
            redis_url, tmp, workers=self.workers, SCREENSHOT_CHROMIUM_PATH=self.chromium,
            SCREENSHOT_WORKER_SLOTS=str(self.slots),
            SCREENSHOT_ALLOW_PRIVATE_NETWORKS="false", SCREENSHOT_ALLOWED_NETWORKS=f"{SITE_ADDRESS}/32"))
        self.key = asyncio.run(_new_key(redis_url))
        self.pids = {role: process.pid for role, process in running.processes.items()}
        self.worker_pids = [pid for role, pid in self.pids.items() if role.startswith("worker")]
        self.redis_pid = int(redis.Redis.from_url(redis_url).info("server")["process_id"])
        self.http = self._stack.enter_context(httpx.Client(base_url=running.url, timeout=120))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    @property
    def fleet(self) -> int:
        """Jobs the service renders at once: its workers' job slots."""
        return self.workers * self.slots

    def shot(self, scenario: Scenario = SIMPLE, **extra: str) -> Shot:
        started = time.perf_counter()
        response = self.http.get("/v1/screenshot/take", params={
            "access_key": self.key, "url": self.base + scenario.path, "format": scenario.format,
            "full_page": str(scenario.full_page).lower(), **dict(scenario.service_params), **extra})
        elapsed = time.perf_counter() - started
        if response.status_code != 200 or not response.content.startswith(MAGIC[scenario.format]):
            raise RuntimeError(f"capture failed: {response.status_code} {response.text[:200]}")
        return Shot(elapsed, float(response.headers["x-service-rendering-seconds"]))

    def parallel(self, clients: int, shots: int) -> tuple[list[Shot], float]:
        started = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(lambda _: self.shot(), range(shots)))
        return results, time.perf_counter() - started

    def recording(self, frame_rate: int = 30) -> Shot:
        started = time.perf_counter()
        video = self.http.get("/v1/screenshot/animate", params={
            "access_key": self.key, "url": self.base + "/bench/tall.html", "scenario": "scroll", "duration": "5",
            "frame_rate": str(frame_rate),
            "viewport_width": "1280", "viewport_height": "720", "scroll_back": "false", "scroll_complete": "false"})
        if video.status_code != 200:
            raise RuntimeError(f"recording failed: {video.status_code} {video.text[:200]}")
        return Shot(time.perf_counter() - started, float(video.headers["x-service-rendering-seconds"]))


