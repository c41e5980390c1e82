"""Property tests of the parameter parser: whatever a caller sends, the answer is the options or a
`request_not_valid` naming fields, never another exception (which the API would turn into a 500)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from animate.options import AnimateOptions, parse_animate_options
from render.contract.errors import RequestNotValid
from render.contract.options import TakeOptions, parse_take_options
from service.params import collect, parse_body

TAKE_NAMES = sorted(field.alias or name for name, field in TakeOptions.model_fields.items())
ANIMATE_NAMES = sorted(field.alias or name for name, field in AnimateOptions.model_fields.items())
ARRAYS = frozenset({"hide_selectors", "block_requests", "block_resources", "cookies", "headers", "scripts",
                    "styles"})
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Values as they arrive: query strings, and the JSON types a body can hold.
texts = st.text(max_size=40) | st.sampled_from(
    ["", "0", "-1", "1e309", "NaN", "true", "yes", "http://example.com", "javascript:alert(1)", "a" * 3000,
     "\x00", "9" * 40, "png", "pdf", "mp4", "iphone_15", ".a, .b", "https://[::1]/"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=8)


def params_for(names: list[str], values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    known = st.dictionaries(st.sampled_from(names), values, max_size=8)
    unknown = st.dictionaries(st.text(max_size=12), values, max_size=2)
    source = st.sampled_from([{"url": "https://example.com/"}, {"html": "<p>x</p>"}, {"markdown": "# x"}, {}])
    return st.tuples(source, known, unknown).map(lambda parts: {**parts[0], **parts[1], **parts[2]})


def assert_parses_or_names_fields(parse: Any, params: dict[str, Any]) -> None:
    try:
        parse(params)
    except RequestNotValid as error:
        assert error.message
        for detail in error.details:
            assert detail.field and detail.message
        named = {detail.field for detail in error.details} | {name for name in params if name in error.message}
        assert named or "url" in error.message, f"no field named: {error.message}"


@FUZZ
@given(params_for(TAKE_NAMES, texts))
def test_take_parameters_from_a_query_string(params: dict[str, Any]) -> None:
    assert_parses_or_names_fields(parse_take_options, params)


@FUZZ
@given(params_for(TAKE_NAMES, json_values))
def test_take_parameters_from_a_json_body(params: dict[str, Any]) -> None:
    assert_parses_or_names_fields(parse_take_options, params)


@FUZZ
@given(params_for(ANIMATE_NAMES, json_values))
def test_animate_parameters(params: dict[str, Any]) -> None:
    assert_parses_or_names_fields(parse_animate_options, params)


@FUZZ
@given(st.text(max_size=300), st.binary(max_size=300))
def test_query_strings_and_bodies(raw_query: str, body: bytes) -> None:
    try:
        collect(method="POST", raw_query=raw_query, body=parse_body(body), header_key=None, array_params=ARRAYS)
    except RequestNotValid as error:
        assert error.message
