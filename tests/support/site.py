"""A local HTTP site with pages made for the tests (loopback only, free port)."""

from __future__ import annotations

import functools
import gzip
import json
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.pages import annoyances as annoyance_pages
from tests.support.pages import consent as consent_pages
from tests.support.pages import controls as control_pages
from tests.support.pages import fidelity as fidelity_pages
from tests.support.pages import hiding as hiding_pages
from tests.support.pages import motion as motion_pages
from tests.support.pages import state as state_pages
from tests.support.pages import watch as watch_pages

# Top half red, bottom half blue, at any viewport size.
COLOURS = """<!DOCTYPE html><html><head><style>
html, body { margin: 0; height: 100%; }
.top { position: fixed; left: 0; top: 0; width: 100%; height: 50%; background: #ff0000; }
.bottom { position: fixed; left: 0; top: 50%; width: 100%; height: 50%; background: #0000ff; }
</style></head><body><div class="top"></div><div class="bottom"></div></body></html>"""

# Writes what the browser reports about its viewport into the DOM (read back with format=html).
VIEWPORT_PROBE = """<!DOCTYPE html><html><head><title>probe</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head><body><pre id="probe"></pre>
<script>
document.getElementById('probe').textContent = JSON.stringify({
  width: window.innerWidth, height: window.innerHeight, dpr: window.devicePixelRatio,
  touch: navigator.maxTouchPoints > 0, ua: navigator.userAgent,
  landscape: window.matchMedia('(orientation: landscape)').matches,
  mobile: /Mobile|Android|iPhone|iPad|Silk/.test(navigator.userAgent)
});
</script></body></html>"""

ARTICLE = """<!DOCTYPE html><html><head><title>Article</title></head><body>
<h1>Quarterly report</h1><p>Revenue grew by <strong>12%</strong> this quarter.</p>
<ul><li>First point</li><li>Second point</li></ul>
<p>Read <a href="https://example.com/more">more</a>.</p>
<script>document.body.insertAdjacentHTML('beforeend', '<p id="added">Added by script</p>');</script>
</body></html>"""

TALL = """<!DOCTYPE html><html><body style="margin:0">
<div style="height:3000px;background:linear-gradient(#ff0000,#0000ff)"></div></body></html>"""

# A request that completes 1.5 s after load: networkidle waits for it, load does not.
LATE_FETCH = """<!DOCTYPE html><html><body><div id="state">waiting</div><script>
window.addEventListener('load', () => setTimeout(() => {
  fetch('/slow?ms=300').then(r => r.text()).then(() => {
    document.getElementById('state').textContent = 'fetched';
  });
}, 200));
</script></body></html>"""

# Three requests 200 ms after load, each answered after 300 ms: networkidle2 (at most two in flight) waits for
# them too, as networkidle0 does (one late request alone would not hold networkidle2).
LATE_FETCHES = """<!DOCTYPE html><html><body><div id="state">waiting</div><script>
window.addEventListener('load', () => setTimeout(() => {
  Promise.all([0, 1, 2].map((n) => fetch(`/slow?ms=300&n=${n}`).then(r => r.text()))).then(() => {
    document.getElementById('state').textContent = 'fetched';
  });
}, 200));
</script></body></html>"""

# Three long-lived requests stay open: networkidle2 is reached, networkidle0 is not.
THREE_HANGING = """<!DOCTYPE html><html><body><div id="state">start</div><script>
window.addEventListener('load', () => {
  for (let i = 0; i < 2; i++) fetch('/slow?ms=20000');
  setTimeout(() => { document.getElementById('state').textContent = 'idle2'; }, 100);
});
</script></body></html>"""

# Turns green one second after load: a capture with delay=2 sees green, one without sees red.
LATE_GREEN = """<!DOCTYPE html><html><body style="margin:0;background:#ff0000"><script>
window.addEventListener('load', () => setTimeout(() => { document.body.style.background = '#00ff00'; }, 1000));
</script></body></html>"""

Handler = Callable[[dict[str, list[str]]], tuple[Any, ...]]


def _html(body: str) -> tuple[int, str, bytes]:
    return 200, "text/html; charset=utf-8", body.encode()


def _status(query: dict[str, list[str]]) -> tuple[int, str, bytes]:
    code = int(query.get("code", ["500"])[0])
    return code, "text/html", f"<html><body><h1>Status {code}</h1></body></html>".encode()


def _slow(query: dict[str, list[str]]) -> tuple[int, str, bytes]:
    time.sleep(int(query.get("ms", ["1000"])[0]) / 1000)
    return _html("<html><body>slow</body></html>")


# The scroll position is readable from any frame: red at row y of the page is y / 16 (0 at the top,
# 250 at 4000 px), blue its complement. Links for scroll_try_navigate.
GRADIENT = """<!DOCTYPE html><html><head><title>gradient</title><style>
html, body { margin: 0; }
#g { height: 4000px; background: linear-gradient(to bottom, rgb(0,0,255) 0px, rgb(250,0,5) 4000px); }
#mark { position: absolute; top: 2400px; height: 10px; width: 10px; }
a { position: absolute; top: 10px; left: 10px; font-size: 1px; }
</style></head><body><div id="g"></div><div id="mark"></div>
<a href="/colours.html?from=gradient">Pricing</a></body></html>"""

# The whole page fades from red to blue over 2 s after load: a real-time recording shows both.
FADING = """<!DOCTYPE html><html><head><style>
html, body { margin: 0; height: 100%; }
body { animation: fade 2s linear forwards; background: rgb(255,0,0); }
@keyframes fade { from { background: rgb(255,0,0); } to { background: rgb(0,0,255); } }
</style></head><body></body></html>"""

def _loop(query: dict[str, list[str]]) -> tuple[int, str, bytes, dict[str, str]]:
    """Redirects to itself forever."""
    return 302, "text/plain", b"", {"Location": f"/loop?n={int(query.get('n', ['0'])[0]) + 1}"}


@functools.cache
def _huge() -> bytes:
    """100 MB of text in one page (made on first request)."""
    return b"<html><body>" + b"x" * (100 * 1024 * 1024) + b"</body></html>"


MEMORY_BOMB = """<html><body>bomb<script>
const hoard = []; setInterval(() => { for (let i = 0; i < 50; i++) hoard.push(new Array(1e6).fill(i)); }, 10);
</script></body></html>"""
# 120 MB of JavaScript arrays (15 of a million doubles), kept by the page until it is unloaded.
BLOAT = """<html><body>bloat<script>
window.hoard = Array.from({length: 15}, (_, i) => new Array(1e6).fill(i + 0.5));
</script></body></html>"""
NEVER_LOADS = """<html><body>loading forever<img src="/slow?ms=600000"></body></html>"""

# Web components: an open shadow root with a slot, a closed one, a nested one, and shadow text that is not
# rendered (include_shadow_dom).
SHADOW = """<!DOCTYPE html><html lang="en"><head><title>shadow</title></head><body>
<p>Light text before.</p>
<open-card><span>Slotted light child</span></open-card>
<closed-card></closed-card>
<script>
// The texts are written with a '|' the page takes out: the script's own source must not hold them.
const text = (html) => html.replaceAll('|', '');
customElements.define('open-card', class extends HTMLElement {
  constructor() { super(); const root = this.attachShadow({ mode: 'open' });
    root.innerHTML = text('<h2>Op|en shadow heading</h2><slot></slot><p style="display:none">Hid|den shadow text</p>'
      + '<inner-card></inner-card>'); }
});
customElements.define('inner-card', class extends HTMLElement {
  constructor() { super(); this.attachShadow({ mode: 'open' }).innerHTML = text('<em>Nes|ted shadow text</em>'); }
});
customElements.define('closed-card', class extends HTMLElement {
  constructor() { super(); this.attachShadow({ mode: 'closed' }).innerHTML = text('<p>Clo|sed shadow text</p>'); }
});
</script></body></html>"""

# The page the SDK checks capture (tests/integration/test_sdks.py): a box to select, a button to click, an
# element that comes late, Open Graph properties.
SDK_PAGE = """<!DOCTYPE html><html lang="en"><head><title>SDK page</title>
<meta property="og:title" content="SDK page"><style>
body { margin: 0; font-family: sans-serif; }
#box { width: 120px; height: 60px; background: #ff0000; }
.tall { height: 1500px; background: linear-gradient(#ffffff, #0000ff); }
</style></head><body><div id="box"></div><button id="go" onclick="document.title = 'clicked'">Go</button>
<p>probe text</p><div class="tall"></div><p id="end">The end</p>
<script>setTimeout(() => document.body.insertAdjacentHTML('beforeend', '<p id="late">late</p>'), 300);</script>
</body></html>"""

# What the page's console sees (metadata_console, fail_on_console_errors): three messages of its own, an
# image that answers 404 (Chromium's own console entry), and an exception nobody catches.
CONSOLE_PAGE = """<!DOCTYPE html><html><body><p>console</p>
<img src="/status?code=404" alt="">
<script>
console.log('hello', 42);
console.warn('careful');
console.error('broken widget');
setTimeout(() => { throw new TypeError('late failure'); }, 0);
</script></body></html>"""
# An outline for the accessibility tree: landmarks, headings of two levels, links, a control, an image's text,
# and text that is hidden (left out of the tree).
OUTLINE = """<!DOCTYPE html><html lang="en"><head><title>outline</title></head><body>
<header><nav><a href="/pricing">Pricing</a> <a href="/about">About us</a></nav></header>
<main><h1>Quarterly report</h1><p>Revenue grew.</p><section id="details"><h2>Details</h2>
<button>Download</button><img alt="A bar chart" src="/status?code=404"></section>
<div hidden>secret draft</div></main></body></html>"""
# Traffic for har=true: a style sheet, a script the HTTP cache keeps, an image that answers 404, a redirect, and
# a fetch of /echo (which answers the request's headers); 20 KB of comment make the document the largest body.
TRAFFIC = """<!DOCTYPE html><html><head><title>traffic</title><!-- """ + "padding " * 2500 + """-->
<link rel="stylesheet" href="/evidence/style.css">
<script src="/state/cached.js"></script></head><body><p>traffic</p>
<img src="/status?code=404" alt=""><img src="/redirect?to=/evidence/style.css%3Fagain" alt="">
<pre id="echo"></pre><script>
fetch('/echo?from=page&n=1').then(r => r.text()).then(t => { document.getElementById('echo').textContent = t; });
</script></body></html>"""
# Pages for metadata_quality's flags, each made to raise one (and one of each kind that must not).
QUALITY_PAGES = {
    "blank": "<!DOCTYPE html><html><body style='background:#fff'></body></html>",
    "captcha-wall": """<!DOCTYPE html><html><head><title>Security check</title></head><body><p>Please confirm
        you are human.</p><div class="g-recaptcha" style="width:304px;height:78px;background:#f9f9f9"></div>
        </body></html>""",
    "contact-form": """<!DOCTYPE html><html><head><title>Contact us</title></head><body><h1>Contact us</h1>"""
        + "<p>We answer every message within two working days; tell us what you need.</p>" * 30
        + """<form><textarea></textarea><div class="g-recaptcha" style="width:304px;height:78px"></div></form>
        </body></html>""",
    "datadome": """<!DOCTYPE html><html><head><title>example.com</title></head><body style="margin:0">
        <iframe src="https://geo.captcha-delivery.com/captcha/?initialCid=x" width="100%" height="500"></iframe>
        </body></html>""",
    "consent-wall": """<!DOCTYPE html><html><head><title>news</title><style>html { overflow: hidden; }
        #cmp { position: fixed; inset: 0; background: rgba(0,0,0,.6); display: flex; align-items: center;
               justify-content: center; } #cmp div { background: #fff; padding: 2em; width: 30em; }</style></head>
        <body><h1>Today's news</h1><p>The article.</p><div id="cmp" role="dialog" aria-modal="true"><div>
        <p>We and our partners use cookies to personalise ads and measure audiences. You can accept or refuse.</p>
        <button>Accept all</button> <button>Reject all</button></div></div></body></html>""",
    "consent-bar": """<!DOCTYPE html><html><head><title>news</title></head><body><h1>Today's news</h1>
        <p>The article.</p><div style="position:fixed;bottom:0;left:0;right:0;background:#eee;padding:8px">
        We use cookies for analytics and marketing. <button>Accept</button> <button>Reject</button></div>
        </body></html>""",
    "pending": """<!DOCTYPE html><html><body><p>loading more</p><script>
        window.addEventListener('load', () => fetch('/slow?ms=15000'));</script></body></html>""",
}
# Red until its script declares itself ready 600 ms after load, then green (wait_for_expression).
READY_LATE = """<!DOCTYPE html><html><body style="margin:0;background:#ff0000"><script>
window.addEventListener('load', () => setTimeout(() => {
  document.body.style.background = '#00ff00'; window.app = {ready: true};
}, 600));
</script></body></html>"""


def _images(query: dict[str, list[str]]) -> tuple[int, str, bytes]:
    """A page showing an image for each `src` (resource failures)."""
    images = "".join(f'<img src="{source}" alt="">' for source in query.get("src", []))
    return _html(f"<!DOCTYPE html><html><body><p>images</p>{images}</body></html>")


ROUTES: dict[str, Handler] = {
    "/evidence/console.html": lambda q: _html(CONSOLE_PAGE),
    "/evidence/ready-late.html": lambda q: _html(READY_LATE),
    "/evidence/images.html": _images,
    "/evidence/outline.html": lambda q: _html(OUTLINE),
    "/evidence/traffic.html": lambda q: _html(TRAFFIC),
    # Fetches /echo-binary: the request's headers echoed back as application/octet-stream (a HAR body in base64).
    "/evidence/binary-echo.html": lambda q: _html(
        "<p>binary echo</p><script>fetch('/echo-binary').then(r => r.arrayBuffer()).then(b => {"
        "const done = document.createElement('p'); done.id = 'echoed'; done.textContent = b.byteLength;"
        "document.body.append(done); });</script>"),
    "/echo-binary": lambda q: (200, "application/octet-stream", b""),
    **{f"/quality/{name}.html": functools.partial(lambda page, q: _html(page), page)
       for name, page in QUALITY_PAGES.items()},
    **{f"/challenge/{path.name.removesuffix('.html.gz')}.html": (
        lambda data: lambda q: (403, "text/html; charset=utf-8", data))(gzip.decompress(path.read_bytes()))
       for path in (Path(__file__).parents[1] / "material" / "bot_challenges").glob("*.html.gz")},
    "/evidence/style.css": lambda q: (200, "text/css", b"body { color: #123456; }"),
    "/shadow.html": lambda q: _html(SHADOW),
    "/sdk.html": lambda q: _html(SDK_PAGE),
    "/loop": _loop,
    "/huge.html": lambda q: (200, "text/html", _huge()),
    "/memory-bomb.html": lambda q: _html(MEMORY_BOMB),
    "/bloat.html": lambda q: _html(BLOAT),
    "/never-loads.html": lambda q: _html(NEVER_LOADS),
    "/gradient.html": lambda q: _html(GRADIENT),
    "/fading.html": lambda q: _html(FADING),
    "/colours.html": lambda q: _html(COLOURS),
    "/probe.html": lambda q: _html(VIEWPORT_PROBE),
    "/article.html": lambda q: _html(ARTICLE),
    "/tall.html": lambda q: _html(TALL),
    "/late-fetch.html": lambda q: _html(LATE_FETCH),
    "/late-fetches.html": lambda q: _html(LATE_FETCHES),
    "/three-hanging.html": lambda q: _html(THREE_HANGING),
    "/late-green.html": lambda q: _html(LATE_GREEN),
    "/status": _status,
    "/basic": lambda q: _html("<title>signed in</title><p>signed in</p>"),
    # The page's own script signs in with HTTP Basic (XMLHttpRequest.open with a user and password).
    "/xhr-credentials.html": lambda q: _html(
        "<pre id='status'></pre><script>const xhr = new XMLHttpRequest();"
        "xhr.open('GET', '/basic', false, 'script-user', 'script-pass'); xhr.send();"
        "document.getElementById('status').textContent = xhr.status;</script>"),
    "/redirect": lambda q: (302, "text/plain", b"", {"Location": q["to"][0]}),
    "/slow": _slow,
}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        parts = urlsplit(self.path)
        self.server.log.append((parts.path, {k.lower(): v for k, v in self.headers.items()}))
        self.server.queries.append((parts.path, parts.query))
        route = self.server.routes.get(parts.path)
        result = route(parse_qs(parts.query)) if route else (404, "text/plain", b"nope")
        status, content_type, body = result[:3]
        extra = result[3] if len(result) > 3 else {}
        if parts.path in ("/echo", "/echo-binary"):  # what this request carried, for the request-context tests
            body = json.dumps({"headers": self.server.log[-1][1]}).encode()
        if parts.path == "/basic" and "authorization" not in self.server.log[-1][1]:  # HTTP Basic wanted
            status, body, extra = 401, b"credentials, please", {"WWW-Authenticate": 'Basic realm="test"'}
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    log: list[tuple[str, dict[str, str]]]  # (path, headers) of each request
    queries: list[tuple[str, str]]  # (path, query string) of each request
    routes: dict[str, Handler]


class Site:
    """The test site on 127.0.0.1 and a free port; HTTPS when given a TLS context."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None) -> None:
        self.host = host
        self.scheme = "https" if tls else "http"
        self.server = _Server((host, port), _Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.server.daemon_threads = True
        self.server.log = []
        self.server.queries = []
        # This site's own table: some pages name the site's port.
        self.server.routes = {**ROUTES, **control_pages.pages(self.port), **annoyance_pages.routes(self.port),
                              **fidelity_pages.routes(), **consent_pages.routes(), **motion_pages.routes(),
                              **watch_pages.routes(), **hiding_pages.routes(), **state_pages.routes()}
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def base(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path

    def requests_to(self, path: str) -> list[dict[str, str]]:
        """Headers of every request this site received for `path`, oldest first."""
        return [headers for seen, headers in list(self.server.log) if seen == path]

    def queries_to(self, path: str) -> list[str]:
        """Query strings of every request this site received for `path`, oldest first."""
        return [query for seen, query in list(self.server.queries) if seen == path]

    def __enter__(self) -> Site:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
