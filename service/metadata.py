"""The metadata of a capture as the client sees it: JSON body fields and response headers (spec's
metadata table) and the vision completion. Text that may be non-ASCII goes into headers
percent-encoded (page title, vision completion)
or as compact JSON with \\u escapes (open graph, icon, HTTP headers)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from render.contract.options import TakeOptions
from render.contract.timings import server_timing
from render.contract.wire import JobResult
from service.times import iso_time


def percent_encoded(text: str) -> str:
    """UTF-8 percent-encoding; spaces stay (decodeURIComponent / urllib.parse.unquote read it back)."""
    return quote(text, safe=" ")


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True)


def present(options: TakeOptions, result: JobResult, stored: dict[str, tuple[str, float]]
            ) -> tuple[dict[str, Any], dict[str, str]]:
    """(JSON body fields, headers) for what the options asked; `stored` has the URL and expiry of each artefact
    stored beside the result ("content", "accessibility"): `<name>.{url,expires}` in the body,
    x-service-<name>-url and -expires in the headers."""
    found = result.metadata
    metadata: dict[str, Any] = {}
    body: dict[str, Any] = {}
    headers: dict[str, str] = {}
    if options.metadata_image_size:
        metadata["image_size"] = {"width": result.width, "height": result.height}
        if result.width is not None and result.height is not None:
            headers["x-service-image-width"] = str(result.width)
            headers["x-service-image-height"] = str(result.height)
    if "page_title" in found:
        metadata["page_title"] = found["page_title"]
        headers["x-service-page-title"] = percent_encoded(found["page_title"])
    if "open_graph" in found:
        metadata["open_graph"] = found["open_graph"]
        headers["x-service-open-graph"] = compact_json(found["open_graph"])
    if "icon" in found:
        metadata["icon"] = found["icon"]
        if found["icon"] is not None:
            headers["x-service-icon"] = compact_json(found["icon"])
    if "fonts" in found:
        metadata["fonts"] = found["fonts"]
    if options.metadata_console and "console" in found:
        metadata["console"] = found["console"]
        headers["x-service-console-errors"] = str(found["console"]["errors"])
    if "accessibility" in found:
        metadata["accessibility"] = found["accessibility"]
    if "quality" in found:
        metadata["quality"] = found["quality"]
        headers["x-service-quality"] = ",".join(found["quality"]["flags"]) or "ok"
    timings = result.timings
    if options.metadata_timings and timings:
        metadata["timings"] = timings
    if timings:
        headers["server-timing"] = server_timing(timings)
        if timings.get("timed_out"):
            headers["x-service-wait-timed-out"] = ",".join(timings["timed_out"])
    if metadata:
        body["metadata"] = metadata
    for name, (url, expires) in stored.items():
        body[name] = {"url": url, "expires": iso_time(expires)}
        headers[f"x-service-{name}-url"] = url
        headers[f"x-service-{name}-expires"] = iso_time(expires)
    if "archive" in found:  # archive=true or format=wacz: how many bodies the size bound left out
        body.setdefault("archive", {})["truncated"] = found["archive"]["truncated"]
        headers["x-service-archive-truncated"] = str(found["archive"]["truncated"])
    if "http_response" in found:
        http = found["http_response"]
        body["http_response"] = http
        if http.get("status_code") is not None:
            headers["x-service-http-status-code"] = str(http["status_code"])
        if "headers" in http:
            headers["x-service-http-headers"] = compact_json(http["headers"])
    if result.vision_completion is not None:
        completion = result.vision_completion
        body["vision"] = {"completion": completion}
        if options.vision_response_schema is not None:  # checked against the schema by the worker
            body["vision"]["response"] = json.loads(completion)
        headers["x-service-vision-completion"] = percent_encoded(completion)
    return body, headers
