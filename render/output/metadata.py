"""Metadata of a finished capture (the `metadata_*` options), read from the page after the output.

Collected after the capture so that nothing done here (the font probe marks elements) can show in it.
"""

from __future__ import annotations

from typing import Any

from playwright.async_api import Response

from render.browser.tabs import Tab
from render.contract.formats import FORMATS
from render.contract.options import TakeOptions
from render.output.documents import VISIBLE_DOCUMENT, html_to_markdown, main_content_markdown
from render.page import shadow

# og:* properties; a property given more than once becomes a list, in page order.
_OPEN_GRAPH = """() => {
  const found = {};
  for (const meta of document.querySelectorAll('meta[property^="og:"], meta[name^="og:"]')) {
    const name = meta.getAttribute('property') || meta.getAttribute('name');
    const value = meta.getAttribute('content') ?? '';
    if (!(name in found)) found[name] = value;
    else found[name] = [].concat(found[name], value);
  }
  return found;
}"""

# An icon's type by its file's extension, when its link declares none: the image formats' (the format
# registry's), and the two icon formats that are no output format.
ICON_TYPES = {"ico": "image/x-icon", "svg": "image/svg+xml",
              **{key: f.media_type for f in FORMATS.values() if f.kind == "image" for key in (f.name, f.extension)}}

# The largest declared icon (SVG and sizes="any" count as largest); the origin's /favicon.ico otherwise.
_ICON = """(TYPES) => {
  const typeOf = (href, declared) => {
    if (declared) return declared;
    const extension = new URL(href).pathname.split('.').pop().toLowerCase();
    return TYPES[extension] || null;
  };
  const size = (link, type) => {
    const sizes = (link.getAttribute('sizes') || '').toLowerCase();
    if (sizes === 'any' || type === 'image/svg+xml') return Infinity;
    return Math.max(0, ...sizes.split(/\\s+/).map((s) => parseInt(s.split('x')[0], 10) || 0));
  };
  let best = null;
  for (const link of document.querySelectorAll('link[rel][href]')) {
    const rel = link.getAttribute('rel').toLowerCase().split(/\\s+/);
    if (!rel.some((r) => r === 'icon' || r.startsWith('apple-touch-icon'))) continue;
    const url = link.href, type = typeOf(url, link.getAttribute('type'));
    const candidate = {url, type, size: size(link, type), plain: rel.includes('icon')};
    if (!best || candidate.size > best.size || (candidate.size === best.size && candidate.plain && !best.plain)) {
      best = candidate;
    }
  }
  if (best) return {url: best.url, type: best.type};
  if (!/^https?:$/.test(location.protocol)) return null;
  return {url: new URL('/favicon.ico', location.href).href, type: 'image/x-icon'};
}"""

# Marks one element per distinct font style and script of the visible text; returns how many.
_MARK_FONT_PROBES = """() => {
  const scriptOf = (text) =>
    /\\p{Extended_Pictographic}/u.test(text) ? 'emoji'
    : /[\\p{Script=Han}\\p{Script=Hiragana}\\p{Script=Katakana}\\p{Script=Hangul}]/u.test(text) ? 'cjk'
    : /[^\\u0000-\\u024f\\s]/u.test(text) ? 'other' : 'latin';
  const seen = new Set();
  const walker = document.createTreeWalker(document.body || document.documentElement, NodeFilter.SHOW_TEXT);
  while (walker.nextNode() && seen.size < 100) {
    const text = walker.currentNode.textContent.trim();
    const element = walker.currentNode.parentElement;
    if (!text || !element || !element.checkVisibility()) continue;
    const style = getComputedStyle(element);
    const key = [style.fontFamily, style.fontWeight, style.fontStyle, scriptOf(text)].join('|');
    if (seen.has(key)) continue;
    seen.add(key);
    element.setAttribute('data-screenshot-font-probe', '');
  }
  return seen.size;
}"""
_UNMARK_FONT_PROBES = """() => {
  for (const element of document.querySelectorAll('[data-screenshot-font-probe]')) {
    element.removeAttribute('data-screenshot-font-probe');
  }
}"""


def wanted(options: TakeOptions) -> bool:
    return any((options.metadata_page_title, options.metadata_open_graph, options.metadata_icon,
                options.metadata_fonts, options.metadata_content, options.metadata_http_response_status_code,
                options.metadata_http_response_headers))


async def collect(tab: Tab, options: TakeOptions, response: Response | None) -> dict[str, Any]:
    """What the options ask for, by the names of the JSON body: `page_title`, `open_graph`, `icon`,
    `fonts`, `http_response` (`status_code`, `headers`). Content is read by `content()`."""
    page = tab.page
    found: dict[str, Any] = {}
    if options.metadata_page_title:
        found["page_title"] = await page.title()
    if options.metadata_open_graph:
        found["open_graph"] = await page.evaluate(_OPEN_GRAPH)
    if options.metadata_icon:
        found["icon"] = await page.evaluate(_ICON, ICON_TYPES)
    if options.metadata_fonts:
        found["fonts"] = await rendered_fonts(tab)
    if options.metadata_http_response_status_code or options.metadata_http_response_headers:
        http: dict[str, Any] = {}
        if options.metadata_http_response_status_code:
            http["status_code"] = response.status if response is not None else None
        if options.metadata_http_response_headers:
            http["headers"] = await response.all_headers() if response is not None else {}
        found["http_response"] = http
    return found


async def content(tab: Tab, options: TakeOptions) -> tuple[bytes, str, str]:
    """The page as `metadata_content_format`: (body, extension, content type)."""
    if options.metadata_content_format == "markdown":
        markdown = FORMATS["markdown"]
        return (await page_markdown(tab, options)).encode(), markdown.extension, markdown.media_type
    html = FORMATS["html"]
    return (await page_html(tab, options)).encode(), html.extension, html.media_type


async def page_html(tab: Tab, options: TakeOptions) -> str:
    """The page's HTML, its shadow roots included with `include_shadow_dom`."""
    if options.include_shadow_dom:
        return await shadow.serialize(tab, composed=False)
    return await tab.page.content()


async def page_markdown(tab: Tab, options: TakeOptions) -> str:
    """The page as Markdown: everything a person sees, or with `markdown_content=main` its article alone."""
    if options.markdown_content == "main":
        return main_content_markdown(await page_html(tab, options), tab.page.url)
    return html_to_markdown(await readable_html(tab, options))


async def readable_html(tab: Tab, options: TakeOptions) -> str:
    """The page as a person reads it (what Markdown is made of), shadow roots included with
    `include_shadow_dom`."""
    if options.include_shadow_dom:
        return await shadow.serialize(tab, composed=True)
    return str(await tab.page.evaluate(VISIBLE_DOCUMENT))


async def rendered_fonts(tab: Tab) -> list[str]:
    """Families Chromium actually drew the page's visible text with (fallbacks included, such as the
    emoji font), asked per distinct font style and script over CDP; sorted, each once."""
    if not await tab.page.evaluate(_MARK_FONT_PROBES):
        return []
    families: set[str] = set()
    await tab.send("DOM.enable")
    await tab.send("CSS.enable")
    try:
        root = (await tab.send("DOM.getDocument", {"depth": 0}))["root"]["nodeId"]
        probes = await tab.send("DOM.querySelectorAll", {"nodeId": root, "selector": "[data-screenshot-font-probe]"})
        for node_id in probes["nodeIds"]:
            used = await tab.send("CSS.getPlatformFontsForNode", {"nodeId": node_id})
            families.update(font["familyName"] for font in used["fonts"] if font.get("glyphCount", 1))
    finally:
        await tab.send("CSS.disable")
        await tab.send("DOM.disable")
        await tab.page.evaluate(_UNMARK_FONT_PROBES)
    return sorted(families)
