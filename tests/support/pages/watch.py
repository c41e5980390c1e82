"""Pages that change between captures (`/compare` and monitors), each change at a place the tests know.

`/watch/page.html?v=<version>`: a price list whose versions differ from `base` in one way each:
- `text`: the price (the element at PRICE_BOX) reads differently;
- `image`: the picture at IMAGE_BOX changes colour;
- `layout`: a banner BANNER_HEIGHT px high is inserted above everything (the rest moves down, unchanged);
- `base`: none of that.
`/watch/live.html` serves the version a test sets (`LivePage.version`), for monitors that watch one URL.
`/articles/<id>.html` serves the saved article pages of tests/material/articles (main-content Markdown), and
`/articles/<id>-hidden.html` the same page with its body hidden until a script shows it (none does);
`/articles/extra/<id>.html` the fourteen more of tests/material/articles/extra (the default full page).
"""

from __future__ import annotations

import base64
import gzip
from pathlib import Path
from typing import Any

# x, y, width, height in CSS px (device scale factor 1) of what changes.
PRICE_BOX = (40, 120, 200, 40)
IMAGE_BOX = (300, 120, 120, 80)
BANNER_HEIGHT = 60
VERSIONS = ("base", "text", "image", "layout")
PAGE_POLICY = "default-src 'self' 'unsafe-inline' data:"


def page(version: str) -> str:
    price = "42.00 EUR" if version == "text" else "19.99 EUR"
    colour = "#d03030" if version == "image" else "#3060d0"
    banner = (f'<div style="height:{BANNER_HEIGHT}px;background:#ffcc00">A new offer</div>'
              if version == "layout" else "")
    x, y, w, h = PRICE_BOX
    ix, iy, iw, ih = IMAGE_BOX
    image = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{iw}" height="{ih}">'
             f'<rect width="{iw}" height="{ih}" fill="{colour}"/></svg>')
    picture = base64.b64encode(image.encode()).decode()
    return f"""<!DOCTYPE html><html><head><style>
  body {{ margin: 0; font: 24px/40px sans-serif; background: #fff; }}
  main {{ position: relative; height: 700px; }}
  h1 {{ position: absolute; left: 40px; top: 20px; margin: 0; font-size: 32px; }}
  #price {{ position: absolute; left: {x}px; top: {y}px; width: {w}px; height: {h}px; margin: 0; }}
  #picture {{ position: absolute; left: {ix}px; top: {iy}px; }}
  #footer {{ position: absolute; left: 40px; top: 600px; }}
</style></head><body>{banner}<main>
  <h1>Price list</h1>
  <p id="price">{price}</p>
  <img id="picture" alt="" width="{iw}" height="{ih}" src="data:image/svg+xml;base64,{picture}">
  <p id="footer">Prices include VAT.</p>
</main></body></html>"""


def _html(body: str) -> tuple[int, str, bytes]:
    return 200, "text/html; charset=utf-8", body.encode()


class LivePage:
    """`/watch/live.html`: whichever version a test sets, and how often it was fetched."""

    def __init__(self) -> None:
        self.version = "base"
        self.fetches = 0

    def __call__(self, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        self.fetches += 1
        return _html(page(self.version))


ARTICLES_DIR = Path(__file__).parents[2] / "material" / "articles"
ARTICLES = sorted(path.name.removesuffix(".html.gz") for path in ARTICLES_DIR.glob("*.html.gz"))
EXTRA_ARTICLES = sorted(path.name.removesuffix(".html.gz") for path in (ARTICLES_DIR / "extra").glob("*.html.gz"))
# A page that hides its body until a script shows it (the script never comes): the article is in the DOM.
HIDDEN_UNTIL_SCRIPT = b"<style>body { display: none !important; }</style>"


def article(name: str, hidden: bool = False) -> bytes:
    """A saved article page (tests/material/articles); `hidden`: its body hidden until a script that never runs."""
    page = gzip.decompress((ARTICLES_DIR / f"{name}.html.gz").read_bytes())
    if hidden:
        at = page.lower().find(b"</head>")
        page = page[:at] + HIDDEN_UNTIL_SCRIPT + page[at:] if at >= 0 else HIDDEN_UNTIL_SCRIPT + page
    return page


def routes() -> dict[str, Any]:
    table: dict[str, Any] = {"/watch/page.html": lambda q: _html(page(q.get("v", ["base"])[0]))}
    for name in ARTICLES:  # nothing they name beyond the page is fetched: the policy refuses it unsent
        for hidden in (False, True):
            table[f"/articles/{name}{'-hidden' if hidden else ''}.html"] = (lambda n, h: lambda q: (
                200, "text/html; charset=utf-8", article(n, h), {"Content-Security-Policy": PAGE_POLICY}))(name, hidden)
    for name in EXTRA_ARTICLES:
        table[f"/articles/extra/{name}.html"] = (lambda data: lambda q: (
            200, "text/html; charset=utf-8", data, {"Content-Security-Policy": PAGE_POLICY}))(
            gzip.decompress((ARTICLES_DIR / "extra" / f"{name}.html.gz").read_bytes()))
    return table
