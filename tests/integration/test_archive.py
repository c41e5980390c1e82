"""WACZ files checked by the web-archiving field's own tools (tests/support/archive_tools.py, a virtualenv of
their own): py-wacz's `wacz validate` passes, `warcio check` finds every digest right, and cdxj-indexer's index of
the same WARC (with POST bodies appended, as py-wacz indexes) is the one the package carries. Then `archive=true`
on a real capture: its traffic, its view, signed by the published key, and none of the caller's secrets."""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from warcio.archiveiterator import ArchiveIterator

from render.contract import archives
from render.page.har import secret_forms
from tests.conftest import Org
from tests.support.archive_tools import run
from tests.support.site import Site
from tests.unit.test_wacz import packed

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("wacz") / "capture.wacz"
    path.write_bytes(packed(ec.generate_private_key(ec.SECP384R1())).data)
    return path


def test_py_wacz_validates_it(made: Path) -> None:
    checked = run("wacz", "validate", "-f", str(made))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Validation succeeded" in checked.stdout


def test_warcio_checks_every_digest(made: Path, tmp_path: Path) -> None:
    warc = tmp_path / "data.warc.gz"
    warc.write_bytes(zipfile.ZipFile(made).read("archive/data.warc.gz"))
    checked = run("warcio", "check", "-v", str(warc))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "digest pass" in checked.stdout and "digest fail" not in checked.stdout


def test_cdxj_indexer_reads_the_same_index(made: Path, tmp_path: Path) -> None:
    archive = zipfile.ZipFile(made)
    warc = tmp_path / "data.warc.gz"
    warc.write_bytes(archive.read("archive/data.warc.gz"))
    theirs = run("cdxj-indexer", "--post-append", "--sort", str(warc))
    assert theirs.returncode == 0, theirs.stderr

    def lines(text: str) -> list[tuple[str, str, dict[str, object]]]:
        parsed = []
        for line in text.splitlines():
            key, stamp, block = line.split(" ", 2)
            parsed.append((key, stamp, json.loads(block)))
        return sorted(parsed, key=lambda entry: (entry[0], entry[1], str(entry[2].get("offset"))))

    ours = lines(archive.read("indexes/index.cdx").decode())
    assert lines(theirs.stdout) == ours
    assert any(key.startswith("1,0,0,127:8000)/api?__wb_method=post") for key, _, _ in ours)


# --- archive=true on a capture ------------------------------------------------------------------------------------

SECRETS = ("s3cr3t-cookie", "s3cr3t-token", "s3cr3t-header")


def every_byte(data: bytes) -> bytes:
    """The WACZ's files with the WARC's records ungzipped: where a secret could be."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    return b"".join(gzip.decompress(archive.read(name)) if name.endswith(".gz") else archive.read(name)
                    for name in archive.namelist())


def test_a_capture_s_archive_holds_its_traffic_and_view_signed_and_valid(
        client: httpx.Client, org: Org, site: Site, tmp_path: Path) -> None:
    page = site.url("/redirect?to=/evidence/traffic.html")
    response = client.get("/v1/screenshot/take", params={
        "access_key": org.access_key, "url": page, "archive": "true", "response_type": "json",
        "viewport_width": "400", "viewport_height": "300", "cookies": "session=s3cr3t-cookie",
        "authorization": "Bearer s3cr3t-token", "headers": "X-Api-Token: s3cr3t-header"})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert response.headers["x-service-archive-url"] == answer["archive"]["url"]
    assert response.headers["x-service-archive-truncated"] == "0" and answer["archive"]["truncated"] == 0
    fetched = client.get(answer["archive"]["url"])
    assert fetched.status_code == 200 and fetched.headers["content-type"] == "application/wacz"
    data = fetched.content
    # Signed by the service's published key; any tool of the field reads it.
    published = client.get("/v1/screenshot/archive/public-key").json()
    assert archives.verify(data, published["public_key"]) == []
    made = tmp_path / "capture.wacz"
    made.write_bytes(data)
    checked = run("wacz", "validate", "-f", str(made))
    assert checked.returncode == 0 and "Validation succeeded" in checked.stdout, checked.stdout + checked.stderr
    # The traffic: the 302, the page, its style sheet, script, image statuses and the page's fetch.
    warc = zipfile.ZipFile(made).read("archive/data.warc.gz")
    found = {}
    for record in ArchiveIterator(io.BytesIO(warc)):
        if record.rec_type in ("response", "revisit", "resource"):
            found[record.rec_headers.get_header("WARC-Target-URI")] = (
                record.rec_type, record.http_headers.get_statuscode() if record.http_headers else None,
                record.content_stream().read())
    assert found[page][1] == "302"
    assert found[site.url("/evidence/traffic.html")][2] == httpx.get(site.url("/evidence/traffic.html")).content
    assert found[site.url("/evidence/style.css")][2] == b"body { color: #123456; }"
    assert found[site.url("/status?code=404")][1] == "404"
    assert site.url("/echo?from=page&n=1") in found
    final = site.url("/evidence/traffic.html")
    shot = client.get(answer["screenshot_url"]).content
    assert found[f"urn:view:{final}"] == ("resource", None, shot)
    pages = [json.loads(line) for line in zipfile.ZipFile(made).read("pages/pages.jsonl").splitlines()]
    assert (pages[1]["url"], pages[1]["title"]) == (final, "traffic")
    # No secret of the caller in any form, anywhere in it.
    everything = every_byte(data)
    for secret in SECRETS:
        for form in secret_forms(secret):
            assert form.encode() not in everything, (secret, form)


def test_archive_is_for_images_and_pdf(client: httpx.Client, org: Org) -> None:
    refused = client.get("/v1/screenshot/take", params={"access_key": org.access_key, "html": "<p>x</p>",
                                                         "archive": "true", "format": "markdown"})
    assert refused.status_code == 400
    assert [detail["field"] for detail in refused.json()["error_details"]] == ["archive"]
    wrong = client.get("/v1/screenshot/take", params={"access_key": org.access_key, "html": "<p>x</p>",
                                                       "archive": "maybe"})
    assert [detail["field"] for detail in wrong.json()["error_details"]] == ["archive"]
