"""The `fail_if_*` rules: captures refused because of what the page is, never charged."""

from __future__ import annotations

import re

from playwright.async_api import Page, Request, Response

from render.browser.tabs import Tab
from render.contract.errors import ContentContainsString, ContentMissingString, MatchedFailedRequest, RequestNotValid
from render.contract.options import TakeOptions


def url_pattern(pattern: str) -> re.Pattern[str]:
    """A URL pattern where `*` matches anything, the rest literally (whole URL)."""
    return re.compile("^" + ".*".join(re.escape(part) for part in pattern.split("*")) + "$")


class FailedRequestWatch:
    """Records requests matching `fail_if_request_failed` that fail (network error or HTTP 4xx/5xx).

    Attached before navigation, so the main document and every subresource are seen."""

    def __init__(self, tab: Tab, pattern: str | None) -> None:
        self.failures: list[str] = []
        self._pattern = url_pattern(pattern) if pattern else None
        if self._pattern is not None:
            tab.keep_listening("requestfailed", self._on_failed)
            tab.keep_listening("response", self._on_response)

    def _on_failed(self, request: Request) -> None:
        if self._pattern and self._pattern.match(request.url):
            self.failures.append(f"{request.url} ({request.failure or 'failed'})")

    def _on_response(self, response: Response) -> None:
        if self._pattern and response.status >= 400 and self._pattern.match(response.url):
            self.failures.append(f"{response.url} (HTTP {response.status})")

    def check(self, options: TakeOptions) -> None:
        if self.failures:
            raise MatchedFailedRequest(
                f"A request matching fail_if_request_failed={options.fail_if_request_failed!r} failed: "
                f"{self.failures[0]}.")


async def check_content(page: Page, options: TakeOptions) -> None:
    """`fail_if_content_contains` / `fail_if_content_missing`, case-insensitive, on the rendered text."""
    if not options.fail_if_content_contains and not options.fail_if_content_missing:
        return
    text = str(await page.evaluate("() => document.body ? document.body.innerText : ''")).lower()
    for needle in options.fail_if_content_contains:
        if needle.lower() in text:
            raise ContentContainsString(f"The page contains {needle!r} (fail_if_content_contains).")
    if options.fail_if_content_missing and not any(n.lower() in text for n in options.fail_if_content_missing):
        raise ContentMissingString(
            f"The page contains none of {options.fail_if_content_missing!r} (fail_if_content_missing).")


def check_gpu(options: TakeOptions) -> None:
    """This build renders on the CPU (no GPU): say so instead of pretending to have rendered on one."""
    if options.fail_if_gpu_rendering_fails:
        raise RequestNotValid(
            "fail_if_gpu_rendering_fails: this server renders with software (CPU) only, so GPU rendering "
            "always fails here; leave the parameter out to capture with software rendering.")
