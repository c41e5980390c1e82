"""Loading the source into a page and waiting until every requested event holds."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from urllib.parse import urlsplit

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, Request, Response
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from render.contract.errors import (
    CaptureTimeout,
    HostReturnedError,
    NameNotResolved,
    NetworkError,
    PageCrashed,
    ServiceError,
)
from render.contract.options import TakeOptions
from render.contract.timings import Stopwatch
from render.page.markdown import markdown_to_html

NETWORK_QUIET_SECONDS = 0.5
# best_attempt: waits give up this long before the job's deadline (at most a quarter of its timeout), so the
# page they stop waiting for can still be captured.
BEST_ATTEMPT_RESERVE_SECONDS = 5.0
REFUSAL_CHECK_SECONDS = 0.1
_NET_ERROR = re.compile(r"net::(ERR_[A-Z_]+)")


class InflightTracker:
    """Counts a page's requests in flight, for `networkidle0` and `networkidle2` (at most 0 or 2 for 500 ms).

    A request to a host the egress proxy refused counts as over: the headless shell sometimes never reports
    the end of a refused iframe's document (Playwright's own `networkidle` then waits for it forever)."""

    def __init__(self, page: Page, refused_hosts: Callable[[], Collection[str]] = frozenset) -> None:
        self._page = page
        self._refused_hosts = refused_hosts
        self._inflight: set[Request] = set()
        self._changed = asyncio.Event()
        page.on("request", self._started)
        page.on("requestfinished", self._ended)
        page.on("requestfailed", self._ended)

    def detach(self) -> None:
        """Stop listening (the page may serve another job)."""
        self._page.remove_listener("request", self._started)
        self._page.remove_listener("requestfinished", self._ended)
        self._page.remove_listener("requestfailed", self._ended)

    def _started(self, request: Request) -> None:
        self._inflight.add(request)
        self._changed.set()

    def _ended(self, request: Request) -> None:
        self._inflight.discard(request)
        self._changed.set()

    async def wait_idle(self, max_inflight: int, timeout: float) -> None:
        """Return once at most `max_inflight` requests stayed in flight for NETWORK_QUIET_SECONDS."""
        async with asyncio.timeout(timeout):
            quiet_since: float | None = None
            while True:
                left: float | None = None
                refused = self._refused_hosts()
                self._inflight = {r for r in self._inflight if urlsplit(r.url).hostname not in refused}
                if len(self._inflight) <= max_inflight:
                    quiet_since = quiet_since or time.monotonic()
                    left = quiet_since + NETWORK_QUIET_SECONDS - time.monotonic()
                    if left <= 0:
                        return
                else:
                    quiet_since = None
                self._changed.clear()
                try:
                    # Refusals are not page events: looked at again at least every REFUSAL_CHECK_SECONDS.
                    await asyncio.wait_for(self._changed.wait(), min(left or REFUSAL_CHECK_SECONDS,
                                                                     REFUSAL_CHECK_SECONDS))
                except TimeoutError:
                    pass


    async def wait_none(self, until: float) -> None:
        """Return once no request is in flight, or at `until` (time.monotonic()) at the latest."""
        while self._inflight and (left := until - time.monotonic()) > 0:
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)


def _first_event(wait_until: Sequence[str]) -> str:
    """The Playwright event to navigate with: `load` implies `domcontentloaded`, and the network-idle events
    are the tracker's, awaited afterwards."""
    if "load" in wait_until:
        return "load"
    if "domcontentloaded" in wait_until:
        return "domcontentloaded"
    return "commit"


def translate_error(error: PlaywrightError, what: str, options: TakeOptions) -> ServiceError:
    """Map a Playwright navigation failure to the spec's error codes."""
    if isinstance(error, PlaywrightTimeoutError):
        return CaptureTimeout(
            f"{what} did not finish loading within navigation_timeout ({options.navigation_timeout} s).")
    if "crashed" in error.message.lower():  # "Page crashed", "Target crashed"
        return PageCrashed(what)
    if "Download is starting" in error.message:
        return NetworkError(f"{what} is a file download, not a page: downloads are refused.")
    match = _NET_ERROR.search(error.message)
    code = match.group(1) if match else None
    if code == "ERR_NAME_NOT_RESOLVED":
        return NameNotResolved(f"The host of {what} could not be resolved (DNS).")
    if code is not None:
        return NetworkError(f"Could not load {what}: {code}.")
    return NetworkError(f"Could not load {what}: {error.message.splitlines()[0]}")


async def load_source(page: Page, options: TakeOptions, deadline: float, clock: Stopwatch, *,
                      check_status: bool = True, refused_hosts: Callable[[], Collection[str]] = frozenset
                      ) -> Response | None:
    """Navigate to the url (or set the html/markdown) and wait for every `wait_until` event; with
    `check_status`, a non-2xx answer is `host_returned_error` (unless `ignore_host_errors`).
    `refused_hosts`: the hosts the egress proxy refused so far (their requests are over). With `best_attempt`
    a page that started to show goes on when its events do not come in time (`clock.ran_out`)."""
    nav_deadline = wait_deadline(options, deadline)
    idle = [event for event in options.wait_until if event in ("networkidle0", "networkidle2")]
    tracker = InflightTracker(page, refused_hosts) if idle else None
    first = _first_event(options.wait_until)
    what = options.url or "the page"
    response: Response | None = None
    # best_attempt: committed first, so a page whose load event never comes is still there, with its response.
    navigate_until = "commit" if options.best_attempt else first
    try:
        with clock.stage("navigation"):
            timeout_ms = max(1.0, (nav_deadline - time.monotonic()) * 1000)
            if options.url is not None:
                response = await page.goto(options.url, wait_until=navigate_until, timeout=timeout_ms)  # type: ignore[arg-type]
            else:
                content = options.html if options.html is not None else markdown_to_html(options.markdown or "")
                await page.set_content(content, wait_until=navigate_until, timeout=timeout_ms)  # type: ignore[arg-type]
            if navigate_until != first:
                await _best_attempt_at(page.wait_for_load_state(
                    first, timeout=max(1.0, (nav_deadline - time.monotonic()) * 1000)), clock)  # type: ignore[arg-type]
        if not clock.timed_out:
            clock.fired = first if first != "commit" else "network_idle"
        if tracker is not None:
            with clock.stage("waits"):
                idle_wait = tracker.wait_idle(0 if "networkidle0" in idle else 2,
                                              max(0.001, nav_deadline - time.monotonic()))
                if options.best_attempt:
                    await _best_attempt_at(idle_wait, clock)
                else:
                    await idle_wait
            if not clock.timed_out:
                clock.fired = "network_idle"
    except PlaywrightError as error:
        raise translate_error(error, what, options) from None
    except TimeoutError:
        raise CaptureTimeout(
            f"{what} did not reach {' and '.join(idle)} within navigation_timeout ({options.navigation_timeout} s)."
        ) from None
    finally:
        if tracker is not None:
            tracker.detach()
    if response is not None and check_status:
        check_host_status(response, options)
    return response


def wait_deadline(options: TakeOptions, deadline: float) -> float:
    """When a wait that starts now gives up: after navigation_timeout, by the job's deadline, and with
    best_attempt early enough for the capture to follow (BEST_ATTEMPT_RESERVE_SECONDS)."""
    if options.best_attempt:
        deadline -= min(BEST_ATTEMPT_RESERVE_SECONDS, options.timeout / 4)
    return min(deadline, time.monotonic() + options.navigation_timeout)


async def _best_attempt_at(wait: Awaitable[None], clock: Stopwatch) -> None:
    """Await one of wait_until's events; when it does not come in time, note it and go on (best_attempt)."""
    try:
        await wait
    except (PlaywrightTimeoutError, TimeoutError):
        if "wait_until" not in clock.timed_out:
            clock.ran_out("wait_until")


def check_host_status(response: Response, options: TakeOptions) -> None:
    """`host_returned_error` for a non-2xx main document, unless `ignore_host_errors`."""
    if not 200 <= response.status < 300 and not options.ignore_host_errors:
        raise HostReturnedError(
            f"{options.url or 'the page'} answered HTTP {response.status}; set ignore_host_errors=true to "
            "capture it anyway.", returned_status_code=response.status)
