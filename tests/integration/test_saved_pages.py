"""The default full page against a plain browser's on every saved page we have, and the blank-capture guard.

A default changed for speed (the adaptive lazy-load scroll) once answered a saved news article as one white
sheet: the page hides itself until an A/B test's script arrives or its own timer gives up, and the faster
scroll was done before the page showed. So every saved page of tests/material (real pages, articles and their
extras, bot challenges) is captured with the defaults and `full_page=true` and compared, pixel for pixel, with a
plain Playwright script's full page after the same scroll done by hand, taken once the page shows itself.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest
import pyvips
import redis

from render.contract.options import parse_take_options
from service.api.cache import cache_key
from tests.conftest import Org, RunningService, create_org
from tests.support.images import decode, rgb_at
from tests.support.pages.fidelity import REAL_PAGES
from tests.support.pages.hiding import ENTRANCE_HEADER
from tests.support.pages.watch import ARTICLES, EXTRA_ARTICLES
from tests.support.plain import Box, PlainBrowser, differing_pixels, differing_region
from tests.support.site import Site

pytestmark = pytest.mark.browser

CHALLENGES = ["cloudflare-js-2020", "cloudflare-managed-2021", "cloudflare-recaptcha-2019"]
SAVED = ([f"/real/{name}.html" for name in REAL_PAGES] + [f"/articles/{name}.html" for name in ARTICLES]
         + [f"/articles/extra/{name}.html" for name in EXTRA_ARTICLES]
         + [f"/challenge/{name}.html" for name in CHALLENGES])
# Pages made to show the mechanism: hidden from the first byte until their own timer ends.
HIDING = [f"/hiding/page.html?kind={kind}&ms={ms}&height={height}"
          for kind, ms, height in [("optimize", 2500, 12000), ("optimize", 2500, 800), ("body", 1500, 3000),
                                   ("visibility", 1500, 3000), ("fade", 1500, 3000)]]


@dataclass
class Shots:
    """The service's first shot of each page, asked for at once, and a way to take one again."""

    first: dict[str, Future[httpx.Response]]
    take: Callable[[str], httpx.Response]


@pytest.fixture(scope="module")
def shots(service: RunningService, redis_url: str, site: Site) -> Iterator[Shots]:
    """The service's default full page of each page, all asked for at once as the module starts (two at a
    time, the workers' number), so they are taken while the plain browser takes its own."""
    org = asyncio.run(create_org(redis_url, quota=1000, concurrency=4))
    with httpx.Client(base_url=service.url, timeout=120) as client, ThreadPoolExecutor(max_workers=2) as pool:
        def take(path: str) -> httpx.Response:
            return client.get("/v1/screenshot/take", params={
                "access_key": org.access_key, "url": site.url(path), "full_page": "true",
                "ignore_host_errors": "true"})  # the challenge pages answer 403, as their sites did

        yield Shots({path: pool.submit(take, path) for path in SAVED + HIDING}, take)


def _compare(shots: Shots, plain: PlainBrowser, site: Site, path: str) -> None:
    response = shots.first[path].result()
    assert response.status_code == 200, response.text
    assert "x-service-quality" not in response.headers, response.headers["x-service-quality"]
    shot = decode(response.content)
    reference, moving = plain.capture_with_motion(site.url(path), full_page=True, scroll_delay_ms=100, shown=True)
    assert reference.min() != reference.max(), "the reference shows nothing: the page is not worth comparing"
    # A spinner turns for ever: each side draws it where it stood as its shutter fell. Those boxes only are
    # left out, and they must stay small.
    assert sum(w * h for _, _, w, h in moving) <= MOVING_SHARE * reference.width * reference.height, moving
    first = differing_region(_without(shot, moving), _without(reference, moving))
    if differing_pixels(_without(shot, moving), _without(reference, moving), ROUNDING):
        # A second pair, as test_fidelity does for the saved pages: their images point at hosts no test reaches,
        # and on a loaded machine one side drew a failed image's icon a moment before the other (12 pixels of a
        # saved NYT page, once). A real difference shows in both pairs.
        again = shots.take(path)
        assert again.status_code == 200, again.text
        shot = decode(again.content)
        reference, moving = plain.capture_with_motion(site.url(path), full_page=True, scroll_delay_ms=100, shown=True)
    assert differing_pixels(_without(shot, moving), _without(reference, moving), ROUNDING) == 0, (
        f"first pair: {first}; second pair: {differing_region(_without(shot, moving), _without(reference, moving))}")


MOVING_SHARE = 0.01
# Levels a pixel may differ by. Chromium rounds the antialiased edge of one element a level up or down from one
# load to the next (the rounded corners of a saved NYT page's fixed header's button: 72 or 73 of 255 on either
# side, in the service's captures and a plain script's alike, as that header's fade-in and the scroll meet):
# nothing a person sees; a picture, text or colour that differs is many levels off.
ROUNDING = 1


def _without(image: pyvips.Image, boxes: list[Box]) -> pyvips.Image:
    for x, y, width, height in boxes:  # a pixel of anti-aliasing around each
        image = image.draw_rect([0] * image.bands, int(x) - 1, int(y) - 1, int(width) + 3, int(height) + 3,
                                fill=True)
    return image


@pytest.mark.parametrize("path", SAVED, ids=[path.rsplit("/", 1)[1].removesuffix(".html")[:24] for path in SAVED])
def test_the_default_full_page_of_a_saved_page_is_a_plain_browsers(
        shots: Shots, plain: PlainBrowser, site: Site, path: str) -> None:
    _compare(shots, plain, site, path)


@pytest.mark.parametrize("path", HIDING, ids=["optimize-12000", "optimize-800", "body", "visibility", "fade"])
def test_a_page_that_hides_itself_is_captured_once_it_shows(
        shots: Shots, plain: PlainBrowser, site: Site, path: str) -> None:
    """Hidden from its first byte until its own timer ends, as an anti-flicker snippet whose script never
    comes: captured when it shows, not as one white sheet answered 200 with nothing said."""
    _compare(shots, plain, site, path)


# --- the blank-capture guard -----------------------------------------------------------------------------


def _take(client: httpx.Client, org: Org, path: str, site: Site, **params: str) -> httpx.Response:
    return client.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": site.url(path), **params})


def test_a_capture_of_one_colour_where_the_page_has_text_says_so(client: httpx.Client, org: Org, site: Site,
                                                                service: RunningService) -> None:
    """Text drawn in its background's colour: one colour, taken twice, then answered with x-service-quality:
    blank although metadata_quality was not asked, and never kept in the cache for the next request."""
    path = f"/hiding/white-on-white.html?{uuid.uuid4().hex}"
    response = _take(client, org, path, site, cache="true")
    assert response.status_code == 200, response.text
    assert response.headers["x-service-quality"] == "blank"
    image = decode(response.content)
    assert image.min() == image.max() == 255
    options = parse_take_options({"url": site.url(path), "cache": "true"})
    assert not redis.Redis.from_url(service.redis_url).exists(f"cache:{cache_key(org.id, options)}")
    as_json = _take(client, org, path, site, response_type="json", full_page="true").json()
    assert as_json["metadata"]["quality"]["flags"] == ["blank"]
    assert as_json["metadata"]["quality"]["details"]["blank"]["colour"] == [255, 255, 255]


def test_a_page_with_nothing_to_show_is_not_flagged(client: httpx.Client, org: Org, site: Site) -> None:
    """An empty white page is one colour too, rightly: no text or media is laid out, so no flag and no retry."""
    response = _take(client, org, "/quality/blank.html", site)
    assert response.status_code == 200 and "x-service-quality" not in response.headers
    selected = _take(client, org, "/hiding/white-on-white.html", site, selector="h1")  # an element may be one colour
    assert selected.status_code == 200 and "x-service-quality" not in selected.headers


def test_a_page_hidden_past_the_wait_is_taken_again_once_it_shows(client: httpx.Client, org: Org,
                                                                 site: Site) -> None:
    """Hidden for 6.5 s, past SCREENSHOT_HIDDEN_PAGE_WAIT (5 s): the first shot is one white sheet; the guard
    sees text laid out, waits for the page again and takes the shot once more, which shows the page."""
    response = _take(client, org, "/hiding/page.html?kind=optimize&ms=6500&height=2000", site)
    assert response.status_code == 200, response.text
    assert "x-service-quality" not in response.headers
    image = decode(response.content)
    assert image.min() != image.max()
    assert rgb_at(image, 700, 50) != (255, 255, 255)  # the first row's colour, drawn


def test_an_entrance_about_to_end_is_captured_where_it_ends(client: httpx.Client, org: Org, site: Site) -> None:
    """A fixed header fading in over 800 ms at load is let finish (it is drawn in its own colour, not washed out
    over white); a 20 s fade is not waited for, nor a spinner that turns for ever."""
    for params in ({}, {"full_page": "true"}):
        response = _take(client, org, "/hiding/entrance.html", site, **params)
        assert response.status_code == 200, response.text
        image = decode(response.content)
        assert rgb_at(image, 640, 40) == ENTRANCE_HEADER, params
        assert rgb_at(image, 100, 300) != (0, 0, 0), params  # the slow box, still on its way in
