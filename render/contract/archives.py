"""The web archives of `archive=true` as API, workers and the command line share them: what a page's traffic is
recorded as (`Exchange`), how a WACZ's `datapackage-digest.json` is signed (ECDSA P-384 with SHA-256 over the text
`sha256:<hex>`, the signature raw r||s in base64, the public key base64 SPKI: what ReplayWeb.page verifies), and
how a WACZ is checked offline (`verify`, `screenshot-service verify`). Packing one is render/output/wacz.py's."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from dataclasses import dataclass
from datetime import datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

_COORDINATE_BYTES = 48  # P-384


CERTIFICATE_PATH = "certificate/certificate.json"  # certify=true's certificate in a WACZ, a file it lists

@dataclass(frozen=True)
class Exchange:
    """One request of the page and what answered it (secrets already taken out by the recorder)."""

    url: str
    method: str
    request_headers: list[tuple[str, str]]
    request_body: bytes | None
    status: int
    reason: str
    response_headers: list[tuple[str, str]]
    body: bytes  # decoded; empty for a redirect
    when: datetime


def sha256(data: bytes) -> str:
    """A WACZ's hash of a file: `sha256:<hex>`."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def sign(digest: str, key: ec.EllipticCurvePrivateKey) -> tuple[str, str]:
    """(signature, public key) of the text `digest`, in base64: raw r||s, and SPKI DER."""
    r, s = decode_dss_signature(key.sign(digest.encode(), ec.ECDSA(hashes.SHA256())))
    raw = r.to_bytes(_COORDINATE_BYTES, "big") + s.to_bytes(_COORDINATE_BYTES, "big")
    public = key.public_key().public_bytes(serialization.Encoding.DER,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(raw).decode(), base64.b64encode(public).decode()


def verify(data: bytes, public_key: str | None = None) -> list[str]:
    """What is wrong with the WACZ `data`, read offline: every file's hash and size against datapackage.json, its
    hash against datapackage-digest.json, and the signature (by `public_key`, base64 SPKI, when given: the
    signer's, published at /v1/screenshot/archive/public-key). Empty when it holds."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        datapackage = archive.read("datapackage.json")
        digest_file = json.loads(archive.read("datapackage-digest.json"))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, EOFError) as error:
        return [f"not a WACZ: {error}"]
    problems = []
    if digest_file.get("hash") != sha256(datapackage):
        problems.append("datapackage.json: changed (its hash is not the one in datapackage-digest.json)")
    try:
        listed = json.loads(datapackage)["resources"]
    except (ValueError, KeyError, TypeError):
        return [*problems, "datapackage.json: not a data package"]
    names = set(archive.namelist()) - {"datapackage.json", "datapackage-digest.json"}
    for resource in listed:
        path = resource.get("path", "")
        if path not in names:
            problems.append(f"{path}: listed but missing")
            continue
        names.discard(path)
        try:
            content = archive.read(path)
        except (zipfile.BadZipFile, OSError, EOFError):  # the ZIP's own check found a changed byte first
            problems.append(f"{path}: changed (it no longer reads whole: its CRC fails)")
            continue
        if sha256(content) != resource.get("hash") or len(content) != resource.get("bytes"):
            problems.append(f"{path}: changed (its hash or size is not the one listed)")
    problems += [f"{path}: not listed in datapackage.json" for path in sorted(names)]
    signed = digest_file.get("signedData")
    if not signed:
        return [*problems, "not signed"] if public_key else problems
    try:
        key = serialization.load_der_public_key(base64.b64decode(public_key or signed["publicKey"]))
        raw = base64.b64decode(signed["signature"])
        half = len(raw) // 2
        signature = encode_dss_signature(int.from_bytes(raw[:half], "big"), int.from_bytes(raw[half:], "big"))
        assert isinstance(key, ec.EllipticCurvePublicKey)
        key.verify(signature, str(signed["hash"]).encode(), ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError, KeyError, TypeError, AssertionError):
        problems.append("the signature does not verify" + (" with the given public key" if public_key else ""))
    if signed.get("hash") != digest_file.get("hash"):
        problems.append("the signature is of another datapackage.json")
    if public_key and signed.get("publicKey") != public_key:
        problems.append("signed by another key than the one given")
    return problems
