"""A WACZ of this service replayed by a tool nobody here wrote, with the archived site stopped: pywb in proxy mode
(tests/support/replay_tools.py) serves the archive to a plain Chromium, whose screenshot must equal the archive's
own `urn:view:` screenshot (at most 1% of pixels visibly different), with the fetched texts, the cookie and the web
font there. The site (tests/support/pages/replayable.py) has what a real page's archive has to carry: gzip, a web
font, PNG and JPEG images, a 302, an HTTPS iframe under the run's test CA, fetch GET and POST, Set-Cookie."""

from __future__ import annotations

import io
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import pyvips
from playwright.sync_api import sync_playwright
from warcio.archiveiterator import ArchiveIterator

from render.settings import RenderSettings
from tests.conftest import Org
from tests.support.archive_tools import archive_problems
from tests.support.pages.replayable import ANSWERS, GREETING, Replayable
from tests.support.plain import differing_pixels, differing_region
from tests.support.replay_tools import pywb_proxy
from tests.support.tls import authority

pytestmark = pytest.mark.browser

WIDTH, HEIGHT = 800, 500
VISIBLY = 24  # levels of a channel: less is antialiasing and JPEG noise, not a different picture


def _records(wacz: bytes) -> dict[str, tuple[str, str | None]]:
    """Each record's target URI: its type and HTTP status."""
    warc = zipfile.ZipFile(io.BytesIO(wacz)).read("archive/data.warc.gz")
    found = {}
    for record in ArchiveIterator(io.BytesIO(warc)):
        if record.rec_type in ("response", "revisit", "resource"):
            found[record.rec_headers.get_header("WARC-Target-URI")] = (
                record.rec_type, record.http_headers.get_statuscode() if record.http_headers else None)
    return found


def _view(wacz: bytes, url: str) -> bytes:
    warc = zipfile.ZipFile(io.BytesIO(wacz)).read("archive/data.warc.gz")
    for record in ArchiveIterator(io.BytesIO(warc)):
        if record.rec_headers.get_header("WARC-Target-URI") == f"urn:view:{url}":
            return bytes(record.content_stream().read())
    raise AssertionError(f"no urn:view: record for {url}")


def _replayed(proxy: str, url: str) -> tuple[bytes, dict[str, str]]:
    """A plain Chromium's screenshot of `url` through the replay proxy, and the texts the page rendered."""
    def run() -> tuple[bytes, dict[str, str]]:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=RenderSettings().chromium_path,
                                                 proxy={"server": proxy})
            try:
                # pywb's proxy answers HTTPS with certificates of its own CA, made for this run.
                context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, ignore_https_errors=True)
                page = context.new_page()
                page.goto(url)
                page.wait_for_selector("#done", state="attached", timeout=30_000)
                texts = {name: page.inner_text(f"#{name}") for name in ("got", "posted", "cookie")}
                texts["font"] = str(page.evaluate("document.fonts.check('34px \"Archived Face\"')"))
                frame = page.frames[1] if len(page.frames) > 1 else None
                texts["frame"] = frame.inner_text("body").strip() if frame else ""
                return page.screenshot(), texts
            finally:
                browser.close()

    with ThreadPoolExecutor(max_workers=1) as thread:  # Playwright's sync API wants a thread without a loop
        return thread.submit(run).result()


def test_pywb_replays_the_archive_as_it_was_captured_with_the_site_stopped(
        client: httpx.Client, org: Org, tmp_path: Path) -> None:
    with Replayable("publisher.test", authority().server_context()) as site:
        response = client.get("/v1/screenshot/take", params={
            "access_key": org.access_key, "url": site.start_url, "archive": "true", "response_type": "json",
            "viewport_width": str(WIDTH), "viewport_height": str(HEIGHT), "wait_for_selector": "#done"})
        assert response.status_code == 200, response.text
    asked_while_up = len(site.requests)
    wacz = client.get(response.json()["archive"]["url"]).content
    assert archive_problems(wacz) == []
    records = _records(wacz)
    assert records[site.start_url] == ("response", "302")
    for path in ("/page.html", "/face.ttf", "/picture.png", "/picture.jpg?size=large", "/api/greeting", "/api/echo"):
        assert site.page_url.replace("/page.html", path) in records, path
    assert site.frame_url in records
    archived = _view(wacz, site.page_url)
    (tmp_path / "capture.wacz").write_bytes(wacz)
    replay_directory = tmp_path / "replay"
    replay_directory.mkdir()
    with pywb_proxy(tmp_path / "capture.wacz", replay_directory) as proxy:
        shot, texts = _replayed(proxy, site.start_url)
    assert len(site.requests) == asked_while_up  # the site, stopped, was asked nothing
    assert texts == {"got": GREETING, "posted": ANSWERS["weather"], "cookie": "cookie: visit=archived-evening",
                     "font": "True", "frame": "Framed over HTTPS"}
    ours, theirs = pyvips.Image.new_from_buffer(archived, ""), pyvips.Image.new_from_buffer(shot, "")
    differing = differing_pixels(ours, theirs, tolerance=VISIBLY)
    print(f"replayed: {differing} of {WIDTH * HEIGHT} pixels differ visibly")  # noqa: T201 - for the notes
    assert differing <= 0.01 * WIDTH * HEIGHT, (differing, differing_region(ours, theirs))
