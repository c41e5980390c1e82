"""The hosted API's official SDKs against this service, unchanged but for the base URL.

Python: `screenshotone` (PyPI, pinned in requirements.lock); Node: `screenshotone-api-sdk` (npm, pinned in
tests/sdk/package-lock.json), driven by tests/sdk/node_calls.mjs. Every builder method of each SDK is
called on a real page; each call gets the output it asks for (decoded and measured), or the documented
error for the reason docs/migrating.md gives. The tables must name every
builder method the installed SDKs have: a new SDK version's new method fails the test until it is here.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import re
import subprocess
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import boto3
import httpx
import pytest
import pyvips
import screenshotone.sdk as python_sdk

from service.settings import default_workers
from tests.conftest import ROOT, Org, RunningService, create_org
from tests.integration.test_proxies import PROXY_HOST, start_tinyproxy
from tests.support.archive_tools import archive_problems
from tests.support.receivers import Receiver, vision_answer
from tests.support.servers import S3Server, running_service, s3_server
from tests.support.site import Site

pytestmark = pytest.mark.browser
NODE_DRIVER = ROOT / "tests" / "sdk" / "node_calls.mjs"
NODE_MODULES = ROOT / "tests" / "sdk" / "node_modules"
ANY = object()  # a header that must be there, whatever its value


@dataclass(frozen=True)
class Case:
    """One parameter as an SDK sends it: its value, what else the call needs, and what comes back.
    `expect`: png, jpeg, pdf, json, html or accepted (async), or `error:<code>` with docs/migrating.md's reason."""

    value: Any
    expect: str = "png"
    companions: tuple[tuple[str, Any], ...] = ()
    size: tuple[int | None, int | None] = (None, None)
    headers: dict[str, Any] = field(default_factory=dict)  # hosted names (SCREENSHOT_HOSTED_HEADER_NAMES)


def full_page(value: Any, **kwargs: Any) -> Case:
    return Case(value, companions=(("full_page", True),), **kwargs)


def pdf(value: Any) -> Case:
    return Case(value, "pdf", (("format", "pdf"),))


def clip(name: str, value: int) -> Case:
    rest = tuple((other, v) for other, v in (("clip_x", 0), ("clip_y", 0), ("clip_width", 50), ("clip_height", 40))
                 if other != name)
    return Case(value, companions=rest, size=(50, 40))


def geolocation(name: str, value: float) -> Case:
    rest = tuple((other, v) for other, v in (("geolocation_latitude", 52.52), ("geolocation_longitude", 13.40),
                                             ("geolocation_accuracy", 10)) if other != name)
    return Case(value, companions=rest)


def vision(name: str, value: Any) -> Case:
    rest = tuple((other, v) for other, v in (("openai_api_key", "sk-test-good"), ("vision_prompt", "What is it?"),
                                             ("vision_max_tokens", 40)) if other != name)
    return Case(value, companions=rest, headers={"x-screenshotone-vision-completion": ANY})


def webhook(name: str, value: Any) -> Case:
    rest = tuple((other, v) for other, v in (("async", True), ("webhook_url", "{hook}")) if other != name)
    return Case(value, "accepted", rest)


SDK_BUCKET = "sdk-bucket"  # in the environment's local S3 server (moto, any credentials)
STORE = (("store", True), ("storage_endpoint", "{s3}"), ("storage_bucket", SDK_BUCKET),
         ("storage_path", "sdk/{reference}"), ("storage_access_key_id", "sdk-key"),
         ("storage_secret_access_key", "sdk-secret"))


def stored(name: str, value: Any, headers: dict[str, Any] | None = None) -> Case:
    """A store=true call (the result in the caller's bucket): the key and bucket come back in headers."""
    return Case(value, companions=tuple((other, v) for other, v in STORE if other != name),
                headers={"x-screenshotone-store-key": ANY, "x-screenshotone-store-bucket": SDK_BUCKET,
                         **(headers or {})})


# Every parameter either SDK sends, by its name on the wire.
TAKE: dict[str, Case] = {
    "selector": Case("#box", size=(120, 60)),
    "selector_algorithm": Case("clip", companions=(("selector", "#box"),), size=(120, 60)),
    "selector_scroll_into_view": Case(False, companions=(("selector", "#end"),)),
    "error_on_selector_not_found": Case(True, "error:selector_not_found", (("selector", "#nothing"),)),
    "response_type": Case("json", "json"),
    "capture_beyond_viewport": Case(True),
    "include_shadow_dom": Case(True, "html", (("format", "html"),)),
    "attachment_name": Case("shot.png", headers={"content-disposition": 'attachment; filename="shot.png"'}),
    "external_identifier": Case("ext-1", headers={"x-screenshotone-external-identifier": "ext-1"}),
    "reduced_motion": Case(True),
    "reduce_motion": Case(True),
    "media_type": Case("print"),
    "dark_mode": Case(True),
    "hide_selectors": Case(["#box", "#go"]),
    "scripts": Case("document.title = 'scripted'", headers={"x-screenshotone-page-title": "scripted"},
                    companions=(("metadata_page_title", True),)),
    "scripts_wait_until": Case(["load"], companions=(("scripts", "document.title = 'scripted'"),)),
    "styles": Case("body { background: #00ff00 }"),
    "click": Case("#go", companions=(("metadata_page_title", True),),
                  headers={"x-screenshotone-page-title": "clicked"}),
    "hover": Case("#go"),
    "error_on_click_selector_not_found": Case(False, companions=(("click", "#nothing"),)),
    "error_on_hover_selector_not_found": Case(False, companions=(("hover", "#nothing"),)),
    "full_page": Case(True, size=(1280, None)),
    "full_page_max_height": full_page(700, size=(1280, 700)),
    "full_page_algorithm": full_page("by_sections"),
    "full_page_scroll": full_page(True),
    "full_page_scroll_delay": full_page(50),
    "full_page_scroll_by": full_page(600),
    "full_page_slices": full_page(True, headers={"x-screenshotone-full-page-slices-url": ANY}),
    "full_page_slice_height": Case(1000, companions=(("full_page", True), ("full_page_slices", True)),
                                   headers={"x-screenshotone-full-page-slices-url": ANY}),
    "full_page_slice_overlap_height": Case(100, companions=(("full_page", True), ("full_page_slices", True)),
                                           headers={"x-screenshotone-full-page-slices-url": ANY}),
    "format": Case("jpeg", "jpeg"),
    "image_quality": Case(50, "jpeg", (("format", "jpeg"),)),
    "image_width": Case(640, size=(640, None)),
    "image_height": Case(512, size=(None, 512)),
    "ignore_host_errors": Case(True),
    "wait_until": Case(["domcontentloaded"]),
    "ip_country_code": Case("us"),
    "servers_region": Case("eu"),  # the service below labels its workers eu
    "omit_background": Case(True),
    "viewport_device": Case("iphone_13"),
    "viewport_width": Case(400, size=(400, None)),
    "viewport_height": Case(300, size=(None, 300)),
    "device_scale_factor": Case(2, companions=(("viewport_width", 400), ("viewport_height", 300)), size=(800, 600)),
    "viewport_mobile": Case(True),
    "viewport_has_touch": Case(True),
    "viewport_landscape": Case(True),
    "clip_x": clip("clip_x", 0), "clip_y": clip("clip_y", 0),
    "clip_width": clip("clip_width", 50), "clip_height": clip("clip_height", 40),
    "geolocation_latitude": geolocation("geolocation_latitude", 52.52),
    "geolocation_longitude": geolocation("geolocation_longitude", 13.40),
    "geolocation_accuracy": geolocation("geolocation_accuracy", 10),
    "block_ads": Case(True), "block_banners_by_heuristics": Case(True), "block_cookie_banners": Case(True),
    "block_chats": Case(True), "block_socials": Case(True), "block_trackers": Case(True),
    "block_requests": Case(["*.css", "*/ads/*"]),
    "block_resources": Case(["image", "font"]),
    "cache": Case(True, headers={"x-screenshotone-cache-url": ANY}),
    "cache_ttl": Case(14400, companions=(("cache", True),)),
    "cache_key": Case("sdk-key", companions=(("cache", True),)),
    "user_agent": Case("sdk-check/1"),
    "authorization": Case("Bearer sdk"),
    "headers": Case(["X-Sdk: 1"]),
    "cookies": Case(["sdk=1"]),
    "scroll_into_view": Case("#end"),
    "scroll_into_view_adjust_top": Case(10, companions=(("scroll_into_view", "#end"),)),
    "proxy": Case("{proxy}"),
    "proxy_bypass_hosts": Case(["*.example.com"], companions=(("proxy", "{proxy}"),)),
    "time_zone": Case("Europe/Berlin"),
    "delay": Case(0),
    "timeout": Case(30),
    "navigation_timeout": Case(20),
    "wait_for_selector": Case("#late"),
    "wait_for_selector_algorithm": Case("at_least_one", companions=(("wait_for_selector", "#late"),)),
    "store": stored("store", True),
    "storage_path": stored("storage_path", "sdk/{date}/{reference}"),
    "storage_bucket": stored("storage_bucket", SDK_BUCKET),
    "storage_class": stored("storage_class", "STANDARD"), "storage_acl": stored("storage_acl", "public-read"),
    "storage_endpoint": stored("storage_endpoint", "{s3}"),
    "storage_access_key_id": stored("storage_access_key_id", "sdk-key"),
    "storage_secret_access_key": stored("storage_secret_access_key", "sdk-secret"),
    "storage_return_location": stored("storage_return_location", True,
                                      {"x-screenshotone-store-location": ANY}),
    "request_gpu_rendering": Case(True, headers={"x-screenshotone-gpu-rendering": "software"}),
    "fail_if_gpu_rendering_fails": Case(True, "error:request_not_valid"),
    "pdf_print_background": pdf(True), "pdf_fit_one_page": pdf(True), "pdf_landscape": pdf(True),
    "pdf_paper_format": pdf("a5"), "pdf_margin": pdf("10px"), "pdf_margin_top": pdf("10px"),
    "pdf_margin_right": pdf("10px"), "pdf_margin_bottom": pdf("10px"), "pdf_margin_left": pdf("10px"),
    "openai_api_key": vision("openai_api_key", "sk-test-good"),
    "vision_prompt": vision("vision_prompt", "What is it?"),
    "vision_max_tokens": vision("vision_max_tokens", 40),
    "bypass_csp": Case(True),
    "metadata_image_size": Case(True, headers={"x-screenshotone-image-width": "1280"}),
    "metadata_fonts": Case(True),
    "metadata_icon": Case(True, headers={"x-screenshotone-icon": ANY}),
    "metadata_open_graph": Case(True, headers={"x-screenshotone-open-graph": '{"og:title":"SDK page"}'}),
    "metadata_page_title": Case(True, headers={"x-screenshotone-page-title": "SDK page"}),
    "metadata_content": Case(True, headers={"x-screenshotone-content-url": ANY}),
    "metadata_content_format": Case("markdown", companions=(("metadata_content", True),),
                                    headers={"x-screenshotone-content-url": ANY}),
    "metadata_http_response_status_code": Case(True, headers={"x-screenshotone-http-status-code": "200"}),
    "metadata_http_response_headers": Case(True, headers={"x-screenshotone-http-headers": ANY}),
    "async": webhook("async", True),
    "webhook_url": webhook("webhook_url", "{hook}"),
    "webhook_sign": Case(True, "accepted", (("async", True), ("webhook_url", "{hook}"))),
    "webhook_errors": Case(True, "accepted", (("async", True), ("webhook_url", "{hook}"))),
    "fail_if_content_contains": Case(["not on the page"]),
    "fail_if_content_missing": Case(["probe text"]),
    "fail_if_request_failed": Case("*/nothing-fails/*"),
    # Python only (Node signs every call itself): a wrong signature.
    "signature": Case("0" * 64, "error:signature_is_not_valid"),
}


@dataclass
class Environment:
    service: RunningService
    org: Org
    page: str
    proxy: str
    hook: Receiver
    s3: S3Server

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return (value.replace("{proxy}", self.proxy).replace("{hook}", self.hook.url("/hook"))
                    .replace("{s3}", self.s3.url))
        return value


@pytest.fixture(scope="module")
def environment(redis_url: str, site: Site, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    """A service as a team moving from the hosted API runs it: hosted header names on, a vision provider
    (a local server speaking its protocol), a proxy for ip_country_code=us, workers labelled region eu, and
    a local S3 server (moto) as the caller's store and the default store endpoint."""
    directory = tmp_path_factory.mktemp("sdk-proxy")
    proxy, port = start_tinyproxy(directory, None)
    proxy_url = f"http://{PROXY_HOST}:{port}/"
    try:
        with Receiver(vision_answer) as provider, Receiver() as hook, s3_server() as s3, running_service(
                redis_url.rsplit("/", 1)[0] + "/7", tmp_path_factory.mktemp("sdk-service"),
                workers=default_workers(), SCREENSHOT_HOSTED_HEADER_NAMES="true",
                SCREENSHOT_VISION_BASE_URL=provider.url("/v1"), SCREENSHOT_VISION_MODEL="test-vision-1",
                SCREENSHOT_PROXY_US=proxy_url, SCREENSHOT_REGIONS="eu",
                SCREENSHOT_STORE_ENDPOINT=s3.url) as service:
            org = asyncio.run(create_org(service.redis_url, quota=100000, concurrency=10))
            boto3.client("s3", endpoint_url=s3.url, region_name="us-east-1").create_bucket(Bucket=SDK_BUCKET)
            yield Environment(service, org, site.url("/sdk.html"), proxy_url, hook, s3)
    finally:
        proxy.terminate()
        proxy.wait(10)


def check(name: str, case: Case, *, ok: bool, status: int | None, code: str | None, content_type: str,
          body: bytes, headers: dict[str, str] | None) -> list[str]:
    """What is wrong with one call's outcome (nothing when it is as the case expects)."""
    problems: list[str] = []
    if case.expect.startswith("error:"):
        wanted = case.expect.removeprefix("error:")
        if ok or code != wanted:
            problems.append(f"{name}: wanted error {wanted}, got ok={ok} status={status} code={code}")
        return problems
    if case.expect == "accepted":
        if status != 202:
            problems.append(f"{name}: wanted 202 (async), got {status} {code}")
        return problems
    if not ok:
        return [f"{name}: failed with {status} {code}"]
    kinds = {"png": (b"\x89PNG", "image/png"), "jpeg": (b"\xff\xd8\xff", "image/jpeg"),
             "pdf": (b"%PDF-", "application/pdf"), "json": (b"{", "application/json"),
             "html": (b"<!DOCTYPE html>", "text/html")}
    magic, media_type = kinds[case.expect]
    if not body.startswith(magic) or not content_type.startswith(media_type):
        problems.append(f"{name}: wanted {case.expect}, got {content_type} {body[:16]!r}")
    elif case.expect in ("png", "jpeg") and case.size != (None, None):
        image = pyvips.Image.new_from_buffer(body, "")
        width, height = case.size
        if (width is not None and image.width != width) or (height is not None and image.height != height):
            problems.append(f"{name}: wanted {case.size}, got {image.width}x{image.height}")
    if case.expect == "json" and json.loads(body).get("is_successful") is not True:
        problems.append(f"{name}: JSON body is not a success: {body[:200]!r}")
    for header, value in (case.headers if headers is not None else {}).items():
        got = (headers or {}).get(header)
        if got is None or (value is not ANY and got != value):
            problems.append(f"{name}: header {header} is {got!r}, wanted {value!r}")
    return problems


# --- Python -----------------------------------------------------------------------------------------------

PYTHON_WIRE_NAMES = {"async_option": "async"}


def python_builders() -> list[str]:
    own = {"url", "html", "markdown", "query"}
    return [name for name, member in inspect.getmembers(python_sdk.TakeOptions, inspect.isfunction)
            if not name.startswith("_") and name not in own]


def test_the_table_names_every_python_builder_method() -> None:
    wire = {PYTHON_WIRE_NAMES.get(name, name) for name in python_builders()}
    assert wire - set(TAKE) == set(), "a builder method the table does not cover"


def python_call(environment: Environment, method: str) -> list[str]:
    name = PYTHON_WIRE_NAMES.get(method, method)
    case = TAKE[name]
    options = python_sdk.TakeOptions.url(environment.page)
    getattr(options, method)(environment.value(case.value))
    builders = {PYTHON_WIRE_NAMES.get(m, m): m for m in python_builders()}
    for companion, value in case.companions:
        getattr(options, builders[companion])(environment.value(value))
    client = python_sdk.Client(environment.org.access_key, environment.org.signing_key)
    try:
        raw = client.take(options)
    except python_sdk.APIErrorException as error:
        return check(name, case, ok=False, status=error.http_status_code, code=error.error_code, content_type="",
                     body=b"", headers=None)
    body = raw.read()
    headers = {key.lower(): value for key, value in raw.headers.items()}
    return check(name, case, ok=True, status=raw.status, code=None, content_type=headers.get("content-type", ""),
                 body=body, headers=headers)


def test_every_python_builder_method(environment: Environment, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(python_sdk, "API_BASE_URL", environment.service.url + "/v1/screenshot")
    with ThreadPoolExecutor(4) as pool:
        problems = [p for found in pool.map(lambda m: python_call(environment, m), python_builders()) for p in found]
    assert problems == []


# --- Node -------------------------------------------------------------------------------------------------

NODE_WIRE_NAMES = {"storageACL": "storage_acl", "openAiApiKey": "openai_api_key",
                   "scrollNavigateToURL": "scroll_navigate_to_url"}


def wire_name(method: str) -> str:
    return NODE_WIRE_NAMES.get(method) or re.sub(r"(?<!^)([A-Z])", r"_\1", method).lower()


def node_method(wire: str, builders: list[str]) -> str:
    return next(method for method in builders if wire_name(method) == wire)


def run_node(plan: dict[str, Any]) -> Any:
    assert NODE_MODULES.is_dir(), "the Node SDK is not installed: `make test` runs npm ci in tests/sdk"
    done = subprocess.run(["node", str(NODE_DRIVER)], input=json.dumps(plan), capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def node_builders() -> dict[str, list[str]]:
    return run_node({"describe": True})  # type: ignore[no-any-return]


def arguments(value: Any) -> list[Any]:
    """A Node builder's arguments: lists are its rest parameters."""
    return list(value) if isinstance(value, list) else [value]


def node_plan(environment: Environment, out: Path, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {"base": environment.service.url + "/v1/screenshot", "accessKey": environment.org.access_key,
            "signingKey": environment.org.signing_key, "out": str(out), "calls": calls}


def test_the_tables_name_every_node_builder_method() -> None:
    builders = node_builders()
    assert {wire_name(m) for m in builders["take"]} - set(TAKE) == set()
    assert {wire_name(m) for m in builders["animate"]} - {name for group in ANIMATE for name in group.methods} == set()


def test_every_node_take_builder_method(environment: Environment, tmp_path: Path) -> None:
    builders = node_builders()["take"]
    calls = []
    for method in builders:
        case = TAKE[wire_name(method)]
        methods = [[method, *arguments(environment.value(case.value))]]
        methods += [[node_method(name, builders), *arguments(environment.value(value))]
                    for name, value in case.companions]
        calls.append({"id": method, "kind": "take", "source": ["url", environment.page], "methods": methods})
    problems = []
    for result in run_node(node_plan(environment, tmp_path, calls)):
        case = TAKE[wire_name(result["id"])]
        if case.expect == "accepted":  # the Node SDK takes any 2xx as success
            problems += [] if result["ok"] else [f"{result['id']}: async call failed: {result}"]
            continue
        body = (tmp_path / result["id"]).read_bytes() if result["ok"] else b""
        problems += check(result["id"], case, ok=result["ok"], status=result.get("status"), code=result.get("code"),
                          content_type=result.get("type", ""), body=body, headers=None)
        if not result["ok"] and "thrown" not in result:
            assert result["documentationUrl"] == f"{environment.service.url}/errors/{result['code']}"
    assert problems == []


def test_both_sdks_take_the_page_as_a_web_archive(environment: Environment, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """format=wacz passes through each SDK's `format` builder unchanged: the answer is the signed WACZ (the SDKs
    have no method for `archive`, as sdks.json says; format=wacz is the archive without one)."""
    monkeypatch.setattr(python_sdk, "API_BASE_URL", environment.service.url + "/v1/screenshot")
    client = python_sdk.Client(environment.org.access_key, environment.org.signing_key)
    raw = client.take(python_sdk.TakeOptions.url(environment.page).format("wacz"))
    assert raw.headers["content-type"] == "application/wacz"
    from_python = raw.read()
    [result] = run_node(node_plan(environment, tmp_path, [
        {"id": "wacz", "kind": "take", "source": ["url", environment.page], "methods": [["format", "wacz"]]}]))
    assert result["ok"] and result["type"] == "application/wacz", result
    for data in (from_python, (tmp_path / "wacz").read_bytes()):
        assert archive_problems(data) == []
        assert f"urn:view:{environment.page}".encode() in zipfile.ZipFile(io.BytesIO(data)).read(
            "indexes/index.cdx")


@dataclass(frozen=True)
class AnimateCall:
    """Several AnimateOptions builders in one recording (each recording lasts seconds): `expect` is the
    container the call asks for, or `error:<code>`/accepted as in Case."""

    expect: str
    methods: dict[str, Any]


CONTAINERS = {"mp4": (4, b"ftyp"), "mov": (4, b"ftyp"), "webm": (0, b"\x1a\x45\xdf\xa3"), "gif": (0, b"GIF8"),
              "avi": (0, b"RIFF")}
SMALL = {"width": 320, "height": 240, "duration": 1}
ANIMATE = [
    AnimateCall("mp4", {"scenario": "scroll", "duration": 2, "scroll_delay": 100, "scroll_duration": 300,
                        "scroll_by": 400, "scroll_start_immediately": True, "scroll_start_delay": 0,
                        "scroll_back": True, "scroll_back_algorithm": "repeat", "scroll_back_after_duration": 1200,
                        "scroll_complete": False, "scroll_stop_after_duration": 1800, "scroll_easing": "linear",
                        "viewport_width": 320, "viewport_height": 240}),
    AnimateCall("mp4", {"scenario": "scroll", "duration": 2, "scroll_try_navigate": True,
                        "scroll_navigate_after": 500, "scroll_navigate_to_url": "{page}",
                        "scroll_navigate_link_hints": ["pricing", "about"], "viewport_width": 320,
                        "viewport_height": 240}),
    AnimateCall("webm", {"format": "webm", **SMALL, "viewport_width": 320, "viewport_height": 240,
                         "device_scale_factor": 1, "viewport_mobile": True, "viewport_has_touch": True,
                         "viewport_landscape": True, "dark_mode": True, "reduced_motion": True, "media_type": "screen",
                         "omit_background": False, "hide_selectors": ["#box"], "styles": "p { color: #00f }",
                         "scripts": "document.title = 'animated'", "scripts_wait_until": ["load"],
                         "time_zone": "Europe/Berlin", "geolocation_latitude": 52.52, "geolocation_longitude": 13.4,
                         "geolocation_accuracy": 10, "user_agent": "sdk-check/1", "headers": ["X-Sdk: 1"],
                         "cookies": ["sdk=1"], "authorization": "Bearer sdk", "bypass_csp": True,
                         "wait_for_selector": "#late"}),
    AnimateCall("gif", {"format": "gif", "duration": 1, "aspect_ratio": "4:3", "block_ads": True,
                        "block_cookie_banners": True, "block_chats": True, "block_trackers": True,
                        "block_banners_by_heuristics": True, "block_requests": ["*.css"],
                        "block_resources": ["font"], "cache": True, "cache_ttl": 14400, "cache_key": "sdk-animate",
                        "delay": 0, "timeout": 60, "navigation_timeout": 20, "ignore_host_errors": True,
                        "fail_if_content_contains": ["not on the page"], "request_gpu_rendering": True,
                        "response_type": "by_format", "proxy": "{proxy}"}),
    AnimateCall("mov", {"format": "mov", **SMALL, "viewport_device": "iphone_13"}),
    AnimateCall("accepted", {**SMALL, "async": True, "webhook_url": "{hook}", "webhook_sign": True}),
    AnimateCall("error:request_not_valid", {**SMALL, "fail_if_gpu_rendering_fails": True}),
    # AnimateOptions has no storageEndpoint: the service's SCREENSHOT_STORE_ENDPOINT is used.
    AnimateCall("mp4", {**SMALL, **{name: value for name, value in STORE if name != "storage_endpoint"},
                        "storage_path": "sdk/animated", "storage_class": "STANDARD", "storage_acl": "public-read",
                        "storage_return_location": True}),
    AnimateCall("mp4", {**SMALL, "proxy": "{proxy}", "proxy_bypass_hosts": ["*.example.com"]}),
]


def test_every_node_animate_builder_method(environment: Environment, tmp_path: Path) -> None:
    builders = node_builders()["animate"]
    calls = []
    for number, call in enumerate(ANIMATE):
        methods = [[node_method(name, builders), *arguments(environment.value(value).replace("{page}", environment.page)
                                                            if isinstance(value, str) else value)]
                   for name, value in call.methods.items()]
        calls.append({"id": f"animate-{number}", "kind": "animate", "source": ["url", environment.page],
                      "methods": methods})
    plan = {**node_plan(environment, tmp_path, calls), "parallel": 2}
    problems = []
    for call, result in zip(ANIMATE, run_node(plan), strict=True):
        if call.expect.startswith("error:"):
            if result["ok"] or result.get("code") != call.expect.removeprefix("error:"):
                problems.append(f"{result['id']}: wanted {call.expect}, got {result}")
        elif not result["ok"]:
            problems.append(f"{result['id']}: failed: {result}")
        elif call.expect in CONTAINERS:
            offset, magic = CONTAINERS[call.expect]
            if (tmp_path / result["id"]).read_bytes()[offset:offset + len(magic)] != magic:
                problems.append(f"{result['id']}: not {call.expect}")
    assert problems == []


def test_the_clients_url_makers_and_metadata_reader(environment: Environment, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Python: the signed GET URL it makes, and take_with_metadata's vision completion (read from the hosted
    header name). Node: its unsigned, signed and signed animate URLs."""
    monkeypatch.setattr(python_sdk, "API_BASE_URL", environment.service.url + "/v1/screenshot")
    client = python_sdk.Client(environment.org.access_key, environment.org.signing_key)
    options = python_sdk.TakeOptions.url(environment.page).viewport_width(400).hide_selectors(["#box", "#go"])
    signed = httpx.get(client.generate_take_url(options), timeout=60)
    assert signed.status_code == 200 and pyvips.Image.new_from_buffer(signed.content, "").width == 400
    forged = httpx.get(client.generate_take_url(options).replace("viewport_width=400", "viewport_width=500"))
    assert forged.status_code == 400 and forged.json()["error_code"] == "signature_is_not_valid"
    result = client.take_with_metadata(python_sdk.TakeOptions.url(environment.page).openai_api_key("sk-test-good")
                                       .vision_prompt("What colour?"))
    assert result.screenshot.read().startswith(b"\x89PNG")
    # The header holds the completion percent-encoded (UTF-8), as x-service-vision-completion does.
    assert result.vision is not None and "prompt «What colour?»" in unquote(result.vision.completion)

    [made] = run_node(node_plan(environment, tmp_path, [
        {"id": "urls", "kind": "urls", "source": ["url", environment.page], "methods": [["viewportWidth", 400]]}]))
    for kind, url in made["urls"].items():
        response = httpx.get(url, timeout=60)
        assert response.status_code == 200, (kind, response.text)
        assert response.headers["content-type"] == ("video/mp4" if kind == "signedAnimate" else "image/png")
    # Node's store(): the capture in the caller's bucket, its key and bucket read from the hosted headers.
    [kept] = run_node(node_plan(environment, tmp_path, [
        {"id": "store", "kind": "store", "source": ["url", environment.page],
         "methods": [["storageEndpoint", environment.s3.url]],
         "store": ["sdk/node-store", SDK_BUCKET, "private", "STANDARD", "sdk-key", "sdk-secret"]}]))
    assert kept["ok"] and kept["stored"] == {"key": "sdk/node-store.png", "bucket": SDK_BUCKET}, kept
    bucket = boto3.client("s3", endpoint_url=environment.s3.url, region_name="us-east-1")
    assert bucket.get_object(Bucket=SDK_BUCKET, Key="sdk/node-store.png")["Body"].read().startswith(b"\x89PNG")
    assert bucket.get_object(Bucket=SDK_BUCKET, Key="sdk/animated.mp4")["Body"].read()[4:8] == b"ftyp"


def test_webhook_deliveries_carry_the_hosted_header_names_too(environment: Environment) -> None:
    path = "/hosted-names-hook"
    accepted = httpx.get(f"{environment.service.url}/v1/screenshot/take", timeout=60, params={
        "access_key": environment.org.access_key, "url": environment.page, "async": "true",
        "webhook_url": environment.hook.url(path), "external_identifier": "order-7"})
    assert accepted.status_code == 202, accepted.text
    [delivery] = environment.hook.wait_for(path)
    assert delivery.headers["x-service-signature"] == delivery.headers["x-screenshotone-signature"]
    assert delivery.headers["x-screenshotone-external-identifier"] == "order-7"
    assert delivery.body.startswith(b"\x89PNG")
