"""Secrets a caller hands a capture, sealed for the worker that runs it and no one else.

What crosses the queue stays in Redis for a while: the waiting lane for seconds, an async job's RQ record
and its job record for up to 7 days, a webhook's pending delivery for hours. The caller's credentials for
the target (`cookies`, `headers`, `authorization`, the `proxy` URL with its password, a user and password
in the `url`), for their own bucket (`storage_access_key_id`, `storage_secret_access_key`) and for the vision
provider (with its prompt) travel apart from the options, encrypted (AES-GCM) with SCREENSHOT_JOB_SECRET, which
Redis never sees, and bound to the job's reference; only the worker running the job opens them, in memory.
One call each way: `seal_job` in the API, `open_job` in the worker. Pure: the API imports it.
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

from render.contract.errors import ErrorDetail, RequestNotValid
from render.contract.options import VISION_FIELDS, TakeOptions
from render.contract.store import STORAGE_CREDENTIALS

# The options that carry credentials. The url too, when it holds a user or password (then the options keep
# it without them).
SECRET_FIELDS = ("cookies", "headers", "authorization", "proxy", *STORAGE_CREDENTIALS, "pdf_user_password",
                 "pdf_owner_password")
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


def seal_job(options: TakeOptions, secret: str, reference: str) -> tuple[dict[str, Any], str | None]:
    """(the options that may be stored, every secret of the job sealed for its worker, or None when it has
    none): the target's and the bucket's credentials and the vision request, in one sealed token.
    `request_not_valid` naming the fields when this server has no SCREENSHOT_JOB_SECRET to seal them with."""
    public, secrets = split_secrets(options.to_payload())
    secrets.update({name: getattr(options, name) for name in sorted(VISION_FIELDS)
                    if getattr(options, name) is not None})
    if not secrets:
        return public, None
    if not secret:
        names = sorted(name for name in secrets if name not in VISION_FIELDS or name == "vision_provider_api_key")
        raise RequestNotValid(
            f"{', '.join(names)}: this server cannot take credentials (for the target, your bucket or the vision "
            "provider), as its API and workers share no SCREENSHOT_JOB_SECRET to pass them to a worker without "
            "storing them. Ask the operator to set it.",
            [ErrorDetail(name, "not accepted by this server") for name in names])
    return public, seal_secrets(secrets, secret, reference)


def open_job(options: dict[str, Any], sealed: str | None, secret: str, reference: str) -> dict[str, Any]:
    """A job's options with its sealed secrets put back, for the worker running it (in memory only), or
    `request_not_valid` when this worker cannot open them."""
    if sealed is None:
        return options
    try:
        return {**options, **unseal_secrets(sealed, secret, reference)}
    except Unsealable:
        raise RequestNotValid(
            "The worker could not read this job's credentials (cookies, headers, authorization, proxy, storage or "
            "vision keys): the API and the workers must share SCREENSHOT_JOB_SECRET (it changed, or the service "
            "restarted while the job waited). Send the request again.") from None
