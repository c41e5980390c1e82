"""Pages that hide themselves while they load, the way A/B-testing tools' anti-flicker snippets do,
and a page that is one colour although it has text.

`/hiding/page.html?kind=<kind>&ms=<ms>&height=<px>`: rows of coloured blocks with their y written on them and a
picture every 1,000 px, `height` px in all, hidden from its first byte until its own timer ends `ms` ms after
the script runs (the experiment's script never comes):
- `optimize`: Google Optimize's snippet: `async-hide` on `<html>`, `opacity: 0 !important`;
- `body`: VWO's and Adobe Target's: a style element giving `<body>` `opacity: 0 !important`, then removed;
- `visibility`: Kameleoon's: `* { visibility: hidden !important }`, then removed;
- `fade`: the class removed starts a 300 ms fade of `<html>` from 0 to 1.
`/hiding/white-on-white.html`: text drawn in the page's own background colour: one colour, with text.
`/hiding/entrance.html`: a page that shows itself by degrees: a fixed header fading in over 800 ms at load
(ENTRANCE_HEADER, as a saved NYT page's does in 300 ms), a box fading in over 20 s and a spinner turning for ever.
"""

from __future__ import annotations

from typing import Any

_HIDE = {
    "optimize": ("<style>.async-hide { opacity: 0 !important }</style>",
                 "document.documentElement.className += ' async-hide';",
                 "const root = document.documentElement;"
                 "root.className = root.className.replace(/ ?async-hide/, '');"),
    "body": ("", "const hide = document.createElement('style'); hide.id = 'hide';"
             "hide.textContent = 'body { opacity: 0 !important }'; document.head.appendChild(hide);",
             "document.getElementById('hide').remove();"),
    "visibility": ("", "const hide = document.createElement('style'); hide.id = 'hide';"
                   "hide.textContent = '* { visibility: hidden !important }'; document.head.appendChild(hide);",
                   "document.getElementById('hide').remove();"),
    "fade": ("<style>html { transition: opacity 300ms linear } .async-hide { opacity: 0 }</style>",
             "document.documentElement.className += ' async-hide';",
             "document.documentElement.className = '';"),
}
PICTURE = ('data:image/svg+xml,<svg xmlns="http://www.w3.org/2000/svg" width="200" height="80">'
           '<rect width="200" height="80" fill="%23a020f0"/></svg>')


def page(query: dict[str, list[str]]) -> str:
    kind = query.get("kind", ["optimize"])[0]
    ms = int(query.get("ms", ["1500"])[0])
    height = int(query.get("height", ["3000"])[0])
    style, hide, show = _HIDE[kind]
    rows = "".join(
        f'<div style="height:100px;background:hsl({y // 100 * 37 % 360},70%,60%);font:20px sans-serif">row {y}'
        + (f' <img src="{PICTURE}" alt="" width="200" height="80">' if y % 1000 == 0 else "") + "</div>"
        for y in range(0, height, 100))
    return (f"<!DOCTYPE html><html><head><title>hiding {kind}</title>{style}"
            f"<script>{hide} setTimeout(() => {{ {show} }}, {ms});</script></head>"
            f'<body style="margin:0">{rows}</body></html>')


WHITE_ON_WHITE = """<!DOCTYPE html><html><head><title>white on white</title></head>
<body style="margin:0;background:#fff;color:#fff;font:24px sans-serif"><h1>Nothing to see</h1>
<p>Every word of this page is drawn in its background's colour.</p></body></html>"""


ENTRANCE_HEADER = (50, 104, 145)  # its colour once faded in, over white
ENTRANCE = """<!DOCTYPE html><html><head><title>entrance</title><style>
@keyframes in { from { opacity: 0 } to { opacity: 1 } }
@keyframes turn { to { transform: rotate(360deg) } }
header { position: fixed; top: 0; left: 0; right: 0; height: 80px; background: #326891;
         animation: in 800ms ease-out; }
#slow { position: absolute; top: 200px; left: 0; width: 200px; height: 200px; background: #000;
        animation: in 20s linear; }
#spinner { position: absolute; top: 200px; left: 400px; width: 50px; height: 50px; background: #c00;
           animation: turn 1s linear infinite; }
</style></head><body style="margin:0;height:3000px"><header></header><div id="slow"></div><div id="spinner"></div>
</body></html>"""


def routes() -> dict[str, Any]:
    return {
        "/hiding/page.html": lambda q: (200, "text/html; charset=utf-8", page(q).encode()),
        "/hiding/white-on-white.html": lambda q: (200, "text/html; charset=utf-8", WHITE_ON_WHITE.encode()),
        "/hiding/entrance.html": lambda q: (200, "text/html; charset=utf-8", ENTRANCE.encode()),
    }
