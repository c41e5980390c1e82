"""Browser contexts kept between jobs of one organisation (SCREENSHOT_REUSE_CONTEXTS, on by default) carry
nothing from one job to the next: cookies, localStorage, IndexedDB, Cache API entries and the HTTP cache
are wiped, and another organisation never gets the context. On a service of the module's own with one
worker, so consecutive jobs meet the same browser."""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.servers import RunningService, metric, redis_server, running_service, wait_for
from tests.site import Site

pytestmark = pytest.mark.browser
REUSED = "screenshot_browser_contexts_reused_total"
EMPTY = {"cookie": "", "local": None, "caches": [], "indexeddb": []}


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


def write_state(http: httpx.Client, key: str, site: Site) -> None:
    wrote = http.get("/v1/screenshot/take", params={"access_key": key, "url": site.url("/state/writer.html"),
                                                      "wait_for_selector": "#done"})
    assert wrote.status_code == 200, wrote.text


def test_a_kept_context_carries_nothing_to_the_next_job(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    key = make_org_in(single.redis_url).access_key
    with httpx.Client(base_url=single.url, timeout=60) as http:
        write_state(http, key, site)  # the first job of this organisation: a new context, then kept
        reused_before = metric(http, REUSED)
        fetched = len(site.requests_to("/state/cached.js"))
        assert state_left(http, key, site) == EMPTY
        # The HTTP cache was wiped too: the script cached for an hour was fetched again.
        assert len(site.requests_to("/state/cached.js")) == fetched + 1
        # And the reader did run in the writer's context (else this test would prove nothing).
        wait_for(lambda: metric(http, REUSED) > reused_before, 10, "the reuse in /metrics")


def test_another_organisation_never_gets_the_kept_context(  # type: ignore[no-untyped-def]
        single: RunningService, site: Site, make_org_in) -> None:
    first, second = make_org_in(single.redis_url).access_key, make_org_in(single.redis_url).access_key
    with httpx.Client(base_url=single.url, timeout=60) as http:
        write_state(http, first, site)
        time.sleep(2)  # the counts of earlier jobs reach /metrics with the worker's next heartbeat
        reused_before = metric(http, REUSED)
        assert state_left(http, second, site) == EMPTY
        assert state_left(http, first, site) == EMPTY  # first's context was closed when second took over
        time.sleep(2)  # two heartbeats: a reuse would have been counted by now
        assert metric(http, REUSED) == reused_before
