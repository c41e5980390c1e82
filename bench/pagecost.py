"""What a capture's page costs, step by step: the capture itself and the wipe that readies the page for the next job.

`python -m bench.pagecost [--captures 100]` (from the checkout). The worker's own pipeline in this process (the
TabPool, `capture`, `release` as the worker calls them, the egress proxy), on the benchmark's simple page, PNG
1280x1024, one capture after another, in three layouts taken in turn:

- `kept page` (the default): the organisation's page kept between its jobs and wiped after each;
- `kept page, no egress proxy`: the same with Chromium connecting directly (what the proxy's hop costs; the
  network policy then holds nothing: measurement only);
- `new context a job`: no page kept (what an organisation whose jobs never repeat pays).

For each: the capture's p50 (acquiring the page, loading, capturing), all CPU a capture, and on a kept page the CPU
of Chromium, the Node driver and this Python (the pipeline, the egress proxy, the benchmark's site) apart for the
capture and for the release (the wipe). Then each of the wipe's DevTools steps alone, repeated on one page: its
Chromium CPU and its time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from bench.hotpath import table
from bench.pages import simple_page_url
from render.browser.pool import TabPool
from render.browser.tabs import Tab
from render.browser.wiping import unload
from render.capture.pipeline import Environment, capture
from render.contract.options import parse_take_options
from render.net.egress import EgressProxy
from render.net.policy import NetworkPolicy
from render.settings import RenderSettings
from tests.support.servers import cpu_seconds, process_tree

LAYOUTS = {"kept page": ("org", True), "kept page, no egress proxy": ("org", False), "new context a job": (None, True)}


def _cpu() -> dict[str, float]:
    """CPU seconds so far of Chromium, the Node driver and this Python."""
    parts: dict[str, list[int]] = {"chromium": [], "driver": [], "python": [os.getpid()]}
    for pid in process_tree(os.getpid())[1:]:
        try:
            program = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            continue
        parts["driver" if program == "node" else "chromium"].append(pid)
    return {part: cpu_seconds(pids) for part, pids in parts.items()}


async def layout(name: str, url: str, captures: int) -> dict[str, Any]:
    owner, proxied = LAYOUTS[name]
    settings = RenderSettings(allow_private_networks=True)
    policy = NetworkPolicy.from_settings(settings)
    egress = EgressProxy(policy)
    await egress.start()
    tabs = TabPool(settings, egress if proxied else None)
    options = parse_take_options({"url": url})
    spent: Counter[str] = Counter()
    latencies: list[float] = []
    try:
        for number in range(captures + 5):  # the first five warm up
            if number == 5:
                first = _cpu()
            before = _cpu()
            started = time.perf_counter()
            tab = await tabs.acquire(owner)
            env = Environment(settings, policy, tabs.chrome_version, egress)
            await capture(options, tab, env, time.monotonic() + 30)
            took = time.perf_counter() - started
            captured = _cpu()
            egress.end_job()
            await tabs.release(tab, owner=owner, origins=egress.origins)
            released = _cpu()
            if number >= 5:
                latencies.append(took)
                for part in before:
                    spent[f"capture {part}"] += captured[part] - before[part]
                    spent[f"release {part}"] += released[part] - captured[part]
        await asyncio.sleep(0.5)  # renderers closed meanwhile reaped, their CPU in their browser's
        last = _cpu()
    finally:
        await tabs.close()
        await egress.close()
    row: dict[str, Any] = {"layout": name, "capture_p50_ms": round(statistics.median(latencies) * 1000, 1),
                           "cpu_a_capture_ms": (sum(last.values()) - sum(first.values())) / captures * 1000}
    row["cpu_a_capture_ms"] = round(row["cpu_a_capture_ms"], 1)
    if owner is not None:  # with a context a job, renderers end within the release: no split of Chromium's part
        row.update({f"{key}_ms": round(seconds / captures * 1000, 1) for key, seconds in sorted(spent.items())})
    return row


async def wipe_steps(url: str, repeats: int) -> list[dict[str, Any]]:
    """Each DevTools step of the wipe alone, `repeats` times on one kept page (render.browser.wiping)."""
    settings = RenderSettings(allow_private_networks=True)
    tabs = TabPool(settings, None)
    tab = await tabs.acquire("org")
    origin = "/".join(url.split("/")[:3])

    async def from_page() -> None:  # the unload starts from the job's page, loaded again before each
        await tab.page.goto(url)

    steps: list[tuple[str, Callable[[Tab], Awaitable[Any]], Callable[[], Awaitable[None]] | None]] = [
        ("the page loaded again (for scale)", lambda tab: tab.page.goto(url), None),
        ("unload: the page to about:blank", unload, from_page),
        ("unload: about:blank to about:blank", unload, None),
        ("Storage.clearDataForOrigin (all)",
         lambda tab: tab.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"}), None),
        ("Network.clearBrowserCache", lambda tab: tab.send("Network.clearBrowserCache"), None),
        ("Network.clearBrowserCookies", lambda tab: tab.send("Network.clearBrowserCookies"), None),
        ("Page.resetNavigationHistory", lambda tab: tab.send("Page.resetNavigationHistory"), None),
    ]
    rows = []
    try:
        for name, step, setup in steps:
            if setup is None:
                await from_page()
            chromium = 0.0
            latencies = []
            for _ in range(repeats):
                if setup is not None:
                    await setup()
                before = _cpu()["chromium"]
                started = time.perf_counter()
                await step(tab)
                latencies.append(time.perf_counter() - started)
                chromium += _cpu()["chromium"] - before
            rows.append({"step": name, "p50_ms": round(statistics.median(latencies) * 1000, 1),
                         "chromium_cpu_ms": round(chromium / repeats * 1000, 1)})
    finally:
        await tab.close()
        await tabs.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--captures", type=int, default=100, help="captures a layout (default 100)")
    args = parser.parse_args()
    url = simple_page_url()
    rows = []
    for name in LAYOUTS:
        print(f"{name}: {args.captures} captures ...", flush=True)
        rows.append(asyncio.run(layout(name, url, args.captures)))
    print(table(rows))
    print("The wipe's steps alone (40 each):", flush=True)
    steps = asyncio.run(wipe_steps(url, 40))
    print(table(steps))
    out = Path(__file__).resolve().parent / "results" / "pagecost.json"
    out.write_bytes(orjson.dumps({"layouts": rows, "wipe_steps": steps}, option=orjson.OPT_INDENT_2))
    print(f"Results in {out}")


if __name__ == "__main__":
    main()
