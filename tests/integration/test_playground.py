"""The playground, end to end in a real browser against the running service: the form is the API's schema,
a capture appears inline with its headers, a refusal is shown readably, and the curl command and signed link
the page shows work when run. Also `screenshot-service sign`."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
import screenshotone.sdk as python_sdk
from playwright.sync_api import Browser, Page, sync_playwright

from render.browser.chromium import chromium_binary
from render.contract.devices import DEVICE_IDS
from render.settings import RenderSettings
from service.signatures import sign_params
from tests.conftest import Org
from tests.support.archive_tools import archive_problems
from tests.support.images import decode
from tests.support.servers import ROOT, RunningService
from tests.support.site import Site

pytestmark = pytest.mark.browser
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_binary(RenderSettings().chromium_path),
                                              args=["--no-sandbox"] if os.geteuid() == 0 else [])
        yield launched
        launched.close()


def new_org(make_org: Callable[..., Org], **kwargs: bool) -> Org:
    """`make_org` from another thread: Playwright's sync API keeps an event loop running in this one."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(make_org, **kwargs).result()


def open_playground(browser: Browser, service: RunningService, viewport: dict[str, int] = DESKTOP) -> Page:
    page = browser.new_context(viewport=viewport).new_page()  # type: ignore[arg-type]
    page.goto(f"{service.url}/playground")
    page.wait_for_selector("body[data-ready=true]")
    return page


def capture(page: Page, access_key: str, signing_key: str = "", **options: str) -> None:
    """Fill the keys and options, then submit with Enter from the access key field (the keyboard path)."""
    page.fill("#access-key", access_key)
    page.fill("#signing-key", signing_key)
    for name, value in options.items():
        control = page.locator(f"#option-{name}")
        group = page.locator(f"details:has(#option-{name})")
        if not group.evaluate("details => details.open"):
            group.locator("summary").click()  # as a person opens the option's group
        if control.evaluate("element => element.tagName") == "SELECT":
            control.select_option(value)
        else:
            control.fill(value)
    page.focus("#access-key")
    page.keyboard.press("Enter")
    page.wait_for_selector("#status:is([data-state=done], [data-state=refused], [data-state=failed])")


def shown_image(page: Page) -> tuple[int, int, list[int], list[int]]:
    """The inline image's natural size and its colours near the top and the bottom."""
    return tuple(page.locator("img#capture-output").evaluate("""async image => {
        await image.decode();
        const canvas = document.createElement('canvas');
        canvas.width = image.naturalWidth; canvas.height = image.naturalHeight;
        const context = canvas.getContext('2d');
        context.drawImage(image, 0, 0);
        const at = (y) => Array.from(context.getImageData(5, y, 1, 1).data.slice(0, 3));
        return [image.naturalWidth, image.naturalHeight, at(5), at(image.naturalHeight - 5)];
    }"""))  # type: ignore[return-value]


def test_root_redirects_to_the_playground_which_is_self_contained(service: RunningService) -> None:
    with httpx.Client(base_url=service.url) as http:
        root = http.get("/")
        assert root.status_code == 307 and root.headers["location"] == "/playground"
        page = http.get("/playground")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in page.headers["content-security-policy"]
        # No external assets: the page, its script and its style name no other origin.
        for text in (page.text, *(http.get(f"/playground/playground.{kind}").text for kind in ("js", "css"))):
            assert "http://" not in text and "https://" not in text and "//cdn" not in text
        missing = http.get("/playground/secrets.txt")
        assert missing.status_code == 404 and "no such route" in missing.json()["error_message"]


def test_the_form_is_the_options_schema(browser: Browser, service: RunningService) -> None:
    schema = {name: prop for name, prop in httpx.get(f"{service.url}/openapi.json").json()["components"]["schemas"][
        "TakeOptions"]["properties"].items() if name not in ("access_key", "signature")}
    page = open_playground(browser, service)
    groups = list(dict.fromkeys(prop["x-group"] for prop in schema.values()))
    shown = [text.rsplit(" (", 1)[0] for text in page.locator("summary").all_text_contents()]
    assert shown == groups
    for name in schema:
        assert page.locator(f"#option-{name}").count() == 1, name
    devices = page.locator("#option-viewport_device option").evaluate_all("options => options.map(o => o.value)")
    assert devices == ["", *DEVICE_IDS]
    help_text = page.locator("#option-image_quality-help").text_content() or ""
    assert "Range: 0 to 100" in help_text and "Default: 80" in help_text
    # Defaults that depend on other parameters are shown as the spec gives them, not "not set".
    assert "Default: 1280." in (page.locator("#option-viewport_width-help").text_content() or "")
    assert "Default: 1." in (page.locator("#option-device_scale_factor-help").text_content() or "")
    assert page.locator("#option-viewport_height").get_attribute("placeholder") == "1024"
    # The animate endpoint has its own options.
    page.select_option("#endpoint", "animate")
    assert page.locator("#option-scenario").count() == 1 and page.locator("#option-duration").count() == 1
    page.context.close()


def test_capture_shows_the_image_headers_and_a_curl_that_works(  # type: ignore[no-untyped-def]
        browser: Browser, service: RunningService, site: Site, make_org, tmp_path: Path) -> None:
    org = new_org(make_org)
    page = open_playground(browser, service)
    capture(page, org.access_key, url=site.url("/colours.html"), viewport_width="400", viewport_height="300",
            format="png")
    width, height, top, bottom = shown_image(page)
    assert (width, height, top, bottom) == (400, 300, [255, 0, 0], [0, 0, 255])
    headers = dict(zip(page.locator("#headers td:nth-child(1)").all_text_contents(),
                       page.locator("#headers td:nth-child(2)").all_text_contents(), strict=True))
    assert float(headers["x-service-rendering-seconds"]) > 0 and headers["content-type"] == "image/png"
    assert headers["x-service-reference"] in (page.text_content("#status") or "")
    assert page.evaluate("localStorage.length") == 0  # "remember" was not ticked
    # The curl command, run as shown, downloads the same capture.
    curl = page.input_value("#curl")
    assert org.access_key in curl
    subprocess.run(["bash", "-c", curl], cwd=tmp_path, check=True, timeout=60)
    image = decode((tmp_path / "capture.png").read_bytes())
    assert (image.width, image.height) == (400, 300)
    assert page.input_value("#signed-link") == ""  # no signing key, no link
    page.context.close()


SDK_NODE_MODULES = ROOT / "tests" / "sdk" / "node_modules"


def test_the_python_and_node_snippets_run_as_shown(  # type: ignore[no-untyped-def]
        browser: Browser, service: RunningService, site: Site, make_org, tmp_path: Path) -> None:
    org = new_org(make_org)  # the Node SDK signs every request (and must sign right), Python's take() none
    env = {**os.environ, "SCREENSHOT_SIGNING_KEY": org.signing_key}
    (tmp_path / "node_modules").symlink_to(SDK_NODE_MODULES)  # the pinned Node SDK (make test: npm ci)
    page = open_playground(browser, service)
    capture(page, org.access_key, url=site.url("/colours.html"), viewport_width="320", viewport_height="200",
            format="jpeg", full_page="false", hide_selectors="#nothing\n.none", block_ads="true")
    python, node = page.input_value("#python"), page.input_value("#node")
    assert org.signing_key not in python + node  # read from the environment, never written out
    (tmp_path / "capture.py").write_text(python)
    subprocess.run([sys.executable, "capture.py"], cwd=tmp_path, env=env, check=True, timeout=60)
    shot = decode((tmp_path / "capture.jpg").read_bytes())
    assert (shot.width, shot.height, shot.get("vips-loader")) == (320, 200, "jpegload_buffer")
    (tmp_path / "capture.jpg").unlink()
    (tmp_path / "capture.mjs").write_text(node)
    subprocess.run(["node", "capture.mjs"], cwd=tmp_path, env=env, check=True, timeout=60)
    shot = decode((tmp_path / "capture.jpg").read_bytes())
    assert (shot.width, shot.height, shot.get("vips-loader")) == (320, 200, "jpegload_buffer")
    # A recording: the Node SDK has an AnimateOptions builder (the Python one has none, and says so).
    page.select_option("#endpoint", "animate")
    capture(page, org.access_key, url=site.url("/colours.html"), format="webm", duration="1", width="160",
            height="120", aspect_ratio="4:3")
    assert "no /animate builder" in page.input_value("#python")
    (tmp_path / "capture.mjs").write_text(page.input_value("#node"))
    subprocess.run(["node", "capture.mjs"], cwd=tmp_path, env=env, check=True, timeout=60)
    assert (tmp_path / "capture.webm").read_bytes()[:4] == b"\x1a\x45\xdf\xa3"
    page.context.close()


def test_the_sdk_table_matches_the_pinned_sdks() -> None:
    """sdks.json names each builder method that differs and each parameter an SDK has no method for:
    a new SDK version fails here until the table says what changed."""
    from animate.options import NOT_FOR_RECORDINGS, AnimateOptions
    from render.contract.options import TakeOptions

    table = json.loads((ROOT / "service" / "api" / "playground" / "sdks.json").read_text())
    described = subprocess.run(["node", str(ROOT / "tests" / "sdk" / "node_calls.mjs")], input='{"describe": true}',
                               capture_output=True, text=True, check=True, timeout=60)
    node = {kind: set(methods) for kind, methods in json.loads(described.stdout).items()}
    python = {"take": {name for name, _ in inspect.getmembers(python_sdk.TakeOptions, inspect.isfunction)}}
    params = {"take": [f.alias or n for n, f in TakeOptions.model_fields.items()],
              "animate": [f.alias or n for n, f in AnimateOptions.model_fields.items()
                          if (f.alias or n) not in NOT_FOR_RECORDINGS]}
    for sdk, builders, method in (("python", python, lambda name: name),
                                  ("node", node, lambda name: re.sub(r"_([a-z0-9])", lambda m: m[1].upper(), name))):
        for kind, methods in builders.items():
            named = {name: table[sdk]["methods"].get(name) or method(name) for name in params[kind]
                     if name not in ("url", "html", "markdown")}
            missing = sorted(name for name, called in named.items() if called not in methods)
            assert missing == table[sdk]["missing"][kind], (sdk, kind)


def test_a_refusal_is_shown_readably(browser: Browser, service: RunningService, site: Site, make_org) -> None:  # type: ignore[no-untyped-def]
    page = open_playground(browser, service)
    capture(page, new_org(make_org).access_key, url=site.url("/colours.html"), image_quality="500")
    error = page.locator(".error")
    assert "400 request_not_valid" in (error.locator(".error-code").text_content() or "")
    assert "image_quality" in (error.locator("li").first.text_content() or "")
    assert page.locator("#capture-output").count() == 0
    page.context.close()


def test_signed_requests_and_the_signed_link(  # type: ignore[no-untyped-def]
        browser: Browser, service: RunningService, site: Site, make_org) -> None:
    org = new_org(make_org, require_signature=True)
    page = open_playground(browser, service)
    # Non-ASCII text and characters that need percent-encoding exercise the page's HMAC and encoding.
    selectors = "#zé-ü\n.a b\n[data-x='1']"
    capture(page, org.access_key, org.signing_key, url=site.url("/colours.html?q=a b&r=é"),
            viewport_width="320", viewport_height="200", hide_selectors=selectors)
    assert shown_image(page)[:2] == (320, 200)  # the page's signed POST was accepted
    link = page.input_value("#signed-link")
    pairs = parse_qsl(urlsplit(link).query, keep_blank_values=True)
    assert pairs[-1][0] == "signature"
    assert pairs[-1][1] == sign_params(pairs[:-1], org.signing_key)  # the canonical form, as the server computes it
    fetched = httpx.get(link, timeout=60)
    assert fetched.status_code == 200, fetched.text
    assert decode(fetched.content).width == 320
    page.context.close()


def test_other_outputs_are_shown_inline(browser: Browser, service: RunningService, make_org) -> None:  # type: ignore[no-untyped-def]
    key = new_org(make_org).access_key
    page = open_playground(browser, service)
    capture(page, key, markdown="# Hello playground\n\nSome *text*.", format="markdown")
    assert "Hello playground" in (page.text_content("pre#capture-output") or "")
    capture(page, key, markdown="# A PDF", format="pdf")
    assert page.locator("iframe#capture-output").get_attribute("src", timeout=5000).startswith("blob:")  # type: ignore[union-attr]
    capture(page, key, markdown="# Archived", format="wacz")  # no page shows a web archive: a download
    link = page.locator("a#capture-output")
    assert link.count() == 1, (page.text_content("#status"), page.inner_html("#output")[:300])
    assert link.get_attribute("download") == "capture.wacz" and "Download capture.wacz" in (link.text_content() or "")
    with page.expect_download() as download:
        link.click()
    assert archive_problems(Path(download.value.path()).read_bytes()) == []
    page.select_option("#endpoint", "animate")
    capture(page, key, html="<body style='background:#0a0'>video</body>", duration="1", format="webm")
    duration = page.evaluate("""() => new Promise(done => {
        const video = document.querySelector('video#capture-output');
        if (video.readyState > 0) done(video.duration); else video.onloadedmetadata = () => done(video.duration);
    })""")
    assert 0.5 < duration < 3 or duration == float("inf")  # webm from a live recording may not state it
    page.context.close()


def test_the_page_fits_a_phone_and_keys_are_kept_only_when_asked(  # type: ignore[no-untyped-def]
        browser: Browser, service: RunningService) -> None:
    page = open_playground(browser, service, PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "access-key"  # the first stop is the key
    page.fill("#access-key", "a-key")
    page.check("#remember")
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert page.input_value("#access-key") == "a-key" and page.is_checked("#remember")
    page.uncheck("#remember")
    assert page.evaluate("localStorage.length") == 0
    page.context.close()


def test_the_sign_command_prints_a_link_that_works(  # type: ignore[no-untyped-def]
        service: RunningService, site: Site, make_org) -> None:
    org = new_org(make_org, require_signature=True)
    printed = subprocess.run(
        [sys.executable, "-m", "service.cli", "sign", "--key", org.access_key, "--signing-key", org.signing_key,
         "--base-url", service.url, f"url={site.url('/colours.html')}", "viewport_width=300",
         "viewport_height=200", "format=webp", "hide_selectors=.a", "hide_selectors=#b"],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    link = printed.stdout.strip()
    assert link.startswith(f"{service.url}/v1/screenshot/take?access_key=") and org.signing_key not in link
    fetched = httpx.get(link, timeout=60)
    assert fetched.status_code == 200, fetched.text
    assert fetched.headers["content-type"] == "image/webp" and decode(fetched.content).width == 300


def test_pages_are_compared_and_monitored_from_the_playground(  # type: ignore[no-untyped-def]
        browser: Browser, service: RunningService, site: Site, make_org) -> None:
    org = new_org(make_org)
    page = open_playground(browser, service)
    page.fill("#access-key", org.access_key)
    page.fill("#compare-before", site.url("/watch/page.html?v=base"))
    page.fill("#compare-after", site.url("/watch/page.html?v=image"))
    page.click("#compare")
    page.wait_for_selector("#compare-status[data-state=changed]", timeout=60_000)
    assert "1 region(s)" in page.text_content("#compare-status")  # type: ignore[operator]
    page.wait_for_function("() => { const image = document.querySelector('#compare-output img');"
                           " return image && image.complete && image.naturalWidth > 0; }")
    page.fill("#compare-after", "not a page")
    page.click("#compare")
    page.wait_for_selector("#compare-status[data-state=refused]")
    assert "after.url" in page.text_content("#compare-status")  # type: ignore[operator]
    page.fill("#monitor-url", site.url("/watch/page.html"))
    page.fill("#monitor-every", "1")
    page.click("#monitor-create")
    page.wait_for_selector("#monitor-status[data-state=created]")
    assert page.locator("#monitors tbody tr").count() == 1
    for _ in range(100):  # until its first run is in the list
        page.click("#monitor-refresh")
        page.wait_for_timeout(200)
        if "done" in (page.text_content("#monitors tbody tr td:nth-child(4)") or ""):
            break
    page.get_by_role("button", name="Runs").click()
    page.wait_for_selector("#runs .run")
    assert "the baseline" in (page.text_content("#runs") or "")
    page.get_by_role("button", name="Pause").click()
    page.wait_for_function("() => document.querySelector('#monitors tbody td:nth-child(3)')"
                           ".textContent.startsWith('paused')")
    page.get_by_role("button", name="Delete").click()
    page.wait_for_function("() => document.querySelectorAll('#monitors tbody tr').length === 0")
    page.context.close()
