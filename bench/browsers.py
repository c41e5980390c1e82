"""One browser per worker, or one for the machine: memory, throughput and what a crash costs.

`python -m bench.browsers [--slots 2] [--seconds 30]` (from the checkout). Two ways to run `--slots` captures at
once on this machine, each slot looping on the benchmark's simple page as a worker does on its kept page
(navigate, a 1280x1024 PNG, back to about:blank), each for `--seconds`:

- `per worker` (today): a process per slot, each with its own Playwright driver and its own Chromium;
- `shared`: one process for every slot, one driver and one Chromium, each slot its own browser context.

For each: captures a second, CPU per capture, and the memory of every process involved while they run
(proportional set size, summed: a page shared by several processes counts once in all), a slot's share of it,
and the Chromium's time to relaunch, which is what a crash costs each slot sharing it beside the job it fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import shlex
import statistics
import time
from pathlib import Path
from typing import Any

import orjson
from playwright.async_api import async_playwright

from bench.hotpath import table
from bench.pages import simple_page_url
from render.browser.chromium import chromium_arguments, chromium_binary, sandboxed
from render.settings import RenderSettings
from tests.support.servers import cpu_seconds, process_tree

VIEWPORT = {"width": 1280, "height": 1024}
SHOT = {"format": "png", "optimizeForSpeed": True}


def pss_mib(pids: list[int]) -> float:
    """Proportional set size of these processes, summed, in MiB."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
    return total / 1024


async def _launch(playwright: Any) -> Any:
    settings = RenderSettings()
    sandbox = sandboxed(settings.chromium_sandbox)
    return await playwright.chromium.launch(
        executable_path=chromium_binary(settings.chromium_path), chromium_sandbox=sandbox,
        args=chromium_arguments(shlex.split(settings.chromium_args), sandbox=sandbox,
                                low_memory=settings.chromium_low_memory))


async def _slot(browser: Any, url: str, until: float, done: list[float]) -> None:
    context = await browser.new_context(viewport=VIEWPORT)
    page = await context.new_page()
    cdp = await context.new_cdp_session(page)
    while time.monotonic() < until:
        started = time.perf_counter()
        await page.goto(url)
        await cdp.send("Page.captureScreenshot", SHOT)
        done.append(time.perf_counter() - started)
        await page.goto("about:blank")
    await context.close()


async def _run(slots: int, url: str, warm: float, seconds: float, ready: Any, report: Any) -> None:
    """`slots` loops on one browser; after `warm` seconds `ready` is set, and the shots after it are reported."""
    async with async_playwright() as playwright:
        browser = await _launch(playwright)
        done: list[float] = []
        started = time.monotonic()
        loops = [asyncio.ensure_future(_slot(browser, url, started + warm + seconds, done)) for _ in range(slots)]
        await asyncio.sleep(warm)
        counted_from = len(done)
        ready.set()
        await asyncio.gather(*loops)
        report.put(done[counted_from:])
        relaunch = time.perf_counter()
        await browser.close()
        browser = await _launch(playwright)
        context = await browser.new_context(viewport=VIEWPORT)
        page = await context.new_page()
        await page.goto(url)
        report.put(time.perf_counter() - relaunch)
        await browser.close()


def _process(slots: int, url: str, warm: float, seconds: float, ready: Any, report: Any) -> None:
    asyncio.run(_run(slots, url, warm, seconds, ready, report))


def measure(layout: str, slots: int, url: str, seconds: float, warm: float = 5.0) -> dict[str, Any]:
    """Run `slots` capture loops laid out as `layout` and measure them while they run."""
    processes = 1 if layout == "shared" else slots
    per_process = slots if layout == "shared" else 1
    context = multiprocessing.get_context("spawn")
    report = context.Queue()
    readies = [context.Event() for _ in range(processes)]
    children = [context.Process(target=_process, args=(per_process, url, warm, seconds, ready, report))
                for ready in readies]
    for child in children:
        child.start()
    for ready in readies:
        ready.wait()
    pids = [pid for child in children for pid in process_tree(child.pid)]
    cpu_before = cpu_seconds(pids)
    samples = []
    end = time.monotonic() + seconds * 0.9
    while time.monotonic() < end:  # memory a few times while the loops run
        time.sleep(seconds / 10)
        samples.append(pss_mib([pid for child in children for pid in process_tree(child.pid)]))
    cpu = cpu_seconds(pids) - cpu_before
    shots: list[float] = []
    relaunches: list[float] = []
    for _ in children:
        shots += report.get()
    for _ in children:
        relaunches.append(report.get())
    for child in children:
        child.join()
    memory = statistics.median(samples)
    return {"layout": layout, "slots": slots, "captures_a_second": round(len(shots) / seconds, 1),
            "p50_ms": round(statistics.median(shots) * 1000, 1),
            "cpu_ms_a_capture": round(cpu / len(shots) * 1000, 1),
            "memory_pss_mib": round(memory), "memory_a_slot_mib": round(memory / slots),
            "relaunch_ms": round(statistics.median(relaunches) * 1000),
            "captures_a_crash_fails": per_process}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=2, help="captures at once (default 2: the default workers here)")
    parser.add_argument("--seconds", type=float, default=30, help="each layout's measured run (default 30)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of the two layouts (default 2)")
    args = parser.parse_args()
    url = simple_page_url()
    rows = []
    for round_ in range(args.rounds):
        for layout in ("per worker", "shared"):
            print(f"round {round_ + 1}/{args.rounds}: {layout}, {args.slots} slots, {args.seconds:.0f} s ...",
                  flush=True)
            rows.append(measure(layout, args.slots, url, args.seconds))
    print(table(rows))
    out = Path(__file__).resolve().parent / "results" / "browsers.json"
    out.write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    print(f"Results in {out}")


if __name__ == "__main__":
    main()
