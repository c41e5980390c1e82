"""Fidelity (issue 19): the service's pictures against a plain Playwright script on the same Chromium
(tests/plain.py), on saved real pages and on a tall page whose rows encode their own y."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import pyvips

from tests import fidelity_pages as pages
from tests.conftest import Org
from tests.images import decode, rgb_at
from tests.plain import PlainBrowser, differing_pixels
from tests.site import Site

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def plain() -> Iterator[PlainBrowser]:
    browser = PlainBrowser()
    yield browser
    browser.close()


def take(client: httpx.Client, org: Org, **params: object) -> pyvips.Image:
    response = client.get("/v1/screenshot/take", params={"access_key": org.access_key, **params})
    assert response.status_code == 200, response.text
    return decode(response.content)


# --- full pages at any height ---------------------------------------------------------------------------


def runs(image: pyvips.Image, x: int, colour: tuple[int, int, int], scale: int) -> list[tuple[int, int]]:
    """The [top, bottom) CSS-pixel runs of rows whose pixel at CSS x has `colour`."""
    column = image.crop(round(x * scale), 0, 1, image.height).write_to_memory()
    bands = image.bands
    found: list[list[int]] = []
    for row in range(image.height):
        if tuple(column[row * bands:row * bands + 3]) == colour:
            if found and found[-1][1] == row:
                found[-1][1] = row + 1
            else:
                found.append([row, row + 1])
    return [(round(top / scale), round(bottom / scale)) for top, bottom in found]


def check_tall_page(shot: pyvips.Image, height: int, viewport: tuple[int, int], scale: int, wide: int = 0) -> None:
    """Read the capture of the tall page: every row once in its place, the fixed header and footer where
    the first screen has them, each `100vh` section one viewport tall, each sticky bar once where the
    document puts it, every lazy image loaded."""
    width, viewport_height = viewport
    assert (shot.width, shot.height) == (max(width, wide) * scale, height * scale)
    blocks = pages.layout(height, viewport_height)
    for kind, y in blocks:
        if kind in ("row", "lazy"):
            middle = round((y + pages.ROW // 2) * scale)
            assert rgb_at(shot, 700 * scale, middle)[:3] == pages.row_colour(y), f"row {y}"
        if kind == "lazy":
            assert rgb_at(shot, 290 * scale, (y + 50) * scale)[:3] == pages.MAGENTA, f"lazy image at {y}"
    assert runs(shot, 100, pages.RED, scale) == [(0, pages.HEADER)]
    assert runs(shot, 100, pages.BLUE, scale) == [(viewport_height - pages.FOOTER, viewport_height)]
    vh_tops = [y for kind, y in blocks if kind == "vh"]
    assert runs(shot, 700, pages.YELLOW, scale) == [(y, y + viewport_height) for y in vh_tops]
    sticky_tops = [y for kind, y in blocks if kind == "sticky"]
    assert runs(shot, 400, pages.GREEN, scale) == [(y, y + pages.BAR) for y in sticky_tops]


FULL_PAGES = [(5000, 1), (5000, 2), (5000, 3), (20000, 1), (40000, 1)]


@pytest.mark.parametrize("algorithm", ["default", "by_sections"])
@pytest.mark.parametrize(("height", "scale"), FULL_PAGES, ids=[f"{h}px-x{s}" for h, s in FULL_PAGES])
def test_full_page_is_what_a_person_scrolling_sees(client: httpx.Client, org: Org, site: Site,
                                                   plain: PlainBrowser, height: int, scale: int,
                                                   algorithm: str) -> None:
    viewport = (1000, 800)
    url = site.url(f"/fidelity/tall.html?height={height}&vh={viewport[1]}")
    shot = take(client, org, url=url, full_page="true", full_page_algorithm=algorithm, device_scale_factor=scale,
                viewport_width=viewport[0], viewport_height=viewport[1], full_page_scroll_delay=100)
    check_tall_page(shot, height, viewport, scale)
    reference = plain.capture(url, width=viewport[0], height=viewport[1], scale=scale, full_page=True,
                              scroll_delay_ms=100)
    check_tall_page(reference, height, viewport, scale)  # the page is right: Playwright draws it so too
    assert differing_pixels(shot, reference) == 0


@pytest.mark.parametrize("algorithm", ["default", "by_sections"])
def test_full_page_is_as_wide_as_the_page(client: httpx.Client, org: Org, site: Site, plain: PlainBrowser,
                                          algorithm: str) -> None:
    """A page wider than the viewport: as in Playwright, the full page holds its whole width."""
    url = site.url("/fidelity/tall.html?height=3000&vh=600&wide=1300")
    shot = take(client, org, url=url, full_page="true", full_page_algorithm=algorithm, viewport_width=1000,
                viewport_height=600, full_page_scroll_delay=100)
    check_tall_page(shot, 3000, (1000, 600), 1, wide=1300)
    assert rgb_at(shot, 1290, 3000 - 50)[:3] == pages.MAGENTA
    reference = plain.capture(url, width=1000, height=600, full_page=True, scroll_delay_ms=100)
    assert differing_pixels(shot, reference) == 0


# --- saved real pages -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", pages.REAL_PAGES)
@pytest.mark.parametrize("full_page", [False, True], ids=["viewport", "full-page"])
def test_real_pages_are_drawn_as_a_plain_browser_draws_them(client: httpx.Client, org: Org, site: Site,
                                                           plain: PlainBrowser, name: str, full_page: bool) -> None:
    url = site.url(f"/real/{name}.html")
    params = {"full_page": "true", "full_page_scroll": "false"} if full_page else {}
    shot = take(client, org, url=url, **params)
    reference = plain.capture(url, full_page=full_page)
    assert differing_pixels(shot, reference) == 0
