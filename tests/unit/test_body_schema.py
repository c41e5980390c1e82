"""JSON bodies held to the OpenAPI document (service/api/body_schema.py): jsonschema-rs lets a body through at once
only where jsonschema, which makes the messages, would find nothing wrong with it either; whatever it refuses is
read again by jsonschema, so the answers are as they were without it."""

from __future__ import annotations

import json
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from render.contract.errors import MOST_DETAILS, RequestNotValid
from service.api import body_schema
from service.api.app import create_app
from service.settings import load_settings

COMPONENTS = ("TakeOptions", "AnimateOptions", "BulkRequest", "CompareRequest", "MonitorSpec", "MonitorChange")
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCREENSHOT_REDIS_URL", "redis://127.0.0.1:1/0")  # never connected to: the document only
        return create_app(load_settings()).openapi()


def _both(document: dict[str, Any], component: str) -> tuple[Any, Draft202012Validator]:
    schema = {"$ref": f"#/components/schemas/{component}", "components": document["components"]}
    return jsonschema_rs.validator_for(schema), Draft202012Validator(schema)


def _names(document: dict[str, Any], component: str) -> list[str]:
    return sorted(document["components"]["schemas"][component].get("properties", {}))


# What a body's values may be: each JSON type, the edges of numbers (past 64 bits, a float that is a whole number),
# strings that a pattern's `$` reads differently in Python and in ECMA (a final newline), nested values.
scalars = (st.none() | st.booleans() | st.integers() | st.sampled_from([2**63, 2**64, -2**63 - 1, 10**30, 0, 1, -1])
           | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1.0, 1280.0, 0.5, -0.0])
           | st.text(max_size=20) | st.sampled_from(["png", "https://example.com/", "abc\n", "", "iphone_15", "a-b"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)


@pytest.mark.parametrize("component", COMPONENTS)
def test_what_jsonschema_rs_lets_through_jsonschema_finds_nothing_wrong_with(document: dict[str, Any],
                                                                            component: str) -> None:
    fast, slow = _both(document, component)
    names = _names(document, component)
    entries = st.dictionaries(st.sampled_from(_names(document, "TakeOptions")), values, max_size=4).map(
        lambda entry: {**entry, "url": "https://example.com/"})
    schedules = st.fixed_dictionaries({}, optional={"interval": values | st.integers(1, 3600), "cron": values,
                                                    "timezone": values | st.just("Europe/Paris")})
    nested = {"BulkRequest": st.fixed_dictionaries({"requests": st.lists(entries, max_size=3)},
                                                   optional={"options": entries}),
              "CompareRequest": st.fixed_dictionaries({"before": entries, "after": entries},
                                                      optional={"threshold": values}),
              "MonitorSpec": st.fixed_dictionaries({"request": entries, "schedule": schedules},
                                                   optional={"paused": values, "keep_runs": values})}
    bodies = st.dictionaries(st.sampled_from(names), values, max_size=6) | nested.get(component, st.nothing())
    agreed = {"both": 0}

    @FUZZ
    @given(bodies)
    def agree(body: dict[str, Any]) -> None:
        if fast.is_valid(body):
            assert slow.is_valid(body), body
            agreed["both"] += 1

    agree()
    assert agreed["both"], "no body was found valid: the test would show nothing"


def _check(document: dict[str, Any], component: str, body: dict[str, Any], *, whole: bool = False) -> None:
    body_schema.check(document, component, json.dumps(body).encode(), whole=whole)


def _named(document: dict[str, Any], component: str, body: dict[str, Any], *, whole: bool = False
           ) -> list[tuple[str, str]]:
    """The fields and messages of the check's answer; none when it lets `body` through."""
    try:
        _check(document, component, body, whole=whole)
    except RequestNotValid as refused:
        return [(detail.field, detail.message) for detail in refused.details]
    return []


def test_a_body_that_keeps_its_schema_passes_and_one_that_does_not_is_refused_naming_the_field(
        document: dict[str, Any]) -> None:
    _check(document, "BulkRequest", {"requests": [{"url": "https://example.com/", "full_page": True}]}, whole=True)
    assert [field for field, _ in _named(document, "BulkRequest", {"requests": [
        {"url": "https://example.com/", "full_page": "yes"}]}, whole=True)] == ["requests.0.full_page"]
    # A rule other than a type, in a route held to the types only: refused by jsonschema-rs, let through by the
    # check, as before it (the options' own validation answers it).
    _check(document, "TakeOptions", {"url": "https://example.com/", "viewport_width": 10**9})


def _every_detail(document: dict[str, Any], component: str, body: dict[str, Any], whole: bool
                  ) -> list[tuple[str, str]]:
    """What the check answered when jsonschema read the whole body (before it was bounded)."""
    plain = Draft202012Validator({"$ref": f"#/components/schemas/{component}", "components": document["components"]})
    found = [(detail.field, detail.message) for error in plain.iter_errors(body)
             for detail in body_schema._details(error, whole)]
    return list(dict.fromkeys(found))


@pytest.mark.parametrize("component", COMPONENTS)
def test_the_bounded_reading_names_what_the_whole_reading_named(document: dict[str, Any], component: str) -> None:
    """jsonschema goes down only into the values jsonschema-rs finds wrong: for any body within its lists' maxItems
    and with fewer wrong fields than an answer names, the answer is the one jsonschema's reading of all of it made,
    in the same order."""
    names = _names(document, component)
    entries = st.dictionaries(st.sampled_from(_names(document, "TakeOptions")), values, max_size=4)
    bodies = st.dictionaries(st.sampled_from(names), values | st.lists(entries, max_size=3) | entries, max_size=6)
    compared = {"refused": 0}

    @FUZZ
    @given(bodies, st.booleans())
    def same(body: dict[str, Any], whole: bool) -> None:
        expected = _every_detail(document, component, body, whole)
        if len(expected) < MOST_DETAILS:
            assert _named(document, component, body, whole=whole) == expected, body
            compared["refused"] += bool(expected)

    same()
    assert compared["refused"], "no body was refused: the test would show nothing"


def test_a_hostile_body_is_read_only_where_it_is_wrong(document: dict[str, Any],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Bodies of a few MB that held the API's event loop for 8 to 36 s while jsonschema read them whole (the check
    runs before the caller is known): each answer names what is wrong, and jsonschema goes down into a few values
    only, not into each of the hundreds of thousands."""
    went_down: list[object] = []
    real = body_schema._wording

    def counting(schema: dict[str, Any], compiled: Any) -> Any:
        validator = real(schema, compiled)
        descend = type(validator).descend  # a class of its own, made for this validator

        def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            went_down.append(args)
            return descend(self, *args, **kwargs)

        type(validator).descend = counted
        return validator

    monkeypatch.setattr(body_schema, "_wording", counting)
    monkeypatch.setattr(body_schema, "_VALIDATORS", {})
    entries = [{"html": "x"}] * 100_000  # valid each, far too many
    assert _named(document, "BulkRequest", {"requests": entries}, whole=True) == [
        ("requests", "must have at most 20 items")]
    cookies = ["a=b"] * 300_000  # an array parameter takes 1,000 values at most, held to its types only or not
    assert _named(document, "CompareRequest", {"before": {"html": "x", "cookies": cookies}, "after": {"html": "y"}}
                  ) == [("before.cookies", "must have at most 1000 items")]
    cookies = ["a=b"] * 999 + [5]  # the last one wrong
    assert _named(document, "CompareRequest", {"before": {"html": "x", "cookies": cookies}, "after": {"html": "y"}}
                  ) == [("before.cookies.999", "must be a string")]
    # Held to its types only, a list of 1,000 choices none of which is one: no type is wrong (the options'
    # validation answers it), and jsonschema reads a few hundred of its items at most.
    assert _named(document, "TakeOptions", {"url": "https://example.com/", "wait_until": ["x"] * 1000}) == []
    assert len(went_down) < 2 * body_schema.MOST_ERRORS, len(went_down)
    went_down.clear()
    flags = [name for name, part in document["components"]["schemas"]["BulkEntry"]["properties"].items()
             if {"type": "boolean"} in part.get("anyOf", [])]
    wrong = [{"url": 5, **dict.fromkeys(flags, "yes")}] * 20  # 20 entries of many wrong fields each
    named = _named(document, "BulkRequest", {"requests": wrong * 50}, whole=True)
    assert named == [("requests", "must have at most 20 items")]
    assert len(went_down) < 100, len(went_down)
    named = _named(document, "BulkRequest", {"requests": wrong}, whole=True)
    assert len(wrong[0]) * 20 > MOST_DETAILS == len(named)
    assert named[0] == ("requests.0.url", "must be a string or null")


def test_an_empty_body_is_no_parameters(document: dict[str, Any]) -> None:
    body_schema.check(document, "MonitorChange", b" ", whole=True)  # changes nothing
    with pytest.raises(RequestNotValid) as refused:
        body_schema.check(document, "BulkRequest", b"", whole=True)
    assert [detail.field for detail in refused.value.details] == ["requests"]
