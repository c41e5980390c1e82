"""Rendered HTML to Markdown (`format=markdown`, `metadata_content_format=markdown`); the other way, the
`markdown` source, is render.page.markdown.

Its libraries are imported on first use: a worker that never meets Markdown never holds them.
"""

from __future__ import annotations

from typing import Any

# The document as a person reads it: the serialized DOM without what is not rendered (display: none,
# visibility: hidden, closed <details>, <noscript> and <script> text...). Taken from a copy, so the page's
# own DOM and its observers never see a change. Body only; the head is dropped by the conversion anyway.
VISIBLE_DOCUMENT = """() => {
  const root = document.documentElement;
  const copy = root.cloneNode(true);
  const body = document.body;
  if (body) {
    const originals = [root, ...root.querySelectorAll('*')];
    const copies = [copy, ...copy.querySelectorAll('*')];
    const seen = element => element.checkVisibility({visibilityProperty: true});
    const unseen = [];
    originals.forEach((element, index) => {
      if (element === body || !body.contains(element) || seen(element)) return;
      const style = getComputedStyle(element);
      // Not drawn itself, but maybe its children are (display: contents, visibility: visible inside hidden):
      // those stay, without the hidden element's own text.
      if (style.display !== 'none' && [...element.querySelectorAll('*')].some(seen)) {
        if (style.visibility !== 'visible') {
          unseen.push(...[...copies[index].childNodes].filter(node => node.nodeType === Node.TEXT_NODE));
        }
        return;
      }
      unseen.push(copies[index]);
    });
    for (const node of unseen) node.remove();
  }
  return '<!DOCTYPE html>' + copy.outerHTML;
}"""

# Inside a table cell, any of these makes the table a layout (Markdown table cells hold one line).
_BLOCKS = ["address", "article", "aside", "blockquote", "dd", "details", "div", "dl", "dt", "fieldset",
           "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav",
           "ol", "p", "pre", "section", "table", "ul"]


def _is_layout_table(table: Any) -> bool:
    """A table used to lay a page out rather than to hold data: marked so, nested, one column, or with
    block content in its cells."""
    if table.get("role") in ("presentation", "none") or table.find("table") is not None:
        return True
    rows = table.find_all("tr")
    if rows and all(len(row.find_all(["td", "th"], recursive=False)) <= 1 for row in rows):
        return True
    return any(cell.find(_BLOCKS) is not None for cell in table.find_all(["td", "th"]))


def _unwrap_layout_tables(soup: Any) -> None:
    """Layout tables become the blocks they hold, innermost first, so their content reads as text (as a
    Markdown table, a page laid out with tables was one line of 31,000 characters)."""
    for table in reversed(soup.find_all("table")):
        if not _is_layout_table(table):
            continue
        for part in table.find_all(["thead", "tbody", "tfoot", "tr", "td", "th", "caption", "colgroup", "col"]):
            if part.find_parent("table") is table:
                if part.name in ("colgroup", "col"):
                    part.decompose()
                else:
                    part.name = "div"
        table.name = "div"


def html_to_markdown(html: str) -> str:
    """Convert a rendered DOM (best: VISIBLE_DOCUMENT's) to Markdown: the body's content, without
    scripts, styles or templates, layout tables read as blocks."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    for element in soup(["head", "script", "style", "noscript", "template"]):
        element.decompose()
    _unwrap_layout_tables(soup)
    text = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    lines = [line.rstrip() for line in text.splitlines()]
    # Collapse runs of blank lines left by removed elements.
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip() + "\n"


def main_content_markdown(html: str, url: str | None = None) -> str:
    """The article of a rendered page as Markdown (`markdown_content=main`): trafilatura finds it in the whole
    DOM, parts hidden until a script shows them included, without navigation, footers, asides and ads; its
    title leads as a heading. Empty when the page holds no article."""
    import trafilatura
    from bs4 import BeautifulSoup

    extracted = trafilatura.extract(html, url=url, output_format="html", include_links=True, include_images=True,
                                    include_tables=True, include_formatting=True, favor_recall=True)
    if not extracted:
        return ""
    soup = BeautifulSoup(extracted, "html.parser")
    found = trafilatura.extract_metadata(html)
    title = found.title if found is not None else None
    body = soup.body or soup
    first = body.find(True)
    if title and not (first is not None and first.name in ("h1", "h2") and first.get_text(strip=True) == title):
        heading = soup.new_tag("h1")
        heading.string = title
        body.insert(0, heading)
    return html_to_markdown(str(soup))
