"""Style sheets added to a page by the service, immune to the page's Content-Security-Policy.

A `<style>` element is refused under `style-src` without 'unsafe-inline'; a constructed style sheet
adopted by the document is not. Constructed sheets cannot `@import`, so CSS that imports goes in a
`<style>` element instead (and may then meet the page's policy).
"""

from __future__ import annotations

import json

from render.browser.tabs import Tab

ADOPT_STYLE_SHEET = """(css) => {
  const sheet = new CSSStyleSheet();
  sheet.replaceSync(css);
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
}"""


async def add_style_sheet(tab: Tab, css: str) -> None:
    """Add `css` to the loaded page."""
    if "@import" in css:
        await tab.page.add_style_tag(content=css)
    else:
        await tab.run(ADOPT_STYLE_SHEET, css)


def style_sheet_init_script(css: str) -> str:
    """A script for `Page.add_init_script` that adds `css` to every document before its own scripts run."""
    return f"({ADOPT_STYLE_SHEET})({json.dumps(css)});"
