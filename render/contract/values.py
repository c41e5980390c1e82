"""Value types of the request models: how a parameter's text becomes a typed value, and what each kind of
value must be. Each check is written once, as an annotated type that any model's field can carry (`/take`'s
and `/animate`'s); a violation is a `ValueError` whose text becomes the field's message."""

from __future__ import annotations

import functools
import ipaddress
import json
import re
import zoneinfo
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

import ada_url
from pydantic import AfterValidator, BaseModel, BeforeValidator, Field

from render.contract import json_schema, json_text
from render.contract.devices import DEVICE_IDS
from storage.paths import placeholders_in

ModelT = TypeVar("ModelT", bound=BaseModel)


def _parse_bool(value: Any) -> Any:
    """Booleans are `true/false/1/0` in any case, JSON booleans as they are."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "1"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "0"):
        return False
    raise ValueError("must be a boolean: true, false, 1 or 0")


def as_list(value: Any) -> Any:
    """A single value where a list is expected is a list of one (`?hide_selectors=.ad`)."""
    if isinstance(value, str | int | float):
        return [value]
    return value


def param(default: Any, group: str, description: str, shown_default: str | None = None, **constraints: Any) -> Any:
    """A documented parameter: its group (the spec's section) drives docs and the playground.
    `shown_default` documents a default that depends on other parameters (`None` in the model)."""
    extra: dict[str, Any] = {"group": group}
    if shown_default is not None:
        extra["shown_default"] = shown_default
    return Field(default, description=description, json_schema_extra=extra, **constraints)


# What a header value may hold here: visible ASCII, spaces and tabs. No line breaks or other control
# characters (they would split or end the header), nor bytes Chromium or the API cannot send.
_HEADER_VALUE = re.compile(r"^[\t\x20-\x7e]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CSS_LENGTH = re.compile(r"^\s*\d+(\.\d+)?\s*(px|in|cm|mm)?\s*$", re.IGNORECASE)
_HOST_PATTERN = re.compile(r"[*.]?[A-Za-z0-9*](?:[A-Za-z0-9*.-]{0,251}[A-Za-z0-9*])?")


def header_safe(value: str) -> bool:
    """Whether `value` can be sent as an HTTP header value as it is."""
    return bool(_HEADER_VALUE.match(value))


@functools.cache
def _time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def _same_host_as_the_browser(value: str) -> None:
    """The URL's host as this service reads it (urlsplit: the network policy, the proxy and storage clients)
    must be the host the browser goes to (the WHATWG URL standard, by ada-url): a URL two parsers read
    differently (`http://127.0.0.1\\@allowed.test/`) could pass a check made on one host and reach another."""
    authority = urlsplit(value).netloc
    if "\\" in authority or _CONTROL.search(authority):
        raise ValueError("must not contain a backslash or control characters before its path")
    try:
        browser_host = ada_url.URL(value).hostname.strip("[]")
    except ValueError:
        raise ValueError("is not a URL a browser can read (WHATWG URL standard)") from None
    our_host = urlsplit(value).hostname or ""
    try:
        same = ipaddress.ip_address(our_host) == ipaddress.ip_address(browser_host)
    except ValueError:  # a name (or a number the browser reads as an address, as 127.1: then they differ)
        try:
            same = ada_url.idna_to_ascii(our_host).decode().lower() == browser_host
        except (ValueError, UnicodeError):
            same = False
    if not same:
        raise ValueError(f"names the host {browser_host!r} as a browser reads it, but {our_host!r} as other "
                         "parsers read it; write the host plainly")


def _http_url(value: str) -> str:
    parts = urlsplit(value.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    if _CONTROL.search(value.strip()):
        raise ValueError("must not contain line breaks or other control characters")
    _same_host_as_the_browser(value.strip())
    return value.strip()


def _header_value(value: str) -> str:
    # Sent as an HTTP header (echoed to the caller, or sent to the target): refused here, before anything
    # is charged or run, rather than failing halfway.
    if not header_safe(value):
        raise ValueError("must be visible ASCII characters, spaces or tabs only (it is sent as an HTTP "
                         "header; percent-encode anything else)")
    return value


def _api_key(value: str) -> str:
    # It travels in an Authorization header: printable ASCII only (found by the fuzz test).
    if not value or not all(" " < ch < "\x7f" for ch in value):
        raise ValueError("must be a non-empty key of printable ASCII characters without spaces")
    return value


def _file_name(value: str) -> str:
    if not value.strip() or _CONTROL.search(value) or any(c in value for c in '/\\"'):
        raise ValueError("must be a file name: not empty, without slashes, quotes or control characters")
    return value.strip()


def _selectors(value: str) -> str:
    # Only commas and spaces would wait for nothing until the timeout.
    if not value.replace(",", "").strip():
        raise ValueError("must name at least one selector")
    return value


def _proxy_url(value: str) -> str:
    parts = urlsplit(value)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None:
        raise ValueError("must be http://user:password@host:port/ (credentials optional)")
    _same_host_as_the_browser(value)
    return value


def _host_patterns(value: list[str]) -> list[str]:
    if len(value) > 100:
        raise ValueError("at most 100 host patterns")
    for pattern in value:
        if not _HOST_PATTERN.fullmatch(pattern):
            raise ValueError(f"{pattern[:64]!r} is not a host pattern (example.com, *.example.com, .example.com)")
    return value


def _time_zone(value: str) -> str:
    if value not in _time_zones():
        raise ValueError("must be an IANA time zone id, such as Europe/Paris or America/New_York")
    return value


def _css_length(value: str) -> str:
    if not _CSS_LENGTH.match(value):
        raise ValueError("must be a CSS length such as 0, 10px, 1cm, 5mm or 0.5in")
    return value


def _storage_key(value: str) -> str:
    if not value.strip() or value.startswith("/") or any(part in ("", ".", "..") for part in value.split("/")):
        raise ValueError("must be a relative key like shots/{date}/home, without empty, . or .. segments")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError("must not contain control characters")
    placeholders_in(value)
    return value


MOST_STATUSES = 100


def _resource_statuses(value: Any) -> list[str]:
    """HTTP statuses (404) and classes ("5xx") as "404" and "5xx"; a comma-separated string is a list too."""
    if isinstance(value, str | int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list):
        raise ValueError('must be a list of HTTP statuses (404) or classes ("4xx", "5xx")')
    if len(value) > MOST_STATUSES:  # each item one status at least: refused before any is read
        raise ValueError(f"at most {MOST_STATUSES} statuses")
    statuses: list[str] = []
    items = [part for item in value for part in (item.split(",") if isinstance(item, str) else [item])]
    for item in items:
        text = str(item).strip().lower() if not isinstance(item, bool) else ""
        if not re.fullmatch(r"[1-5](xx|[0-9][0-9])", text):
            raise ValueError(f'{str(item)[:32]!r} is not an HTTP status (100-599) or class ("1xx" to "5xx")')
        statuses.append(text)
    if len(statuses) > MOST_STATUSES:
        raise ValueError(f"at most {MOST_STATUSES} statuses")
    return statuses


JSON_SCHEMA_MAX_BYTES = 16 * 1024


def _plain_json(value: Any) -> Any:
    """A JSON body's value with its numbers as numbers (the body keeps them as their text, `JsonNumber`)."""
    if isinstance(value, dict):
        return {str(key): _plain_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain_json(item) for item in value]
    if isinstance(value, str) and type(value) is not str:  # a number kept as its text
        return json_text.loads(value)
    return value


def _json_schema(value: Any) -> dict[str, Any]:
    """A JSON Schema (2020-12) as an object, or its JSON text (a query string's); at most 16 KiB, and safe to
    check answers against (render.contract.json_schema: nothing fetched, no endless reference, RE2 patterns)."""
    if isinstance(value, str):
        try:
            value = json_text.loads(value)
        except json_text.NotJson as error:
            raise ValueError(f"must be a JSON Schema, and its JSON text {error}") from None
        except ValueError:
            raise ValueError("must be a JSON Schema: an object, or its JSON text") from None
    elif json_text.depth(value) > json_text.MOST_NESTING:
        raise ValueError(f"must be a JSON Schema that nests at most {json_text.MOST_NESTING} levels of arrays and "
                         "objects")
    value = _plain_json(value)
    if not isinstance(value, dict):
        raise ValueError("must be a JSON Schema object")
    try:
        written = json.dumps(value, allow_nan=False)
    except ValueError:  # a number of more digits than any rule takes (json_text.integer)
        raise ValueError("must be a JSON Schema whose numbers are finite") from None
    if len(written) > JSON_SCHEMA_MAX_BYTES:
        raise ValueError(f"must be at most {JSON_SCHEMA_MAX_BYTES // 1024} KiB of JSON")
    json_schema.check(value)  # a SchemaProblem is a ValueError: request_not_valid naming the field
    return value


# Chromium prints header and footer templates without fetching: a stylesheet or font it would have to fetch
# stops the print ("Printing failed") and leaves the page's renderer broken. Pictures by URL are drawn as
# nothing (never fetched). What a template may use:
TEMPLATE_RULE = ("what it carries: <style> elements and style attributes, fonts the system has, pictures and "
                 "fonts as data: URLs (no <link>, @import or url() of anything else)")
_TEMPLATE_FETCH = re.compile(r"<\s*link\b|@import\b|url\(\s*(?!['\"]?\s*data:)", re.IGNORECASE)


def _pdf_template(value: str) -> str:
    """A PDF header or footer template that asks for nothing while it is printed (TEMPLATE_RULE)."""
    plain = re.sub(r"\\([0-9a-fA-F]{1,6})\s?", lambda found: chr(int(found.group(1), 16)), value)  # CSS escapes
    found = _TEMPLATE_FETCH.search(plain)
    if found:
        raise ValueError(f"{found.group(0).strip()!r} asks for something while printing: a template draws only "
                         f"with {TEMPLATE_RULE}")
    return value


def _page_ranges(value: str) -> str:
    """Chromium's page ranges: `1-5, 8, 11-13` (1-based, ranges ascending; `-3` and `9-` are open ranges)."""
    parts = [part.strip() for part in value.split(",")]
    for part in parts:
        found = re.fullmatch(r"(\d*)\s*-\s*(\d*)|(\d+)", part)
        if not found or part in ("-", "") or "0" in (found.group(1), found.group(3)) or (
                found.group(1) and found.group(2) and int(found.group(1)) > int(found.group(2))):
            raise ValueError(f"{part[:20]!r} is not a page or a range of pages (1-5, 8, 11-13)")
    return ", ".join(parts)


def _store_endpoint(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment \
            or parts.username or parts.password:
        raise ValueError("must be an http(s) URL of the store, without credentials, query or fragment")
    _same_host_as_the_browser(value)
    return value


Bool = Annotated[bool, BeforeValidator(_parse_bool)]
OptionalBool = Annotated[bool | None, BeforeValidator(lambda v: None if v is None else _parse_bool(v))]
# Values an array parameter takes at most: a longer list is refused whole, before any of its values is read (a
# body's million values made a million errors, the API's loop busy for seconds).
MOST_VALUES = 1000
Values = Field(max_length=MOST_VALUES)
StrList = Annotated[list[str], Values, BeforeValidator(as_list)]
HttpUrl = Annotated[str, AfterValidator(_http_url)]  # http(s) with a host, no control characters; stripped
HeaderValue = Annotated[str, AfterValidator(_header_value)]
ApiKey = Annotated[str, AfterValidator(_api_key)]
FileName = Annotated[str, AfterValidator(_file_name)]
Selectors = Annotated[str, AfterValidator(_selectors)]  # comma-separated CSS selectors, at least one
ProxyUrl = Annotated[str, AfterValidator(_proxy_url)]
HostPatterns = Annotated[list[str], Values, BeforeValidator(as_list), AfterValidator(_host_patterns)]
TimeZone = Annotated[str, AfterValidator(_time_zone)]
CssLength = Annotated[str, AfterValidator(_css_length)]
PdfTemplate = Annotated[str, AfterValidator(_pdf_template)]
StorageKey = Annotated[str, AfterValidator(_storage_key)]  # a relative object key, placeholders allowed
StoreEndpoint = Annotated[str, AfterValidator(_store_endpoint)]
ResourceStatuses = Annotated[list[str], BeforeValidator(_resource_statuses), Field(max_length=MOST_STATUSES)]
JsonSchema = Annotated[dict[str, Any], BeforeValidator(_json_schema)]
PageRanges = Annotated[str, AfterValidator(_page_ranges)]
# A PDF password: 1-127 characters of printable ASCII (what PDF readers let people type; AES-256 takes UTF-8 but
# readers differ), never echoed in a message.
PdfPassword = Annotated[str, Field(min_length=1, max_length=127, pattern=r"^[ -~]+$")]
PDF_PERMISSIONS = ("print", "print_highres", "copy", "annotate", "fill_forms", "assemble", "modify",
                   "accessibility")
PdfPermissions = Annotated[list[Literal["print", "print_highres", "copy", "annotate", "fill_forms", "assemble",
                                        "modify", "accessibility"]], Values, BeforeValidator(as_list)]

ResponseType = Literal["by_format", "json", "empty"]
WaitEvent = Literal["load", "domcontentloaded", "networkidle0", "networkidle2"]
ResourceType = Literal["document", "stylesheet", "image", "media", "font", "script", "xhr", "fetch",
                       "websocket", "eventsource", "manifest", "other"]
PaperFormat = Literal["a0", "a1", "a2", "a3", "a4", "a5", "a6", "legal", "letter", "tabloid"]
CountryCode = Literal["us", "gb", "de", "fr", "it", "es", "jp", "kr", "cn", "in", "au", "br", "mx",
                      "ca", "nz", "pe", "is", "ie"]
DeviceId = Literal[DEVICE_IDS]  # type: ignore[valid-type]
