"""POST /compare: two captures or earlier results compared on a worker, the change reported where the
page changed and nowhere else, pages that grew aligned, the diff image tinted, captures charged and the compare
not, bad sides refused naming their field."""

from __future__ import annotations

import gzip

import httpx
import pytest

from tests.conftest import Org
from tests.support.images import decode, rgb_at
from tests.support.pages.fidelity import REAL_PAGES_DIR
from tests.support.pages.watch import BANNER_HEIGHT, IMAGE_BOX, PRICE_BOX
from tests.support.site import Site

pytestmark = pytest.mark.browser
VIEW = {"viewport_width": 640, "viewport_height": 720, "device_scale_factor": 1}


def compare(client: httpx.Client, org: Org, **body: object) -> httpx.Response:
    return client.post("/v1/screenshot/compare", json={"access_key": org.access_key, **body}, timeout=120)


def watched(site: Site, version: str, **options: object) -> dict[str, object]:
    return {"url": site.url(f"/watch/page.html?v={version}"), **VIEW, **options}


def used(client: httpx.Client, org: Org) -> int:
    return int(client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


def inside(box: dict[str, int], area: tuple[int, int, int, int], slack: int = 2) -> bool:
    x, y, width, height = area
    return (box["x"] >= x - slack and box["y"] >= y - slack and box["x"] + box["width"] <= x + width + slack
            and box["y"] + box["height"] <= y + height + slack)


def test_the_same_page_twice_scores_nothing(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    org = make_org()
    answer = compare(client, org, before=watched(site, "base"), after=watched(site, "base"))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["changed"] is False and answer.headers["x-service-changed"] == "false"
    assert body["change"]["changed_share"] == 0 and body["change"]["boxes"] == [] and body["change"]["ssim"] == 1
    assert (body["change"]["width"], body["change"]["height"]) == (640, 720)
    for name in ("diff", "before", "after"):  # every image linked, and each is what it says
        image = decode(httpx.get(body[name]["url"], timeout=30).content)
        assert (image.width, image.height) == (640, 720)
    assert used(client, org) == 2  # the two captures; the compare itself is free


def test_a_changed_price_is_boxed_where_it_is_and_tinted(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    org = make_org()
    answer = compare(client, org, before=watched(site, "base"), after=watched(site, "text"), response_type="by_format")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "image/png" and answer.headers["x-service-changed"] == "true"
    assert 0 < float(answer.headers["x-service-change-share"]) < 0.02
    diff = decode(answer.content)
    after = decode(httpx.get(answer.headers["x-service-after-url"], timeout=30).content)
    # Outside the price the diff is the newer shot as it is; somewhere on the price it is tinted.
    assert rgb_at(diff, 600, 650) == rgb_at(after, 600, 650)
    x, y, width, height = PRICE_BOX
    tinted = [(px, py) for px in range(x, x + width, 4) for py in range(y, y + height, 4)
              if rgb_at(diff, px, py) != rgb_at(after, px, py)]
    assert tinted, "no pixel of the changed price is tinted"
    body = compare(client, org, before=watched(site, "base"), after=watched(site, "text")).json()
    assert body["change"]["boxes"] and all(inside(box, PRICE_BOX) for box in body["change"]["boxes"])


def test_a_changed_picture_is_boxed_exactly(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    body = compare(client, make_org(), before=watched(site, "base"), after=watched(site, "image")).json()
    x, y, width, height = IMAGE_BOX
    assert body["change"]["boxes"] == [{"x": x, "y": y, "width": width, "height": height}]
    assert body["change"]["changed_share"] == pytest.approx(width * height / (640 * 720), abs=1e-6)


def test_a_page_that_grew_is_aligned_not_changed_from_the_banner_down(client: httpx.Client, make_org,  # type: ignore[no-untyped-def]
                                                                     site: Site) -> None:
    full = {"full_page": True, "viewport_height": 400}
    body = compare(client, make_org(), before=watched(site, "base", **full), after=watched(site, "layout", **full)
                   ).json()
    change = body["change"]
    assert change["inserted_rows"] == BANNER_HEIGHT and change["removed_rows"] == 0
    assert change["height"] == 700 + BANNER_HEIGHT
    # Only the banner counts: everything under it moved but did not change.
    assert change["boxes"] and all(box["y"] + box["height"] <= BANNER_HEIGHT for box in change["boxes"])
    assert change["changed_share"] <= BANNER_HEIGHT / change["height"] + 1e-6


def test_earlier_results_compared_by_reference(client: httpx.Client, make_org, site: Site) -> None:  # type: ignore[no-untyped-def]
    org = make_org()
    references = []
    for version in ("base", "image"):
        taken = client.get("/v1/screenshot/take", params={"access_key": org.access_key, "response_type": "json",
                                                           **watched(site, version)})
        assert taken.status_code == 200, taken.text
        references.append(taken.headers["x-service-reference"])
    answer = compare(client, org, before={"reference": references[0]}, after={"reference": references[1]},
                     change_threshold=0.5)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["before"]["reference"] == references[0] and body["after"]["reference"] == references[1]
    assert body["change"]["changed_share"] > 0 and body["changed"] is False  # under the 50 % asked for
    assert used(client, org) == 2  # the two captures only
    other = make_org()  # another organisation's reference is unknown to this one
    refused = compare(client, other, before={"reference": references[0]}, after=watched(site, "base"))
    assert refused.status_code == 400 and refused.json()["error_details"][0]["field"] == "before.reference"
    assert used(client, other) == 0


def test_a_saved_real_page_captured_twice_is_unchanged_and_one_edit_is_found(client: httpx.Client, make_org,  # type: ignore[no-untyped-def]
                                                                             site: Site) -> None:
    page = gzip.decompress((REAL_PAGES_DIR / "wikipedia.html.gz").read_bytes())
    word = b"created in 1998 by members"  # in the article's first paragraph
    assert page.count(word) == 1
    edited = page.replace(word, b"created in 1999 by members")
    site.server.routes["/watch/edited.html"] = lambda q: (200, "text/html; charset=utf-8", edited)
    shot = {"viewport_width": 1280, "viewport_height": 900, "device_scale_factor": 1, "full_page": True}
    org = make_org()
    first = compare(client, org, before={"url": site.url("/real/wikipedia.html"), **shot},
                    after={"url": site.url("/real/wikipedia.html"), **shot}).json()
    assert first["changed"] is False and first["change"]["changed_share"] == 0, first
    # The first capture again, by its reference, against the edited page.
    edit = compare(client, org, before={"reference": first["before"]["reference"]},
                   after={"url": site.url("/watch/edited.html"), **shot}).json()
    assert edit["changed"] is True and edit["change"]["removed_rows"] == edit["change"]["inserted_rows"] == 0
    assert edit["change"]["changed_share"] < 0.001 and 0.99 < edit["change"]["ssim"] < 1
    assert len(edit["change"]["boxes"]) <= 3 and all(box["height"] <= 60 for box in edit["change"]["boxes"])


@pytest.mark.parametrize(("body", "field"), [
    ({"before": {"url": "about:blank"}}, "after"),
    ({"after": {}, "before": {"url": "http://127.0.0.1/", "format": "pdf"}}, "before.format"),
    ({"after": {}, "before": {"url": "http://127.0.0.1/", "viewport_width": 0}}, "before.viewport_width"),
    ({"after": {}, "before": {"url": "http://127.0.0.1/", "async": True}}, "before.async"),
    ({"after": {"reference": "nope", "url": "http://127.0.0.1/"}, "before": {}}, "after.reference"),
    ({"after": {}, "before": {}, "threshold": 300}, "threshold"),
    ({"after": {}, "before": {}, "tolerance": 1}, "tolerance"),
])
def test_bad_requests_name_their_field_and_charge_nothing(client: httpx.Client, make_org, body: dict[str, object],  # type: ignore[no-untyped-def]
                                                          field: str) -> None:
    org = make_org()
    answer = compare(client, org, **body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error_code"] == "request_not_valid"
    assert field in [detail["field"] for detail in answer.json()["error_details"]], answer.json()
    assert used(client, org) == 0
