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
import json
import os
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.chart import write_chart
from bench.cpu import cpu_seconds, per_capture_ms
from bench.fairness import BACKLOG_PER_WORKER, fairness
from bench.mix import mix
from bench.mix import report as mix_report
from bench.pages import SITE_ADDRESS, serve_bench_pages
from bench.sides import SIMPLE, Floor, PlainScript, Scenario, Service, Shot, worker_memory
from render.settings import RenderSettings
from service.settings import default_workers
from tests.support.site import ROUTES, Site

ROOT = Path(__file__).resolve().parent.parent
PARALLEL_CLIENTS = 4
PARALLEL_ROUNDS = 2
BLOCK = 5  # back-to-back shots of one side before the other side's


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


def measure(site: Site, shots: int, workers: int, chromium: str, mix_seconds: float = 0, slots: int = 1
            ) -> tuple[dict[str, Stats], dict[str, float]]:
    """Every scenario, both sides alternating; then throughput, alternating rounds; then what only the
    service does. Also the workers' memory right after the service's parallel load."""
    stats: dict[str, Stats] = {}
    with PlainScript(site.base, chromium) as plain, Floor(plain) as floor, \
            Service(site.base, workers, chromium, slots) as service:
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
        parallel_shots = max(shots, PARALLEL_CLIENTS)  # one a client at least (a short smoke run)
        for _ in range(PARALLEL_ROUNDS):
            runs["plain 2"].append(plain.parallel(2, parallel_shots))
            runs["plain 4"].append(plain.parallel(PARALLEL_CLIENTS, parallel_shots))
            runs["floor 4"].append(floor.parallel(PARALLEL_CLIENTS, parallel_shots * 2))
            before = cpu_seconds(service.pids, service.redis_pid)
            runs["service"].append(service.parallel(PARALLEL_CLIENTS, parallel_shots * 2))
            spent += cpu_seconds(service.pids, service.redis_pid) - before
            memory = worker_memory(service.worker_pids)  # right after the load, before anything is released
            memory["slots"] = slots
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



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shots", type=int, default=30, help="captures per scenario (default 30)")
    parser.add_argument("--workers", type=int, default=default_workers(),
                        help="service workers (default: the service's own default, one per core)")
    parser.add_argument("--slots", type=int, default=RenderSettings().worker_slots,
                        help="job slots a worker (SCREENSHOT_WORKER_SLOTS; default: the service's own)")
    parser.add_argument("--mix-seconds", type=float, default=180,
                        help="the customers' mix under load (bench/mix.py) for this long; 0: not run (default 180)")
    parser.add_argument("--chromium", default=RenderSettings().chromium_path,
                        help="the Chromium both sides run (default: the service's, SCREENSHOT_CHROMIUM_PATH)")
    args = parser.parse_args()
    serve_bench_pages()
    with Site(host=SITE_ADDRESS) as site:
        heavy = sum(len(ROUTES[path]({})[2]) for path in ROUTES if path.startswith(("/bench/photo", "/bench/font")))
        print(f"Heavy page: {heavy / 1e6:.1f} MB of images and fonts.", flush=True)
        print(f"The plain Playwright script, the floor and the service ({args.workers} workers of {args.slots} job "
              "slots, over HTTP), "
              f"{args.shots} shots "
              f"per scenario each, in alternating blocks of {BLOCK}; then throughput; then the service-only "
              "scenarios ...", flush=True)
        stats, memory = measure(site, args.shots, args.workers, args.chromium, args.mix_seconds, args.slots)
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
    if memory["rss_mib"] is not None and args.slots > 1:
        print(f"worker memory per job slot ({args.slots} a worker): RSS {memory['rss_mib'] / args.slots:.0f} MiB, "
              f"PSS {memory['pss_mib'] / args.slots:.0f} MiB")
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
