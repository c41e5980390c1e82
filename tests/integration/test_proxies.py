"""`proxy` and `ip_country_code` through a real upstream proxy (Debian's tinyproxy), policy on."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from service.settings import default_workers
from tests.conftest import Org
from tests.support.proxies import PROXY_HOST, start_tinyproxy
from tests.support.servers import RunningService, running_service, wait_for
from tests.support.site import Site

pytestmark = pytest.mark.browser

SITE_HOST = "127.0.0.2"


@pytest.fixture(scope="module")
def proxies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    """(open proxy port, proxy port requiring user:secret)."""
    directory = tmp_path_factory.mktemp("tinyproxy")
    open_proxy, open_port = start_tinyproxy(directory, None)
    auth_proxy, auth_port = start_tinyproxy(directory, "user secret")
    try:
        yield open_port, auth_port
    finally:
        for process in (open_proxy, auth_proxy):
            process.terminate()
            process.wait(10)


@pytest.fixture(scope="module")
def target() -> Iterator[Site]:
    with Site(host=SITE_HOST) as site:
        yield site


@pytest.fixture(scope="module")
def isolated(redis_url: str, proxies: tuple[int, int], tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[RunningService]:
    open_port, _ = proxies
    with running_service(redis_url.rsplit("/", 1)[0] + "/3", tmp_path_factory.mktemp("proxied"),
                         workers=default_workers(), SCREENSHOT_ALLOW_PRIVATE_NETWORKS="false",
                         SCREENSHOT_ALLOWED_NETWORKS=f"{SITE_HOST}/32,{PROXY_HOST}/32",
                         SCREENSHOT_PROXY_DE=f"http://{PROXY_HOST}:{open_port}/") as running:
        yield running


def take(http: httpx.Client, org: Org, target: Site, **params: object) -> httpx.Response:
    return http.get("/v1/screenshot/take", params={"access_key": org.access_key, "format": "html",
                                                   "url": target.url("/colours.html"), **params})


def seen_via(target: Site) -> str:
    return target.requests_to("/colours.html")[-1].get("via", "")


def test_without_a_proxy_the_target_sees_the_service_directly(isolated_http: httpx.Client, isolated_org: Org,
                                                              target: Site) -> None:
    assert take(isolated_http, isolated_org, target).status_code == 200
    assert seen_via(target) == ""


def test_proxy_parameter(isolated_http: httpx.Client, isolated_org: Org,
                         target: Site, proxies: tuple[int, int]) -> None:
    open_port, _ = proxies
    response = take(isolated_http, isolated_org, target, proxy=f"http://{PROXY_HOST}:{open_port}/")
    assert response.status_code == 200, response.text
    assert "tinyproxy-test" in seen_via(target)


def test_proxy_with_basic_auth(isolated_http: httpx.Client, isolated_org: Org,
                               target: Site, proxies: tuple[int, int]) -> None:
    _, auth_port = proxies
    response = take(isolated_http, isolated_org, target, proxy=f"http://user:secret@{PROXY_HOST}:{auth_port}/")
    assert response.status_code == 200, response.text
    assert "tinyproxy-test" in seen_via(target)
    before = len(target.requests_to("/colours.html"))
    refused = take(isolated_http, isolated_org, target, proxy=f"http://user:wrong@{PROXY_HOST}:{auth_port}/")
    assert refused.status_code >= 400
    assert len(target.requests_to("/colours.html")) == before  # the proxy did not let it through


def test_ip_country_code_uses_the_configured_proxy(isolated_http: httpx.Client, isolated_org: Org,
                                                   target: Site) -> None:
    response = take(isolated_http, isolated_org, target, ip_country_code="de")
    assert response.status_code == 200, response.text
    assert "tinyproxy-test" in seen_via(target)
    missing = take(isolated_http, isolated_org, target, ip_country_code="us")
    assert missing.status_code == 400 and missing.json()["error_code"] == "request_not_valid"
    assert "configured: de" in missing.json()["error_message"]


def test_proxy_and_country_together_and_private_proxies_are_refused(isolated_http: httpx.Client, isolated_org: Org,
                                                                    target: Site) -> None:
    both = take(isolated_http, isolated_org, target, proxy=f"http://{PROXY_HOST}:1/", ip_country_code="de")
    assert both.status_code == 400 and both.json()["error_details"][0]["field"] == "proxy"
    private = take(isolated_http, isolated_org, target, proxy="http://127.0.0.1:3128/")
    assert private.status_code == 400 and private.json()["error_code"] == "request_not_valid"
    assert "not allowed" in private.json()["error_message"]
    malformed = take(isolated_http, isolated_org, target, proxy="socks5://somewhere")
    assert malformed.status_code == 400 and malformed.json()["error_details"][0]["field"] == "proxy"


def test_proxy_bypass_hosts_are_reached_directly_and_still_under_the_policy(
        isolated_http: httpx.Client, isolated_org: Org, target: Site, site: Site, proxies: tuple[int, int]) -> None:
    proxy = f"http://{PROXY_HOST}:{proxies[0]}/"
    for pattern in (SITE_HOST, "127.0.0.*"):
        direct = take(isolated_http, isolated_org, target, proxy=proxy, proxy_bypass_hosts=pattern)
        assert direct.status_code == 200, direct.text
        assert seen_via(target) == "", pattern
    other = take(isolated_http, isolated_org, target, proxy=proxy, proxy_bypass_hosts=["*.example.com", ".test"])
    assert other.status_code == 200 and "tinyproxy-test" in seen_via(target)
    country = take(isolated_http, isolated_org, target, ip_country_code="de", proxy_bypass_hosts=SITE_HOST)
    assert country.status_code == 200 and seen_via(target) == ""
    # Bypassing the proxy is no way around the network policy: 127.0.0.1 is not allowed here.
    before = len(site.requests_to("/colours.html"))
    refused = isolated_http.get("/v1/screenshot/take", params={
        "access_key": isolated_org.access_key, "url": site.url("/colours.html"), "proxy": proxy,
        "proxy_bypass_hosts": "127.0.0.1"})
    assert refused.status_code >= 400 and len(site.requests_to("/colours.html")) == before
    malformed = take(isolated_http, isolated_org, target, proxy=proxy, proxy_bypass_hosts="exa mple.com")
    assert malformed.status_code == 400 and malformed.json()["error_details"][0]["field"] == "proxy_bypass_hosts"


def _answer_late_then_redirect(query: dict[str, list[str]]) -> tuple[int, str, bytes, dict[str, str]]:
    time.sleep(2)
    return 302, "text/plain", b"", {"Location": f"http://{SITE_HOST}:{query['port'][0]}/collect?from=first-job"}


# A page that sends a keepalive request (which outlives the page) to an answer that comes late, once loaded and
# again as it is left.
UNLOADS_WITH_A_KEEPALIVE_REQUEST = """<html><body>the first job's page<script>
addEventListener('load', () => fetch('/late-redirect?when=loaded&port=%d', {keepalive: true, mode: 'no-cors'}));
addEventListener('pagehide', () => fetch('/late-redirect?when=left&port=%d', {keepalive: true, mode: 'no-cors'}));
</script></body></html>"""


@pytest.fixture(scope="module")
def one_worker(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    """One worker: both organisations' jobs run in the one browser, one after the other."""
    with running_service(redis_url.rsplit("/", 1)[0] + "/4", tmp_path_factory.mktemp("one-worker"), workers=1,
                         SCREENSHOT_ALLOW_PRIVATE_NETWORKS="false",
                         SCREENSHOT_ALLOWED_NETWORKS=f"{SITE_HOST}/32,{PROXY_HOST}/32") as running:
        yield running


def test_what_a_page_sends_after_its_job_never_leaves_through_the_next_jobs_proxy(
        one_worker: RunningService, make_org_in, target: Site, proxies: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """A page's keepalive request, sent as the page is left after its job, outlived the job: when the next job
    (another organisation's, on its own upstream proxy) began, the egress closed its connection and Chromium sent
    it again on a new one, which went out through the next job's proxy, and so did the redirect it followed
    (organisation A's traffic through B's proxy and its credentials). Each context now has its own egress
    listener, serving only while a job of that context runs: the request is refused, and nothing of it leaves.
    The page's keepalive request sent while its job runs goes out, directly (the control)."""
    target.server.routes["/late-redirect"] = _answer_late_then_redirect
    target.server.routes["/unloads.html"] = lambda query: (
        200, "text/html", (UNLOADS_WITH_A_KEEPALIVE_REQUEST % (target.port, target.port)).encode())
    database = one_worker.redis_url.rsplit("/", 1)[0] + "/4"
    first, second = make_org_in(database), make_org_in(database)
    with httpx.Client(base_url=one_worker.url, timeout=60) as http:
        assert take(http, first, target, url=target.url("/unloads.html"), delay="3").status_code == 200
        proxied = take(http, second, target, url=target.url("/slow?ms=4000"), proxy=f"http://{PROXY_HOST}:{proxies[0]}/")
        assert proxied.status_code == 200, proxied.text
    assert "tinyproxy-test" in target.requests_to("/slow")[-1].get("via", "")  # the second job's page: its proxy
    wait_for(lambda: target.queries_to("/collect"), 10, "the first job's request sent while it ran")
    time.sleep(3)  # a late answer, and any request sent again, have had their time
    assert [query.split("&")[0] for query in target.queries_to("/late-redirect")] == ["when=loaded"]
    assert target.queries_to("/collect") == ["from=first-job"]
    late = target.requests_to("/late-redirect") + target.requests_to("/collect")
    assert [request.get("via", "") for request in late] == [""] * len(late), late
