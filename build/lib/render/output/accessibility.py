"""The page as assistive technology reads it: Playwright's ARIA snapshot (`metadata_accessibility`, `format=aria`).

A YAML outline of the accessibility tree: landmarks, headings with their levels, links with their targets,
controls with their names, images with their alternative text; what is hidden is left out. Of the whole page,
or of the first element matching `selector` (the page's when nothing matches, as a region capture falls back to
the viewport).
"""

from __future__ import annotations

from render.browser.tabs import Tab
from render.contract.options import TakeOptions
from render.page.preparation import check_selector, split_selector

SNAPSHOT_TIMEOUT_MS = 10_000


async def aria_snapshot(tab: Tab, options: TakeOptions) -> str:
    """The ARIA snapshot of `selector`'s element, or of the page's body."""
    target = tab.page.locator("body")
    if options.selector is not None:
        await check_selector(tab.page, "selector", options.selector)
        css, _ = split_selector(options.selector)  # Playwright's CSS engine searches open shadow roots itself
        element = tab.page.locator(css).first
        if await element.count():
            target = element
    return await target.aria_snapshot(timeout=SNAPSHOT_TIMEOUT_MS)
