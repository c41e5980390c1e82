"""A worker's memory over a long run: 2,000 mixed captures, RSS at the start, the middle and the end.

    .venv/bin/python -m bench.memory [--captures 2000] [--workers N] [--clients 4]

The benchmark's site and the service as `bench.run` starts them; the captures cycle through the benchmark's
scenarios (every format, the heavy page, full pages of 10,000 to 40,000 px, block_ads, a consent banner with
block_cookie_banners) from `--clients` threads. After a warm-up (each scenario on every worker) and then at
every tenth of the run, each worker's memory: RSS with every page counted once (what a container's limit
sees; read from /proc/<pid>/pagemap, so run as root), in all and by program: its Python, Playwright's Node
driver, Chromium's browser process and its renderers (a page shared by two programs counts in each of them,
once in the total). Prints the table and writes `bench/results/memory.json`.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.pages import SITE_ADDRESS, serve_bench_pages
from bench.run import SCENARIOS
from bench.sides import Service
from render.browser.chromium import PAGE_SIZE
from render.settings import RenderSettings
from service.settings import default_workers
from tests.support.servers import process_tree, resident_pages
from tests.support.site import Site

RESULTS = Path(__file__).resolve().parent / "results"
MIB = 2**20


def program(pid: int, root: int) -> str:
    """What a process of a worker's tree is: python (the worker), node (Playwright's driver), chromium
    (its browser process) or renderer (and Chromium's other children)."""
    if pid == root:
        return "python"
    with contextlib.suppress(OSError):
        if os.path.basename(os.readlink(f"/proc/{pid}/exe")) == "node":
            return "node"
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        return "renderer" if any(part.startswith(b"--type=") for part in command) else "chromium"
    return "gone"


def worker_memory(root: int) -> dict[str, float]:
    """One worker's RSS in MiB, every page counted once: in all, and by program."""
    by_program: dict[str, set[int]] = {}
    for pid in process_tree(root):
        pages = resident_pages(pid)
        if pages is None:
            raise SystemExit("reading page frame numbers needs root (CAP_SYS_ADMIN)")
        by_program.setdefault(program(pid, root), set()).update(pages)
    every = set().union(*by_program.values())
    report = {"total": len(every) * PAGE_SIZE / MIB}
    report.update({name: len(pages) * PAGE_SIZE / MIB for name, pages in sorted(by_program.items())})
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--captures", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    serve_bench_pages()
    RESULTS.mkdir(exist_ok=True)
    scenarios = list(SCENARIOS)
    marks: list[dict[str, object]] = []
    with Site(host=SITE_ADDRESS) as site, Service(site.base, args.workers, RenderSettings().chromium_path) as service:
        def measure(done: int) -> None:
            marks.append({"captures": done, "seconds": round(time.monotonic() - started, 1),
                          "workers": [worker_memory(pid) for pid in service.worker_pids]})
            worst = max(worker["total"] for worker in marks[-1]["workers"])  # type: ignore[attr-defined]
            print(f"  {done:5d} captures: the largest worker {worst:.0f} MiB", flush=True)

        started = time.monotonic()
        with ThreadPoolExecutor(args.workers) as pool:  # warm-up: each scenario on every worker
            list(pool.map(lambda scenario: service.shot(scenario), scenarios * args.workers))
        measure(0)
        step = max(1, args.captures // 10)
        order = itertools.cycle(scenarios)
        with ThreadPoolExecutor(args.clients) as pool:
            for done in range(step, args.captures + 1, step):
                list(pool.map(lambda scenario: service.shot(scenario), [next(order) for _ in range(step)]))
                measure(done)
    (RESULTS / "memory.json").write_text(json.dumps(marks, indent=2))
    names = sorted({name for mark in marks for worker in mark["workers"] for name in worker})  # type: ignore[attr-defined]
    print("\n| captures | worker | " + " | ".join(f"{name} MiB" for name in names) + " |")
    print("|---:|---:|" + "---:|" * len(names))
    for mark in marks:
        for number, worker in enumerate(mark["workers"]):  # type: ignore[arg-type]
            print(f"| {mark['captures']} | {number} | " + " | ".join(f"{worker.get(name, 0):.0f}" for name in names)
                  + " |")


if __name__ == "__main__":
    main()
