"""What an attacker tried, through the real service: credentials that must not reach a third
party, UDP that must not leave a page, secrets that must not rest in Redis, inputs that must not break a
request after it is charged, errors that must not repeat a secret, and a page that crashes its renderer.

The test site answers on 127.0.0.1 and, as another origin, on localhost (same port): requests of both land
in the same log, told apart by their Host header.
"""

from __future__ import annotations

import json
import time
import zlib
from urllib.parse import quote

import httpx
import pytest
import redis

from tests.conftest import Org
from tests.support.receivers import udp_canary, webrtc_page
from tests.support.servers import RunningService
from tests.support.site import Site

pytestmark = pytest.mark.browser


def take(client: httpx.Client, org: Org, **params: object) -> httpx.Response:
    return client.get("/v1/screenshot/take", params={"access_key": org.access_key, **params})


def used(client: httpx.Client, org: Org) -> int:
    return int(client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


def test_credentials_never_follow_a_redirect_to_another_origin(client: httpx.Client, org: Org, site: Site) -> None:
    other = f"http://localhost:{site.port}/request.html"
    secrets = {"authorization": "Bearer S3CRET", "headers": "X-Api-Key: k3y", "cookies": "sid=c00kie"}
    response = take(client, org, url=site.url("/redirect?to=" + quote(other)), format="html", **secrets)
    assert response.status_code == 200, response.text
    hop = site.requests_to("/redirect")[-1]
    landed = site.requests_to("/request.html")[-1]
    assert hop["authorization"] == "Bearer S3CRET" and hop["x-api-key"] == "k3y" and hop["cookie"] == "sid=c00kie"
    assert landed["host"] == f"localhost:{site.port}"
    assert "authorization" not in landed and "x-api-key" not in landed and "cookie" not in landed
    # A redirect back to the target's own origin keeps them; its third-party image never gets them.
    response = take(client, org, url=site.url("/redirect?to=" + quote(site.url("/request.html"))), format="html",
                    **secrets)
    assert response.status_code == 200, response.text
    landed = site.requests_to("/request.html")[-1]
    assert landed["host"] == f"127.0.0.1:{site.port}" and landed["authorization"] == "Bearer S3CRET"
    assert landed["x-api-key"] == "k3y"
    third_party = site.requests_to("/third-party.png")[-1]
    assert "authorization" not in third_party and "x-api-key" not in third_party


def test_no_udp_leaves_a_page(client: httpx.Client, org: Org) -> None:
    with udp_canary() as canary:
        response = take(client, org, html=webrtc_page(canary.port), delay=2, metadata_page_title="true",
                        response_type="json")
        assert response.status_code == 200, response.text
        time.sleep(0.5)
        assert canary.datagrams == 0, "a page sent UDP around the egress proxy"
    # Not even a host candidate: WebRTC has no socket outside the proxy.
    assert response.json()["metadata"]["page_title"] == "candidates:"


def test_credentials_do_not_rest_in_redis(service: RunningService, client: httpx.Client, org: Org,
                                          site: Site) -> None:
    secrets = ["Bearer AUTH-CANARY", "X-Token: HEADER-CANARY", "sid=COOKIE-CANARY", "PASSWORD-CANARY"]
    response = take(client, org, url=site.url("/colours.html").replace("http://", "http://user:PASSWORD-CANARY@"),
                    authorization=secrets[0], headers=secrets[1], cookies=secrets[2], **{"async": "true"},
                    webhook_url=site.url("/hook"), webhook_errors="true")
    assert response.status_code == 202, response.text
    reference = response.json()["reference"]
    deadline = time.monotonic() + 60
    while client.get(f"/v1/screenshot/jobs/{reference}", params={"access_key": org.access_key}
                     ).json()["status"] not in ("done", "failed"):
        assert time.monotonic() < deadline, "the async job did not finish"
        time.sleep(0.2)
    assert client.get(f"/v1/screenshot/jobs/{reference}", params={"access_key": org.access_key}
                      ).json()["status"] == "done"
    assert site.requests_to("/colours.html")[-1]["cookie"] == "sid=COOKIE-CANARY"  # they did reach the target
    connection = redis.Redis.from_url(service.redis_url)
    for key in connection.scan_iter(count=1000):
        kind = connection.type(key)
        if kind == b"hash":
            values = b" ".join(connection.hvals(key))  # type: ignore[arg-type]
        elif kind == b"string":
            values = connection.get(key) or b""
        elif kind == b"list":
            values = b" ".join(connection.lrange(key, 0, -1))
        elif kind == b"zset":
            values = b" ".join(connection.zrange(key, 0, -1))
        else:
            values = b" ".join(connection.smembers(key)) if kind == b"set" else b""
        values += b" ".join(_inflated(value) for value in values.split(b" "))  # RQ compresses its job data
        for canary in ("AUTH-CANARY", "HEADER-CANARY", "COOKIE-CANARY", "PASSWORD-CANARY"):
            assert canary.encode() not in values, f"{canary} rests in Redis under {key!r}"


def _inflated(value: bytes) -> bytes:
    try:
        return zlib.decompress(value)
    except zlib.error:
        return b""


def deeply_nested(depth: int) -> bytes:
    return b'{"url": "http://example.com/", "x": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize(("params", "field"), [
    ({"external_identifier": "order-1\r\nSet-Cookie: x=1"}, "external_identifier"),
    ({"external_identifier": "commande-\u00e9"}, "external_identifier"),
    ({"external_identifier": "nul\x00byte"}, "external_identifier"),
    ({"user_agent": "Agent\r\nX-Injected: 1"}, "user_agent"),
    ({"authorization": "Bearer a\nb"}, "authorization"),
    ({"headers": ["X-Name: Jos\u00e9"]}, "headers.0"),  # arrays in a JSON body (a string is refused as such)
    ({"headers": ["X-Name: a\x01b"]}, "headers.0"),
    ({"cookies": ["a=b\x00c"]}, "cookies.0"),
    ({"webhook_url": "http://example.com/\r\nHost: evil"}, "webhook_url"),
], ids=["id-crlf", "id-non-ascii", "id-nul", "ua-crlf", "authorization-lf", "header-non-ascii", "header-control",
        "cookie-nul", "webhook-crlf"])
def test_inputs_bound_for_headers_are_refused_before_anything_runs(client: httpx.Client, org: Org, site: Site,
                                                                   params: dict[str, object], field: str) -> None:
    before = used(client, org)
    response = client.post("/v1/screenshot/take", headers={"X-Access-Key": org.access_key},
                           json={"url": site.url("/colours.html"), **params})
    assert response.status_code == 400, response.text
    assert response.json()["error_code"] in ("request_not_valid", "invalid_header_parameter",
                                             "invalid_cookie_parameter")
    assert field in [detail["field"] for detail in response.json()["error_details"]], response.text
    assert used(client, org) == before


def test_a_deeply_nested_body_is_an_invalid_request(client: httpx.Client, org: Org) -> None:
    for route in ("/v1/screenshot/take", "/v1/screenshot/bulk"):
        response = client.post(route, headers={"X-Access-Key": org.access_key, "content-type": "application/json"},
                               content=deeply_nested(20_000))
        assert response.status_code == 400, response.text
        assert response.json()["error_code"] == "request_not_valid"
        assert response.json()["error_details"][0]["field"] == "x"  # the member that nests too deep


def test_a_cookie_with_a_path_and_no_domain_is_the_target_hosts(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/request.html"), format="html", cookies="scoped=1; Path=/")
    assert response.status_code == 200, response.text
    assert site.requests_to("/request.html")[-1]["cookie"] == "scoped=1"
    assert "scoped" not in site.requests_to("/third-party.png")[-1].get("cookie", "")


@pytest.mark.parametrize(("name", "value", "code"), [
    ("cookies", "sessionid-0123456789abcdef", "invalid_cookie_parameter"),  # no `=`
    ("cookies", "sid=0123456789abcdef; S3cretAttr", "invalid_cookie_parameter"),
    ("headers", "X-Api-Key 0123456789abcdef", "invalid_header_parameter"),  # no `:`
    ("headers", "Bad Name:0123456789abcdef", "invalid_header_parameter"),
])
def test_errors_name_the_field_never_the_value(client: httpx.Client, org: Org, site: Site, name: str, value: str,
                                               code: str) -> None:
    response = take(client, org, url=site.url("/colours.html"), **{name: value})
    assert response.status_code == 400 and response.json()["error_code"] == code, response.text
    assert f"{name}[0]" in response.json()["error_message"]
    assert "0123456789abcdef" not in response.text and "S3cretAttr" not in response.text


# Fills the JavaScript heap until the renderer dies (V8 aborts on out-of-memory).
MEMORY_HOG = """<!DOCTYPE html><html><body><script>
const kept = [];
for (;;) kept.push(new Array(1 << 20).fill(1.5));
</script></body></html>"""


def test_a_page_that_exhausts_its_memory_is_reported_as_its_own_crash(client: httpx.Client, org: Org,
                                                                        site: Site) -> None:
    before = used(client, org)
    response = take(client, org, html=MEMORY_HOG)
    assert response.status_code == 500, response.text
    body = response.json()
    assert body["error_code"] == "internal_application_error"
    assert "crashed" in body["error_message"] and "SCREENSHOT_CHROMIUM_LOW_MEMORY" in body["error_message"]
    assert "Page.goto" not in body["error_message"] and "set_content" not in body["error_message"]
    assert used(client, org) == before
    # The worker goes on: the next capture of the same organisation renders.
    assert take(client, org, url=site.url("/colours.html")).status_code == 200


def test_a_crashed_job_record_says_so(client: httpx.Client, org: Org) -> None:
    response = take(client, org, html=MEMORY_HOG, **{"async": "true"})
    reference = response.json()["reference"]
    deadline = time.monotonic() + 90
    while (status := client.get(f"/v1/screenshot/jobs/{reference}", params={"access_key": org.access_key}
                                ).json())["status"] not in ("done", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert status["status"] == "failed", json.dumps(status)
    assert "crashed" in status["error_message"] and "LOW_MEMORY" in status["error_message"], json.dumps(status)
