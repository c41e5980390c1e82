"""Failures of the target: each maps to its documented code, and none is charged."""

from __future__ import annotations

import re
import socket

import httpx
import pytest

from service.api import error_reference
from tests.conftest import Org
from tests.support.site import Site

pytestmark = pytest.mark.browser


def take(client: httpx.Client, org: Org, **params: object) -> httpx.Response:
    return client.get("/v1/screenshot/take", params={"access_key": org.access_key, **params})


def used(client: httpx.Client, org: Org) -> int:
    return int(client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


def assert_error(response: httpx.Response, status: int, code: str, *fragments: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["is_successful"] is False
    assert body["error_code"] == code
    assert response.headers["x-service-error-code"] == code
    assert body["documentation_url"].endswith(f"/errors/{code}")
    for fragment in fragments:
        assert fragment in body["error_message"], body["error_message"]
    return body


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_host_errors_carry_the_status_and_are_not_charged(client: httpx.Client, org: Org, site: Site) -> None:
    body = assert_error(take(client, org, url=site.url("/status?code=404")), 500, "host_returned_error", "404",
                        "ignore_host_errors")
    assert body["returned_status_code"] == 404
    assert used(client, org) == 0
    ignored = take(client, org, url=site.url("/status?code=503"), ignore_host_errors="true")
    assert ignored.status_code == 200 and ignored.headers["content-type"] == "image/png"
    assert used(client, org) == 1


def test_name_not_resolved(client: httpx.Client, org: Org) -> None:
    assert_error(take(client, org, url="http://no-such-host.invalid/"), 400, "name_not_resolved",
                 "could not be resolved")


def test_network_error(client: httpx.Client, org: Org) -> None:
    assert_error(take(client, org, url=f"http://127.0.0.1:{closed_port()}/"), 500, "network_error",
                 "Connection refused")


def test_navigation_timeout(client: httpx.Client, org: Org, site: Site) -> None:
    assert_error(take(client, org, url=site.url("/slow?ms=4000"), navigation_timeout="1"), 500, "timeout_error",
                 "navigation_timeout (1 s)")
    assert used(client, org) == 0


def test_overall_timeout_covers_the_delay(client: httpx.Client, org: Org, site: Site) -> None:
    assert_error(take(client, org, url=site.url("/slow?ms=1500"), delay="2", timeout="3"), 500, "timeout_error",
                 "timeout (3 s)")


def test_wait_until_load_does_not_wait_for_late_requests(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/late-fetch.html"), format="html")
    assert '<div id="state">waiting</div>' in response.text


@pytest.mark.parametrize("events", [["networkidle0"], ["domcontentloaded", "networkidle0"], ["load", "networkidle2"]],
                         ids="+".join)
def test_networkidle_waits_for_late_requests(client: httpx.Client, org: Org, site: Site, events: list[str]) -> None:
    response = client.get("/v1/screenshot/take", params=[("access_key", org.access_key),
                                                         ("url", site.url("/late-fetches.html")), ("format", "html"),
                                                         *[("wait_until", e) for e in events]])
    assert response.status_code == 200, response.text
    assert '<div id="state">fetched</div>' in response.text


def test_networkidle2_tolerates_two_open_requests_networkidle0_does_not(
    client: httpx.Client, org: Org, site: Site,
) -> None:
    idle2 = take(client, org, url=site.url("/three-hanging.html"), format="html", wait_until="networkidle2",
                 navigation_timeout="5")
    assert idle2.status_code == 200, idle2.text
    assert re.search(r'<div id="state">idle2</div>', idle2.text)
    idle0 = take(client, org, url=site.url("/three-hanging.html"), format="html", wait_until="networkidle0",
                 navigation_timeout="2")
    assert_error(idle0, 500, "timeout_error", "navigation_timeout (2 s)")


def test_output_too_large_is_refused_before_rendering(client: httpx.Client, org: Org, site: Site) -> None:
    body = assert_error(take(client, org, url=site.url("/colours.html"), format="webp", viewport_width="4000",
                             device_scale_factor="5"), 400, "resulting_image_too_large", "webp", "16383")
    assert body["error_details"] == []
    assert_error(take(client, org, url=site.url("/colours.html"), viewport_width="16000", viewport_height="16000"),
                 400, "resulting_image_too_large", "SCREENSHOT_MAX_IMAGE_PIXELS")
    assert used(client, org) == 0


def test_service_workers_are_off(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/service-worker.html"), format="html", wait_until="networkidle0")
    assert '<pre id="state">unavailable</pre>' in response.text


def test_downloads_are_refused(client: httpx.Client, org: Org, site: Site, service) -> None:  # type: ignore[no-untyped-def]
    assert_error(take(client, org, url=site.url("/download")), 500, "network_error", "downloads are refused")
    assert not list(service.data_dir.rglob("file.bin"))  # nothing was saved anywhere under the data dir
    assert used(client, org) == 0


def test_documentation_url_is_this_servers_own_reference(client: httpx.Client, org: Org) -> None:
    """Each error body links to the entry for its code on this server (GET /errors/{code}); every code a
    client can receive has one, saying what it means and what to do."""
    body = assert_error(client.get("/v1/screenshot/take", params={"access_key": org.access_key}), 400,
                        "request_not_valid")
    assert body["documentation_url"] == f"{client.base_url}/errors/request_not_valid".replace("//errors", "/errors")
    page = httpx.get(body["documentation_url"])
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "request_not_valid" in page.text and "What to do" in page.text
    for code in error_reference.codes():
        entry = client.get(f"/errors/{code}")
        assert entry.status_code == 200 and f"<code>{code}</code>" in entry.text, code
    everything = client.get("/errors").text
    assert all(f'id="{code}"' in everything for code in error_reference.codes())
    assert_error(client.get("/errors/no_such_code"), 404, "request_not_valid", "GET /errors")
