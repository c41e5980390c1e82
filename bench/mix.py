"""A customers' mix under load: small jobs behind big ones (issue 68).

What a hosted API's customers send, at random in these shares: viewport PNGs of a simple page, full-page JPEGs of
a 5,000 px page (scrolled first, the default), PDFs of the heavy page, WebPs of the page with ads with block_ads,
and async PNGs (batch work, polled until done). First the instance's capacity for that mix (closed loop: twice as
many clients as workers, each sending the mix one job after another); then the viewport PNG alone (its p50, one
after another); then an open loop: jobs arriving at random (Poisson) at `--load` of that capacity for `--seconds`,
each kind's latency end to end. The figure is the viewport PNG's p99 under the load over its p50 alone (goal: at
most 6x), with how long it waited in the queue (Server-Timing `queue`).

    .venv/bin/python -m bench.mix                       # capacity, alone, 180 s at 70% (about 5 minutes)
    .venv/bin/python -m bench.mix --rate 7.5            # a fixed arrival rate (A/B runs of two checkouts)

Run by `bench.run` on the service it measures (`--mix-seconds`); results also in bench/results/mix.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
POLL_SECONDS = 0.05  # how often an async job's client asks whether it is done
SMALL = "viewport png"


@dataclass(frozen=True)
class Kind:
    """One kind of job of the mix: its share, and its parameters of /take."""

    name: str
    share: float
    params: tuple[tuple[str, str], ...]
    asynchronous: bool = False


KINDS = (
    Kind(SMALL, 0.40, (("url", "/bench/simple.html"), ("format", "png"))),
    Kind("full-page jpeg", 0.20, (("url", "/bench/full.html?height=5000"), ("format", "jpeg"),
                                  ("full_page", "true"))),
    Kind("pdf", 0.15, (("url", "/bench/heavy.html"), ("format", "pdf"))),
    Kind("webp with ads, block_ads", 0.15, (("url", "/bench/ads.html"), ("format", "webp"),
                                            ("block_ads", "true"))),
    Kind("async png", 0.10, (("url", "/bench/simple.html"), ("format", "png"), ("async", "true")),
         asynchronous=True),
)


@dataclass(frozen=True)
class Done:
    """One job of the mix: seconds end to end (async: until its record said done), its queue wait (ms,
    Server-Timing), or the error it met."""

    kind: str
    seconds: float
    queue_ms: float | None = None
    error: str | None = None


def _queue_ms(headers: Any) -> float | None:
    for item in headers.get("server-timing", "").split(","):
        name, *params = item.strip().split(";")
        if name == "queue":
            for param in params:
                if param.startswith("dur="):
                    return float(param[4:])
    return None


def send(service: Any, kind: Kind) -> Done:
    """One job of `kind` on `service` (bench.sides.Service), to its end."""
    params = {key: service.base + value if key == "url" else value for key, value in kind.params}
    started = time.perf_counter()
    try:
        answer = service.http.get("/v1/screenshot/take", params={"access_key": service.key, **params})
        if not kind.asynchronous:
            if answer.status_code != 200:
                return Done(kind.name, time.perf_counter() - started, error=f"{answer.status_code}")
            return Done(kind.name, time.perf_counter() - started, _queue_ms(answer.headers))
        if answer.status_code != 202:
            return Done(kind.name, time.perf_counter() - started, error=f"{answer.status_code}")
        reference = answer.json()["reference"]
        while True:
            time.sleep(POLL_SECONDS)
            state = service.http.get(f"/v1/screenshot/jobs/{reference}",
                                     params={"access_key": service.key}).json()
            if state.get("status") in ("done", "failed", "cancelled"):
                error = None if state["status"] == "done" else str(state["status"])
                return Done(kind.name, time.perf_counter() - started, error=error)
    except Exception as problem:  # noqa: BLE001 - a failed job is counted, not fatal to the run
        return Done(kind.name, time.perf_counter() - started, error=type(problem).__name__)


def _pick(chance: random.Random) -> Kind:
    return chance.choices(KINDS, weights=[kind.share for kind in KINDS])[0]


def capacity(service: Any, seconds: float, clients: int, seed: int = 1) -> float:
    """Jobs of the mix a second the instance completes with `clients` sending one after another."""
    stop_at = time.perf_counter() + seconds
    counts: list[int] = []

    def client(n: int) -> None:
        chance, count = random.Random(seed + n), 0
        while time.perf_counter() < stop_at:
            if send(service, _pick(chance)).error is None:
                count += 1
        counts.append(count)

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)


def open_loop(service: Any, rate: float, seconds: float, seed: int = 7,
              progress: Callable[[int, int], None] | None = None) -> list[Done]:
    """Jobs arriving at random (exponential gaps, `rate` a second on average) for `seconds`, each sent the moment
    it arrives, whatever is still running; every one of them to its end."""
    chance = random.Random(seed)
    results: list[Done] = []
    with ThreadPoolExecutor(256) as pool:
        futures = []
        started = time.perf_counter()
        due = started
        while True:
            due += chance.expovariate(rate)
            if due - started > seconds:
                break
            time.sleep(max(0.0, due - time.perf_counter()))
            futures.append(pool.submit(send, service, _pick(chance)))
            if progress is not None and len(futures) % 20 == 0:
                progress(len(futures), sum(future.done() for future in futures))
        results = [future.result() for future in futures]
    return results


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def mix(service: Any, seconds: float, load: float = 0.7, rate: float | None = None,
        capacity_seconds: float = 40, alone_shots: int = 30) -> dict[str, Any]:
    """The whole scenario on `service`: its capacity for the mix (unless `rate` is given), the viewport PNG alone,
    then the open loop at `load` of the capacity (or at `rate`). Figures in seconds."""
    measured = None
    if rate is None:
        print("  the mix's capacity (closed loop) ...", end="\r", flush=True)
        measured = capacity(service, capacity_seconds, 2 * service.fleet)
        rate = load * measured
    small = next(kind for kind in KINDS if kind.name == SMALL)
    alone = [send(service, small) for _ in range(alone_shots + 2)][2:]
    if any(done.error for done in alone):
        raise RuntimeError(f"the viewport PNG alone failed: {[done.error for done in alone if done.error]}")

    def progress(sent: int, finished: int) -> None:
        print(f"  the mix at {rate:.2f} jobs/s: {sent} sent, {finished} done   ", end="\r", flush=True)

    done = open_loop(service, rate, seconds, progress=progress)
    print(" " * 70, end="\r")
    kinds: dict[str, dict[str, float]] = {}
    for kind in KINDS:
        mine = [d for d in done if d.kind == kind.name and d.error is None]
        queued = [d.queue_ms for d in mine if d.queue_ms is not None]
        kinds[kind.name] = {
            "jobs": len(mine), "errors": sum(1 for d in done if d.kind == kind.name and d.error is not None),
            "p50": statistics.median(d.seconds for d in mine) if mine else float("nan"),
            "p99": _percentile([d.seconds for d in mine], 0.99) if mine else float("nan"),
            "queue_p50_ms": statistics.median(queued) if queued else float("nan"),
            "queue_p99_ms": _percentile(queued, 0.99) if queued else float("nan")}
    alone_p50 = statistics.median(d.seconds for d in alone)
    return {"capacity_jobs_per_second": measured, "rate": rate, "seconds": seconds, "alone_p50": alone_p50,
            "kinds": kinds, "small_p99_over_alone": kinds[SMALL]["p99"] / alone_p50,
            "errors": sorted({d.error for d in done if d.error is not None})}


def report(found: dict[str, Any]) -> str:
    capacity_text = (f"capacity {found['capacity_jobs_per_second']:.2f} jobs/s, "
                     if found["capacity_jobs_per_second"] else "")
    lines = [f"the customers' mix: {capacity_text}open loop at {found['rate']:.2f} jobs/s for {found['seconds']:.0f} s",
             "| kind | jobs | errors | p50 ms | p99 ms | queue p50 ms | queue p99 ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, row in found["kinds"].items():
        lines.append(f"| {name} | {row['jobs']:.0f} | {row['errors']:.0f} | {row['p50'] * 1000:.0f} | "
                     f"{row['p99'] * 1000:.0f} | {row['queue_p50_ms']:.0f} | {row['queue_p99_ms']:.0f} |")
    small = found["kinds"][SMALL]
    lines.append(f"{SMALL} under the mix: p50 {small['p50'] * 1000:.0f} ms, p99 {small['p99'] * 1000:.0f} ms = "
                 f"{found['small_p99_over_alone']:.1f}x its p50 alone ({found['alone_p50'] * 1000:.0f} ms)")
    if found["errors"]:
        lines.append(f"errors met: {', '.join(found['errors'])}")
    return "\n".join(lines)


def main() -> None:
    from bench.pages import SITE_ADDRESS, serve_bench_pages
    from bench.sides import Service
    from render.settings import RenderSettings
    from service.settings import default_workers
    from tests.support.site import Site

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=180, help="the open loop's length (default 180)")
    parser.add_argument("--load", type=float, default=0.7, help="its arrival rate, a share of the capacity "
                        "(default 0.7)")
    parser.add_argument("--rate", type=float, help="a fixed arrival rate, jobs/s (the capacity is not measured)")
    parser.add_argument("--workers", type=int, default=default_workers())
    args = parser.parse_args()
    serve_bench_pages()
    with Site(host=SITE_ADDRESS) as site, Service(site.base, args.workers, RenderSettings().chromium_path) as service:
        for _ in range(3):
            service.shot()
        found = mix(service, args.seconds, args.load, args.rate)
    print(report(found))
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "mix.json").write_text(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
