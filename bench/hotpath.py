"""What the capture's DevTools calls cost through Playwright, and what a connection of the worker's own would save.

`python -m bench.hotpath [--shots 200] [--calls 10]` (from the checkout). One warm page, the benchmark's simple page,
1280x1024 PNG: each shot is a navigation, `--calls` small DevTools calls (the service's simple capture makes
about four before its answer and eight more while the page is wiped) and a screenshot. Each design in turn, in
alternating blocks, with the CPU each process used per shot (this Python, Playwright's Node driver, Chromium):

- `playwright`: today's path. Playwright launches Chromium on its pipe; the calls go on a Playwright
  CDPSession (Python -> Node driver -> Chromium and back).
- `relay`: the design that keeps the debugging endpoint closed. This process launches Chromium with
  `--remote-debugging-pipe` on descriptors of its own, and Playwright gets in through `connect_over_cdp` on a
  loopback websocket with an unguessable path that relays its messages to the pipe; the calls still go
  through Playwright: what the relay itself costs.
- `direct`: the same, the calls and the screenshot sent on the pipe by this process (a flattened session of its
  own on the page; Playwright keeps the page and navigates it).
- `outside`: no Playwright at all: the page in a browser context of this process's own, navigated, waited for
  (its load event) and captured on the pipe: what a page layer of our own would cost. (Connected over CDP,
  Playwright would take such a page into its default context and follow it like its own.)

Then the screenshot alone: how much of it is waiting for the compositor's next frame (a 1x1 clip) and what an
unthrottled frame rate (`--disable-frame-rate-limit`) would change, with what that flag costs on an animated page.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import secrets
import shlex
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import websockets
from playwright.async_api import async_playwright

from bench.pages import simple_page_url
from render.browser.chromium import chromium_arguments, chromium_binary, sandboxed
from render.settings import RenderSettings
from tests.support.servers import cpu_seconds, process_tree

VIEWPORT = {"width": 1280, "height": 1024}
SHOT = {"format": "png", "optimizeForSpeed": True}
CALL = ("Runtime.evaluate", {"expression": "1 + 1", "returnByValue": True})
DESIGNS = ("playwright", "relay", "direct", "outside")
# What Playwright's launch adds to a headless Chromium's command line (its chromiumSwitches and headless
# switches; the feature lists are the service's own, from chromium_arguments): the `relay` and `outside`
# designs launch Chromium themselves, as alike as can be.
PLAYWRIGHT_SWITCHES = [
    "--disable-field-trial-config", "--disable-background-timer-throttling", "--disable-backgrounding-occluded-windows",
    "--disable-back-forward-cache", "--disable-breakpad", "--disable-component-extensions-with-background-pages",
    "--no-default-browser-check", "--disable-default-apps", "--disable-extensions", "--allow-pre-commit-input",
    "--disable-hang-monitor", "--disable-ipc-flooding-protection", "--disable-popup-blocking",
    "--disable-prompt-on-repost", "--disable-renderer-backgrounding", "--force-color-profile=srgb",
    "--metrics-recording-only", "--password-store=basic", "--use-mock-keychain", "--no-service-autorun",
    "--disable-search-engine-choice-screen", "--headless",
    "--blink-settings=primaryHoverType=2,availableHoverTypes=2,primaryPointerType=4,availablePointerTypes=4",
]
OWN_IDS = 1 << 30  # message ids of this process's calls on the pipe; Playwright's count up from 1
ANIMATED = ("<style>@keyframes s { to { transform: rotate(360deg) } } div { width: 200px; height: 200px; "
            "background: red; animation: s 1s linear infinite }</style><div></div>")
# Counts the animation frames it gets in its first second, drawing something in each (as an animation does).
FRAME_COUNTER = ("<body><script>let frames = 0; const count = () => { frames++; "
                 "document.body.style.background = frames % 2 ? '#fff' : '#eee'; requestAnimationFrame(count); }; "
                 "requestAnimationFrame(count); setTimeout(() => document.title = String(frames), 1000);</script>")


def _chromium_args(extra: list[str] = ()) -> list[str]:  # type: ignore[assignment]
    settings = RenderSettings()
    sandbox = sandboxed(settings.chromium_sandbox)
    return chromium_arguments([*shlex.split(settings.chromium_args), *extra], sandbox=sandbox)


class DevToolsPipe:
    """Chromium launched on `--remote-debugging-pipe` (it reads descriptor 3, writes 4; messages end in NUL): calls
    of this process, and a websocket on loopback, at an unguessable path, relaying Playwright's messages."""

    def __init__(self) -> None:
        self.ids = itertools.count(OWN_IDS)
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.sessions: set[str] = set()  # sessions of this process: their events are not relayed
        self.listeners: list[Callable[[dict[str, Any]], None]] = []  # told of those events
        self.client: Any = None
        self.relayed = 0
        self._buffer = b""
        self._unsent = bytearray()
        self._home = tempfile.mkdtemp(prefix="hotpath-")

    async def start(self) -> None:
        to_chromium, self._write_fd = os.pipe()
        self._read_fd, from_chromium = os.pipe()

        def descriptors() -> None:  # in the child: its ends as 3 and 4, whatever numbers they have here
            read, write = os.dup(to_chromium), os.dup(from_chromium)
            os.dup2(read, 3)
            os.dup2(write, 4)

        args = [chromium_binary(RenderSettings().chromium_path), *PLAYWRIGHT_SWITCHES, *_chromium_args(),
                f"--user-data-dir={self._home}", "--remote-debugging-pipe", "--no-startup-window"]
        self.process = subprocess.Popen(args, preexec_fn=descriptors, pass_fds=(3, 4), stdin=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        os.close(to_chromium)
        os.close(from_chromium)
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        asyncio.get_running_loop().add_reader(self._read_fd, self._readable)

    def _readable(self) -> None:
        with contextlib.suppress(BlockingIOError):
            data = os.read(self._read_fd, 1 << 20)
            if not data:
                asyncio.get_running_loop().remove_reader(self._read_fd)
                return
            *messages, self._buffer = (self._buffer + data).split(b"\0")
            for raw in messages:
                self._route(raw)

    def _route(self, raw: bytes) -> None:
        message = orjson.loads(raw)
        number = message.get("id")
        if number is not None and number >= OWN_IDS:
            future = self.waiting.pop(number)
            if "error" in message:
                future.set_exception(RuntimeError(message["error"]))
            else:
                future.set_result(message["result"])
        elif number is None and message.get("sessionId") in self.sessions:
            for listener in list(self.listeners):
                listener(message)
        elif self.client is not None:
            self.relayed += 1
            asyncio.ensure_future(self.client.send(raw.decode()))

    def _write(self, data: bytes) -> None:
        self._unsent += data + b"\0"
        self._flush()

    def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_writer(self._write_fd)
        try:
            written = os.write(self._write_fd, self._unsent)
        except BlockingIOError:
            written = 0
        del self._unsent[:written]
        if self._unsent:
            loop.add_writer(self._write_fd, self._flush)

    async def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        number = next(self.ids)
        future = self.waiting[number] = asyncio.get_running_loop().create_future()
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self._write(orjson.dumps(message))
        return await future

    async def endpoint(self) -> str:
        """A websocket URL for Playwright's `connect_over_cdp`, relayed to the pipe."""
        path = "/devtools/browser/" + secrets.token_urlsafe(24)

        async def relay(client: Any) -> None:
            if client.request.path != path:
                await client.close()
                return
            self.client = client
            with contextlib.suppress(websockets.ConnectionClosed):
                async for message in client:
                    self.relayed += 1
                    self._write(message.encode() if isinstance(message, str) else message)

        self._server = await websockets.serve(relay, "127.0.0.1", 0, max_size=None, compression=None)
        port = self._server.sockets[0].getsockname()[1]
        return f"ws://127.0.0.1:{port}{path}"

    async def attach(self, target: str) -> str:
        """A flattened session of this process's own on `target` (attached from a browser session of its own, so
        that Playwright's root session never hears of it)."""
        browser = (await self.send("Target.attachToBrowserTarget"))["sessionId"]
        self.sessions.add(browser)
        attached = await self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, browser)
        session = attached["sessionId"]
        self.sessions.add(session)
        return str(session)

    async def close(self) -> None:
        self.process.kill()
        self.process.wait()
        if hasattr(self, "_server"):
            self._server.close()
        asyncio.get_running_loop().remove_reader(self._read_fd)
        os.close(self._read_fd)
        os.close(self._write_fd)


class Design:
    """One way of taking the shot, set up on a Chromium of its own."""

    def __init__(self, name: str, url: str, calls: int) -> None:
        self.name, self.url, self.calls = name, url, calls
        self.latencies: list[float] = []
        self.cpu: Counter[str] = Counter()
        self.relayed = 0  # messages relayed between Playwright and the pipe during the counted shots

    async def open(self, playwright: Any) -> None:
        self.pipe = None
        if self.name == "playwright":
            self.browser = await playwright.chromium.launch(
                executable_path=chromium_binary(RenderSettings().chromium_path), args=_chromium_args(),
                chromium_sandbox=sandboxed(RenderSettings().chromium_sandbox))
        else:
            self.pipe = DevToolsPipe()
            await self.pipe.start()
        if self.name == "outside":  # no Playwright: connected over CDP, it would take the page into its default context
            assert self.pipe is not None
            context = (await self.pipe.send("Target.createBrowserContext"))["browserContextId"]
            target = (await self.pipe.send("Target.createTarget", {"url": "about:blank",
                                                                   "browserContextId": context}))["targetId"]
            self.session = await self.pipe.attach(target)
            await self.pipe.send("Page.enable", session=self.session)
            await self.pipe.send("Emulation.setDeviceMetricsOverride", {**VIEWPORT, "deviceScaleFactor": 1,
                                                                        "mobile": False}, self.session)
            return
        if self.pipe is not None:
            self.browser = await playwright.chromium.connect_over_cdp(await self.pipe.endpoint())
        context = await self.browser.new_context(viewport=VIEWPORT)
        self.page = await context.new_page()
        self.cdp = await context.new_cdp_session(self.page)
        if self.pipe is not None:
            target = (await self.cdp.send("Target.getTargetInfo"))["targetInfo"]["targetId"]
            self.session = await self.pipe.attach(target)

    async def shot(self) -> None:
        if self.name == "outside":
            await self._navigate_outside()
        else:
            await self.page.goto(self.url)
        direct = self.name in ("direct", "outside")
        for _ in range(self.calls):
            await (self.pipe.send(*CALL, self.session) if direct and self.pipe else self.cdp.send(*CALL))
        await (self.pipe.send("Page.captureScreenshot", SHOT, self.session) if direct and self.pipe
               else self.cdp.send("Page.captureScreenshot", SHOT))

    async def _navigate_outside(self) -> None:
        assert self.pipe is not None
        loaded: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_event(message: dict[str, Any]) -> None:
            if message["method"] == "Page.loadEventFired" and message["sessionId"] == self.session \
                    and not loaded.done():
                loaded.set_result(None)

        self.pipe.listeners.append(on_event)
        try:
            await self.pipe.send("Page.navigate", {"url": self.url}, self.session)
            await loaded
        finally:
            self.pipe.listeners.remove(on_event)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.name != "outside":
                await self.browser.close()
        if self.pipe is not None:
            await self.pipe.close()


def _parts() -> dict[str, list[int]]:
    """Every process by part: this Python, the Node driver, and Chromium (launched by the driver or by us)."""
    me = os.getpid()
    parts: dict[str, list[int]] = {"python": [me], "driver": [], "chromium": []}
    for pid in process_tree(me)[1:]:
        with contextlib.suppress(OSError):
            program = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            parts["driver" if program == "node" else "chromium"].append(pid)
    return parts


async def _block(design: Design, shots: int) -> None:
    await design.shot()  # not counted: the first after another design's block
    parts = _parts()
    before = {part: cpu_seconds(pids) for part, pids in parts.items()}
    relayed = design.pipe.relayed if design.pipe else 0
    for _ in range(shots):
        started = time.perf_counter()
        await design.shot()
        design.latencies.append(time.perf_counter() - started)
    for part, pids in parts.items():
        design.cpu[part] += cpu_seconds(pids) - before[part]
    design.relayed += (design.pipe.relayed if design.pipe else 0) - relayed


async def compare(url: str, shots: int, calls: int, names: tuple[str, ...] = DESIGNS) -> list[dict[str, Any]]:
    """Each design's p50 and CPU per shot, measured in alternating blocks of 10 (each design on its own Chromium,
    all open at once so the blocks alternate without a launch between them)."""
    async with async_playwright() as playwright:
        designs = [Design(name, url, calls) for name in names]
        for design in designs:
            await design.open(playwright)
            for _ in range(5):
                await design.shot()
        for done in range(0, shots, 10):
            for design in designs:
                await _block(design, min(10, shots - done))
            print(f"  {min(done + 10, shots)}/{shots} shots a design", flush=True)
        for design in designs:
            await design.close()
    rows = []
    for design in designs:
        count = len(design.latencies)
        rows.append({"design": design.name, "p50_ms": round(statistics.median(design.latencies) * 1000, 1),
                     **{f"{part}_cpu_ms": round(seconds / count * 1000, 2) for part, seconds in design.cpu.items()},
                     "relayed_a_shot": round(design.relayed / count, 1) if design.pipe else None})
    return rows


async def frames(url: str, shots: int) -> list[dict[str, Any]]:
    """The screenshot alone, whole and as a 1x1 clip (what is left is waiting for a frame), with Chromium's frame
    rate limited (as always) and not; and each way, what an animated page costs Chromium's CPU and how many
    animation frames a page gets in a second."""
    rows = []
    async with async_playwright() as playwright:
        for extra in ([], ["--disable-frame-rate-limit"]):
            browser = await playwright.chromium.launch(
                executable_path=chromium_binary(RenderSettings().chromium_path), args=_chromium_args(extra),
                chromium_sandbox=sandboxed(RenderSettings().chromium_sandbox))
            context = await browser.new_context(viewport=VIEWPORT)
            page = await context.new_page()
            cdp = await context.new_cdp_session(page)
            await page.goto(url)
            timed: dict[str, list[float]] = {"whole": [], "1x1": []}
            clip = {**SHOT, "clip": {"x": 0, "y": 0, "width": 1, "height": 1, "scale": 1}}
            for _ in range(shots):
                for name, params in (("whole", SHOT), ("1x1", clip)):
                    started = time.perf_counter()
                    await cdp.send("Page.captureScreenshot", params)
                    timed[name].append(time.perf_counter() - started)
            await page.set_content(ANIMATED)
            await asyncio.sleep(1)
            chromium = [pid for pid in process_tree(os.getpid())[1:]
                        if os.path.basename(os.readlink(f"/proc/{pid}/exe")) != "node"]
            before = cpu_seconds(chromium)
            await asyncio.sleep(3)
            cores = (cpu_seconds(chromium) - before) / 3
            await page.set_content(FRAME_COUNTER)
            await page.wait_for_function("() => document.title !== ''")
            rows.append({"flags": " ".join(extra) or "(the service's)",
                         "whole_p50_ms": round(statistics.median(timed["whole"]) * 1000, 1),
                         "clip_1x1_p50_ms": round(statistics.median(timed["1x1"]) * 1000, 1),
                         "animated_page_cores": round(cores, 2), "animation_frames_a_second": int(await page.title())})
            await browser.close()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    keys = list(dict.fromkeys(key for row in rows for key in row))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join("" if row.get(key) is None else str(row[key]) for key in keys) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shots", type=int, default=200, help="shots a design (default 200)")
    parser.add_argument("--calls", type=int, default=10, help="small DevTools calls a shot (default 10)")
    parser.add_argument("--designs", default=",".join(DESIGNS), help=f"which, comma-separated ({','.join(DESIGNS)})")
    args = parser.parse_args()
    url = simple_page_url()
    print(f"Each design: {args.shots} shots of the simple page, each a navigation, {args.calls} calls and a PNG",
          flush=True)
    rows = asyncio.run(compare(url, args.shots, args.calls, tuple(args.designs.split(","))))
    print(table(rows))
    print("The screenshot alone (50 each) and the frame rate:", flush=True)
    frame_rows = asyncio.run(frames(url, 50))
    print(table(frame_rows))
    out = Path(__file__).resolve().parent / "results" / "hotpath.json"
    out.write_bytes(orjson.dumps({"designs": rows, "frames": frame_rows, "shots": args.shots, "calls": args.calls},
                                 option=orjson.OPT_INDENT_2))
    print(f"Results in {out}")


if __name__ == "__main__":
    main()
