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
    assert rgb_at(shot, 150, 275) == RED  # the [data-ad-name] slot


def test_block_ads_stops_ad_requests_and_hides_ad_elements(client: httpx.Client, org: Org, site: Site) -> None:
    with requests_made(site) as seen:
        response = ads(client, org, site, ("block_ads", "true"))
    assert response.status_code == 200, response.text
    assert "/banner.png" not in seen  # ||doubleclick.net^
    assert {"/style.css", "/logo.png"} <= seen  # first-party content loads
    shot = decode(response.content)
    assert rgb_at(shot, 150, 100) == GREEN  # ###ad_banner hidden, the content moved up
    assert RED not in {rgb_at(shot, 150, y) for y in range(150, 300, 10)}  # the list's [data-ad-name] too


def test_the_page_itself_is_never_blocked_but_a_frame_at_such_an_address_is(
        client: httpx.Client, org: Org, site: Site) -> None:
    """EasyList blocks `/banner-ad.html` as a frame's document and not as the page's own: the worker tells the page's
    main frame from its frames by their DevTools ids."""
    def shot(path: str, *pairs: tuple[str, str]) -> tuple[int, int, int]:
        response = client.get("/v1/screenshot/take", params=[
            ("access_key", org.access_key), ("url", f"http://publisher.test:{site.port}{path}"),
            ("viewport_width", "300"), ("viewport_height", "300"), *pairs])
        assert response.status_code == 200, response.text
        return rgb_at(decode(response.content), 150, 150)

    assert shot("/banner-ad.html", ("block_ads", "true")) == GREEN  # the page itself loads
    assert shot("/ad-framed.html") == GREEN  # framed without blocking: the frame shows
    assert shot("/ad-framed.html", ("block_ads", "true")) != GREEN  # framed with block_ads: refused
    assert shot("/banner-ad.html", ("block_ads", "true")) == GREEN  # the kept page, again: still itself


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
