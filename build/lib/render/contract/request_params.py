"""Parsing the request context parameters (`headers`, `cookies`) into what the browser needs.

Pure: the API runs `check` before enqueueing, so bad values get their own error codes
(`invalid_header_parameter`, `invalid_cookie_parameter`) and never reach a worker.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from render.contract.errors import ErrorDetail, InvalidCookieParameter, InvalidHeaderParameter, RequestNotValid
from render.contract.options import TakeOptions
from render.contract.store import STORAGE_CREDENTIALS
from render.contract.values import header_safe
from render.settings import configured_proxies, offered_regions

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_SAME_SITE = {"strict": "Strict", "lax": "Lax", "none": "None"}


def parse_headers(values: list[str]) -> dict[str, str]:
    """`Name:Value` strings to a header dict, or `invalid_header_parameter` naming the bad one (never
    repeating it: a header may hold a secret)."""
    headers: dict[str, str] = {}
    for index, raw in enumerate(values):
        name, sep, value = raw.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not _TOKEN.match(name):
            why = "expected Header-Name:Header-Value with a valid header name"
        elif not header_safe(value):
            why = "the value may hold only visible ASCII characters, spaces and tabs"
        else:
            headers[name] = value
            continue
        raise InvalidHeaderParameter(f"headers[{index}] is not a valid header: {why}.",
                                     [ErrorDetail(f"headers.{index}", why)])
    return headers


def parse_cookie(raw: str, target_url: str | None, index: int = 0) -> dict[str, Any]:
    """`name=value; Domain=...; Path=...; Secure; HttpOnly; SameSite=...; Expires=...` to a Playwright
    cookie. Without Domain the cookie belongs to the target URL's host."""

    def invalid(why: str) -> InvalidCookieParameter:  # never repeating the cookie: it may be a secret
        return InvalidCookieParameter(f"cookies[{index}] is not a valid cookie: {why}.",
                                      [ErrorDetail(f"cookies.{index}", why)])

    if not header_safe(raw):
        raise invalid("it may hold only visible ASCII characters, spaces and tabs")
    parts = [part.strip() for part in raw.split(";")]
    name, sep, value = parts[0].partition("=")
    name = name.strip()
    if not sep or not name or not _TOKEN.match(name):
        raise invalid("it must start with name=value")
    cookie: dict[str, Any] = {"name": name, "value": value.strip()}
    for position, attribute in enumerate(parts[1:], start=1):
        if not attribute:
            continue
        key, _, attr_value = attribute.partition("=")
        key = key.strip().lower()
        attr_value = attr_value.strip()
        if key == "domain" and attr_value:
            cookie["domain"] = attr_value
        elif key == "path" and attr_value.startswith("/"):
            cookie["path"] = attr_value
        elif key == "secure":
            cookie["secure"] = True
        elif key == "httponly":
            cookie["httpOnly"] = True
        elif key == "samesite" and attr_value.lower() in _SAME_SITE:
            cookie["sameSite"] = _SAME_SITE[attr_value.lower()]
        elif key in ("expires", "max-age") and attr_value:
            continue  # a capture lasts seconds: every cookie is a session cookie here
        else:
            raise invalid(f"attribute {position} is unknown or malformed (known: Domain, Path, Secure, HttpOnly, "
                          "SameSite, Expires, Max-Age)")
    if "domain" not in cookie and target_url is not None:
        if "path" not in cookie:
            cookie["url"] = target_url  # Playwright derives the host, path and Secure from it
            return cookie
        target = urlsplit(target_url)
        cookie["domain"] = target.hostname or ""
        cookie.setdefault("secure", target.scheme == "https")
    if "domain" not in cookie:
        raise invalid("without a url source it needs Domain=")
    cookie.setdefault("path", "/")
    return cookie


def country_proxy(options: TakeOptions) -> str | None:
    """The upstream proxy URL for `ip_country_code`, or `request_not_valid` naming those configured."""
    if options.ip_country_code is None:
        return None
    proxies = configured_proxies()
    if options.ip_country_code not in proxies:
        available = ", ".join(sorted(proxies)) or "none"
        raise RequestNotValid(
            f"ip_country_code: no proxy is configured for {options.ip_country_code!r} on this server "
            f"(configured: {available}; operators add SCREENSHOT_PROXY_{options.ip_country_code.upper()}).",
            [ErrorDetail("ip_country_code", f"not configured; available: {available}")])
    return proxies[options.ip_country_code]


def check_region(options: TakeOptions) -> None:
    """`servers_region` must be one of the regions the operator labelled workers with."""
    if options.servers_region is None:
        return
    offered = offered_regions()
    if options.servers_region not in offered:
        available = ", ".join(offered) or "none"
        raise RequestNotValid(
            f"servers_region: this server has no workers for {options.servers_region!r} (regions: {available}; "
            "operators label workers with SCREENSHOT_REGIONS). Omit it to render on any worker.",
            [ErrorDetail("servers_region", f"unknown region; available: {available}")])


def check_store(options: TakeOptions) -> None:
    """store=true uploads with the caller's credentials only: both must be given (the operator's own are
    never used for a caller's bucket)."""
    missing = [name for name in STORAGE_CREDENTIALS if options.store and getattr(options, name) is None]
    if missing:
        raise RequestNotValid(f"Invalid parameters: {', '.join(missing)}: required with store=true",
                              [ErrorDetail(name, "is required with store=true") for name in missing])


def check(options: TakeOptions) -> None:
    """Validate headers, cookies, the country proxy, the region and store's credentials up front (the API
    calls this before enqueueing)."""
    parse_headers(options.headers)
    for index, raw in enumerate(options.cookies):
        parse_cookie(raw, options.url, index)
    country_proxy(options)
    check_region(options)
    check_store(options)
