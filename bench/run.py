"""The benchmark: the service over HTTP against a plain Playwright script, same pages, same machine, one run.

The plain script is what a team would write by hand: a warm Chromium, a new context per shot,
`page.goto` then `page.screenshot` (pyvips for WebP, which Chromium's screenshot cannot write). The
service runs as deployed (redis-server, API, one worker per core, network policy on) and is called
over HTTP. Scenarios (issue 9): the simple page (PNG, JPEG, WebP), a heavy page (3 MB of images and
fonts), a full-page capture of a 10,000 px page, the simple page with 4 clients in parallel, a page
with ads with and without `block_ads`, a cache hit and a 5 s scroll recording. Prints p50/p95 latency
and shots/s for each, the ratios, the time the service spends outside the worker, and the worker's
memory (Python + Chromium) under load.

    make bench                      # or: .venv/bin/python bench/run.py --shots 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import redis.asyncio as aioredis
from playwright.async_api import async_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from render.browser import chromium_binary  # noqa: E402
from render.settings import RenderSettings  # noqa: E402
from service.organisations import OrganisationStore  # noqa: E402
from service.settings import default_workers  # noqa: E402
from tests.servers import memory_kib, process_tree, redis_server, running_service  # noqa: E402
from tests.site import ROUTES, Site, _html  # noqa: E402

SIMPLE_PAGE = """<!DOCTYPE html><html><head><title>Simple</title><style>
body { font-family: "Liberation Sans", sans-serif; margin: 40px; background: #f7f7fb; color: #222; }
header { background: #3b5bdb; color: white; padding: 24px; border-radius: 8px; }
.card { background: white; margin-top: 24px; padding: 24px; border-radius: 8px; box-shadow: 0 1px 3px #0002; }
</style></head><body><header><h1>Simple page</h1><p>A small local page for the benchmark.</p></header>
<div class="card"><h2>Section</h2><p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod
tempor incididunt ut labore et dolore magna aliqua.</p><ul><li>One</li><li>Two</li><li>Three</li></ul></div>
</body></html>"""

# The same page with 12 images, 3 of them ads by EasyList's rules (`/ads/banner_*`): for the cost of
# blocking, which only requests with a blocking option pay.
ADS_PAGE = SIMPLE_PAGE.replace("</body>", "".join(
    f'<img src="/bench/img/{i}.gif" width="80" height="60">' for i in range(9)) + "".join(
    f'<img src="/ads/banner_{i}.gif" width="728" height="90">' for i in range(3)) + "</body>")
# A long page (the simple page's card 30 times) for the 5 s scroll recording.
TALL_PAGE = SIMPLE_PAGE.replace("</body>", SIMPLE_PAGE.split("<body>")[1].split("</body>")[0] * 30 + "</body>")
# 10,000 px tall: 50 blocks of 200 px in alternating colours.
FULL_PAGE = ("<!DOCTYPE html><html><head><style>body{margin:0}div{height:200px}</style></head><body>"
             + "".join(f'<div style="background:hsl({(i * 37) % 360},60%,70%)">{i}</div>' for i in range(50))
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


@dataclass
class Stats:
    """Latencies (seconds) and throughput of one scenario."""

    name: str
    shots: int
    p50: float
    p95: float
    shots_per_second: float
    rendering_p50: float | None = None

    @classmethod
    def of(cls, name: str, latencies: list[float], wall: float, rendering: list[float] | None = None) -> Stats:
        ordered = sorted(latencies)
        return cls(name, len(ordered), statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))],
                   len(ordered) / wall, statistics.median(rendering) if rendering else None)


@dataclass(frozen=True)
class Scenario:
    """One page and output, captured the same way by both sides (where the plain script can)."""

    name: str
    path: str
    format: str = "png"
    full_page: bool = False
    service_params: tuple[tuple[str, str], ...] = ()
    plain: bool = True  # the plain script runs it too


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
    Scenario("page with ads", "/bench/ads.html"),
    Scenario("page with ads, block_ads", "/bench/ads.html", service_params=(("block_ads", "true"),), plain=False),
]
MAGIC = {"png": b"\x89PNG", "jpeg": b"\xff\xd8", "webp": b"RIFF"}


async def plain_script(base: str, shots: int, chromium: str) -> dict[str, Stats]:
    """A hand-written Playwright script: warm browser, new context per shot, page.screenshot."""
    import pyvips

    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    stats: dict[str, Stats] = {}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium_binary(chromium), args=args)

        async def shot(scenario: Scenario = SIMPLE) -> float:
            started = time.perf_counter()
            context = await browser.new_context(viewport=VIEWPORT)
            page = await context.new_page()
            await page.goto(base + scenario.path)
            if scenario.format == "webp":
                png = await page.screenshot(type="png", full_page=scenario.full_page)
                pyvips.Image.new_from_buffer(png, "").webpsave_buffer(Q=80)
            else:
                await page.screenshot(type=scenario.format, full_page=scenario.full_page,
                                      **({"quality": 80} if scenario.format == "jpeg" else {}))
            await context.close()
            return time.perf_counter() - started

        for _ in range(3):  # warm-up
            await shot()
        for scenario in SCENARIOS:
            if scenario.plain:
                started = time.perf_counter()
                latencies = [await shot(scenario) for _ in range(shots)]
                stats[scenario.name] = Stats.of(f"plain script, {scenario.name}", latencies,
                                                time.perf_counter() - started)

        async def client(count: int) -> list[float]:
            return [await shot() for _ in range(count)]

        started = time.perf_counter()
        per_client = await asyncio.gather(*(client(shots // PARALLEL_CLIENTS) for _ in range(PARALLEL_CLIENTS)))
        stats["parallel"] = Stats.of(f"plain script, {PARALLEL_CLIENTS} in parallel",
                                     [t for ts in per_client for t in ts], time.perf_counter() - started)
        await browser.close()
    return stats


async def _new_key(redis_url: str) -> str:
    connection = aioredis.Redis.from_url(redis_url)
    try:
        created = await OrganisationStore(connection).create("bench", quota=10**9, concurrency=100)
        return created.access_key
    finally:
        await connection.aclose()


def worker_memory(workers: list[int]) -> dict[str, float]:
    """The workers' memory now (Python + Chromium): RSS summed over their processes (shared pages counted
    in each) and PSS (shared pages split), per worker on average, MiB."""
    trees = [process_tree(pid) for pid in workers]
    return {"rss_mib": sum(memory_kib(pid, "Rss") for tree in trees for pid in tree) / 1024 / len(workers),
            "pss_mib": sum(memory_kib(pid, "Pss") for tree in trees for pid in tree) / 1024 / len(workers)}


def service(base: str, shots: int, workers: int, chromium: str) -> tuple[dict[str, Stats], dict[str, float]]:
    """The service as deployed, over HTTP; also the workers' memory at the end of the parallel load."""
    stats: dict[str, Stats] = {}
    # The production path: network policy on (every connection through the egress proxy), with only
    # the benchmark site's address opened.
    with tempfile.TemporaryDirectory() as tmp, redis_server(Path(tmp)) as redis_url, \
            running_service(redis_url, Path(tmp), workers=workers, SCREENSHOT_CHROMIUM_PATH=chromium,
                            SCREENSHOT_ALLOW_PRIVATE_NETWORKS="false",
                            SCREENSHOT_ALLOWED_NETWORKS=f"{SITE_ADDRESS}/32") as running:
        key = asyncio.run(_new_key(redis_url))
        worker_pids = [process.pid for role, process in running.processes.items() if role.startswith("worker")]
        with httpx.Client(base_url=running.url, timeout=120) as http:

            def shot(scenario: Scenario = SIMPLE, **extra: str) -> tuple[float, float]:
                started = time.perf_counter()
                response = http.get("/v1/screenshot/take", params={
                    "access_key": key, "url": base + scenario.path, "format": scenario.format,
                    "full_page": str(scenario.full_page).lower(), **dict(scenario.service_params), **extra})
                elapsed = time.perf_counter() - started
                if response.status_code != 200 or not response.content.startswith(MAGIC[scenario.format]):
                    raise RuntimeError(f"capture failed: {response.status_code} {response.text[:200]}")
                return elapsed, float(response.headers["x-service-rendering-seconds"])

            def run(name: str, scenario: Scenario = SIMPLE, **extra: str) -> Stats:
                started = time.perf_counter()
                results = [shot(scenario, **extra) for _ in range(shots)]
                return Stats.of(name, [r[0] for r in results], time.perf_counter() - started,
                                [r[1] for r in results])

            for _ in range(3):  # warm-up
                shot()
            for scenario in SCENARIOS:
                stats[scenario.name] = run(f"service, {scenario.name}", scenario)
            started = time.perf_counter()
            with ThreadPoolExecutor(PARALLEL_CLIENTS) as pool:
                results = list(pool.map(lambda _: shot(), range(shots * 2)))
            memory = worker_memory(worker_pids)  # right after the load, before anything is released
            stats["parallel"] = Stats.of(f"service, {PARALLEL_CLIENTS} clients", [r[0] for r in results],
                                         time.perf_counter() - started, [r[1] for r in results])
            shot(cache="true")  # the one render that fills the entry
            stats["cache hit"] = run("service, cache hit", cache="true")
            recordings = []
            for _ in range(3):
                started = time.perf_counter()
                video = http.get("/v1/screenshot/animate", params={
                    "access_key": key, "url": base + "/bench/tall.html", "scenario": "scroll",
                    "duration": "5", "viewport_width": "1280", "viewport_height": "720", "scroll_back": "false",
                    "scroll_complete": "false"}, timeout=120)
                if video.status_code != 200:
                    raise RuntimeError(f"recording failed: {video.status_code} {video.text[:200]}")
                recordings.append((time.perf_counter() - started, float(video.headers["x-service-rendering-seconds"])))
            stats["recording"] = Stats.of("service, 5 s 1280x720 scroll mp4", [r[0] for r in recordings],
                                          sum(r[0] for r in recordings), [r[1] for r in recordings])
    return stats, memory


def table(rows: list[Stats]) -> str:
    lines = ["| scenario | shots | p50 ms | p95 ms | shots/s | worker rendering p50 ms |",
             "|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        rendering = f"{row.rendering_p50 * 1000:.0f}" if row.rendering_p50 is not None else ""
        lines.append(f"| {row.name} | {row.shots} | {row.p50 * 1000:.0f} | {row.p95 * 1000:.0f} | "
                     f"{row.shots_per_second:.2f} | {rendering} |")
    return "\n".join(lines)


def serve_bench_pages() -> None:
    """The benchmark's pages, added to the test site's routes."""
    import pyvips

    ROUTES["/bench/simple.html"] = lambda query: _html(SIMPLE_PAGE)
    ROUTES["/bench/ads.html"] = lambda query: _html(ADS_PAGE)
    ROUTES["/bench/tall.html"] = lambda query: _html(TALL_PAGE)
    ROUTES["/bench/full.html"] = lambda query: _html(FULL_PAGE)
    ROUTES["/bench/heavy.html"] = lambda query: _html(HEAVY_PAGE)
    for i in range(9):
        ROUTES[f"/bench/img/{i}.gif"] = lambda query: (200, "image/gif", GIF)
    for i in range(3):
        ROUTES[f"/ads/banner_{i}.gif"] = lambda query: (200, "image/gif", GIF)
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
    parser.add_argument("--chromium", default=RenderSettings().chromium_path,
                        help="the Chromium both sides run (default: the service's, SCREENSHOT_CHROMIUM_PATH)")
    args = parser.parse_args()
    serve_bench_pages()
    with Site(host=SITE_ADDRESS) as site:
        heavy = sum(len(ROUTES[path]({})[2]) for path in ROUTES if path.startswith(("/bench/photo", "/bench/font")))
        print(f"Heavy page: {heavy / 1e6:.1f} MB of images and fonts.", flush=True)
        print(f"Plain Playwright script: {args.shots} shots per scenario, then {PARALLEL_CLIENTS} in parallel ...",
              flush=True)
        plain = asyncio.run(plain_script(site.base, args.shots, args.chromium))
        print(f"Service ({args.workers} workers) over HTTP: the same, then the service-only scenarios ...",
              flush=True)
        served, memory = service(site.base, args.shots, args.workers, args.chromium)
    rows = []
    for scenario in SCENARIOS:
        if scenario.name in plain:
            rows.append(plain[scenario.name])
        rows.append(served[scenario.name])
    rows += [plain["parallel"], served["parallel"], served["cache hit"], served["recording"]]
    print()
    print(table(rows))
    print()
    for scenario in SCENARIOS:
        if scenario.name in plain:
            print(f"{scenario.name}: service / plain p50 {served[scenario.name].p50 / plain[scenario.name].p50:.2f}x")
    simple = served[SIMPLE.name]
    print(f"throughput, service ({PARALLEL_CLIENTS} clients) / plain ({PARALLEL_CLIENTS} in parallel): "
          f"{served['parallel'].shots_per_second / plain['parallel'].shots_per_second:.2f}x")
    print(f"cache hit / render of the same page (p50): {served['cache hit'].p50 / simple.p50:.3f}x")
    print(f"time outside the worker (simple page, p50 end-to-end minus p50 rendering): "
          f"{(simple.p50 - (simple.rendering_p50 or 0)) * 1000:.0f} ms")
    print(f"worker memory after the parallel load (Python + Chromium, per worker): "
          f"{memory['rss_mib']:.0f} MiB RSS summed over its processes, {memory['pss_mib']:.0f} MiB PSS")
    blocking = served["page with ads, block_ads"].p50 / served["page with ads"].p50
    print(f"block_ads / without on the page with ads: {blocking:.2f}x")
    recording = served["recording"]
    print(f"5 s 1280x720 scroll mp4: p50 {recording.p50:.2f} s end to end = {recording.p50 / 5:.2f}x its duration")
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "latest.json").write_text(json.dumps({"rows": [asdict(r) for r in rows], "memory": memory},
                                                    indent=2))


if __name__ == "__main__":
    main()
