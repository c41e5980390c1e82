"""The service's Ed25519 key for certified captures: the operator's file, or one generated once and shared by
every API and worker through Redis (as the secret of local storage links is)."""

from __future__ import annotations

from pathlib import Path

import redis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from render.contract.certificates import load_private_key, new_private_key_pem
from render.queue.keys import CERTIFY_KEY


class NoCertifyKey(Exception):
    """Neither a key file nor Redis to keep a generated key in (a one-off capture from the command line)."""


def certify_key(key_file: str, connection: redis.Redis | None) -> Ed25519PrivateKey:
    """SCREENSHOT_CERTIFY_KEY_FILE's key, or the one in Redis (made by whoever needs it first)."""
    if key_file:
        return load_private_key(Path(key_file).read_bytes())
    if connection is None:
        raise NoCertifyKey("certify=true needs SCREENSHOT_CERTIFY_KEY_FILE here (no Redis to keep a key in)")
    connection.set(CERTIFY_KEY, new_private_key_pem(), nx=True)
    stored = connection.get(CERTIFY_KEY)
    return load_private_key(stored.encode() if isinstance(stored, str) else bytes(stored or b""))
