"""The index of a WACZ's WARC records, as CDXJ (one line per record: its URL's SURT key, its 14-digit time and a
JSON block saying where it is), sorted, the way pywb's and ReplayWeb.page's lookups read it.

The key is the URL in SURT form as the Internet Archive canonicalises it: no scheme, no user or password, the host
lowercased without a leading `www.` (or `www2.` ...) and its labels reversed with commas (an IPv4 address's too),
the port unless it is the scheme's default, then `)` and the path and query lowercased, the path without a trailing
slash (but `/`), the query's arguments in sorted order, no fragment. A POST's key carries its method and body as
query arguments, canonicalised as Webrecorder's request-body canonicalisation says (a form's fields, a JSON body's
values by name, anything else as `__wb_post_data=<base64>`), as replay tools look them up. (The `surt` package and
cdxj-indexer do this too; surt is AGPL-licensed, so they are checked against at test time, never shipped:
tests/integration/test_archive.py.)
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import unquote_plus, urlencode, urlsplit

_WWW = re.compile(r"^www\d*\.")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def surt(url: str, *, appended: str = "") -> str:
    """The SURT key of `url`, with `appended` query arguments (a POST's: `posted`)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().strip(".")
    key = f"[{host}]" if ":" in host else ",".join(reversed(_WWW.sub("", host).split(".")))
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None and port != _DEFAULT_PORTS.get(parts.scheme.lower()):
        key += f":{port}"
    path = (parts.path or "/").lower()
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    query = "&".join(part for part in (parts.query, appended) if part)
    key += ")" + path
    if query:
        key += "?" + _sorted_query(query.lower())
    return key


MOST_POSTED = 4096  # characters of a body kept in its key


def posted(method: str, content_type: str, body: bytes) -> tuple[str, str]:
    """(the body as query arguments, what a POST or PUT adds to its URL's query for its key)."""
    query = _body_query(content_type.lower(), body)[:MOST_POSTED] if method.upper() in ("POST", "PUT") else ""
    return query, f"__wb_method={method.upper()}" + (f"&{query}" if query else "")


def _body_query(content_type: str, body: bytes) -> str:
    if content_type.startswith("application/x-www-form-urlencoded"):
        try:
            return unquote_plus(body.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    elif content_type.startswith(("application/json", "text/plain")):
        try:
            return _json_query(body)
        except (ValueError, RecursionError):  # not JSON (or a page's JSON nested past Python's reader)
            if content_type.startswith("application/json"):
                return ""
    return "__wb_post_data=" + base64.b64encode(body).decode()


def _json_query(body: bytes) -> str:
    """A JSON body's scalar values by the name of the member that holds them (a name seen again gets `.2_`,
    `.3_`...), in the order they come; JSON Lines read line by line."""
    found: dict[str, str] = {}
    seen: dict[str, int] = {}

    def add(name: str, value: object) -> None:
        if name in found:
            seen[name] = seen.get(name, 1) + 1
            name = f"{name}.{seen[name]}_"
        found[name] = str(value)

    def walk(value: object, name: str = "") -> None:
        waiting = [(value, name)]
        while waiting:
            item, named = waiting.pop(0)
            if isinstance(item, dict):
                waiting[:0] = [(child, key) for key, child in item.items()]
            elif isinstance(item, list):
                waiting[:0] = [(child, named) for child in item]
            elif named:
                add(named, item)

    try:
        walk(json.loads(body))
    except json.JSONDecodeError:
        if b"\n" not in body:
            raise
        for line in body.split(b"\n"):
            walk(json.loads(line))
    return urlencode(found)


def _sorted_query(query: str) -> str:
    """The arguments in order, `a` before `a=` before `a=1`, as the Internet Archive's canonicaliser sorts them."""
    pairs = [tuple(argument.split("=", 1)) for argument in query.split("&")]
    return "&".join("=".join(pair) for pair in sorted(pairs))


def timestamp(when: datetime) -> str:
    """A record's WARC-Date as the index writes it: 14 digits, UTC."""
    return when.strftime("%Y%m%d%H%M%S")


@dataclass(frozen=True)
class Entry:
    """One record's line."""

    key: str
    when: datetime
    fields: dict[str, object]

    def line(self) -> str:
        return f"{self.key} {timestamp(self.when)} {json.dumps(self.fields)}"


def index(entries: list[Entry]) -> bytes:
    """The sorted index, a line per entry (sorted as text, as the tools sort it)."""
    return "".join(line + "\n" for line in sorted(entry.line() for entry in entries)).encode()
