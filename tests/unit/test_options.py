"""The /take options model: parsing rules, ranges, cross-field rules, all errors at once."""

from __future__ import annotations

from typing import Any

import pytest

from render.contract.errors import RequestNotValid
from render.contract.options import TakeOptions, parse_take_options

URL = "https://example.com/"


def problems(params: dict[str, Any]) -> dict[str, str]:
    """Field -> its messages (joined) of the refusal."""
    with pytest.raises(RequestNotValid) as caught:
        parse_take_options(params)
    found: dict[str, str] = {}
    for detail in caught.value.details:
        found[detail.field] = "; ".join(filter(None, [found.get(detail.field), detail.message]))
    return found


@pytest.mark.parametrize(("raw", "expected"), [
    ("true", True), ("TRUE", True), ("1", True), ("false", False), ("False", False), ("0", False),
    (True, True), (False, False), (1, True), (0, False),
], ids=repr)
def test_booleans_accept_true_false_1_0_in_any_case(raw: Any, expected: bool) -> None:
    assert parse_take_options({"url": URL, "ignore_host_errors": raw}).ignore_host_errors is expected


@pytest.mark.parametrize("raw", ["yes", "on", "2", "", "truthy"])
def test_other_boolean_spellings_are_refused(raw: str) -> None:
    assert "must be a boolean" in problems({"url": URL, "ignore_host_errors": raw})["ignore_host_errors"]


def test_defaults_are_the_specs() -> None:
    options = parse_take_options({"url": URL})
    assert (options.format, options.response_type, options.timeout, options.navigation_timeout) == (
        "png", "by_format", 60, 30)
    assert options.wait_until == ["load"]
    assert options.image_quality == 80
    assert options.viewport.width == 1280 and options.viewport.height == 1024
    assert options.viewport.scale == 1 and not options.viewport.mobile
    assert options.dark_mode is None


def test_query_strings_become_numbers_and_lists() -> None:
    options = parse_take_options({"url": URL, "viewport_width": "800", "device_scale_factor": "1.5",
                                  "wait_until": "domcontentloaded"})
    assert options.viewport_width == 800 and options.device_scale_factor == 1.5
    assert options.wait_until == ["domcontentloaded"]


@pytest.mark.parametrize(("params", "field", "fragment"), [
    ({}, "url", "exactly one of url, html or markdown"),
    ({"url": URL, "html": "<p>"}, "url", "got url, html"),
    ({"url": "ftp://example.com/"}, "url", "http:// or https://"),
    ({"url": "javascript:alert(1)"}, "url", "http:// or https://"),
    ({"url": URL, "device_scale_factor": "6"}, "device_scale_factor", "less than or equal to 5"),
    ({"url": URL, "device_scale_factor": "0.5"}, "device_scale_factor", "greater than or equal to 1"),
    ({"url": URL, "image_quality": "101"}, "image_quality", "less than or equal to 100"),
    ({"url": URL, "timeout": "91"}, "timeout", "at most 90 for synchronous"),
    ({"url": URL, "timeout": "301"}, "timeout", "less than or equal to 300"),
    ({"url": URL, "navigation_timeout": "31"}, "navigation_timeout", "less than or equal to 30"),
    ({"url": URL, "delay": "31"}, "delay", "require async=true"),
    ({"url": URL, "delay": "10", "timeout": "10"}, "delay", "shorter than timeout"),
    ({"url": URL, "format": "bmp"}, "format", "Input should be"),
    ({"url": URL, "response_type": "xml"}, "response_type", "Input should be"),
    ({"url": URL, "viewport_device": "nokia_3310"}, "viewport_device", "Input should be"),
    ({"url": URL, "wait_until": ["load", "idle"]}, "wait_until.1", "Input should be"),
    ({"url": URL, "cache_ttl": "100"}, "cache_ttl", "greater than or equal to 14400"),
    ({"url": URL, "cache_ttl": "2592001"}, "cache_ttl", "less than or equal to 2592000"),
    ({"url": URL, "pdf_paper_format": "a7"}, "pdf_paper_format", "Input should be"),
    ({"url": URL, "pdf_margin": "10 furlongs"}, "pdf_margin", "CSS length"),
    ({"url": URL, "watermark_opacity": "1.5"}, "watermark_opacity", "less than or equal to 1"),
    ({"url": URL, "omit_background": "true", "format": "jpeg"}, "omit_background", "png or webp"),
    ({"url": URL, "clip_x": "1"}, "clip_width", "clip needs all of"),
    ({"url": URL, "geolocation_latitude": "1"}, "geolocation_accuracy", "geolocation needs all of"),
    ({"url": URL, "proxy": "http://p:1", "ip_country_code": "us"}, "proxy", "not both"),
    ({"url": URL, "cache": "true", "webhook_url": "https://h/"}, "cache", "cannot be combined"),
    ({"url": URL, "nonsense": "1"}, "nonsense", "unknown parameter"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_violations_name_the_field(params: dict[str, Any], field: str, fragment: str) -> None:
    found = problems(params)
    assert field in found, found
    assert fragment in found[field]


def test_every_violation_is_reported_at_once() -> None:
    found = problems({"url": URL, "bogus": "1", "timeout": "abc", "delay": "40", "clip_x": "3",
                      "image_quality": "-1"})
    assert {"bogus", "timeout", "delay", "clip_y", "clip_width", "clip_height", "image_quality"} <= set(found)


def test_async_allows_long_timeouts_and_delays() -> None:
    options = parse_take_options({"url": URL, "async": "true", "timeout": "300", "delay": "60"})
    assert (options.async_, options.timeout, options.delay) == (True, 300, 60)


def test_payload_round_trip_keeps_what_was_given() -> None:
    options = parse_take_options({"url": URL, "format": "png", "image_quality": "80"})
    again = TakeOptions.model_validate(options.to_payload())
    assert again == options
    assert "image_quality" in again.model_fields_set  # an explicit png quality means a palette PNG
    assert "timeout" not in again.model_fields_set


@pytest.mark.parametrize("value", ["", " ", ", ,"])
def test_wait_for_selector_must_name_a_selector(value: str) -> None:
    with pytest.raises(RequestNotValid) as caught:
        parse_take_options({"url": "https://example.com", "wait_for_selector": value})
    assert caught.value.details[0].field == "wait_for_selector"


CONFUSING = "http://127.0.0.1:8080\\@allowed.test:8080/x"  # Python's parser: allowed.test; a browser: 127.0.0.1


@pytest.mark.parametrize(("field", "value"), [
    ("url", CONFUSING), ("webhook_url", CONFUSING), ("watermark_image_url", CONFUSING),
    ("url", "http://127.1/"), ("url", "http://0x7f.1/"),
    ("proxy", "http://user:secretpw@10.0.0.1:3128\\@proxy.example:3128/"),
    ("storage_endpoint", "https://10.0.0.1\\@store.example/"),
], ids=["url", "webhook", "watermark", "short-ipv4", "hex-ipv4", "proxy", "storage-endpoint"])
def test_a_url_the_browser_reads_otherwise_is_refused_naming_its_field(field: str, value: str) -> None:
    params: dict[str, object] = {"url": "https://example.com/", field: value}
    if field.startswith("storage_"):
        params.update(store=True, storage_path="a", storage_bucket="shots")
    with pytest.raises(RequestNotValid) as refused:
        parse_take_options(params)
    assert [detail.field for detail in refused.value.details] == [field]
    assert "secretpw" not in refused.value.message  # a proxy's password is never echoed


@pytest.mark.parametrize("url", ["http://bücher.de/", "https://Example.COM./a", "http://[::1]:8080/",
                                 "http://[::ffff:127.0.0.1]/", "http://a.com%2F@b.com/", "https://example.com"])
def test_urls_both_parsers_read_alike_pass(url: str) -> None:
    assert parse_take_options({"url": url}).url == url


def test_the_recording_navigation_url_is_checked_the_same_way() -> None:
    from animate.options import parse_animate_options

    with pytest.raises(RequestNotValid) as refused:
        parse_animate_options({"url": "https://example.com/", "scenario": "scroll",
                               "scroll_try_navigate": True, "scroll_navigate_to_url": CONFUSING})
    assert [detail.field for detail in refused.value.details] == ["scroll_navigate_to_url"]


@pytest.mark.parametrize(("raw", "expected"), [
    ("5xx", ["5xx"]), ("5XX", ["5xx"]), (404, ["404"]), (["5xx", 404], ["5xx", "404"]),
    ("404, 410", ["404", "410"]), (["404,5xx"], ["404", "5xx"]), ([], []),
], ids=repr)
def test_resource_statuses_are_codes_and_classes(raw: Any, expected: list[str]) -> None:
    assert parse_take_options({"url": URL, "fail_on_resource_status": raw}).fail_on_resource_status == expected


@pytest.mark.parametrize("raw", ["6xx", "0xx", "99", "600", "4x", "abc", "٤٠٤", True, [None], {"a": 1}], ids=repr)
def test_other_resource_statuses_are_refused(raw: Any) -> None:
    assert "fail_on_resource_status" in problems({"url": URL, "fail_on_resource_status": raw})


def test_an_expression_is_bounded() -> None:
    assert "at most 10000" in problems({"url": URL, "wait_for_expression": "1" * 10001})["wait_for_expression"]


@pytest.mark.parametrize(("params", "heavy"), [
    ({}, False), ({"format": "webp", "block_ads": "true"}, False), ({"format": "html"}, False),
    ({"full_page": "true"}, True), ({"format": "pdf"}, True), ({"archive": "true"}, True),
    ({"format": "wacz"}, True), ({"delay": "2"}, True), ({"vision_provider_api_key": "sk-test"}, True),
], ids=repr)
def test_captures_expected_to_take_long_are_heavy(params: dict[str, Any], heavy: bool) -> None:
    """The hand-off lets quick captures go before heavy ones for a while (render.queue.lane_scripts.HEAVY)."""
    assert parse_take_options({"url": URL, **params}).heavy is heavy


def test_every_recording_is_heavy() -> None:
    from animate.options import parse_animate_options

    assert parse_animate_options({"url": URL, "duration": "1"}).heavy
