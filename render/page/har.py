"""The page's traffic as HAR 1.2 (`har=true`): every request of the job's page, with its headers, timings and
answer (and, with `har_content=embed`, the answer's body), as a browser's developer tools export it.

Recorded from the page's own request events, attached before the navigation and switched off when the job's
tab is released (`Tab.helpers`), so a kept page records nothing of another job. What the caller sent as
secrets (`cookies`, `authorization`, `headers`, a user and password in the url or `proxy`) is replaced by
`[redacted]` wherever it shows. The file is bounded by SCREENSHOT_HAR_MAX_BYTES: bodies go first, then the
latest entries, and the log's comment says what was left out.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, Request, Response

from render.browser.tabs import Tab
from render.contract.options import TakeOptions
from render.page.recording import MAX_ENTRIES, REDACTED, RequestLog, quietly

HELPER = "har"
TEXT_TYPES = ("text/", "application/json", "application/javascript", "application/xml", "image/svg+xml",
              "application/x-javascript", "application/ld+json", "application/manifest+json")
_NAVIGATION_TIMINGS = """() => {
  const entry = performance.getEntriesByType('navigation')[0];
  return entry ? [entry.domContentLoadedEventStart, entry.loadEventStart] : [-1, -1];
}"""


def _iso(epoch_ms: float) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _span(start: float, end: float) -> float:
    return round(end - start, 3) if start >= 0 and end >= start else -1


def har_timings(timing: Mapping[str, float]) -> dict[str, float]:
    """Playwright's resource timing (ms after startTime, -1 when not known) as HAR's phases."""
    request_start = timing.get("requestStart", -1)
    response_start = timing.get("responseStart", -1)
    response_end = timing.get("responseEnd", -1)
    connect_start, connect_end = timing.get("connectStart", -1), timing.get("connectEnd", -1)
    ssl_start = timing.get("secureConnectionStart", -1)
    first = next((value for value in (timing.get("domainLookupStart", -1), connect_start, request_start)
                  if value >= 0), -1)
    return {
        "blocked": _span(0, first) if first >= 0 else -1,
        "dns": _span(timing.get("domainLookupStart", -1), timing.get("domainLookupEnd", -1)),
        "connect": _span(connect_start, connect_end),
        "ssl": _span(ssl_start, connect_end) if ssl_start > 0 else -1,
        "send": 0,
        "wait": max(0.0, _span(request_start, response_start)),
        "receive": max(0.0, _span(response_start, response_end)),
    }


class HarRecorder(RequestLog):
    """Every request of one job's page, made into HAR when the capture is done."""

    def __init__(self, page: Page, options: TakeOptions, max_bytes: int) -> None:
        super().__init__(page, options)
        self._embed = options.har_content == "embed"
        self._max_bytes = max_bytes
        self._started = time.time() * 1000

    async def har(self, chromium: str, service_version: str) -> bytes:
        """The HAR file of what the page requested so far, within the size bound, secrets redacted."""
        self.switch_off()
        title = ""
        on_content_load, on_load = -1.0, -1.0
        with contextlib.suppress(PlaywrightError):
            title = await self._page.title()
            on_content_load, on_load = await self._page.evaluate(_NAVIGATION_TIMINGS)
        entries = list(await asyncio.gather(*(self._entry(request) for request, _ in self.requests)))
        page = {"startedDateTime": _iso(self._started), "id": "page_1", "title": title,
                "pageTimings": {"onContentLoad": round(on_content_load, 3), "onLoad": round(on_load, 3)}}
        log: dict[str, Any] = {
            "version": "1.2", "creator": {"name": "screenshot-service", "version": service_version},
            "browser": {"name": "Chromium", "version": chromium}, "pages": [page], "entries": entries}
        return self._bounded(log)

    def _bounded(self, log: dict[str, Any]) -> bytes:
        """The log as JSON within max_bytes: bodies left out first (largest first), then the latest entries."""
        notes = [f"{self.unrecorded} more requests not recorded (at most {MAX_ENTRIES})"] if self.unrecorded else []
        data = self._serialise(log, notes)
        if len(data) > self._max_bytes:
            bodies = sorted((entry for entry in log["entries"] if "text" in entry["response"]["content"]),
                            key=lambda entry: len(entry["response"]["content"]["text"]), reverse=True)
            left_out = 0
            for entry in bodies:
                content = entry["response"]["content"]
                content.pop("text")
                content.pop("encoding", None)
                content["comment"] = "body left out: the HAR reached SCREENSHOT_HAR_MAX_BYTES"
                left_out += 1
                data = self._serialise(log, [*notes, f"{left_out} bodies left out (SCREENSHOT_HAR_MAX_BYTES)"])
                if len(data) <= self._max_bytes:
                    return data
            notes.append(f"{left_out} bodies left out (SCREENSHOT_HAR_MAX_BYTES)")
        dropped = 0
        while len(data) > self._max_bytes and log["entries"]:
            cut = max(1, len(log["entries"]) // 10)
            del log["entries"][-cut:]
            dropped += cut
            data = self._serialise(log, [*notes, f"the last {dropped} entries left out (SCREENSHOT_HAR_MAX_BYTES)"])
        return data

    def _serialise(self, log: dict[str, Any], notes: list[str]) -> bytes:
        if notes:
            log["comment"] = "; ".join(notes)
        text = json.dumps({"log": log}, ensure_ascii=False)
        for secret in self.secrets.forms:  # wherever it shows, bodies included
            text = text.replace(json.dumps(secret, ensure_ascii=False)[1:-1], REDACTED)
        return text.encode()

    def _headers(self, headers: list[dict[str, str]], sent: bool) -> list[dict[str, str]]:
        redacted = []
        for header in headers:
            name, value = header["name"], header["value"]
            redacted.append({"name": name, "value": self.secrets.sent_value(name, value) if sent else value})
        return redacted

    def _cookies(self, header: str | None) -> list[dict[str, str]]:
        cookies = []
        for part in (header or "").split(";"):
            name, separator, value = part.strip().partition("=")
            if separator:
                cookies.append({"name": name, "value": REDACTED if name in self.secrets.cookies else value})
        return cookies

    async def _entry(self, request: Request) -> dict[str, Any]:
        ended = request in self.finished or request in self.failed
        headers = await quietly(request.headers_array(), [])
        response = await quietly(request.response(), None) if ended else None
        timing: dict[str, float] = dict(request.timing)  # type: ignore[arg-type]  # a TypedDict of floats
        started = timing.get("startTime", -1)
        timings = har_timings(timing) if response is not None else {
            "blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": 0, "wait": 0, "receive": 0}
        sizes = await quietly(request.sizes(), {}) if response is not None else {}
        cookie_header = next((h["value"] for h in headers if h["name"].lower() == "cookie"), None)
        parts = urlsplit(request.url)
        entry: dict[str, Any] = {
            "pageref": "page_1",
            "startedDateTime": _iso(started if started > 0 else self._started),
            "time": round(sum(value for value in timings.values() if value > 0), 3),
            "request": {
                "method": request.method, "url": request.url,
                "httpVersion": await quietly(response.http_version(), "") if response is not None else "",
                "cookies": self._cookies(cookie_header), "headers": self._headers(headers, sent=True),
                "queryString": [{"name": k, "value": v} for k, v in parse_qsl(parts.query, keep_blank_values=True)],
                "headersSize": sizes.get("requestHeadersSize", -1),
                "bodySize": sizes.get("requestBodySize", -1) if request.post_data_buffer is not None else 0,
            },
            "response": await self._response(request, response, sizes),
            "cache": {},
            "timings": timings,
            "_resourceType": request.resource_type,
        }
        posted = request.post_data_buffer
        if posted is not None:
            mime = next((h["value"] for h in headers if h["name"].lower() == "content-type"), "")
            entry["request"]["postData"] = {"mimeType": mime, "text": posted.decode("utf-8", "replace")}
        return entry

    async def _response(self, request: Request, response: Response | None, sizes: dict[str, int]) -> dict[str, Any]:
        if response is None:
            failure = request.failure if request in self.failed or request in self.finished else None
            return {"status": 0, "statusText": "", "httpVersion": "", "cookies": [], "headers": [],
                    "content": {"size": 0, "mimeType": ""}, "redirectURL": "", "headersSize": -1, "bodySize": -1,
                    "_error": failure or "no answer before the capture"}
        headers = await quietly(response.headers_array(), [])
        mime = next((h["value"] for h in headers if h["name"].lower() == "content-type"), "")
        content: dict[str, Any] = {"size": sizes.get("responseBodySize", 0), "mimeType": mime}
        if self._embed and not 300 <= response.status < 400:
            body = await quietly(response.body(), None)
            if body is not None:
                content["size"] = len(body)
                if mime.split(";")[0].strip().lower().startswith(TEXT_TYPES):
                    content["text"] = body.decode("utf-8", "replace")  # redacted as text when serialised
                elif any(form.encode() in body for form in self.secrets.forms):
                    content["comment"] = "body left out: it holds a secret of the request (redacted)"
                else:
                    content["text"], content["encoding"] = base64.b64encode(body).decode(), "base64"
        return {"status": response.status, "statusText": response.status_text,
                "httpVersion": await quietly(response.http_version(), ""),
                "cookies": [], "headers": self._headers(headers, sent=False), "content": content,
                "redirectURL": next((h["value"] for h in headers if h["name"].lower() == "location"), ""),
                "headersSize": sizes.get("responseHeadersSize", -1), "bodySize": sizes.get("responseBodySize", -1)}


def record(tab: Tab, options: TakeOptions, max_bytes: int) -> HarRecorder | None:
    """A recorder on the job's page when `har` asks for one, switched off when the job's tab is released."""
    if not options.har:
        return None
    recorder = HarRecorder(tab.page, options, max_bytes)
    tab.attach(HELPER, recorder)
    return recorder
