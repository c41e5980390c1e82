"""The WACZ a capture's traffic is packed into (render/output/wacz.py), read back with warcio and checked with
`cryptography` alone: a response and a request record per exchange, each gzipped on its own, bodies decoded with
their encodings renamed, a revisit for a payload seen before, POST keyed by its body, the screenshot as a resource,
every file listed with its hash, and an anonymous ECDSA P-384 signature that fails on any changed byte."""

from __future__ import annotations

import base64
import gzip
import io
import json
import zipfile
from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from warcio.archiveiterator import ArchiveIterator

from render.contract import archives
from render.contract.archives import Exchange
from render.output import cdxj, wacz

WHEN = datetime(2026, 12, 6, 3, 20, 0, tzinfo=UTC)
PAGE = "http://127.0.0.1:8000/page.html"
HTML = b"<html><title>Page</title><img src=a.png><img src=b.png><p>" + b"text " * 40 + b"</html>"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def exchanges() -> list[Exchange]:
    def get(url: str, status: int, headers: list[tuple[str, str]], body: bytes) -> Exchange:
        return Exchange(url, "GET", [("Host", "127.0.0.1:8000"), ("User-Agent", "Chromium")], None, status,
                             "OK" if status == 200 else "Found", headers, body, WHEN)

    return [
        get("http://127.0.0.1:8000/", 302, [("Location", "/page.html"), ("Content-Length", "0")], b""),
        get(PAGE, 200, [("Content-Type", "text/html; charset=utf-8"), ("Content-Encoding", "gzip"),
                        ("Content-Length", "40")], HTML),
        get("http://127.0.0.1:8000/a.png", 200, [("Content-Type", "image/png")], PNG),
        get("http://127.0.0.1:8000/b.png", 200, [("Content-Type", "image/png")], PNG),
        Exchange("http://127.0.0.1:8000/api?x=1", "POST", [("Content-Type", "application/json")],
                      b'{"q": "Find", "n": 2}', 200, "OK", [("Content-Type", "application/json")], b'{"a": 1}', WHEN),
    ]


def packed(key: ec.EllipticCurvePrivateKey | None, max_bytes: int = 10_000_000) -> wacz.Package:
    return wacz.package(exchanges(), wacz.Page(PAGE, "Page", WHEN), [wacz.View("view", PAGE, PNG, WHEN)],
                        software="screenshot-service test", key=key, max_bytes=max_bytes, created=WHEN)


def records(package: wacz.Package) -> list:  # type: ignore[type-arg]
    warc = zipfile.ZipFile(io.BytesIO(package.data)).read("archive/data.warc.gz")
    return [(record.rec_type, record.rec_headers, record.http_headers, record.content_stream().read())
            for record in ArchiveIterator(io.BytesIO(warc))]


def test_each_exchange_is_a_response_and_its_request_and_the_view_a_resource() -> None:
    package = packed(None)
    found = records(package)
    assert [kind for kind, *_ in found] == ["response", "request"] * 3 + ["revisit", "request", "response", "request",
                                                                         "resource"]
    assert package.records == 11
    for (_, response, _, _), (_, request, _, _) in zip(found[0:10:2], found[1:10:2], strict=True):
        assert request.get_header("WARC-Concurrent-To") == response.get_header("WARC-Record-ID")
        assert request.get_header("WARC-Target-URI") == response.get_header("WARC-Target-URI")
    kind, headers, http, body = found[2]
    assert body == HTML and http.get_header("Content-Length") == str(len(HTML))
    assert http.get_header("X-Archive-Orig-Content-Encoding") == "gzip" and not http.get_header("Content-Encoding")
    assert found[0][2].statusline.startswith("302") and found[0][2].get_header("Location") == "/page.html"
    # The same image twice: the second is a revisit of the first.
    assert found[6][0] == "revisit" and found[6][1].get_header("WARC-Refers-To-Target-URI").endswith("/a.png")
    assert found[8][0] == "response" and found[9][3] == b'{"q": "Find", "n": 2}'
    assert (found[9][2].protocol, found[9][2].statusline) == ("POST", "/api?x=1 HTTP/1.1")
    assert found[10][1].get_header("WARC-Target-URI") == f"urn:view:{PAGE}" and found[10][3] == PNG
    # Each record a gzip member of its own.
    warc = zipfile.ZipFile(io.BytesIO(package.data)).read("archive/data.warc.gz")
    assert warc.count(b"\x1f\x8b\x08") >= 11 and gzip.decompress(warc).count(b"WARC/1.1\r\n") == 11


def test_the_index_points_at_each_record_and_keys_a_post_by_its_body() -> None:
    package = packed(None)
    archive = zipfile.ZipFile(io.BytesIO(package.data))
    lines = archive.read("indexes/index.cdx").decode().splitlines()
    assert lines == sorted(lines) and len(lines) == 6  # responses, the revisit and the view; no requests
    warc = archive.read("archive/data.warc.gz")
    for line in lines:
        key, stamp, block = line.split(" ", 2)
        fields = json.loads(block)
        assert stamp == "20261206032000"
        record = next(iter(ArchiveIterator(io.BytesIO(warc[int(fields["offset"]):][:int(fields["length"])]))))
        assert record.rec_headers.get_header("WARC-Target-URI") == fields["url"]
        if fields["url"].endswith("/api?x=1"):
            assert key == "1,0,0,127:8000)/api?__wb_method=post&n=2&q=find&x=1" and fields["method"] == "POST"
    assert cdxj.surt("https://www.Example.com/A/?b=1&a=2#f") == "com,example)/a?a=2&b=1"


def test_the_package_lists_every_file_and_its_signature_verifies_with_cryptography_alone() -> None:
    key = ec.generate_private_key(ec.SECP384R1())
    package = packed(key)
    archive = zipfile.ZipFile(io.BytesIO(package.data))
    assert {info.compress_type for info in archive.infolist()} == {zipfile.ZIP_STORED}
    datapackage = json.loads(archive.read("datapackage.json"))
    assert datapackage["wacz_version"] == "1.1.1" and datapackage["mainPageUrl"] == PAGE
    assert {resource["path"] for resource in datapackage["resources"]} == {
        "archive/data.warc.gz", "indexes/index.cdx", "pages/pages.jsonl"}
    pages = [json.loads(line) for line in archive.read("pages/pages.jsonl").splitlines()]
    assert pages[1]["url"] == PAGE and pages[1]["title"] == "Page" and pages[1]["ts"] == "2026-12-06T03:20:00Z"
    digest = json.loads(archive.read("datapackage-digest.json"))
    signed = digest["signedData"]
    assert signed["created"] == datapackage["created"] and signed["hash"] == digest["hash"]
    public = serialization.load_der_public_key(base64.b64decode(signed["publicKey"]))
    raw = base64.b64decode(signed["signature"])
    assert len(raw) == 96
    public.verify(encode_dss_signature(int.from_bytes(raw[:48], "big"), int.from_bytes(raw[48:], "big")),  # type: ignore[union-attr,call-arg]
                  signed["hash"].encode(), ec.ECDSA(hashes.SHA256()))  # type: ignore[call-arg]
    assert archives.verify(package.data) == [] and archives.verify(package.data, signed["publicKey"]) == []


@pytest.mark.parametrize("where", ["archive/data.warc.gz", "pages/pages.jsonl", "datapackage.json"])
def test_any_changed_byte_fails_verification(where: str) -> None:
    key = ec.generate_private_key(ec.SECP384R1())
    data = packed(key).data
    archive = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as changed:
        for info in archive.infolist():
            content = archive.read(info)
            if info.filename == where:
                content = content[:-2] + bytes([content[-2] ^ 1]) + content[-1:]
            changed.writestr(info, content)
    assert any(problem.startswith(where) for problem in archives.verify(out.getvalue()))
    other = ec.generate_private_key(ec.SECP384R1()).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert archives.verify(data, base64.b64encode(other).decode())


def test_bodies_past_the_bound_are_left_out_the_largest_first() -> None:
    package = packed(None, max_bytes=len(PNG) * 2 + 20)
    found = records(package)
    truncated = [headers.get_header("WARC-Target-URI") for _, headers, _, _ in found
                 if headers.get_header("WARC-Truncated") == "length"]
    assert package.truncated == len(truncated) >= 1
    assert PAGE in truncated  # the HTML, the largest body


def test_the_verify_command_fails_on_any_changed_byte(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`screenshot-service verify capture.wacz`: 0 for the archive as made (pinned to its key too), 1 naming what
    changed for a byte flipped in any of its files (the ZIP's own directory, its timestamps, is no content)."""
    import subprocess
    import sys

    key = ec.generate_private_key(ec.SECP384R1())
    data = packed(key).data
    public = base64.b64encode(key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).decode()
    path = tmp_path / "capture.wacz"

    def verify(content: bytes, *extra: str) -> subprocess.CompletedProcess[str]:
        path.write_bytes(content)
        return subprocess.run([sys.executable, "-m", "service.cli", "verify", str(path), *extra], capture_output=True,
                              text=True, timeout=60, check=False)

    assert verify(data, "--public-key", public).returncode == 0
    archive = zipfile.ZipFile(io.BytesIO(data))
    for info in archive.infolist():
        start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)  # the file's bytes
        offset = start + info.compress_size // 2
        changed = bytearray(data)
        changed[offset] ^= 1
        done = verify(bytes(changed))
        assert done.returncode == 1 and "FAILED" in done.stderr, (info.filename, done.stdout, done.stderr)


def test_the_verify_command_checks_the_certificate_inside(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """certify=true's certificate goes in the WACZ as a listed file: `verify` checks its signature too, and fails
    naming it when the certificate was changed before the archive was signed (the archive's hashes then hold)."""
    import subprocess
    import sys

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from render.contract import certificates

    signer = Ed25519PrivateKey.generate()
    certificate = certificates.sign({"reference": "r", "artefacts": [certificates.artefact("view", PNG, "image/png")]},
                                    signer)
    key = ec.generate_private_key(ec.SECP384R1())

    def verify(document: dict) -> subprocess.CompletedProcess[str]:  # type: ignore[type-arg]
        data = wacz.package(exchanges(), wacz.Page(PAGE, "Page", WHEN), [wacz.View("view", PAGE, PNG, WHEN)],
                            software="test", key=key, max_bytes=10_000_000,
                            extras={archives.CERTIFICATE_PATH: (json.dumps(document).encode(), "certificate")}).data
        assert archives.CERTIFICATE_PATH in zipfile.ZipFile(io.BytesIO(data)).namelist()
        path = tmp_path / "certified.wacz"
        path.write_bytes(data)
        return subprocess.run([sys.executable, "-m", "service.cli", "verify", str(path)], capture_output=True,
                              text=True, timeout=60, check=False)

    good = verify(certificate)
    assert good.returncode == 0 and "Certificate inside" in good.stdout, good.stdout + good.stderr
    forged = verify({**certificate, "manifest": {**certificate["manifest"], "reference": "another"}})
    assert forged.returncode == 1 and archives.CERTIFICATE_PATH in forged.stderr, forged.stdout + forged.stderr
