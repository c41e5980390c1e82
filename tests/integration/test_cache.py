"""The result cache: a hit renders nothing and charges nothing, expired entries are never served,
cache_key separates versions, and identical requests arriving together render once."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import orjson
import pytest
import redis

from render.contract.options import parse_take_options
from service.api.cache import cache_key
from tests.conftest import Org, RunningService
from tests.support.archive_tools import archive_problems
from tests.support.images import decode, near, rgb_at
from tests.support.pages.watch import IMAGE_BOX, LivePage
from tests.support.site import Site

pytestmark = pytest.mark.browser


def take(client: httpx.Client, org: Org, site: Site, page: str, **params: str) -> httpx.Response:
    """A cached capture of /colours.html; `page` (a query string) makes it a distinct page to the site."""
    return client.get("/v1/screenshot/take", params={
        "access_key": org.access_key, "url": site.url(f"/colours.html?{page}"), "viewport_width": "200",
        "viewport_height": "100", "cache": "true", **params})


def renders_of(site: Site, page: str) -> int:
    return site.queries_to("/colours.html").count(page)


def used(client: httpx.Client, org: Org) -> int:
    return int(client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


def test_a_hit_returns_the_stored_result_without_rendering_or_charging(client: httpx.Client, make_org,  # type: ignore[no-untyped-def]
                                                                       site: Site) -> None:
    org = make_org(quota=1)  # the hit must not need quota
    page = uuid.uuid4().hex
    first = take(client, org, site, page)
    assert first.status_code == 200, first.text
    assert float(first.headers["x-service-rendering-seconds"]) > 0
    second = take(client, org, site, page)
    assert second.status_code == 200, second.text
    assert second.content == first.content
    assert second.headers["x-service-rendering-seconds"] == "0.000"
    assert second.headers["x-service-reference"] == first.headers["x-service-reference"]
    assert renders_of(site, page) == 1 and used(client, org) == 1
    assert 'screenshot_cache_lookups_total{result="hit"}' in client.get("/metrics").text
    cache_url = second.headers["x-service-cache-url"]
    assert httpx.get(cache_url).content == first.content
    image = decode(second.content)
    assert (image.width, image.height) == (200, 100) and near(rgb_at(image, 100, 20), (255, 0, 0))
    # response_type is not part of the key: the same entry, as JSON.
    as_json = take(client, org, site, page, response_type="json")
    body = as_json.json()
    assert body["cache_url"] == as_json.headers["x-service-cache-url"]
    assert httpx.get(body["screenshot_url"]).content == first.content
    assert renders_of(site, page) == 1


def test_cache_key_and_options_make_distinct_entries(client: httpx.Client, org: Org, site: Site) -> None:
    page = uuid.uuid4().hex
    take(client, org, site, page)
    take(client, org, site, page, cache_key="v2")
    take(client, org, site, page, cache_key="v2")
    take(client, org, site, page, viewport_width="150")
    assert renders_of(site, page) == 3
    other = take(client, org, site, page, format="jpeg")
    assert decode(other.content).get("vips-loader").startswith("jpeg")


def test_an_archive_is_part_of_the_cache_key_and_its_hit_keeps_the_archive(client: httpx.Client, org: Org,
                                                                          site: Site) -> None:
    """A cached capture without archive is not the answer to one with it; a hit with archive=true answers the
    archive of the capture it kept (its link, still valid), and format=wacz is cached as its own entry."""
    page = uuid.uuid4().hex
    take(client, org, site, page)
    archived = take(client, org, site, page, archive="true", response_type="json")
    assert renders_of(site, page) == 2
    again = take(client, org, site, page, archive="true", response_type="json")
    assert renders_of(site, page) == 2 and again.headers["x-service-rendering-seconds"] == "0.000"
    kept = httpx.get(again.json()["archive"]["url"]).content
    assert kept == httpx.get(archived.json()["archive"]["url"]).content
    assert archive_problems(kept) == []
    first = take(client, org, site, page, format="wacz")
    second = take(client, org, site, page, format="wacz")
    assert renders_of(site, page) == 3 and second.content == first.content
    assert second.headers["content-type"] == "application/wacz" and archive_problems(second.content) == []


def test_expired_entries_are_never_served(client: httpx.Client, org: Org, site: Site,
                                          service: RunningService) -> None:
    page = uuid.uuid4().hex
    take(client, org, site, page, cache_ttl="14400")
    options = parse_take_options({"url": site.url(f"/colours.html?{page}"), "viewport_width": "200",
                                  "viewport_height": "100", "cache": "true"})
    key = f"cache:{cache_key(org.id, options)}"
    connection = redis.Redis.from_url(service.redis_url)
    assert 14000 < connection.ttl(key) <= 14400
    record = orjson.loads(connection.get(key) or b"{}")
    record["expires"] -= 14401  # as if the TTL had passed, before Redis dropped the record
    connection.set(key, orjson.dumps(record), keepttl=True)
    again = take(client, org, site, page)
    assert float(again.headers["x-service-rendering-seconds"]) > 0
    assert renders_of(site, page) == 2


def test_identical_requests_arriving_together_render_once(client: httpx.Client, org: Org, site: Site) -> None:
    page = uuid.uuid4().hex
    with ThreadPoolExecutor(4) as pool:
        responses = list(pool.map(lambda _: take(client, org, site, page, delay="1"), range(4)))
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    assert len({r.content for r in responses}) == 1
    assert renders_of(site, page) == 1
    assert sorted(r.headers["x-service-rendering-seconds"] == "0.000" for r in responses) == [False, True, True, True]


@pytest.mark.parametrize("other", [{"async": "true"}, {"webhook_url": "https://example.com/hook"}])
def test_cache_refuses_async_and_webhooks(client: httpx.Client, org: Org, site: Site, other: dict[str, str]) -> None:
    response = take(client, org, site, "x", **other)
    assert response.status_code == 400
    assert [d["field"] for d in response.json()["error_details"]] == ["cache"]


def test_a_stale_entry_is_served_at_once_and_refreshed_once_in_the_background(client: httpx.Client, make_org,  # type: ignore[no-untyped-def]
                                                                              site: Site,
                                                                              service: RunningService) -> None:
    live = LivePage()
    path = f"/watch/live-{uuid.uuid4().hex}.html"
    site.server.routes[path] = live
    org = make_org()
    params = {"access_key": org.access_key, "url": site.url(path), "viewport_width": "640", "viewport_height": "300",
              "cache": "true", "cache_stale_ttl": "600"}
    first = client.get("/v1/screenshot/take", params=params)
    assert first.status_code == 200 and "x-service-cache-stale" not in first.headers
    options = parse_take_options({k: v for k, v in params.items() if k != "access_key"})
    key = f"cache:{cache_key(org.id, options)}"
    connection = redis.Redis.from_url(service.redis_url)
    assert 14400 < connection.ttl(key) <= 14400 + 600  # kept through its stale window
    fresh = client.get("/v1/screenshot/take", params=params)
    assert fresh.headers["x-service-cache-stale"] == "false" and live.fetches == 1
    live.version = "image"  # the page changes; then the entry's TTL passes
    record = orjson.loads(connection.get(key) or b"{}")
    record["expires"] -= 14401
    connection.set(key, orjson.dumps(record), keepttl=True)
    with ThreadPoolExecutor(4) as pool:
        stale = list(pool.map(lambda _: client.get("/v1/screenshot/take", params=params), range(4)))
    for answer in stale:  # at once, the old picture
        assert answer.status_code == 200 and answer.headers["x-service-cache-stale"] == "true"
        assert answer.headers["x-service-rendering-seconds"] == "0.000" and answer.content == first.content
    deadline = time.monotonic() + 60
    while orjson.loads(connection.get(key) or b"{}")["reference"] == record["reference"]:
        assert time.monotonic() < deadline, "the stale entry was never refreshed"
        time.sleep(0.1)
    refreshed = client.get("/v1/screenshot/take", params=params)
    assert refreshed.headers["x-service-cache-stale"] == "false"
    assert refreshed.headers["x-service-rendering-seconds"] == "0.000" and refreshed.content != first.content
    x, y, _, _ = IMAGE_BOX  # the new picture's colour, from the cache
    assert near(rgb_at(decode(refreshed.content), x + 5, y + 5), (0xd0, 0x30, 0x30))
    assert live.fetches == 2  # four stale answers, one refresh
    # The refresh wrote the entry's other object: the stale one (and a cache URL handed out for it) kept its bytes.
    assert refreshed.headers["x-service-cache-url"] != first.headers["x-service-cache-url"]
    assert httpx.get(first.headers["x-service-cache-url"]).content == first.content
    assert used(client, org) == 2  # the first render and the refresh
    assert 'screenshot_cache_lookups_total{result="stale"} ' in client.get("/metrics").text


def test_cache_stale_ttl_needs_the_cache(client: httpx.Client, org: Org, site: Site) -> None:
    response = client.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": site.url("/colours.html"),
                                                          "cache_stale_ttl": "60"})
    assert response.status_code == 400
    assert [d["field"] for d in response.json()["error_details"]] == ["cache_stale_ttl"]
