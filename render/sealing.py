"""Secrets a caller hands a capture, sealed for the worker that runs it and no one else.

What crosses the queue stays in Redis for a while: the waiting lane for seconds, an async job's RQ record
and its job record for up to 7 days, a webhook's pending delivery for hours. The caller's credentials for
the target (`cookies`, `headers`, `authorization`, the `proxy` URL with its password, a user and password
in the `url`), for their own bucket (`storage_access_key_id`, `storage_secret_access_key`) and for the vision
provider travel apart from the options, encrypted (AES-GCM) with
SCREENSHOT_JOB_SECRET, which Redis never sees, and bound to the job's reference; only the worker running
the job opens them, in memory. Pure: the API imports it.
"""

from __future__ import annotations

import base64
import hashlib
import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

# The options that carry credentials. The url too, when it holds a user or password (then the options keep
# it without them).
SECRET_FIELDS = ("cookies", "headers", "authorization", "proxy", "storage_access_key_id", "storage_secret_access_key")
_NONCE_BYTES = 12


class Unsealable(Exception):
    """The token was not sealed with this secret for this job."""


def _cipher(secret: str, purpose: bytes) -> AESGCM:
    return AESGCM(hashlib.sha256(b"screenshot-service " + purpose + b"\0" + secret.encode()).digest())


def seal(data: bytes, secret: str, reference: str, purpose: bytes = b"job secrets") -> str:
    """`data` encrypted for the worker running job `reference` (and no other job)."""
    nonce = os.urandom(_NONCE_BYTES)
    return base64.urlsafe_b64encode(nonce + _cipher(secret, purpose).encrypt(nonce, data, reference.encode())).decode()


def unseal(token: str, secret: str, reference: str, purpose: bytes = b"job secrets") -> bytes:
    """What `seal` was given, or `Unsealable`."""
    try:
        raw = base64.urlsafe_b64decode(token.encode())
        return _cipher(secret, purpose).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], reference.encode())
    except (InvalidTag, ValueError):
        raise Unsealable from None


def without_credentials(url: str) -> str:
    """`url` without the user and password it may hold."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def split_secrets(payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what may be stored, the secrets) of an options payload."""
    public = dict(payload)
    secrets = {name: public.pop(name) for name in SECRET_FIELDS if name in public}
    url = public.get("url")
    if isinstance(url, str) and "@" in urlsplit(url).netloc:
        secrets["url"] = url
        public["url"] = without_credentials(url)
    return public, secrets


def public_options(payload: dict[str, Any]) -> dict[str, Any]:
    """What of an options payload may be stored (a variant's, a webhook delivery's)."""
    return split_secrets(payload)[0]


def seal_secrets(secrets: dict[str, Any], secret: str, reference: str) -> str:
    return seal(orjson.dumps(secrets), secret, reference)


def unseal_secrets(token: str, secret: str, reference: str) -> dict[str, Any]:
    opened: dict[str, Any] = orjson.loads(unseal(token, secret, reference))
    return opened
