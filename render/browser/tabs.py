"""A tab: a page in its own browser context, with a CDP session for captures; how one is opened.

Every tab starts at the default viewport and user agent; device emulation is applied per job over CDP
(render.page.emulation). Service workers are removed from every frame, and requests carrying credentials
in their URL are watched (a context that saw some is never kept for another job).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from playwright.async_api import Browser, BrowserContext, CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from render.browser.client_hints import user_agent_override
from render.browser.page_changes import CDP_EFFECTS, PLAYWRIGHT_EFFECTS, Effect, UnknownCommand
from render.contract.devices import DEFAULT_HEIGHT, DEFAULT_WIDTH, Viewport, desktop_user_agent
from render.net.egress import EgressProxy, Listener

log = logging.getLogger(__name__)
NO_SERVICE_WORKERS = "delete Navigator.prototype.serviceWorker;"
CLOSE_TIMEOUT_SECONDS = 10
# Requests with a user or password in their URL (XMLHttpRequest.open with credentials, a page navigating to
# http://user:password@host/) are paused, to be seen: Chromium keeps such credentials in its HTTP auth cache,
# which no DevTools command clears, so a page that used some is not kept. Only URLs holding an "@" pause.
CREDENTIAL_URLS = {"patterns": [{"urlPattern": "*@*", "requestStage": "Request"}]}
# Every request of the page's frames paused (a job's blocking, render.page.blocking; its target headers,
# render.page.request_context). Chromium's headless shell renders a frame of another site in its page's own
# process, so the page's session sees its requests too (test_context_reuse's frame of another site).
EVERY_URL = {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}


class PageHelper(Protocol):
    """Something a job installed in its page for the page's lifetime, off between jobs."""

    def switch_off(self) -> None: ...


@dataclass
class Tab:
    """A page in its own context, with a CDP session for captures. A job changes the page only through the tab's
    operations (`send`, `add_init_script`, ...), each of which records what it leaves (`changes`: render.browser.
    page_changes); the wipe reads the record."""

    context: BrowserContext
    page: Page
    cdp: CDPSession
    # What the jobs since the last wipe left on the page, by effect: what did it (a command, an operation, a reason).
    changes: dict[Effect, list[str]] = field(default_factory=dict)
    # The job's blocking (render.page.blocking), while it is on: whether a paused request is refused (failed as
    # blocked by the client) rather than sent. Taken off when the page is wiped (`leave`).
    refuses: Callable[[dict[str, Any]], bool] | None = None
    # Every request of the page pauses (EVERY_URL), not only those with credentials: so from a job that blocks (or
    # sets target headers) until a job that does neither starts (`pause_only_credentials`). An organisation whose
    # jobs all block then asks Chromium once, not twice a job (about 2.6 ms each).
    pausing_all: bool = False
    # Every origin whose documents this context has held (what the egress proxy saw and what the frames
    # showed, over all its jobs): all are wiped after each job, so state written to an origin without
    # a connection of that job's (an inherited about:blank, say) is wiped too.
    held_origins: set[str] = field(default_factory=set)
    crashed: bool = False  # its renderer died (the page's "crash" event)
    # A request of the page carried a user or password in its URL (CREDENTIAL_URLS): the context may hold
    # them in its HTTP auth cache, so it is not kept.
    credentials_used: bool = False
    # Who continues the page's paused requests when one asks to see them all (render.page.request_context).
    on_request: Callable[[dict[str, Any]], None] | None = None
    # The page's document of the job before is being left (render.browser.wiping): every request pauses and is
    # refused, until the next job loads its own document (`arrives`).
    leaving: bool = False
    # The next job has begun on the page (`begin_arrival`): its main frame's first document request ends `leaving`
    # (or, for a job that pauses only credentials, its narrowing just before: `pause_only_credentials`).
    _arriving: bool = False
    # Page-side helpers installed for the page's lifetime (an init script with its binding: render.page.consent),
    # by name. A job switches on the ones it wants; all are switched off when it is over, so they do not
    # make the page dirty.
    helpers: dict[str, PageHelper] = field(default_factory=dict)
    # The context's own listener on the egress proxy (its proxy server), closed with it: what the context's
    # pages send while another context's job runs is refused there (render.net.egress).
    listener: Listener | None = None
    _left: asyncio.Future[Any] | None = field(default=None, repr=False)  # `leave`'s
    _continuing: set[asyncio.Future[None]] = field(default_factory=set, repr=False)
    _main_frame_id: str | None = field(default=None, repr=False)

    @property
    def dirty(self) -> bool:
        """A job changed the page's own settings (emulation, init scripts, routes, listeners, ...): the page is
        replaced, not reused, for the organisation's next job."""
        return Effect.SETTINGS in self.changes

    @property
    def permissions_granted(self) -> bool:
        """A job granted the context a permission: the wipe resets the context's permissions."""
        return Effect.PERMISSIONS in self.changes

    def changed(self, effect: Effect, what: str) -> None:
        """Record that `what` left `effect` on the page (done by every operation of the tab before it acts)."""
        if effect is not Effect.NONE:
            self.changes.setdefault(effect, []).append(what)

    def forget_changes(self) -> None:
        """The wipe has undone what the jobs left (render.browser.wiping)."""
        self.changes = {}

    async def send(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """A DevTools command on the tab's session, its effect recorded first (CDP_EFFECTS); a command whose effect
        nobody has said is refused, so none can change the page unseen."""
        effect = CDP_EFFECTS.get(method)
        if effect is None:
            raise UnknownCommand(f"{method}: say what it leaves on a page in render.browser.page_changes")
        self.changed(effect, method)
        return await self.cdp.send(method, params or {})

    async def add_init_script(self, script: str) -> None:
        """A script run in every document the page loads from now on."""
        self.changed(PLAYWRIGHT_EFFECTS["add_init_script"], "add_init_script")
        await self.page.add_init_script(script)

    async def expose_binding(self, name: str, callback: Callable[..., Any]) -> None:
        """A function of the worker the page's documents can call."""
        self.changed(PLAYWRIGHT_EFFECTS["expose_binding"], f"expose_binding {name}")
        await self.page.expose_binding(name, callback)

    async def route_web_socket(self, url: str, handler: Callable[[Any], Awaitable[None]]) -> None:
        """WebSockets the page opens handed to `handler` (they are not paused with its requests)."""
        self.changed(PLAYWRIGHT_EFFECTS["route_web_socket"], "route_web_socket")
        await self.page.route_web_socket(url, handler)

    async def emulate_media(self, media: Any) -> None:
        """The CSS media type the page lays out for."""
        self.changed(PLAYWRIGHT_EFFECTS["emulate_media"], "emulate_media")
        await self.page.emulate_media(media=media)

    async def grant_permissions(self, permissions: list[str]) -> None:
        """Permissions granted to the context (reset by the wipe)."""
        self.changed(PLAYWRIGHT_EFFECTS["grant_permissions"], f"grant_permissions {', '.join(permissions)}")
        await self.context.grant_permissions(permissions)

    def attach(self, name: str, helper: PageHelper) -> None:
        """A helper on the page for this job (a watch, a recorder: listeners it removes itself), switched off when
        the job's tab is released (`helpers`): recorded as no change."""
        self.helpers[name] = helper

    async def add_helper(self, name: str, helper: PageHelper, callback: Callable[..., Any], script: str) -> None:
        """A helper for the page's lifetime (`helpers[name]`): a binding the page calls and a script in every
        document. Switched off between jobs, so it leaves nothing a next job could meet: recorded as no change."""
        await self.page.expose_binding(name, callback)
        await self.page.add_init_script(script)
        self.helpers[name] = helper

    def keep_listening(self, event: str, handler: Callable[..., Any]) -> None:
        """A listener on the page for its lifetime (one a job removes itself needs no record)."""
        self.changed(Effect.SETTINGS, f"listener on {event}")
        self.page.on(event, handler)  # type: ignore[call-overload]

    async def act(self, element: Any, action: str, timeout_ms: float) -> None:
        """Click or hover `element` (a Playwright element handle): the mouse stays where the job left it."""
        self.changed(Effect.SETTINGS, f"mouse moved by {action}")
        await (element.click if action == "click" else element.hover)(timeout=timeout_ms)

    async def add_cookies(self, cookies: list[Any]) -> None:
        """Cookies in the context (cleared by the wipe)."""
        self.changed(PLAYWRIGHT_EFFECTS["add_cookies"], "add_cookies")
        await self.context.add_cookies(cookies)

    def paused(self, event: dict[str, Any]) -> None:
        """A request paused by Fetch (CREDENTIAL_URLS, or EVERY_URL for `refuses` and `on_request`): refused,
        handed to `on_request`, or continued."""
        if self.leaving:
            if not self._arrived(event):
                self._answer("Fetch.failRequest", {"requestId": event["requestId"], "errorReason": "BlockedByClient"})
                return
            self.arrives()
        parts = urlsplit(event["request"]["url"])
        if parts.username or parts.password:
            self.credentials_used = True
        if self.refuses is not None and self.refuses(event):
            self._answer("Fetch.failRequest", {"requestId": event["requestId"], "errorReason": "BlockedByClient"})
        elif self.on_request is not None:
            self.on_request(event)
        else:
            self._answer("Fetch.continueRequest", {"requestId": event["requestId"]})

    def _arrived(self, event: dict[str, Any]) -> bool:
        """Whether `event` is the next job's own document, asked for by the page's main frame: what the document
        left before asks for afterwards (a `keepalive` fetch or beacon sent from its `pagehide` handler, which
        Chromium may pause up to 15 ms after the page shows about:blank) is then refused, not sent as that job's."""
        return self._arriving and event.get("resourceType") == "Document" and event["frameId"] == self._main_frame_id

    def begin_arrival(self) -> None:
        """The next job begins on a page that was left: its main frame's next document request is its own."""
        self._arriving = self.leaving

    def arrives(self) -> None:
        """The job's own document is on its way (or the job loads none from the network): nothing is refused any
        more for the document left before."""
        self.leaving = self._arriving = False
        self._left = None

    def _answer(self, method: str, params: dict[str, Any]) -> None:
        task = asyncio.ensure_future(self._send_quietly(method, params))
        self._continuing.add(task)  # held until done: the loop keeps only a weak reference
        task.add_done_callback(self._continuing.discard)

    async def _send_quietly(self, method: str, params: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):  # cancelled meanwhile, or the page closed
            await self.send(method, params)

    async def main_frame_id(self) -> str:
        """The DevTools id of the page's main frame (the same for the page's whole life, whatever it loads)."""
        if self._main_frame_id is None:
            self._main_frame_id = (await self.send("Page.getFrameTree"))["frameTree"]["frame"]["id"]
        return self._main_frame_id

    async def pause_all(self) -> None:
        """From now on every request of the page pauses (and is continued unless a job's handler says otherwise)."""
        if not self.pausing_all:
            await self.send("Fetch.enable", EVERY_URL)
            self.pausing_all = True

    async def intercept_requests(self, handler: Callable[[dict[str, Any]], None]) -> None:
        """From now on every request of the page pauses and is handed to `handler`, which continues it; for the
        page's lifetime, so the page is not reused."""
        self.changed(Effect.SETTINGS, "requests intercepted")
        self.on_request = handler
        await self.pause_all()

    async def refuse_requests(self, refuses: Callable[[dict[str, Any]], bool]) -> None:
        """From now on every request of the page pauses, and those `refuses` says so of are failed."""
        self.refuses = refuses
        await self.pause_all()

    def leave(self) -> asyncio.Future[Any]:
        """The job is over, and its blocking; from now on every request of the page pauses and is refused, until the
        next job's own document arrives (`begin_arrival`, then its document request or `arrives`). Done when Chromium
        pauses them all; asked again before that job, the same."""
        self.refuses = None  # also when a job that never loaded left its blocking on
        self.leaving = True
        self._arriving = False
        if self._left is None or self._left.done():
            # The main frame's id is known before the next job's document request pauses.
            self._left = asyncio.ensure_future(asyncio.gather(self.main_frame_id(), self.pause_all()))
            self._left.add_done_callback(lambda left: left.cancelled() or left.exception())  # a page closed meanwhile
        return self._left

    async def pause_only_credentials(self) -> None:
        """Before a job that neither blocks nor sets target headers: only requests with credentials in their URL
        pause again. On a page being left, that ends the refusal as the job is about to load its document (asking
        Chromium to pause less while a navigation runs would hold the navigation up by several milliseconds). Not
        waited for: a request that still pauses meanwhile is continued."""
        if self.pausing_all and self.refuses is None and self.on_request is None:
            self.pausing_all = False
            if self._arriving:
                self.arrives()
            self._answer("Fetch.enable", CREDENTIAL_URLS)

    async def run(self, function: str, argument: Any = None) -> Any:
        """Call `function` (a JavaScript function's source, of one JSON argument) in the page's main world and
        return its JSON result (awaited when it is a promise), as `Page.evaluate` does. Straight over CDP: cheaper
        than Playwright's, which tracks execution contexts and sets up its utility world. A script that throws
        raises Playwright's `Error`, as `Page.evaluate` does."""
        answer = await self.send("Runtime.evaluate", {
            "expression": f"({function})({json.dumps(argument)})", "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in answer:
            details = answer["exceptionDetails"]
            raise PlaywrightError(str(details.get("exception", {}).get("description") or details.get("text")))
        result = answer.get("result", {})
        if "unserializableValue" in result:  # NaN, Infinity, -0, a BigInt
            value = result["unserializableValue"]
            return int(value[:-1]) if value.endswith("n") else float(value)
        return result.get("value")

    async def close(self) -> bool:
        """Close the tab's context; False when it did not close in time (a hung renderer)."""
        try:
            await asyncio.wait_for(self.context.close(), CLOSE_TIMEOUT_SECONDS)
        except TimeoutError:
            return False
        except Exception:  # the browser may already be gone; nothing left to free then
            log.debug("context close failed", exc_info=True)
        finally:
            if self.listener is not None:
                await self.listener.close()
        return True


# The tab each browser context last brought to the foreground, until a page opens in that context (a popup, a new
# page in a kept context), which may take the foreground: headless Chromium renders only a window's active tab
# (lazy loading, IntersectionObserver and animation frames wait; a capture fails). A page of another context (the
# spare tab, another job slot's) is not in its window: both render at the full frame rate.
_front: weakref.WeakKeyDictionary[BrowserContext, Tab] = weakref.WeakKeyDictionary()


async def bring_to_front(tab: Tab) -> None:
    """Make `tab` its window's active tab, unless it is known to be already (a round trip to Chromium saved
    for each job, and for each frame of a recording)."""
    if _front.get(tab.context) is tab:
        return
    await tab.send("Page.bringToFront")
    _front[tab.context] = tab


def _page_opened(context: BrowserContext) -> None:
    _front.pop(context, None)


async def open_tab(browser: Browser, chrome_version: str, egress: EgressProxy | None = None) -> Tab:
    """A new context at the default viewport, with one page in it; with `egress`, the context goes out through a
    listener of its own (loopback included: Playwright adds `<-loopback>` to a context's bypass list)."""
    major = chrome_version.split(".")[0]
    listener = await egress.open_listener() if egress is not None else None
    try:
        context = await browser.new_context(
            viewport={"width": DEFAULT_WIDTH, "height": DEFAULT_HEIGHT},
            user_agent=desktop_user_agent(major),
            service_workers="block",
            accept_downloads=False,
            **({"proxy": {"server": listener.url}} if listener is not None else {}),  # type: ignore[arg-type]
        )
    except BaseException:
        if listener is not None:
            await listener.close()
        raise
    context.on("page", lambda _page: _page_opened(context))
    try:
        # service_workers="block" alone still lets a page register one (seen with Chromium 156):
        # the API is removed from every frame before any page script runs.
        await context.add_init_script(NO_SERVICE_WORKERS)
        tab = await open_page(context, chrome_version)
    except BaseException:
        await context.close()
        if listener is not None:
            await listener.close()
        raise
    tab.listener = listener
    return tab


async def open_page(context: BrowserContext, chrome_version: str) -> Tab:
    """A new page in `context`, with its CDP session, the default agent's client hints and the credential watch."""
    page = await context.new_page()
    cdp = await context.new_cdp_session(page)
    tab = Tab(context, page, cdp)
    # The page's defaults, before any job (so straight on the session, not recorded as a job's changes).
    # The default agent's client hints: Chrome's brands, not "HeadlessChrome" (render.browser.client_hints).
    override, _ = user_agent_override(desktop_user_agent(chrome_version.split(".")[0]), chrome_version)
    await cdp.send("Emulation.setUserAgentOverride", override)
    # The default viewport's metrics, as the context set them on Playwright's own session, set on this one too:
    # a capture beyond the viewport through a session with no metrics of its own lays the page out for the
    # headless shell's own screen instead (a saved news page's `max-device-width: 1024px` rules applied in its
    # full page, and in no plain browser's).
    await cdp.send("Emulation.setDeviceMetricsOverride", Viewport().device_metrics())
    page.once("crash", lambda _page: setattr(tab, "crashed", True))
    cdp.on("Fetch.requestPaused", tab.paused)
    await cdp.send("Fetch.enable", CREDENTIAL_URLS)
    return tab
