"""block_ads, block_trackers (Debian's EasyList and EasyPrivacy), block_requests and block_resources."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.conftest import Org
from tests.support.images import decode, rgb_at
from tests.support.pages.controls import GREEN, RED
from tests.support.site import Site

pytestmark = pytest.mark.browser
PATHS = ("/banner.png", "/matomo.js", "/style.css", "/logo.png")


@contextmanager
def requests_made(site: Site) -> Iterator[set[str]]:
    """The paths among PATHS the page requested inside the block."""
    seen: set[str] = set()
    before = len(site.server.log)
    yield seen
    seen.update(path for path, _ in site.server.log[before:] if path in PATHS)


def ads(client: httpx.Client, org: Org, site: Site, *pairs: tuple[str, str]) -> httpx.Response:
    return client.get("/v1/screenshot/take", params=[
        # A host name: EasyList turns generic element hiding off for pages on bare IP addresses.
        ("access_key", org.access_key), ("url", f"http://publisher.test:{site.port}/ads.html"),
        ("viewport_width", "300"), ("viewport_height", "300"), ("wait_until", "networkidle0"), *pairs])


def test_nothing_is_blocked_by_default(client: httpx.Client, org: Org, site: Site) -> None:
    with requests_made(site) as seen:
        shot = decode(ads(client, org, site).content)
    assert seen == set(PATHS)
    assert rgb_at(shot, 150, 100) == RED


def test_block_ads_stops_ad_requests_and_hides_ad_elements(client: httpx.Client, org: Org, site: Site) -> None:
    with requests_made(site) as seen:
        response = ads(client, org, site, ("block_ads", "true"))
    assert response.status_code == 200, response.text
    assert "/banner.png" not in seen  # ||doubleclick.net^
    assert {"/style.css", "/logo.png"} <= seen  # first-party content loads
    shot = decode(response.content)
    assert rgb_at(shot, 150, 100) == GREEN  # ###ad_banner hidden, the content moved up


def test_block_trackers(client: httpx.Client, org: Org, site: Site) -> None:
    with requests_made(site) as seen:
        assert ads(client, org, site, ("block_trackers", "true")).status_code == 200
    assert "/matomo.js" not in seen
    assert {"/style.css", "/logo.png"} <= seen


def test_block_requests_by_pattern(client: httpx.Client, org: Org, site: Site) -> None:
    with requests_made(site) as seen:
        assert ads(client, org, site, ("block_requests", "*/style.css"), ("block_requests", "*.js")).status_code == 200
    assert seen == {"/banner.png", "/logo.png"}


def test_block_resources_by_type(client: httpx.Client, org: Org, site: Site) -> None:
    with requests_made(site) as seen:
        assert ads(client, org, site, ("block_resources", "image")).status_code == 200
    assert seen == {"/style.css", "/matomo.js"}
    with requests_made(site) as seen:
        assert ads(client, org, site, ("block_resources", "stylesheet"), ("block_resources", "script")
                   ).status_code == 200
    assert seen == {"/banner.png", "/logo.png"}
