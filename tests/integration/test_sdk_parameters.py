"""Parameters the hosted API's SDKs send beyond the spec, each checked on its output:
include_shadow_dom, attachment_name, request_gpu_rendering, full_page_slices, and the error reference
documentation_url points at. The SDKs themselves are driven in test_sdks.py."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.conftest import Org
from tests.support.images import decode
from tests.support.plain import differing_pixels
from tests.support.site import Site

pytestmark = pytest.mark.browser


def take(client: httpx.Client, org: Org, **params: object) -> httpx.Response:
    return client.get("/v1/screenshot/take", params={"access_key": org.access_key, **params})


def test_include_shadow_dom_adds_open_closed_and_nested_roots_to_html(client: httpx.Client, org: Org,
                                                                      site: Site) -> None:
    url = site.url("/shadow.html")
    plain = take(client, org, url=url, format="html")
    assert plain.status_code == 200 and "Light text before" in plain.text
    assert "Open shadow heading" not in plain.text and "Closed shadow text" not in plain.text
    shadowed = take(client, org, url=url, format="html", include_shadow_dom="true")
    assert shadowed.status_code == 200, shadowed.text
    html = shadowed.text
    assert html.startswith("<!DOCTYPE html><html")
    # Each root inside its host, as a browser would parse it back.
    assert re.search(r'<open-card><template shadowrootmode="open"><h2>Open shadow heading</h2><slot></slot>', html)
    assert '<closed-card><template shadowrootmode="closed"><p>Closed shadow text</p></template></closed-card>' in html
    assert '<inner-card><template shadowrootmode="open"><em>Nested shadow text</em></template></inner-card>' in html
    assert "<span>Slotted light child</span>" in html


def test_include_shadow_dom_gives_markdown_the_composed_text(client: httpx.Client, org: Org, site: Site) -> None:
    url = site.url("/shadow.html")
    plain = take(client, org, url=url, format="markdown").text
    assert "Slotted light child" in plain and "Open shadow heading" not in plain
    composed = take(client, org, url=url, format="markdown", include_shadow_dom="true").text
    order = ["Light text before", "Open shadow heading", "Slotted light child", "Nested shadow text",
             "Closed shadow text"]
    positions = [composed.find(text) for text in order]
    assert -1 not in positions and positions == sorted(positions), composed
    assert "## Open shadow heading" in composed
    assert "Hidden shadow text" not in composed


def test_include_shadow_dom_applies_to_metadata_content(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/shadow.html"), metadata_content="true",
                    metadata_content_format="markdown", include_shadow_dom="true", response_type="json")
    assert response.status_code == 200, response.text
    content = httpx.get(response.json()["content"]["url"])
    assert content.status_code == 200 and "Closed shadow text" in content.text


def test_attachment_name_offers_the_bytes_as_a_file(client: httpx.Client, org: Org, site: Site) -> None:
    url = site.url("/probe.html")
    response = take(client, org, url=url, attachment_name="report 2026.png")
    assert response.status_code == 200, response.text
    assert response.headers["content-disposition"] == 'attachment; filename="report 2026.png"'
    assert response.content.startswith(b"\x89PNG")
    accented = take(client, org, url=url, attachment_name="relevé.png")
    assert accented.headers["content-disposition"] == (
        "attachment; filename=\"relev_.png\"; filename*=UTF-8''relev%C3%A9.png")
    assert "content-disposition" not in take(client, org, url=url).headers
    assert "content-disposition" not in take(client, org, url=url, attachment_name="a.png",
                                             response_type="json").headers
    for bad in ("../etc/passwd", 'a"b.png', "a\nb.png", " "):
        refused = take(client, org, url=url, attachment_name=bad)
        assert refused.status_code == 400 and refused.json()["error_code"] == "request_not_valid"
        assert refused.json()["error_details"][0]["field"] == "attachment_name"


def test_request_gpu_rendering_falls_back_to_software_and_says_so(client: httpx.Client, org: Org,
                                                                   site: Site) -> None:
    url = site.url("/probe.html")
    response = take(client, org, url=url, request_gpu_rendering="true")
    assert response.status_code == 200 and response.content.startswith(b"\x89PNG")
    assert response.headers["x-service-gpu-rendering"] == "software"
    assert "x-service-gpu-rendering" not in take(client, org, url=url).headers
    refused = take(client, org, url=url, request_gpu_rendering="true", fail_if_gpu_rendering_fails="true")
    assert refused.status_code == 400 and refused.json()["error_code"] == "request_not_valid"
    assert "fail_if_gpu_rendering_fails" in refused.json()["error_message"]


def test_full_page_slices_cut_the_final_image_into_stored_bands(client: httpx.Client, org: Org, site: Site) -> None:
    url = site.url("/tall.html")  # 3000 CSS px of gradient
    response = take(client, org, url=url, full_page="true", viewport_width=300, viewport_height=400,
                    full_page_slices="true", full_page_slice_height=1000, full_page_slice_overlap_height=100,
                    response_type="json")
    assert response.status_code == 200, response.text
    body = response.json()
    whole = decode(httpx.get(body["screenshot_url"]).content)
    assert (whole.width, whole.height) == (300, 3000)
    slices = body["slices"]
    # Bands of 1000 rows starting every 900; the last ends at the bottom.
    assert [(s["index"], s["offset_y"], s["width"], s["height"]) for s in slices] == [
        (0, 0, 300, 1000), (1, 900, 300, 1000), (2, 1800, 300, 1000), (3, 2700, 300, 300)]
    for piece in slices:
        image = decode(httpx.get(piece["url"]).content)
        assert differing_pixels(image, whole.crop(0, piece["offset_y"], piece["width"], piece["height"])) == 0
    # The bytes as usual, the manifest's link in a header; its slices are the same bands.
    binary = take(client, org, url=url, full_page="true", viewport_width=300, viewport_height=400, format="jpeg",
                  full_page_slices="true", full_page_slice_height=2000)
    assert binary.status_code == 200 and binary.content.startswith(b"\xff\xd8")
    manifest_url = binary.headers["x-service-full-page-slices-url"]
    manifest = httpx.get(manifest_url)
    assert manifest.status_code == 200, manifest.text
    bands = manifest.json()["slices"]
    assert [(s["offset_y"], s["height"]) for s in bands] == [(0, 2000), (2000, 1000)]
    assert all(httpx.get(s["url"]).content.startswith(b"\xff\xd8") for s in bands)
    tampered = httpx.get(manifest_url.replace("signature=", "signature=0"))
    assert tampered.status_code == 400 and tampered.json()["error_code"] == "signature_is_not_valid"
    assert "x-service-full-page-slices-url" not in take(client, org, url=url, full_page="true").headers
    # Slices one pixel high of a 3000 px page: more than a capture may store, refused by name.
    refused = take(client, org, url=url, full_page="true", viewport_width=300, full_page_slices="true",
                   full_page_slice_height=1)
    assert refused.status_code == 400 and refused.json()["error_code"] == "request_not_valid"
    assert refused.json()["error_details"][0]["field"] == "full_page_slice_height"


@pytest.mark.parametrize("params, field", [
    ({"full_page_slices": "true"}, "full_page_slices"),  # without full_page
    ({"full_page": "true", "full_page_slices": "true", "format": "pdf"}, "full_page_slices"),
    ({"full_page": "true", "full_page_slices": "true", "full_page_slice_height": "0"}, "full_page_slice_height"),
    ({"full_page": "true", "full_page_slices": "true", "full_page_slice_height": "16001"}, "full_page_slice_height"),
    ({"full_page": "true", "full_page_slices": "true", "full_page_slice_height": "500",
      "full_page_slice_overlap_height": "500"}, "full_page_slice_overlap_height"),
])
def test_full_page_slices_refuses_what_cannot_be_cut(client: httpx.Client, org: Org, site: Site,
                                                      params: dict[str, str], field: str) -> None:
    refused = take(client, org, url=site.url("/tall.html"), **params)
    assert refused.status_code == 400 and refused.json()["error_code"] == "request_not_valid"
    assert field in [detail["field"] for detail in refused.json()["error_details"]], refused.text


def test_hosted_header_names_are_off_by_default(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/probe.html"), metadata_image_size="true")
    assert response.status_code == 200 and response.headers["x-service-image-width"]
    assert not [name for name in response.headers if name.lower().startswith("x-screenshotone-")]
