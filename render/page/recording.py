"""What the two recorders of a job's traffic share (HAR, render/page/har.py; the web archive, render/page/archive.py):
the requests of the job's page as the page's own events tell them, and the caller's secrets to keep out.

`RequestLog` listens from before the navigation until the job's tab is released (`Tab.helpers`), so a kept page
records nothing of another job. `CallerSecrets` knows what the caller sent as secrets (`cookies`, `authorization`,
`headers`, a user and password in the url or `proxy`) and every form a secret may take in a recording: itself,
percent-encoded, base64-encoded.
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any
from urllib.parse import quote, quote_plus, unquote, urlsplit

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, Request

from render.contract.options import TakeOptions

REDACTED = "[redacted]"
MAX_ENTRIES = 5000  # requests recorded per capture; later ones are counted (RequestLog.unrecorded)
MIN_SECRET_LENGTH = 4  # shorter secrets are redacted where they are named (headers, cookies) but not searched for
MIN_ENCODED_LENGTH = 8  # base64 runs shorter than this are not searched for: they would match at random


def caller_secrets(options: TakeOptions) -> tuple[set[str], set[str], set[str]]:
    """(header names whose values are the caller's, cookie names the caller set, secret strings to search for)."""
    headers = {line.partition(":")[0].strip().lower() for line in options.headers if ":" in line}
    if options.authorization:
        headers.add("authorization")
    cookies = {entry.partition("=")[0].strip() for entry in options.cookies}
    strings = {line.partition(":")[2].strip() for line in options.headers if ":" in line}
    strings |= {entry.partition("=")[2].partition(";")[0].strip() for entry in options.cookies}
    if options.authorization:
        strings |= {options.authorization, options.authorization.partition(" ")[2]}
    for url in (options.url, options.proxy):
        parts = urlsplit(url or "")
        if parts.password:
            user, password = unquote(parts.username or ""), unquote(parts.password)
            strings |= {user, password, f"{user}:{password}"}  # the last, base64-encoded, is the Basic token
    return headers, cookies, {s for s in strings if len(s) >= MIN_SECRET_LENGTH}


def secret_forms(secret: str) -> set[str]:
    """Every form a secret may take in a recording: itself, percent-encoded, and base64-encoded (both alphabets) at
    each of the three alignments it may have inside a longer encoded text, as the run of characters that
    depends on the secret alone."""
    forms = {secret, quote(secret, safe=""), quote_plus(secret)}
    raw = secret.encode()
    for offset in range(3):
        whole = offset + len(raw)
        encoded = base64.b64encode(b"\0" * offset + raw + b"\0" * (-whole % 3)).decode()
        core = encoded[4 if offset else 0:(whole // 3) * 4]
        if len(core) >= MIN_ENCODED_LENGTH:
            forms |= {core, core.replace("+", "-").replace("/", "_")}
    return forms


class CallerSecrets:
    """The caller's secrets of one job: the headers and cookies they name, and every form of their values, longest
    first (so a secret inside another is replaced after it)."""

    def __init__(self, options: TakeOptions) -> None:
        self.headers, self.cookies, strings = caller_secrets(options)
        self.forms = sorted({form for secret in strings for form in secret_forms(secret)}, key=len, reverse=True)

    def sent_value(self, name: str, value: str) -> str:
        """A header's value as the page sent it, the caller's own redacted: a whole header the caller gave, or the
        value of each cookie the caller set."""
        if name.lower() in self.headers:
            return REDACTED
        if name.lower() == "cookie":
            return "; ".join(f"{k}={REDACTED}" if k in self.cookies else f"{k}={v}"
                             for k, _, v in (part.strip().partition("=") for part in value.split(";")))
        return value


class RequestLog:
    """Every request of one job's page, in the order the page asked (at most MAX_ENTRIES, the rest counted), with the
    time it was asked and whether it finished or failed; listening from its making until `switch_off`."""

    def __init__(self, page: Page, options: TakeOptions, unrecorded_types: tuple[str, ...] = ()) -> None:
        self._page = page
        self.secrets = CallerSecrets(options)
        self.requests: list[tuple[Request, float]] = []  # with time.time() as it was asked
        self.finished: set[Request] = set()
        self.failed: set[Request] = set()
        self.unrecorded = 0
        self._unrecorded_types = unrecorded_types
        # Methods, not `set.add`: Playwright marks each handler with an attribute, which a builtin cannot take.
        self._listening = [("request", self._on_request), ("requestfinished", self._on_finished),
                           ("requestfailed", self._on_failed)]
        for event, handler in self._listening:
            page.on(event, handler)  # type: ignore[call-overload]

    def switch_off(self) -> None:
        """Stop recording (the page may serve another job); may be called more than once."""
        for event, handler in self._listening:
            self._page.remove_listener(event, handler)
        self._listening = []

    def _on_finished(self, request: Request) -> None:
        self.finished.add(request)

    def _on_failed(self, request: Request) -> None:
        self.failed.add(request)

    def _on_request(self, request: Request) -> None:
        if request.resource_type in self._unrecorded_types:
            return
        if len(self.requests) < MAX_ENTRIES:
            self.requests.append((request, time.time()))
        else:
            self.unrecorded += 1


async def quietly(call: Any, fallback: Any) -> Any:
    """What a Playwright call answers, or `fallback` when the request or page is gone (or it takes too long)."""
    try:
        return await asyncio.wait_for(call, 5)
    except (PlaywrightError, TimeoutError):
        return fallback
