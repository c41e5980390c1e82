"""Certified captures (`certify=true`): a manifest of what a capture returned, signed with the service's Ed25519
key, and its offline check (`screenshot-service verify`).

The manifest names every artefact the capture returned by its SHA-256 (the output, the page content, the
accessibility tree, slices, ...), the options as sent without the caller's secrets, the requested and final
URL with the main document's status, when the capture started and finished (UTC), and the service's and
Chromium's versions. The certificate is the manifest with an Ed25519 signature over its canonical JSON (keys
sorted, no spaces, UTF-8) and the public key that made it; the service publishes its key at
`GET /v1/screenshot/certify/public-key`, which a verifier pins. Pure (cryptography only): the API and the CLI
import it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

FORMAT = "screenshot-service-certificate/1"
ALGORITHM = "Ed25519"


def new_private_key_pem() -> bytes:
    """A new Ed25519 private key, as unencrypted PKCS#8 PEM."""
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def load_private_key(pem: bytes) -> Ed25519PrivateKey:
    """The key of a PKCS#8 PEM; ValueError when it is not an Ed25519 private key."""
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("not an Ed25519 private key")
    return key


def public_raw(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    """The 32 bytes of the public key."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public: bytes) -> str:
    """A short name of a public key: the first 16 hex digits of the SHA-256 of its 32 bytes."""
    return hashlib.sha256(public).hexdigest()[:16]


def public_key_document(key: Ed25519PrivateKey) -> dict[str, str]:
    """What the service publishes of its key: the raw key (base64), its PEM and its id."""
    public = key.public_key()
    return {"algorithm": ALGORITHM, "key_id": key_id(public_raw(public)),
            "public_key": base64.b64encode(public_raw(public)).decode(),
            "pem": public.public_bytes(serialization.Encoding.PEM,
                                       serialization.PublicFormat.SubjectPublicKeyInfo).decode()}


def canonical(manifest: dict[str, Any]) -> bytes:
    """The bytes a manifest's signature is over: JSON with sorted keys and no spaces, UTF-8."""
    return json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def artefact(name: str, body: bytes, media_type: str) -> dict[str, Any]:
    """One returned artefact as the manifest lists it."""
    return {"name": name, "sha256": hashlib.sha256(body).hexdigest(), "size": len(body), "media_type": media_type}


def sign(manifest: dict[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    """The certificate: the manifest, its signature and the public key that makes it."""
    public = public_raw(key)
    return {"format": FORMAT, "algorithm": ALGORITHM, "key_id": key_id(public),
            "public_key": base64.b64encode(public).decode(), "manifest": manifest,
            "signature": base64.b64encode(key.sign(canonical(manifest))).decode()}


class CertificateInvalid(Exception):
    """The certificate, or a file said to be of it, is not what the service signed."""


@dataclass(frozen=True)
class Checked:
    """What `check` found: the signing key's id, whether it is the pinned one, and each file's artefact."""

    key_id: str
    pinned: bool
    files: list[tuple[str, str]]  # (file name, artefact name)


def parse_public_key(text: str) -> bytes:
    """A public key given as base64 of its 32 bytes, or as PEM (SubjectPublicKeyInfo)."""
    text = text.strip()
    if text.startswith("-----BEGIN"):
        key = serialization.load_pem_public_key(text.encode())
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError("not an Ed25519 public key")
        return public_raw(key)
    raw = base64.b64decode(text, validate=True)
    if len(raw) != 32:
        raise ValueError("an Ed25519 public key is 32 bytes")
    return raw


def check(certificate: dict[str, Any], files: dict[str, bytes], pinned: bytes | None = None) -> Checked:
    """Check the certificate's signature (with `pinned`, also that the pinned key made it) and that every file
    is one of its artefacts byte for byte; `CertificateInvalid` says what does not hold."""
    if certificate.get("format") != FORMAT or certificate.get("algorithm") != ALGORITHM:
        raise CertificateInvalid(f"not a certificate of this service (format {FORMAT}, algorithm {ALGORITHM})")
    try:
        public = base64.b64decode(str(certificate["public_key"]), validate=True)
        signature = base64.b64decode(str(certificate["signature"]), validate=True)
        manifest = certificate["manifest"]
        Ed25519PublicKey.from_public_bytes(public).verify(signature, canonical(manifest))
    except (KeyError, ValueError, TypeError, InvalidSignature):
        raise CertificateInvalid("the signature does not match the manifest: the certificate was changed, or was "
                                 "not signed by the key it names") from None
    if pinned is not None and public != pinned:
        raise CertificateInvalid(f"signed by key {key_id(public)}, not by the pinned key {key_id(pinned)}")
    by_hash = {entry["sha256"]: entry["name"] for entry in manifest.get("artefacts", [])}
    found: list[tuple[str, str]] = []
    for name, body in files.items():
        digest = hashlib.sha256(body).hexdigest()
        if digest not in by_hash:
            raise CertificateInvalid(f"{name} is not an artefact of this capture (its SHA-256 {digest} is not in "
                                     "the manifest): it was changed, or belongs to another capture")
        found.append((name, by_hash[digest]))
    return Checked(key_id(public), pinned is not None, found)
