"""Signed requests (docs/using.md, Keys, quotas and signed requests): lowercase hex HMAC-SHA256 keyed with the
organisation's signing key.

Two messages are accepted, a request passes when either matches:
1. canonical: every parameter but `signature`, sorted by name (byte order, stable), one
   `name=value` per array element, RFC 3986 percent-encoding, joined with `&`;
2. as sent (GET only): the raw query string with the `signature` parameter removed.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from urllib.parse import quote, unquote_plus

_UNRESERVED = "-._~"


def _encode(text: str) -> str:
    return quote(text, safe=_UNRESERVED)


def canonical_message(pairs: Iterable[tuple[str, str]]) -> str:
    """The canonical string of (name, value) pairs; `signature` itself is left out."""
    kept = [(name, value) for name, value in pairs if name != "signature"]
    kept.sort(key=lambda pair: pair[0].encode())
    return "&".join(f"{_encode(name)}={_encode(value)}" for name, value in kept)


def query_without_signature(raw_query: str) -> str:
    """The query string exactly as received, minus every `signature=` parameter."""
    parts = [part for part in raw_query.split("&")
             if part and unquote_plus(part.split("=", 1)[0]) != "signature"]
    return "&".join(parts)


def sign(message: str | bytes, signing_key: str) -> str:
    """Lowercase hex HMAC-SHA256 of `message` keyed with `signing_key`: the one signature of the service (signed
    requests and bodies, lazy bulk links, webhook bodies)."""
    data = message.encode() if isinstance(message, str) else message
    return hmac.new(signing_key.encode(), data, hashlib.sha256).hexdigest()


def matches(signature: str, message: str | bytes, signing_key: str) -> bool:
    """Constant-time: whether `signature` is `message`'s."""
    return hmac.compare_digest(signature.strip().lower().encode(), sign(message, signing_key).encode())


def sign_params(pairs: Iterable[tuple[str, str]], signing_key: str) -> str:
    """The canonical signature for these parameters (what clients and the CLI compute)."""
    return sign(canonical_message(pairs), signing_key)


def is_valid(signature: str, signing_key: str, *, pairs: list[tuple[str, str]], raw_query: str,
             method: str) -> bool:
    """Constant-time check of `signature` against both accepted message forms."""
    given = signature.strip().lower().encode()  # bytes: compare_digest refuses non-ASCII text
    ok = hmac.compare_digest(sign(canonical_message(pairs), signing_key).encode(), given)
    if method == "GET":
        ok |= hmac.compare_digest(sign(query_without_signature(raw_query), signing_key).encode(), given)
    return ok
