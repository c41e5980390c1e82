"""The placeholders of `storage_path` (store=true): checked with the request, filled in by the worker."""

from __future__ import annotations

import string
from datetime import UTC, datetime
from urllib.parse import urlsplit

PLACEHOLDERS = ("reference", "domain", "date", "year", "month", "day", "hour", "minute", "second", "timestamp")


def placeholders_in(path: str) -> list[str]:
    """The `{name}` placeholders of a storage_path; ValueError for a malformed one or an unknown name."""
    names = []
    for _, name, spec, conversion in string.Formatter().parse(path):
        if name is None:
            continue
        if name not in PLACEHOLDERS or spec or conversion:
            raise ValueError(f"unknown placeholder {{{name}}}; known: "
                             + ", ".join(f"{{{known}}}" for known in PLACEHOLDERS))
        names.append(name)
    return names


def filled(path: str, extension: str, *, reference: str, url: str | None, now: datetime | None = None) -> str:
    """storage_path with its placeholders filled in (UTC times; {domain}: the url's host, or `inline` for
    html and markdown sources), plus the format's extension."""
    now = now or datetime.now(UTC)
    values = {"reference": reference, "domain": (urlsplit(url).hostname or "inline") if url else "inline",
              "date": f"{now:%Y-%m-%d}", "year": f"{now:%Y}", "month": f"{now:%m}", "day": f"{now:%d}",
              "hour": f"{now:%H}", "minute": f"{now:%M}", "second": f"{now:%S}",
              "timestamp": str(int(now.timestamp()))}
    return f"{path.format(**values)}.{extension}"
