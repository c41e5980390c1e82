"""The network policy (docs/security.md) with its default on: every attack case is refused.

Two local sites share one port: the allowed site on 127.0.0.2 (the only address the guarded service's
allowlist opens) and a "secret" site on 127.0.0.1 that must never see a request. Test names resolve
through SCREENSHOT_RESOLVE_OVERRIDES; nothing leaves the machine (no answer is ever a public address).
"""

from __future__ import annotations

import contextlib
import errno
import io
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from warcio.archiveiterator import ArchiveIterator

from render.contract.errors import RequestNotValid
from render.queue.deliveries import Delivery
from render.settings import RenderSettings
from service.deliverer.webhooks import Courier, DeliveryFailed
from service.settings import ServiceSettings, Settings, default_workers
from storage.settings import StorageSettings
from tests.conftest import Org
from tests.support.archive_tools import archive_problems
from tests.support.images import decode, rgb_at
from tests.support.receivers import Receiver, udp_canary, webrtc_page
from tests.support.servers import RunningService, running_service
from tests.support.site import Site

pytestmark = pytest.mark.browser

PORT_TRIES = 20  # ports the system gives on 127.0.0.2 until one is free on 127.0.0.1 too

ATTACK_PAGE = """<!DOCTYPE html><html><body style="margin:0;background:#00ff00">
<img src="{secret}/img.png"><iframe src="{secret}/frame.html"></iframe>
<script>
fetch('{secret}/fetch').catch(() => {{}});
const xhr = new XMLHttpRequest(); xhr.open('GET', '{secret}/xhr'); xhr.send();
try {{ new WebSocket('{ws}/socket'); }} catch (e) {{}}
window.open('{secret}/popup');
</script></body></html>"""


@pytest.fixture(scope="module")
def sites() -> Iterator[tuple[Site, Site]]:
    """(allowed on 127.0.0.2, secret on 127.0.0.1), on the same port: one free on both addresses (a port the system
    gave on one may be taken on the other, by another test process)."""
    for _ in range(PORT_TRIES):
        with Site(host="127.0.0.2") as allowed:
            try:
                secret = Site(host="127.0.0.1", port=allowed.port)
            except OSError as error:
                if error.errno != errno.EADDRINUSE:
                    raise
                continue
            with secret:
                yield allowed, secret
            return
    raise RuntimeError(f"no port free on both 127.0.0.1 and 127.0.0.2 in {PORT_TRIES} tries")


@pytest.fixture(scope="module")
def isolated(redis_url: str, sites: tuple[Site, Site], tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[RunningService]:
    overrides = ("allowed.test=127.0.0.2,evil.test=127.0.0.1,metadata.google.internal=169.254.169.254,"
                 "rebind.test=127.0.0.2|127.0.0.1")
    # A database of its own: the main test service's workers (policy off) must not take its jobs.
    own_database = redis_url.rsplit("/", 1)[0] + "/2"
    with running_service(own_database, tmp_path_factory.mktemp("guarded"), workers=default_workers(),
                         SCREENSHOT_ALLOW_PRIVATE_NETWORKS="false", SCREENSHOT_ALLOWED_NETWORKS="127.0.0.2/32",
                         SCREENSHOT_RESOLVE_OVERRIDES=overrides) as running:
        yield running


@contextlib.contextmanager
def untouched(secret: Site) -> Iterator[None]:
    """Asserts the secret site received no request inside the block."""
    before = len(secret.server.log)
    yield
    assert secret.server.log[before:] == [], "a private address was reached"


def take(http: httpx.Client, org: Org, url: str, **params: object) -> httpx.Response:
    return http.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": url, **params})


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:{port}/", "http://localhost:{port}/", "http://[::1]:{port}/", "http://0.0.0.0:{port}/",
    "http://2130706433:{port}/", "http://0x7f.1:{port}/", "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/", "http://10.0.0.1/", "http://192.168.1.1/",
    "http://[::ffff:127.0.0.1]:{port}/", "http://evil.test:{port}/",
], ids=lambda u: u.split("//")[1].split("/")[0].replace(":{port}", ""))
def test_private_main_urls_are_refused(isolated_http: httpx.Client, isolated_org: Org,
                                       sites: tuple[Site, Site], url: str) -> None:
    _, secret = sites
    with untouched(secret):
        response = take(isolated_http, isolated_org, url.format(port=secret.port))
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error_code"] == "request_not_valid"
    if "2130706433" in url or "0x7f" in url:
        # Numbers a browser reads as 127.0.0.1 are refused before the policy, as a host two parsers read
        # differently (even where private networks are allowed), naming the address the browser would reach.
        assert "'127.0.0.1' as a browser reads it" in body["error_message"]
    else:
        assert "not allowed" in body["error_message"]
    assert body["error_details"][0]["field"] == "url"


@pytest.mark.parametrize("url", ["file:///etc/passwd", "chrome://version", "view-source:http://allowed.test/",
                                 "javascript:alert(1)", "data:text/html,hi"])
def test_non_http_urls_are_refused(isolated_http: httpx.Client, isolated_org: Org, url: str) -> None:
    response = take(isolated_http, isolated_org, url)
    assert response.status_code == 400 and response.json()["error_code"] == "request_not_valid"


def test_the_allowlisted_site_renders(isolated_http: httpx.Client, isolated_org: Org, sites: tuple[Site, Site]) -> None:
    allowed, secret = sites
    with untouched(secret):
        shot = decode(take(isolated_http, isolated_org, f"http://allowed.test:{allowed.port}/colours.html",
                           viewport_width=100, viewport_height=100).content)
    assert rgb_at(shot, 50, 10) == (255, 0, 0)


def test_redirect_to_a_private_address_is_refused(isolated_http: httpx.Client, isolated_org: Org,
                                                  sites: tuple[Site, Site]) -> None:
    allowed, secret = sites
    target = f"http://127.0.0.1:{secret.port}/secret"
    with untouched(secret):
        response = take(isolated_http, isolated_org, f"http://allowed.test:{allowed.port}/redirect?to={target}")
    assert response.status_code == 500, response.text
    assert response.json()["error_code"] == "network_error"
    assert "not allowed" in response.json()["error_message"]


def test_private_subresources_fail_and_the_page_still_renders(isolated_http: httpx.Client, isolated_org: Org,
                                                              sites: tuple[Site, Site]) -> None:
    allowed, secret = sites
    secret_base = f"http://127.0.0.1:{secret.port}"
    page = ATTACK_PAGE.format(secret=secret_base, ws=secret_base.replace("http", "ws"))
    allowed.server.routes["/attack.html"] = lambda q: (200, "text/html", page.encode())
    with untouched(secret):
        response = take(isolated_http, isolated_org, f"http://allowed.test:{allowed.port}/attack.html",
                        viewport_width=200, viewport_height=200, wait_until="networkidle0")
        assert response.status_code == 200, response.text
        assert rgb_at(decode(response.content), 190, 190) == (0, 255, 0)
    metrics = isolated_http.get("/metrics").text
    blocked = [line for line in metrics.splitlines()
               if line.startswith('screenshot_blocked_requests_total{policy="private_network"}')]
    assert blocked and float(blocked[0].split()[-1]) >= 5  # img, iframe, fetch, xhr, websocket (+ popup)


def test_what_the_policy_refused_is_not_in_the_web_archive(isolated_http: httpx.Client, isolated_org: Org,
                                                          sites: tuple[Site, Site]) -> None:
    """archive=true on the same page: the page is archived, and nothing of the private address (refused, never
    answered) is, in any record or the index."""
    allowed, secret = sites
    secret_base = f"http://127.0.0.1:{secret.port}"
    page = ATTACK_PAGE.format(secret=secret_base, ws=secret_base.replace("http", "ws"))
    allowed.server.routes["/attack.html"] = lambda q: (200, "text/html", page.encode())
    url = f"http://allowed.test:{allowed.port}/attack.html"
    with untouched(secret):
        response = take(isolated_http, isolated_org, url, viewport_width=200, viewport_height=200,
                        wait_until="networkidle0", format="wacz")
        assert response.status_code == 200, response.text
    assert archive_problems(response.content) == []
    package = zipfile.ZipFile(io.BytesIO(response.content))
    warc = package.read("archive/data.warc.gz")
    targets = {record.rec_headers.get_header("WARC-Target-URI") for record in ArchiveIterator(io.BytesIO(warc))}
    assert url in targets and f"urn:view:{url}" in targets
    assert not [target for target in targets if "127.0.0.1" in target], targets
    assert b"1,0,0,127)" not in package.read("indexes/index.cdx")  # 127.0.0.1 as the index keys it (SURT)


def test_dns_rebinding_never_reaches_the_private_address(isolated_http: httpx.Client, isolated_org: Org,
                                                         sites: tuple[Site, Site]) -> None:
    """rebind.test answers 127.0.0.2 (allowed) to the first lookup, 127.0.0.1 to the next: the check
    passes, but the connection goes to the address the egress proxy checked itself, and is refused."""
    _, secret = sites
    with untouched(secret):
        response = take(isolated_http, isolated_org, f"http://rebind.test:{secret.port}/colours.html")
    assert response.status_code == 500, response.text
    assert response.json()["error_code"] == "network_error"
    assert "127.0.0.1" in response.json()["error_message"]


@pytest.mark.parametrize(("field", "target", "extra"), [
    *[("watermark_image_url", target, {}) for target in [
        "http://127.0.0.1:{port}/logo.png", "http://evil.test:{port}/logo.png", "https://evil.test:{port}/logo.png",
        "http://169.254.169.254/logo.png"]],
    *[("webhook_url", target, {"async": "true"}) for target in [
        "http://127.0.0.1:{port}/hook", "http://evil.test:{port}/hook", "http://169.254.169.254/hook",
        "http://[::1]:{port}/hook"]],
])
def test_watermarks_and_webhooks_on_private_addresses_are_refused(
        isolated_http: httpx.Client, isolated_org: Org, sites: tuple[Site, Site], field: str, target: str,
        extra: dict[str, str]) -> None:
    allowed, secret = sites
    with untouched(secret):
        response = take(isolated_http, isolated_org, f"http://allowed.test:{allowed.port}/colours.html",
                        **{field: target.format(port=secret.port)}, **extra)
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error_code"] == "request_not_valid"
    assert body["error_details"][0]["field"] == field
    assert "not allowed" in body["error_message"]


@pytest.mark.parametrize("field", ["url", "watermark_image_url", "webhook_url"])
def test_a_url_the_browser_reads_otherwise_is_refused_naming_its_field(
        isolated_http: httpx.Client, isolated_org: Org, sites: tuple[Site, Site], field: str) -> None:
    """`http://127.0.0.1:PORT\\@allowed.test:PORT/` names allowed.test to Python's parser and 127.0.0.1 to the
    browser's (WHATWG): refused before anything is fetched or charged, whichever parameter carries it."""
    allowed, secret = sites
    confusing = f"http://127.0.0.1:{secret.port}\\@allowed.test:{allowed.port}/colours.html"
    page = confusing if field == "url" else f"http://allowed.test:{allowed.port}/colours.html"
    with untouched(secret), untouched(allowed):
        response = take(isolated_http, isolated_org, page, **({} if field == "url" else {field: confusing}))
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error_code"] == "request_not_valid"
    assert [detail["field"] for detail in body["error_details"]] == [field]


def test_deliveries_obey_the_policy_when_they_are_sent(redis_url: str, tmp_path: Path) -> None:
    """The API's check can be outlived (a name rebound later): the deliverer's egress proxy checks the
    address it connects to, so a delivery aimed at this machine never arrives."""
    settings = Settings(ServiceSettings(redis_url=redis_url, url_signing_secret="s"),
                        RenderSettings(allow_private_networks=False), StorageSettings(storage_dir=tmp_path))
    courier = Courier(settings, redis.Redis.from_url(redis_url))
    failure = RequestNotValid("x").to_payload()
    with Receiver() as receiver:
        delivery = Delivery(reference="r1", organisation="nobody", url=receiver.url("/hook"), sign=False,
                            trace_id="t", options={"url": "https://example.com/"}, error=failure)
        with pytest.raises(DeliveryFailed, match="refused"):
            courier.deliver(delivery, attempt=1)
        assert receiver.requests == []


def test_an_allowed_page_sends_no_udp(isolated_http: httpx.Client, isolated_org: Org, sites: tuple[Site, Site]) -> None:
    """WebRTC's STUN and TURN would go straight to the private address, around the egress proxy."""
    allowed, _ = sites
    with udp_canary() as canary:
        page = webrtc_page(canary.port).encode()
        allowed.server.routes["/webrtc.html"] = lambda query: (200, "text/html", page)
        response = take(isolated_http, isolated_org, allowed.url("/webrtc.html"), delay=2)
        assert response.status_code == 200, response.text
        time.sleep(0.5)
        assert canary.datagrams == 0, "a page sent UDP around the network policy"


# --- the surfaces added since /take's security work --------------------------------------------

PRIVATE_FORMS = [
    "http://127.0.0.1:{port}/", "http://localhost:{port}/", "http://[::1]:{port}/", "http://0.0.0.0:{port}/",
    "http://2130706433:{port}/", "http://0x7f.1:{port}/", "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/", "http://10.0.0.1/", "http://192.168.1.1/",
    "http://[::ffff:127.0.0.1]:{port}/", "http://[fd00::1]/", "http://evil.test:{port}/",
]
FORM_IDS = [url.split("//")[1].split("/")[0].replace(":{port}", "") for url in PRIVATE_FORMS]


def used(http: httpx.Client, org: Org) -> int:
    return int(http.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


def refused_naming(response: httpx.Response, field: str) -> None:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error_code"] == "request_not_valid", body
    assert [detail["field"] for detail in body["error_details"]] == [field], body


@pytest.mark.parametrize("url", PRIVATE_FORMS, ids=FORM_IDS)
def test_compare_sides_refuse_private_addresses_as_their_own_error(isolated_http: httpx.Client, isolated_org: Org,
                                                                   sites: tuple[Site, Site], url: str) -> None:
    """Each side is a /take: a refused side is its own 400 naming `before.url` (or `after.url`), never a 500,
    and nothing is reached or charged, whether the other side is captured beside it or not."""
    allowed, secret = sites
    page = {"url": f"http://allowed.test:{allowed.port}/colours.html", "viewport_width": 200, "viewport_height": 100}
    private = {"url": url.format(port=secret.port)}
    with untouched(secret):
        for before, after, field in ((private, page, "before.url"), (page, private, "after.url"),
                                     (private, private, "before.url")):
            answer = isolated_http.post("/v1/screenshot/compare", json={
                "access_key": isolated_org.access_key, "before": before, "after": after}, timeout=120)
            assert answer.status_code == 400, answer.text
            body = answer.json()
            assert body["error_code"] == "request_not_valid", body
            assert body["error_message"].startswith(field.split(".")[0] + ": "), body
            fields = [detail["field"] for detail in body["error_details"]]
            assert fields[0] == field and set(fields) <= {"before.url", "after.url"}, body
    assert used(isolated_http, isolated_org) == 0


def test_a_compare_side_redirected_to_a_private_address_is_its_own_error(
        isolated_http: httpx.Client, isolated_org: Org, sites: tuple[Site, Site]) -> None:
    allowed, secret = sites
    page = {"url": f"http://allowed.test:{allowed.port}/colours.html", "viewport_width": 200, "viewport_height": 100}
    redirected = {"url": f"http://allowed.test:{allowed.port}/redirect?to=http://127.0.0.1:{secret.port}/"}
    with untouched(secret):
        answer = isolated_http.post("/v1/screenshot/compare", json={
            "access_key": isolated_org.access_key, "before": page, "after": redirected}, timeout=120)
    assert 400 <= answer.status_code < 500 or answer.json()["error_code"] == "network_error", answer.text
    assert answer.json()["error_message"].startswith("after: "), answer.text


@pytest.mark.parametrize("url", PRIVATE_FORMS, ids=FORM_IDS)
def test_monitors_refuse_private_addresses_on_create_and_on_change(isolated_http: httpx.Client, make_org_in,  # type: ignore[no-untyped-def]
                                                                   isolated: RunningService,
                                                                   sites: tuple[Site, Site], url: str) -> None:
    """A monitor's page and webhook are checked as /take's: when it is created, and when a change names a new
    webhook or request (one validation path: PATCH once let a private webhook through)."""
    allowed, secret = sites
    org = make_org_in(isolated.redis_url)
    private = url.format(port=secret.port)
    page = {"url": f"http://allowed.test:{allowed.port}/colours.html"}
    spec = {"access_key": org.access_key, "schedule": {"interval": 3600}, "paused": True}
    with untouched(secret):
        refused_naming(isolated_http.post("/v1/monitors", json={**spec, "request": {"url": private}}), "request.url")
        refused_naming(isolated_http.post("/v1/monitors", json={**spec, "request": page, "webhook_url": private}),
                       "webhook_url")
        created = isolated_http.post("/v1/monitors", json={**spec, "request": page})
        assert created.status_code == 201, created.text
        monitor = created.json()["id"]
        refused_naming(isolated_http.patch(f"/v1/monitors/{monitor}", json={
            "access_key": org.access_key, "webhook_url": private}), "webhook_url")
        refused_naming(isolated_http.patch(f"/v1/monitors/{monitor}", json={
            "access_key": org.access_key, "request": {"url": private}}), "request.url")
    shown = isolated_http.get(f"/v1/monitors/{monitor}", params={"access_key": org.access_key}).json()
    assert shown["webhook_url"] is None and shown["request"]["url"] == page["url"]
