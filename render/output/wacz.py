"""A capture as a web archive: the page's traffic and its screenshots in a WACZ 1.1.1 (Webrecorder's package of
WARC records, their index and a page list, read by ReplayWeb.page, pywb and the web-archiving field's tools),
signed the way ReplayWeb.page verifies an anonymous signature.

- `archive/data.warc.gz`: for each exchange a `response` record (or a `revisit` when its payload was seen before)
  and the `request` record that goes with it, each gzipped on its own; bodies decoded, so `Content-Encoding` and
  `Transfer-Encoding` are kept renamed (`X-Archive-Orig-...`) and `Content-Length` is the decoded length; the
  capture's screenshots as `resource` records (`urn:view:<url>`, `urn:fullPage:<url>`).
- `indexes/index.cdx` (render/output/cdxj.py): CDXJ lines under the name py-wacz writes and pywb's `wb-manager`
  looks for (it skips `.cdxj`). `pages/pages.jsonl`: the page (url, ts, title).
- `datapackage.json` (every other file with its sha256 and size, the main page, the software) and
  `datapackage-digest.json` (its hash and `signedData`: ECDSA P-384 with SHA-256 over the text `sha256:<hex>`, the
  signature as raw r||s in base64, the public key as base64 SPKI).

Everything is stored in the ZIP (not deflated): the WARC is gzipped record by record already, and replay reads
records by offset. Bodies past `max_bytes` in all are left out, the largest first, their records marked
`WARC-Truncated: length`.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric import ec
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from render.contract import archives
from render.contract.archives import Exchange
from render.contract.formats import FORMATS
from render.output import cdxj

WACZ_VERSION = "1.1.1"
MEDIA_TYPE = FORMATS["wacz"].media_type
PNG = FORMATS["png"].media_type  # the screenshots' records
WARC_NAME = "data.warc.gz"
RENAMED = ("content-encoding", "transfer-encoding")  # kept as X-Archive-Orig-<name>: the body is stored decoded
GZIP_LEVEL = 6  # zlib's default; warcio's own writer uses 9, slower for a few percent of text
ALREADY_COMPRESSED = frozenset({"font/woff", "font/woff2", "application/font-woff", "application/font-woff2",
                                "application/zip", "application/gzip", "application/x-gzip",
                                FORMATS["pdf"].bare_media_type, FORMATS["wacz"].bare_media_type})


@dataclass(frozen=True)
class View:
    """A screenshot of the capture: `kind` is `view` (the viewport) or `fullPage`."""

    kind: str
    url: str
    png: bytes
    when: datetime


@dataclass(frozen=True)
class Page:
    url: str
    title: str
    when: datetime


@dataclass
class Package:
    data: bytes
    truncated: int = 0  # bodies left out (max_bytes)
    records: int = 0
    extras: list[str] = field(default_factory=list)


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _payload_digest(body: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode()  # noqa: S324 - WARC's own digest


def _response_headers(exchange: Exchange, length: int) -> list[tuple[str, str]]:
    headers = []
    for name, value in exchange.response_headers:
        lowered = name.lower()
        if lowered in RENAMED:
            headers.append((f"X-Archive-Orig-{name}", value))
        elif lowered != "content-length":
            headers.append((name, value))
    return [*headers, ("Content-Length", str(length))]


def _target(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


class _Writer:
    """WARC records and their index lines, written in order."""

    def __init__(self) -> None:
        self.out = io.BytesIO()
        self._record = io.BytesIO()  # one record as written, before it is gzipped on its own
        self.warc = WARCWriter(self._record, gzip=False, warc_version="1.1")
        self.entries: list[cdxj.Entry] = []
        self.records = 0
        self._seen: dict[str, tuple[str, str]] = {}  # payload digest -> (url, WARC-Date) of its first response

    def _write(self, record: object, entry: dict[str, object] | None, key: str, when: datetime,
               compressed: bool = False) -> None:
        """The record gzipped as a member of its own; `compressed` payloads (JPEG, WOFF2, ...) are stored in it, as
        deflating them again gains nothing and costs most of an image-heavy page's packing."""
        offset = self.out.tell()
        self._record.seek(0)
        self._record.truncate()
        self.warc.write_record(record)
        gzipper = zlib.compressobj(0 if compressed else GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS + 16)
        self.out.write(gzipper.compress(self._record.getbuffer()))
        self.out.write(gzipper.flush())
        self.records += 1
        if entry is not None:
            entry.update(length=str(self.out.tell() - offset), offset=str(offset), filename=WARC_NAME)
            self.entries.append(cdxj.Entry(key, when, entry))

    def exchange(self, exchange: Exchange, truncated: bool) -> None:
        date = datetime_to_iso_date(exchange.when.astimezone(UTC).replace(tzinfo=None), use_micros=True)
        body = b"" if truncated else exchange.body
        http = StatusAndHeaders(f"{exchange.status} {exchange.reason}".strip(),
                                _response_headers(exchange, len(body)), protocol="HTTP/1.1")
        digest = _payload_digest(body)
        warc_headers = {"WARC-Date": date}
        if truncated:
            warc_headers["WARC-Truncated"] = "length"
        mime = next((value for name, value in exchange.response_headers if name.lower() == "content-type"), "")
        posted_query, appended = ("", "")
        if exchange.method.upper() in ("POST", "PUT"):
            content_type = next((value for name, value in exchange.request_headers
                                 if name.lower() == "content-type"), "")
            posted_query, appended = cdxj.posted(exchange.method, content_type, exchange.request_body or b"")
        key = cdxj.surt(exchange.url, appended=appended)
        entry: dict[str, object] = {"url": exchange.url, "mime": _first_token(mime), "status": str(exchange.status)}
        if not entry["mime"]:
            del entry["mime"]  # as the tools index a response without a type
        first = self._seen.get(digest) if body and not truncated else None
        if first is not None:
            response = self.warc.create_revisit_record(exchange.url, digest, first[0], first[1], http_headers=http,
                                                       warc_headers_dict=warc_headers)
            entry["mime"] = "warc/revisit"
        else:
            response = self.warc.create_warc_record(exchange.url, "response", payload=io.BytesIO(body),
                                                    length=len(body), http_headers=http,
                                                    warc_headers_dict=warc_headers)
            if body and not truncated:
                self._seen.setdefault(digest, (exchange.url, date))
        entry["digest"] = digest
        if appended:
            entry.update(method=exchange.method.upper(), requestBody=posted_query)
        self._write(response, entry, key, exchange.when, compressed=_compressed(mime))
        request_body = exchange.request_body or b""
        request = self.warc.create_warc_record(
            exchange.url, "request", payload=io.BytesIO(request_body), length=len(request_body),
            http_headers=StatusAndHeaders(f"{exchange.method.upper()} {_target(exchange.url)} HTTP/1.1",
                                          exchange.request_headers, is_http_request=True),
            warc_headers_dict={"WARC-Date": date,
                               "WARC-Concurrent-To": response.rec_headers.get_header("WARC-Record-ID")})
        self._write(request, None, key, exchange.when)

    def view(self, view: View) -> None:
        uri = f"urn:{view.kind}:{view.url}"
        date = datetime_to_iso_date(view.when.astimezone(UTC).replace(tzinfo=None), use_micros=True)
        record = self.warc.create_warc_record(uri, "resource", payload=io.BytesIO(view.png), length=len(view.png),
                                              warc_content_type=PNG, warc_headers_dict={"WARC-Date": date})
        self._write(record, {"url": uri, "mime": PNG, "digest": _payload_digest(view.png)}, uri, view.when,
                    compressed=True)


def _compressed(mime: str) -> bool:
    """Whether a payload of this media type is compressed already: images but SVG and BMP, fonts but TrueType and
    OpenType, video, audio and archives."""
    kind = _first_token(mime).lower()
    if kind.startswith(("video/", "audio/")) or kind in ALREADY_COMPRESSED:
        return True
    return kind.startswith("image/") and kind not in ("image/svg+xml", "image/bmp", "image/x-icon")


def _first_token(mime: str) -> str:
    return mime.replace(";", " ").split()[0] if mime.strip() else ""


def _left_out(exchanges: list[Exchange], views: Iterable[View], max_bytes: int) -> set[int]:
    """The exchanges whose bodies are left out, the largest first, so that the bodies kept fit `max_bytes`."""
    total = sum(len(exchange.body) for exchange in exchanges) + sum(len(view.png) for view in views)
    dropped: set[int] = set()
    for index in sorted(range(len(exchanges)), key=lambda n: -len(exchanges[n].body)):
        if total <= max_bytes:
            break
        total -= len(exchanges[index].body)
        dropped.add(index)
    return dropped


def package(exchanges: list[Exchange], page: Page, views: list[View], *, software: str,
            key: ec.EllipticCurvePrivateKey | None, max_bytes: int,
            extras: dict[str, tuple[bytes, str]] | None = None, created: datetime | None = None) -> Package:
    """The WACZ of a capture; `extras` are more files (path under a directory of their own -> bytes, name)."""
    writer = _Writer()
    dropped = _left_out(exchanges, views, max_bytes)
    for index, exchange in enumerate(exchanges):
        writer.exchange(exchange, truncated=index in dropped)
    for view in views:
        writer.view(view)
    pages = "\n".join(json.dumps(line) for line in (
        {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"},
        {"id": hashlib.sha256(page.url.encode()).hexdigest()[:16], "url": page.url, "ts": _iso(page.when),
         "title": page.title})) + "\n"
    files: dict[str, bytes] = {f"archive/{WARC_NAME}": writer.out.getvalue(),
                               "indexes/index.cdx": cdxj.index(writer.entries),
                               "pages/pages.jsonl": pages.encode()}
    files |= {path: data for path, (data, _) in (extras or {}).items()}
    created_at = _iso(created or datetime.now(UTC))
    datapackage = json.dumps({
        "profile": "data-package", "wacz_version": WACZ_VERSION,
        "resources": [{"name": path.rsplit("/", 1)[-1], "path": path, "hash": archives.sha256(data),
                       "bytes": len(data)}
                      for path, data in files.items()],
        "title": page.title or page.url, "created": created_at, "software": software,
        "mainPageUrl": page.url, "mainPageDate": _iso(page.when)}, indent=1).encode()
    digest = archives.sha256(datapackage)
    digest_file: dict[str, object] = {"path": "datapackage.json", "hash": digest}
    if key is not None:
        signature, public_key = archives.sign(digest, key)
        digest_file["signedData"] = {"hash": digest, "created": created_at, "software": software,
                                     "signature": signature, "publicKey": public_key}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as archive:
        for path, data in files.items():
            archive.writestr(path, data)
        archive.writestr("datapackage.json", datapackage)
        archive.writestr("datapackage-digest.json", json.dumps(digest_file, indent=1))
    return Package(out.getvalue(), truncated=len(dropped), records=writer.records, extras=list(extras or {}))

