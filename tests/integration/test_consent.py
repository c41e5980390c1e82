"""block_cookie_banners on real consent libraries from the npm registry (tests/consent_pages.py).

Each library, set up as its README shows, in bar and modal styles: its banner shows without the option;
with it the page captures exactly as the same page without the library (full page, so at its natural
height, with nothing left over it: no backdrop, no blur, no reserved space) and scrolls. Pages that only
look like banners capture the same with the option as without.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import pyvips

from tests.conftest import Org
from tests.consent_pages import CONSENT_PAGES, LOOK_ALIKES, NODE_MODULES, ConsentPage
from tests.images import decode
from tests.plain import differing_pixels
from tests.site import Site

pytestmark = pytest.mark.browser
VIEWPORT = {"viewport_width": 1280, "viewport_height": 800}
BANNER_PIXELS = 2000  # the smallest banner of the corpus covers far more than this


def take(client: httpx.Client, org: Org, url: str, **params: object) -> httpx.Response:
    response = client.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": url, **VIEWPORT,
                                                        **params})
    assert response.status_code == 200, response.text
    return response


def image(client: httpx.Client, org: Org, url: str, **params: object) -> pyvips.Image:
    return decode(take(client, org, url, **params).content)


def scroll_lock(client: httpx.Client, org: Org, url: str, **params: object) -> str:
    """What the page's probe says of its scroll lock when it is captured ("none" when it scrolls)."""
    html = take(client, org, url, format="html", **params).text
    found = re.search(r'<html[^>]* data-scroll-lock="([^"]*)"', html)
    assert found, "the page's probe did not run"
    return found.group(1)


_ARTICLE: dict[str, pyvips.Image] = {}


@pytest.fixture
def article(client: httpx.Client, org: Org, site: Site) -> dict[str, pyvips.Image]:
    """The bare article, in the viewport and as a full page (captured once)."""
    if not _ARTICLE:
        url = site.url("/consent/article.html")
        _ARTICLE.update(viewport=image(client, org, url), full=image(client, org, url, full_page="true"))
    return _ARTICLE


def without_banner(client: httpx.Client, org: Org, site: Site, page: ConsentPage,
                   article: dict[str, pyvips.Image]) -> dict[str, pyvips.Image]:
    """What a visitor who refused sees: the bare article, with what of the library styles the page itself."""
    if not page.keeps:
        return article
    url = site.url(f"/consent/{page.name}/without-banner.html")
    return {"viewport": image(client, org, url), "full": image(client, org, url, full_page="true")}


@pytest.mark.parametrize("page", CONSENT_PAGES, ids=lambda page: page.name)
def test_a_real_banner_is_refused_or_hidden_and_leaves_nothing_behind(
        client: httpx.Client, org: Org, site: Site, article: dict[str, pyvips.Image], page: ConsentPage) -> None:
    assert NODE_MODULES.is_dir(), "the consent corpus is not installed: `make test` runs npm ci in tests/consent"
    url = site.url(f"/consent/{page.name}.html")
    # The captures at once, as clients send them (the workers take them in parallel; the suite's time).
    with ThreadPoolExecutor(4) as pool:
        # Once the library's banner is in: some slide or fade in (bootstrap-cookie-alert starts 1 s after load).
        shown = pool.submit(image, client, org, url, delay="2")
        # Right after load, once the page has settled, and with the banner already up when the page is first
        # looked at (the page idle first: what a busy worker meets, autoconsent refusing before any hiding).
        blocked = {when: pool.submit(image, client, org, url, full_page="true", block_cookie_banners="true",
                                     **params) for when, params in (
            ("delay=0", {"delay": "0"}), ("delay=1", {"delay": "1"}), ("idle", {"wait_until": "networkidle0"}))}
        lock = pool.submit(scroll_lock, client, org, url, block_cookie_banners="true")
        without = without_banner(client, org, site, page, article)
    assert differing_pixels(shown.result(), without["viewport"]) > BANNER_PIXELS, "the library showed no banner"
    for when, capture in blocked.items():
        assert (capture.result().width, capture.result().height) == (
            without["full"].width, without["full"].height), f"{when}: the page is not at its natural size"
        assert differing_pixels(capture.result(), without["full"]) == 0, \
            f"{when}: the page differs from the page without the library"
    assert lock.result() == "none"


@pytest.mark.parametrize("look_alike", LOOK_ALIKES, ids=lambda look_alike: look_alike.name)
@pytest.mark.parametrize("option", ["block_cookie_banners", "block_banners_by_heuristics"])
def test_what_only_looks_like_a_banner_stays(client: httpx.Client, org: Org, site: Site, look_alike: object,
                                             option: str) -> None:
    url = site.url(f"/consent/look-alike/{look_alike.name}.html")  # type: ignore[attr-defined]
    assert differing_pixels(image(client, org, url, full_page="true", **{option: "true"}),
                            image(client, org, url, full_page="true")) == 0


def test_the_heuristics_alone_hide_every_banner_of_the_corpus_too(
        client: httpx.Client, org: Org, site: Site, article: dict[str, pyvips.Image]) -> None:
    """block_banners_by_heuristics (no autoconsent): each banner hidden on evidence, its leftovers undone."""
    def hidden(page: ConsentPage) -> bool:
        url = site.url(f"/consent/{page.name}.html")
        blocked = image(client, org, url, full_page="true", block_banners_by_heuristics="true", delay="1")
        without = without_banner(client, org, site, page, article)["full"]
        return blocked.height == without.height and not differing_pixels(blocked, without)

    with ThreadPoolExecutor(4) as pool:  # the pages at once, as clients send them (the suite's time)
        outcomes = list(pool.map(hidden, CONSENT_PAGES))
    assert [page.name for page, ok in zip(CONSENT_PAGES, outcomes, strict=True) if not ok] == []


def consent_given(client: httpx.Client, org: Org, url: str, **params: object) -> str | None:
    """What vanilla-cookieconsent recorded as the visitor's choice (its onConsent writes the categories
    into <html data-consent>), None when no choice was made."""
    found = re.search(r'<html[^>]* data-consent="([^"]*)"', take(client, org, url, format="html", **params).text)
    return found.group(1) if found else None


@pytest.mark.parametrize("name", ["vanilla-bar", "vanilla-box-blocking"])
def test_a_banner_autoconsent_has_a_rule_for_is_refused_not_only_hidden(
        client: httpx.Client, org: Org, site: Site, name: str) -> None:
    url = site.url(f"/consent/{name}.html")
    assert consent_given(client, org, url) is None
    # autoconsent clicked "Reject all": only the necessary category, which cannot be refused.
    assert consent_given(client, org, url, block_cookie_banners="true") == "necessary"


def test_the_next_job_on_the_same_page_without_the_option_sees_the_banner(
        client: httpx.Client, org: Org, site: Site) -> None:
    """autoconsent stays installed in a page that served block_cookie_banners, switched off between jobs:
    the organisation's next job, on the same kept page (the default viewport: nothing replaces the page),
    runs none of it."""
    url = site.url("/consent/vanilla-bar.html")

    def shot(**params: object) -> pyvips.Image:
        response = client.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": url, **params})
        assert response.status_code == 200, response.text
        return decode(response.content)

    for _ in range(2):
        refused = shot(block_cookie_banners="true")
        assert differing_pixels(shot(delay="1"), refused) > BANNER_PIXELS
        html = client.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": url, "format": "html"})
        assert html.status_code == 200 and "<html" in html.text and "data-consent" not in html.text
