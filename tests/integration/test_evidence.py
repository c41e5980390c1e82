"""What happened on the page: console messages and uncaught exceptions, failed subresources, waits for an
expression, best attempts, where the time went (Server-Timing, metadata.timings), the accessibility tree and
certified captures."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
import redis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jsonschema import Draft6Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT6

from render.browser.pool import TabPool
from render.contract import certificates
from render.contract.options import TakeOptions
from render.contract.timings import STAGES
from render.page.har import HarRecorder
from render.queue.certify_key import NoCertifyKey, certify_key
from render.settings import RenderSettings
from tests.conftest import ROOT, Org
from tests.support.images import decode, near, rgb_at
from tests.support.pages import fidelity as pages
from tests.support.plain import PlainBrowser
from tests.support.site import CONSOLE_PAGE, Site

pytestmark = pytest.mark.browser
GREEN, RED = (0, 255, 0), (255, 0, 0)
SERVER_TIMING_METRIC = re.compile(r'^(?P<name>[a-z_]+)(;dur=(?P<dur>\d+(\.\d+)?))?(;desc="(?P<desc>[^"]*)")?$')


def take(client: httpx.Client, org: Org, **params: object) -> httpx.Response:
    return client.get("/v1/screenshot/take", params={
        "access_key": org.access_key, "viewport_width": "400", "viewport_height": "300", **params})


def used(client: httpx.Client, org: Org) -> int:
    return int(client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


def images_page(site: Site, *sources: str) -> str:
    return site.url("/evidence/images.html?" + urlencode([("src", source) for source in sources]))


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_timing(response: httpx.Response) -> dict[str, tuple[float | None, str | None]]:
    """The Server-Timing header by metric name: (duration, description); every metric must parse."""
    metrics = {}
    for metric in response.headers["server-timing"].split(", "):
        found = SERVER_TIMING_METRIC.match(metric)
        assert found, metric
        metrics[found["name"]] = (float(found["dur"]) if found["dur"] else None, found["desc"])
    return metrics


def line_of(page: str, text: str) -> int:
    return next(number for number, line in enumerate(page.splitlines(), 1) if text in line)


def test_console_messages_and_uncaught_exceptions_in_json_and_headers(
        client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/evidence/console.html"), metadata_console="true",
                    response_type="json")
    assert response.status_code == 200, response.text
    console = response.json()["metadata"]["console"]
    mine = [(m["type"], m["text"], m["source"]) for m in console["messages"] if m["source"] == "console"]
    assert mine == [("log", "hello 42", "console"), ("warning", "careful", "console"),
                    ("error", "broken widget", "console"), ("exception", "TypeError: late failure", "console")]
    by_text = {m["text"]: m for m in console["messages"]}
    page_url = site.url("/evidence/console.html")
    assert (by_text["hello 42"]["url"], by_text["hello 42"]["line"]) == (page_url, line_of(CONSOLE_PAGE, "'hello'"))
    exception = by_text["TypeError: late failure"]
    assert (exception["url"], exception["line"]) == (page_url, line_of(CONSOLE_PAGE, "late failure"))
    assert exception["column"] > 1 and exception["time_ms"] >= by_text["hello 42"]["time_ms"] >= 0
    # Chromium's own report of the image that answered 404: listed, marked as the network's, not counted.
    network = [m for m in console["messages"] if m["source"] == "network"]
    assert [m["type"] for m in network] == ["error"] and "404" in network[0]["text"]
    assert network[0]["url"].endswith("/status?code=404")
    assert (console["errors"], console["dropped"]) == (2, 0)
    assert response.headers["x-service-console-errors"] == "2"
    image = take(client, org, url=site.url("/evidence/console.html"), metadata_console="true")
    assert image.headers["content-type"] == "image/png" and image.headers["x-service-console-errors"] == "2"


def test_console_errors_fail_the_capture_when_asked_and_are_not_charged(
        client: httpx.Client, org: Org, site: Site) -> None:
    failed = take(client, org, url=site.url("/evidence/console.html"), fail_on_console_errors="true")
    assert failed.status_code == 500, failed.text
    body = failed.json()
    assert body["error_code"] == "console_errors" and failed.headers["x-service-error-code"] == "console_errors"
    assert "2 error(s)" in body["error_message"] and "console.error" in body["error_message"]
    assert "broken widget" in body["error_message"] and "fail_on_console_errors" in body["error_message"]
    assert used(client, org) == 0
    # A failed image alone is the network's matter (fail_on_resource_*), not a script error.
    quiet = take(client, org, url=images_page(site, "/status?code=404"), fail_on_console_errors="true")
    assert quiet.status_code == 200, quiet.text
    assert used(client, org) == 1


@pytest.mark.parametrize(("statuses", "source", "fails"), [
    (["5xx"], "/status?code=503", True),
    (["404"], "/status?code=404", True),
    ("404,410", "/status?code=410", True),
    (["5xx"], "/status?code=404", False),
    (["4xx", "5xx"], "/tall.html", False),
], ids=["class", "code", "comma-list", "other-class", "success"])
def test_resource_statuses_fail_the_capture_naming_the_resource(
        client: httpx.Client, org: Org, site: Site, statuses: object, source: str, fails: bool) -> None:
    response = take(client, org, url=images_page(site, source), fail_on_resource_status=statuses)
    if not fails:
        assert response.status_code == 200, response.text
        return
    assert response.status_code == 500, response.text
    body = response.json()
    assert body["error_code"] == "resource_failed"
    assert site.url(source) in body["error_message"] and "fail_on_resource_status" in body["error_message"]
    assert used(client, org) == 0


def test_the_main_document_is_not_a_resource(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/status?code=404"), ignore_host_errors="true",
                    fail_on_resource_status="4xx")
    assert response.status_code == 200, response.text


def test_resources_that_do_not_load_fail_the_capture_but_blocked_ones_do_not(
        client: httpx.Client, org: Org, site: Site) -> None:
    unreachable = f"http://127.0.0.1:{closed_port()}/logo.png"
    failed = take(client, org, url=images_page(site, "/tall.html", unreachable), fail_on_resource_load_failure="true")
    assert failed.status_code == 500, failed.text
    message = failed.json()["error_message"]
    assert failed.json()["error_code"] == "resource_failed"
    assert unreachable in message and "fail_on_resource_load_failure" in message
    assert take(client, org, url=images_page(site, unreachable)).status_code == 200  # only when asked
    blocked = take(client, org, url=images_page(site, unreachable), fail_on_resource_load_failure="true",
                   block_requests="*/logo.png")
    assert blocked.status_code == 200, blocked.text
    assert used(client, org) == 2


def test_nothing_one_capture_heard_reaches_the_next(client: httpx.Client, org: Org, site: Site) -> None:
    """The organisation's kept pages listen for one job only: a later job hears its own page alone."""
    for _ in range(3):
        noisy = take(client, org, url=site.url("/evidence/console.html"), metadata_console="true",
                     response_type="json")
        assert noisy.json()["metadata"]["console"]["errors"] == 2
    for _ in range(4):
        quiet = take(client, org, url=site.url("/tall.html"), metadata_console="true", response_type="json")
        assert quiet.json()["metadata"]["console"] == {"messages": [], "errors": 0, "dropped": 0}
    plain = take(client, org, url=site.url("/tall.html"), fail_on_console_errors="true")
    assert plain.status_code == 200, plain.text


def test_wait_for_expression_captures_once_the_page_says_it_is_ready(
        client: httpx.Client, org: Org, site: Site) -> None:
    page = site.url("/evidence/ready-late.html")
    assert near(rgb_at(decode(take(client, org, url=page).content), 10, 10), RED)
    ready = take(client, org, url=page, wait_for_expression="window.app && window.app.ready",
                 metadata_timings="true", response_type="json", format="png")
    assert ready.status_code == 200, ready.text
    timings = ready.json()["metadata"]["timings"]
    assert timings["fired"] == "expression" and timings["timed_out"] == []
    assert timings["stages_ms"]["waits"] >= 400  # the page is ready 600 ms after its load
    shot = take(client, org, url=page, wait_for_expression="() => window.app?.ready === true")
    assert near(rgb_at(decode(shot.content), 10, 10), GREEN)


def test_an_expression_that_throws_or_never_holds(client: httpx.Client, org: Org, site: Site) -> None:
    page = site.url("/evidence/ready-late.html")
    thrown = take(client, org, url=page, wait_for_expression="window.app.ready")
    assert thrown.status_code == 400, thrown.text
    assert thrown.json()["error_code"] == "request_not_valid"
    assert thrown.json()["error_details"][0]["field"] == "wait_for_expression"
    never = take(client, org, url=page, wait_for_expression="window.never === true", navigation_timeout="1")
    assert never.status_code == 500 and never.json()["error_code"] == "timeout_error", never.text
    assert "wait_for_expression" in never.json()["error_message"]
    assert used(client, org) == 0


@pytest.mark.parametrize(("params", "timed_out"), [
    ({"url": "/evidence/ready-late.html", "wait_for_expression": "window.never === true"}, "wait_for_expression"),
    ({"url": "/evidence/ready-late.html", "wait_for_selector": "#never"}, "wait_for_selector"),
    ({"url": "/three-hanging.html", "wait_until": "networkidle0"}, "wait_until"),
    ({"url": "/never-loads.html"}, "wait_until"),
], ids=["expression", "selector", "network-idle", "load"])
def test_best_attempt_captures_when_a_wait_runs_out_and_says_so(
        client: httpx.Client, org: Org, site: Site, params: dict[str, str], timed_out: str) -> None:
    # A failing wait_for_selector waits out the whole timeout: kept short. best_attempt's waits then give up
    # a quarter of it (1 s) before the deadline, or after navigation_timeout (2 s).
    params = {**params, "url": site.url(params["url"]), "navigation_timeout": "2", "timeout": "4"}
    failed = take(client, org, **params)
    assert failed.status_code == 500 and failed.json()["error_code"] == "timeout_error", failed.text
    response = take(client, org, **params, best_attempt="true", metadata_timings="true", response_type="json")
    assert response.status_code == 200, response.text
    assert response.headers["x-service-wait-timed-out"] == timed_out
    timings = response.json()["metadata"]["timings"]
    assert (timings["fired"], timings["timed_out"]) == ("best_attempt", [timed_out])
    assert server_timing(response)["fired"] == (None, "best_attempt")
    assert decode(client.get(response.json()["screenshot_url"]).content).width == 400  # the page as it was
    assert used(client, org) == 1


def test_server_timing_on_every_capture(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/tall.html"))
    assert response.status_code == 200
    metrics = server_timing(response)
    for stage in ("queue", "context", "navigation", "preparation", "capture"):
        duration, description = metrics[stage]
        assert duration is not None and duration >= 0 and description == STAGES[stage], stage
    assert "waits" not in metrics and "encode" not in metrics  # nothing waited for, Chromium's own PNG
    assert metrics["fired"] == (None, "load")
    rendering_ms = float(response.headers["x-service-rendering-seconds"]) * 1000
    assert sum(d for name, (d, _) in metrics.items() if d is not None and name != "queue") <= rendering_ms + 1
    resized = take(client, org, url=site.url("/tall.html"), image_width="200", wait_until="networkidle0",
                   metadata_timings="true", response_type="json")
    timings = resized.json()["metadata"]["timings"]
    assert timings["fired"] == "network_idle" and timings["stages_ms"]["waits"] >= 400  # 500 ms of quiet
    assert timings["stages_ms"]["encode"] > 0 and timings["stages_ms"]["store"] >= 0  # json: stored
    assert list(timings["stages_ms"]) == [stage for stage in STAGES if stage in timings["stages_ms"]]


def test_a_cache_hit_says_nothing_was_captured(client: httpx.Client, org: Org, site: Site) -> None:
    params = {"url": site.url("/tall.html"), "cache": "true", "cache_key": "evidence", "metadata_timings": "true",
              "response_type": "json"}
    first = take(client, org, **params)
    assert first.json()["metadata"]["timings"]["fired"] == "load"
    hit = take(client, org, **params)
    assert hit.json()["metadata"]["timings"] == {"stages_ms": {}, "fired": "cache", "timed_out": []}
    assert server_timing(hit) == {"fired": (None, "cache")}


@pytest.mark.parametrize(("value", "fragment"), [
    ("6xx", "'6xx' is not an HTTP status"),
    ("99", "'99' is not an HTTP status"),
    ("abc", "'abc' is not an HTTP status"),
])
def test_bad_resource_statuses_are_refused_by_name(client: httpx.Client, org: Org, site: Site, value: str,
                                                  fragment: str) -> None:
    response = take(client, org, url=site.url("/tall.html"), fail_on_resource_status=value)
    assert response.status_code == 400, response.text
    detail = response.json()["error_details"][0]
    assert detail["field"] == "fail_on_resource_status" and fragment in detail["message"]
    assert used(client, org) == 0


# --- the accessibility tree -----------------------------------------------------------------------------


OUTLINE_TREE = """- banner:
  - navigation:
    - link "Pricing":
      - /url: /pricing
    - link "About us":
      - /url: /about
- main:
  - heading "Quarterly report" [level=1]
  - paragraph: Revenue grew.
  - heading "Details" [level=2]
  - button "Download"
  - img "A bar chart\""""


def test_the_accessibility_tree_as_a_format_and_as_metadata(client: httpx.Client, org: Org, site: Site) -> None:
    page = site.url("/evidence/outline.html")
    aria = take(client, org, url=page, format="aria")
    assert aria.status_code == 200, aria.text
    assert aria.headers["content-type"] == "application/yaml"
    assert aria.text == OUTLINE_TREE and "secret draft" not in aria.text
    section = take(client, org, url=page, format="aria", selector="#details")
    assert section.text == '- heading "Details" [level=2]\n- button "Download"\n- img "A bar chart"'
    assert take(client, org, url=page, format="aria", selector="#nothing-here").text == OUTLINE_TREE
    described = take(client, org, url=page, metadata_accessibility="true", response_type="json")
    body = described.json()
    assert body["metadata"]["accessibility"] == OUTLINE_TREE
    stored = client.get(body["accessibility"]["url"])
    assert stored.status_code == 200 and stored.text == OUTLINE_TREE
    image = take(client, org, url=page, metadata_accessibility="true")
    assert image.headers["content-type"] == "image/png"
    assert client.get(image.headers["x-service-accessibility-url"]).text == OUTLINE_TREE
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", image.headers["x-service-accessibility-expires"])


# --- certified captures ---------------------------------------------------------------------------------


def verify(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "service.cli", "verify", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_a_certified_capture_and_its_offline_check(client: httpx.Client, org: Org, site: Site,
                                                   tmp_path: Path) -> None:
    key = client.get("/v1/screenshot/certify/public-key").json()
    assert key["algorithm"] == "Ed25519" and len(base64.b64decode(key["public_key"])) == 32
    redirect = site.url("/redirect?" + urlencode({"to": "/evidence/outline.html"}))
    response = take(client, org, url=redirect, certify="true", response_type="json", metadata_content="true",
                    metadata_page_title="true", metadata_accessibility="true", cookies="session=s3cr3t-cookie",
                    authorization="Bearer s3cr3t-token", format="jpeg")
    assert response.status_code == 200, response.text
    body = response.json()
    certificate_bytes = client.get(body["certificate"]["url"]).content
    assert response.headers["x-service-certificate-url"] == body["certificate"]["url"]
    assert b"s3cr3t" not in certificate_bytes  # the caller's secrets are named, never written
    certificate = json.loads(certificate_bytes)
    manifest = certificate["manifest"]
    assert (certificate["key_id"], certificate["public_key"]) == (key["key_id"], key["public_key"])
    assert manifest["requested_url"] == redirect and manifest["final_url"] == site.url("/evidence/outline.html")
    assert manifest["http_status"] == 200 and manifest["redacted"] == ["authorization", "cookies"]
    assert manifest["options"]["format"] == "jpeg" and "cookies" not in manifest["options"]
    assert manifest["metadata"]["page_title"] == "outline"
    assert manifest["started_at"] < manifest["finished_at"] and manifest["finished_at"].endswith("Z")
    assert manifest["service"]["name"] == "screenshot-service" and manifest["chromium"].count(".") == 3
    files = {"shot.jpg": client.get(body["screenshot_url"]).content,
             "page.html": client.get(body["content"]["url"]).content,
             "tree.yaml": client.get(body["accessibility"]["url"]).content}
    assert [(a["name"], a["media_type"]) for a in manifest["artefacts"]] == [
        ("output", "image/jpeg"), ("content", "text/html; charset=utf-8"), ("accessibility", "application/yaml")]
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "certificate.json").write_bytes(certificate_bytes)
    (tmp_path / "key.pem").write_text(key["pem"])
    paths = [str(tmp_path / name) for name in files]
    checked = verify(str(tmp_path / "certificate.json"), *paths, "--public-key", key["public_key"])
    assert checked.returncode == 0, checked.stderr
    assert "Signature valid" in checked.stdout and "(the pinned key)" in checked.stdout
    assert f"OK  {tmp_path / 'shot.jpg'}: the capture's output" in checked.stdout
    assert verify(str(tmp_path / "certificate.json"), *paths, "--public-key", str(tmp_path / "key.pem")).returncode == 0
    # One byte of an image changed.
    changed = bytearray(files["shot.jpg"])
    changed[len(changed) // 2] ^= 1
    (tmp_path / "shot.jpg").write_bytes(bytes(changed))
    failed = verify(str(tmp_path / "certificate.json"), *paths)
    assert failed.returncode == 1 and "shot.jpg is not an artefact of this capture" in failed.stderr
    (tmp_path / "shot.jpg").write_bytes(files["shot.jpg"])
    # The manifest changed (and its artefact's hash with it, as a forger would).
    forged = json.loads(certificate_bytes)
    forged["manifest"]["final_url"] = "https://example.com/"
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    failed = verify(str(tmp_path / "forged.json"), *paths)
    assert failed.returncode == 1 and "the signature does not match the manifest" in failed.stderr
    # Signed again with another key: valid only until the service's key is required.
    other = Ed25519PrivateKey.generate()
    resigned = certificates.sign(forged["manifest"], other)
    (tmp_path / "resigned.json").write_text(json.dumps(resigned))
    assert verify(str(tmp_path / "resigned.json"), *paths).returncode == 0
    failed = verify(str(tmp_path / "resigned.json"), *paths, "--public-key", key["public_key"])
    assert failed.returncode == 1 and f"not by the pinned key {key['key_id']}" in failed.stderr
    assert verify(str(tmp_path / "missing.json")).returncode == 2


def test_every_process_signs_with_one_key(redis_url: str, tmp_path: Path) -> None:
    """The generated key is made once and shared through Redis (APIs and workers on several hosts sign and publish
    the same); an operator's key file takes its place."""
    connections = [redis.Redis.from_url(redis_url) for _ in range(2)]
    try:
        first, second = (certificates.public_raw(certify_key("", connection)) for connection in connections)
        assert first == second
        (tmp_path / "mine.pem").write_bytes(certificates.new_private_key_pem())
        mine = certificates.public_raw(certify_key(str(tmp_path / "mine.pem"), connections[0]))
        assert mine != first
        assert certificates.public_raw(certificates.load_private_key((tmp_path / "mine.pem").read_bytes())) == mine
        with pytest.raises(NoCertifyKey, match="SCREENSHOT_CERTIFY_KEY_FILE"):
            certify_key("", None)
    finally:
        for connection in connections:
            connection.close()


# --- HAR ------------------------------------------------------------------------------------------------


HAR_SCHEMAS = ROOT / "tests" / "sdk" / "node_modules" / "har-schema" / "lib"


def validate_har(har: dict) -> None:
    """Against the HAR 1.2 JSON schema of the npm package har-schema (ahmadnassri/har-schema, ISC)."""
    schemas = {path.name: json.loads(path.read_text()) for path in HAR_SCHEMAS.glob("*.json")}
    registry = Registry().with_resources(
        (schema["$id"].rstrip("#"), Resource.from_contents(schema, default_specification=DRAFT6))
        for schema in schemas.values())
    Draft6Validator(schemas["har.json"], registry=registry).validate(har)


def test_the_page_s_traffic_as_har(client: httpx.Client, org: Org, site: Site) -> None:
    page = site.url("/evidence/traffic.html")
    response = take(client, org, url=page, har="true", har_content="embed", response_type="json",
                    cookies="session=s3cr3t-cookie", authorization="Bearer s3cr3t-token",
                    headers="X-Api-Token: s3cr3t-header")
    assert response.status_code == 200, response.text
    assert response.headers["x-service-har-url"] == response.json()["har"]["url"]
    stored = client.get(response.json()["har"]["url"])
    assert b"s3cr3t" not in stored.content  # not in headers, cookies, nor the echo's body
    har = stored.json()
    validate_har(har)
    log = har["log"]
    assert (log["version"], log["creator"]["name"], log["pages"][0]["title"]) == ("1.2", "screenshot-service",
                                                                                "traffic")
    assert log["pages"][0]["pageTimings"]["onLoad"] > 0
    by_url = {entry["request"]["url"]: entry for entry in log["entries"]}
    assert list(by_url)[0] == page  # the document first, then what it asked for
    for path, status in (("/evidence/style.css", 200), ("/state/cached.js", 200), ("/status?code=404", 404),
                         ("/redirect?to=/evidence/style.css%3Fagain", 302), ("/evidence/style.css?again", 200),
                         ("/echo?from=page&n=1", 200)):
        assert by_url[site.url(path)]["response"]["status"] == status, path
    document = by_url[page]
    assert document["response"]["content"]["text"] == httpx.get(page).text
    assert document["_resourceType"] == "document" and document["timings"]["wait"] >= 0
    sent = {h["name"].lower(): h["value"] for h in document["request"]["headers"]}
    assert sent["authorization"] == "[redacted]" and sent["x-api-token"] == "[redacted]"
    assert {"name": "session", "value": "[redacted]"} in document["request"]["cookies"]
    redirect = by_url[site.url("/redirect?to=/evidence/style.css%3Fagain")]
    assert redirect["response"]["redirectURL"] == "/evidence/style.css?again"
    style = by_url[site.url("/evidence/style.css")]["response"]["content"]
    assert (style["mimeType"], style["text"]) == ("text/css", "body { color: #123456; }")
    echo = by_url[site.url("/echo?from=page&n=1")]["request"]["queryString"]
    assert echo == [{"name": "from", "value": "page"}, {"name": "n", "value": "1"}]
    plain = take(client, org, url=page, har="true", response_type="json")
    omitted = client.get(plain.json()["har"]["url"]).json()
    validate_har(omitted)
    assert all("text" not in entry["response"]["content"] for entry in omitted["log"]["entries"])


@pytest.mark.parametrize("secrets", ["request-context", "url-credentials"])
def test_har_bodies_in_base64_hold_no_secret(client: httpx.Client, org: Org, site: Site, secrets: str) -> None:
    """A same-origin resource served as application/octet-stream echoes its request: its body would go into the
    HAR base64-encoded, with the caller's cookie, bearer token, header and the Basic token of the URL's
    credentials inside. No secret may show in any encoding: such a body is left out, and said so."""
    if secrets == "request-context":
        params = {"url": site.url("/evidence/binary-echo.html"), "cookies": "session=s3cr3t-cookie",
                  "authorization": "Bearer s3cr3t-token", "headers": "X-Api-Token: s3cr3t-header"}
        hidden = ["s3cr3t-cookie", "s3cr3t-token", "s3cr3t-header"]
    else:
        params = {"url": site.url("/evidence/binary-echo.html").replace("://", "://s3cr3t-user:s3cr3t-pass@")}
        hidden = ["s3cr3t-user", "s3cr3t-pass", "s3cr3t-user:s3cr3t-pass"]
    # The echo's answer must be in before the shot (a loaded machine took it first once): its element says so.
    response = take(client, org, har="true", har_content="embed", response_type="json", wait_for_selector="#echoed",
                    **params)
    assert response.status_code == 200, response.text
    stored = client.get(response.json()["har"]["url"]).content
    texts = [stored.decode()]
    entries = json.loads(stored)["log"]["entries"]
    for entry in entries:
        content = entry["response"]["content"]
        if content.get("encoding") == "base64":
            texts.append(base64.b64decode(content["text"]).decode("utf-8", "replace"))
    for secret in hidden:
        encoded = base64.b64encode(secret.encode()).decode()
        assert not any(secret in text or encoded in text for text in texts), secret
    echo = next(entry for entry in entries if entry["request"]["url"].endswith("/echo-binary"))
    assert echo["response"]["content"]["comment"].startswith("body left out: it holds a secret")
    assert echo["response"]["status"] == 200


def test_har_content_needs_har(client: httpx.Client, org: Org, site: Site) -> None:
    response = take(client, org, url=site.url("/tall.html"), har_content="embed")
    assert response.status_code == 400
    assert response.json()["error_details"] == [{"field": "har_content", "message": "needs har=true"}]


def test_a_har_stays_within_its_bound(site: Site) -> None:
    """Past SCREENSHOT_HAR_MAX_BYTES the bodies go first, largest first, then the latest entries."""
    page = site.url("/evidence/traffic.html")

    async def main() -> list[bytes]:
        supervisor = TabPool(RenderSettings())
        try:
            tab = await supervisor.acquire()
            embed = TakeOptions(url=page, har=True, har_content="embed")
            recorders = [HarRecorder(tab.page, TakeOptions(url=page, har=True), max_bytes=10**7),
                         HarRecorder(tab.page, embed, max_bytes=10**7)]
            await tab.page.goto(page, wait_until="networkidle")
            omitted, embedded = [await recorder.har("156", "0") for recorder in recorders]
            bounded = HarRecorder(tab.page, embed, max_bytes=len(omitted) + 3000)
            tiny = HarRecorder(tab.page, embed, max_bytes=len(omitted) // 2)
            await tab.page.goto(page, wait_until="networkidle")
            result = [omitted, embedded, await bounded.har("156", "0"), await tiny.har("156", "0")]
            supervisor.release_soon(tab)
            return result
        finally:
            await supervisor.close()

    omitted, embedded, bounded, tiny = asyncio.run(asyncio.wait_for(main(), 60))
    assert len(embedded) > len(omitted) + 20_000 and "comment" not in json.loads(embedded)["log"]
    log = json.loads(bounded)["log"]
    assert len(bounded) <= len(omitted) + 3000 and "1 bodies left out (SCREENSHOT_HAR_MAX_BYTES)" in log["comment"]
    assert len(log["entries"]) == 7  # every request still there
    document, *others = log["entries"]
    assert "text" not in document["response"]["content"] and "left out" in document["response"]["content"]["comment"]
    assert any("text" in entry["response"]["content"] for entry in others)  # the smaller bodies stayed
    tiny_log = json.loads(tiny)["log"]
    assert len(tiny) <= len(omitted) // 2 and "entries left out" in tiny_log["comment"]
    assert 0 < len(tiny_log["entries"]) < 7
    for data in (bounded, tiny):
        validate_har(json.loads(data))


# --- quality flags --------------------------------------------------------------------------------------


CHALLENGES = sorted(path.name.removesuffix(".html.gz")
                    for path in (ROOT / "tests" / "material" / "bot_challenges").glob("*.html.gz"))


def quality(client: httpx.Client, org: Org, url: str, **params: str) -> tuple[dict, httpx.Response]:
    response = take(client, org, url=url, metadata_quality="true", response_type="json", **params)
    assert response.status_code == 200, response.text
    found = response.json()["metadata"]["quality"]
    assert response.headers["x-service-quality"] == (",".join(found["flags"]) or "ok")
    assert list(found["details"]) == found["flags"]
    return found, response


@pytest.mark.parametrize(("page", "params", "flags"), [
    ("/quality/blank.html", {}, ["blank"]),
    ("/quality/blank.html", {"format": "html"}, ["blank"]),
    ("/quality/captcha-wall.html", {}, ["bot_challenge"]),
    ("/quality/contact-form.html", {}, []),
    ("/quality/datadome.html", {}, ["bot_challenge"]),
    ("/quality/consent-wall.html", {}, ["consent_wall"]),
    ("/quality/consent-bar.html", {}, []),
    ("/quality/consent-wall.html", {"block_cookie_banners": "true"}, []),
    ("/quality/pending.html", {}, ["pending_requests"]),
    ("/status?code=404", {"ignore_host_errors": "true"}, ["http_error"]),
    ("/evidence/outline.html", {}, []),
], ids=["blank-image", "blank-document", "captcha-wall", "captcha-on-a-form", "datadome", "consent-wall",
        "consent-bar", "consent-wall-refused", "pending", "http-error", "a-page"])
def test_each_quality_flag_on_a_page_made_for_it(client: httpx.Client, org: Org, site: Site, page: str,
                                                 params: dict[str, str], flags: list[str]) -> None:
    found, _ = quality(client, org, site.url(page), **params)
    assert found["flags"] == flags, found
    details = found["details"]
    if "blank" in flags and not params:
        assert details["blank"]["colour"] == [255, 255, 255]
    if "bot_challenge" in flags:
        assert details["bot_challenge"]["vendor"] == ("DataDome" if "datadome" in page else "CAPTCHA")
    if "http_error" in flags:
        assert details["http_error"] == {"status": 404}
    if "consent_wall" in flags:
        assert details["consent_wall"]["dialog"] and "cookies" in details["consent_wall"]["text"]
    if "pending_requests" in flags:
        assert details["pending_requests"] == {"count": 1, "urls": [site.url("/slow?ms=15000")]}


@pytest.mark.parametrize("name", CHALLENGES)
def test_real_bot_challenges_are_flagged(client: httpx.Client, org: Org, site: Site, name: str) -> None:
    found, _ = quality(client, org, site.url(f"/challenge/{name}.html"), ignore_host_errors="true")
    assert found["flags"][:1] == ["bot_challenge"] and "http_error" in found["flags"], found
    assert found["details"]["bot_challenge"]["vendor"] == "Cloudflare"
    assert found["details"]["http_error"] == {"status": 403}


@pytest.mark.parametrize("name", pages.REAL_PAGES)
def test_the_saved_real_pages_raise_no_flag_and_have_playwright_s_tree(
        client: httpx.Client, org: Org, site: Site, plain: PlainBrowser, name: str) -> None:
    """No quality flag fires on a real page, and its accessibility tree is Playwright's own, character for
    character."""
    url = site.url(f"/real/{name}.html")
    found, response = quality(client, org, url, metadata_accessibility="true", viewport_width="1280",
                              viewport_height="1024")
    assert found == {"flags": [], "details": {}}
    reference = plain.aria_snapshot(url)
    assert response.json()["metadata"]["accessibility"] == reference
    assert "- heading " in reference and "- link " in reference  # a page's outline, not an empty tree
