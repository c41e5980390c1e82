"""Pages kept between jobs of one organisation (SCREENSHOT_REUSE_CONTEXTS, on by default) carry nothing
from one job to the next: cookies, localStorage, sessionStorage, window.name, history, IndexedDB, Cache
API entries and the HTTP cache are wiped, a page whose settings a job changed is replaced, and another
organisation never gets the context. On a service of the module's own with one worker, so consecutive jobs
meet the same browser."""

from __future__ import annotations

import asyncio
import html
import json
import re
import time
from collections.abc import Iterator

import httpx
import pytest

from render.browser.page_changes import Effect
from render.browser.pool import TabPool
from render.net.egress import EgressProxy
from render.net.policy import NetworkPolicy
from render.settings import RenderSettings
from tests.support.archive_tools import archive_problems, every_byte
from tests.support.images import decode, rgb_at
from tests.support.pages.controls import RED
from tests.support.servers import RunningService, listening_sockets, metric, redis_server, running_service, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.browser
REUSED = "screenshot_browser_contexts_reused_total"
# What a new page finds. Its history holds its first about:blank and the reader; a kept page's the
# about:blank it was unloaded to and the reader: nothing of an earlier job's pages or pushed entries.
EMPTY = {"cookie": "", "local": None, "caches": [], "indexeddb": [], "session": None, "name": "", "history": 2}


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    data_dir = tmp_path_factory.mktemp("reuse")
    (data_dir / "redis").mkdir()
    with redis_server(data_dir / "redis") as url, running_service(url, data_dir, workers=1) as running:
        yield running


def state_left(http: httpx.Client, key: str, site: Site) -> dict[str, object]:
    """What the reader page finds in its browser context."""
    read = http.get("/v1/screenshot/take", params={"access_key": key, "url": site.url("/state/reader.html"),
                                                     "wait_for_selector": "#done", "format": "html"})
    assert read.status_code == 200, read.text
    found = re.search(r'<pre id="state">(.*?)</pre>', read.text, re.S)
    assert found, read.text[:500]
    return json.loads(html.unescape(found.group(1)))  # type: ignore[no-any-return]


def leave(http: httpx.Client, key: str, site: Site, path: str, **params: str) -> httpx.Response:
    """A job on the site's `path`, taken once its page shows #done."""
    answer = http.get("/v1/screenshot/take", params={"access_key": key, "url": site.url(path),
                                                     "wait_for_selector": "#done", **params})
    assert answer.status_code == 200, answer.text
    return answer


def write_state(http: httpx.Client, key: str, site: Site) -> None:
    leave(http, key, site, "/state/writer.html")


def test_a_kept_context_carries_nothing_to_the_next_job(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    key = make_org_in(single.redis_url).access_key
    with httpx.Client(base_url=single.url, timeout=60) as http:
        write_state(http, key, site)  # the first job of this organisation: a new context, then kept
        reused_before = metric(http, REUSED)
        fetched = len(site.requests_to("/state/cached.js"))
        assert state_left(http, key, site) == EMPTY
        assert state_left(http, key, site) == EMPTY  # and the same page again: its history does not grow
        # The HTTP cache was wiped too: the script cached for an hour was fetched again.
        assert len(site.requests_to("/state/cached.js")) == fetched + 2
        # And the reader did run in the writer's context (else this test would prove nothing).
        wait_for(lambda: metric(http, REUSED) > reused_before, 10, "the reuse in /metrics")


def test_what_a_page_writes_as_it_is_left_does_not_reach_the_next_job(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    """A page that writes its state again as it is left (pagehide, visibilitychange, unload, beforeunload) and from a
    timer until its document is gone: the wipe comes after the last of it (render.browser.wiping)."""
    key = make_org_in(single.redis_url).access_key
    with httpx.Client(base_url=single.url, timeout=60) as http:
        for _ in range(5):
            leave(http, key, site, "/state/leaver.html")
            assert state_left(http, key, site) == EMPTY


def test_what_a_page_s_workers_write_does_not_reach_the_next_job(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    """A page whose shared and dedicated workers keep writing (IndexedDB databases every 5 ms): nothing of theirs
    is there for the organisation's next job."""
    key = make_org_in(single.redis_url).access_key
    with httpx.Client(base_url=single.url, timeout=60) as http:
        for _ in range(3):
            left = leave(http, key, site, "/state/workers.html", format="html")
            assert '<p id="done">dedicated,shared</p>' in left.text  # both were writing as the job ended
            assert state_left(http, key, site) == EMPTY


def test_what_a_page_asks_for_as_it_is_left_does_not_reach_the_next_job(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    """A page that, as it is left, asks for a cookie whose answer comes after its job (an analytics beacon sent
    with `keepalive`): the answer never reaches the page's context, not even during the organisation's next job."""
    key = make_org_in(single.redis_url).access_key
    with httpx.Client(base_url=single.url, timeout=60) as http:
        for _ in range(3):
            leave(http, key, site, "/state/beacon.html")
            read = leave(http, key, site, "/state/late-reader.html", format="html")
            found = re.search(r'<pre id="state">(.*?)</pre>', read.text, re.S)
            assert found, read.text[:500]
            assert json.loads(html.unescape(found.group(1))) == {"cookie": ""}


def test_a_web_archive_holds_only_its_own_job_s_traffic_on_a_kept_page(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    """archive=true on a page that asks for something every 20 ms and once more as it is left, then format=wacz on
    another page of the same organisation, in the kept context: neither archive holds anything of the other job."""
    key = make_org_in(single.redis_url).access_key
    with httpx.Client(base_url=single.url, timeout=60) as http:
        reused_before = metric(http, REUSED)
        for _ in range(3):
            chatty = leave(http, key, site, "/state/chatty.html", archive="true", response_type="json")
            archived = [httpx.get(chatty.json()["archive"]["url"]).content,
                        leave(http, key, site, "/state/late-reader.html", format="wacz").content]
            assert [archive_problems(data) for data in archived] == [[], []]
            chatter, reader = (every_byte(data) for data in archived)
            assert b"from=chatty" in chatter and b"late-reader" not in chatter
            assert b"late-reader" in reader and b"chatty" not in reader
        wait_for(lambda: metric(http, REUSED) > reused_before, 10, "the reuse in /metrics")


@pytest.mark.parametrize("replaced", [False, True], ids=["kept-page", "replaced-page"])
def test_a_beacon_sent_as_the_page_is_left_is_refused_even_when_the_next_job_s_egress_is_open(
        site: Site, replaced: bool) -> None:
    """The race above, made certain: the organisation's next job has begun on the egress proxy (its context's
    listener serves) before the page is wiped, as when Chromium sends the beacon late. The page refuses every
    request from its unload until the next job's own document, so the site never sees the beacon; the next job's
    own requests go out. `replaced`: the job changed the page's settings, so the wipe gives the context a new page
    (the one left stays open, refusing, until the next wipe)."""
    async def main() -> None:
        egress = EgressProxy(NetworkPolicy(allow_private=True))
        await egress.start()
        pool = TabPool(RenderSettings(), egress)
        try:
            beacons = len(site.requests_to("/state/late-cookie"))
            reads = len(site.requests_to("/state/late-reader.html"))
            tab = await pool.acquire("org")
            egress.begin_job(None, tab.listener)
            await tab.page.goto(site.url("/state/beacon.html"))
            if replaced:
                tab.changed(Effect.SETTINGS, "as a job that changed its settings")
            egress.end_job(tab.listener)
            egress.begin_job(None, tab.listener)  # the next job's, early
            await pool.release(tab, owner="org", origins=egress.traffic(tab.listener).origins)
            kept = await pool.acquire("org")
            assert (kept.page is tab.page) != replaced
            await kept.page.goto(site.url("/state/late-reader.html"))
            await kept.page.wait_for_selector("#done", state="attached")
            assert json.loads(await kept.page.inner_text("#state")) == {"cookie": ""}
            assert len(site.requests_to("/state/late-cookie")) == beacons, "the beacon of the page left went out"
            assert len(site.requests_to("/state/late-reader.html")) == reads + 1
            await pool.release(kept, owner="org", origins=egress.traffic(kept.listener).origins)
        finally:
            await pool.close()
            await egress.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_another_organisation_never_gets_the_kept_context(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    first, second = make_org_in(single.redis_url).access_key, make_org_in(single.redis_url).access_key
    with httpx.Client(base_url=single.url, timeout=60) as http:
        write_state(http, first, site)
        time.sleep(2)  # the counts of earlier jobs reach /metrics with the worker's next heartbeat
        reused_before = metric(http, REUSED)
        assert state_left(http, second, site) == EMPTY
        time.sleep(2)  # two heartbeats: a reuse would have been counted by now
        assert metric(http, REUSED) == reused_before, "the second organisation got a context of its own"
        # The first's page was kept beside it (SCREENSHOT_KEPT_PAGES), and wiped: its next job finds nothing.
        assert state_left(http, first, site) == EMPTY
        time.sleep(2)
        assert metric(http, REUSED) == reused_before + 1


def test_a_worker_keeps_the_pages_of_the_last_two_organisations_only(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    """SCREENSHOT_KEPT_PAGES=2: served in turn, two organisations each find their page kept; a third's job makes
    the least recently served one's page go."""
    first, second, third = (make_org_in(single.redis_url).access_key for _ in range(3))
    with httpx.Client(base_url=single.url, timeout=60) as http:
        for key in (first, second):
            assert state_left(http, key, site) == EMPTY
        time.sleep(2)
        reused = metric(http, REUSED)
        for key in (first, second):  # both kept
            assert state_left(http, key, site) == EMPTY
        time.sleep(2)
        assert metric(http, REUSED) == reused + 2
        assert state_left(http, third, site) == EMPTY  # first's page goes: it was served least recently
        assert state_left(http, first, site) == EMPTY
        time.sleep(2)
        assert metric(http, REUSED) == reused + 2, "the evicted page was not kept"


def test_contexts_that_go_take_their_egress_listeners_with_them(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    """Each context has its own listener on the egress proxy (render.net.egress): one organisation after another,
    the contexts of those no longer kept are closed, and so are their listeners."""
    worker = single.processes["worker0"].pid
    with httpx.Client(base_url=single.url, timeout=60) as http:
        for _ in range(8):
            assert state_left(http, make_org_in(single.redis_url).access_key, site) == EMPTY
        time.sleep(1)
    # The browser-wide listener, the kept pages' (SCREENSHOT_KEPT_PAGES, 2) and a spare's, if one is prepared.
    assert listening_sockets(worker) <= 4


def test_a_blocking_job_leaves_its_page_kept_and_the_next_job_unblocked(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    """Request blocking routes the page's requests for its job only: the page is kept (not replaced, as a page
    whose settings a job changed is), and the organisation's next job, without blocking, loads what the first
    one blocked."""
    key = make_org_in(single.redis_url).access_key
    page = f"http://publisher.test:{site.port}/ads.html"
    with httpx.Client(base_url=single.url, timeout=60) as http:
        slots: list[tuple[int, int, int]] = []

        def take(*pairs: tuple[str, str]) -> int:
            before = len(site.requests_to("/banner.png"))
            answer = http.get("/v1/screenshot/take", params=[("access_key", key), ("url", page),
                                                             ("wait_until", "networkidle0"), *pairs])
            assert answer.status_code == 200, answer.text
            slots.append(rgb_at(decode(answer.content), 150, 275))  # the [data-ad-name] slot, when shown
            return len(site.requests_to("/banner.png")) - before

        assert take(("block_ads", "true")) == 0  # a new context, kept after the job
        time.sleep(2)
        reused = metric(http, REUSED)
        assert take(("block_ads", "true")) == 0  # the kept page, blocking again
        assert take() == 1  # the kept page, its blocking gone: the ad loads
        assert slots[-1] == RED and RED not in slots[:-1]  # and the list's style sheet is gone with it
        time.sleep(2)
        assert metric(http, REUSED) == reused + 2


def settings_seen(http: httpx.Client, key: str, site: Site, **options: str) -> dict[str, object]:
    """What the settings probe reports, captured with `options`."""
    read = http.get("/v1/screenshot/take", params={"access_key": key, "url": site.url("/state/settings.html"),
                                                     "format": "html", "wait_for_selector": "#done", **options})
    assert read.status_code == 200, read.text
    found = re.search(r'<pre id="settings">(.*?)</pre>', read.text, re.S)
    assert found, read.text[:500]
    return json.loads(html.unescape(found.group(1)))  # type: ignore[no-any-return]


def test_a_job_that_changed_its_page_leaves_the_next_one_the_defaults(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    first, fresh = make_org_in(single.redis_url).access_key, make_org_in(single.redis_url).access_key
    with httpx.Client(base_url=single.url, timeout=60) as http:
        defaults = settings_seen(http, fresh, site)  # a new page
        changed = settings_seen(http, first, site, viewport_device="iphone_15", time_zone="Asia/Tokyo",
                                dark_mode="true", reduced_motion="true", media_type="print",
                                headers="X-Job:one", geolocation_latitude="48.85", geolocation_longitude="2.35",
                                geolocation_accuracy="10")
        assert changed["zone"] == "Asia/Tokyo" and changed["dark"] and changed["touch"]
        assert changed["geolocation"] == "granted" and defaults["geolocation"] == "prompt"
        assert changed["width"] != defaults["width"] and changed["ua"] != defaults["ua"]
        assert site.requests_to("/state/settings.html")[-1].get("x-job") == "one"
        # The same organisation's next job: its page in the same context, with every default back.
        assert settings_seen(http, first, site) == defaults
        assert "x-job" not in site.requests_to("/state/settings.html")[-1]


def test_credentials_in_a_url_are_not_kept_for_the_next_job(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    key = make_org_in(single.redis_url).access_key
    basic = site.url("/basic")
    with httpx.Client(base_url=single.url, timeout=60) as http:
        signed_in = http.get("/v1/screenshot/take", params={
            "access_key": key, "url": basic.replace("http://", "http://user:pass@"), "format": "html"})
        assert signed_in.status_code == 200 and "signed in" in signed_in.text, signed_in.text
        assert site.requests_to("/basic")[-1]["authorization"] == "Basic dXNlcjpwYXNz"
        time.sleep(2)  # the counts of earlier jobs reach /metrics with the worker's next heartbeat
        reused_before = metric(http, REUSED)
        anonymous = http.get("/v1/screenshot/take", params={"access_key": key, "url": basic, "format": "html",
                                                            "ignore_host_errors": "true"})
        assert anonymous.status_code == 200, anonymous.text
        assert "authorization" not in site.requests_to("/basic")[-1]
        assert "credentials, please" in anonymous.text
        wait_for(lambda: metric(http, REUSED) > reused_before, 10, "the reuse in /metrics")  # same context


def test_credentials_a_page_used_are_not_kept_for_the_next_job(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    key = make_org_in(single.redis_url).access_key
    with httpx.Client(base_url=single.url, timeout=60) as http:
        signed_in = http.get("/v1/screenshot/take", params={
            "access_key": key, "url": site.url("/xhr-credentials.html"), "format": "html"})
        assert signed_in.status_code == 200 and '<pre id="status">200</pre>' in signed_in.text, signed_in.text
        assert site.requests_to("/basic")[-1]["authorization"] == "Basic c2NyaXB0LXVzZXI6c2NyaXB0LXBhc3M="
        anonymous = http.get("/v1/screenshot/take", params={"access_key": key, "url": site.url("/basic"),
                                                            "format": "html", "ignore_host_errors": "true"})
        assert anonymous.status_code == 200, anonymous.text
        assert "authorization" not in site.requests_to("/basic")[-1]


ORIGIN_PROBE = """<html><body><pre id="origin"></pre><script>
let wrote = "refused";
try { localStorage.setItem("leak", "html job"); wrote = "wrote"; } catch (e) {}
document.getElementById("origin").textContent = JSON.stringify({href: location.href, origin: self.origin, wrote});
</script></body></html>"""


def test_an_html_job_runs_in_an_origin_of_its_own(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    key = make_org_in(single.redis_url).access_key
    with httpx.Client(base_url=single.url, timeout=60) as http:
        assert state_left(http, key, site) == EMPTY  # a url job on the site's origin, its page then kept
        probe = http.get("/v1/screenshot/take", params={"access_key": key, "html": ORIGIN_PROBE, "format": "html"})
        assert probe.status_code == 200, probe.text
        found = re.search(r'<pre id="origin">(.*?)</pre>', probe.text, re.S)
        assert found, probe.text
        seen = json.loads(html.unescape(found.group(1)))
        assert seen == {"href": "about:blank", "origin": "null", "wrote": "refused"}
        assert state_left(http, key, site)["local"] is None  # nothing of it reached the site's origin


def test_credentials_a_frame_of_another_site_used_are_not_kept_for_the_next_job(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    """The same as a page's own, from a frame of another site (localhost against 127.0.0.1). Chromium's headless
    shell renders such a frame in the page's own process, so the page's DevTools session sees (and blocking decides)
    its requests; were it a process of its own, its credentials would go unseen and reach the next job."""
    key = make_org_in(single.redis_url).access_key
    other = site.url("/").replace("127.0.0.1", "localhost").rstrip("/")
    with httpx.Client(base_url=single.url, timeout=60) as http:
        framed = http.get("/v1/screenshot/take", params={
            "access_key": key, "url": site.url(f"/state/framed.html?src={other}/xhr-credentials.html"),
            "format": "png"})
        assert framed.status_code == 200, framed.text
        assert site.requests_to("/basic")[-1]["authorization"] == "Basic c2NyaXB0LXVzZXI6c2NyaXB0LXBhc3M="
        anonymous = http.get("/v1/screenshot/take", params={"access_key": key, "url": f"{other}/basic",
                                                            "format": "html", "ignore_host_errors": "true"})
        assert anonymous.status_code == 200, anonymous.text
        assert "authorization" not in site.requests_to("/basic")[-1]
