"""GET and POST /take through the running API and workers, checking the outputs themselves."""

from __future__ import annotations

import io
import json
import re

import httpx
import pytest
from pypdf import PdfReader

from tests.conftest import Org
from tests.support.images import decode, rasterise_first_page, rgb_at
from tests.support.site import Site

pytestmark = pytest.mark.browser

POINTS_PER_INCH = 72


def take(client: httpx.Client, org: Org, **params: object) -> httpx.Response:
    return client.get("/v1/screenshot/take", params={"access_key": org.access_key, **params})


def test_png_of_a_url_has_the_viewport_size_and_its_colours(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/colours.html"))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    image = decode(response.content)
    assert (image.width, image.height) == (1280, 1024)
    assert rgb_at(image, 640, 100) == (255, 0, 0)
    assert rgb_at(image, 640, 900) == (0, 0, 255)


def test_success_headers(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/colours.html"), external_identifier="order-42")
    headers = response.headers
    assert float(headers["x-service-rendering-seconds"]) > 0
    assert int(headers["x-service-size-bytes"]) == len(response.content)
    assert re.fullmatch(r"[0-9a-f]{20,}", headers["x-service-reference"])
    assert re.fullmatch(r"[0-9a-f]{32}", headers["x-service-trace-id"])
    assert headers["x-service-external-identifier"] == "order-42"


def test_post_with_json_body_and_key_in_header(client: httpx.Client, org: Org, site: Site) -> None:
    response = client.post("/v1/screenshot/take", headers={"X-Access-Key": org.access_key},
                           json={"url": site.url("/colours.html"), "viewport_width": 400,
                                 "viewport_height": 300, "format": "jpeg"})
    assert response.status_code == 200, response.text
    image = decode(response.content)
    assert image.get("vips-loader") == "jpegload_buffer"
    assert (image.width, image.height) == (400, 300)


def test_post_mixes_query_and_body_body_wins(client: httpx.Client, org: Org, site: Site) -> None:
    response = client.post("/v1/screenshot/take",
                           params={"access_key": org.access_key, "format": "png", "viewport_width": "300"},
                           json={"url": site.url("/colours.html"), "format": "webp", "viewport_height": 200})
    assert response.headers["content-type"] == "image/webp"
    image = decode(response.content)
    assert (image.width, image.height) == (300, 200)


@pytest.mark.parametrize(("fmt", "content_type", "loader"), [
    ("png", "image/png", "pngload_buffer"),
    ("jpeg", "image/jpeg", "jpegload_buffer"),
    ("jpg", "image/jpeg", "jpegload_buffer"),
    ("webp", "image/webp", "webpload_buffer"),
    ("avif", "image/avif", "heifload_buffer"),
    ("heif", "image/heif", "heifload_buffer"),
    ("tiff", "image/tiff", "tiffload_buffer"),
    ("jp2", "image/jp2", "jp2kload_buffer"),
    ("gif", "image/gif", "gifload_buffer"),
])
def test_every_image_format_decodes_with_the_right_pixels(
    client: httpx.Client, org: Org, site: Site, fmt: str, content_type: str, loader: str,
) -> None:
    response = take(client, org, url=site.url("/colours.html"), format=fmt, viewport_width=320,
                    viewport_height=240)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == content_type
    image = decode(response.content)
    assert image.get("vips-loader") == loader
    assert (image.width, image.height) == (320, 240)
    top, bottom = rgb_at(image, 160, 30), rgb_at(image, 160, 210)
    assert top[0] > 200 and top[2] < 60, top
    assert bottom[2] > 200 and bottom[0] < 60, bottom


@pytest.mark.parametrize(("params", "size"), [
    ({"image_width": "640"}, (640, 512)),
    ({"image_height": "256"}, (320, 256)),
    ({"image_width": "640", "image_height": "100"}, (125, 100)),
    ({"image_width": "500", "format": "webp"}, (500, 400)),
], ids=["width", "height", "fit-both", "webp"])
def test_image_resize_keeps_aspect_ratio(client: httpx.Client, org: Org, site: Site, params: dict,
                                         size: tuple[int, int]) -> None:
    response = take(client, org, url=site.url("/colours.html"), **params)
    image = decode(response.content)
    assert (image.width, image.height) == size
    assert rgb_at(image, size[0] // 2, 2)[0] > 200


def test_image_quality_changes_jpeg_size(client: httpx.Client, org: Org, site: Site) -> None:
    low = take(client, org, url=site.url("/article.html"), format="jpeg", image_quality="10")
    high = take(client, org, url=site.url("/article.html"), format="jpeg", image_quality="95")
    assert len(low.content) < len(high.content)


def test_omit_background_is_transparent(client: httpx.Client, org: Org, site: Site) -> None:
    html = "<html><body style='margin:0'><div style='width:50px;height:50px;background:#0f0'></div></body></html>"
    for fmt in ("png", "webp"):
        response = take(client, org, html=html, omit_background="true", format=fmt, viewport_width=200,
                        viewport_height=100)
        image = decode(response.content)
        assert image.hasalpha(), fmt
        assert image.getpoint(150, 50)[3] == 0, fmt  # the page background: transparent
        assert image.getpoint(10, 10)[3] == 255, fmt  # the green box: opaque
    opaque = decode(take(client, org, html=html, viewport_width=200, viewport_height=100).content)
    assert rgb_at(opaque, 150, 50) == (255, 255, 255)


@pytest.mark.parametrize(("device", "size"), [
    ("iphone_15", (393 * 3, 852 * 3)),
    ("pixel_5", (1081, 2340)),
    ("ipad_landscape", (1080 * 2, 810 * 2)),
    ("desktop_hd", (1280, 720)),
], ids=["iphone_15", "pixel_5-fractional-scale", "ipad_landscape", "desktop_hd"])
def test_device_presets_give_their_pixel_size(client: httpx.Client, org: Org, site: Site, device: str,
                                              size: tuple[int, int]) -> None:
    response = take(client, org, url=site.url("/colours.html"), viewport_device=device, format="jpeg")
    assert response.status_code == 200, response.text
    image = decode(response.content)
    assert (image.width, image.height) == size


def test_viewport_parameters(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/probe.html"), format="html", viewport_width="500",
                    viewport_height="700", device_scale_factor="2", viewport_mobile="true",
                    viewport_has_touch="true")
    probe = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', response.text).group(1))  # type: ignore[union-attr]
    assert (probe["width"], probe["height"], probe["dpr"], probe["touch"]) == (500, 700, 2, True)
    image = decode(take(client, org, url=site.url("/colours.html"), viewport_width="500",
                        viewport_height="700", device_scale_factor="2").content)
    assert (image.width, image.height) == (1000, 1400)


def test_html_source_and_html_output_is_the_rendered_dom(client: httpx.Client, org: Org) -> None:
    html = "<html><body><p id='x'>static</p><script>document.getElementById('x').textContent='dynamic'" \
           "</script></body></html>"
    response = take(client, org, html=html, format="html")
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert "dynamic" in response.text and ">static<" not in response.text


def test_markdown_output(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/article.html"), format="markdown")
    assert response.headers["content-type"] == "text/markdown; charset=utf-8"
    text = response.text
    assert "# Quarterly report" in text
    assert "**12%**" in text
    assert "* First point" in text or "- First point" in text
    assert "[more](https://example.com/more)" in text
    assert "Added by script" in text
    assert "insertAdjacentHTML" not in text  # scripts are not content


def test_markdown_source_is_rendered_as_styled_html(client: httpx.Client, org: Org) -> None:
    response = take(client, org, markdown="# Title\n\nSome *emphasis* and `code`.\n\n| a | b |\n|---|---|\n| 1 | 2 |",
                    format="html")
    assert "<h1>Title</h1>" in response.text
    assert "<em>emphasis</em>" in response.text
    assert "<table>" in response.text
    image = decode(take(client, org, markdown="# Title", viewport_width=600, viewport_height=400).content)
    assert (image.width, image.height) == (600, 400)
    assert rgb_at(image, 590, 390) == (255, 255, 255)  # page background
    assert image.crop(0, 0, 600, 120).min() < 100  # the dark heading text near the top


def pdf_pages(data: bytes) -> list[tuple[float, float]]:
    reader = PdfReader(io.BytesIO(data))
    return [(float(p.mediabox.width), float(p.mediabox.height)) for p in reader.pages]


@pytest.mark.parametrize(("params", "inches"), [
    ({}, (8.27, 11.7)),
    ({"pdf_paper_format": "letter"}, (8.5, 11)),
    ({"pdf_paper_format": "a3"}, (11.7, 16.54)),
    ({"pdf_paper_format": "legal", "pdf_landscape": "true"}, (14, 8.5)),
    ({"pdf_paper_format": "tabloid"}, (11, 17)),
    ({"pdf_paper_format": "a6"}, (4.13, 5.83)),
], ids=["a4-default", "letter", "a3", "legal-landscape", "tabloid", "a6"])
def test_pdf_paper_size_and_orientation(client: httpx.Client, org: Org, site: Site, params: dict,
                                        inches: tuple[float, float]) -> None:
    response = take(client, org, url=site.url("/article.html"), format="pdf", **params)
    assert response.headers["content-type"] == "application/pdf"
    width, height = pdf_pages(response.content)[0]
    assert width == pytest.approx(inches[0] * POINTS_PER_INCH, abs=2)
    assert height == pytest.approx(inches[1] * POINTS_PER_INCH, abs=2)


def test_pdf_fit_one_page_and_margins(client: httpx.Client, org: Org, site: Site) -> None:
    tall = take(client, org, url=site.url("/tall.html"), format="pdf")
    assert len(pdf_pages(tall.content)) > 1
    fitted = take(client, org, url=site.url("/tall.html"), format="pdf", pdf_fit_one_page="true")
    assert len(pdf_pages(fitted.content)) == 1
    text = PdfReader(io.BytesIO(take(client, org, url=site.url("/article.html"), format="pdf",
                                     pdf_margin="20mm").content)).pages[0].extract_text()
    assert "Quarterly report" in text


def test_pdf_print_background(client: httpx.Client, org: Org, site: Site) -> None:
    plain = rasterise_first_page(take(client, org, url=site.url("/colours.html"), format="pdf").content)
    printed = rasterise_first_page(take(client, org, url=site.url("/colours.html"), format="pdf",
                                        pdf_print_background="true").content)
    assert rgb_at(plain, plain.width // 2, 40) == (255, 255, 255)
    assert rgb_at(printed, printed.width // 2, 40) == (255, 0, 0)


def test_response_type_json_gives_a_working_url(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/colours.html"), response_type="json", format="webp")
    assert response.status_code == 200
    body = response.json()
    assert body["is_successful"] is True and body["format"] == "webp"
    assert body["size_bytes"] > 0
    assert response.headers["x-service-reference"] in body["screenshot_url"]
    fetched = httpx.get(body["screenshot_url"])
    assert fetched.status_code == 200
    assert fetched.headers["content-type"] == "image/webp"
    assert len(fetched.content) == body["size_bytes"]
    assert decode(fetched.content).width == 1280
    altered = body["screenshot_url"].replace("signature=", "signature=0")
    refused = httpx.get(altered)
    assert refused.status_code == 400 and refused.json()["error_code"] == "signature_is_not_valid"


def test_response_type_empty(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/colours.html"), response_type="empty")
    assert response.status_code == 200
    assert response.content == b""
    assert int(response.headers["x-service-size-bytes"]) > 0
    # Typed as the output it stands for: the OpenAPI documents no untyped 200.
    assert response.headers["content-type"] == "image/png"
    webp = take(client, org, url=site.url("/colours.html"), response_type="empty", format="webp")
    assert (webp.content, webp.headers["content-type"]) == (b"", "image/webp")


def test_delay_waits_before_the_capture(client: httpx.Client, org: Org, site: Site) -> None:
    early = decode(take(client, org, url=site.url("/late-green.html"), viewport_width=100, viewport_height=100).content)
    late = decode(take(client, org, url=site.url("/late-green.html"), viewport_width=100, viewport_height=100,
                       delay="2").content)
    assert rgb_at(early, 50, 50) == (255, 0, 0)
    assert rgb_at(late, 50, 50) == (0, 255, 0)


def test_user_agent_and_landscape_reach_the_page(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/probe.html"), format="html", user_agent="Screenshotter/1.0 (test)")
    probe = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', response.text).group(1))  # type: ignore[union-attr]
    assert probe["ua"] == "Screenshotter/1.0 (test)"
    response = take(client, org, url=site.url("/probe.html"), format="html", viewport_device="pixel_8",
                    viewport_landscape="true")
    probe = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', response.text).group(1))  # type: ignore[union-attr]
    assert (probe["width"], probe["height"], probe["landscape"]) == (915, 412, True)


def test_pdf_margins_and_per_side_overrides(client: httpx.Client, org: Org, site: Site) -> None:
    """At 72 dpi one inch is 72 pixels: the margin stays white, the page's red starts after it."""
    uniform = rasterise_first_page(take(client, org, url=site.url("/colours.html"), format="pdf",
                                        pdf_print_background="true", pdf_margin="1in").content)
    assert rgb_at(uniform, 20, 20) == (255, 255, 255)
    assert rgb_at(uniform, 100, 100) == (255, 0, 0)
    top_zero = rasterise_first_page(take(client, org, url=site.url("/colours.html"), format="pdf",
                                         pdf_print_background="true", pdf_margin="1in",
                                         pdf_margin_top="0").content)
    assert rgb_at(top_zero, 100, 3) == (255, 0, 0)  # no top margin
    assert rgb_at(top_zero, 20, 100) == (255, 255, 255)  # the left margin is still an inch
