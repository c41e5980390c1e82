"""The service's ECDSA P-384 key that signs the web archives of `archive=true` (the kind of key ReplayWeb.page
verifies): the operator's file, or one generated once and shared by every API and worker through Redis, as the
key of certified captures is."""

from __future__ import annotations

import base64
from pathlib import Path

import redis
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from render.queue.keys import ARCHIVE_KEY


class NoArchiveKey(Exception):
    """Neither a key file nor Redis to keep a generated key in (a one-off capture from the command line)."""


def load(pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp384r1":
        raise ValueError("not an ECDSA P-384 private key")
    return key


def archive_key(key_file: str, connection: redis.Redis | None) -> ec.EllipticCurvePrivateKey:
    """SCREENSHOT_ARCHIVE_KEY_FILE's key, or the one in Redis (made by whoever needs it first)."""
    if key_file:
        return load(Path(key_file).read_bytes())
    if connection is None:
        raise NoArchiveKey("archive=true needs SCREENSHOT_ARCHIVE_KEY_FILE here (no Redis to keep a key in)")
    made = ec.generate_private_key(ec.SECP384R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    connection.set(ARCHIVE_KEY, made, nx=True)
    stored = connection.get(ARCHIVE_KEY)
    return load(stored.encode() if isinstance(stored, str) else bytes(stored or b""))


def public_key(key: ec.EllipticCurvePrivateKey) -> str:
    """Base64 of the public key's SubjectPublicKeyInfo (DER): the form a WACZ's signedData holds."""
    return base64.b64encode(key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).decode()
