"""Pages of the fidelity suite: a tall page whose rows encode their own y, and saved copies of
real pages (tests/material/real_pages, see its README for where they come from and their licence).

The tall page holds every full-page pitfall at known places, so a capture can be checked by reading it:
- rows of ROW px, each filled with `row_colour(y)` at x >= 600 (and its y written as text at the left);
- a fixed header (red, top) and a fixed footer (blue, bottom of the viewport);
- two `100vh` sections (yellow): at the top and in the middle;
- sticky bars (green, `top: 50px`) heading sections at several depths: each spans STICKY_SECTION px;
- lazy images (`loading=lazy`, magenta SVGs) on the rows at multiples of LAZY_EVERY px.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

ROW = 100
STICKY_SECTION = 1500
LAZY_EVERY = 1000
HEADER, FOOTER, BAR = 40, 40, 30
REAL_PAGES_DIR = Path(__file__).parents[2] / "material" / "real_pages"
REAL_PAGES = sorted(path.name.removesuffix(".html.gz") for path in REAL_PAGES_DIR.glob("*.html.gz"))
# Saved pages name their images, fonts and scripts on the real sites; none of that is fetched (nothing
# leaves loopback), the same for the service and for the plain browser: the policy refuses it unsent.
REAL_PAGE_POLICY = "default-src 'self' 'unsafe-inline' data:"

RED, BLUE, YELLOW, GREEN, MAGENTA = (255, 0, 0), (0, 0, 255), (255, 255, 0), (0, 255, 0), (255, 0, 255)


def row_colour(y: int) -> tuple[int, int, int]:
    """The colour of the row at document y: distinct for every row of a 76,800 px page."""
    index = y // ROW
    return index % 256, 40 + (index // 256) * 60, 128


def layout(height: int, viewport_height: int) -> list[tuple[str, int]]:
    """What the tall page holds, top to bottom, as (kind, document y in CSS px): "vh" sections
    (viewport_height tall, then a spacer to the next row), "sticky" sections (STICKY_SECTION tall, rows
    under a sticky bar), "lazy" rows (a lazy image) and plain "row"s."""
    blocks = []
    y = 0
    middle_due = True
    while y < height:
        if y == 0 or (middle_due and y >= height // 2):
            blocks.append(("vh", y))
            middle_due = y == 0
            y = -(-(y + viewport_height) // ROW) * ROW
        elif (y - viewport_height) % (3 * STICKY_SECTION) < ROW and y + STICKY_SECTION <= height - ROW:
            blocks.append(("sticky", y))
            y += STICKY_SECTION
        else:
            blocks.append(("lazy" if y % LAZY_EVERY == 0 else "row", y))
            y += ROW
    return blocks


def tall(query: dict[str, list[str]]) -> str:
    height = int(query["height"][0])
    viewport_height = int(query["vh"][0])
    wide = int(query.get("wide", ["0"])[0])  # a page wider than its viewport: a bar this wide at the bottom
    parts = [f'<div style="position:absolute;left:0;top:{height - 60}px;width:{wide}px;height:20px;'
             f'background:rgb{MAGENTA}"></div>'] if wide else []
    for kind, y in layout(height, viewport_height):
        if kind == "vh":
            gap = -(-(y + viewport_height) // ROW) * ROW - (y + viewport_height)
            parts.append(f'<section class="vh"></section><div style="height:{gap}px"></div>')
        elif kind == "sticky":
            rows = "".join(_row(y + offset) for offset in range(0, STICKY_SECTION, ROW))
            parts.append(f'<section class="sticky-section"><div class="bar"></div>{rows}</section>')
        else:
            parts.append(_row(y, lazy=kind == "lazy"))
    return f"""<!DOCTYPE html><html><head><title>tall {height}</title><style>
html, body {{ margin: 0; font: 16px/20px sans-serif; }}
.row {{ position: relative; height: {ROW}px; }}
.row span {{ position: absolute; left: 10px; top: 40px; }}
.fill {{ position: absolute; left: 600px; right: 0; top: 0; bottom: 0; }}
.vh {{ display: block; height: 100vh; background: rgb{YELLOW}; }}
.sticky-section {{ position: relative; }}
.bar {{ position: sticky; top: 50px; height: {BAR}px; width: 200px; margin-left: 300px; margin-bottom: -{BAR}px;
        background: rgb{GREEN}; z-index: 1; }}
.lazy {{ position: absolute; left: 250px; top: 10px; width: 80px; height: 80px; }}
#header {{ position: fixed; top: 0; left: 0; width: 200px; height: {HEADER}px; background: rgb{RED}; z-index: 2; }}
#footer {{ position: fixed; bottom: 0; left: 0; width: 200px; height: {FOOTER}px; background: rgb{BLUE}; z-index: 2; }}
</style></head><body><div id="header"></div><div id="footer"></div>{"".join(parts)}</body></html>"""


def _row(y: int, lazy: bool = False) -> str:
    image = f'<img class="lazy" loading="lazy" src="/fidelity/tile.svg?y={y}" alt="">' if lazy else ""
    return (f'<div class="row"><span>y = {y}</span>{image}'
            f'<div class="fill" style="background:rgb{row_colour(y)}"></div></div>')


TILE = (f'<svg xmlns="http://www.w3.org/2000/svg" width="80" height="80">'
        f'<rect width="80" height="80" fill="rgb{MAGENTA}"/></svg>').encode()


# Writes every signal a site reads to tell a phone from a desktop, and a person from a robot, into #signals
# (read back with format=html), with the headers a request of the page carries.
SIGNALS = """<!DOCTYPE html><html><head><title>signals</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head><body><pre id="signals"></pre><script>
(async () => {
  const data = navigator.userAgentData;
  const signals = {
    userAgent: navigator.userAgent, webdriver: navigator.webdriver, maxTouchPoints: navigator.maxTouchPoints,
    ontouchstart: 'ontouchstart' in window, platform: navigator.platform,
    screen: [screen.width, screen.height], availScreen: [screen.availWidth, screen.availHeight],
    inner: [innerWidth, innerHeight], dpr: devicePixelRatio,
    orientation: screen.orientation ? [screen.orientation.type, screen.orientation.angle] : null,
    coarse: matchMedia('(pointer: coarse)').matches, hover: matchMedia('(hover: hover)').matches,
    landscape: matchMedia('(orientation: landscape)').matches,
    userAgentData: data ? {brands: data.brands, mobile: data.mobile, platform: data.platform,
      high: await data.getHighEntropyValues(['architecture', 'bitness', 'model', 'platformVersion',
                                             'fullVersionList', 'formFactors', 'wow64'])} : null,
    headers: (await (await fetch('/echo')).json()).headers,  // what a request of the page carries
  };
  document.getElementById('signals').textContent = JSON.stringify(signals);
})();
</script></body></html>"""


# A page laid out with tables, as old forums and news aggregators are: an outer table for the frame, a
# nested one per story with paragraphs in its cells; and one real data table that must stay a table.
TABLE_LAYOUT = """<!DOCTYPE html><html><head><title>tables</title></head><body>
<table width="85%" cellpadding="0" cellspacing="0"><tr><td><table><tr><td><b>Site News</b></td>
<td>new | past | comments</td></tr></table></td></tr><tr><td><table>""" + "".join(
    f"""<tr><td class="rank">{i}.</td><td><p><a href="/story/{i}">Story number {i} about tables</a></p>
<p>Story {i} has a paragraph of its own that reads as text, not as a table cell.</p></td></tr>"""
    for i in range(1, 41)) + """</table></td></tr></table>
<table><tr><th>Year</th><th>Stories</th></tr><tr><td>2025</td><td>40</td></tr></table></body></html>"""

# A page whose script writes script source as text into hidden places, next to what is seen.
HIDDEN_TEXT = """<!DOCTYPE html><html><head><title>hidden</title></head><body>
<h1>What people see</h1><p>A visible paragraph.</p>
<div id="stash" style="display:none"></div><div id="ghost" style="visibility:hidden">ghost text
<span style="visibility:visible">shown inside a hidden box</span></div>
<details><summary>More</summary><p>folded text</p></details>
<div style="display:contents"><p>contents child</p></div>
<script>
document.getElementById('stash').textContent = '<script src="https://cdn.example/tracker.js"></' + 'script>';
document.write('<div hidden>&lt;script&gt;var hiddenTracker = 1;&lt;/script&gt;</div>');
</script></body></html>"""


# Each generic family of CSS, in scripts a font may lack (then fontconfig's fallback shows too).
GENERIC_FAMILIES = ["serif", "sans-serif", "monospace", "monospace, monospace", "cursive", "fantasy", "system-ui",
                    "emoji"]
SAMPLES = {"en": "The quick brown fox 0O1lI {}", "ru": "Съешь же ещё этих булок", "el": "Γαζέες καὶ μυρτιὲς",
           "ar": "نص عربي قصير", "hi": "हिंदी का पाठ", "ja": "日本語の文章", "ko": "한국어 문장"}
GENERIC_FONTS = ("<!DOCTYPE html><html><head><title>generic families</title></head><body>"
                 + "".join(f"<p lang='{lang}' style='font-family:{family}'>{text.format(family)} 🦊</p>"
                           for family in GENERIC_FAMILIES for lang, text in SAMPLES.items())
                 + "<pre>def monospace(x):\n    return x  # pre</pre></body></html>")
# 17,085.5 CSS pixels of blocks, then twenty monospace lines (whose face sets their height).
FRACTIONAL_HEIGHT = ("<!DOCTYPE html><html><body style='margin:0'>"
                     + "".join(f"<div style='height:1000.25px;background:hsl({n * 20},50%,60%)'></div>"
                               for n in range(17))
                     + "<pre style='margin:0;height:81.25px;overflow:hidden'>code\ncode</pre>"
                     + "<p style='font-family:monospace, monospace;margin:0'>" + "line<br>" * 20 + "</p>"
                     + "</body></html>")


def real_page(name: str) -> bytes:
    return gzip.decompress((REAL_PAGES_DIR / f"{name}.html.gz").read_bytes())


def routes() -> dict[str, Any]:
    table: dict[str, Any] = {
        "/fidelity/tall.html": lambda q: (200, "text/html; charset=utf-8", tall(q).encode()),
        "/fidelity/tile.svg": lambda q: (200, "image/svg+xml", TILE),
        "/fidelity/table-layout.html": lambda q: (200, "text/html; charset=utf-8", TABLE_LAYOUT.encode()),
        "/fidelity/hidden-text.html": lambda q: (200, "text/html; charset=utf-8", HIDDEN_TEXT.encode()),
        "/fidelity/generic-fonts.html": lambda q: (200, "text/html; charset=utf-8", GENERIC_FONTS.encode()),
        "/fidelity/fractional-height.html": lambda q: (200, "text/html; charset=utf-8", FRACTIONAL_HEIGHT.encode()),
        "/fidelity/signals.html": lambda q: (200, "text/html; charset=utf-8", SIGNALS.encode(),
                                             {"Accept-CH": "Sec-CH-UA-Platform-Version, Sec-CH-UA-Model, "
                                              "Sec-CH-UA-Full-Version-List, Sec-CH-UA-Arch"}),
    }
    for name in REAL_PAGES:
        table[f"/real/{name}.html"] = (lambda n: lambda q: (200, "text/html; charset=utf-8", real_page(n),
                                                            {"Content-Security-Policy": REAL_PAGE_POLICY}))(name)
    return table
