"""From query string and JSON body to raw parameters."""

from __future__ import annotations

import pytest

from render.contract.errors import RequestNotValid
from service.params import collect, parse_body

ARRAYS = frozenset({"hide_selectors"})


def test_repeated_query_keys_make_arrays() -> None:
    raw = collect(method="GET", raw_query="hide_selectors=.a&hide_selectors=.b&url=x", body={},
                  header_key=None, array_params=ARRAYS)
    assert raw.values == {"hide_selectors": [".a", ".b"], "url": "x"}


def test_body_wins_over_query_on_a_clash() -> None:
    raw = collect(method="POST", raw_query="format=png&url=q", body={"format": "jpeg"}, header_key=None,
                  array_params=ARRAYS)
    assert raw.values == {"format": "jpeg", "url": "q"}


def test_scalar_given_twice_is_refused() -> None:
    with pytest.raises(RequestNotValid) as caught:
        collect(method="GET", raw_query="format=png&format=jpeg", body={}, header_key=None, array_params=ARRAYS)
    assert caught.value.details[0].field == "format"


def test_credentials_are_separated_and_header_wins() -> None:
    raw = collect(method="GET", raw_query="access_key=q&signature=s&url=x", body={}, header_key="h",
                  array_params=ARRAYS)
    assert (raw.access_key, raw.signature, raw.values) == ("h", "s", {"url": "x"})


@pytest.mark.parametrize("body", [b"[1,2]", b"{nope", b'"text"'])
def test_body_must_be_a_json_object(body: bytes) -> None:
    with pytest.raises(RequestNotValid):
        parse_body(body)


def test_json_null_means_absent() -> None:
    raw = collect(method="POST", raw_query="", body={"url": "x", "selector": None}, header_key=None,
                  array_params=ARRAYS)
    assert raw.values == {"url": "x"}
