"""Job slots (SCREENSHOT_WORKER_SLOTS): one worker process renders jobs at once on its one Chromium, each in a
browser context of its own, and each job keeps its own egress (its upstream proxy, its traffic) while another
runs beside it."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.images import decode, rgb_at
from tests.support.proxies import PROXY_HOST, start_tinyproxy
from tests.support.servers import RunningService, process_tree, redis_server, running_service
from tests.support.site import Site

pytestmark = pytest.mark.browser
SITE_HOST = "127.0.0.2"
SLOTS = 2


@contextmanager
def slotted_service(directory: Path, **extra: str) -> Iterator[RunningService]:
    """One worker process with SLOTS job slots, on a Redis of its own, the network policy on."""
    (directory / "redis").mkdir()
    with redis_server(directory / "redis") as url, running_service(
            url, directory, workers=1, SCREENSHOT_WORKER_SLOTS=str(SLOTS), SCREENSHOT_ALLOW_PRIVATE_NETWORKS="false",
            SCREENSHOT_ALLOWED_NETWORKS=f"{SITE_HOST}/32,{PROXY_HOST}/32", **extra) as running:
        yield running


@pytest.fixture(scope="module")
def slotted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    with slotted_service(tmp_path_factory.mktemp("slots")) as running:
        yield running


@pytest.fixture(scope="module")
def sites() -> Iterator[tuple[Site, Site]]:
    with Site(host=SITE_HOST) as first, Site(host=SITE_HOST) as second:
        yield first, second


def busy_slots(http: httpx.Client) -> float:
    line = next(line for line in http.get("/metrics").text.splitlines()
                if line.startswith('screenshot_workers{state="busy"} '))
    return float(line.rsplit(" ", 1)[1])


def at_once(http: httpx.Client, requests: list[dict[str, str]]) -> list[httpx.Response]:
    """The captures sent together; each slot busy at one moment while they run (else nothing here ran at once)."""
    with ThreadPoolExecutor(len(requests)) as pool:
        answers = [pool.submit(http.get, "/v1/screenshot/take", params=params, timeout=60) for params in requests]
        seen = 0.0
        deadline = time.monotonic() + 30
        while seen < SLOTS and time.monotonic() < deadline and not all(answer.done() for answer in answers):
            seen = max(seen, busy_slots(http))
            time.sleep(0.05)
        responses = [answer.result() for answer in answers]
    assert seen == SLOTS, f"the slots were never all busy at once ({seen} of {SLOTS})"
    return responses


def is_chromium_browser(pid: int) -> bool:
    """Whether `pid` is a Chromium browser process (its helpers carry --type=, some in a command line rewritten as
    one string)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"chromium" in command.split(b"\0")[0] and b"--type=" not in command


def chromium_browsers(worker: int) -> int:
    """Chromium browser processes under the worker."""
    return sum(1 for pid in process_tree(worker) if is_chromium_browser(pid))


def test_one_worker_s_slots_render_two_organisations_at_once_on_its_one_chromium(  # type: ignore[no-untyped-def]
        slotted: RunningService, sites: tuple[Site, Site], make_org_in) -> None:
    site = sites[0]
    keys = [make_org_in(slotted.redis_url).access_key for _ in range(SLOTS)]
    with httpx.Client(base_url=slotted.url, timeout=60) as http:
        assert http.get("/readyz").json()["workers"] == SLOTS  # each slot a worker to the hand-off
        answers = at_once(http, [{"access_key": key, "url": site.url("/colours.html"), "delay": "2",
                                  "viewport_width": "200", "viewport_height": "100"} for key in keys])
        for answer in answers:
            assert answer.status_code == 200, answer.text
            picture = decode(answer.content)
            assert (picture.width, picture.height) == (200, 100)
            assert rgb_at(picture, 100, 25) == (255, 0, 0) and rgb_at(picture, 100, 75) == (0, 0, 255)
    assert chromium_browsers(slotted.processes["worker0"].pid) == 1


def test_jobs_at_once_each_go_out_through_their_own_upstream_proxy(  # type: ignore[no-untyped-def]
        slotted: RunningService, sites: tuple[Site, Site], make_org_in, tmp_path: Path) -> None:
    """Two jobs at once on pages that keep asking for something (every 20 ms): one through an upstream proxy, one
    without. Every request of the first reaches its site through the proxy, none of the second's does: neither job's
    start or end changes the other's egress (render.net.egress keeps each context's traffic apart)."""
    proxy, port = start_tinyproxy(tmp_path, None)
    proxied_site, direct_site = sites
    try:
        keys = [make_org_in(slotted.redis_url).access_key for _ in range(SLOTS)]
        with httpx.Client(base_url=slotted.url, timeout=60) as http:
            answers = at_once(http, [
                {"access_key": keys[0], "url": proxied_site.url("/state/chatty.html"), "delay": "3",
                 "proxy": f"http://{PROXY_HOST}:{port}/", "response_type": "empty"},
                {"access_key": keys[1], "url": direct_site.url("/state/chatty.html"), "delay": "3",
                 "response_type": "empty"}])
        assert [answer.status_code for answer in answers] == [200, 200], [answer.text for answer in answers]
    finally:
        proxy.terminate()
        proxy.wait(10)
    proxied = proxied_site.requests_to("/echo")
    direct = direct_site.requests_to("/echo")
    assert len(proxied) > 10 and len(direct) > 10  # both kept asking while the other ran
    assert all("tinyproxy-test" in request.get("via", "") for request in proxied)
    assert all(request.get("via", "") == "" for request in direct)


def test_when_chromium_dies_under_both_slots_jobs_each_runs_once_more_on_the_next(  # type: ignore[no-untyped-def]
        slotted: RunningService, sites: tuple[Site, Site], make_org_in) -> None:
    """What a crash costs with slots: every slot's job, which each runs once more on the Chromium started in its
    place (nothing of a job has left the worker before its capture ends), so both answer."""
    site = sites[0]
    keys = [make_org_in(slotted.redis_url).access_key for _ in range(SLOTS)]
    worker = slotted.processes["worker0"].pid
    with httpx.Client(base_url=slotted.url, timeout=60) as http:
        loads = len(site.requests_to("/slow"))
        with ThreadPoolExecutor(SLOTS) as pool:
            answers = [pool.submit(http.get, "/v1/screenshot/take", timeout=60, params={
                "access_key": key, "url": site.url("/slow?ms=3000"), "viewport_width": "200",
                "viewport_height": "100"}) for key in keys]
            deadline = time.monotonic() + 30
            while len(site.requests_to("/slow")) < loads + SLOTS and time.monotonic() < deadline:
                time.sleep(0.05)  # both pages are loading
            browsers = [pid for pid in process_tree(worker) if is_chromium_browser(pid)]
            assert len(browsers) == 1
            os.kill(browsers[0], signal.SIGKILL)
            responses = [answer.result() for answer in answers]
    assert [response.status_code for response in responses] == [200] * SLOTS, [r.text for r in responses]
    assert all(decode(response.content).width == 200 for response in responses)
    assert len(site.requests_to("/slow")) == loads + 2 * SLOTS  # each page loaded once more
    assert chromium_browsers(worker) == 1


def test_a_stopped_worker_ends_every_slot_s_job_then_exits(  # type: ignore[no-untyped-def]
        sites: tuple[Site, Site], make_org_in, tmp_path: Path) -> None:
    site = sites[0]
    with slotted_service(tmp_path) as running:
        keys = [make_org_in(running.redis_url).access_key for _ in range(SLOTS)]
        worker = running.processes["worker0"]
        with httpx.Client(base_url=running.url, timeout=60) as http:
            with ThreadPoolExecutor(SLOTS) as pool:
                answers = [pool.submit(http.get, "/v1/screenshot/take", timeout=60, params={
                    "access_key": key, "url": site.url("/slow?ms=3000"), "response_type": "empty"}) for key in keys]
                deadline = time.monotonic() + 30
                while busy_slots(http) < SLOTS and time.monotonic() < deadline:
                    time.sleep(0.05)
                worker.send_signal(signal.SIGTERM)  # what `docker stop` and Kubernetes send
                assert [answer.result().status_code for answer in answers] == [200] * SLOTS
        assert worker.wait(30) == 0, "the worker exits by itself once its slots' jobs are done"
