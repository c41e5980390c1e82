"""The browser supervisor: lazy start, restart after N jobs and on crash, hard deadlines."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import pyvips
from playwright.async_api import Error as PlaywrightError

from render.browser.pool import TabPool
from render.browser.tabs import open_page, open_tab
from render.browser.trust import TrustStoreError
from render.capture.pipeline import Environment, capture
from render.contract.options import TakeOptions, parse_take_options
from render.net.policy import NetworkPolicy
from render.page.watch import watch
from render.settings import RenderSettings
from tests.conftest import Org
from tests.support.servers import process_tree
from tests.support.site import Site
from tests.support.tls import authority

pytestmark = pytest.mark.browser

HTML = "<html><body style='margin:0;background:#00ff00'></body></html>"
# The animation frames a page gets in half a second (60 a second while it is shown), and whether it is shown.
FRAMES_IN_HALF_A_SECOND = """() => new Promise((done) => {
  let frames = 0;
  const start = performance.now();
  const count = () => { frames++; if (performance.now() - start < 500) requestAnimationFrame(count);
                        else done([frames, document.visibilityState]); };
  requestAnimationFrame(count);
})"""


async def shoot(supervisor: TabPool) -> bytes:
    options = parse_take_options({"html": HTML, "viewport_width": "50", "viewport_height": "50"})
    tab = await supervisor.acquire()
    try:
        env = Environment(supervisor.settings, NetworkPolicy(allow_private=True), supervisor.chrome_version)
        output = await capture(options, tab, env, time.monotonic() + 30)
    finally:
        supervisor.release_soon(tab)
    return output.body


def test_lazy_start_restart_after_n_jobs_and_after_a_crash() -> None:
    async def main() -> None:
        supervisor = TabPool(RenderSettings(jobs_per_browser=2))
        try:
            assert supervisor.chromium.browser is None  # nothing starts before it is needed
            for _ in range(3):
                assert (await shoot(supervisor)).startswith(b"\x89PNG")
            assert supervisor.restarts == 1  # after the second job
            browser = supervisor.chromium.browser
            assert browser is not None
            session = await browser.new_browser_cdp_session()
            try:
                # The crash takes the connection with it: the call may fail or never answer.
                await asyncio.wait_for(session.send("Browser.crash"), 5)
            except Exception:
                pass
            for _ in range(50):
                if not browser.is_connected():
                    break
                await asyncio.sleep(0.1)
            assert not browser.is_connected()
            assert (await shoot(supervisor)).startswith(b"\x89PNG")  # a new Chromium took over
            assert supervisor.restarts >= 2
        finally:
            await supervisor.close()

    asyncio.run(main())


async def until(condition: Any, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        await asyncio.sleep(0.05)


def test_a_restart_due_waits_for_every_job_slot_s_job_on_the_shared_chromium() -> None:
    async def main() -> None:
        pool = TabPool(RenderSettings(jobs_per_browser=2))
        first, second = pool.slot, pool.new_slot()
        try:
            other = await pool.acquire(slot=second)  # a long job in the other slot
            for _ in range(2):  # the second of these makes the restart due
                tab = await pool.acquire(slot=first)
                assert await tab.run("() => 1 + 1") == 2
                pool.release_soon(tab, slot=first)
                pool.release_now(first)
            browser = pool.chromium.browser
            following = asyncio.ensure_future(pool.acquire(slot=first))
            await until(pool.supervisor.draining, "the restart due after two jobs")
            assert await other.run("() => 2 + 2") == 4, "the other slot's job lost its browser"
            assert pool.restarts == 0 and pool.chromium.browser is browser and not following.done()
            pool.release_soon(other, slot=second)  # the other slot's job ends: the restart goes ahead
            tab = await asyncio.wait_for(following, 60)
            assert pool.restarts == 1 and pool.chromium.browser is not browser
            assert await tab.run("() => 3 + 3") == 6
            pool.release_soon(tab, slot=first)
        finally:
            await pool.close()

    asyncio.run(main())


def test_each_job_slot_keeps_its_own_page_for_an_organisation_and_gets_it_back() -> None:
    """As workers of their own would: the organisation's next job in either slot finds a page kept, not one still
    in the other slot's wipe."""
    async def main() -> None:
        pool = TabPool(RenderSettings(reuse_contexts=True))
        slots = (pool.slot, pool.new_slot())
        try:
            tabs = [await pool.acquire("org", slot=slot) for slot in slots]
            assert tabs[0].context is not tabs[1].context
            for tab, slot in zip(tabs, slots, strict=True):
                pool.release_soon(tab, owner="org", slot=slot)
                pool.release_now(slot)
            again = [await pool.acquire("org", slot=slot) for slot in reversed(slots)]
            assert [tab.context for tab in again] == [tabs[1].context, tabs[0].context]
            assert pool.reuses == 2
            for tab, slot in zip(again, reversed(slots), strict=True):
                pool.release_soon(tab, owner="org", slot=slot)
        finally:
            await pool.close()

    asyncio.run(main())


def test_a_hung_page_times_out_and_the_worker_carries_on(client: httpx.Client, org: Org) -> None:
    hang = "<html><body><script>setTimeout(() => { while (true) {} }, 50)</script>hung</body></html>"
    response = client.get("/v1/screenshot/take", params={"access_key": org.access_key, "html": hang, "delay": "1",
                                                         "timeout": "3"})
    assert response.status_code == 500 and response.json()["error_code"] == "timeout_error"
    for _ in range(3):  # the workers still serve
        ok = client.get("/v1/screenshot/take", params={"access_key": org.access_key, "html": HTML})
        assert ok.status_code == 200, ok.text


def test_extra_certificate_authorities_are_trusted_and_only_when_configured(tls_site: Site, tmp_path: Path) -> None:
    async def title(settings: RenderSettings) -> str:
        supervisor = TabPool(settings)
        tab = await supervisor.acquire()
        try:
            await tab.page.goto(tls_site.url("/article.html"))
            return await tab.page.title()
        finally:
            await tab.close()
            await supervisor.close()

    assert asyncio.run(title(RenderSettings(ca_certificates=str(authority().ca_file)))) == "Article"
    with pytest.raises(PlaywrightError, match="ERR_CERT_AUTHORITY_INVALID"):
        asyncio.run(title(RenderSettings()))
    (tmp_path / "empty.pem").write_text("not a certificate\n")
    with pytest.raises(TrustStoreError, match="holds no PEM certificate"):
        TabPool(RenderSettings(ca_certificates=str(tmp_path / "empty.pem")))
    with pytest.raises(TrustStoreError, match="cannot read"):
        TabPool(RenderSettings(ca_certificates=str(tmp_path / "missing.pem")))


def test_png_compression_changes_the_bytes_never_the_pixels() -> None:
    """SCREENSHOT_PNG_COMPRESSION: `fast` (the default) and `small` give the same pixels; `small` fewer bytes."""
    import pyvips

    page = ("<html><body style='margin:0;height:100vh;background:linear-gradient(90deg,#123456,#fedcba)'>"
            + "<p style='font:14px sans-serif'>The quick brown fox jumps over the lazy dog.</p>" * 20
            + "</body></html>")
    options = parse_take_options({"html": page, "viewport_width": "400", "viewport_height": "300"})

    async def capture_with(compression: str) -> bytes:
        supervisor = TabPool(RenderSettings(png_compression=compression))  # type: ignore[arg-type]
        try:
            tab = await supervisor.acquire()
            env = Environment(supervisor.settings, NetworkPolicy(allow_private=True), supervisor.chrome_version)
            return (await capture(options, tab, env, time.monotonic() + 30)).body
        finally:
            await supervisor.close()

    fast, small = (asyncio.run(capture_with(compression)) for compression in ("fast", "small"))
    images = [pyvips.Image.new_from_buffer(body, "") for body in (fast, small)]
    assert [(image.width, image.height) for image in images] == [(400, 300), (400, 300)]
    assert images[0].write_to_memory() == images[1].write_to_memory()
    assert len(small) < len(fast) * 0.8, (len(small), len(fast))


@pytest.mark.skipif(os.geteuid() != 0, reason="as root Chromium runs without its sandbox (the case tested here)")
def test_without_its_sandbox_chromium_runs_no_zygote_and_no_network_process() -> None:
    """Unsandboxed, the zygotes and the network service's own process isolate nothing: renderers start
    directly and the network service runs in the browser process (UNSANDBOXED_ARGS)."""
    async def main() -> list[str]:
        supervisor = TabPool(RenderSettings())
        try:
            assert (await shoot(supervisor)).startswith(b"\x89PNG")  # the network service still serves
            tab = await supervisor.acquire("org")  # held open: its renderer is there (and no spare is made)
            await tab.page.set_content(HTML)
            processes = await (await supervisor.chromium.session()).send("SystemInfo.getProcessInfo")
            browser = next(process["id"] for process in processes["processInfo"] if process["type"] == "browser")
            return [Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace") for pid in process_tree(browser)]
        finally:
            await supervisor.close()

    commands = asyncio.run(main())
    # A child sets its own title: its arguments are then one string, separated by spaces. A process that has just
    # ended (the first capture's renderer, not yet reaped) has no command line left: it is not one running.
    chromium = [command.replace("\0", " ").split() for command in commands
                if command.strip("\0") and "chrom" in command.split()[0]]
    kinds = sorted(next((arg for arg in command if arg.startswith("--type=")), "browser") for command in chromium)
    assert kinds == ["--type=renderer", "browser"], kinds


def test_chromium_frees_what_a_job_left_when_over_its_memory_budget(site: Site) -> None:
    """SCREENSHOT_CHROMIUM_MEMORY_MB: a page that held 120 MB of JavaScript arrays is unloaded; over the
    budget, Chromium is told to free its caches and the kept page's renderer collects the garbage before the
    next job. 0 never does, and the garbage stays. The budget is a job slot's: with two slots, twice as much."""
    async def after_the_job(budget: int, slots: int = 1) -> tuple[int, int, int]:
        supervisor = TabPool(RenderSettings(chromium_memory_mb=budget))
        for _ in range(slots - 1):
            supervisor.new_slot()
        try:
            tab = await supervisor.acquire("org")
            await tab.page.goto(site.url("/bloat.html"))
            during = await supervisor.chromium.private_memory()
            supervisor.release_soon(tab, owner="org", origins=[site.base])
            tab = await supervisor.acquire("org")  # waits for the release (and the relief)
            await asyncio.sleep(0.5)
            after = await supervisor.chromium.private_memory()
            supervisor.release_soon(tab, owner="org")
            return during >> 20, after >> 20, supervisor.memory_reliefs
        finally:
            await supervisor.close()

    during, after, reliefs = asyncio.run(after_the_job(1))
    assert reliefs == 1 and after < during - 80, (during, after)
    during, after, reliefs = asyncio.run(after_the_job(0))
    assert reliefs == 0 and after > during - 20, (during, after)
    budget = during * 7 // 10  # over it for one slot, under it for two
    assert asyncio.run(after_the_job(budget))[2] == 1
    assert asyncio.run(after_the_job(budget, slots=2))[2] == 0


def test_low_memory_mode_caps_the_javascript_heap_and_keeps_every_pixel() -> None:
    """SCREENSHOT_CHROMIUM_LOW_MEMORY (on by default): Chromium's low-end-device mode; the same capture, pixel
    for pixel, of a page with text, a gradient and an image at device scale 2."""
    import base64

    import pyvips

    photo = pyvips.Image.xyz(64, 48).bandsplit()[0].cast("uchar").bandjoin([pyvips.Image.black(64, 48) + 90,
                                                                             pyvips.Image.xyz(64, 48)[1] * 5])
    image = base64.b64encode(photo.cast("uchar").jpegsave_buffer(Q=80)).decode()
    page = ("<html><body style='margin:0;height:100vh;background:linear-gradient(45deg,#a01040,#10a0f0)'>"
            + "<p style='font:15px serif'>The quick brown fox jumps over the lazy dog.</p>" * 10
            + f"<img src='data:image/jpeg;base64,{image}' style='width:200px'></body></html>")
    options = parse_take_options({"html": page, "viewport_width": "600", "viewport_height": "400",
                                  "device_scale_factor": "2"})

    async def capture_with(low_memory: bool) -> tuple[bytes, float]:
        supervisor = TabPool(RenderSettings(chromium_low_memory=low_memory))
        try:
            tab = await supervisor.acquire()
            env = Environment(supervisor.settings, NetworkPolicy(allow_private=True), supervisor.chrome_version)
            limit = await tab.page.evaluate("performance.memory.jsHeapSizeLimit")
            return (await capture(options, tab, env, time.monotonic() + 30)).body, limit
        finally:
            await supervisor.close()

    (low, low_limit), (normal, normal_limit) = (asyncio.run(capture_with(mode)) for mode in (True, False))
    assert low_limit < 400e6 < 1e9 < normal_limit, (low_limit, normal_limit)
    images = [pyvips.Image.new_from_buffer(body, "") for body in (low, normal)]
    assert [(image.width, image.height) for image in images] == [(1200, 800), (1200, 800)]
    assert images[0].write_to_memory() == images[1].write_to_memory()


def test_a_job_tab_is_brought_to_the_front_once_and_again_after_a_page_opened_in_its_context() -> None:
    """render.browser.tabs.bring_to_front: a round trip to Chromium before each capture (and each frame of a
    recording) only when a page opened in the tab's context since the tab was last brought to the front (a popup,
    a new page in its context), which may have taken its window's foreground. A page in another context (the next
    job's spare tab, another job slot's) does not: the tab still renders at the full frame rate beside it."""
    options = parse_take_options({"html": HTML, "viewport_width": "50", "viewport_height": "50"})

    async def main() -> list[int]:
        supervisor = TabPool(RenderSettings())
        try:
            tab = await supervisor.acquire("org")  # an organisation's job: no spare tab is prepared
            sent: list[str] = []
            real_send = tab.cdp.send

            async def send(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
                sent.append(method)
                return await real_send(method, params)

            tab.cdp.send = send  # type: ignore[method-assign]
            env = Environment(supervisor.settings, NetworkPolicy(allow_private=True), supervisor.chrome_version)
            brought = []
            for opened in (None, None, "context", None, "browser"):
                if opened == "context":
                    await open_page(tab.context, supervisor.chrome_version)
                elif opened == "browser":
                    assert supervisor.chromium.browser is not None
                    await open_tab(supervisor.chromium.browser, supervisor.chrome_version)
                output = await capture(options, tab, env, time.monotonic() + 30)
                assert pyvips.Image.new_from_buffer(output.body, "")(25, 25)[:3] == [0, 255, 0]
                brought.append(sent.count("Page.bringToFront"))
                frames, visibility = await tab.run(FRAMES_IN_HALF_A_SECOND)
                assert visibility == "visible" and frames >= 5, (opened, frames, visibility)  # a hidden tab: none
            supervisor.release_soon(tab, owner="org")
            return brought
        finally:
            await supervisor.close()

    assert asyncio.run(asyncio.wait_for(main(), 60)) == [1, 1, 2, 2, 2]


def test_a_page_function_runs_over_cdp_as_page_evaluate_runs_it() -> None:
    """render.browser.tabs.Tab.run: JSON in and out, promises awaited, what JSON cannot hold as Python has it,
    an argument that looks like code stays data, and a throw is Playwright's Error with the page's message."""
    async def main() -> None:
        supervisor = TabPool(RenderSettings())
        try:
            tab = await supervisor.acquire()
            await tab.page.set_content(HTML)
            tricky = {"a": "\")); throw 1; ((\"", "b": [1, 2.5, None, True], "c": "\u2028ünï</script>"}
            assert await tab.run("(x) => x", tricky) == tricky
            assert await tab.run("async ([a, b]) => { await new Promise(r => setTimeout(r, 10)); return a + b; }",
                                 [2, 3]) == 5
            assert await tab.run("() => undefined") is None
            assert await tab.run("() => -Infinity") == float("-inf")
            assert await tab.run("() => 2n ** 70n") == 2 ** 70
            assert await tab.run("() => document.body.style.background") == "rgb(0, 255, 0)"
            with pytest.raises(PlaywrightError, match="no such thing"):
                await tab.run("() => { throw new Error('no such thing'); }")
            supervisor.release_soon(tab)
        finally:
            await supervisor.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_page_watch_stops_listening_when_its_job_is_over(site: Site) -> None:
    """render.page.watch: a job's console, error and network listeners are gone from the kept page when its tab
    is released: what the organisation's next job does on that page reaches no earlier job's watch."""
    async def main() -> None:
        supervisor = TabPool(RenderSettings())
        try:
            tab = await supervisor.acquire("org")
            options = TakeOptions(html=HTML, metadata_console=True, fail_on_resource_status=["4xx"])
            page_watch = watch(tab, options, time.monotonic())
            assert page_watch is not None
            await tab.page.goto(site.url("/evidence/console.html"))
            await tab.page.evaluate("() => new Promise(done => setTimeout(done, 200))")
            heard = [entry.text for entry in page_watch.entries]
            assert "broken widget" in heard and page_watch.resource_failure is not None
            await supervisor.release(tab, owner="org")
            kept = await supervisor.acquire("org")
            assert kept.page is tab.page  # the same page, kept for the organisation
            await kept.page.goto(site.url("/evidence/console.html"))
            await kept.page.evaluate("() => new Promise(done => setTimeout(done, 200))")
            assert [entry.text for entry in page_watch.entries] == heard
            assert watch(kept, TakeOptions(html=HTML), 0.0) is None  # nothing asked, nothing listens
            supervisor.release_soon(kept)
        finally:
            await supervisor.close()

    asyncio.run(asyncio.wait_for(main(), 60))
