"""watermark, watermark_image_url, watermark_opacity and blur, checked in the output's pixels."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import Org
from tests.support.images import decode, rgb_at
from tests.support.pages.controls import BLUE, RED
from tests.support.site import Site
from tests.unit.test_effects import detail

pytestmark = pytest.mark.browser


def take(client: httpx.Client, org: Org, url: str, **params: str) -> httpx.Response:
    return client.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": url, **params})


def shot(client: httpx.Client, org: Org, url: str, **params: str):  # type: ignore[no-untyped-def]
    response = take(client, org, url, **params)
    assert response.status_code == 200, response.text
    return decode(response.content)


@pytest.mark.parametrize("extra", [{}, {"image_width": "300"}, {"full_page": "true"},
                                   {"device_scale_factor": "2"}, {"format": "jpeg"}])
def test_blur_hides_the_elements_text_and_only_theirs(client: httpx.Client, org: Org, site: Site,
                                                      extra: dict[str, str]) -> None:
    params = {"viewport_width": "600", "viewport_height": "300", **extra}
    plain = shot(client, org, site.url("/blur.html"), **params)
    blurred = shot(client, org, site.url("/blur.html"), blur="#secret", **params)
    factor = plain.width / 600
    secret = (0, 0, round(600 * factor), round(100 * factor))
    public = (0, round(150 * factor), round(600 * factor), round(100 * factor))
    assert detail(blurred.crop(*secret)) < detail(plain.crop(*secret)) * 0.05
    assert detail(blurred.crop(*public)) == pytest.approx(detail(plain.crop(*public)), rel=0.02)


def test_blur_reaches_into_shadow_roots_with_the_prefix(client: httpx.Client, org: Org, site: Site) -> None:
    plain = shot(client, org, site.url("/blur.html"), viewport_width="600", viewport_height="300")
    blurred = shot(client, org, site.url("/blur.html"), viewport_width="600", viewport_height="300",
                   blur="shadow/.inner-secret")
    area = (0, 250, 600, 50)
    assert detail(blurred.crop(*area)) < detail(plain.crop(*area)) * 0.05


def test_text_watermark_bottom_right(client: httpx.Client, org: Org, site: Site) -> None:
    marked = shot(client, org, site.url("/colours.html"), viewport_width="400", viewport_height="300",
                  watermark="Draft", watermark_opacity="1")
    assert rgb_at(marked, 10, 10) == RED and rgb_at(marked, 10, 290) == BLUE
    corner = marked.crop(250, 240, 150, 60)
    assert corner[0].max() == 255 and corner[1].max() == 255  # white text over the blue half


def test_image_watermark_with_text_and_opacity(client: httpx.Client, org: Org, site: Site) -> None:
    url = site.url("/watermark.png")  # 200x200 green
    strong = shot(client, org, site.url("/colours.html"), viewport_width="400", viewport_height="400",
                  watermark_image_url=url, watermark_opacity="1", watermark="Text")
    faint = shot(client, org, site.url("/colours.html"), viewport_width="400", viewport_height="400",
                 watermark_image_url=url, watermark_opacity="0.3")
    green = (strong[1] > 200) & (strong[0] < 50)
    left, top, width, height = green.find_trim(threshold=0, background=[0])
    assert (width, height) == (100, 100)  # a quarter of the output's width
    assert left + width > 370 and top + height < 400 - 8 - 12  # bottom right, above the text line
    r, g, b = rgb_at(faint, left + 50, 400 - 8 - 50)
    assert 60 < g < 110 and b > 150  # 30% green over the blue half


@pytest.mark.parametrize(("params", "field"), [
    ({"watermark_image_url": "/relative.png"}, "watermark_image_url"),
    ({"watermark_image_url": "ftp://example.com/x.png"}, "watermark_image_url"),
    ({"watermark": "x", "format": "pdf"}, "watermark"),
    ({"blur": "#a", "format": "html"}, "blur"),
    ({"watermark_opacity": "1.5"}, "watermark_opacity"),
])
def test_bad_effect_parameters(client: httpx.Client, org: Org, site: Site, params: dict[str, str],
                               field: str) -> None:
    response = take(client, org, site.url("/colours.html"), **params)
    assert response.status_code == 400
    assert response.json()["error_code"] == "request_not_valid"
    assert field in {d["field"] for d in response.json()["error_details"]}


def test_watermark_that_is_not_an_image_or_missing(client: httpx.Client, org: Org, site: Site) -> None:
    for path, expected in (("/article.html", "not an image"), ("/missing-image.png", "HTTP 404")):
        response = take(client, org, site.url("/colours.html"), watermark_image_url=site.url(path))
        assert response.status_code == 400 and expected in response.json()["error_message"], response.text


@pytest.mark.parametrize("selector", ["", "!!!"])
def test_blur_with_an_invalid_selector_is_refused_by_name_and_not_charged(
        client: httpx.Client, make_org, site: Site, selector: str) -> None:  # type: ignore[no-untyped-def]
    fresh = make_org()
    response = take(client, fresh, site.url("/blur.html"), blur=selector)
    assert response.status_code == 400, response.text
    assert response.json()["error_code"] == "request_not_valid"
    assert response.json()["error_details"][0]["field"] == "blur.0"
    assert client.get("/v1/screenshot/usage", params={"access_key": fresh.access_key}).json()["used"] == 0
