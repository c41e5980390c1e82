"""POST /bulk: lazy entries are /take URLs (signed, charged when fetched); eager entries carry each
response, base64; every entry is validated on its own."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import uuid
import zipfile

import httpx
import pytest

from tests.conftest import Org
from tests.support.archive_tools import archive_problems
from tests.support.images import decode, near, rgb_at
from tests.support.site import Site

pytestmark = pytest.mark.browser


def bulk(client: httpx.Client, org: Org, **body: object) -> httpx.Response:
    return client.post("/v1/screenshot/bulk", json={"access_key": org.access_key, **body})


def used(client: httpx.Client, org: Org) -> int:
    return int(client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


def test_lazy_entries_are_signed_take_urls_charged_when_fetched(client: httpx.Client, make_org,  # type: ignore[no-untyped-def]
                                                                site: Site) -> None:
    strict = make_org(require_signature=True)
    response = bulk(client, strict, requests=[{"url": site.url("/colours.html")}])
    assert response.status_code == 400 and response.json()["error_code"] == "signature_is_required"
    org = make_org()
    body = json.dumps({"access_key": org.access_key, "options": {"viewport_width": 200, "viewport_height": 100},
                       "requests": [{"url": site.url("/colours.html")},
                                    {"url": site.url("/colours.html"), "format": "jpeg", "viewport_width": 120},
                                    # What the schema cannot say (a delay over 30 s needs async) is the entry's own
                                    # answer; what it can (viewport_width 0) refuses the request (test_json_bodies).
                                    {"url": site.url("/colours.html"), "delay": 40}]}).encode()
    signature = hmac.new(org.signing_key.encode(), body, hashlib.sha256).hexdigest()
    response = client.post("/v1/screenshot/bulk", params={"signature": signature}, content=body,
                           headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    first, second, bad = response.json()
    assert set(first) == {"url"} and "signature=" in first["url"] and org.access_key in first["url"]
    assert used(client, org) == 0  # nothing fetched, nothing charged
    png = httpx.get(first["url"], timeout=60)
    assert png.status_code == 200 and (decode(png.content).width, decode(png.content).height) == (200, 100)
    jpeg = httpx.get(second["url"], timeout=60)
    assert jpeg.headers["content-type"] == "image/jpeg" and decode(jpeg.content).width == 120
    assert used(client, org) == 2
    assert bad["url"] is None and bad["response"]["status"] == 400
    error = json.loads(base64.b64decode(bad["response"]["body"]))
    assert error["error_code"] == "request_not_valid" and error["error_details"][0]["field"] == "delay"
    tampered = client.post("/v1/screenshot/bulk", params={"signature": signature}, content=body + b" ",
                           headers={"content-type": "application/json"})
    assert tampered.json()["error_code"] == "signature_is_not_valid"


def test_eager_entries_carry_each_response(client: httpx.Client, org: Org, site: Site) -> None:
    response = bulk(client, org, execute=True, options={"viewport_width": 200, "viewport_height": 100},
                    requests=[{"url": site.url("/colours.html")},
                              {"url": site.url("/colours.html"), "response_type": "json", "format": "webp"},
                              {"url": site.url("/status?code=404")},
                              {"url": site.url("/colours.html"), "async": True}])
    assert response.status_code == 200, response.text
    image, as_json, failed, refused = response.json()
    assert image["response"]["is_successful"] is True and image["response"]["status"] == 200
    picture = decode(base64.b64decode(image["response"]["body"]))
    assert (picture.width, picture.height) == (200, 100) and near(rgb_at(picture, 100, 80), (0, 0, 255))
    stored = json.loads(base64.b64decode(as_json["response"]["body"]))
    assert stored["format"] == "webp" and decode(httpx.get(stored["screenshot_url"]).content).width == 200
    assert failed["response"]["is_successful"] is False and failed["response"]["status"] == 500
    assert json.loads(base64.b64decode(failed["response"]["body"]))["returned_status_code"] == 404
    assert refused["response"]["status"] == 400
    assert json.loads(base64.b64decode(refused["response"]["body"]))["error_details"][0]["field"] == "async"
    assert used(client, org) == 2


def test_bulk_entries_carry_their_web_archives(client: httpx.Client, org: Org, site: Site) -> None:
    """archive=true and format=wacz in a bulk run as in /take, optimize included: one page load recorded for both,
    each output with the archive of that load; an output that asks for no archive loads the page on its own and
    has none."""
    page = uuid.uuid4().hex
    url = site.url(f"/colours.html?{page}")
    response = bulk(client, org, execute=True, optimize=True,
                    options={"url": url, "viewport_width": 200, "viewport_height": 100},
                    requests=[{"format": "wacz"}, {"archive": True, "response_type": "json"},
                              {"response_type": "json"}])
    assert response.status_code == 200, response.text
    wacz, as_json, plain = [entry["response"] for entry in response.json()]
    assert site.queries_to("/colours.html").count(page) == 2
    assert "archive" not in json.loads(base64.b64decode(plain["body"]))
    assert wacz["status"] == 200 and archive_problems(base64.b64decode(wacz["body"])) == []
    stored = json.loads(base64.b64decode(as_json["body"]))
    archived = httpx.get(stored["archive"]["url"]).content
    assert archive_problems(archived) == []
    for data in (base64.b64decode(wacz["body"]), archived):  # each holds the page the one load fetched
        index = zipfile.ZipFile(io.BytesIO(data)).read("indexes/index.cdx").decode()
        assert f'"url": "{url}"' in index or f'"url":"{url}"' in index, index
    assert used(client, org) == 3


@pytest.mark.parametrize(("body", "field"), [
    ({"requests": []}, "requests"),
    ({"requests": [{"url": "https://example.com/"}] * 21}, "requests"),
    ({"requests": "nope"}, "requests"),
    ({"requests": [{"url": "https://example.com/"}], "optimize": True}, "optimize"),  # needs execute
    ({"requests": [{"url": "https://example.com/"}], "options": []}, "options"),
    ({"requests": [{"url": "https://example.com/"}], "surprise": 1}, "surprise"),
])
def test_bad_bulk_bodies_name_the_field(client: httpx.Client, org: Org, body: dict[str, object], field: str) -> None:
    response = bulk(client, org, **body)
    assert response.status_code == 400
    assert response.json()["error_code"] == "request_not_valid"
    assert response.json()["error_details"][0]["field"] == field


def test_optimize_loads_each_page_once_for_all_its_outputs(client: httpx.Client, org: Org, site: Site) -> None:
    page = uuid.uuid4().hex
    url = site.url(f"/colours.html?{page}")
    response = bulk(client, org, execute=True, optimize=True,
                    options={"url": url, "viewport_width": 200, "viewport_height": 100},
                    requests=[{}, {"format": "jpeg", "image_width": 100}, {"selector": ".top"},
                              {"response_type": "json", "format": "webp"},
                              {"selector": ".absent", "error_on_selector_not_found": True},
                              {"viewport_width": 300}])
    assert response.status_code == 200, response.text
    full, small, top, as_json, absent, wider = [entry["response"] for entry in response.json()]
    # One load for the five outputs of the 200x100 page, one for the 300-wide one.
    assert site.queries_to("/colours.html").count(page) == 2
    assert (decode(base64.b64decode(full["body"])).width, decode(base64.b64decode(full["body"])).height) == (200, 100)
    jpeg = decode(base64.b64decode(small["body"]))
    assert jpeg.get("vips-loader").startswith("jpeg") and (jpeg.width, jpeg.height) == (100, 50)
    red = decode(base64.b64decode(top["body"]))
    assert (red.width, red.height) == (200, 50) and near(rgb_at(red, 100, 25), (255, 0, 0))
    stored = json.loads(base64.b64decode(as_json["body"]))
    assert decode(httpx.get(stored["screenshot_url"]).content).get("vips-loader").startswith("webp")
    assert absent["status"] == 400
    assert json.loads(base64.b64decode(absent["body"]))["error_code"] == "selector_not_found"
    assert decode(base64.b64decode(wider["body"])).width == 300
    assert used(client, org) == 5  # every output that succeeded, not the failed one


def test_merge_pdf_answers_one_pdf_of_every_request_in_order(client: httpx.Client, make_org, site: Site,  # type: ignore[no-untyped-def]
                                                             tmp_path) -> None:
    import io
    import subprocess

    import pikepdf

    org = make_org()
    pages = [f"<title>Part {n}</title><h1>Part {n}</h1>" + "<p>text</p>" * (60 * n) for n in (1, 2, 3)]
    answer = bulk(client, org, execute=True, merge_pdf=True, options={"format": "pdf"},
                  requests=[{"html": page} for page in pages])
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/pdf"
    path = tmp_path / "merged.pdf"
    path.write_bytes(answer.content)
    assert subprocess.run(["qpdf", "--check", str(path)], capture_output=True).returncode == 0
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
    assert text.index("Part 1") < text.index("Part 2") < text.index("Part 3")
    with pikepdf.open(io.BytesIO(answer.content)) as document:
        assert len(document.pages) == int(answer.headers["x-service-pages"]) >= 4
    assert answer.headers["x-service-documents"] == "3" and used(client, org) == 3
    wrong = bulk(client, org, execute=True, merge_pdf=True, options={"format": "pdf"},
                 requests=[{"html": pages[0]}, {"html": pages[1], "format": "png"}])
    assert wrong.status_code == 400 and wrong.json()["error_details"][0]["field"] == "requests.1.format"
    failing = bulk(client, org, execute=True, merge_pdf=True, options={"format": "pdf"},
                   requests=[{"html": pages[0]}, {"url": site.url("/status?code=500"),
                                                  "error_on_selector_not_found": True, "selector": "#nothing"}])
    # A request that fails fails the whole merge, with its own error (and status), named by its index.
    assert failing.json()["error_details"][0]["field"].startswith("requests.1"), failing.json()
    assert failing.json()["error_message"].startswith("requests[1]: ")
    lazy = bulk(client, org, merge_pdf=True, requests=[{"html": pages[0], "format": "pdf"}])
    assert lazy.status_code == 400 and lazy.json()["error_details"][0]["field"] == "merge_pdf"


def test_merge_pdf_refuses_an_encrypted_entry_before_capturing_anything(client: httpx.Client, make_org) -> None:  # type: ignore[no-untyped-def]
    """An encrypted PDF cannot be opened to be merged (once a 500, after both captures were charged)."""
    org = make_org()
    for locked in ({"pdf_user_password": "open-sesame"}, {"pdf_owner_password": "owner-only"},
                   {"pdf_owner_password": "owner-only", "pdf_permissions": ["print"]}):
        answer = bulk(client, org, execute=True, merge_pdf=True, options={"format": "pdf"},
                      requests=[{"html": "<p>one</p>"}, {"html": "<p>two</p>", **locked}])
        assert answer.status_code == 400, answer.text
        body = answer.json()
        assert body["error_code"] == "request_not_valid"
        assert {detail["field"] for detail in body["error_details"]} == {f"requests.1.{name}" for name in locked}
        assert "open-sesame" not in answer.text and "owner-only" not in answer.text
    assert used(client, org) == 0
