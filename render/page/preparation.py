"""Preparing the loaded page: waits for selectors, hidden elements, styles, scripts, click and hover.

Selectors are CSS. A `shadow/` prefix searches open shadow roots too (each root on its own);
without it, as with `document.querySelector`, shadow roots are not pierced.
"""

from __future__ import annotations

import asyncio
import time

from playwright.async_api import ElementHandle, Page, Request
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from render.browser.tabs import Tab
from render.contract.errors import (
    CaptureTimeout,
    ErrorDetail,
    RequestNotValid,
    ScriptTriggersRedirect,
    SelectorNotFound,
)
from render.contract.options import TakeOptions
from render.contract.timings import Stopwatch
from render.page.navigation import wait_deadline
from render.page.styles import add_style_sheet

SHADOW_PREFIX = "shadow/"
NAVIGATION_GRACE_SECONDS = 0.1  # a script's `location.href = ...` starts its navigation a moment later
# Waits give up this much before the job's deadline, so their own message (naming what did not
# appear) is reported rather than the job's generic timeout.
REPORT_MARGIN_SECONDS = 0.25
ACTION_TIMEOUT_SECONDS = 10
EXPRESSION_POLL_MS = 50  # an element that stays covered or disabled this long is not clickable

# Finds the first element matching a selector, in the document and, when deep, every open shadow root.
_QUERY = """([selector, deep, all]) => {
  const roots = [document];
  const found = [];
  while (roots.length) {
    const root = roots.shift();
    const hits = root.querySelectorAll(selector);
    if (hits.length && !all) return hits[0];
    found.push(...hits);
    if (!deep) break;
    for (const element of root.querySelectorAll('*')) if (element.shadowRoot) roots.push(element.shadowRoot);
  }
  return all ? found.length : null;
}"""

_VALID = """(selector) => { try { document.createDocumentFragment().querySelector(selector); return true; }
                         catch (e) { return false; } }"""


def split_selector(selector: str) -> tuple[str, bool]:
    """(`css`, deep) from a selector that may carry the `shadow/` prefix."""
    if selector.startswith(SHADOW_PREFIX):
        return selector[len(SHADOW_PREFIX):], True
    return selector, False


def split_top_level_commas(text: str) -> list[str]:
    """`a, b[x="1,2"], :is(c, d)` to its three selectors (commas inside quotes or brackets stay)."""
    parts: list[str] = []
    current: list[str] = []
    depth, quote = 0, ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    parts.append("".join(current).strip())
    return [part for part in parts if part]


async def check_selector(page: Page, field: str, selector: str) -> None:
    """Refuse a syntactically invalid selector by name, instead of silently matching nothing."""
    css, _ = split_selector(selector)
    if not await page.evaluate(_VALID, css):
        raise RequestNotValid(f"{field}: {selector!r} is not a valid CSS selector",
                              [ErrorDetail(field, "not a valid CSS selector")])


async def find(page: Page, field: str, selector: str) -> ElementHandle | None:
    """The first element matching `selector` (with `shadow/` support), or None."""
    await check_selector(page, field, selector)
    css, deep = split_selector(selector)
    handle = await page.evaluate_handle(_QUERY, [css, deep, False])
    element = handle.as_element()
    if element is None:
        await handle.dispose()
    return element


async def count(page: Page, selector: str) -> int:
    css, deep = split_selector(selector)
    return int(await page.evaluate(_QUERY, [css, deep, True]))


async def wait_for_selectors(page: Page, options: TakeOptions, deadline: float, clock: Stopwatch) -> None:
    """`wait_for_selector`: any one of the comma-separated selectors, or each at least once (with best_attempt,
    at most navigation_timeout)."""
    if options.wait_for_selector is None:
        return
    if options.best_attempt:
        deadline = wait_deadline(options, deadline) + REPORT_MARGIN_SECONDS
    selectors = split_top_level_commas(options.wait_for_selector)
    for selector in selectors:
        await check_selector(page, "wait_for_selector", selector)
    need_all = options.wait_for_selector_algorithm == "at_least_by_count"
    while True:
        counts = [await count(page, selector) for selector in selectors]
        if (all(counts) if need_all else any(counts)):
            clock.fired = "selector"
            return
        if time.monotonic() > deadline - REPORT_MARGIN_SECONDS:
            if options.best_attempt:
                clock.ran_out("wait_for_selector")
                return
            missing = [s for s, c in zip(selectors, counts, strict=True) if not c]
            raise CaptureTimeout(f"wait_for_selector: {', '.join(missing)} did not appear before the timeout "
                                 f"({options.timeout} s).")
        await asyncio.sleep(0.05)


async def wait_for_expression(page: Page, options: TakeOptions, deadline: float, clock: Stopwatch) -> None:
    """`wait_for_expression`: evaluated every EXPRESSION_POLL_MS until truthy, within navigation_timeout."""
    if options.wait_for_expression is None:
        return
    until = min(wait_deadline(options, deadline), deadline - REPORT_MARGIN_SECONDS)
    try:
        await page.wait_for_function(options.wait_for_expression, polling=EXPRESSION_POLL_MS,
                                     timeout=max(1.0, (until - time.monotonic()) * 1000))
    except PlaywrightTimeoutError:
        if options.best_attempt:
            clock.ran_out("wait_for_expression")
            return
        raise CaptureTimeout(f"wait_for_expression did not become true within navigation_timeout "
                             f"({options.navigation_timeout} s) or the timeout ({options.timeout} s).") from None
    except PlaywrightError as error:
        message = error.message.splitlines()[0].removeprefix("Page.wait_for_function: ")
        raise RequestNotValid(f"wait_for_expression failed in the page: {message}",
                              [ErrorDetail("wait_for_expression", message[:200])]) from None
    clock.fired = "expression"


async def hide_and_style(tab: Tab, options: TakeOptions) -> None:
    """`hide_selectors` (display: none) and `styles`, as one style sheet."""
    rules = []
    for index, selector in enumerate(options.hide_selectors):
        await check_selector(tab.page, f"hide_selectors.{index}", selector)
        rules.append(f"{selector} {{ display: none !important; }}")
    if options.styles:
        rules.append(options.styles)
    if rules:
        await add_style_sheet(tab, "\n".join(rules))


async def run_scripts(page: Page, options: TakeOptions, deadline: float) -> None:
    """Run `scripts` (an async function body); report its errors; follow or refuse its navigation."""
    if not options.scripts:
        return
    navigated: list[str] = []

    def on_request(request: Request) -> None:
        if request.is_navigation_request() and request.frame == page.main_frame:
            navigated.append(request.url)

    page.on("request", on_request)
    try:
        try:
            await page.evaluate(f"async () => {{\n{options.scripts}\n}}")
        except PlaywrightError as error:
            if "Execution context was destroyed" not in error.message:
                message = error.message.splitlines()[0].removeprefix("Page.evaluate: ")
                raise RequestNotValid(f"scripts failed: {message}", [ErrorDetail("scripts", message)]) from None
        await asyncio.sleep(NAVIGATION_GRACE_SECONDS)
    finally:
        page.remove_listener("request", on_request)
    if not navigated:
        return
    if not options.scripts_wait_until:
        raise ScriptTriggersRedirect(
            f"scripts navigated the page to {navigated[-1]}; add scripts_wait_until (for example load) to "
            "capture the page it leads to.")
    for event in options.scripts_wait_until:
        remaining_ms = max(1.0, (deadline - time.monotonic()) * 1000)
        state = "networkidle" if event.startswith("networkidle") else event
        await page.wait_for_load_state(state, timeout=remaining_ms)  # type: ignore[arg-type]


async def interact(tab: Tab, options: TakeOptions, deadline: float) -> None:
    """`click`, then `hover`, each refused or skipped when nothing matches (per its error_on_* flag)."""
    for action, selector, must_exist in (
        ("click", options.click, options.error_on_click_selector_not_found),
        ("hover", options.hover, options.error_on_hover_selector_not_found),
    ):
        if selector is None:
            continue
        element = await find(tab.page, action, selector)
        if element is not None and not await element.is_visible():
            await element.dispose()
            element = None  # a hidden element cannot be clicked or hovered: as good as missing
        if element is None:
            if must_exist:
                raise SelectorNotFound(
                    f"{action}: no visible element matches {selector!r}; set "
                    f"error_on_{action}_selector_not_found=false to capture anyway.",
                    [ErrorDetail(action, "no visible element matches")])
            continue
        timeout_ms = max(1.0, min(deadline - time.monotonic(), ACTION_TIMEOUT_SECONDS) * 1000)
        try:
            await tab.act(element, action, timeout_ms)
        except PlaywrightError as error:
            raise SelectorNotFound(f"{action}: the element matching {selector!r} could not be used: "
                                   f"{error.message.splitlines()[0]}", [ErrorDetail(action, "not actionable")]
                                   ) from None
        finally:
            await element.dispose()


def prepares(options: TakeOptions) -> bool:
    """Whether `prepare` has anything to do for `options`."""
    return bool(options.wait_for_selector or options.wait_for_expression or options.hide_selectors
                or options.styles or options.scripts
                or options.click or options.hover)


async def prepare(tab: Tab, options: TakeOptions, deadline: float, clock: Stopwatch) -> None:
    """Every preparation step, in the order a person would: wait, style, script, click, hover."""
    if options.wait_for_selector is not None or options.wait_for_expression is not None:
        with clock.stage("waits"):
            await wait_for_selectors(tab.page, options, deadline, clock)
            await wait_for_expression(tab.page, options, deadline, clock)
    with clock.stage("preparation"):
        await hide_and_style(tab, options)
        await run_scripts(tab.page, options, deadline)
        await interact(tab, options, deadline)
