"""The benchmark: the service over HTTP against a plain Playwright script, same pages, same machine, one run.

The plain script is what a team would write by hand: a warm Chromium, a new context per shot,
`page.goto` then `page.screenshot` (pyvips for WebP, which Chromium's screenshot cannot write). The
service runs as deployed (redis-server, API, one worker per core, network policy on) and is called
over HTTP. The floor is the fastest a capture can be here: one warm page, `goto` and CDP
`Page.captureScreenshot`. The three run side by side and take their shots in alternating blocks, so a
shared machine's slow moments fall on all of them. Scenarios: the simple page (PNG, JPEG,
WebP), a heavy page (3 MB of images and fonts), full-page captures of 10,000 to 40,000 px pages, the
simple page with 4 clients in parallel, a page with ads with and without `block_ads`, archive=true against the same
page without it, a cache hit, fairness
(a quiet organisation's captures behind another's backlog: bench/fairness.py), the customers' mix at 70% of the
instance's capacity (small jobs behind big ones: bench/mix.py) and a 5 s scroll recording.
Prints p50/p95 latency and shots/s for each, the ratios, the time the service spends outside the worker, and
the worker's memory (Python + Chromium) under load; draws bench/latest.svg.

    make bench                      # or: .venv/bin/python -m bench.run --shots 30
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import redis
import redis.asyncio as aioredis
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import async_playwright

from bench.chart import write_chart
from bench.cpu import cpu_seconds, per_capture_ms
from bench.fairness import BACKLOG_PER_WORKER, fairness
from bench.mix import mix
from bench.mix import report as mix_report
from render.browser.chromium import PAGE_SIZE, chromium_arguments, chromium_binary, sandboxed
from render.settings import RenderSettings
from service.organisations import OrganisationStore
from service.settings import default_workers
from tests.support.servers import (
    memory_kib,
    process_tree,
    redis_server,
    resident_pages,
    running_service,
)
from tests.support.site import ROUTES, Site, _html

ROOT = Path(__file__).resolve().parent.parent

SIMPLE_PAGE = """<!DOCTYPE html><html><head><title>Simple</title><style>
body { font-family: "Liberation Sans", sans-serif; margin: 40px; background: #f7f7fb; color: #222; }
header { background: #3b5bdb; color: white; padding: 24px; border-radius: 8px; }
.card { background: white; margin-top: 24px; padding: 24px; border-radius: 8px; box-shadow: 0 1px 3px #0002; }
</style></head><body><header><h1>Simple page</h1><p>A small local page for the benchmark.</p></header>
<div class="card"><h2>Section</h2><p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod
tempor incididunt ut labore et dolore magna aliqua.</p><ul><li>One</li><li>Two</li><li>Three</li></ul></div>
</body></html>"""

# The same page with 12 images, 3 of them ads by EasyList's rules (`/ads/728x90.`): for the cost of blocking,
# which only requests with a blocking option pay. The ads' paths are ones Debian's EasyList matches, so the
# scenario measures blocking, not only the interception.
ADS_PAGE = SIMPLE_PAGE.replace("</body>", "".join(
    f'<img src="/bench/img/{i}.gif" width="80" height="60">' for i in range(9)) + "".join(
    f'<img src="/ads/728x90.gif?n={i}" width="728" height="90">' for i in range(3)) + "</body>")
# The same, its ads answered after 300 ms, as a slow ad server's: blocking should make it cheaper.
SLOW_ADS_PAGE = ADS_PAGE.replace(".gif?n=", ".gif?ms=300&n=")
# A long page (the simple page's card 30 times) for the 5 s scroll recording.
TALL_PAGE = SIMPLE_PAGE.replace("</body>", SIMPLE_PAGE.split("<body>")[1].split("</body>")[0] * 30 + "</body>")


def full_page(height: int) -> str:
    """`height` px tall: blocks of 200 px in alternating colours, each with its number."""
    return ("<!DOCTYPE html><html><head><style>body{margin:0}div{height:200px}</style></head><body>"
            + "".join(f'<div style="background:hsl({(i * 37) % 360},60%,70%)">{i}</div>'
                      for i in range(height // 200))
            + "</body></html>")


FONTS = ["LiberationSerif-Regular", "LiberationSans-Bold", "LiberationMono-Regular", "LiberationSans-Italic",
         "LiberationSerif-Bold", "LiberationMono-Bold"]
HEAVY_IMAGES = 9
# The heavy page: six web fonts and nine 1000x700 JPEGs, about 3 MB in all.
HEAVY_PAGE = SIMPLE_PAGE.replace("</style>", "".join(
    f"@font-face {{ font-family: f{i}; src: url(/bench/font/{name}.ttf); }} .f{i} {{ font-family: f{i}; }}"
    for i, name in enumerate(FONTS)) + " img { width: 300px; height: 210px; }</style>").replace(
    "</body>", "".join(f'<p class="f{i}">Font {i}: The quick brown fox jumps over the lazy dog.</p>'
                       for i in range(len(FONTS)))
    + "".join(f'<img src="/bench/photo/{i}.jpg">' for i in range(HEAVY_IMAGES)) + "</body>")
GIF = (b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x00\x00\x00\x00\x00,"
       b"\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")

VIEWPORT = {"width": 1280, "height": 1024}
SITE_ADDRESS = "127.0.0.2"  # a loopback address of its own, so the service's allowlist opens only it
PARALLEL_CLIENTS = 4
PARALLEL_ROUNDS = 2
BLOCK = 5  # back-to-back shots of one side before the other side's


@dataclass(frozen=True)
class Shot:
    """One capture: seconds end to end, and the service's `x-service-rendering-seconds`."""

    seconds: float
    rendering: float | None = None


@dataclass
class Stats:
    """Latencies (seconds) and throughput of one scenario."""

    name: str
    shots: int
    p50: float
    p95: float
    shots_per_second: float
    rendering_p50: float | None = None
    outside_p50: float | None = None  # end to end minus rendering, shot by shot

    @classmethod
    def of(cls, name: str, shots: list[Shot], wall: float | None = None) -> Stats:
        """Sequential shots (shots per second from their own durations), or concurrent ones over `wall`."""
        ordered = sorted(shot.seconds for shot in shots)
        rendered = [shot for shot in shots if shot.rendering is not None]
        return cls(name, len(ordered), statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))],
                   len(ordered) / (wall if wall is not None else sum(ordered)),
                   statistics.median(s.rendering for s in rendered) if rendered else None,  # type: ignore[misc]
                   statistics.median(s.seconds - s.rendering for s in rendered) if rendered else None)  # type: ignore[operator]


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
SCENARIOS = [
    SIMPLE,
    Scenario("simple page, jpeg", "/bench/simple.html", "jpeg"),
    Scenario("simple page, webp", "/bench/simple.html", "webp"),
    Scenario("heavy page (3 MB images and fonts)", "/bench/heavy.html"),
    # The plain script does not scroll first; neither does the service with full_page_scroll=false.
    Scenario("full page 10,000 px", "/bench/full.html", full_page=True,
             service_params=(("full_page_scroll", "false"),)),
    Scenario("full page 10,000 px, scrolled first (the service's default)", "/bench/full.html",
             full_page=True, plain=False),
    # Past Chromium's 16,384 px texture size: one capture, as Playwright's full_page.
    Scenario("full page 20,000 px", "/bench/full.html?height=20000", full_page=True,
             service_params=(("full_page_scroll", "false"),)),
    Scenario("full page 40,000 px", "/bench/full.html?height=40000", full_page=True,
             service_params=(("full_page_scroll", "false"),)),
    Scenario("page with ads", "/bench/ads.html"),
    Scenario("page with ads, block_ads", "/bench/ads.html", service_params=(("block_ads", "true"),), plain=False,
             against="page with ads"),
    Scenario("page with slow ads (300 ms)", "/bench/slow-ads.html", plain=False),
    Scenario("page with slow ads, block_ads", "/bench/slow-ads.html", service_params=(("block_ads", "true"),),
             plain=False, against="page with slow ads (300 ms)"),
    # The cost of block_cookie_banners: on a page without a banner, and on a real consent library's
    # (tests/consent, installed by `make bench`), against the same page without the option.
    Scenario("simple page, block_cookie_banners", "/bench/simple.html",
             service_params=(("block_cookie_banners", "true"),), plain=False, against=SIMPLE.name),
    Scenario("consent banner page (vanilla-cookieconsent)", "/consent/vanilla-bar.html"),
    Scenario("consent banner page, block_cookie_banners", "/consent/vanilla-bar.html",
             service_params=(("block_cookie_banners", "true"),), plain=False,
             against="consent banner page (vanilla-cookieconsent)"),
    # The cost of archive=true (the page's traffic packed and signed as a WACZ, stored beside the image).
    Scenario("simple page, archive", "/bench/simple.html", service_params=(("archive", "true"),), plain=False,
             against=SIMPLE.name),
    Scenario("heavy page, archive", "/bench/heavy.html", service_params=(("archive", "true"),), plain=False,
             against="heavy page (3 MB images and fonts)"),
]
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

    def __init__(self, base: str, workers: int, chromium: str) -> None:
        self.base, self.workers, self.chromium = base, workers, chromium
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Service:
        tmp = Path(self._stack.enter_context(tempfile.TemporaryDirectory()))
        redis_url = self.redis_url = self._stack.enter_context(redis_server(tmp))
        # The production path: network policy on (every connection through the egress proxy), with only
        # the benchmark site's address opened.
        running = self._stack.enter_context(running_service(
            redis_url, tmp, workers=self.workers, SCREENSHOT_CHROMIUM_PATH=self.chromium,
            SCREENSHOT_ALLOW_PRIVATE_NETWORKS="false", SCREENSHOT_ALLOWED_NETWORKS=f"{SITE_ADDRESS}/32"))
        self.key = asyncio.run(_new_key(redis_url))
        self.pids = {role: process.pid for role, process in running.processes.items()}
        self.worker_pids = [pid for role, pid in self.pids.items() if role.startswith("worker")]
        self.redis_pid = int(redis.Redis.from_url(redis_url).info("server")["process_id"])
        self.http = self._stack.enter_context(httpx.Client(base_url=running.url, timeout=120))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

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


def blocks(sides: dict[str, Callable[[], Shot]], shots: int, progress: str) -> dict[str, list[Shot]]:
    """`shots` measured shots per side, taken in alternating blocks of BLOCK back-to-back shots (each block
    after one shot that is not counted), so that both sides see the same moments of a shared machine."""
    taken: dict[str, list[Shot]] = {side: [] for side in sides}
    while any(len(got) < shots for got in taken.values()):
        for side, shoot in sides.items():
            count = min(BLOCK, shots - len(taken[side]))
            if count:
                shoot()
                taken[side] += [shoot() for _ in range(count)]
        print(f"  {progress}: {min(len(got) for got in taken.values())}/{shots}", end="\r", flush=True)
    print(" " * 60, end="\r")
    return taken


def measure(site: Site, shots: int, workers: int, chromium: str, mix_seconds: float = 0
            ) -> tuple[dict[str, Stats], dict[str, float]]:
    """Every scenario, both sides alternating; then throughput, alternating rounds; then what only the
    service does. Also the workers' memory right after the service's parallel load."""
    stats: dict[str, Stats] = {}
    with PlainScript(site.base, chromium) as plain, Floor(plain) as floor, \
            Service(site.base, workers, chromium) as service:
        for _ in range(3):  # warm-up
            plain.shot()
            floor.shot()
            service.shot()
        for scenario in SCENARIOS:
            sides = {"service": lambda scenario=scenario: service.shot(scenario)}
            if scenario.against is not None:
                baseline = next(other for other in SCENARIOS if other.name == scenario.against)
                sides["without"] = lambda baseline=baseline: service.shot(baseline)
            if scenario.plain:
                sides = {"plain": lambda scenario=scenario: plain.shot(scenario),
                         "floor": lambda scenario=scenario: floor.shot(scenario), **sides}
            taken = blocks(sides, shots, scenario.name)
            for side, got in taken.items():
                label = {"plain": "plain script", "floor": "floor (one warm page, goto + CDP capture)",
                         "without": "service without the option, in alternation with"}.get(side, "service")
                stats[f"{side} {scenario.name}"] = Stats.of(f"{label}, {scenario.name}", got)
        for failure in plain.failures:
            print(f"the plain script's Chromium refused a shot, taken again: {failure}", flush=True)
        # Throughput: the plain script with 2 and with 4 concurrent loops (its best counts), the service with
        # 4 clients; two alternating rounds each.
        runs: dict[str, list[tuple[list[Shot], float]]] = {"plain 2": [], "plain 4": [], "floor 4": [],
                                                           "service": []}
        spent: Counter[str] = Counter()  # the service's CPU over its parallel rounds, by part
        for _ in range(PARALLEL_ROUNDS):
            runs["plain 2"].append(plain.parallel(2, shots))
            runs["plain 4"].append(plain.parallel(PARALLEL_CLIENTS, shots))
            runs["floor 4"].append(floor.parallel(PARALLEL_CLIENTS, shots * 2))
            before = cpu_seconds(service.pids, service.redis_pid)
            runs["service"].append(service.parallel(PARALLEL_CLIENTS, shots * 2))
            spent += cpu_seconds(service.pids, service.redis_pid) - before
            memory = worker_memory(service.worker_pids)  # right after the load, before anything is released
        names = {"plain 2": "plain script, 2 in parallel", "plain 4": f"plain script, {PARALLEL_CLIENTS} in parallel",
                 "floor 4": f"floor, {PARALLEL_CLIENTS} warm pages in parallel",
                 "service": f"service, {PARALLEL_CLIENTS} clients"}
        for run, rounds in runs.items():
            stats[f"parallel {run}"] = Stats.of(names[run], [shot for got, _ in rounds for shot in got],
                                                wall=sum(wall for _, wall in rounds))
        service.shot(cache="true")  # the one render that fills the entry
        memory["cpu_ms_per_capture"] = per_capture_ms(  # type: ignore[assignment]
            spent, sum(len(got) for got, _ in runs["service"]))
        stats["cache hit"] = Stats.of("service, cache hit", [service.shot(cache="true") for _ in range(shots)])
        stats["fairness"] = fairness(service, service.redis_url, shots)  # type: ignore[assignment]
        if mix_seconds:
            stats["mix"] = mix(service, mix_seconds)  # type: ignore[assignment]
        stats["recording"] = Stats.of("service, 5 s 1280x720 scroll mp4", [service.recording() for _ in range(3)])
        stats["recording 60"] = Stats.of("service, 5 s 1280x720 scroll mp4 at 60 fps",
                                         [service.recording(60) for _ in range(3)])
    return stats, memory


def table(rows: list[Stats]) -> str:
    lines = ["| scenario | shots | p50 ms | p95 ms | shots/s | worker rendering p50 ms | outside the worker p50 ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        rendering = f"{row.rendering_p50 * 1000:.0f}" if row.rendering_p50 is not None else ""
        outside = f"{row.outside_p50 * 1000:.1f}" if row.outside_p50 is not None else ""
        lines.append(f"| {row.name} | {row.shots} | {row.p50 * 1000:.0f} | {row.p95 * 1000:.0f} | "
                     f"{row.shots_per_second:.2f} | {rendering} | {outside} |")
    return "\n".join(lines)


def _ad(query: dict[str, list[str]]) -> tuple[int, str, bytes]:
    """An ad image, after `ms` milliseconds (the site serves each request on a thread of its own)."""
    time.sleep(int(query.get("ms", ["0"])[0]) / 1000)
    return 200, "image/gif", GIF


def serve_bench_pages() -> None:
    """The benchmark's pages, added to the test site's routes."""
    import pyvips

    ROUTES["/bench/simple.html"] = lambda query: _html(SIMPLE_PAGE)
    ROUTES["/bench/ads.html"] = lambda query: _html(ADS_PAGE)
    ROUTES["/bench/slow-ads.html"] = lambda query: _html(SLOW_ADS_PAGE)
    ROUTES["/bench/tall.html"] = lambda query: _html(TALL_PAGE)
    ROUTES["/bench/full.html"] = lambda query: _html(full_page(int(query.get("height", ["10000"])[0])))
    ROUTES["/bench/heavy.html"] = lambda query: _html(HEAVY_PAGE)
    for i in range(9):
        ROUTES[f"/bench/img/{i}.gif"] = lambda query: (200, "image/gif", GIF)
    ROUTES["/ads/728x90.gif"] = _ad
    for i in range(HEAVY_IMAGES):  # noisy photos do not compress: about 150 KB each
        photo = pyvips.Image.gaussnoise(1000, 700, mean=128, sigma=40).bandjoin([
            pyvips.Image.gaussnoise(1000, 700, mean=100 + i * 8, sigma=30),
            pyvips.Image.gaussnoise(1000, 700, mean=90, sigma=50)]).cast("uchar")
        data = photo.jpegsave_buffer(Q=70)
        ROUTES[f"/bench/photo/{i}.jpg"] = lambda query, data=data: (200, "image/jpeg", data)
    for name in FONTS:
        font = Path(f"/usr/share/fonts/truetype/liberation/{name}.ttf").read_bytes()
        ROUTES[f"/bench/font/{name}.ttf"] = lambda query, font=font: (200, "font/ttf", font)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shots", type=int, default=30, help="captures per scenario (default 30)")
    parser.add_argument("--workers", type=int, default=default_workers(),
                        help="service workers (default: the service's own default, one per core)")
    parser.add_argument("--mix-seconds", type=float, default=180,
                        help="the customers' mix under load (bench/mix.py) for this long; 0: not run (default 180)")
    parser.add_argument("--chromium", default=RenderSettings().chromium_path,
                        help="the Chromium both sides run (default: the service's, SCREENSHOT_CHROMIUM_PATH)")
    args = parser.parse_args()
    serve_bench_pages()
    with Site(host=SITE_ADDRESS) as site:
        heavy = sum(len(ROUTES[path]({})[2]) for path in ROUTES if path.startswith(("/bench/photo", "/bench/font")))
        print(f"Heavy page: {heavy / 1e6:.1f} MB of images and fonts.", flush=True)
        print(f"The plain Playwright script, the floor and the service ({args.workers} workers, over HTTP), "
              f"{args.shots} shots "
              f"per scenario each, in alternating blocks of {BLOCK}; then throughput; then the service-only "
              "scenarios ...", flush=True)
        stats, memory = measure(site, args.shots, args.workers, args.chromium, args.mix_seconds)
    rows = []
    for scenario in SCENARIOS:
        rows += [stats[key] for key in (f"floor {scenario.name}", f"plain {scenario.name}",
                                        f"without {scenario.name}", f"service {scenario.name}") if key in stats]
    plain_best = max(stats["parallel plain 2"], stats["parallel plain 4"], key=lambda row: row.shots_per_second)
    rows += [stats["parallel plain 2"], stats["parallel plain 4"], stats["parallel floor 4"], stats["parallel service"],
             stats["cache hit"],
             stats["recording"], stats["recording 60"]]
    print()
    print(table(rows))
    print()
    for scenario in SCENARIOS:
        if scenario.plain:
            service_p50 = stats[f"service {scenario.name}"].p50
            print(f"{scenario.name}: service / plain p50 {service_p50 / stats[f'plain {scenario.name}'].p50:.2f}x, "
                  f"service / floor {service_p50 / stats[f'floor {scenario.name}'].p50:.2f}x")
    simple = stats[f"service {SIMPLE.name}"]
    print(f"throughput, service ({PARALLEL_CLIENTS} clients) / plain's best ({plain_best.name}): "
          f"{stats['parallel service'].shots_per_second / plain_best.shots_per_second:.2f}x")
    print(f"throughput, service ({PARALLEL_CLIENTS} clients) / the floor's ({PARALLEL_CLIENTS} warm pages in "
          f"parallel): {stats['parallel service'].shots_per_second / stats['parallel floor 4'].shots_per_second:.2f}x")
    cpu = memory["cpu_ms_per_capture"]
    available = (os.cpu_count() or 1) * 1000 / stats["parallel service"].shots_per_second
    print("CPU per capture under the parallel load (ms): " + ", ".join(  # type: ignore[union-attr]
        f"{part} {spent:.1f}" for part, spent in cpu.items()) + f" (of {available:.1f} the machine's cores had)")
    print(f"cache hit / render of the same page (p50): {stats['cache hit'].p50 / simple.p50:.3f}x")
    print(f"time outside the worker (simple page, p50 of end-to-end minus x-service-rendering-seconds): "
          f"{(simple.outside_p50 or 0) * 1000:.1f} ms")
    if memory["rss_mib"] is None:
        rss = "n/a (run as root to read page frame numbers)"
    else:
        rss = (f"{memory['rss_python_chromium_mib']:.0f} MiB of Python and Chromium, {memory['rss_mib']:.0f} MiB "
               f"with Playwright's Node driver")
    print(f"worker memory after the parallel load (per worker): RSS {rss} (each page counted once); "
          f"{memory['rss_summed_mib']:.0f} MiB RSS summed over its processes; {memory['pss_mib']:.0f} MiB PSS; "
          f"by part: Python {memory['rss_python_mib']:.0f}, Node driver {memory['rss_driver_mib']:.0f}, Chromium "
          f"{memory['rss_chromium_mib']:.0f} MiB (each part's pages once)")
    def option(name: str) -> tuple[float, float]:  # p50 with the option, and without it in the same blocks
        return stats[f"service {name}"].p50, stats[f"without {name}"].p50

    (ads, plain_ads), (slow, plain_slow) = option("page with ads, block_ads"), option("page with slow ads, block_ads")
    print(f"block_ads / without on the page with ads: {ads / plain_ads:.2f}x; on the page with slow ads: "
          f"{slow / plain_slow:.2f}x")
    for page, name in (("without a banner", "simple page, block_cookie_banners"),
                       ("with one", "consent banner page, block_cookie_banners")):
        with_option, without = option(name)
        print(f"block_cookie_banners on a page {page}: {(with_option - without) * 1000:+.0f} ms p50")
    for page, name in (("simple", "simple page, archive"), ("heavy", "heavy page, archive")):
        with_option, without = option(name)
        print(f"archive=true / without on the {page} page: {with_option / without:.2f}x p50")
    fair: dict[str, float] = stats["fairness"]  # type: ignore[assignment]
    print(f"fairness: a quiet organisation's p50 behind another's backlog of {BACKLOG_PER_WORKER}x the fleet "
          f"({fair['behind_p50'] * 1000:.0f} ms) / alone ({fair['alone_p50'] * 1000:.0f} ms): "
          f"{fair['behind_p50'] / fair['alone_p50']:.2f}x (the backlog {fair['backlog_at_end']:.0f} deep at the end, "
          f"{fair['backlog_jobs_sent']:.0f} jobs sent)")
    if "mix" in stats:
        print(mix_report(stats["mix"]))  # type: ignore[arg-type]
    recording = stats["recording"]
    for key, rate in (("recording", 30), ("recording 60", 60)):
        print(f"5 s 1280x720 scroll mp4 at {rate} fps: p50 {stats[key].p50:.2f} s end to end = "
              f"{stats[key].p50 / 5:.2f}x its duration")
    chart = {scenario.name: {side: stats[f"{side} {scenario.name}"].p50 * 1000 for side in ("floor", "plain", "service")
                             if f"{side} {scenario.name}" in stats} for scenario in SCENARIOS}
    chart["5 s scroll mp4 (service)"] = {"service": recording.p50 * 1000}
    write_chart(chart, ROOT / "bench" / "latest.svg",
                f"screenshot-service: {args.shots} shots a scenario, {args.workers} workers, {os.cpu_count()} cores")
    print("chart: bench/latest.svg")
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "latest.json").write_text(json.dumps({"rows": [asdict(r) for r in rows], "memory": memory,
                                                     "fairness": fair, "mix": stats.get("mix")}, indent=2))


if __name__ == "__main__":
    main()
