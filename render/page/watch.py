"""What happened on the page while it loaded: console messages, uncaught exceptions and failed subresources
(`metadata_console`, `fail_on_console_errors`, `fail_on_resource_status`, `fail_on_resource_load_failure`).

Listening starts before the navigation and ends with the job (`Tab.helpers`: switched off on release), so a
kept page carries nothing of one job into the next. Nothing listens unless a job asks: Playwright sends a
page's console and network events to the worker only while someone listens.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import ConsoleMessage, Page, Request, Response
from playwright.async_api import Error as PlaywrightError

from render.browser.tabs import Tab
from render.contract.errors import ConsoleErrors, ResourceFailed
from render.contract.options import TakeOptions
from render.net.traffic import REFUSED_HEADER

HELPER = "page_watch"
MAX_MESSAGES = 200  # kept per capture, the first ones; later ones are counted in `dropped`
MAX_TEXT = 2000  # characters of one message's text
# A request the page itself cancelled (an image taken out of the document, a navigation away), and one this
# job's own blocking options refused (block_ads, block_requests, ...; "net::ERR_BLOCKED_BY_CLIENT.Inspector"):
# neither is the page failing to load.
NOT_FAILURES = ("net::ERR_ABORTED", "net::ERR_BLOCKED_BY_CLIENT")
# Chromium's own console entry for a subresource that failed, reported as a resource instead.
_NETWORK_ENTRY = re.compile(r"^Failed to load resource: ")
# What the egress proxy's own answers mean (render.net.http1: its REFUSED_HEADER markers).
_MARKERS = {"refused": "refused by the network policy", "unresolved": "the host name does not resolve",
            "unreachable": "the host could not be reached"}
Refusals = Callable[[str], str | None]  # a host -> why the egress proxy stopped its connections, if it did


def _no_refusal(_host: str) -> str | None:
    return None


_STACK_LOCATION = re.compile(r"\(?((?:https?|file|data|blob):[^\s()]*?):(\d+):(\d+)\)?\s*$")


@dataclass
class ConsoleEntry:
    """One message of the page's console, or an exception its scripts did not catch (`type` "exception")."""

    type: str  # log, debug, info, error, warning, ..., exception
    text: str
    source: str  # "console" (the page's scripts), "network" (Chromium's report of a failed resource)
    url: str | None
    line: int | None  # 1-based, as DevTools shows them
    column: int | None
    time_ms: float  # since the navigation began


def status_matches(status: int, patterns: list[str]) -> bool:
    """Whether an HTTP status is one of `fail_on_resource_status`'s codes ("404") or classes ("5xx")."""
    code = str(status)
    return any(code == pattern or (pattern.endswith("xx") and code[0] == pattern[0]) for pattern in patterns)


class PageWatch:
    """Console, uncaught exceptions and subresource failures of one job's page."""

    def __init__(self, page: Page, options: TakeOptions, started: float, refusal: Refusals = _no_refusal) -> None:
        self._page = page
        self._started = started
        self._refusal = refusal  # why the egress proxy stopped a host's connection, if it did
        self._statuses = options.fail_on_resource_status
        self._load_failures = options.fail_on_resource_load_failure
        self._console = options.metadata_console or options.fail_on_console_errors
        self.entries: list[ConsoleEntry] = []
        self.dropped = 0
        self.errors = 0  # console.error calls and uncaught exceptions
        self.first_error: ConsoleEntry | None = None
        self.resource_failure: str | None = None  # the first failing subresource, as the error names it
        self._listening: list[tuple[str, Any]] = []
        if self._console:
            self._listen("console", self._on_console)
            self._listen("pageerror", self._on_page_error)
        if self._statuses or self._load_failures:
            self._listen("response", self._on_response)
        if self._load_failures:
            self._listen("requestfailed", self._on_request_failed)

    @staticmethod
    def wanted(options: TakeOptions) -> bool:
        return bool(options.metadata_console or options.fail_on_console_errors or options.fail_on_resource_status
                    or options.fail_on_resource_load_failure)

    def _listen(self, event: str, handler: Any) -> None:
        self._page.on(event, handler)  # type: ignore[call-overload]
        self._listening.append((event, handler))

    def switch_off(self) -> None:
        """Stop listening (the page may serve another job); may be called more than once."""
        for event, handler in self._listening:
            self._page.remove_listener(event, handler)
        self._listening.clear()

    def _now_ms(self) -> float:
        return round((time.monotonic() - self._started) * 1000, 1)

    def _add(self, entry: ConsoleEntry) -> None:
        if entry.source == "console" and entry.type in ("error", "exception"):
            self.errors += 1
            self.first_error = self.first_error or entry
        if len(self.entries) < MAX_MESSAGES:
            self.entries.append(entry)
        else:
            self.dropped += 1

    def _on_console(self, message: ConsoleMessage) -> None:
        text = message.text
        location = message.location
        network = bool(_NETWORK_ENTRY.match(text)) and not message.args
        line = location.get("lineNumber")
        self._add(ConsoleEntry(
            type=message.type, text=text[:MAX_TEXT], source="network" if network else "console",
            url=location.get("url") or None,
            line=line + 1 if location.get("url") and line is not None else None,
            column=(location.get("columnNumber") or 0) + 1 if location.get("url") else None,
            time_ms=self._now_ms()))

    def _on_page_error(self, error: PlaywrightError) -> None:
        name = getattr(error, "name", "") or "Error"
        url, line, column = None, None, None
        for frame in (error.stack or "").splitlines()[1:]:
            found = _STACK_LOCATION.search(frame)
            if found:
                url, line, column = found.group(1), int(found.group(2)), int(found.group(3))
                break
        self._add(ConsoleEntry(type="exception", text=f"{name}: {error.message}"[:MAX_TEXT], source="console",
                               url=url, line=line, column=column, time_ms=self._now_ms()))

    def _is_subresource(self, request: Request) -> bool:
        return not (request.is_navigation_request() and request.frame == self._page.main_frame)

    def _on_response(self, response: Response) -> None:
        if self.resource_failure or not self._is_subresource(response.request):
            return
        marker = response.headers.get(REFUSED_HEADER)
        if marker:  # the egress proxy's answer, not the host's: the request did not reach it
            if self._load_failures:
                why = self._refusal(urlsplit(response.url).hostname or "") or _MARKERS.get(marker, marker)
                self.resource_failure = f"{response.url} failed to load ({why})"
            return
        if self._statuses and status_matches(response.status, self._statuses):
            self.resource_failure = f"{response.url} answered HTTP {response.status}"

    def _on_request_failed(self, request: Request) -> None:
        failure = request.failure or "failed"
        if self.resource_failure or not self._is_subresource(request) or failure.startswith(NOT_FAILURES):
            return
        why = self._refusal(urlsplit(request.url).hostname or "") or failure
        self.resource_failure = f"{request.url} failed to load ({why})"

    def check(self, options: TakeOptions) -> None:
        """Fail the capture (not charged) on what `fail_on_*` asks, naming the first culprit."""
        if options.fail_on_console_errors and self.first_error is not None:
            where = f" at {self.first_error.url}:{self.first_error.line}" if self.first_error.url else ""
            kind = "an uncaught exception" if self.first_error.type == "exception" else "console.error"
            raise ConsoleErrors(f"The page logged {self.errors} error(s) (fail_on_console_errors); the first, "
                                f"{kind}{where}: {self.first_error.text[:300]}")
        if self.resource_failure is not None:
            given = "fail_on_resource_status" if "answered HTTP" in self.resource_failure else (
                "fail_on_resource_load_failure")
            raise ResourceFailed(f"A resource of the page failed ({given}): {self.resource_failure}.")

    def report(self) -> dict[str, Any]:
        """`metadata.console`: the messages, how many were errors, how many more were left out."""
        return {"messages": [asdict(entry) for entry in self.entries], "errors": self.errors,
                "dropped": self.dropped}


def watch(tab: Tab, options: TakeOptions, started: float, refusal: Refusals = _no_refusal) -> PageWatch | None:
    """A watch on the job's page when its options ask for one, switched off when the job's tab is released."""
    if not PageWatch.wanted(options):
        return None
    page_watch = PageWatch(tab.page, options, started, refusal)
    tab.attach(HELPER, page_watch)
    return page_watch
