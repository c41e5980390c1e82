"""JSON bodies as the OpenAPI document types them: a value of another JSON type is refused, naming
the field, on every parameter the document types; null is accepted wherever the document says so (the same as
leaving the parameter out); `/bulk` is held to its whole schema, leaving to each entry's answer only what the
schema cannot say. The wrong values are derived from the served document itself, so a parameter added later
is covered too."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from tests.conftest import Org
from tests.support.images import decode
from tests.support.site import Site

pytestmark = pytest.mark.browser
# Values and the JSON types they have: a property gets the first of none of its types.
CANDIDATES = ((0, {"integer", "number"}), (False, {"boolean"}), ("1", {"string"}), ([1], {"array"}),
              ({"a": 1}, {"object"}))


def _types(prop: dict[str, Any]) -> set[str]:
    kinds: set[str] = set()
    for branch in prop.get("anyOf", [prop]):
        kind = branch.get("type")
        kinds |= {kind} if isinstance(kind, str) else set(kind or ())
    return kinds


def wrong_value(prop: dict[str, Any]) -> Any:
    """A value of none of `prop`'s JSON types."""
    return next(value for value, kinds in CANDIDATES if not kinds & _types(prop))


def post(client: httpx.Client, org: Org, path: str, body: dict[str, Any]) -> httpx.Response:
    return client.post(path, json=body, headers={"x-access-key": org.access_key})


@pytest.mark.parametrize(("route", "component"), [("/v1/screenshot/take", "TakeOptions"),
                                                   ("/v1/screenshot/animate", "AnimateOptions")])
def test_every_typed_parameter_refuses_a_value_of_another_json_type(
        client: httpx.Client, org: Org, route: str, component: str) -> None:
    properties = client.get("/openapi.json").json()["components"]["schemas"][component]["properties"]
    typed = {name: prop for name, prop in properties.items() if _types(prop) - {"null"}}
    assert len(typed) > 100
    body = {name: wrong_value(prop) for name, prop in typed.items() if name != "access_key"}
    response = post(client, org, route, body)
    assert response.status_code == 400, response.text
    answer = response.json()
    assert answer["error_code"] == "request_not_valid"
    assert {detail["field"] for detail in answer["error_details"]} == set(body)
    # Named by what the document allows, never by what was sent.
    assert all(detail["message"].startswith("must be ") for detail in answer["error_details"])
    # access_key too, in the body (`[null, null]` was taken as no key at all).
    refused = post(client, org, route, {"html": "<p>x</p>", "access_key": [None, None]})
    assert (refused.status_code, refused.json()["error_details"]) == (
        400, [{"field": "access_key", "message": "must be a string or null"}])


def test_the_issue_s_examples_are_refused_and_nulls_are_left_out(client: httpx.Client, org: Org) -> None:
    for field, value in (("block_ads", 0), ("viewport_width", False), ("attachment_name", 0), ("full_page", "true"),
                         ("delay", 1.5), ("hide_selectors", ".ad"), ("wait_until", [1])):
        response = post(client, org, "/v1/screenshot/take", {"html": "<p>x</p>", field: value})
        assert response.status_code == 400, (field, response.text)
        assert [detail["field"] for detail in response.json()["error_details"]] in ([field], [f"{field}.0"])
    # A null is the parameter left out: the defaults (1280 x 1024, png) apply.
    nulls = post(client, org, "/v1/screenshot/take", {"html": "<p>x</p>", "viewport_width": None,
                                                       "block_ads": None, "format": None, "wait_until": None})
    assert nulls.status_code == 200, nulls.text
    assert nulls.headers["content-type"] == "image/png"
    assert decode(nulls.content).width == 1280
    # The query string stays text, as the spec needs.
    query = client.get("/v1/screenshot/take", params={"html": "<p>x</p>", "viewport_width": "300", "block_ads": "1",
                                                      "access_key": org.access_key})
    assert (query.status_code, decode(query.content).width) == (200, 300)


def test_bulk_is_held_to_its_whole_schema(client: httpx.Client, org: Org, site: Site) -> None:
    for body, field in (({"execute": 0, "requests": [{"html": "x"}]}, "execute"),
                        ({"access_key": {}, "requests": [{"html": "x"}]}, "access_key"),
                        ({"requests": [{"html": "x"}, {"html": "x", "viewport_width": 0}]},
                         "requests.1.viewport_width"),
                        ({"requests": [{"html": "x", "format": "bmp"}]}, "requests.0.format"),
                        ({"requests": [{"html": "x", "nope": 1}]}, "requests.0.nope"),
                        ({"options": {"block_ads": "yes"}, "requests": [{"html": "x"}]}, "options.block_ads")):
        response = post(client, org, "/v1/screenshot/bulk", body)
        assert response.status_code == 400, (body, response.text)
        assert [detail["field"] for detail in response.json()["error_details"]] == [field]
    # Nulls are left out; what the schema cannot say (one source of three) is still the entry's own answer.
    answer = post(client, org, "/v1/screenshot/bulk", {
        "execute": None, "options": None, "merge_pdf": None,
        "requests": [{"url": site.url("/colours.html")}, {"url": site.url("/colours.html"), "html": "<p>x</p>"}]})
    assert answer.status_code == 200, answer.text
    lazy, refused = answer.json()
    assert lazy["url"].startswith(str(client.base_url))
    assert refused["url"] is None and refused["response"]["status"] == 400
    assert json.loads(base64.b64decode(refused["response"]["body"]))["error_code"] == "request_not_valid"


def test_compare_and_monitors_are_typed_and_a_monitor_changes_in_part(client: httpx.Client, org: Org,
                                                                     site: Site) -> None:
    compare = post(client, org, "/v1/screenshot/compare", {"before": {"html": "x", "viewport_width": False},
                                                           "after": {"reference": "r"}})
    assert [d["field"] for d in compare.json()["error_details"]] == ["before.viewport_width"]
    monitor = {"request": {"url": site.url("/colours.html"), "block_ads": "yes"}, "schedule": {"interval": "60"},
               "paused": True}
    refused = post(client, org, "/v1/monitors", monitor)
    assert sorted(d["field"] for d in refused.json()["error_details"]) == ["request.block_ads", "schedule.interval"]
    created = post(client, org, "/v1/monitors", {**monitor, "request": {"url": site.url("/colours.html")},
                                                 "schedule": {"interval": 3600}})
    assert created.status_code == 201, created.text
    # PATCH takes the fields to change alone (its schema, MonitorChange, requires none).
    changed = client.patch(f"/v1/monitors/{created.json()['id']}", json={"name": "renamed"},
                           headers={"x-access-key": org.access_key})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["name"], changed.json()["schedule"]["interval"]) == ("renamed", 3600)
    wrong = client.patch(f"/v1/monitors/{created.json()['id']}", json={"paused": "no"},
                         headers={"x-access-key": org.access_key})
    assert [d["field"] for d in wrong.json()["error_details"]] == ["paused"]
    document = client.get("/openapi.json").json()
    assert document["components"]["schemas"]["MonitorChange"]["required"] == []
    patch = document["paths"]["/v1/monitors/{monitor_id}"]["patch"]
    assert patch["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/MonitorChange")


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v1/screenshot/take", {"url": "https://example.com/", "wait_until": ["x"] * 5000}, "wait_until"),
    ("/v1/screenshot/take", {"html": "<p>x</p>", "cookies": ["a=b"] * 1001}, "cookies"),
    ("/v1/screenshot/bulk", {"requests": [{"html": "x"}] * 3000}, "requests"),
    ("/v1/screenshot/compare", {"before": {"html": "x", "hide_selectors": [".a"] * 5000}, "after": {"html": "y"}},
     "before.hide_selectors"),
])
def test_an_array_past_what_it_takes_is_refused_whole_before_the_caller_is_known(
        client: httpx.Client, org: Org, path: str, body: dict[str, Any], field: str) -> None:
    """Arrays like those of the bodies of a few MB that held the API's event loop for seconds (read value by value
    before the key was even looked at; this service takes 64 KiB bodies): refused whole, naming the array, with or
    without a key; nothing charged."""
    used = client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"]
    for headers in ({"x-access-key": org.access_key}, {}):
        refused = client.post(path, content=json.dumps(body), headers={**headers, "content-type": "application/json"})
        assert refused.status_code == 400, refused.text[:300]
        details = refused.json()["error_details"]
        assert len(details) == 1 and details[0]["field"] == field, details
        assert details[0]["message"].startswith("must have at most "), details
    assert client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"] == used


LONG = "9" * 5000  # past the 4,300 digits Python makes an int of


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v1/screenshot/take", '{"url": "https://example.com/", "viewport_width": LONG}', "viewport_width"),
    ("/v1/screenshot/take", '{"html": "<p>x</p>", "delay": -LONG}', "delay"),
    ("/v1/screenshot/animate", '{"html": "<p>x</p>", "duration": LONG}', "duration"),
    ("/v1/screenshot/bulk", '{"requests": [{"html": "x", "timeout": LONG}]}', "requests.0.timeout"),
    ("/v1/screenshot/compare", '{"before": {"html": "x", "image_quality": LONG}, "after": {"html": "y"}}',
     "before.image_quality"),
    ("/v1/monitors", '{"name": "m", "schedule": {"interval": LONG}, "request": {"url": "https://example.com/"}}',
     "schedule.interval"),
])
def test_a_number_too_long_for_python_is_refused_naming_its_field(
        client: httpx.Client, org: Org, path: str, body: str, field: str) -> None:
    """A number of 5,000 digits answered 500 on every JSON route, with a key or without: the body check made a
    Python int of it first. It is refused as out of range or not an integer, naming the field; nothing charged."""
    used = client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"]
    for headers in ({"x-access-key": org.access_key}, {}):
        refused = client.post(path, content=body.replace("LONG", LONG),
                              headers={**headers, "content-type": "application/json"})
        assert refused.status_code == 400, refused.text[:300]
        assert refused.json()["error_code"] == "request_not_valid"
        assert [detail["field"] for detail in refused.json()["error_details"]] == [field], refused.text[:300]
        assert LONG[:50] not in refused.text
    assert client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"] == used


DEEP = 1500  # levels: past Python's recursion limit (1,000), which the body's reader hit first


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v1/screenshot/take", '{"html": "<p>x</p>", "headers": ' + "[" * DEEP + "]" * DEEP + "}", "headers"),
    ("/v1/screenshot/bulk", '{"requests": [' + "{" + '"a": {' * DEEP + "}" * DEEP + "}]}", "requests"),
    ("/v1/screenshot/take", "[" * DEEP + "]" * DEEP, "body"),
    ("/v1/monitors", '{"name": "m", "request": {"url": "https://example.com/"}, "x": ' + "[" * 101 + "]" * 101 + "}",
     "x"),
    ("/v1/screenshot/take", '{"html": "<p>x</p>", "viewport_width": NaN}', "body"),
    ("/v1/screenshot/take", '{"html": "<p>x\\ud800</p>"}', "body"),
    ("/v1/monitors", '{"name": "m", "request": {"url": "https://example.com/"}, "\\udc00": 1}', "body"),
    ("/v1/screenshot/compare", '{"before": {"html": "x", "delay": -Infinity}, "after": {"html": "y"}}', "body"),
    ("/v1/screenshot/take", '{"html": "<p>x</p>", "vision_prompt": "p", "vision_provider_api_key": "k", '
     '"vision_response_schema": ' + '{"type": "object", "properties": {"a": ' * 45 + "{}" + "}}" * 45 + "}",
     "vision_response_schema"),
])
def test_deep_nesting_and_json_s_missing_numbers_are_refused_naming_the_field(
        client: httpx.Client, org: Org, path: str, body: str, field: str) -> None:
    """Nesting past what a request needs (100 levels; a body 1,500 deep answered 500 once Python's reader
    recursed past its limit), NaN or Infinity, which Python reads and JSON has not, and half a surrogate pair
    (`"\\ud800"`, which answered 500 when the page or the error was written as UTF-8): 400 naming the member that
    nests too deep or the body (with a key or without: the body is read before the key is looked at), or the field
    whose own rule refuses it, nothing charged."""
    used = client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"]
    before_the_key = field != "vision_response_schema"
    for headers in ({"x-access-key": org.access_key}, {}) if before_the_key else ({"x-access-key": org.access_key},):
        refused = client.post(path, content=body, headers={**headers, "content-type": "application/json"})
        assert refused.status_code == 400, refused.text[:300]
        assert refused.json()["error_code"] == "request_not_valid", refused.text[:300]
        assert [detail["field"] for detail in refused.json()["error_details"]] == [field], refused.text[:300]
    assert client.get("/v1/screenshot/usage", params={"access_key": org.access_key}).json()["used"] == used


@pytest.mark.parametrize("schema", [
    "[" * DEEP + "]" * DEEP,
    '{"items":' * 900 + "{}" + "}" * 900,
    '{"type": "number", "maximum": NaN}',
    '{"type": "number", "maximum": ' + LONG + "}",
])
def test_a_json_schema_in_the_query_is_bounded_before_it_is_read(client: httpx.Client, org: Org,
                                                                 schema: str) -> None:
    """A vision_response_schema 900 levels deep, an array 1,500 deep, NaN and a number past a float's range in a
    GET query: 400 naming vision_response_schema (the deep ones answered 500)."""
    refused = client.get("/v1/screenshot/take", params={
        "html": "<p>x</p>", "vision_prompt": "p", "vision_provider_api_key": "secret-vision-key",
        "vision_response_schema": schema, "access_key": org.access_key})
    assert refused.status_code == 400, refused.text[:300]
    assert [detail["field"] for detail in refused.json()["error_details"]] == ["vision_response_schema"]
    assert "secret-vision-key" not in refused.text
