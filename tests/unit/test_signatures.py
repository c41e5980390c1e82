"""Signed requests: both message forms (docs/using.md, Keys, quotas and signed requests)."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from service import signatures
from service.params import JsonNumber, collect, parse_body

KEY = "signing-secret"


def hexmac(message: str) -> str:
    return hmac.new(KEY.encode(), message.encode(), hashlib.sha256).hexdigest()


@pytest.mark.parametrize(("pairs", "message"), [
    ([("url", "https://example.com"), ("access_key", "k")], "access_key=k&url=https%3A%2F%2Fexample.com"),
    ([("b", "2"), ("a", "1"), ("signature", "x")], "a=1&b=2"),
    ([("hide_selectors", ".b"), ("hide_selectors", ".a"), ("format", "png")],
     "format=png&hide_selectors=.b&hide_selectors=.a"),
    ([("html", "<p>a b</p>")], "html=%3Cp%3Ea%20b%3C%2Fp%3E"),
    ([("x", "é~_-.")], "x=%C3%A9~_-."),
    ([("B", "1"), ("a", "2")], "B=1&a=2"),
], ids=["sorted", "signature-excluded", "arrays-in-order", "space-is-%20", "unreserved-kept", "byte-order"])
def test_canonical_message(pairs: list[tuple[str, str]], message: str) -> None:
    assert signatures.canonical_message(pairs) == message


def test_json_values_sign_as_written() -> None:
    body = parse_body(b'{"url": "https://e.com", "device_scale_factor": 2.50, "full_page": true, '
                      b'"hide_selectors": [".a", ".b"]}')
    assert isinstance(body["device_scale_factor"], JsonNumber)
    raw = collect(method="POST", raw_query="", body=body, header_key=None,
                  array_params=frozenset({"hide_selectors"}))
    assert signatures.canonical_message(raw.pairs) == (
        "device_scale_factor=2.50&full_page=true&hide_selectors=.a&hide_selectors=.b&url=https%3A%2F%2Fe.com")


def test_both_forms_are_accepted_for_get() -> None:
    raw_query = "url=https%3A%2F%2Fe.com&access_key=k&signature=SIG&format=png"
    raw = collect(method="GET", raw_query=raw_query, body={}, header_key=None, array_params=frozenset())
    canonical = hexmac("access_key=k&format=png&url=https%3A%2F%2Fe.com")
    as_sent = hexmac("url=https%3A%2F%2Fe.com&access_key=k&format=png")
    for good in (canonical, as_sent, as_sent.upper()):
        assert signatures.is_valid(good, KEY, pairs=raw.pairs, raw_query=raw_query, method="GET")
    assert not signatures.is_valid(hexmac("other"), KEY, pairs=raw.pairs, raw_query=raw_query, method="GET")


def test_as_sent_form_is_get_only() -> None:
    raw_query = "b=2&a=1"
    raw = collect(method="POST", raw_query=raw_query, body={}, header_key=None, array_params=frozenset())
    assert not signatures.is_valid(hexmac("b=2&a=1"), KEY, pairs=raw.pairs, raw_query=raw_query, method="POST")
    assert signatures.is_valid(hexmac("a=1&b=2"), KEY, pairs=raw.pairs, raw_query=raw_query, method="POST")


def test_query_without_signature_keeps_everything_else_verbatim() -> None:
    assert signatures.query_without_signature("a=%20x&signature=1&b=+&sig%6eature=2") == "a=%20x&b=+"


def test_a_non_ascii_signature_is_simply_wrong() -> None:
    pairs = [("url", "https://example.com")]
    assert not signatures.is_valid("é" * 64, "key", pairs=pairs, raw_query="url=https://example.com", method="GET")
