"""The benchmark: the service over HTTP against a plain Playwright script, same page, same machine, one run.

The plain script is what a team would write by hand: a warm Chromium, a new context per shot,
`page.goto` then `page.screenshot`. The service runs as deployed (redis-server, API, one worker per
core pair) and is called over HTTP. Both capture the same local page at 1280x1024 as PNG, sequentially
and with 4 clients in parallel. Prints p50/p95 latency and shots/s for both, and their ratios.

    make bench                      # or: .venv/bin/python bench/run.py --shots 40
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

from service.organisations import OrganisationStore  # noqa: E402
from service.settings import default_workers  # noqa: E402
from tests.servers import redis_server, running_service  # noqa: E402
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


async def plain_script(url: str, shots: int, ads_url: str) -> tuple[Stats, Stats, Stats]:
    """A hand-written Playwright script: warm browser, new context per shot, page.screenshot."""
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path="/usr/bin/chromium", args=args)

        async def shot(target: str = url) -> float:
            started = time.perf_counter()
            context = await browser.new_context(viewport=VIEWPORT)
            page = await context.new_page()
            await page.goto(target)
            await page.screenshot(type="png")
            await context.close()
            return time.perf_counter() - started

        for _ in range(3):  # warm-up
            await shot()
        started = time.perf_counter()
        sequential = [await shot() for _ in range(shots)]
        seq = Stats.of("plain script, sequential", sequential, time.perf_counter() - started)

        async def client(count: int) -> list[float]:
            return [await shot() for _ in range(count)]

        started = time.perf_counter()
        per_client = await asyncio.gather(*(client(shots // PARALLEL_CLIENTS) for _ in range(PARALLEL_CLIENTS)))
        par = Stats.of(f"plain script, {PARALLEL_CLIENTS} in parallel", [t for ts in per_client for t in ts],
                       time.perf_counter() - started)
        started = time.perf_counter()
        ads = Stats.of("plain script, page with ads", [await shot(ads_url) for _ in range(shots)],
                       time.perf_counter() - started)
        await browser.close()
    return seq, par, ads


async def _new_key(redis_url: str) -> str:
    connection = aioredis.Redis.from_url(redis_url)
    try:
        created = await OrganisationStore(connection).create("bench", quota=10**9, concurrency=100)
        return created.access_key
    finally:
        await connection.aclose()


def service(url: str, shots: int, workers: int, ads_url: str) -> tuple[Stats, Stats, Stats, Stats, Stats, Stats]:
    """The service as deployed, over HTTP."""
    # The production path: network policy on (every connection through the egress proxy), with only
    # the benchmark site's address opened.
    with tempfile.TemporaryDirectory() as tmp, redis_server(Path(tmp)) as redis_url, \
            running_service(redis_url, Path(tmp), workers=workers, SCREENSHOT_ALLOW_PRIVATE_NETWORKS="false",
                            SCREENSHOT_ALLOWED_NETWORKS=f"{SITE_ADDRESS}/32") as running:
        key = asyncio.run(_new_key(redis_url))
        params = {"access_key": key, "url": url, "format": "png"}
        with httpx.Client(base_url=running.url, timeout=60) as http:

            def shot(extra: dict[str, str] | None = None) -> tuple[float, float]:
                started = time.perf_counter()
                response = http.get("/v1/screenshot/take", params={**params, **(extra or {})})
                elapsed = time.perf_counter() - started
                if response.status_code != 200 or not response.content.startswith(b"\x89PNG"):
                    raise RuntimeError(f"capture failed: {response.status_code} {response.text[:200]}")
                return elapsed, float(response.headers["x-service-rendering-seconds"])

            for _ in range(3):  # warm-up
                shot()
            started = time.perf_counter()
            results = [shot() for _ in range(shots)]
            seq = Stats.of("service, sequential", [r[0] for r in results], time.perf_counter() - started,
                           [r[1] for r in results])
            started = time.perf_counter()
            with ThreadPoolExecutor(PARALLEL_CLIENTS) as pool:
                results = list(pool.map(lambda _: shot(), range(shots)))
            par = Stats.of(f"service, {PARALLEL_CLIENTS} clients", [r[0] for r in results],
                           time.perf_counter() - started, [r[1] for r in results])
            ads = []
            for name, extra in (("service, page with ads", {"url": ads_url}),
                                ("service, page with ads, block_ads", {"url": ads_url, "block_ads": "true"})):
                started = time.perf_counter()
                results = [shot(extra) for _ in range(shots)]
                ads.append(Stats.of(name, [r[0] for r in results], time.perf_counter() - started,
                                    [r[1] for r in results]))
            recordings = []
            for _ in range(3):
                started = time.perf_counter()
                video = http.get("/v1/screenshot/animate", params={
                    "access_key": key, "url": url.replace("simple.html", "tall.html"), "scenario": "scroll",
                    "duration": "5", "viewport_width": "1280", "viewport_height": "720", "scroll_back": "false",
                    "scroll_complete": "false"}, timeout=120)
                if video.status_code != 200:
                    raise RuntimeError(f"recording failed: {video.status_code} {video.text[:200]}")
                recordings.append((time.perf_counter() - started, float(video.headers["x-service-rendering-seconds"])))
            animation = Stats.of("service, 5 s 1280x720 scroll mp4", [r[0] for r in recordings],
                                 sum(r[0] for r in recordings), [r[1] for r in recordings])
            shot({"cache": "true"})  # the one render that fills the entry
            started = time.perf_counter()
            results = [shot({"cache": "true"}) for _ in range(shots)]
            hits = Stats.of("service, cache hit", [r[0] for r in results], time.perf_counter() - started,
                            [r[1] for r in results])
    return seq, par, ads[0], ads[1], hits, animation


def table(rows: list[Stats]) -> str:
    lines = ["| scenario | shots | p50 ms | p95 ms | shots/s | worker rendering p50 ms |",
             "|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        rendering = f"{row.rendering_p50 * 1000:.0f}" if row.rendering_p50 is not None else ""
        lines.append(f"| {row.name} | {row.shots} | {row.p50 * 1000:.0f} | {row.p95 * 1000:.0f} | "
                     f"{row.shots_per_second:.2f} | {rendering} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shots", type=int, default=40, help="captures per scenario (default 40)")
    parser.add_argument("--workers", type=int, default=default_workers(),
                        help="service workers (default: the service's own default, one per two cores)")
    args = parser.parse_args()
    ROUTES["/bench/simple.html"] = lambda query: _html(SIMPLE_PAGE)
    ROUTES["/bench/ads.html"] = lambda query: _html(ADS_PAGE)
    ROUTES["/bench/tall.html"] = lambda query: _html(TALL_PAGE)
    for i in range(9):
        ROUTES[f"/bench/img/{i}.gif"] = lambda query: (200, "image/gif", GIF)
    for i in range(3):
        ROUTES[f"/ads/banner_{i}.gif"] = lambda query: (200, "image/gif", GIF)
    with Site(host=SITE_ADDRESS) as site:
        url, ads_url = site.url("/bench/simple.html"), site.url("/bench/ads.html")
        print(f"Plain Playwright script: {args.shots} shots sequential, {PARALLEL_CLIENTS} in parallel, "
              "then the page with ads ...", flush=True)
        plain_seq, plain_par, plain_ads = asyncio.run(plain_script(url, args.shots, ads_url))
        print(f"Service ({args.workers} workers) over HTTP: the same, and the page with ads with block_ads ...",
              flush=True)
        service_seq, service_par, service_ads, service_blocking, hits, animation = service(
            url, args.shots, args.workers, ads_url)
    rows = [plain_seq, service_seq, plain_par, service_par, plain_ads, service_ads, service_blocking, hits,
            animation]
    print()
    print(table(rows))
    overhead = (service_seq.p50 - (service_seq.rendering_p50 or 0)) * 1000
    print(f"\nsequential p50, service / plain: {service_seq.p50 / plain_seq.p50:.2f}x")
    print(f"throughput, service ({PARALLEL_CLIENTS} clients) / plain ({PARALLEL_CLIENTS} in parallel): "
          f"{service_par.shots_per_second / plain_par.shots_per_second:.2f}x")
    print(f"service time outside the worker (p50 end-to-end minus p50 rendering): {overhead:.0f} ms")
    print(f"page with ads, service / plain: {service_ads.p50 / plain_ads.p50:.2f}x; "
          f"with block_ads / without: {service_blocking.p50 / service_ads.p50:.2f}x")
    print(f"cache hit p50 vs a render of the same page (service, sequential): "
          f"{service_seq.p50 / hits.p50:.1f}x faster")
    print(f"5 s 1280x720 scroll mp4: p50 {animation.p50:.2f} s end to end = {animation.p50 / 5:.2f}x its duration")
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "latest.json").write_text(json.dumps([asdict(r) for r in rows], indent=2))


if __name__ == "__main__":
    main()
