"""Every capture control of /take, each checked on the output of a page made for it."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from tests.conftest import Org
from tests.support.images import decode, near, rgb_at
from tests.support.pages.controls import BLUE, CYAN, GREEN, GREY, MAGENTA, RED, WHITE, YELLOW, band_colour
from tests.support.site import Site

pytestmark = pytest.mark.browser


def take(client: httpx.Client, org: Org, **params: object) -> httpx.Response:
    return client.get("/v1/screenshot/take", params={"access_key": org.access_key, **params})


def post(client: httpx.Client, org: Org, **params: object) -> httpx.Response:
    return client.post("/v1/screenshot/take", json=params, headers={"X-Access-Key": org.access_key})


def image(response: httpx.Response):  # type: ignore[no-untyped-def]
    assert response.status_code == 200, response.text
    return decode(response.content)


def error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.json()["error_code"] == code, response.text
    return str(response.json()["error_message"])


def state(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return dict(json.loads(re.search(r'<pre id="state">(.*?)</pre>', response.text).group(1)))  # type: ignore[union-attr]


# --- emulation ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("dark_mode", "colour"), [("true", (0, 0, 0)), ("false", WHITE), (None, WHITE)],
                         ids=["dark", "light", "site-default"])
def test_dark_mode(client: httpx.Client, org: Org, site: Site, dark_mode: str | None, colour: tuple) -> None:
    params = {"dark_mode": dark_mode} if dark_mode else {}
    shot = image(take(client, org, url=site.url("/emulation.html"), viewport_width=300, viewport_height=300,
                      **params))
    assert rgb_at(shot, 250, 250) == colour


def test_reduced_motion_and_media_type(client: httpx.Client, org: Org, site: Site) -> None:
    plain = image(take(client, org, url=site.url("/emulation.html"), viewport_width=300, viewport_height=300))
    assert rgb_at(plain, 25, 25) == RED and rgb_at(plain, 25, 75) == BLUE
    emulated = image(post(client, org, url=site.url("/emulation.html"), viewport_width=300, viewport_height=300,
                          reduced_motion=True, media_type="print"))
    assert rgb_at(emulated, 25, 25) == GREEN  # prefers-reduced-motion: reduce
    assert rgb_at(emulated, 25, 75) == YELLOW  # @media print


def test_time_zone(client: httpx.Client, org: Org, site: Site) -> None:
    seen = state(take(client, org, url=site.url("/emulation.html"), format="html", time_zone="Asia/Tokyo"))
    assert seen["tz"] == "Asia/Tokyo" and seen["offset"] == -540
    refused = take(client, org, url=site.url("/emulation.html"), time_zone="Mars/Olympus_Mons")
    error(refused, 400, "request_not_valid")
    assert refused.json()["error_details"][0]["field"] == "time_zone"


def test_geolocation_is_granted_and_answered(client: httpx.Client, org: Org, site: Site) -> None:
    seen = state(take(client, org, url=site.url("/emulation.html"), format="html", wait_for_selector="#geo-done",
                      geolocation_latitude="48.8584", geolocation_longitude="2.2945", geolocation_accuracy="25"))
    assert (seen["lat"], seen["lon"], seen["acc"]) == (48.8584, 2.2945, 25)


# --- request context ----------------------------------------------------------------------------------


def test_headers_cookies_and_authorization(client: httpx.Client, org: Org, site: Site) -> None:
    response = client.get("/v1/screenshot/take", params=[
        ("access_key", org.access_key), ("url", site.url("/request.html")), ("format", "html"),
        ("headers", "X-Test-Header: yes"), ("headers", "Accept-Language:fr"),
        ("cookies", "session=abc123; HttpOnly"), ("cookies", "tracker=xyz; Domain=localhost; Path=/"),
        ("authorization", "Bearer secret-token")])
    assert response.status_code == 200, response.text
    target = site.requests_to("/request.html")[-1]
    third_party = site.requests_to("/third-party.png")[-1]
    assert target["x-test-header"] == "yes" and target["accept-language"] == "fr"
    assert "x-test-header" not in third_party  # the caller's headers are for the target's origin only
    assert target["authorization"] == "Bearer secret-token"
    assert "authorization" not in third_party  # never to a third party
    assert target["cookie"] == "session=abc123"  # no Domain: the target's host only, not localhost's
    assert "session" not in third_party.get("cookie", "")


@pytest.mark.parametrize(("name", "value", "code"), [
    ("headers", "NoColonHere", "invalid_header_parameter"),
    ("headers", "Bad Name:x", "invalid_header_parameter"),
    ("cookies", "=nameless", "invalid_cookie_parameter"),
    ("cookies", "a=b; Frobnicate", "invalid_cookie_parameter"),
])
def test_malformed_headers_and_cookies(client: httpx.Client, org: Org, site: Site, name: str, value: str,
                                       code: str) -> None:
    message = error(take(client, org, url=site.url("/request.html"), **{name: value}), 400, code)
    assert f"{name}[0]" in message


def test_bypass_csp(client: httpx.Client, org: Org, site: Site) -> None:
    blocked = image(take(client, org, url=site.url("/csp.html"), viewport_width=100, viewport_height=100))
    assert rgb_at(blocked, 50, 50) == RED
    bypassed = image(take(client, org, url=site.url("/csp.html"), viewport_width=100, viewport_height=100,
                          bypass_csp="true"))
    assert rgb_at(bypassed, 50, 50) == GREEN


# --- page preparation ---------------------------------------------------------------------------------


def prepared(client: httpx.Client, org: Org, site: Site, **params: object):  # type: ignore[no-untyped-def]
    return image(take(client, org, url=site.url("/prepare.html"), viewport_width=300, viewport_height=500,
                      **params))


def test_hide_selectors_and_styles(client: httpx.Client, org: Org, site: Site) -> None:
    plain = prepared(client, org, site)
    assert rgb_at(plain, 50, 50) == RED and rgb_at(plain, 50, 150) == BLUE
    shot = image(client.get("/v1/screenshot/take", params=[
        ("access_key", org.access_key), ("url", site.url("/prepare.html")), ("viewport_width", "300"),
        ("viewport_height", "500"), ("hide_selectors", ".ad"), ("hide_selectors", "#btn"),
        ("styles", "#hov { background: #ff00ff !important; }")]))
    assert rgb_at(shot, 50, 50) == BLUE  # the ad is gone, the target moved up
    assert rgb_at(shot, 50, 150) == MAGENTA  # the button is gone too; #hov restyled


def test_hide_selectors_and_styles_apply_where_the_site_refuses_inline_styles(
        client: httpx.Client, org: Org, site: Site) -> None:
    def shot(**params: object):  # type: ignore[no-untyped-def]
        return image(take(client, org, url=site.url("/strict-styles.html"), viewport_width=300, viewport_height=300,
                          **params))

    assert rgb_at(shot(), 50, 50) == RED
    assert rgb_at(shot(hide_selectors=".ad"), 50, 50) == BLUE
    assert rgb_at(shot(styles="#target { background: #ff00ff !important; }"), 50, 150) == MAGENTA


def test_scripts_run_and_their_errors_are_reported(client: httpx.Client, org: Org, site: Site) -> None:
    shot = prepared(client, org, site, scripts="document.getElementById('target').style.background = '#00ffff';")
    assert rgb_at(shot, 50, 150) == CYAN
    awaited = prepared(client, org, site, scripts="await new Promise(r => setTimeout(r, 100)); "
                                                  "document.querySelector('.ad').remove();")
    assert rgb_at(awaited, 50, 50) == BLUE
    message = error(take(client, org, url=site.url("/prepare.html"), scripts="throw new Error('boom from script')"),
                    400, "request_not_valid")
    assert "boom from script" in message


def test_scripts_that_navigate(client: httpx.Client, org: Org, site: Site) -> None:
    script = "location.href = '/colours.html'"
    message = error(take(client, org, url=site.url("/prepare.html"), scripts=script), 400, "script_triggers_redirect")
    assert "scripts_wait_until" in message
    shot = image(take(client, org, url=site.url("/prepare.html"), scripts=script, scripts_wait_until="load",
                      viewport_width=200, viewport_height=200))
    assert rgb_at(shot, 100, 20) == RED and rgb_at(shot, 100, 180) == BLUE  # the colours page


def test_click_and_hover(client: httpx.Client, org: Org, site: Site) -> None:
    clicked = prepared(client, org, site, click="#btn")
    assert rgb_at(clicked, 50, 150) == GREEN
    hovered = prepared(client, org, site, hover="#hov")
    assert rgb_at(hovered, 50, 350) == GREEN
    assert rgb_at(prepared(client, org, site), 50, 350) == GREY


def test_click_in_shadow_dom_needs_the_prefix(client: httpx.Client, org: Org, site: Site) -> None:
    shot = prepared(client, org, site, click="shadow/.inner")
    assert rgb_at(shot, 50, 150) == YELLOW
    message = error(take(client, org, url=site.url("/prepare.html"), click=".inner"), 400, "selector_not_found")
    assert "error_on_click_selector_not_found" in message
    skipped = prepared(client, org, site, click=".inner", error_on_click_selector_not_found="false")
    assert rgb_at(skipped, 50, 150) == BLUE
    error(take(client, org, url=site.url("/prepare.html"), hover="#nothing"), 400, "selector_not_found")
    error(take(client, org, url=site.url("/prepare.html"), hide_selectors="#btn", click="#btn"), 400,
          "selector_not_found")  # hidden: refused at once, not after the whole timeout
    assert prepared(client, org, site, hover="#nothing", error_on_hover_selector_not_found="false")
    error(take(client, org, url=site.url("/prepare.html"), click="#[broken"), 400, "request_not_valid")


def test_wait_for_selector(client: httpx.Client, org: Org, site: Site) -> None:
    early = take(client, org, url=site.url("/prepare.html"), format="html")
    assert '<p id="late">' not in early.text
    waited = take(client, org, url=site.url("/prepare.html"), format="html", wait_for_selector="#late")
    assert '<p id="late">arrived late</p>' in waited.text
    any_one = take(client, org, url=site.url("/prepare.html"), format="html", wait_for_selector="#late, #never")
    assert '<p id="late">arrived late</p>' in any_one.text
    message = error(take(client, org, url=site.url("/prepare.html"), wait_for_selector="#late, #never",
                         wait_for_selector_algorithm="at_least_by_count", timeout="3"), 500, "timeout_error")
    assert "#never" in message and "#late" not in message


# --- selector, clip, scrolling ------------------------------------------------------------------------


def elements(client: httpx.Client, org: Org, site: Site, **params: object) -> httpx.Response:
    return take(client, org, url=site.url("/elements.html"), viewport_width=800, viewport_height=600, **params)


def test_selector_outputs_the_element(client: httpx.Client, org: Org, site: Site) -> None:
    box = image(elements(client, org, site, selector="#box"))
    assert (box.width, box.height) == (200, 100)
    assert box.min() == 0 and rgb_at(box, 100, 50) == BLUE and rgb_at(box, 2, 2) == BLUE
    retina = image(elements(client, org, site, selector="#box", device_scale_factor="2", format="webp"))
    assert (retina.width, retina.height) == (400, 200)


def test_selector_larger_than_the_viewport(client: httpx.Client, org: Org, site: Site) -> None:
    big = image(elements(client, org, site, selector="#big"))  # 900 px tall in a 600 px viewport
    assert (big.width, big.height) == (300, 900)
    assert rgb_at(big, 150, 100) == RED and rgb_at(big, 150, 800) == GREEN


def test_selector_in_shadow_dom_and_not_found(client: httpx.Client, org: Org, site: Site) -> None:
    deep = image(elements(client, org, site, selector="shadow/.deep"))
    assert (deep.width, deep.height) == (120, 60) and rgb_at(deep, 60, 30) == CYAN
    viewport = image(elements(client, org, site, selector=".deep"))  # not pierced: the viewport instead
    assert (viewport.width, viewport.height) == (800, 600)
    error(elements(client, org, site, selector=".deep", error_on_selector_not_found="true"), 400,
          "selector_not_found")


def test_selector_algorithm_clip_keeps_what_overlays_the_element(client: httpx.Client, org: Org, site: Site) -> None:
    # Scrolled so #box sits at the top, under the fixed header: `clip` shows the header over it.
    overlaid = image(elements(client, org, site, selector="#box", selector_algorithm="clip",
                              selector_scroll_into_view="false", scripts="window.scrollTo(0, 1500)"))
    assert (overlaid.width, overlaid.height) == (200, 100)
    assert rgb_at(overlaid, 100, 10) == MAGENTA and rgb_at(overlaid, 100, 70) == BLUE
    error(elements(client, org, site, selector="#box", selector_algorithm="clip", selector_scroll_into_view="false"),
          400, "selector_not_found")


def test_clip_and_capture_beyond_viewport(client: httpx.Client, org: Org, site: Site) -> None:
    region = {"clip_x": "100", "clip_y": "1500", "clip_width": "200", "clip_height": "100"}
    in_view = image(elements(client, org, site, **region))
    assert (in_view.width, in_view.height) == (200, 100)
    assert rgb_at(in_view, 100, 10) == MAGENTA  # scrolled into view: the fixed header covers its top
    assert rgb_at(in_view, 100, 70) == BLUE
    in_place = image(elements(client, org, site, capture_beyond_viewport="true", **region))
    assert rgb_at(in_place, 100, 10) == BLUE and rgb_at(in_place, 100, 70) == BLUE
    error(elements(client, org, site, clip_x="1", clip_y="1"), 400, "request_not_valid")


def test_scroll_into_view_with_adjustment(client: httpx.Client, org: Org, site: Site) -> None:
    shot = image(elements(client, org, site, scroll_into_view="#box", scroll_into_view_adjust_top="-200"))
    assert (shot.width, shot.height) == (800, 600)
    assert rgb_at(shot, 200, 250) == BLUE  # the box top is 200 px below the viewport top
    assert rgb_at(shot, 200, 150) == WHITE
    error(elements(client, org, site, scroll_into_view="#nothing"), 400, "selector_not_found")


# --- full page ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["default", "by_sections"])
def test_full_page_of_a_30000_px_page_has_every_band_once(client: httpx.Client, org: Org, site: Site,
                                                          algorithm: str) -> None:
    shot = image(take(client, org, url=site.url("/bands.html?height=30000"), full_page="true",
                      full_page_algorithm=algorithm, full_page_scroll="false", viewport_width=400,
                      viewport_height=1000))
    assert (shot.width, shot.height) == (400, 30000)
    for band in range(30):  # across Chromium's 16,384 px capture limit, no band repeats or shifts
        assert near(rgb_at(shot, 200, band * 1000 + 500), band_colour(band), 2), band


@pytest.mark.parametrize("algorithm", ["default", "by_sections"])
def test_sticky_and_fixed_elements_appear_once(client: httpx.Client, org: Org, site: Site, algorithm: str) -> None:
    shot = image(take(client, org, url=site.url("/sticky.html"), full_page="true", full_page_algorithm=algorithm,
                      viewport_width=400, viewport_height=800, full_page_scroll_delay="50"))
    assert (shot.width, shot.height) == (400, 3060)
    assert rgb_at(shot, 200, 30) == MAGENTA
    for y in range(100, 3060, 97):
        assert rgb_at(shot, 200, y) != MAGENTA, y  # the sticky header is not repeated
    cyan_rows = [y for y in range(0, 3060, 10) if rgb_at(shot, 390, y) == CYAN]
    assert 0 < len(cyan_rows) <= 5  # the fixed badge shows once (50 px)


def test_the_default_scroll_waits_for_what_each_step_brings_in(client: httpx.Client, org: Org, site: Site) -> None:
    """Without full_page_scroll_delay a step waits only as long as the page needs: native lazy images, images
    an observer gives their source and content an observer fetches, each 150 ms late, all in the capture."""
    shot = image(take(client, org, url=site.url("/lazy-loaders.html"), full_page="true", viewport_width=1000,
                      viewport_height=1000))
    assert shot.height == 6000
    assert [rgb_at(shot, left + 100, top + 100) for top in (1500, 3000, 4500, 5700) for left in (0, 300, 600)] \
        == [GREEN] * 12
    unscrolled = image(take(client, org, url=site.url("/lazy-loaders.html"), full_page="true", viewport_width=1000,
                            viewport_height=1000, full_page_scroll="false"))
    assert rgb_at(unscrolled, 400, 3100) == GREY  # what the scroll brings in is not there without it


def test_full_page_scrolls_to_load_lazy_content(client: httpx.Client, org: Org, site: Site) -> None:
    def blocks(**params: object) -> list[tuple[int, ...]]:
        shot = image(take(client, org, url=site.url("/lazy.html"), full_page="true", viewport_width=400,
                          viewport_height=1000, **params))
        assert shot.height == 9000
        return [rgb_at(shot, 150, top + 100) for top in (1500, 3000, 4500, 6000, 7500)]

    assert blocks(full_page_scroll_delay="500") == [GREEN] * 5
    assert blocks(full_page_scroll="false") == [GREY] * 5
    # Steps of 3000 px only stop where blocks at 3000 and 6000 come into view.
    assert blocks(full_page_scroll_by="3000", full_page_scroll_delay="500") == [GREY, GREEN, GREY, GREEN, GREY]
    # A block must stay in view 300 ms to load: 50 ms steps pass them by.
    assert blocks(full_page_scroll_delay="50") == [GREY] * 5


def test_endless_page_stops_at_the_max_height(client: httpx.Client, org: Org, site: Site) -> None:
    shot = image(take(client, org, url=site.url("/infinite.html"), full_page="true", full_page_max_height="5000",
                      full_page_scroll_delay="20", viewport_width=300, viewport_height=600))
    assert (shot.width, shot.height) == (300, 5000)
    unbounded = image(take(client, org, url=site.url("/infinite.html"), full_page="true",
                           full_page_scroll_delay="20", viewport_width=300, viewport_height=600, timeout="8"))
    assert unbounded.width == 300 and unbounded.height > 5000  # stopped by the time share, a clear image


def test_full_page_respects_format_limits(client: httpx.Client, org: Org, site: Site) -> None:
    message = error(take(client, org, url=site.url("/bands.html?height=20000"), full_page="true",
                         full_page_scroll="false", format="webp"), 400, "resulting_image_too_large")
    assert "16383" in message


# --- failure rules ------------------------------------------------------------------------------------


def used(client: httpx.Client, org: Org) -> int:
    return int(client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


def test_fail_if_content_rules_are_case_insensitive_and_not_charged(client: httpx.Client, org: Org,
                                                                    site: Site) -> None:
    url = site.url("/failing.html")
    error(take(client, org, url=url, fail_if_content_contains="PREMIUM member"), 500,
          "content_contains_specified_string")
    error(client.get("/v1/screenshot/take", params=[("access_key", org.access_key), ("url", url),
                                                     ("fail_if_content_missing", "absent"),
                                                     ("fail_if_content_missing", "nowhere")]),
          500, "content_missing_specified_string")
    assert used(client, org) == 0
    assert take(client, org, url=url, fail_if_content_missing="welcome", fail_if_content_contains="basic"
                ).status_code == 200
    assert used(client, org) == 1


def test_fail_if_request_failed(client: httpx.Client, org: Org, site: Site) -> None:
    message = error(take(client, org, url=site.url("/failing.html"), fail_if_request_failed="*/missing-image.png"),
                    500, "matched_failed_request")
    assert "HTTP 404" in message
    assert take(client, org, url=site.url("/failing.html"), fail_if_request_failed="*/other.png").status_code == 200
    assert used(client, org) == 1


def test_fail_if_gpu_rendering_fails_says_there_is_no_gpu(client: httpx.Client, org: Org, site: Site) -> None:
    message = error(take(client, org, url=site.url("/colours.html"), fail_if_gpu_rendering_fails="true"), 400,
                    "request_not_valid")
    assert "software" in message
    assert used(client, org) == 0


def test_post_json_arrays_and_objects_work_like_the_query(client: httpx.Client, org: Org, site: Site) -> None:
    shot = image(post(client, org, url=site.url("/prepare.html"), viewport_width=300, viewport_height=500,
                      hide_selectors=[".ad", "#btn"], styles="#hov { background: #ff00ff !important; }",
                      click="#btn", error_on_click_selector_not_found=False, wait_until=["load", "networkidle0"]))
    assert rgb_at(shot, 50, 50) == BLUE and rgb_at(shot, 50, 150) == MAGENTA  # the hidden #btn: not clicked
    response = post(client, org, url=site.url("/request.html"), format="html", headers=["X-From-Post: 1"],
                    cookies=["posted=yes"])
    assert response.status_code == 200, response.text
    seen = site.requests_to("/request.html")[-1]
    assert seen["x-from-post"] == "1" and seen["cookie"] == "posted=yes"
    full = image(post(client, org, url=site.url("/sticky.html"), full_page=True, full_page_scroll=False,
                      viewport_width=400, viewport_height=800))
    assert full.height == 3060
