"""WACZ files checked by the web-archiving field's own tools (tests/support/archive_tools.py, a virtualenv of
their own): py-wacz's `wacz validate` passes, `warcio check` finds every digest right, and cdxj-indexer's index of
the same WARC (with POST bodies appended, as py-wacz indexes) is the one the package carries. Then `archive=true`
on a real capture: its traffic, its view, signed by the published key, and none of the caller's secrets."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import httpx
import pytest
import pyvips
from cryptography.hazmat.primitives.asymmetric import ec
from warcio.archiveiterator import ArchiveIterator

from render.contract import archives, certificates
from render.page.recording import secret_forms
from tests.conftest import Org
from tests.support.archive_tools import archive_problems, every_byte, run
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
    # No secret of the caller in any form, anywhere in it, nor in the archive format=wacz answers.
    answered = client.get("/v1/screenshot/take", params={
        "access_key": org.access_key, "url": page, "format": "wacz", "viewport_width": "400",
        "viewport_height": "300", "cookies": "session=s3cr3t-cookie", "authorization": "Bearer s3cr3t-token",
        "headers": "X-Api-Token: s3cr3t-header"})
    assert answered.status_code == 200, answered.text
    for everything in (every_byte(data), every_byte(answered.content)):
        assert b"[redacted]" in everything  # the secrets were sent, and replaced
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


# --- format=wacz: the answer is the archive -----------------------------------------------------------------------

def _resources(data: bytes) -> dict[str, tuple[str, bytes]]:
    """The WACZ's resource records (the screenshots): target URI -> (content type, bytes)."""
    warc = zipfile.ZipFile(io.BytesIO(data)).read("archive/data.warc.gz")
    return {record.rec_headers.get_header("WARC-Target-URI"): (record.rec_headers.get_header("Content-Type"),
                                                               record.content_stream().read())
            for record in ArchiveIterator(io.BytesIO(warc)) if record.rec_type == "resource"}


def test_format_wacz_answers_the_signed_archive_itself(client: httpx.Client, org: Org, site: Site,
                                                       tmp_path: Path) -> None:
    page = site.url("/evidence/traffic.html")
    response = client.get("/v1/screenshot/take", params={
        "access_key": org.access_key, "url": page, "format": "wacz", "viewport_width": "400",
        "viewport_height": "300", "full_page": "true"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/wacz"
    assert response.headers["x-service-archive-truncated"] == "0"
    data = response.content
    assert archives.verify(data, client.get("/v1/screenshot/archive/public-key").json()["public_key"]) == []
    made = tmp_path / "page.wacz"
    made.write_bytes(data)
    checked = run("wacz", "validate", "-f", str(made))
    assert checked.returncode == 0 and "Validation succeeded" in checked.stdout, checked.stdout + checked.stderr
    views = _resources(data)
    assert set(views) == {f"urn:view:{page}", f"urn:fullPage:{page}"}
    view = pyvips.Image.new_from_buffer(views[f"urn:view:{page}"][1], "")
    assert views[f"urn:view:{page}"][0] == "image/png" and (view.width, view.height) == (400, 300)
    whole = pyvips.Image.new_from_buffer(views[f"urn:fullPage:{page}"][1], "")
    assert whole.width >= 400 and whole.height >= 300  # the page is wider than the viewport: its echo is one line
    # Its link, in JSON, is the same archive; the size bound's count comes with it.
    as_json = client.get("/v1/screenshot/take", params={
        "access_key": org.access_key, "url": page, "format": "wacz", "response_type": "json"})
    assert as_json.status_code == 200, as_json.text
    answer = as_json.json()
    assert answer["archive"] == {"truncated": 0} and answer["format"] == "wacz"
    linked = client.get(answer["screenshot_url"])
    assert linked.headers["content-type"] == "application/wacz" and archive_problems(linked.content) == []


def test_format_wacz_refuses_what_shapes_only_an_image_or_a_pdf(client: httpx.Client, org: Org) -> None:
    for extra, field in ((("archive", "true"),), "archive"), ((("image_quality", "50"),), "image_quality"), \
            ((("pdf_landscape", "true"),), "pdf_landscape"), ((("selector", "h1"),), "selector"), \
            ((("clip_x", "0"), ("clip_y", "0"), ("clip_width", "10"), ("clip_height", "10")), "clip_x"), \
            ((("watermark", "x"),), "watermark"), ((("omit_background", "true"),), "omit_background"):
        refused = client.get("/v1/screenshot/take", params={
            "access_key": org.access_key, "html": "<p>x</p>", "format": "wacz", **dict(extra)})
        assert refused.status_code == 400, (extra, refused.text)
        fields = [detail["field"] for detail in refused.json()["error_details"]]
        assert field in fields, (extra, fields)
    assert usage_of(client, org) == 0


def usage_of(client: httpx.Client, org: Org) -> int:
    return int(client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"])


def test_certify_puts_its_certificate_inside_the_archive(client: httpx.Client, org: Org, site: Site) -> None:
    page = site.url("/evidence/traffic.html")
    for params in ({"archive": "true", "response_type": "json"}, {"format": "wacz", "response_type": "json"}):
        response = client.get("/v1/screenshot/take", params={
            "access_key": org.access_key, "url": page, "certify": "true", "viewport_width": "400",
            "viewport_height": "300", **params})
        assert response.status_code == 200, response.text
        answer = response.json()
        data = client.get(answer["archive"]["url"] if "url" in answer["archive"] else answer["screenshot_url"]).content
        assert archive_problems(data) == []
        package = zipfile.ZipFile(io.BytesIO(data))
        inside = package.read("certificate/certificate.json")
        listed = json.loads(package.read("datapackage.json"))["resources"]
        assert {"name": "certificate.json", "path": "certificate/certificate.json",
                "hash": archives.sha256(inside), "bytes": len(inside)} in listed
        stored = client.get(answer["certificate"]["url"]).content
        assert inside == stored  # the certificate beside the result is the one inside
        certificate = json.loads(inside)
        pinned = certificates.parse_public_key(client.get("/v1/screenshot/certify/public-key").json()["public_key"])
        assert certificates.check(certificate, {}, pinned).pinned
        named = {artefact["name"]: artefact["sha256"] for artefact in certificate["manifest"]["artefacts"]}
        view = _resources(data)[f"urn:view:{page}"][1]
        if params.get("format") == "wacz":  # the archive carries the certificate: it lists the screenshot
            assert named == {"view": hashlib.sha256(view).hexdigest()}
        else:  # the output, not the archive that holds the certificate
            shot = client.get(answer["screenshot_url"]).content
            assert named == {"output": hashlib.sha256(shot).hexdigest()}


def test_an_archive_link_opens_only_the_archive_it_was_signed_for(client: httpx.Client, make_org,  # type: ignore[no-untyped-def]
                                                                  site: Site) -> None:
    """The signed link of one organisation's archive, pointed at another organisation's archive (or at another
    object), is refused: a link opens the one object it was signed for."""
    ours, theirs = make_org(), make_org()
    links = []
    for org in (ours, theirs):
        answer = client.get("/v1/screenshot/take", params={
            "access_key": org.access_key, "url": site.url("/evidence/traffic.html"), "archive": "true",
            "response_type": "json"}).json()
        links.append(answer["archive"]["url"])
    assert all(client.get(link).status_code == 200 for link in links)
    ours_path, their_path = (link.split("?")[0] for link in links)
    assert ours.id in ours_path and theirs.id in their_path
    forged = links[0].replace(ours_path.split("/v1/", 1)[1], their_path.split("/v1/", 1)[1])
    assert forged != links[0]
    for refused in (client.get(forged), client.get(links[0].replace("-archive.wacz", "-har.har"))):
        assert refused.status_code == 400 and refused.json()["error_code"] == "signature_is_not_valid"


def test_concurrent_archives_are_each_whole_and_charged_once_within_the_limit(client: httpx.Client, make_org,  # type: ignore[no-untyped-def]
                                                                              site: Site) -> None:
    """Four format=wacz captures at once for an organisation allowed two: those past its concurrency are refused
    uncharged (concurrency_limit_reached); each answered archive is valid, holds its own page only, and is charged
    once."""
    from concurrent.futures import ThreadPoolExecutor

    org = make_org(concurrency=2)
    pages = [site.url(f"/evidence/traffic.html?n={n}") for n in range(4)]

    def take(url: str) -> httpx.Response:
        return client.get("/v1/screenshot/take", params={"access_key": org.access_key, "url": url, "format": "wacz",
                                                         "viewport_width": "400", "viewport_height": "300"})

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(take, pages))
    done = [(url, answer) for url, answer in zip(pages, answers, strict=True) if answer.status_code == 200]
    refused = [answer for answer in answers if answer.status_code != 200]
    assert done and all(answer.json()["error_code"] == "concurrency_limit_reached" for answer in refused), \
        [answer.text[:200] for answer in refused]
    for url, answer in done:
        assert archive_problems(answer.content) == []
        index = zipfile.ZipFile(io.BytesIO(answer.content)).read("indexes/index.cdx").decode()
        assert url in index and not [other for other in pages if other != url and f'"{other}"' in index]
    assert usage_of(client, org) == len(done)
