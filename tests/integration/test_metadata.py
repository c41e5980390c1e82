"""metadata_*: each fills its JSON field and its header, as the spec's table says."""

from __future__ import annotations

import json
from urllib.parse import unquote

import httpx
import pytest

from tests.conftest import Org
from tests.support.images import decode
from tests.support.site import Site

pytestmark = pytest.mark.browser
TITLE = "Café ☕ — Ünïcode, 100%"


def take(client: httpx.Client, org: Org, url: str, **params: str) -> httpx.Response:
    response = client.get("/v1/screenshot/take", params={
        "access_key": org.access_key, "url": url, "viewport_width": "400", "viewport_height": "300", **params})
    assert response.status_code == 200, response.text
    return response


def test_every_kind_in_json_and_headers(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, site.url("/metadata.html"), response_type="json", format="jpeg",
                    image_width="200", metadata_image_size="true", metadata_page_title="true",
                    metadata_open_graph="true", metadata_icon="true", metadata_fonts="true",
                    metadata_http_response_status_code="true", metadata_http_response_headers="true")
    body, headers = response.json(), response.headers
    meta = body["metadata"]
    assert meta["image_size"] == {"width": 200, "height": 150}
    assert (headers["x-service-image-width"], headers["x-service-image-height"]) == ("200", "150")
    assert meta["page_title"] == TITLE
    assert headers["x-service-page-title"].isascii() and unquote(headers["x-service-page-title"]) == TITLE
    assert meta["open_graph"] == {"og:title": "Ünïcode title", "og:type": "article",
                                  "og:image": ["https://publisher.test/a.png", "/b.png"]}
    assert headers["x-service-open-graph"].isascii()
    assert json.loads(headers["x-service-open-graph"]) == meta["open_graph"]
    assert meta["icon"] == {"url": site.url("/apple-touch-icon.png"), "type": "image/png"}
    assert json.loads(headers["x-service-icon"]) == meta["icon"]
    assert {"Liberation Serif", "Liberation Mono", "Noto Color Emoji"} <= set(meta["fonts"])
    assert "Liberation Sans" not in meta["fonts"]  # declared nowhere, drawn nowhere
    assert "x-service-fonts" not in headers  # the spec gives fonts no header
    assert body["http_response"]["status_code"] == 200 and headers["x-service-http-status-code"] == "200"
    sent = body["http_response"]["headers"]
    assert sent["x-custom"] == "yes" and sent["cache-control"] == "no-store"
    assert json.loads(headers["x-service-http-headers"]) == sent
    assert decode(httpx.get(body["screenshot_url"]).content).width == 200


def test_only_what_is_asked_and_headers_with_by_format(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, site.url("/metadata.html"), metadata_page_title="true")
    assert response.content.startswith(b"\x89PNG")
    assert unquote(response.headers["x-service-page-title"]) == TITLE
    assert not any(name in response.headers for name in ("x-service-open-graph", "x-service-icon",
                                                          "x-service-image-width", "x-service-http-status-code"))
    plain = take(client, org, site.url("/metadata.html"), response_type="json").json()
    assert not {"metadata", "content", "http_response"} & plain.keys()


def test_icon_falls_back_to_favicon_ico_and_status_of_an_error_page(client: httpx.Client, org: Org,
                                                                    site: Site) -> None:
    response = take(client, org, site.url("/status?code=404"), response_type="json", metadata_icon="true",
                    metadata_http_response_status_code="true", ignore_host_errors="true")
    body = response.json()
    assert body["metadata"]["icon"] == {"url": site.url("/favicon.ico"), "type": "image/x-icon"}
    assert body["http_response"] == {"status_code": 404}
    assert response.headers["x-service-http-status-code"] == "404"


@pytest.mark.parametrize(("fmt", "expected", "content_type"), [
    ("html", "<h1>Heading</h1>", "text/html"), ("markdown", "# Heading", "text/markdown")])
def test_content_is_uploaded_and_its_url_expires(client: httpx.Client, org: Org, site: Site, fmt: str,
                                                 expected: str, content_type: str) -> None:
    response = take(client, org, site.url("/metadata.html"), response_type="json", metadata_content="true",
                    metadata_content_format=fmt)
    content = response.json()["content"]
    assert response.headers["x-service-content-url"] == content["url"]
    assert response.headers["x-service-content-expires"] == content["expires"]
    assert content["expires"].endswith("Z")
    fetched = client.get(content["url"])
    assert fetched.status_code == 200 and expected in fetched.text
    assert fetched.headers["content-type"].startswith(content_type)
    altered = client.get(content["url"].replace("expires=", "expires=1"))
    assert altered.status_code == 400 and altered.json()["error_code"] == "signature_is_not_valid"
